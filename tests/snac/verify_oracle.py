"""Test oracle: the verifier (and its walker) as they were at commit 3934e54, before the
rack-scale work, kept word for word (imports aside) so the fast verifier can be checked
against it on planted bugs: same verdict, same message."""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from dataclasses import dataclass, field
from typing import Iterator, NamedTuple

import numpy as np

from purlin.errors import Deadlock, ScheduleError
from purlin.snac.intervals import IntervalMap
from purlin.snac import ir
from purlin.snac.ir import (ATOMS, BUFFERS, REDUCTIONS, Copy, Instruction, Program, PutPackets, Reduce,
                            Ref, Schedule, WaitPackets, sources)
from purlin.spec.collective import output_sources


# Schema 2's signal instructions, which name one flag each (the oracle's own: schema 3
# names many flags in one instruction; :func:`singles` turns a schedule into these).
@dataclass(frozen=True)
class Notify:
    peer: int
    signal: int
    value: int


@dataclass(frozen=True)
class Wait:
    signal: int
    value: int


def singles(s: Schedule) -> tuple[Schedule, list[list[int]]]:
    """``s`` with every Notify and Wait split into one instruction a flag (in order), and
    per program the index in ``s`` of each instruction of the split one."""
    progs, where = [], []
    for p in s.programs:
        out, at = [], []
        for i, ins in enumerate(p.instrs):
            if type(ins) is ir.Notify:
                new = [Notify(q, g, ins.value) for q, g in zip(ins.peers, ins.signals)]
            elif type(ins) is ir.Wait:
                new = [Wait(g, ins.value) for g in ins.signals]
            else:
                new = [ins]
            out += new
            at += [i] * len(new)
        progs.append(Program(p.rank, p.cta, p.role, tuple(out)))
        where.append(at)
    return Schedule(s.collective, tuple(progs), s.staging_nbytes, s.packets_nbytes, s.num_signals,
                    s.epoch_stride, s.topology, s.reduction, s.policy), where


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


# ---- verify.py of 3934e54 ----



class Cell(NamedTuple):
    """Shadow state of a byte range: who wrote it, what it holds, who read it since."""

    writer: tuple[int, int] | None
    terms: tuple[tuple[int, int], ...]   # (input rank, input offset at ``anchor``)
    anchor: int
    readers: tuple[tuple[int, int], ...] = ()


def verify(s: Schedule) -> Schedule:
    """Raise ScheduleError (or Deadlock) for the first broken rule; return ``s`` if sound.

    Examples
    --------
    >>> from purlin.snac import plan
    >>> from purlin.spec import library
    >>> verify(plan(library.all_gather(2, 16), check=False)).world
    2
    """
    _static(s)
    _dynamic(s)
    return s


def _where(s: Schedule, k: int, i: int) -> str:
    p = s.programs[k]
    return f"rank {p.rank}, cta {p.cta}, instr {i}"


