"""Planted bugs are each caught with a readable reason."""
from dataclasses import replace

import pytest

from purlin.errors import Deadlock, ScheduleError
from purlin.snac import Copy, Notify, Policy, Ref, Wait, plan
from purlin.snac.verify import verify
from purlin.spec import library


@pytest.fixture
def ag():
    return plan(library.all_gather(4, 256), policy=Policy(regime="throughput", chunk_nbytes=64,
                                                           staging_nbytes=128))


def edit(s, k, instrs):
    progs = list(s.programs)
    progs[k] = replace(progs[k], instrs=tuple(instrs))
    return replace(s, programs=tuple(progs))


def first(s, kind, pred=lambda p, ins: True):
    for k, p in enumerate(s.programs):
        for i, ins in enumerate(p.instrs):
            if isinstance(ins, kind) and pred(p, ins):
                return k, i
    raise AssertionError("nothing to mutate")


def test_dropped_notify_is_a_wait_without_match(ag):
    k, i = first(ag, Notify)
    bad = edit(ag, k, ag.programs[k].instrs[:i] + ag.programs[k].instrs[i + 1:])
    with pytest.raises(Deadlock, match=r"Wait on signal \d+ has no matching Notify \(0 sent, 1 awaited\)"):
        verify(bad)


def test_wrong_offset_is_a_double_write(ag):
    k, i = first(ag, Copy, lambda p, ins: p.role == "consume")
    ins = ag.programs[k].instrs[i]
    moved = replace(ins, dsts=(replace(ins.dsts[0], offset=ins.dsts[0].offset + 64),))
    bad = edit(ag, k, ag.programs[k].instrs[:i] + (moved,) + ag.programs[k].instrs[i + 1:])
    with pytest.raises(ScheduleError, match="already written by rank .* written exactly once"):
        verify(bad)


def test_wrong_source_is_wrong_data(ag):
    k, i = first(ag, Copy, lambda p, ins: p.role == "put")
    ins = ag.programs[k].instrs[i]
    moved = replace(ins, src=replace(ins.src, offset=(ins.src.offset + 64) % 256))
    bad = edit(ag, k, ag.programs[k].instrs[:i] + (moved,) + ag.programs[k].instrs[i + 1:])
    with pytest.raises(ScheduleError, match=r"output rank \d, block '\d', bytes .* holds input\[\d\]\+\d+ but the spec needs"):
        verify(bad)


def test_early_staging_overwrite_is_caught(ag):
    """Drop one peer's drain wait: the put CTA reuses a slot that peer may still read."""
    k, i = first(ag, Wait, lambda p, ins: p.role == "put")
    ins = ag.programs[k].instrs[i]
    assert len(ins.signals) == 3   # a drain flag from each of the 3 readers
    fewer = replace(ins, signals=ins.signals[1:])
    bad = edit(ag, k, ag.programs[k].instrs[:i] + (fewer,) + ag.programs[k].instrs[i + 1:])
    with pytest.raises(ScheduleError, match="overwrites staging\\[\\d\\] .* before rank .* finished reading them"):
        verify(bad)


def test_missing_wait_is_a_race(ag):
    k, i = first(ag, Wait, lambda p, ins: p.role == "consume")
    bad = edit(ag, k, ag.programs[k].instrs[:i] + ag.programs[k].instrs[i + 1:])
    with pytest.raises(ScheduleError, match="without waiting for it|missing Wait for their producer"):
        verify(bad)


def test_every_wait_the_planner_inserts_is_needed(ag):
    for k, p in enumerate(ag.programs):
        for i, ins in enumerate(p.instrs):
            if isinstance(ins, Wait):
                with pytest.raises(ScheduleError):
                    verify(edit(ag, k, p.instrs[:i] + p.instrs[i + 1:]))


@pytest.mark.parametrize("name", ["all_gather", "all_reduce", "all_to_all_v"])
def test_every_direct_handshake_is_needed_and_named(name):
    """In the direct regime peers read a rank's input and write its output in place; each
    Wait is a start or end handshake, and dropping any one is caught and named."""
    s = plan(library.from_size(name, 8, 64 << 10, "fp32", seed=2), "hgx-h200-8",
             Policy(regime="direct", put_ctas=2, consumer_ctas=2))
    reasons = set()
    for k, p in enumerate(s.programs):
        for i, ins in enumerate(p.instrs):
            if isinstance(ins, Wait):
                with pytest.raises((ScheduleError, Deadlock)) as e:
                    verify(edit(s, k, p.instrs[:i] + p.instrs[i + 1:]))
                reasons.add("start" if "missing start handshake" in str(e.value) else
                            "end" if "missing end handshake" in str(e.value) else "other")
    assert {"start", "end"} <= reasons, reasons


