"""Rank symmetry (purlin.sim.symmetry): simulating the representatives of a periodic call
gives what simulating every rank gives, and anything that breaks the period, planted on
one rank or one GPU, sends the engine back to every rank."""
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from purlin.errors import Deadlock, PurlinError
from purlin.sim import simulate
from purlin.sim.calibration import load_calibration
from purlin.sim.engine import _footprint
from purlin.sim.fabric import Fabric
from purlin.sim.symmetry import quotient
from purlin.snac import plan
from purlin.snac.ir import Copy, Notify, Ref, Wait
from purlin.spec import library
from purlin.topology import load_topology, minimal, parse_topology

ROT = {"notify_order": "rotated"}

# (topology, collective, bytes, policy, period): latency (packets), direct and throughput
# plans, a switch and a full mesh, a period of one rank and one of four
CASES = [
    ("hgx-b200-8", "all_to_all", 1 << 20, dict(ROT, regime="latency"), 1),
    ("hgx-h200-8", "all_gather", 16 << 10, dict(ROT, regime="latency"), 1),
    ("gb200-nvl72", "all_gather", 16 << 10, dict(ROT, regime="latency"), 1),
    ("hgx-b200-8", "all_to_all", 4096, None, 1),
    ("hgx-h200-8", "all_to_all", 1 << 24, dict(ROT, regime="throughput"), 1),
    ("hgx-b200-8", "all_gather", 1 << 24, dict(ROT, regime="direct"), 1),
    ("mi300x-8", "all_gather", 1 << 20, dict(ROT, regime="direct"), 1),
    ("mi300x-8", "all_to_all", 1 << 20, dict(ROT, regime="latency"), 1),
    ("minimal-6", "all_gather", 4096, dict(ROT, regime="throughput"), 1),
    ("gb200-nvl72", "all_to_all", 256 << 20, None, 4),
]


def _topology(name: str):
    return minimal(int(name.split("-")[1])) if name.startswith("minimal-") else load_topology(name)


def _both(s, topo):
    """Every rank, settled at every change (a rack's full run would coalesce its settles:
    purlin.sim.engine.COALESCE_CTAS), and the representatives."""
    return (simulate(s, topo, record=False, symmetry=False, exact=True), simulate(s, topo, record=False))


