"""The Schedule is the whole contract: it names its topology by content, states its
reduction order, hashes, and executors refuse a topology it was not planned for."""
import dataclasses
import inspect
import json
import pickle

import pytest

from purlin.errors import PlanError, ScheduleError, SpecError
from purlin.sim import simulate
from purlin.snac import Policy, plan
from purlin.snac.bind import bind_topology
from purlin.snac.ir import Copy, Notify, Program, Ref, Schedule, TopologyRef, Wait
from purlin.snac.serialize import digest, from_json, to_json
from purlin.snac.verify import verify
from purlin.spec import library
from purlin.topology import load_topology, minimal, topology_digest, with_overrides


def test_a_what_if_topology_travels_with_its_plan():
    """A plan made on twice the link bandwidth simulates on twice the link bandwidth,
    with or without the topology passed again (it used to fall back to the shipped file)."""
    base = load_topology("hgx-h200-8")
    fast = with_overrides(base, link_bandwidth_scale=2)
    c = library.all_reduce(8, 64 << 20)
    s = plan(c, fast, check=False)
    assert s.topology.name == "hgx-h200-8" and s.topology.inline is not None
    alone = simulate(s, record=False).time_us
    assert alone == simulate(s, fast, record=False).time_us
    # the same policy on the shipped file (whose default comes from its codesign table)
    slow = simulate(plan(c, base, s.policy, check=False), record=False).time_us
    assert alone < 0.6 * slow


def test_a_synthetic_topology_keeps_its_numbers():
    t = minimal(4, bandwidth_gbps=10)
    s = plan(library.all_reduce(4, 16 << 20), t, check=False)
    assert simulate(s, calibration="synthetic").time_us == simulate(s, t, "synthetic").time_us
    # 16 MiB over 10 GB/s links: a reduce-scatter and an all-gather each move 3/4 of it
    assert simulate(s, calibration="synthetic").time_us > 2 * 0.75 * (16 << 20) / 10e3


def test_a_shipped_topology_is_named_not_copied():
    s = plan(library.all_gather(8, 1 << 20), "hgx-h200-8", check=False)
    assert s.topology == TopologyRef("hgx-h200-8", topology_digest(load_topology("hgx-h200-8")), 8, None)
    loop = plan(library.all_gather(4, 1 << 20), "h200-loopback", check=False)
    assert (loop.topology.name, loop.topology.world, loop.topology.inline) == ("h200-loopback", 4, None)
    assert bind_topology(loop).world == 4


def test_an_executor_refuses_another_topology():
    s = plan(library.all_reduce(8, 1 << 20), "hgx-h200-8", check=False)
    with pytest.raises(ScheduleError, match=r"planned for topology hgx-h200-8 \(digest [0-9a-f]{16}\), "
                                            r"but was given hgx-b200-8 .*plan it again on hgx-b200-8"):
        simulate(s, "hgx-b200-8")
    with pytest.raises(ScheduleError, match="but was given hgx-h200-8"):
        simulate(s, with_overrides(load_topology("hgx-h200-8"), link_latency_scale=0.5))
    with pytest.raises(ScheduleError, match="the schedule has 8 ranks, topology minimal-4 has 4"):
        simulate(s, minimal(4))


def test_a_changed_shipped_file_is_refused():
    s = plan(library.all_gather(8, 1 << 20), "hgx-h200-8", check=False)
    stale = dataclasses.replace(s, topology=dataclasses.replace(s.topology, digest="0" * 16))
    with pytest.raises(ScheduleError, match="planned for topology hgx-h200-8 with digest 0000000000000000, "
                                            "but the shipped file hgx-h200-8.yaml now has digest"):
        simulate(stale)


def test_a_hand_built_schedule_needs_a_topology():
    c = library.all_gather(1, 16)
    s = Schedule(c, (Program(0, 0, "local", (Copy(Ref(0, "input", 0), (Ref(0, "output", 0),), 16),)),),
                 0, 0, 1, 2)
    with pytest.raises(ScheduleError, match="names no topology .*pass the topology"):
        simulate(s)
    assert simulate(s, minimal(1), "synthetic").time_us > 0


