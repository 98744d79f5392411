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
    """Drop a drain wait: the put CTA reuses a slot a peer may still read."""
    k, i = first(ag, Wait, lambda p, ins: p.role == "put")
    bad = edit(ag, k, ag.programs[k].instrs[:i] + ag.programs[k].instrs[i + 1:])
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


def test_two_writers_on_one_signal():
    s = plan(library.all_gather(3, 64), policy=Policy(regime="throughput"))
    notifies = [(k, i) for k, p in enumerate(s.programs) for i, ins in enumerate(p.instrs)
                if isinstance(ins, Notify)]
    k1, i1 = notifies[0]
    target = s.programs[k1].instrs[i1]
    k2 = next(k for k, _ in notifies if s.programs[k].cta != s.programs[k1].cta or
              s.programs[k].rank != s.programs[k1].rank)
    bad = edit(s, k2, s.programs[k2].instrs + (Notify(target.peer, target.signal, 1),))
    with pytest.raises(ScheduleError, match="one writer per signal"):
        verify(bad)