def test_wait_cycle_names_both_ctas():
    s = plan(library.all_gather(2, 64), policy=Policy(regime="throughput"))
    sig = s.num_signals
    progs = []
    for p in s.programs:
        if p.cta == 0:   # rank r cta 0 waits for rank 1-r before it notifies it
            p = replace(p, instrs=(Wait(sig, 1),) + p.instrs + (Notify(1 - p.rank, sig, 1),))
        progs.append(p)
    bad = replace(s, programs=tuple(progs), num_signals=sig + 1)
    with pytest.raises(Deadlock, match=r"wait cycle: rank \d cta 0 -> rank \d cta 0 -> rank \d cta 0"):
        verify(bad)


def test_out_of_bounds_offset():
    s = plan(library.all_to_all(2, 64), policy=Policy(regime="direct"))
    k, i = first(s, Copy)
    ins = s.programs[k].instrs[i]
    bad = edit(s, k, [replace(ins, dsts=(Ref(ins.dsts[0].rank, "output", 100),))])
    with pytest.raises(ScheduleError, match=r"runs outside output of rank \d \(128 B\)"):
        verify(bad)


@pytest.mark.parametrize("kind", ["float", "half", "bool", "numpy"])
def test_an_address_must_be_an_integer(kind):
    """A float offset (even one equal to an integer) or a bool is named; numpy's integers
    are integers."""
    import numpy as np
    s = plan(library.all_to_all(2, 64), policy=Policy(regime="direct"))
    k, i = first(s, Copy, lambda p, ins: ins.dsts[0].offset == 0)
    ins = s.programs[k].instrs[i]
    d = ins.dsts[0]
    at = {"float": 0.0, "half": 0.5, "bool": False, "numpy": np.int64(0)}[kind]
    instrs = list(s.programs[k].instrs)
    instrs[i] = replace(ins, dsts=(Ref(d.rank, d.buffer, at),) + ins.dsts[1:])
    bad = edit(s, k, instrs)
    if kind == "numpy":
        assert verify(bad) is bad
        return
    with pytest.raises(ScheduleError, match=rf"Copy address .*: rank and offset must be integers "
                                            rf"\(got int and {type(at).__name__}\)"):
        verify(bad)


def test_two_writers_on_one_signal():
    s = plan(library.all_gather(3, 64), policy=Policy(regime="throughput"))
    notifies = [(k, i) for k, p in enumerate(s.programs) for i, ins in enumerate(p.instrs)
                if isinstance(ins, Notify)]
    k1, i1 = notifies[0]
    target = s.programs[k1].instrs[i1]
    k2 = next(k for k, _ in notifies if s.programs[k].cta != s.programs[k1].cta or
              s.programs[k].rank != s.programs[k1].rank)
    bad = edit(s, k2, s.programs[k2].instrs + (Notify(target.peers[0], target.signals[0], 1),))
    with pytest.raises(ScheduleError, match="one writer per signal"):
        verify(bad)


# ---- the fast verifier against the one it replaced ------------------------------------
# tests/snac/verify_oracle.py is the verifier of commit 3934e54 word for word. Every
# schedule below, and every planted bug in it, must get the same verdict from both: the
# same exception type and message, or none. The bugs are planted at random (a dropped,
# duplicated, moved or swapped instruction; a shifted offset; a changed signal, value,
# peer or rank), so each shortcut of the fast one (clocks over tracked programs only,
# rank masks for the call windows, deferred output writes, interned contents) meets
# faults it must not miss.
import random  # noqa: E402
import re  # noqa: E402
import zlib  # noqa: E402

from purlin.snac import Reduce, PutPackets, WaitPackets  # noqa: E402
from tests.snac import verify_oracle  # noqa: E402


def _verdict(fn, s):
    """(exception type, message) or None. Where a wrong output is described, the end of
    the byte range is left out: the old verifier cut contents at every earlier read of
    the same input bytes (it kept readers of inputs), the new one at every change of
    contents, so a run of equally wrong bytes may be reported whole."""
    try:
        fn(s)
    except (ScheduleError, Deadlock) as e:
        return type(e).__name__, re.sub(r"bytes (\d+)\.\.\d+: holds", r"bytes \1..: holds", str(e))
    return None


