"""Physics of the model, on planned schedules over shipped topologies.

The throughput-regime policy pins Purlin's per-peer consumer split (consumers a
multiple of W-1: "the rest are split per peer", docs/sources.md#purlins-defaults) and
1 MiB chunks, so the numbers test the simulator rather than the planner's current defaults.
"""
import pytest

from purlin.errors import PlanError
from purlin.sim import simulate
from purlin.snac import Policy, plan
from purlin.spec import library
from purlin.topology import load_topology, with_overrides

H100 = load_topology("hgx-h100-8")
H100_2X = with_overrides(H100, link_bandwidth_scale=2)
BIG = Policy(regime="throughput", consumer_ctas=28, chunk_nbytes=1 << 20)
SMALL = Policy(regime="latency", put_ctas=8, consumer_ctas=16, chunk_nbytes=1024)   # one policy on both
EFFECTIVE_LINK_GBPS = H100.link("gpu0->nvswitch").bandwidth_gbps   # 370, from the YAML


def _time(size, topo=H100, name="all_gather", policy=None):
    c = library.from_size(name, 8, size)
    return simulate(plan(c, topo, policy), topo, record=False)


def test_large_allgather_busbw_near_nccl_tests_and_below_link():
    r = _time(1 << 30)   # the planner's default policy
    assert r.busbw_gbps <= EFFECTIVE_LINK_GBPS
    assert r.busbw_gbps == pytest.approx(370.0, rel=0.15)


def test_time_linear_at_large_sizes():
    t = [_time(s, policy=BIG).time_us for s in (1 << 28, 1 << 29, 1 << 30)]
    assert t[1] / t[0] == pytest.approx(2.0, rel=0.1)
    assert t[2] / t[1] == pytest.approx(2.0, rel=0.1)


def test_time_flat_at_small_sizes():
    t = [_time(s).time_us for s in (1 << 10, 1 << 11, 1 << 12, 1 << 13)]
    assert max(t) / min(t) < 1.15
    assert min(t) >= 2.0  # the launch latency alone (h100.json launch_us)


def test_double_link_bandwidth_halves_large_and_keeps_small():
    big = _time(1 << 30, policy=BIG).time_us / _time(1 << 30, H100_2X, policy=BIG).time_us
    assert big == pytest.approx(2.0, rel=0.1)
    small = _time(1 << 12, policy=SMALL).time_us / _time(1 << 12, H100_2X, policy=SMALL).time_us
    assert small == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize("name", ["all_reduce", "reduce_scatter", "all_to_all", "all_gather_v",
                                  "reduce_scatter_v", "all_to_all_v"])
def test_every_purlin_collective_simulates_below_link_bound(name):
    r = _time(16 << 20, name=name)
    # where the switches reduce (the codesign table picks the switch Atom) each GPU sends
    # and receives its buffer once: then algbw, not busbw, is what the link bounds
    bound = r.algbw_gbps if r.schedule.policy.get("atom") == "switch" else r.busbw_gbps
    assert 0 < bound <= EFFECTIVE_LINK_GBPS


def test_in_switch_allreduce_beats_sm_loads_at_large_sizes():
    h200 = load_topology("hgx-h200-8")
    c = library.from_size("all_reduce", 8, 1 << 30)
    nvls = simulate(plan(c, h200, Policy(regime="direct", atom="switch")), h200, record=False)
    sm = simulate(plan(c, h200, Policy(regime="direct")), h200, record=False)
    assert sm.busbw_gbps <= EFFECTIVE_LINK_GBPS * 1.001
    assert nvls.busbw_gbps > 1.2 * sm.busbw_gbps
    # h200.json's switch.wire_efficiency is fitted to this figure, so this is a consistency check
    assert nvls.busbw_gbps == pytest.approx(478.0, rel=0.05)
    with pytest.raises(PlanError, match="hgx-a100-8 has no switch with in_switch_reduce"):
        a100 = load_topology("hgx-a100-8")
        plan(c, a100, Policy(regime="direct", atom="switch"))
