"""The fluid model alone: max-min fair rates, completions, bookkeeping."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from purlin.sim.fluid import FluidModel


def test_two_flows_on_one_link_each_get_half():
    m = FluidModel([100.0])
    a = m.add([0], [1.0], math.inf, 1000.0)
    b = m.add([0], [1.0], math.inf, 1000.0)
    m.recompute()
    assert m.rate_of(a) == m.rate_of(b) == 50.0
    assert m.next_finish_us() == pytest.approx(20.0)


def test_capped_flow_leaves_spare_capacity_max_min_not_proportional():
    m = FluidModel([100.0])
    slow = m.add([0], [1.0], 20.0, 1000.0)   # e.g. one CTA's own rate
    fast = m.add([0], [1.0], math.inf, 1000.0)
    m.recompute()
    assert m.rate_of(slow) == pytest.approx(20.0)
    assert m.rate_of(fast) == pytest.approx(80.0)  # not 50: max-min hands it the rest


def test_classic_two_bottlenecks():
    # r0 = 10, r1 = 20; f0 on r0, f1 on r0 and r1, f2 on r1
    m = FluidModel([10.0, 20.0])
    f0 = m.add([0], [1.0], math.inf, 1.0)
    f1 = m.add([0, 1], [1.0, 1.0], math.inf, 1.0)
    f2 = m.add([1], [1.0], math.inf, 1.0)
    m.recompute()
    assert (m.rate_of(f0), m.rate_of(f1), m.rate_of(f2)) == pytest.approx((5.0, 5.0, 15.0))


def test_weights_count_capacity_per_payload_byte():
    m = FluidModel([100.0])
    local_copy = m.add([0], [2.0], math.inf, 100.0)  # reads and writes one HBM
    m.recompute()
    assert m.rate_of(local_copy) == pytest.approx(50.0)


def test_completion_frees_capacity_and_charges_bytes():
    m = FluidModel([100.0])
    a = m.add([0], [1.0], math.inf, 500.0)
    b = m.add([0], [1.0], math.inf, 1500.0)
    m.recompute()
    t = m.next_finish_us()
    assert t == pytest.approx(10.0)
    m.advance(t)
    assert m.pop_finished() == [a]
    m.recompute()
    assert m.rate_of(b) == pytest.approx(100.0)
    m.advance(m.next_finish_us())
    assert m.pop_finished() == [b]
    assert m.now_us == pytest.approx(20.0)
    assert m.bytes_on[0] == pytest.approx(2000.0)
    assert m.active_count == 0 and m.next_finish_us() == math.inf


def test_grows_slots_and_fanout():
    m = FluidModel([1000.0] * 40)
    slots = [m.add([i % 40], [1.0], math.inf, 10.0) for i in range(200)]
    wide = m.add(list(range(40)), [1.0] * 40, math.inf, 10.0)
    m.recompute()
    rates = np.array([m.rate_of(s) for s in slots + [wide]])
    assert (rates > 0).all()
    # each resource: 5 narrow flows + the wide one share 1000 equally
    assert rates == pytest.approx(1000.0 / 6)


def test_rejects_bad_capacities():
    with pytest.raises(ValueError):
        FluidModel([100.0, 0.0])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(0, 5), min_size=1, max_size=3, unique=True),
                          st.floats(1.0, 80.0), st.floats(10.0, 5000.0), st.floats(0.0, 3.0)),
                min_size=1, max_size=25))
def test_shortcut_rates_equal_a_full_recompute(flows):
    """Flows start at random times and run to completion; at every step the rates the
    model keeps (shortcut or not) equal a fresh progressive filling of the same flows."""
    caps = [100.0, 60.0, 150.0, 40.0, 90.0, 120.0]
    m = FluidModel(caps)
    pending = sorted(flows, key=lambda f: f[3])
    while pending or m.active_count:
        t_next = m.next_finish_us()
        if pending and pending[0][3] <= t_next:
            res, cap, nbytes, t = pending.pop(0)
            m.advance(max(t, m.now_us))
            m.add(res, [1.0] * len(res), cap, nbytes)
        else:
            m.advance(t_next)
            m.pop_finished()
        m.recompute()
        fresh = FluidModel(caps)
        for s in np.flatnonzero(m.active):
            k = int((m.idx[s] < len(caps)).sum())
            fresh.add(m.idx[s, :k].tolist(), m.w[s, :k].tolist(), m.cap[s], 1.0)
        fresh.recompute()
        got = sorted(m.rate[np.flatnonzero(m.active)])
        want = sorted(fresh.rate[np.flatnonzero(fresh.active)])
        assert np.allclose(got, want, rtol=1e-9, atol=1e-9)


def test_capped_flows_on_spare_capacity_take_the_shortcut():
    m = FluidModel([100.0])
    a = m.add([0], [1.0], cap=30.0, nbytes=300.0)
    m.recompute()                                  # fits in the idle link: shortcut
    b = m.add([0], [1.0], cap=30.0, nbytes=600.0)
    m.recompute()                                  # fits beside a: shortcut
    assert m.shortcuts == 2 and (m.rate_of(a), m.rate_of(b)) == (30.0, 30.0)
    c = m.add([0], [1.0], cap=50.0, nbytes=100.0)
    m.recompute()                                  # would saturate the link: full recompute
    assert m.shortcuts == 2
    assert (m.rate_of(a), m.rate_of(b), m.rate_of(c)) == pytest.approx((30.0, 30.0, 40.0))


def test_soft_knee_slows_flows_as_demand_nears_capacity():
    """Demand equal to capacity delivers 2^(-1/k) of it; demand far below, almost all of
    the caps; far above, almost the capacity; a hard resource (knee 0) is unchanged."""
    def total(caps, knee):
        m = FluidModel([100.0], [knee])
        slots = [m.add([0], [1.0], cap=c, nbytes=1e6) for c in caps]
        m.recompute()
        return sum(m.rate_of(s) for s in slots)
    assert total([50.0, 50.0], 4.0) == pytest.approx(100.0 * 2 ** -0.25)
    assert total([5.0, 5.0], 4.0) == pytest.approx((10.0 ** -4 + 100.0 ** -4) ** -0.25)
    assert total([5.0, 5.0], 4.0) > 9.99
    assert total([500.0, 500.0], 4.0) == pytest.approx((1000.0 ** -4 + 100.0 ** -4) ** -0.25)
    assert total([50.0, 50.0], 0.0) == pytest.approx(100.0)


def test_soft_knee_times_the_finish():
    m = FluidModel([100.0], [4.0])
    a = m.add([0], [1.0], cap=100.0, nbytes=1000.0)
    m.recompute()
    assert m.rate_of(a) == pytest.approx(100.0 * 2 ** -0.25)
    assert m.next_finish_us() == pytest.approx(1000.0 / (100.0 * 2 ** -0.25))


def test_knee_must_be_a_finite_exponent_per_resource():
    with pytest.raises(ValueError, match="knee"):
        FluidModel([100.0, 50.0], [4.0])
    with pytest.raises(ValueError, match="knee"):
        FluidModel([100.0], [-1.0])