def _oracle(s):
    """The old verifier on ``s`` with its Notifies and Waits split one a flag (the schema
    it read), its messages naming the instructions of ``s``."""
    flat, at = verify_oracle.singles(s)
    of = {(p.rank, p.cta): k for k, p in enumerate(s.programs)}

    def back(m):
        k = of.get((int(m["r"]), int(m["c"])))
        if k is None:
            return m[0]
        j = int(m["i"])
        i = at[k][j] if j < len(at[k]) else len(s.programs[k].instrs)
        return f"rank {m['r']}{m['a']}cta {m['c']}{m['b']}instr {i}"
    try:
        verify_oracle.verify(flat)
    except (ScheduleError, Deadlock) as e:
        raise type(e)(re.sub(r"rank (?P<r>\d+)(?P<a>,? )cta (?P<c>\d+)(?P<b>, | is stuck at )"
                             r"instr (?P<i>\d+)", back, str(e))) from None
    return s


def _mutate(s, rng):
    """One random planted bug in ``s``."""
    progs = list(s.programs)
    k = rng.randrange(len(progs))
    instrs = list(progs[k].instrs)
    if not instrs:
        return s
    i = rng.randrange(len(instrs))
    ins = instrs[i]
    kind = rng.choice(["drop", "dup", "swap", "move", "offset", "value", "signal", "peer", "rank"])
    if kind == "drop":
        del instrs[i]
    elif kind == "dup":
        instrs.insert(i, ins)
    elif kind == "swap" and i + 1 < len(instrs):
        instrs[i], instrs[i + 1] = instrs[i + 1], instrs[i]
    elif kind == "move" and len(progs) > 1:
        del instrs[i]
        j = rng.randrange(len(progs))
        if j != k:
            other = list(progs[j].instrs)
            other.insert(rng.randrange(len(other) + 1), ins)
            progs[j] = replace(progs[j], instrs=tuple(other))
    elif kind in ("offset", "rank") and isinstance(ins, (Copy, Reduce, PutPackets, WaitPackets)):
        fields = [f for f in ("src", "dst", "srcs", "dsts") if hasattr(ins, f)]
        f = rng.choice(fields)
        refs = getattr(ins, f)
        if isinstance(refs, Fan) and rng.random() < 0.5:   # a bug in the Fan's own fields
            if kind == "offset":
                bad = replace(refs, offset=max(0, refs.offset + rng.choice([-64, -16, 16, 64])))
            else:
                ranks = list(refs.ranks)
                j = rng.randrange(len(ranks))
                ranks[j] = (ranks[j] + rng.choice([1, -1])) % s.world
                bad = replace(refs, ranks=tuple(ranks))
            instrs[i] = replace(ins, **{f: bad})
            progs[k] = replace(progs[k], instrs=tuple(instrs))
            return replace(s, programs=tuple(progs))
        many = not isinstance(refs, Ref)   # a tuple of Refs or a Fan (planted as a tuple)
        lst = list(refs) if many else [refs]
        j = rng.randrange(len(lst))
        r = lst[j]
        if kind == "offset":
            lst[j] = replace(r, offset=max(0, r.offset + rng.choice([-64, -16, 16, 64])))
        else:
            lst[j] = replace(r, rank=(r.rank + rng.choice([1, -1])) % s.world)
        instrs[i] = replace(ins, **{f: tuple(lst) if many else lst[0]})
    elif kind == "value" and hasattr(ins, "value"):
        instrs[i] = replace(ins, value=max(1, ins.value + rng.choice([-1, 1])))
    elif kind == "signal" and isinstance(ins, (Wait, Notify)):   # one of its flags
        sigs = list(ins.signals)
        j = rng.randrange(len(sigs))
        sigs[j] = (sigs[j] + 1) % s.num_signals
        instrs[i] = replace(ins, signals=tuple(sigs))
    elif kind == "peer" and isinstance(ins, Notify):
        peers = list(ins.peers)
        j = rng.randrange(len(peers))
        peers[j] = (peers[j] + 1) % s.world
        instrs[i] = replace(ins, peers=tuple(peers))
    progs[k] = replace(progs[k], instrs=tuple(instrs))
    return replace(s, programs=tuple(progs))