@pytest.mark.parametrize("name,coll,size,policy,period", CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}-{(c[3] or {}).get('regime', 'default')}" for c in CASES])
def test_the_representatives_give_every_rank_s_answer(name, coll, size, policy, period):
    topo = _topology(name)
    s = plan(library.from_size(coll, topo.world, size), topo, policy)
    full, sym = _both(s, topo)
    assert full.stats["period"] == topo.world and sym.stats["period"] == period
    assert sym.time_us == full.time_us                        # the same floats, not just close
    assert sym.stats["flows"] * (topo.world // period) == full.stats["flows"]
    for res, u in full.utilisation.items():                   # each link's and memory's bytes
        assert sym.utilisation[res]["bytes"] == pytest.approx(u["bytes"], rel=1e-9, abs=1e-6), res


def _symmetric():
    topo = load_topology("hgx-b200-8")
    s = plan(library.from_size("all_to_all", 8, 1 << 24), topo, dict(ROT, regime="direct"))
    assert simulate(s, topo, record=False).stats["period"] == 1
    return topo, s


def _edit(s, rank: int, pick, change):
    """``s`` with the first instruction of rank ``rank`` that ``pick`` accepts changed."""
    progs = list(s.programs)
    for k, p in enumerate(progs):
        if p.rank != rank:
            continue
        for i, ins in enumerate(p.instrs):
            if pick(ins):
                progs[k] = replace(p, instrs=p.instrs[:i] + (change(ins),) + p.instrs[i + 1:])
                return replace(s, programs=tuple(progs))
    raise AssertionError("nothing to plant")


def _remote_copy(ins):
    return type(ins) is Copy and ins.nbytes >= 64 and ins.dsts[0].rank != ins.src.rank


PLANTED = {
    # a copy of one rank moves fewer bytes
    "bytes": (lambda x: _remote_copy(x), lambda x: replace(x, nbytes=x.nbytes - 16)),
    # one rank stores off the 16-byte grid (the engine charges a narrower path)
    "alignment": (lambda x: _remote_copy(x),
                  lambda x: replace(x, dsts=(replace(x.dsts[0], offset=x.dsts[0].offset + 4),) + x.dsts[1:],
                                    nbytes=x.nbytes - 16)),
    # one rank signals its peers in another order
    "notify order": (lambda x: type(x) is Notify and len(x.peers) > 2,
                     lambda x: replace(x, peers=x.peers[::-1], signals=x.signals[::-1])),
    # one rank waits for its peers in another order
    "wait order": (lambda x: type(x) is Wait and len(x.signals) > 2,
                   lambda x: replace(x, signals=x.signals[::-1])),
    # one rank's copy goes to another peer
    "peer": (lambda x: _remote_copy(x),
             lambda x: replace(x, dsts=(Ref((x.dsts[0].rank + 1) % 8 or 1, x.dsts[0].buffer,
                                            x.dsts[0].offset),) + x.dsts[1:])),
}


@pytest.mark.parametrize("what", sorted(PLANTED))
def test_a_change_on_one_rank_runs_every_rank(what):
    topo, s = _symmetric()
    pick, change = PLANTED[what]
    bad = _edit(s, 5, pick, change)
    full, sym = _both(bad, topo)
    assert sym.stats["period"] == full.stats["period"] == 8
    assert sym.time_us == full.time_us


def test_a_slower_gpu_runs_every_rank():
    spec = {"schema_version": 1, "name": "star-4-slow3", "source": "a test", "gpu_kind": "synthetic", "gpus": 4,
            "gpu": {"hbm_bandwidth_gbps": 1000, "sms": 16, "copy_engines": 2, "nvlink_per_sm_gbps": 10,
                    "memory_gib": 16},
            "switches": [{"name": "sw", "latency_us": 0.4, "in_switch_reduce": False, "ports": 4}],
            "links": [{"pairs": [["gpu0", "sw"], ["gpu1", "sw"], ["gpu2", "sw"]], "bandwidth_gbps": 100,
                       "latency_us": 0.05, "link_class": "nvlink"},
                      {"pairs": [["gpu3", "sw"]], "bandwidth_gbps": 50, "latency_us": 0.05,
                       "link_class": "nvlink"}]}
    slow = parse_topology(spec)
    even = minimal(4)
    c = library.from_size("all_to_all", 4, 1 << 20)
    pol = dict(ROT, regime="direct")
    assert simulate(plan(c, even, pol), even, record=False).stats["period"] == 1
    s = plan(c, slow, pol)
    cal = load_calibration("synthetic")
    fp = _footprint(s, slow)
    assert quotient(s, slow, cal, Fabric(slow, cal, fp), fp) is None
    full, sym = _both(s, slow)
    assert sym.time_us == full.time_us and sym.stats["period"] == 4


def test_loopback_ranks_share_a_gpu_so_every_rank_runs():
    topo = load_topology("h200-loopback", world=4)
    s = plan(library.from_size("all_to_all", 4, 1 << 20), topo, dict(ROT, regime="direct"))
    assert simulate(s, topo, record=False).stats["period"] == 4


def test_a_timeline_runs_every_rank():
    topo, s = _symmetric()
    r = simulate(s, topo, record=True)
    assert r.stats["period"] == 8 and {rec[0] for rec in r.records} == set(range(8))


def test_a_deadlock_is_named_as_the_full_run_names_it():
    topo, s = _symmetric()
    bad = _edit(s, 2, lambda x: type(x) is Wait, lambda x: replace(x, value=x.value + 5))
    with pytest.raises(Deadlock) as full:
        simulate(bad, topo, record=False, symmetry=False)
    with pytest.raises(Deadlock) as sym:
        simulate(bad, topo, record=False)
    assert str(sym.value) == str(full.value) and "rank" in str(sym.value)


def test_symmetry_must_be_a_bool():
    topo, s = _symmetric()
    with pytest.raises(PurlinError, match="simulate: symmetry"):
        simulate(s, topo, record=False, symmetry="yes")


def test_a_wait_for_another_rank_s_packets_runs_every_rank():
    """Mirrored puts land on representatives only, so a WaitPackets on a peer's window (a
    schedule the verifier refuses, but simulate may be given) must not run by them."""
    from purlin.snac.ir import WaitPackets
    topo = load_topology("hgx-b200-8")
    s = plan(library.from_size("all_to_all", 8, 1 << 20), topo, dict(ROT, regime="latency"))
    progs = []
    for p in s.programs:   # every rank's waits read its right neighbour's window instead
        progs.append(replace(p, instrs=tuple(replace(x, src=replace(x.src, rank=(p.rank + 1) % 8))
                                             if type(x) is WaitPackets else x for x in p.instrs)))
    bad = replace(s, programs=tuple(progs))
    cal = load_calibration("b200")
    fp = _footprint(bad, topo)
    assert quotient(bad, topo, cal, Fabric(topo, cal, fp), fp) is None
    assert quotient(s, topo, cal, Fabric(topo, cal, fp), fp).period == 1


def test_a_switch_with_direct_links_beside_it_is_checked_route_by_route():
    """One switch and a ring of direct GPU links: two kinds of path, so the routes are
    compared pair by pair (not taken as a star's), and the answer is the full run's."""
    spec = {"schema_version": 1, "name": "star-ring-4", "source": "a test", "gpu_kind": "synthetic", "gpus": 4,
            "gpu": {"hbm_bandwidth_gbps": 1000, "sms": 16, "copy_engines": 2, "nvlink_per_sm_gbps": 10,
                    "memory_gib": 16},
            "switches": [{"name": "sw", "latency_us": 0.4, "in_switch_reduce": False, "ports": 4}],
            "links": [{"star": "sw", "bandwidth_gbps": 100, "latency_us": 0.05, "link_class": "pcie"},
                      {"pairs": [["gpu0", "gpu1"], ["gpu1", "gpu2"], ["gpu2", "gpu3"], ["gpu3", "gpu0"]],
                       "bandwidth_gbps": 200, "latency_us": 0.05, "link_class": "nvlink"}]}
    topo = parse_topology(spec)
    s = plan(library.from_size("all_to_all", 4, 1 << 20), topo, dict(ROT, regime="direct"))
    full, sym = _both(s, topo)
    assert sym.time_us == full.time_us and full.stats["period"] == 4


_BUFS = st.sampled_from(["output", "input", "packets"])
_REFS = st.one_of(
    _BUFS.flatmap(lambda buf: st.lists(st.builds(Ref, st.integers(0, 11), st.just(buf), st.sampled_from([0, 4, 16])),
                                       min_size=7, max_size=12)),
    st.lists(st.builds(Ref, st.integers(0, 11), _BUFS, st.integers(0, 40)), max_size=12))


_CHANGES = st.sampled_from([None, "offset", "rank", "buffer"])


@settings(max_examples=400, deadline=None)
@given(_REFS, st.integers(0, 11), st.integers(0, 11), _CHANGES, st.integers(0, 11))
def test_wide_refs_compare_as_their_refs_do(a, p, d, change, at):
    """A rack's instruction names ~W Refs; the shape keeps them as (ranks, widths) when
    they share a buffer. Two lists (one the other's rotation by ``d`` ranks, one Ref
    maybe changed) get equal shapes exactly when their Refs, taken one by one relative
    to their ranks, are alike."""
    from purlin.sim.symmetry import _ref, _refs
    b = [Ref((r.rank + d) % 12, r.buffer, r.offset) for r in a]
    if b and change:
        r = b[at % len(b)]
        b[at % len(b)] = Ref(r.rank + (change == "rank"), "staging" if change == "buffer" else r.buffer,
                             r.offset + 4 * (change == "offset"))
    q = (p + d) % 12
    one_by_one = tuple(_ref(r, p, 12) for r in a) == tuple(_ref(r, q, 12) for r in b)
    assert (_refs(tuple(a), p, 12) == _refs(tuple(b), q, 12)) is one_by_one


@pytest.mark.parametrize("topo_name, name, size, policy, period", CASES)
def test_a_programs_shape_is_the_shape_of_each_instruction(topo_name, name, size, policy, period):
    """A program's shape (``_Context._shapes``, one loop over its instructions) is, light
    and full, the shapes of its instructions one by one (:func:`_shape`)."""
    from purlin.sim.symmetry import _Context, _shape
    topo = _topology(topo_name)
    s = plan(library.from_size(name, topo.world, size), topo, policy, check=False)
    ctx = _Context(s, load_calibration(topo.gpu_kind if topo.gpu_kind != "synthetic" else "h200"))
    for p in s.programs[::max(1, len(s.programs) // 40)]:
        for light in (True, False):
            assert ctx._shapes(p.instrs, p.rank, light) == tuple(_shape(i, p.rank, ctx, light) for i in p.instrs)
