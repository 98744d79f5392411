"""A Fan (one offset of one buffer on many ranks) is only a way of holding Refs: it is
equal to, hashes as, serializes as and verifies and simulates as the tuple of its Refs;
the planner uses one wherever a block's holders (or sources) share an offset."""
import dataclasses
import json
import pickle

import pytest

from purlin.errors import ScheduleError
from purlin.sim import simulate
from purlin.snac import plan
from purlin.snac.ir import Copy, Fan, Reduce, Ref, ref_buffer_set, ref_offsets, ref_ranks
from purlin.snac.serialize import digest, from_json, programs_digest, to_json
from purlin.snac.verify import verify
from purlin.spec import library
from purlin.topology import load_topology, minimal


def _expanded(s):
    """``s`` with every Fan replaced by the tuple of its Refs."""
    def fix(ins):
        if isinstance(ins, (Copy, Reduce)):
            return dataclasses.replace(ins, **{f: tuple(getattr(ins, f)) for f in ("srcs", "dsts")
                                               if isinstance(getattr(ins, f, None), Fan)})
        return ins
    return dataclasses.replace(s, programs=tuple(dataclasses.replace(p, instrs=tuple(map(fix, p.instrs)))
                                                 for p in s.programs))


def _fans(s):
    return [v for p in s.programs for i in p.instrs for v in (getattr(i, "srcs", None), getattr(i, "dsts", None))
            if isinstance(v, Fan)]


def test_a_fan_is_the_tuple_of_its_refs():
    f = Fan((3, 1, 2), "output", 64)
    t = (Ref(3, "output", 64), Ref(1, "output", 64), Ref(2, "output", 64))
    assert tuple(f) == t and f == t and t == f and hash(f) == hash(t)
    assert len(f) == 3 and f[1] == Ref(1, "output", 64) and f[-1] == Ref(2, "output", 64)
    assert f[:2] == Fan((3, 1), "output", 64) == t[:2]
    assert (Ref(0, "input", 0),) + f == (Ref(0, "input", 0),) + t and f + () == t
    assert f != Fan((3, 1, 2), "output", 80) and f != t[:2] and f != Fan((1, 3, 2), "output", 64)
    assert list(ref_ranks(f)) == [3, 1, 2] and list(ref_offsets(f)) == [64] * 3
    assert ref_buffer_set(f) == {"output"} and list(ref_buffer_set(Fan((), "output", 0))) == []
    c = Copy(Ref(0, "input", 0), f, 16)
    assert c == Copy(Ref(0, "input", 0), t, 16) and hash(c) == hash(Copy(Ref(0, "input", 0), t, 16))
    assert pickle.loads(pickle.dumps(c)) == c and str(f) == "output[3,1,2]+64"


@pytest.mark.parametrize("name, pol", [("all_reduce", {"regime": "direct", "atom": "switch"}),
                                       ("all_gather", {"regime": "direct"}),
                                       ("reduce_scatter", {"regime": "direct", "atom": "switch"}),
                                       ("all_gather_v", {"regime": "direct"})])
def test_a_plan_with_fans_is_the_plan_with_their_refs(name, pol):
    """Same JSON, digests, verdict and simulated time as the plan holding Ref tuples; the
    JSON read back (tuples) equals the plan."""
    t = load_topology("gb200-nvl72")
    s = plan(library.from_size(name, 72, 1 << 20), t, pol, check=False)
    assert _fans(s)   # a symmetric layout: every block's holders share its offset
    e = _expanded(s)
    assert not _fans(e)
    assert to_json(s) == to_json(e) and digest(s) == digest(e) and programs_digest(s) == programs_digest(e)
    assert from_json(to_json(s)) == s
    verify(s)
    verify(e)
    a, b = simulate(s, t, record=False), simulate(e, t, record=False)
    assert a.time_us == b.time_us and a.stats["flows"] == b.stats["flows"]


def _with_first_fan(s, **change):
    """``s`` with the first instruction holding a Fan changed: its Fan's fields replaced."""
    progs = list(s.programs)
    for k, p in enumerate(progs):
        for i, ins in enumerate(p.instrs):
            for f in ("srcs", "dsts"):
                v = getattr(ins, f, None)
                if isinstance(v, Fan):
                    instrs = list(p.instrs)
                    instrs[i] = dataclasses.replace(ins, **{f: dataclasses.replace(v, **change)})
                    progs[k] = dataclasses.replace(p, instrs=tuple(instrs))
                    return dataclasses.replace(s, programs=tuple(progs))
    raise AssertionError("no Fan")


def _error(s):
    with pytest.raises(ScheduleError) as e:
        verify(s)
    return str(e.value)


@pytest.mark.parametrize("change", [
    lambda f: {"offset": 1 << 30},                                    # past the buffer
    lambda f: {"ranks": f.ranks[:-1] + (f.ranks[0],)},                # one rank twice: a byte written twice
    lambda f: {"ranks": f.ranks[:-1] + (7,)},                         # past the world
    lambda f: {"ranks": f.ranks[:-1] + (-1,)},                        # a negative rank
    lambda f: {"offset": f.offset + 16},                              # over the next block's bytes
    lambda f: {"ranks": (True,) + f.ranks[1:]},                       # not an integer
])
def test_a_broken_fan_is_named_as_its_refs_would_be(change):
    """A planted bug in a Fan's fields (the fast paths read them, not Refs) gets the error
    the same Refs as a tuple get."""
    s = plan(library.all_gather(4, 4096), minimal(4), {"regime": "direct"}, check=False)
    first = _fans(s)[0]
    bad = _with_first_fan(s, **change(first))
    msg = _error(bad)
    assert msg == _error(_expanded(bad))


def test_a_fan_given_a_list_of_ranks_holds_their_tuple():
    """Ranks given as a list or range (a user building a Schedule by hand) are held as a
    tuple, so the Fan hashes and a wide one verifies as the tuple of its Refs does."""
    assert Fan([3, 1, 2], "output", 64) == Fan((3, 1, 2), "output", 64) and Fan(range(2), "input", 0).ranks == (0, 1)
    s = plan(library.all_gather(20, 20 * 256), minimal(20), {"regime": "direct"}, check=False)
    first = _fans(s)[0]
    listed = _with_first_fan(s, ranks=list(first.ranks))
    assert hash(_fans(listed)[0]) == hash(tuple(first))
    verify(listed)
    bad = _with_first_fan(s, ranks=list(first.ranks[:-1]) + [first.ranks[0]])
    assert _error(bad) == _error(_expanded(bad))


def test_the_planner_keeps_refs_where_holders_differ_in_offset():
    """An AllToAll's holders each get a block at its own offset: no Fan, Refs as ever."""
    s = plan(library.all_to_all(8, 1 << 20), load_topology("hgx-h200-8"), {"regime": "direct"}, check=False)
    assert not _fans(s)
    json.loads(to_json(s))