CASES = [(name, w, size, pol) for name in library.PURLIN_SEVEN for w, size in ((3, 1 << 10), (4, 8 << 10))
         for pol in (Policy(regime="latency"), Policy(regime="throughput", chunk_nbytes=512, staging_nbytes=2048),
                     Policy(regime="direct", put_ctas=2, consumer_ctas=2),
                     Policy(regime="throughput", algorithm="ring", chunk_nbytes=512, staging_nbytes=4096))]


@pytest.mark.parametrize("name, world, size, pol", CASES,
                         ids=[f"{n}-w{w}-{s}-{p.regime}-{p.algorithm}" for n, w, s, p in CASES])
def test_fast_verifier_agrees_with_the_old_one_on_planted_bugs(name, world, size, pol):
    c = library.from_size(name, world, size, "fp32", seed=1)
    try:
        s = plan(c, policy=pol, check=False)
    except Exception as e:   # a policy this collective does not take
        pytest.skip(str(e))
    _agrees_on_mutants(s, f"{name}{world}{size}{pol.regime}{pol.algorithm}")


def _agrees_on_mutants(s, seed: str) -> None:
    """verify and the oracle accept ``s`` and give the same verdict on 40 mutants of it."""
    assert _verdict(verify, s) is None and _verdict(_oracle, s) is None
    rng = random.Random(zlib.crc32(seed.encode()))
    found = 0
    for _ in range(40):
        bad = _mutate(s, rng)
        want = _verdict(_oracle, bad)
        assert _verdict(verify, bad) == want
        found += want is not None
    assert found >= 8   # most planted bugs are bugs


@pytest.mark.parametrize("name", ["all_gather", "all_reduce", "reduce_scatter", "all_to_all"])
def test_fast_verifier_agrees_with_the_old_one_on_wide_handshakes(name):
    """Direct plans of 20 ranks: Waits and Notifies name 19 flags, so the verifier and the
    walk take their C-speed paths for wide ones (and a CTA 0 notifies its flags twice)."""
    from purlin.topology import minimal
    c = library.from_size(name, 20, 20 << 10, "fp32", seed=1)
    s = plan(c, minimal(20), Policy(regime="direct"), check=False)
    assert max(len(i.signals) for p in s.programs for i in p.instrs if type(i) is Wait) >= 16
    _agrees_on_mutants(s, name)


# ---- each shortcut of the fast verifier, on a bug only it could miss --------------------
from purlin.snac.ir import Fan, Program, Schedule  # noqa: E402


def _hand(programs, world=3, nbytes=64, num_signals=4, name="all_gather"):
    c = library.all_gather(world, nbytes) if name == "all_gather" else library.all_reduce(world, nbytes)
    return Schedule(c, tuple(programs), staging_nbytes=4 * nbytes, packets_nbytes=4 * nbytes,
                    num_signals=num_signals, epoch_stride=16)


def test_a_race_on_a_byte_range_touched_once_each_is_caught():
    """The writer and the reader each touch staging[0] once: both must be tracked."""
    w = Program(0, 0, "put", (Copy(Ref(0, "input", 0), (Ref(0, "staging", 0),), 64),))
    r = Program(0, 1, "get", (Copy(Ref(0, "staging", 0), (Ref(0, "output", 0),), 64),))
    ok_r = Program(0, 1, "get", (Wait(0, 1),) + r.instrs)
    ok_w = Program(0, 0, "put", w.instrs + (Notify(0, 0, 1),))
    assert _verdict(verify, _hand([ok_w, ok_r], world=1)) is None
    bad = _hand([w, Program(0, 1, "get", (Copy(Ref(0, "staging", 0), (Ref(0, "output", 0),), 64),))], world=1)
    assert _verdict(verify, bad) == _verdict(_oracle, bad)
    with pytest.raises(ScheduleError, match="reads staging|without waiting"):
        verify(bad)


def test_a_double_output_write_found_after_the_walk_names_the_later_writer():
    """Output writes are checked for overlap only after the walk; the report is still the
    first offending write in walk order, naming the earlier one."""
    a = Program(0, 0, "a", (Copy(Ref(0, "input", 0), (Ref(0, "output", 0),), 64),))
    b = Program(0, 1, "b", (Copy(Ref(0, "input", 0), (Ref(0, "output", 32),), 64),))
    bad = _hand([a, b], world=1, nbytes=128)
    with pytest.raises(ScheduleError, match=r"rank 0, cta 1, instr 0: writes output\[0\] bytes 32..64 "
                                            r"already written by rank 0, cta 0, instr 0"):
        verify(bad)
    assert _verdict(verify, bad) == _verdict(_oracle, bad)


