"""On a uniform star the fabric builds one flow spec per pattern of ranks and renames
it (:meth:`purlin.sim.fabric.Fabric._relabel`): every spec must equal the one built for
its own ranks, field by field, and so must every simulated time."""
import pytest

from purlin.errors import ScheduleError
from purlin.sim import simulate
from purlin.sim import fabric as fabric_mod
from purlin.sim.calibration import load_calibration
from purlin.sim.fabric import Fabric
from purlin.snac import Policy, plan
from purlin.snac.ir import Copy, PutPackets, Reduce, Ref
from purlin.spec import library
from purlin.topology import load_topology, minimal

CAL = load_calibration("h200")   # one whose L2 holds small buffers
STAR = minimal(6, bandwidth_gbps=720.0, switch_latency_us=0.35, in_switch_reduce=True)
# buffers of GPUs 1 and 4 sit in L2 (a Reduce there reads faster): the renaming must
# keep them apart from the others
FOOTPRINT = {f"gpu{g}": (1 << 20) if g in (1, 4) else (1 << 34) for g in range(6)}


def _instructions(s):
    return [(p.rank, ins) for p in s.programs for ins in p.instrs
            if isinstance(ins, (Copy, Reduce, PutPackets))]


def _plans():
    out = []
    for name in ("all_reduce", "all_gather_v", "reduce_scatter", "all_to_all_v", "broadcast"):
        for size in (4096, 1 << 20):
            out.append(plan(library.from_size(name, 6, size), STAR, check=False))
    out.append(plan(library.from_size("all_reduce", 6, 1 << 20), STAR, Policy(atom="switch"), check=False))
    out.append(plan(library.from_size("all_gather", 6, 1 << 20), STAR, Policy(atom="ce"), check=False))
    return out


def _hand_made():
    """Keys the planner's default does not make: packet sources mixed with plain ones,
    a source equal to a destination, a broadcast from a remote source."""
    pk = lambda r, o=0: Ref(r, "packets", o)
    st = lambda r, o=0: Ref(r, "staging", o)
    out = lambda r, o=0: Ref(r, "output", o)
    return [
        (2, Reduce((pk(2), st(3), pk(5)), (out(2),), 4096, "fp32", "add", "sm")),
        (1, Reduce((st(1), st(4)), (out(1), out(4)), 4096, "fp32", "add", "sm")),
        (4, Reduce((st(1), st(4)), (out(1), out(4)), 4096, "fp32", "add", "sm")),
        (0, Copy(st(3), (out(0), out(5), out(3)), 4096, "sm")),
        (3, Copy(st(0), (out(1),), 4096, "ce")),
        (5, PutPackets(Ref(5, "input", 0), pk(2, 64), 512, 1)),
    ]


def test_every_spec_on_a_star_is_the_one_built_for_its_own_ranks():
    star = Fabric(STAR, CAL, FOOTPRINT)
    assert star._star is not None
    keys = 0
    for s in _plans():
        for rank, ins in _instructions(s):
            got = star.flow(ins, rank, "x")
            plain = Fabric(STAR, CAL, FOOTPRINT)
            plain._star = None
            assert got == plain.flow(ins, rank, "x")
            keys += 1
    for rank, ins in _hand_made():
        plain = Fabric(STAR, CAL, FOOTPRINT)
        plain._star = None
        assert star.flow(ins, rank, "x") == plain.flow(ins, rank, "x")
    assert keys > 500 and len(star._templates) < len(star._flows)


def test_a_rack_builds_one_spec_per_pattern_not_per_pair():
    t = load_topology("gb200-nvl72")
    s = plan(library.from_size("all_to_all_v", 72, 1 << 20), t, check=False)
    star = Fabric(t, CAL)
    for rank, ins in _instructions(s):
        star.flow(ins, rank, "x")
    assert len(star._flows) > 72 * 70 and len(star._templates) <= 4


def test_cached_gpus_are_not_renamed_onto_others():
    star = Fabric(STAR, CAL, FOOTPRINT)
    src = lambda r: Ref(r, "staging", 0)
    hot = star.flow(Reduce((src(1), src(2)), (Ref(1, "output", 0),), 4096, "fp32", "add", "sm"), 1, "x")
    cold = star.flow(Reduce((src(0), src(2)), (Ref(0, "output", 0),), 4096, "fp32", "add", "sm"), 0, "x")
    assert hot.cap_Bpus > cold.cap_Bpus
    assert hot.resources[0] == star.index["gpu1.hbm"] and cold.resources[0] == star.index["gpu0.hbm"]


@pytest.mark.parametrize("name, size", [("all_to_all_v", 1 << 20), ("all_gather_v", 4096),
                                        ("reduce_scatter_v", 1 << 20)])
def test_nvl72_simulates_the_same_time_with_and_without_renaming(name, size, monkeypatch):
    t = load_topology("gb200-nvl72")
    s = plan(library.from_size(name, 72, size), t, check=False)
    fast = simulate(s, t, record=False)
    monkeypatch.setattr(fabric_mod, "_star_roles", lambda *a: None)
    slow = simulate(s, t, record=False)
    assert fast.time_us == slow.time_us and fast.stats["events"] == slow.stats["events"]


def test_only_uniform_stars_are_renamed():
    assert Fabric(load_topology("rubin-ultra-nvl576"), CAL)._star is not None
    assert Fabric(load_topology("h200-loopback"), CAL)._star is None      # one GPU, no links
    assert Fabric(load_topology("pcie-gen5-8"), CAL)._star is None        # five switches
    assert Fabric(load_topology("mesh-2d-16"), CAL)._star is None         # no switch


def test_a_switch_reduce_without_an_nvls_switch_is_refused_on_a_star_too():
    plain = minimal(4)
    s = Fabric(plain, CAL)
    ins = Reduce((Ref(0, "input", 0), Ref(1, "input", 0)), (Ref(0, "output", 0),), 4096, "fp32", "add", "switch")
    with pytest.raises(ScheduleError, match="needs an in-switch-reduce switch"):
        s.flow(ins, 0, "rank 0, cta 0, instr 0")


def test_latencies_and_signal_rows_on_a_star_are_those_of_each_pair():
    from purlin.topology import path_latency_us
    for topo in (STAR, load_topology("gb200-nvl72")):
        f = Fabric(topo, CAL)
        assert f._star is not None
        for p in range(topo.world):
            row = f.signal_row(p)
            for q in range(topo.world):
                lat = 0.0 if p == q else path_latency_us(topo, p, q)
                assert f.latency_us(p, q) == lat
                assert row[q] == CAL.signal_latency_us + lat
    assert Fabric(STAR, CAL).latency_us(0, 1) == pytest.approx(0.05 + 0.35 + 0.05)