def _static(s: Schedule) -> None:
    c = s.collective
    if s.reduction not in REDUCTIONS:
        raise ScheduleError(f"reduction {s.reduction!r}: must be one of {', '.join(REDUCTIONS)}")
    seen_ctas: set[tuple[int, int]] = set()
    writer: dict[tuple[int, int], tuple[int, int, int]] = {}
    for k, prog in enumerate(s.programs):
        if not 0 <= prog.rank < s.world:
            raise ScheduleError(f"program for rank {prog.rank} in a world of {s.world}")
        if (prog.rank, prog.cta) in seen_ctas:
            raise ScheduleError(f"rank {prog.rank}, cta {prog.cta}: two programs for one CTA")
        seen_ctas.add((prog.rank, prog.cta))
        for i, ins in enumerate(prog.instrs):
            at = _where(s, k, i)
            t = type(ins)
            if t in (Copy, Reduce, PutPackets, WaitPackets):
                refs = sources(ins) + (ins.dsts if t in (Copy, Reduce)
                                       else (ins.dst,) if t is PutPackets else ())
                if ins.nbytes <= 0:
                    raise ScheduleError(f"{at}: {t.__name__} of {ins.nbytes} B (rule: nbytes > 0)")
                for r in refs:
                    _bounds(s, at, t.__name__, r, ins.nbytes)
            if t in (Copy, Reduce) and ins.atom not in ATOMS:
                raise ScheduleError(f"{at}: unknown atom {ins.atom!r}; known: {', '.join(ATOMS)}")
            if t is Reduce and (ins.dtype != c.dtype.name or ins.op != c.op):
                raise ScheduleError(f"{at}: Reduce {ins.dtype}/{ins.op} but the spec is "
                                    f"{c.dtype.name}/{c.op}")
            if t is PutPackets and ins.dst.buffer != "packets":
                raise ScheduleError(f"{at}: PutPackets must target a packets window, not {ins.dst.buffer}")
            if t is WaitPackets and (ins.src.buffer != "packets" or ins.src.rank != prog.rank):
                raise ScheduleError(f"{at}: WaitPackets must name a local packets window, got {ins.src}")
            if t in (Notify, Wait, PutPackets, WaitPackets) and not 1 <= ins.value < s.epoch_stride:
                raise ScheduleError(f"{at}: value {ins.value} outside 1..{s.epoch_stride - 1} "
                                    f"(rule: values are relative to the epoch and below its stride)")
            if t in (Notify, Wait) and not 0 <= ins.signal < s.num_signals:
                raise ScheduleError(f"{at}: signal {ins.signal} outside 0..{s.num_signals - 1}")
            if t is Notify:
                if not 0 <= ins.peer < s.world:
                    raise ScheduleError(f"{at}: Notify to rank {ins.peer} in a world of {s.world}")
                key = (ins.peer, ins.signal)
                prev = writer.get(key)
                if prev and prev[:2] != (prog.rank, prog.cta):
                    raise ScheduleError(f"{at}: Notify to rank {ins.peer} signal {ins.signal}, which "
                                        f"rank {prev[0]} cta {prev[1]} also writes (rule: one writer "
                                        f"per signal)")
                if prev and ins.value < prev[2]:
                    raise ScheduleError(f"{at}: Notify value {ins.value} after {prev[2]} on rank "
                                        f"{ins.peer} signal {ins.signal} (rule: values rise)")
                writer[key] = (prog.rank, prog.cta, ins.value)


def _bounds(s: Schedule, at: str, what: str, r: Ref, n: int) -> None:
    if r.buffer not in BUFFERS:
        raise ScheduleError(f"{at}: {what} names buffer {r.buffer!r}; known: {', '.join(BUFFERS)}")
    if not 0 <= r.rank < s.world:
        raise ScheduleError(f"{at}: {what} addresses rank {r.rank} in a world of {s.world}")
    size = s.buffer_nbytes(r.rank, r.buffer)
    if r.offset < 0 or r.offset + n > size:
        raise ScheduleError(f"{at}: {what} {r} ({n} B) runs outside {r.buffer} of rank {r.rank} "
                            f"({size} B)")


