"""Quiet runs (purlin.sim.quiet): a rack call in which no resource fills is timed with every
flow at its cap, and gives the fluid model's answer; one in which a resource fills, even
for an instant and by a little, is run with the fluid model."""
import pytest

from purlin.sim import engine, simulate
from purlin.sim.fabric import FlowSpec
from purlin.sim.quiet import MARGIN, TRIP, WIDE, Contended, QuietLoad
from purlin.snac import plan
from purlin.spec import library
from purlin.topology import load_topology, minimal

INF = float("inf")


def _spec(cap: float, *resources: int) -> FlowSpec:
    return FlowSpec(tuple(resources), (1.0,) * len(resources), cap, 0.0, 0.0)


# ---- the checks ----------------------------------------------------------------------
def test_flows_moving_together_past_a_capacity_are_contended_though_the_trip_is_not_reached():
    load = QuietLoad([100.0, 1000.0])
    a = _spec(60.0, 0, 1)
    load.begin(a, 600, 0.0, 10.0)
    load.begin(a, 120, 8.0, 10.0)             # 120 issued of 100: below the trip (150)
    with pytest.raises(Contended, match=r"resource 0: flows moving at t=8 us ask 120 of its 100 B/us"):
        load.check(INF)


def test_a_flow_ending_as_another_starts_shares_nothing():
    load = QuietLoad([100.0])
    a = _spec(60.0, 0)
    load.begin(a, 60, 0.0, 1.0)
    load.begin(a, 60, 1.0, 2.0)
    load.check(INF)                           # no error: [0, 1) and [1, 2) do not overlap


def test_the_margin_is_stricter_than_the_fluid_models_saturation():
    near = QuietLoad([100.0])
    near.begin(_spec(50.0, 0), 50, 0.0, 1.0)
    near.begin(_spec(50.0 * (1 - MARGIN / 2), 0), 50, 0.0, 1.0)
    with pytest.raises(Contended):
        near.check(INF)
    room = QuietLoad([100.0])
    room.begin(_spec(50.0, 0), 50, 0.0, 1.0)
    room.begin(_spec(50.0 * (1 - 4 * MARGIN), 0), 50, 0.0, 1.0)
    room.check(INF)


def test_flows_issued_past_the_trip_stop_the_run_at_a_sweep_before_any_moves():
    load = QuietLoad([100.0])
    a = _spec(60.0, 0)
    load.begin(a, 60, 1.0, 2.0)
    load.begin(a, 60, 5.0, 6.0)               # not moving together, but issued and not ended
    load.check(0.5)                           # 120 of 100: below the trip (150)
    load.begin(a, 60, 9.0, 10.0)
    with pytest.raises(Contended, match="resource 0: flows issued ask 180 of its 100"):
        load.check(0.5)                       # issued at one instant: nothing to prove, but counted
    assert TRIP * 100.0 < 180.0
    ended = QuietLoad([100.0])
    for t in (1.0, 5.0, 9.0):
        ended.begin(a, 60, t, t + 1.0)
    ended.check(2.0)                          # the first ended: 120 still to come


def test_the_load_each_resource_carried_is_summed_flow_by_flow():
    load = QuietLoad([100.0, 100.0, 100.0])
    load.begin(FlowSpec((2, 0), (0.1, 1.0), 10.0, 0.0, 0.0), 3, 0.0, 0.3)
    load.begin(_spec(10.0, 2), 7, 1.0, 1.7)
    load.begin(FlowSpec((2, 0), (0.1, 1.0), 10.0, 0.0, 0.0), 5, 2.0, 2.5)
    assert load.bytes_on.tolist() == [3.0 + 5.0, 0.0, (0.1 * 3 + 7.0) + 0.1 * 5, 0.0]


def test_a_sweep_keeps_the_flows_still_moving_for_the_next():
    load = QuietLoad([100.0])
    load.begin(_spec(60.0, 0), 600, 0.0, 10.0)
    load.check(5.0)                           # [0, 5) is fine and final
    load.begin(_spec(60.0, 0), 60, 6.0, 7.0)
    with pytest.raises(Contended, match="t=6 us ask 120"):
        load.check(INF)


def test_an_uncapped_flow_is_never_quiet():
    with pytest.raises(Contended, match="uncapped"):
        QuietLoad([100.0]).begin(_spec(INF, 0), 10, 0.0, 0.0)


def test_a_flow_wider_than_a_few_resources_ends_a_quiet_run():
    load = QuietLoad([1e9] * (WIDE + 1))
    load.begin(_spec(1.0, *range(WIDE)), 10, 0.0, 10.0)
    with pytest.raises(Contended, match=f"crosses {WIDE + 1} resources"):
        load.begin(_spec(1.0, *range(WIDE + 1)), 10, 0.0, 10.0)


