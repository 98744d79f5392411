"""The plan-size estimate is close to the plans it describes, the lower bounds are bounds,
and the default limits admit every plan the project makes."""
import json
from pathlib import Path

import pytest

from purlin.errors import LimitError
from purlin.snac import Policy, check_limits, plan
from purlin.snac.ir import Notify, Wait, sources
from purlin.snac.limits import (DEFAULT_MAX_INSTRUCTIONS, estimate, library_lower_bound,
                                lower_bound)
from purlin.snac.planner import resolve_policy
from purlin.spec import library
from purlin.topology import load_topology, resolve_topology

POLICIES = [None, Policy(regime="latency"), Policy(regime="throughput"), Policy(regime="direct"),
            Policy(regime="throughput", algorithm="ring")]
CASES = [(name, w, size, pol, topo)
         for name in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "all_to_all_v",
                      "reduce_scatter_v", "broadcast", "reduce")
         for w, size in ((8, 1 << 20), (16, 1 << 22))
         for pol in POLICIES
         for topo in (None, "h200-loopback")
         if not (topo and pol is not None and pol.algorithm == "ring")]


def _size(s):
    # a Notify or Wait counts once per flag (what the estimate counts)
    instrs = sum(len(i.peers) if type(i) is Notify else len(i.signals) if type(i) is Wait else 1
                 for p in s.programs for i in p.instrs)
    refs = sum(len(sources(i)) + len(getattr(i, "dsts", ())) for p in s.programs for i in p.instrs)
    return instrs, refs


@pytest.mark.parametrize("name,w,size,pol,topo", CASES)
def test_estimate_and_bounds_against_the_plan(name, w, size, pol, topo):
    t = resolve_topology(topo, w)
    c = library.from_size(name, w, size)
    instrs, refs = _size(plan(c, t, pol, check=False))
    est = estimate(c, resolve_policy(c, t, pol, 64), 64, spread=t.loopback)
    # at most 5x over: the estimate counts a start and end handshake per (CTA, peer) pair;
    # a fence='cta' plan (codesign tables pick it) signals less, so it errs to the safe side
    assert 0.5 <= est.instructions / instrs <= 5.0, (est, instrs)
    assert 0.5 <= est.refs / refs <= 2.5, (est, refs)
    for lb in (lower_bound(c), library_lower_bound(name, w, size)):
        assert lb.instructions <= instrs and lb.refs <= refs, (lb, instrs, refs)


def test_the_largest_shipped_plans_are_within_the_default_limits():
    points = json.loads((Path(__file__).resolve().parents[1] / "data" / "sim-reference.json")
                        .read_text())["points"]
    big = sorted(points, key=lambda p: -p["instructions"])[:3]
    for p in big:
        topo = load_topology(p["topology"], world=p["world"])
        c = library.from_size(p["collective"], topo.world, p["size"])
        _, pol = check_limits(c, topo, p["policy"], p["cta_budget"])   # does not raise
        est = estimate(c, pol, p["cta_budget"], spread=topo.loopback)
        assert p["instructions"] / 2 <= est.instructions <= 2 * p["instructions"]
        assert est.instructions * 4 < DEFAULT_MAX_INSTRUCTIONS


def test_limits_refuse_before_building_and_say_how_to_raise():
    c = library.all_reduce(8, 1 << 40)
    with pytest.raises(LimitError) as e:
        check_limits(c, max_instructions=1000)
    msg = str(e.value)
    assert msg.startswith("all_reduce at world 8, 1099511627776 B: about ")
    assert "over the limit of 1,000; raise it with max_instructions=" in msg
    with pytest.raises(LimitError, match=r"of plan memory .* over the limit of 1\.0 KiB"):
        check_limits(library.all_reduce(8, 1 << 20), max_memory_nbytes=1024)


@pytest.mark.parametrize("topo,name,size", [("hgx-h200-8", "all_gather", 1 << 24), ("hgx-h200-8", "all_reduce", 1 << 24),
                                            ("gb200-nvl72", "all_gather", 1 << 24), ("gb200-nvl72", "all_to_all", 1 << 22)])
@pytest.mark.parametrize("start,fence", [("gate", "gather"), ("cta", "gather"), ("gate", "cta")])
def test_the_estimate_follows_the_handshakes_of_a_gated_start_and_a_gathered_fence(topo, name, size, start, fence):
    """A gated start and a gathered fence send one flag per rank pair (and one local flag
    per working CTA), not one per (CTA, peer) pair: at 72 ranks a gated, gathered direct
    AllGather of 16 MiB holds 24,624 flags and instructions against 236,232 with per-CTA
    handshakes, and the estimate must follow, or a plan that fits is refused."""
    t = load_topology(topo)
    c = library.from_size(name, t.world, size)
    pol = Policy(regime="direct", start=start, fence=fence)
    full = resolve_policy(c, t, pol, 64)
    instrs, _ = _size(plan(c, t, pol, check=False))
    est = estimate(c, full, 64)
    assert 0.5 <= est.instructions / instrs <= 2.0, (est.instructions, instrs)


def test_a_default_past_the_limit_gates_its_start_and_gathers_its_fence():
    """The per-CTA handshakes of a 576-rank AllReduce of 64 MiB are about 8 million flags,
    over the limit; the default gates its start and gathers its fence (about 1.35 million)
    and says so. Where the per-CTA ones fit (16 MiB) it keeps them; a policy the caller
    set keeps them and is refused; a lower limit refuses the gated one too."""
    from purlin.snac.planner import resolve
    t = load_topology("rubin-ultra-nvl576")
    c = library.from_size("all_reduce", t.world, 64 << 20)
    pol, src = resolve(c, t, None, 64)
    assert (pol.regime, pol.atom, pol.start, pol.fence) == ("direct", "switch", "gate", "gather")
    assert src["source"] == "generic"
    assert src["handshakes"] == ("start 'gate', fence 'gather': per-CTA handshakes would be about "
                                 "7,954,560 instructions, over the limit of 2,097,152")
    assert 1_000_000 < estimate(c, pol, 64).instructions == 1_348_992 < DEFAULT_MAX_INSTRUCTIONS
    assert check_limits(c, t)[1] == pol
    small = library.from_size("all_reduce", t.world, 16 << 20)
    assert (resolve(small, t, None, 64)[0].start, resolve(small, t, None, 64)[0].fence) == ("cta", "cta")
    assert "handshakes" not in resolve(small, t, None, 64)[1]
    with pytest.raises(LimitError, match="about 7,954,560 instructions"):
        check_limits(c, t, Policy(regime="direct", atom="switch"))
    with pytest.raises(LimitError, match="about 7,954,560 instructions .* over the limit of 1,000,000"):
        check_limits(c, t, max_instructions=1_000_000)
