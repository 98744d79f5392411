"""The fluid model alone: max-min fair rates, completions, bookkeeping."""
import math

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from purlin.sim import fluid
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


# ---- the vectorized solver is progressive filling ----------------------------------------
from purlin.sim.maxmin import fill, kept_below, progressive  # noqa: E402

_FLOWS = st.lists(st.tuples(st.lists(st.integers(0, 5), min_size=1, max_size=3, unique=True),
                            st.lists(st.sampled_from([1.0, 2.0, 0.5]), min_size=3, max_size=3),
                            st.one_of(st.just(math.inf), st.floats(1.0, 80.0))),
                  min_size=1, max_size=30)
_CAPS = np.array([100.0, 60.0, 150.0, 40.0, 90.0, 120.0, np.inf])


def _arrays(flows):
    idx = np.full((len(flows), 3), 6)
    w = np.zeros((len(flows), 3))
    for j, (res, wts, _) in enumerate(flows):
        idx[j, :len(res)] = res
        w[j, :len(res)] = wts[:len(res)]
    return idx, w, np.array([c for _, _, c in flows])


@settings(max_examples=150, deadline=None)
@given(_FLOWS)
def test_local_bottleneck_rounds_equal_progressive_filling(flows):
    idx, w, cap = _arrays(flows)
    got, rem = fill(idx, w, cap, _CAPS, 6)
    want, rem0 = progressive(idx, w, cap, _CAPS, 6)
    assert np.allclose(got, want, rtol=1e-9, atol=1e-9)
    assert np.allclose(rem[:6], rem0[:6], rtol=1e-9, atol=1e-7)


@settings(max_examples=150, deadline=None)
@given(_FLOWS, st.data())
def test_flows_below_the_changed_level_keep_their_rates(flows, data):
    """Remove some flows and add others: solving only the flows above the level at which
    the change can matter gives the fresh solution."""
    idx, w, cap = _arrays(flows)
    old, _ = progressive(idx, w, cap, _CAPS, 6)
    gone = data.draw(st.lists(st.integers(0, len(flows) - 1), unique=True, max_size=3))
    stay = np.setdiff1d(np.arange(len(flows)), gone)
    extra = data.draw(_FLOWS.filter(lambda f: len(f) <= 3))
    i2, w2, c2 = _arrays(extra)
    idx_n = np.vstack([idx[stay], i2])
    w_n = np.vstack([w[stay], w2])
    cap_n = np.r_[cap[stay], c2]
    new = np.r_[np.zeros(len(stay), bool), np.ones(len(extra), bool)]
    old_n = np.r_[old[stay], np.zeros(len(extra))]
    keep = kept_below(idx_n, w_n, cap_n, _CAPS, 6, old_n, new, [float(old[g]) for g in gone])
    got, _ = fill(idx_n, w_n, cap_n, _CAPS, 6, keep, old_n)
    want, _ = progressive(idx_n, w_n, cap_n, _CAPS, 6)
    assert np.allclose(got, want, rtol=1e-9, atol=1e-9)


@st.composite
def _shaped(draw):
    """A random instance in the shapes :func:`fill` treats apart: 1 to 4 path positions
    (solved by columns) or 9 and 12 (wide, solved row by row),
    a dummy padding the shorter paths; resources anywhere on a path, or each position with
    resources of its own (the frozen use is then summed column by column); integral
    weights (the free weight is updated, not summed again) or fractional ones; caps from a
    few values (ties with each other and with shares) or none; capacities from a few
    values, one far above any demand (a dead resource, dropped) and some a flow at its cap
    fills exactly (dead too, but kept)."""
    k = draw(st.sampled_from([1, 2, 3, 4, 9, 12]))
    per = draw(st.integers(1, 3))
    n_res = k * per
    capacity = np.array(draw(st.lists(st.sampled_from([40.0, 60.0, 90.0, 150.0, 1e6]),
                                      min_size=n_res, max_size=n_res)) + [np.inf])
    weights = draw(st.sampled_from([(1.0,), (1.0, 2.0), (0.5, 1.0, 3.0), (1.0, 1 / 3)]))
    own = draw(st.booleans())
    n = draw(st.integers(1, 40))
    idx, w = np.full((n, k), n_res), np.zeros((n, k))
    for f in range(n):
        if own:
            pos = draw(st.lists(st.integers(0, k - 1), min_size=1, max_size=k, unique=True))
            res = [j * per + draw(st.integers(0, per - 1)) for j in pos]
        else:
            res = draw(st.lists(st.integers(0, n_res - 1), min_size=1, max_size=k, unique=True))
            pos = draw(st.permutations(range(k)))[:len(res)]
        for j, r in zip(pos, res):
            idx[f, j], w[f, j] = r, draw(st.sampled_from(weights))
    cap = np.array(draw(st.lists(st.sampled_from([math.inf, 10.0, 20.0, 40.0, 100 / 3, 45.5]),
                                 min_size=n, max_size=n)))
    return idx, w, cap, capacity, n_res