# ---- the engine ----------------------------------------------------------------------
@pytest.mark.parametrize("name, collective, nbytes", [
    ("gb200-nvl72", "all_to_all", 1 << 20),
    ("rubin-nvl144", "all_to_all_v", 64 << 10),
    ("rubin-nvl144", "all_gather_v", 1 << 20),
])
def test_a_quiet_rack_call_gives_the_fluid_models_answer(name, collective, nbytes):
    topo = load_topology(name)
    s = plan(library.from_size(collective, topo.world, nbytes), topo, check=False)
    quiet = simulate(s, topo, record=False)
    fluid = simulate(s, topo, record=False, exact=True)
    assert quiet.stats["quiet"] and not fluid.stats["quiet"] and quiet.stats["recomputes"] == 0
    assert quiet.time_us == fluid.time_us
    assert quiet.stats["flows"] == fluid.stats["flows"]
    for res, u in fluid.utilisation.items():
        assert quiet.utilisation[res]["bytes"] == pytest.approx(u["bytes"], rel=1e-12, abs=1e-9), res


def test_a_quiet_timeline_is_the_fluid_models():
    """Each instruction's record, to the rounding of when a flow is timed (a quiet flow
    ends at start + nbytes / cap, a fluid one at its timer, armed from another time)."""
    topo = load_topology("rubin-nvl144")
    s = plan(library.from_size("all_to_all_v", topo.world, 64 << 10), topo, check=False)
    quiet, fluid = simulate(s, topo), simulate(s, topo, exact=True)
    assert quiet.stats["quiet"] and len(quiet.records) == len(fluid.records)
    got = {r[:4]: r[4:] for r in quiet.records}
    for r in fluid.records:
        t0, t1, nbytes = got[r[:4]]
        assert (t0, t1, nbytes) == (pytest.approx(r[4], rel=1e-12), pytest.approx(r[5], rel=1e-12), r[6]), r


def test_a_call_whose_flows_fill_a_link_for_a_moment_runs_the_fluid_model(monkeypatch):
    """An 8-GPU AllReduce of 16 KiB (the threshold lowered so that it may run quiet) asks
    its links for more than they carry for a moment, less than the trip: only the sweep
    sees it, and timed quiet regardless it would come out 5% too fast."""
    monkeypatch.setattr(engine, "COALESCE_CTAS", 16)
    topo = minimal(8)
    s = plan(library.from_size("all_reduce", 8, 16 << 10), topo, check=False)

    def run():
        return simulate(s, calibration="synthetic", record=False, symmetry=False)
    got = run()
    assert not got.stats["quiet"] and got.stats["recomputes"] > 0

    class Refused(QuietLoad):
        def __init__(self, capacities):
            raise Contended("not tried")
    monkeypatch.setattr(engine, "QuietLoad", Refused)
    assert run().time_us == got.time_us    # the fluid model's answer, as if never tried

    class Blind(QuietLoad):
        def check(self, now):
            return None
    monkeypatch.setattr(engine, "QuietLoad", Blind)
    blind = run()
    assert blind.stats["quiet"] and blind.time_us == pytest.approx(0.9453 * got.time_us, rel=1e-3)


def test_wherever_a_small_world_runs_quiet_it_gives_the_exact_answer(monkeypatch):
    """With the threshold lowered, an 8-GPU world of round numbers runs quiet where it
    can: every collective at four sizes, some quiet and some not."""
    monkeypatch.setattr(engine, "COALESCE_CTAS", 16)
    topo = minimal(8)
    seen = set()
    for c in library.PURLIN_SEVEN:
        for n in (4096, 1 << 16, 1 << 20, 1 << 24):
            s = plan(library.from_size(c, 8, n), topo, check=False)
            got = simulate(s, calibration="synthetic", record=False, symmetry=False)
            exact = simulate(s, calibration="synthetic", record=False, symmetry=False, exact=True)
            seen.add(got.stats["quiet"])
            if got.stats["quiet"]:
                assert got.time_us == exact.time_us, (c, n)
    assert seen == {True, False}


def test_a_box_with_soft_memory_is_never_run_quiet(monkeypatch):
    """The H200's memory saturates softly (hbm_knee > 0): flows slow before it fills, so
    no flow keeps its cap for certain, and the fluid model times every call."""
    monkeypatch.setattr(engine, "COALESCE_CTAS", 16)
    topo = load_topology("hgx-h200-8")
    s = plan(library.from_size("all_gather", 8, 4096), topo, check=False)
    assert not simulate(s, topo, record=False, symmetry=False).stats["quiet"]