def test_an_output_read_during_the_walk_sees_its_deferred_writes():
    """An output read by another CTA without a wait is a race even though output writes
    are deferred: the read turns the output back into shadowed memory first."""
    a = Program(0, 0, "a", (Copy(Ref(0, "input", 0), (Ref(0, "output", 0),), 64),))
    b = Program(0, 1, "b", (Copy(Ref(0, "output", 0), (Ref(0, "staging", 0),), 64),))
    bad = _hand([a, b], world=1)
    assert _verdict(verify, bad) == _verdict(_oracle, bad)
    with pytest.raises(ScheduleError, match="without waiting|before anything wrote"):
        verify(bad)


def _relay_end(hops: bool):
    """Rank 0 writes rank 1's output; rank 0 learns rank 1 has started through rank 1's
    own notify, and rank 1's end is ordered after the write only through rank 2 (0
    notifies 2, 2 notifies 1) when ``hops``: the end window needs the two-hop chain."""
    n = 64
    p0 = Program(0, 0, "w", (Wait(0, 1), Copy(Ref(0, "input", 0), (Ref(1, "output", 0),), n),
                             Copy(Ref(0, "input", 0), (Ref(0, "output", 0),), n))
                 + ((Notify(2, 0, 1),) if hops else ()))
    p1 = Program(1, 0, "o", (Notify(0, 0, 1), Copy(Ref(1, "input", 0), (Ref(1, "output", n),), n))
                 + ((Wait(0, 1),) if hops else ()))
    p2 = Program(2, 0, "m", ((Wait(0, 1), Notify(1, 0, 1)) if hops else ())
                 + (Copy(Ref(2, "input", 0), (Ref(2, "output", 2 * n),), n),))
    c = library.all_gather(3, n)
    return Schedule(c, (p0, p1, p2), staging_nbytes=0, packets_nbytes=0, num_signals=1, epoch_stride=4)


def test_the_end_window_follows_a_chain_through_a_third_rank():
    ok = _relay_end(hops=True)
    assert _verdict(_oracle, ok) == _verdict(verify, ok)
    bad = _relay_end(hops=False)
    assert _verdict(verify, bad) == _verdict(_oracle, bad)
    with pytest.raises(ScheduleError, match=r"rank 0, cta 0, instr 1: writes output\[1\] with no order "
                                            r"before rank 1's CTAs all end"):
        verify(bad)


def test_the_start_window_follows_a_chain_through_a_third_rank():
    """Rank 0 reads rank 1's input after a wait on rank 2, which waited on rank 1: rank
    1 has started, two hops away. Without rank 1's notify to rank 2, it has not."""
    n = 64
    for chained in (True, False):
        p0 = Program(0, 0, "r", (Wait(0, 1), Copy(Ref(1, "input", 0), (Ref(0, "output", n),), n),
                                 Copy(Ref(0, "input", 0), (Ref(0, "output", 0),), n), Notify(1, 0, 1)))
        p1 = Program(1, 0, "o", ((Notify(2, 0, 1),) if chained else ())
                     + (Copy(Ref(1, "input", 0), (Ref(1, "output", n),), n), Wait(0, 1)))
        p2 = Program(2, 0, "m", ((Wait(0, 1),) if chained else ()) + (Notify(0, 0, 1),))
        s = Schedule(library.all_gather(3, n), (p0, p1, p2), staging_nbytes=0, packets_nbytes=0,
                     num_signals=1, epoch_stride=4)
        want = _verdict(_oracle, s)
        assert _verdict(verify, s) == want
        if not chained:
            assert want and "missing start handshake" in want[1]


def _walk_checking_every_flag(s, calls: int) -> list[tuple[int, int]]:
    """The walker's order, Waits and Notifies only, a woken Wait checking all its flags
    again (the walker before it resumed at the blocked flag)."""
    from collections import deque
    flags, order = {}, []
    for call in range(calls):
        base, ptr = call * s.epoch_stride, [0] * len(s.programs)
        ready, queued, waiters = deque(range(len(s.programs))), [True] * len(s.programs), {}
        while ready:
            k = ready.popleft()
            queued[k] = False
            prog = s.programs[k]
            while ptr[k] < len(prog.instrs):
                ins = prog.instrs[ptr[k]]
                if type(ins) is Wait:
                    late = [g for g in ins.signals if flags.get((prog.rank, g), 0) < base + ins.value]
                    if late:
                        waiters.setdefault((prog.rank, late[0]), []).append(k)
                        break
                elif type(ins) is Notify:
                    for peer, g in zip(ins.peers, ins.signals):
                        flags[(peer, g)] = max(flags.get((peer, g), 0), base + ins.value)
                        for w in waiters.pop((peer, g), []):
                            if not queued[w]:
                                queued[w] = True
                                ready.append(w)
                order.append((k, ptr[k]))
                ptr[k] += 1
    return order