@settings(max_examples=300, deadline=None)
@given(_shaped(), st.data())
def test_fill_of_any_shape_is_progressive_filling(inst, data):
    """Solved alone, or with any flows held at their max-min rates (those of the others
    in the rest are then max-min rates too), fill gives progressive filling's rates."""
    idx, w, cap, capacity, dummy = inst
    want, rem0 = progressive(idx, w, cap, capacity, dummy)
    got, rem = fill(idx, w, cap, capacity, dummy)
    assert np.allclose(got, want, rtol=1e-9, atol=1e-9)
    assert np.allclose(rem[:dummy], rem0[:dummy], rtol=1e-9, atol=1e-7)
    keep = np.array(data.draw(st.lists(st.booleans(), min_size=len(idx), max_size=len(idx))))
    got, rem = fill(idx, w, cap, capacity, dummy, keep, np.where(keep, want, np.nan))
    assert np.allclose(got, want, rtol=1e-9, atol=1e-9)
    assert np.allclose(rem[:dummy], rem0[:dummy], rtol=1e-9, atol=1e-7)


def test_an_unbounded_flow_is_refused_before_any_round():
    """A flow with no cap crossing only unbounded resources has no max-min rate."""
    idx = np.array([[0, 6], [6, 6]])
    w = np.array([[1.0, 0.0], [1.0, 0.0]])
    with pytest.raises(ValueError, match="neither a finite cap nor a finite resource"):
        fill(idx, w, np.array([np.inf, np.inf]), _CAPS, 6)
    rate, rem = fill(idx, w, np.array([np.inf, 7.0]), _CAPS, 6)   # capped: fine
    assert rate.tolist() == [100.0, 7.0] and rem[0] == 0.0


def _batched_run(batches, caps):
    """Start each batch of flows at once, run every flow to completion; everything the
    model keeps, step by step."""
    m = FluidModel(caps)
    seen = []
    for batch in batches:
        for res, cap, nbytes in batch:
            m.add(res, [1.0] * len(res), cap, nbytes)
        m.recompute()
        t = m.next_finish_us()
        m.advance(t)
        m.pop_finished()
        m.recompute()
        seen.append((t, m.shortcuts, m.rate.tolist(), m.finish.tolist(), list(m._rem), m.bytes_on.tolist()))
    while m.active_count:
        m.advance(m.next_finish_us())
        m.pop_finished()
        m.recompute()
        seen.append((m.now_us, m.rate.tolist(), m.finish.tolist(), list(m._rem), m.bytes_on.tolist()))
    return seen


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.tuples(st.lists(st.integers(0, 5), min_size=1, max_size=3, unique=True),
                                   st.sampled_from([2.0, 5.0, 8.0]), st.sampled_from([50.0, 400.0])),
                         min_size=1, max_size=40), min_size=1, max_size=4))
@example([[([0], 2.0, 50.0)] * 20, [([1, 2], 5.0, 400.0)] * 17])        # they end together, unsaturated
@example([[([3], 5.0, 50.0)] * 20 + [([0, 3], 8.0, 400.0)] * 3])        # ... on a saturated link
def test_many_flows_at_once_keep_the_books_of_one_at_a_time(batches):
    """A batch of 16 or more flows is filed (and popped) vectorized: the same rates, finish
    times, unused capacity and bytes, to the last bit, as the flow-by-flow loop. (Few
    rates and sizes, so that many flows end together, on saturated resources or not.)"""
    caps = [100.0, 60.0, 150.0, 40.0, 90.0, 120.0]
    vectorized = _batched_run(batches, caps)
    many = fluid._MANY
    fluid._MANY = 10 ** 9      # every batch one flow at a time
    try:
        looped = _batched_run(batches, caps)
    finally:
        fluid._MANY = many
    assert vectorized == looped
