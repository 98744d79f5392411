"""Walk a Schedule in one valid order, honouring Waits, as if every CTA were resident.

The reference executor and the verifier both ride on this walker, so "what order is
legal" is defined once. State persists across calls (flags and packet tags are never
cleared), which is what lets repeated calls test the epoch scheme.

The order: a queue of runnable CTAs; the one at its head runs until it blocks on a Wait
(or WaitPackets) that is not yet satisfied, or ends; a Notify (PutPackets) that can
satisfy a blocked CTA puts it at the back of the queue. :func:`bursts` gives that order
as runs of consecutive instructions of one CTA, :func:`walk` instruction by instruction.
"""
from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field
from itertools import compress, count, repeat
from operator import add
from typing import Iterator

from purlin.errors import Deadlock
from purlin.snac.intervals import IntervalMap
from purlin.snac.ir import Instruction, Notify, Program, PutPackets, Schedule, Wait, WaitPackets


SIGNAL_KEY = 1 << 32
"""Waiters (and the verifier's flag histories) are keyed ``rank * SIGNAL_KEY + signal``
(signals are below 2**32)."""
WIDE = 8
"""A Wait or Notify naming this many flags or more has them checked or set at C speed;
below it a plain loop costs less than setting that up."""


@dataclass
class SyncState:
    """Absolute flag values (per rank, by signal: a Wait's ~70 lookups stay in one
    small table) and packet tags per (rank, half); survives between calls."""

    calls: int = 0
    flags: defaultdict[int, dict[int, int]] = field(default_factory=lambda: defaultdict(dict))
    tags: dict[tuple[int, int], IntervalMap] = field(default_factory=dict)  # (rank, half)


def walk(s: Schedule, state: SyncState | None = None) -> Iterator[tuple[int, Program, int, Instruction]]:
    """Yield (program index, program, instruction index, instruction) in an order a GPU
    could run them: a Wait is yielded once satisfied; a CTA runs until it blocks.

    Raises Deadlock naming each stuck CTA and what it waits for.
    """
    progs = s.programs
    for k, i0, i1 in bursts(s, state):
        prog = progs[k]
        instrs = prog.instrs
        for i in range(i0, i1):
            yield k, prog, i, instrs[i]


def bursts(s: Schedule, state: SyncState | None = None) -> Iterator[tuple[int, int, int]]:
    """The order of :func:`walk` as (program index, first, end) runs: instructions
    ``first..end-1`` of one program, run one after the other. The walker has executed a
    run (its Notifies and PutPackets are visible) by the time it is yielded.

    Raises Deadlock naming each stuck CTA and what it waits for.

    Examples
    --------
    >>> from purlin.snac import plan
    >>> from purlin.spec import library
    >>> s = plan(library.all_gather(2, 64))
    >>> sum(b - a for _, a, b in bursts(s)) == sum(len(p.instrs) for p in s.programs)
    True
    """
    state = state or SyncState()
    base = state.calls * s.epoch_stride
    half = state.calls % 2
    progs = s.programs
    ptr = [0] * len(progs)
    ready = deque(range(len(progs)))
    queued = [True] * len(progs)
    waiters: dict = {}   # signal key, or ("p", rank) for packets
    # program -> how many leading signals of the Wait it blocked at were already set: flags
    # only rise, so when woken it checks from there (a rack's Waits name 71 flags)
    resume: dict[int, int] = {}
    flags = state.flags
    tags = state.tags
    while ready:
        k = ready.popleft()
        queued[k] = False
        prog = progs[k]
        rank = prog.rank
        rkey = rank * SIGNAL_KEY
        instrs = prog.instrs
        n = len(instrs)
        i = i0 = ptr[k]
        while i < n:
            ins = instrs[i]
            t = type(ins)
            if t is Wait:
                v = base + ins.value
                sigs = ins.signals
                j = resume.pop(k) if i == i0 and k in resume else 0
                x = _unset(flags[rank], sigs, j, v)
                if x is not None:   # woken by that flag, it checks the rest again
                    blocked = sigs[x]
                    resume[k] = x   # its first place from j: all set before
                    waiters.setdefault(rkey + blocked, []).append(k)
                    break
            elif t is Notify:
                _notify(flags, waiters, ins, base + ins.value, ready, queued)
            elif t is WaitPackets:
                m = tags.get((rank, half))
                if m is None or not m.covers(ins.src.offset, ins.src.offset + ins.nbytes, base + ins.value):
                    waiters.setdefault(("p", rank), []).append(k)
                    break
            elif t is PutPackets:
                m = tags.get((ins.dst.rank, half))
                if m is None:
                    m = tags[(ins.dst.rank, half)] = IntervalMap()
                m.assign(ins.dst.offset, ins.dst.offset + ins.nbytes, base + ins.value)
                woken = waiters.pop(("p", ins.dst.rank), None)
                if woken:
                    _wake(woken, ready, queued)
            i += 1
        ptr[k] = i
        if i > i0:
            yield k, i0, i
    stuck = [k for k in range(len(progs)) if ptr[k] < len(progs[k].instrs)]
    if stuck:
        raise Deadlock(_explain(s, stuck, ptr, state, base))
    state.calls += 1


