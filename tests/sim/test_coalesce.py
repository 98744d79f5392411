"""Coalesced settles (purlin.sim.engine.COALESCE_CTAS / COALESCE_REL): a call of fewer CTAs
is settled at every change, bit for bit as ``exact=True``; a rack-sized call lets one
settle serve a window of changes, re-solves less, and lands within its window's share of
the exact answer."""
import pytest

from purlin.errors import PurlinError
from purlin.sim import simulate
from purlin.sim import engine
from purlin.snac import plan
from purlin.spec import library
from purlin.topology import load_topology, minimal

# the B200/GB200 switch numbers of benchmarks/sim_point.py's nvswitch-W worlds
GB200 = dict(bandwidth_gbps=720.0, latency_us=0.05, switch_latency_us=0.35, in_switch_reduce=True,
             hbm_bandwidth_gbps=8000.0, sms=148, nvlink_per_sm_gbps=48.0)


@pytest.mark.parametrize("name, collective, nbytes", [
    ("hgx-h200-8", "all_to_all_v", 1 << 20),
    ("mi300x-8", "all_gather", 64 << 20),
    ("hgx-b200-8", "all_gather_v", 256 << 10),
])
def test_a_box_is_settled_at_every_change(name, collective, nbytes):
    topo = load_topology(name)
    s = plan(library.from_size(collective, topo.world, nbytes), topo, check=False)
    assert len(s.programs) < engine.COALESCE_CTAS
    fast = simulate(s, topo, record=False)
    exact = simulate(s, topo, record=False, exact=True)
    assert fast.stats["coalesced"] == 0
    assert fast.time_us == exact.time_us and fast.stats["recomputes"] == exact.stats["recomputes"]


def test_no_shipped_box_of_sixteen_gpus_or_fewer_can_reach_the_threshold():
    """A CTA moves one flow at a time, and a rank runs at most one CTA per SM."""
    for name in ("hgx-h200-8", "hgx-b200-8", "mi300x-8", "mesh-2d-16", "hgx-a100-8", "pcie-gen5-8"):
        topo = load_topology(name)
        assert topo.world * max(g.sms for g in topo.gpus) < engine.COALESCE_CTAS, name


def test_a_rank_periodic_rack_call_runs_its_few_representatives_exactly():
    topo = load_topology("gb200-nvl72")
    s = plan(library.from_size("all_to_all", 72, 256 << 20), topo, check=False)
    assert len(s.programs) >= engine.COALESCE_CTAS
    fast = simulate(s, topo, record=False)
    assert fast.stats["period"] < 72 and fast.stats["coalesced"] == 0
    assert fast.time_us == simulate(s, topo, record=False, exact=True).time_us


@pytest.fixture(scope="module")
def rack():
    """An AllToAllV of 41 ranks x 64 CTAs (past the threshold) and its exact result."""
    topo = minimal(41, **GB200)
    s = plan(library.from_size("all_to_all_v", 41, 4 << 20), topo, check=False)
    return topo, s, simulate(s, topo, "gb200", record=False, exact=True)


def test_a_rack_call_shares_a_settle_among_the_changes_of_its_window(rack):
    topo, s, exact = rack
    assert len(s.programs) >= engine.COALESCE_CTAS
    fast = simulate(s, topo, "gb200", record=False)
    assert exact.stats["coalesced"] == 0 and fast.stats["coalesced"] > 0
    assert fast.stats["recomputes"] < exact.stats["recomputes"]
    assert fast.stats["flows"] == exact.stats["flows"]
    assert fast.time_us == pytest.approx(exact.time_us, rel=5e-3)


def test_a_timeline_is_coalesced_alike(rack):
    topo, s, exact = rack
    rec = simulate(s, topo, "gb200", record=True)
    assert rec.stats["coalesced"] > 0
    assert rec.time_us == simulate(s, topo, "gb200", record=False, symmetry=False).time_us
    assert rec.time_us == pytest.approx(exact.time_us, rel=5e-3)
    assert max(r[5] for r in rec.records) <= rec.time_us


def test_exact_must_be_a_bool():
    topo = load_topology("hgx-h200-8")
    s = plan(library.from_size("all_reduce", 8, 1 << 20), topo, check=False)
    with pytest.raises(PurlinError, match="simulate: exact"):
        simulate(s, topo, exact="yes")


def test_the_codesign_search_settles_exactly(monkeypatch):
    """A table's rivals can sit a fraction of a percent apart: the search simulates each
    candidate with exact settles, whatever the call's size (here the threshold is lowered
    so that an 8-GPU AllToAllV would coalesce)."""
    from purlin.sim import codesign
    monkeypatch.setattr(engine, "COALESCE_CTAS", 16)
    monkeypatch.setattr(codesign, "_SIMULATED", {})
    topo = load_topology("hgx-h200-8")
    s = plan(library.from_size("all_to_all_v", 8, 1 << 20, "fp32"), topo, check=False)
    coalesced = simulate(s, topo, record=False)
    exact = simulate(s, topo, record=False, exact=True)
    assert coalesced.stats["coalesced"] > 0 and coalesced.time_us != exact.time_us
    got = codesign.evaluate("hgx-h200-8", 8, "all_to_all_v", 1 << 20, dict(s.policy), None, 64)
    assert got["time_us"] == exact.time_us