def test_round_trip_keeps_topology_and_reduction():
    t = minimal(4, bandwidth_gbps=25, latency_us=0.3)
    s = plan(library.reduce_scatter(4, 4096), t, Policy(regime="throughput", algorithm="ring"))
    back = from_json(to_json(s))
    assert back == s and digest(back) == digest(s) and hash(back) == hash(s)
    assert back.reduction == "any" and bind_topology(back) == t
    assert simulate(back, calibration="synthetic").time_us == simulate(s, t, "synthetic").time_us


def test_schedules_hash_by_content():
    a = plan(library.all_reduce(4, 1024), check=False)
    b = plan(library.all_reduce(4, 1024), check=False)
    assert a is not b and a == b and hash(a) == hash(b) and len({a, b}) == 1
    c = plan(library.all_reduce(4, 2048), check=False)
    assert {a: 1, c: 2}[b] == 1 and hash(a) != hash(c)


def test_reduction_order_is_in_the_ir_and_checked():
    ring = plan(library.all_reduce(4, 4096), minimal(4), Policy(regime="throughput", algorithm="ring"))
    assert ring.reduction == "any"
    # claiming rank order for a ring's hop-by-hop sums is caught by the verifier
    with pytest.raises(ScheduleError, match="holds reduce.* but the spec needs reduce"):
        verify(dataclasses.replace(ring, reduction="rank"))
    with pytest.raises(ScheduleError, match="reduction 'fastest': must be one of rank, any"):
        verify(dataclasses.replace(ring, reduction="fastest"))
    one = plan(library.all_reduce(4, 4096), minimal(4), Policy(regime="throughput", algorithm="two_shot"))
    assert one.reduction == "rank"
    assert plan(library.all_gather(4, 64)).reduction == "rank"


def test_deterministic_is_retired():
    assert "deterministic" not in Policy().to_dict()
    assert Policy.from_dict({"regime": "latency", "deterministic": True}) == Policy(regime="latency")
    with pytest.raises(PlanError, match="policy.deterministic was removed.*drop the field"):
        Policy.from_dict({"deterministic": False})


def test_a_malformed_inline_topology_is_an_error():
    s = plan(library.all_gather(2, 64), minimal(2), check=False)
    bad = json.loads(s.topology.inline)
    bad["links"][0] = ["gpu0"]
    broken = dataclasses.replace(s, topology=dataclasses.replace(s.topology, inline=json.dumps(bad)))
    with pytest.raises(ScheduleError.__mro__[1], match=r"links\[0\]: expected a list of 6 values"):
        bind_topology(broken)


def test_world_mismatch_from_the_planner_names_both():
    with pytest.raises(SpecError, match="topology hgx-b200-8 has 8 ranks, the collective has 2"):
        plan(library.all_gather(2, 64), load_topology("hgx-b200-8"))


def test_quick_constructors_keep_the_dataclass_contract():
    """The IR's constructors store fields through slot descriptors (quick_init): the same
    parameters and defaults, the one-or-many rule of Notify and Wait, equality, hashing,
    pickling and replace as before, and a field still cannot be assigned."""
    r = Ref(1, "output", 16)
    assert (r.rank, r.buffer, r.offset) == (1, "output", 16) and r + 8 == Ref(1, "output", 24)
    assert str(inspect.signature(Copy)) == "(src, dsts, nbytes, atom='sm')"
    assert Copy(r, (r,), 16).atom == "sm" and Copy(r, (r,), 16, atom="ce").atom == "ce"
    assert Notify(3, 4, 1) == Notify((3,), (4,), 1) and Wait([1, 2], 3).signals == (1, 2)
    assert hash(Ref(1, "output", 16)) == hash(r) and pickle.loads(pickle.dumps(Copy(r, (r,), 16))) == Copy(r, (r,), 16)
    assert dataclasses.replace(r, offset=5) == Ref(1, "output", 5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.rank = 2
    with pytest.raises(TypeError, match="offset"):
        Ref(1, "output")