class _Shadow:
    def __init__(self, s: Schedule):
        self.s = s
        self.mem: dict[tuple[int, str], IntervalMap] = {}
        self.nprog = len(s.programs)
        self.vc = [np.zeros(self.nprog, np.int64) for _ in range(self.nprog)]
        self.notes: dict[tuple[int, int], tuple[list[int], list[np.ndarray]]] = {}
        self.packets: dict[int, IntervalMap] = {}

    def hb(self, acc: tuple[int, int], k: int) -> bool:
        return acc[1] < self.vc[k][acc[0]]

    def who(self, acc: tuple[int, int]) -> str:
        return _where(self.s, *acc)

    def read(self, k: int, i: int, r: Ref, n: int) -> list[tuple[int, int, Cell]]:
        m = self.mem.setdefault((r.rank, r.buffer), IntervalMap())
        out, pos = [], r.offset
        for a, b, cell in list(m.query(r.offset, r.offset + n)) + [(r.offset + n, None, None)]:
            if a > pos:
                if r.buffer != "input":
                    raise ScheduleError(f"{_where(self.s, k, i)}: reads {r.buffer}[{r.rank}] bytes "
                                        f"{pos}..{a} before anything wrote them in this call (missing Wait for "
                                        f"their producer?)")
                out.append((pos, a, Cell(None, ((r.rank, 0),), 0)))
            if b is None:
                break
            if cell.writer is not None and cell.writer[0] != k and not self.hb(cell.writer, k):
                raise ScheduleError(f"{_where(self.s, k, i)}: reads {r.buffer}[{r.rank}] bytes {a}..{b} "
                                    f"written by {self.who(cell.writer)} without waiting for it "
                                    f"(missing Notify/Wait)")
            out.append((a, b, cell))
            pos = b
        fresh = Cell(None, ((r.rank, 0),), 0)  # an input byte nobody wrote holds itself
        m.update(r.offset, r.offset + n,
                 lambda c: Cell(*(c or fresh)[:3], (c or fresh).readers + ((k, i),)))
        return out

    def write(self, k: int, i: int, r: Ref, pieces: list[tuple[int, int, tuple, int]]) -> None:
        """``pieces``: (start, end, terms, anchor) in absolute offsets of ``r.buffer``."""
        at = _where(self.s, k, i)
        if r.buffer == "input":
            raise ScheduleError(f"{at}: writes into input of rank {r.rank} (rule: inputs are read-only)")
        m = self.mem.setdefault((r.rank, r.buffer), IntervalMap())
        for a, b, terms, anchor in pieces:
            for x, y, cell in m.query(a, b):
                if r.buffer == "output" and cell.writer is not None:
                    raise ScheduleError(f"{at}: writes output[{r.rank}] bytes {x}..{y} already written by "
                                        f"{self.who(cell.writer)} (rule: every output byte is written "
                                        f"exactly once)")
                for acc in cell.readers:
                    if acc[0] != k and not self.hb(acc, k):
                        raise ScheduleError(f"{at}: overwrites {r.buffer}[{r.rank}] bytes {x}..{y} before "
                                            f"{self.who(acc)} finished reading them (missing drain)")
                if cell.writer is not None and cell.writer[0] != k and not self.hb(cell.writer, k):
                    raise ScheduleError(f"{at}: overwrites {r.buffer}[{r.rank}] bytes {x}..{y} written by "
                                        f"{self.who(cell.writer)} with no order between the two")
            m.assign(a, b, Cell((k, i), terms, anchor))


def _dynamic(s: Schedule) -> None:
    sh = _Shadow(s)
    calls = _CallWindows(s)
    for k, prog, i, ins in walk(s):
        vc = sh.vc[k]
        vc[k] = i
        t = type(ins)
        if t in (Copy, Reduce):
            for r in sources(ins):
                calls.access(k, i, vc, r, "reads")
            for d in ins.dsts:
                calls.access(k, i, vc, d, "writes")
        if t is Copy:
            got = sh.read(k, i, ins.src, ins.nbytes)
            for d in ins.dsts:
                delta = d.offset - ins.src.offset
                sh.write(k, i, d, [(a + delta, b + delta, c.terms, c.anchor + delta) for a, b, c in got])
        elif t is Reduce:
            reads = [sh.read(k, i, r, ins.nbytes) for r in ins.srcs]
            cuts = sorted({a - r.offset for r, got in zip(ins.srcs, reads) for a, _, _ in got} | {ins.nbytes})
            for d in ins.dsts:
                pieces = []
                for a, b in zip(cuts, cuts[1:]):
                    terms = []
                    for r, got in zip(ins.srcs, reads):
                        x = r.offset + a
                        cell = next(c for lo, hi, c in got if lo <= x < hi)
                        terms += [(rank, off + x - cell.anchor) for rank, off in cell.terms]
                    pieces.append((d.offset + a, d.offset + b, tuple(terms), d.offset + a))
                sh.write(k, i, d, pieces)
        elif t is PutPackets:
            got = sh.read(k, i, ins.src, ins.nbytes)
            delta = ins.dst.offset - ins.src.offset
            sh.write(k, i, ins.dst, [(a + delta, b + delta, c.terms, c.anchor + delta) for a, b, c in got])
            snap = vc.copy()
            snap[k] = i + 1
            sh.packets.setdefault(ins.dst.rank, IntervalMap()).assign(
                ins.dst.offset, ins.dst.offset + ins.nbytes, snap)
        elif t is WaitPackets:
            for _, _, snap in sh.packets[prog.rank].query(ins.src.offset, ins.src.offset + ins.nbytes):
                np.maximum(vc, snap, out=vc)
        elif t is Notify:
            snap = vc.copy()
            snap[k] = i + 1
            values, snaps = sh.notes.setdefault((ins.peer, ins.signal), ([], []))
            values.append(ins.value)
            snaps.append(snap)
        elif t is Wait:
            values, snaps = sh.notes[(prog.rank, ins.signal)]
            np.maximum(vc, snaps[bisect_left(values, ins.value)], out=vc)
        vc[k] = i + 1
    calls.check_ends(sh.vc)
    _check_outputs(s, sh)