@pytest.mark.parametrize("name,world,size", [("all_gather", 72, 1 << 20), ("all_reduce", 72, 1 << 20),
                                             ("all_reduce", 8, 1 << 16)])
def test_the_walk_resumes_a_blocked_wait_in_the_old_order(name, world, size):
    """A Wait blocked on its j-th flag checks from there when woken (flags only rise), and
    walks in the very order a walk that checks every flag again walks; two calls in a
    row, so the epochs' values are exercised too."""
    from purlin.snac.walk import SyncState, bursts, walk
    from purlin.topology import load_topology, minimal
    topo = load_topology("gb200-nvl72") if world == 72 else minimal(world)
    s = plan(library.from_size(name, world, size), topo, Policy(regime="direct"), check=False)
    state = SyncState()
    got = [(k, i) for _ in range(2) for k, _, i, _ in walk(s, state)]
    assert got == _walk_checking_every_flag(s, 2)
    # the case the shortcut is for: some wide Wait blocks, and is woken, within the call
    woken = [i0 for k, i0, _ in bursts(s) if type(s.programs[k].instrs[i0]) is Wait
             and len(s.programs[k].instrs[i0].signals) > 1]
    assert woken or world < 72


def test_signal_lists_are_checked_for_type_and_range():
    import numpy as np

    from purlin.snac.static import _ints
    assert _ints((0, 3, 1), 0, 4)
    for bad in ((), [1], (0, 4), (-1, 2), (1, True), (1.0,), (1, "2"), (np.int64(1),)):
        assert not _ints(bad, 0, 4), bad


@pytest.mark.parametrize("at", [0, 1, -1])
def test_an_output_read_after_a_wide_broadcast_sees_its_writes(at):
    """A broadcast to more than a few outputs is deferred as one record; an output read
    during the walk spreads the records over the ranks first, in walk order. A read of
    another rank's output (with no wait for its writer, or one that happens to be
    ordered), planted in each program at the start, middle or end: the same verdict as
    the old verifier, and the schedule without it passes."""
    from purlin.topology import minimal
    c = library.from_size("all_gather", 12, 12 << 10, "fp32", seed=1)
    s = plan(c, minimal(12), Policy(regime="direct"), check=False)
    assert max(len(i.dsts) for p in s.programs for i in p.instrs if type(i) is Copy) == 12
    assert _verdict(verify, s) is None
    found = 0
    for k, p in enumerate(s.programs[::7]):
        instrs = list(p.instrs)
        read = Copy(Ref((p.rank + 5) % 12, "output", 1024), (Ref(p.rank, "staging", 0),), 64)
        instrs.insert(len(instrs) // 2 if at == 1 else len(instrs) if at == -1 else 0, read)
        progs = list(s.programs)
        progs[k * 7] = replace(p, instrs=tuple(instrs))
        bad = replace(s, programs=tuple(progs))
        want = _verdict(_oracle, bad)
        assert _verdict(verify, bad) == want
        found += want is not None
    assert found


def test_a_wide_broadcast_stored_twice_is_a_double_write():
    """Two records of one broadcast (deferred as a record each) overlap on every rank: the
    output check finds it, and the walk without deferral names the second store."""
    from purlin.topology import minimal
    c = library.from_size("all_gather", 12, 12 << 10, "fp32", seed=1)
    s = plan(c, minimal(12), Policy(regime="direct"), check=False)
    k, p = next((k, p) for k, p in enumerate(s.programs) if any(type(i) is Copy for i in p.instrs))
    j = next(j for j, i in enumerate(p.instrs) if type(i) is Copy)
    progs = list(s.programs)
    progs[k] = replace(p, instrs=p.instrs[:j + 1] + (p.instrs[j],) + p.instrs[j + 1:])
    bad = replace(s, programs=tuple(progs))
    with pytest.raises(ScheduleError, match=rf"instr {j + 1}: writes output\[\d+\] bytes .* already written by "
                                            rf"rank {p.rank}, cta {p.cta}, instr {j} "):
        verify(bad)
    assert _verdict(verify, bad) == _verdict(_oracle, bad)
