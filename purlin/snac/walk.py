"""Walk a Schedule in one valid order, honouring Waits, as if every CTA were resident.

The reference executor and the verifier both ride on this walker, so "what order is
legal" is defined once. State persists across calls (flags and packet tags are never
cleared), which is what lets repeated calls test the epoch scheme.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Iterator

from purlin.errors import Deadlock
from purlin.snac.intervals import IntervalMap
from purlin.snac.ir import Instruction, Notify, Program, PutPackets, Schedule, Wait, WaitPackets


@dataclass
class SyncState:
    """Absolute flag values and packet tags per rank; survives between calls."""

    calls: int = 0
    flags: dict[tuple[int, int], int] = field(default_factory=dict)
    tags: dict[tuple[int, int], IntervalMap] = field(default_factory=dict)  # (rank, half)


def walk(s: Schedule, state: SyncState | None = None) -> Iterator[tuple[int, Program, int, Instruction]]:
    """Yield (program index, program, instruction index, instruction) in an order a GPU
    could run them: a Wait is yielded once satisfied; a CTA runs until it blocks.

    Raises Deadlock naming each stuck CTA and what it waits for.
    """
    state = state or SyncState()
    base = state.calls * s.epoch_stride
    half = state.calls % 2
    progs = s.programs
    ptr = [0] * len(progs)
    ready = deque(range(len(progs)))
    queued = [True] * len(progs)
    waiters: dict[tuple, list[int]] = {}
    flags = state.flags
    while ready:
        k = ready.popleft()
        queued[k] = False
        prog = progs[k]
        instrs = prog.instrs
        while ptr[k] < len(instrs):
            ins = instrs[ptr[k]]
            t = type(ins)
            if t is Wait:
                if flags.get((prog.rank, ins.signal), 0) < base + ins.value:
                    waiters.setdefault(("s", prog.rank, ins.signal), []).append(k)
                    break
            elif t is WaitPackets:
                tags = state.tags.setdefault((prog.rank, half), IntervalMap())
                lo, hi = ins.src.offset, ins.src.offset + ins.nbytes
                pos = lo
                ok = True
                for a, b, v in tags.query(lo, hi):
                    if a > pos or v != base + ins.value:
                        ok = False
                        break
                    pos = b
                if not ok or pos < hi:
                    waiters.setdefault(("p", prog.rank), []).append(k)
                    break
            yield k, prog, ptr[k], ins
            ptr[k] += 1
            if t is Notify:
                key = (ins.peer, ins.signal)
                flags[key] = max(flags.get(key, 0), base + ins.value)
                _wake(waiters.pop(("s",) + key, ()), ready, queued)
            elif t is PutPackets:
                state.tags.setdefault((ins.dst.rank, half), IntervalMap()).assign(
                    ins.dst.offset, ins.dst.offset + ins.nbytes, base + ins.value)
                _wake(waiters.pop(("p", ins.dst.rank), ()), ready, queued)
    stuck = [k for k in range(len(progs)) if ptr[k] < len(progs[k].instrs)]
    if stuck:
        raise Deadlock(_explain(s, stuck, ptr, state, base))
    state.calls += 1


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
                writers[(ins.peer, ins.signal)] = (k, 0)
                sent[(ins.peer, ins.signal)] = max(sent.get((ins.peer, ins.signal), 0), ins.value)
    lines, edge = [], {}
    for k in stuck:
        prog = s.programs[k]
        ins = prog.instrs[ptr[k]]
        where = f"rank {prog.rank}, cta {prog.cta}, instr {ptr[k]}"
        if isinstance(ins, Wait):
            key = (prog.rank, ins.signal)
            have = state.flags.get(key, 0) - base
            if sent.get(key, 0) < ins.value:
                lines.append(f"{where}: Wait on signal {ins.signal} has no matching Notify "
                             f"({sent.get(key, 0)} sent, {ins.value} awaited)")
            else:
                w = writers[key][0]
                edge[k] = w
                wp = s.programs[w]
                lines.append(f"{where}: Wait on signal {ins.signal} for {ins.value} (now {max(have, 0)}); "
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