class _CallWindows:
    """A rank's input and output belong to the call only while that rank is in it: before,
    its caller may still be writing the input (or reading the last call's output); after,
    it may reuse them. So a peer's access to them must come after some CTA of that rank
    has started (a start handshake) and before all of them have ended (an end handshake).
    One call's data flow cannot show this, so it is checked here."""

    def __init__(self, s: Schedule):
        self.s = s
        of: dict[int, list[int]] = {}
        for k, p in enumerate(s.programs):
            of.setdefault(p.rank, []).append(k)
        self.of = {rank: np.asarray(ks) for rank, ks in of.items()}
        self.none = np.zeros(0, np.int64)
        self.remote: list[tuple[int, int, Ref, str]] = []

    def access(self, k: int, i: int, vc: np.ndarray, r: Ref, what: str) -> None:
        if r.rank == self.s.programs[k].rank or r.buffer not in ("input", "output"):
            return
        if not vc[self.of.get(r.rank, self.none)].any():
            raise ScheduleError(f"{_where(self.s, k, i)}: {what} {r.buffer}[{r.rank}] before any CTA of "
                                f"rank {r.rank} has started this call (missing start handshake: rank "
                                f"{r.rank}'s caller may still be using that buffer)")
        self.remote.append((k, i, r, what))

    def check_ends(self, vcs: list[np.ndarray]) -> None:
        ends = {rank: np.maximum.reduce([vcs[j] for j in ks]) for rank, ks in self.of.items()}
        for k, i, r, what in self.remote:
            if not i < ends[r.rank][k]:
                raise ScheduleError(f"{_where(self.s, k, i)}: {what} {r.buffer}[{r.rank}] with no order "
                                    f"before rank {r.rank}'s CTAs all end (missing end handshake: rank "
                                    f"{r.rank}'s call can return while this is in flight)")


def _check_outputs(s: Schedule, sh: _Shadow) -> None:
    c = s.collective
    ordered = c.is_reduce and s.reduction == "rank"
    for p, srcs in output_sources(c):
        if not p.nbytes:
            continue
        m = sh.mem.get((p.rank, "output"), IntervalMap())
        pos = p.offset
        for a, b, cell in list(m.query(p.offset, p.offset + p.nbytes)) + [(p.offset + p.nbytes, None, None)]:
            if a > pos:
                raise ScheduleError(f"output rank {p.rank}, block {p.name!r}: bytes {pos - p.offset}.."
                                    f"{a - p.offset} are never written")
            if b is None:
                break
            got = tuple((r, off + a - cell.anchor) for r, off in cell.terms)
            want = tuple((x.rank, x.offset + a - p.offset) for x in srcs)
            if got != want and (ordered or sorted(got) != sorted(want)):
                raise ScheduleError(f"output rank {p.rank}, block {p.name!r}, bytes {a - p.offset}.."
                                    f"{b - p.offset}: holds {_describe(got)} but the spec needs "
                                    f"{_describe(want)}")
            pos = b


def _describe(terms: tuple[tuple[int, int], ...]) -> str:
    if not terms:
        return "nothing"
    parts = [f"input[{r}]+{off}" for r, off in terms]
    return parts[0] if len(parts) == 1 else "reduce(" + ", ".join(parts) + ")"