def _unset(row: dict[int, int], sigs: tuple[int, ...], j: int, v: int) -> int | None:
    """The place of the first flag of ``sigs`` from ``j`` on below ``v`` (None: all set);
    over a rack's ~70 flags at C speed, lazily (it stops there)."""
    if len(sigs) - j < WIDE:
        for x in range(j, len(sigs)):
            if row.get(sigs[x], 0) < v:
                return x
        return None
    return next(compress(count(j), map(v.__gt__, map(row.get, sigs[j:] if j else sigs, repeat(0)))), None)


def _notify(flags: defaultdict[int, dict[int, int]], waiters: dict, ins: Notify, v: int,
            ready: deque, queued: list[bool]) -> None:
    """Raise each flag of ``ins`` to ``v`` (flags never fall) and wake its waiters, in
    flag order: a rack's Notify names ~70 flags, so that is done at C speed."""
    peers, sigs = ins.peers, ins.signals
    if len(peers) < WIDE:
        for peer, sig in zip(peers, sigs):
            row = flags[peer]
            if row.get(sig, 0) < v:
                row[sig] = v
            if waiters:
                woken = waiters.pop(peer * SIGNAL_KEY + sig, None)
                if woken:
                    _wake(woken, ready, queued)
        return
    rows = list(map(flags.__getitem__, peers))
    if max(map(dict.get, rows, sigs, repeat(0)), default=0) < v:
        any(map(dict.__setitem__, rows, sigs, repeat(v)))   # each gives None: all run
    else:
        for row, sig in zip(rows, sigs):
            if row.get(sig, 0) < v:
                row[sig] = v
    if waiters:
        keys = map(add, map(SIGNAL_KEY.__mul__, peers), sigs)
        for woken in filter(None, map(waiters.pop, keys, repeat(None))):
            _wake(woken, ready, queued)


def _wake(ks, ready: deque, queued: list[bool]) -> None:
    for k in ks:
        if not queued[k]:
            queued[k] = True
            ready.append(k)


def _explain(s: Schedule, stuck: list[int], ptr: list[int], state: SyncState, base: int) -> str:
    """Name the stuck CTAs; find a wait cycle if there is one."""
    writers: dict[tuple[int, int], tuple[int, int]] = {}
    sent: dict[tuple[int, int], int] = {}
    for k, prog in enumerate(s.programs):
        for ins in prog.instrs:
            if isinstance(ins, Notify):
                for flag in zip(ins.peers, ins.signals):
                    writers[flag] = (k, 0)
                    sent[flag] = max(sent.get(flag, 0), ins.value)
    lines, edge = [], {}
    for k in stuck:
        prog = s.programs[k]
        ins = prog.instrs[ptr[k]]
        where = f"rank {prog.rank}, cta {prog.cta}, instr {ptr[k]}"
        if isinstance(ins, Wait):
            have = {sig: state.flags[prog.rank].get(sig, 0) - base for sig in ins.signals}
            sig = next(x for x in ins.signals if have[x] < ins.value)
            key = (prog.rank, sig)
            if sent.get(key, 0) < ins.value:
                lines.append(f"{where}: Wait on signal {sig} has no matching Notify "
                             f"({sent.get(key, 0)} sent, {ins.value} awaited)")
            else:
                w = writers[key][0]
                edge[k] = w
                wp = s.programs[w]
                lines.append(f"{where}: Wait on signal {sig} for {ins.value} (now {max(have[sig], 0)}); "
                             f"its writer rank {wp.rank} cta {wp.cta} is stuck at instr {ptr[w]}")
        else:
            lines.append(f"{where}: WaitPackets {ins.src} ({ins.nbytes} B) for tag {ins.value} "
                         f"never arrives")
    cycle = _find_cycle(edge)
    head = "deadlock"
    if cycle:
        head = "wait cycle: " + " -> ".join(
            f"rank {s.programs[k].rank} cta {s.programs[k].cta}" for k in cycle + cycle[:1])
    return head + "\n  " + "\n  ".join(lines[:8]) + (f"\n  ... {len(lines) - 8} more" if len(lines) > 8 else "")


def _find_cycle(edge: dict[int, int]) -> list[int]:
    for startk in edge:
        seen, k = [], startk
        while k in edge and k not in seen:
            seen.append(k)
            k = edge[k]
        if k in seen:
            return seen[seen.index(k):]
    return []
