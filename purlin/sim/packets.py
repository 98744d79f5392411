"""Packet windows in the engine: when which bytes land with which tag, and who waits.

A window's bytes become visible twice: their first bytes when the PutPackets carrying
them starts streaming (a fused reader may start then) and all of them when it ends,
each ``post_us`` later. :class:`PacketTimes` files those two landings per put as
(time, seq) when they become known, as :mod:`purlin.sim.engine` files flags, and gives a
waiting CTA one entry, at the landing it needs, under that landing's seq. It assumes
that puts of one tag never overlap on a rank (the IR writes each window byte once per
call); a schedule that breaks this raises :class:`Overlapping`, and the engine runs it
again with :class:`PacketEvents`, which merges landed ranges event by event.
"""
from __future__ import annotations

import bisect
from typing import Any, Callable

from purlin.snac.ir import Copy, PutPackets, Reduce, WaitPackets, ref_buffer_set, sources

INF = float("inf")


class Overlapping(Exception):
    """Two puts of one tag overlap on a rank (internal: the engine re-runs the call with
    :class:`PacketEvents`)."""


class PacketTimes:
    """Puts as pieces [start, end, begun time, seq, whole time, seq, waiters] per
    (rank, tag), and the CTAs waiting: on a piece that has not ended, or at a byte no
    piece covers yet."""

    def __init__(self, clock: Any, wake: Callable[[Any], None]):
        self.clock, self.wake = clock, wake
        self.starts: dict[tuple[int, int], list[int]] = {}
        self.pieces: dict[tuple[int, int], list[list]] = {}
        # each piece by its start, per (rank, tag), while every piece there moves bytes
        # (starts are then distinct): a put's end, and a window that begins a piece, are
        # found without a bisect; None once an empty piece came (the bisects decide)
        self.by_lo: dict[tuple[int, int], dict[int, list] | None] = {}
        self.gaps: dict[tuple[int, int], tuple[list[int], list[tuple]]] = {}   # by byte

    def begin(self, pkt: tuple, t: float, seq: int) -> None:
        """A put ``pkt`` = (rank, offset, nbytes, tag) starts: its first bytes land at
        ``t`` (issued under ``seq``)."""
        self._file(pkt, t, seq, None)

    def end(self, pkt: tuple, t: float, seq: int) -> None:
        """The put ``pkt`` ends: all its bytes land at ``t`` (its first ones too, if not
        before; issued under ``seq``)."""
        self._file(pkt, t, seq, (t, seq))

    def _file(self, pkt: tuple, t: float, seq: int, whole: tuple | None) -> None:
        rank, lo, n, tag = pkt
        key = (rank, tag)
        index = self.by_lo.get(key, False)
        if index and whole is not None:
            p = index.get(lo)
            if p is not None and p[1] == lo + n:   # the end of a put that began
                self._ended(p, whole)
                return
        starts = self.starts.setdefault(key, [])
        pieces = self.pieces.setdefault(key, [])
        j = bisect.bisect_left(starts, lo)
        if j < len(starts) and starts[j] == lo and pieces[j][1] == lo + n and whole is not None:
            self._ended(pieces[j], whole)          # the end of a put that began
            return
        if (j < len(starts) and starts[j] < lo + n) or (j > 0 and pieces[j - 1][1] > lo):
            raise Overlapping(key)
        tw, sw = whole if whole is not None else (INF, 0)
        p = [lo, lo + n, t, seq, tw, sw, None]
        starts.insert(j, lo)
        pieces.insert(j, p)
        if index is not None:
            if n <= 0:
                self.by_lo[key] = None
            elif index is False:
                self.by_lo[key] = {lo: p}
            else:
                index[lo] = p
        gap = self.gaps.get(key)
        if gap:
            at, who = gap
            a, b = bisect.bisect_left(at, lo), bisect.bisect_left(at, lo + n)
            if a < b:
                retry = who[a:b]
                del at[a:b], who[a:b]
                for c, w, wh in retry:
                    self._retry(c, w, wh)

    def _ended(self, p: list, whole: tuple) -> None:
        p[4], p[5] = whole
        waiting, p[6] = p[6], None
        for c, w, wh in waiting or ():
            self._retry(c, w, wh)

    def ready(self, c: Any, w: tuple[int, int, int, int], whole: bool) -> bool:
        """Whether window ``w`` = (rank, lo, hi, tag) has landed for ``c`` now (``whole``:
        all of it, else its first bytes); if not, ``c`` is woken when it has."""
        kind, a, b = self._when(w, whole)
        if kind == "at":
            now = self.clock.now
            if a < now or (a == now and b < c.arr):
                return True
        self._block(c, w, whole, kind, a, b)
        return False

    def _retry(self, c: Any, w: tuple, whole: bool) -> None:
        self._block(c, w, whole, *self._when(w, whole))

    def _block(self, c: Any, w: tuple, whole: bool, kind: str, a: Any, b: Any) -> None:
        if kind == "at":            # it lands at a known time: one entry, under its seq
            self.clock.at_seq(a, b, self.wake, c)
        elif kind == "piece":       # a piece that has not ended
            if a[6] is None:
                a[6] = []
            a[6].append((c, w, whole))
        else:                       # byte ``a`` is in no put yet
            at, who = self.gaps.setdefault((w[0], w[3]), ([], []))
            j = bisect.bisect_right(at, a)
            at.insert(j, a)
            who.insert(j, (c, w, whole))

    def _when(self, w: tuple, whole: bool) -> tuple:
        """("at", time, seq) of the landing that completes window ``w``; ("piece", p, 0)
        if piece p of it has not ended; ("gap", byte, 0) if that byte is in no put."""
        rank, lo, hi, tag = w
        key = (rank, tag)
        index = self.by_lo.get(key)
        if index and lo < hi:
            p = index.get(lo)
            if p is not None and p[1] >= hi:   # the window lies in the piece it begins
                at = (p[4], p[5]) if whole else (p[2], p[3])
                return ("piece", p, 0) if at[0] == INF else ("at", at[0], at[1])
        starts = self.starts.get(key)
        pieces = self.pieces.get(key)
        j = bisect.bisect_right(starts, lo) - 1 if starts else -1
        pos, best = lo, (-INF, 0)
        while pos < hi:
            if j < 0 or j >= len(pieces) or pieces[j][0] > pos or pieces[j][1] <= pos:
                return "gap", pos, 0
            p = pieces[j]
            at = (p[4], p[5]) if whole else (p[2], p[3])
            if at[0] == INF:
                return "piece", p, 0
            if at > best:
                best = at
            pos = p[1]
            j += 1
        return "at", best[0], best[1]


class PacketEvents:
    """Landed packet ranges per (rank, tag), merged as each landing event runs, and the
    CTAs waiting for a range: exact for any puts, one event per landing."""

    def __init__(self, clock: Any, wake: Callable[[Any], None]):
        self.clock, self.wake = clock, wake
        self.whole: dict[tuple[int, int], list[list[int]]] = {}
        self.begun: dict[tuple[int, int], list[list[int]]] = {}
        self.waiting: dict[int, list[tuple]] = {}

    def begin(self, pkt: tuple, t: float, seq: int) -> None:
        """A put of ``pkt`` starts landing at ``t`` (issued under ``seq``)."""
        self.clock.at_seq(t, seq, self._land, pkt + (False,))

    def end(self, pkt: tuple, t: float, seq: int) -> None:
        """The put of ``pkt`` has wholly landed at ``t`` (issued under ``seq``)."""
        self.clock.at_seq(t, seq, self._land, pkt + (True,))

    def _land(self, arg: tuple) -> None:
        rank, offset, nbytes, value, whole = arg
        key = (rank, value)
        _merge(self.begun.setdefault(key, []), offset, offset + nbytes)
        if whole:
            _merge(self.whole.setdefault(key, []), offset, offset + nbytes)
        waiting = self.waiting.get(rank)
        if waiting:
            keep = []
            for lo, hi, want, c, book in waiting:
                if want == value and _covers(book.get(key, ()), lo, hi):
                    self.wake(c)
                else:
                    keep.append((lo, hi, want, c, book))
            self.waiting[rank] = keep

    def ready(self, c: Any, w: tuple[int, int, int, int], whole: bool) -> bool:
        """Whether the packets ``w`` waits for have landed (begun, or ``whole``ly) by now;
        if not, ``c`` is woken when they have."""
        rank, lo, hi, value = w
        book = self.whole if whole else self.begun
        if _covers(book.get((rank, value), ()), lo, hi):
            return True
        self.waiting.setdefault(rank, []).append((lo, hi, value, c, book))
        return False


def uses_packets(instrs: tuple) -> bool:
    """Whether a program pushes, waits for or reads packets."""
    for ins in instrs:
        t = type(ins)
        if t is PutPackets or t is WaitPackets:
            return True
        if (t is Copy and ins.src.buffer == "packets") or (
                t is Reduce and "packets" in ref_buffer_set(ins.srcs)):
            return True
    return False


def put_windows(programs) -> set[tuple[int, int, int, int]]:
    """The window (rank, lo, hi, tag) of every PutPackets of ``programs``: a fused read of
    exactly one of them streams behind its put, a read of part of one waits for all of it."""
    return {(i.dst.rank, i.dst.offset, i.dst.offset + i.nbytes, i.value)
            for p in programs for i in p.instrs if type(i) is PutPackets}


def fused_positions(instrs: tuple) -> set[int]:
    """The positions of the WaitPackets that :func:`purlin.snac.ir.fused_read` fuses into
    the read after them, for a whole program at once: each read's packet sources are
    merged once per rank, so a run of WaitPackets before one read costs a bisect each."""
    out: set[int] = set()
    nxt = None          # the first non-WaitPackets instruction after the current position
    spans: dict[int, tuple[list[int], list[int]]] = {}
    for i in range(len(instrs) - 1, -1, -1):
        ins = instrs[i]
        if type(ins) is not WaitPackets:
            nxt, spans = ins, {}
            continue
        if nxt is None or type(nxt) not in (Copy, Reduce):
            continue
        rank = ins.src.rank
        merged = spans.get(rank)
        if merged is None:
            merged = spans[rank] = _union([(r.offset, r.offset + nxt.nbytes) for r in sources(nxt)
                                           if r.buffer == "packets" and r.rank == rank])
        starts, ends = merged
        lo, hi = ins.src.offset, ins.src.offset + ins.nbytes
        j = bisect.bisect_right(starts, lo) - 1
        if hi <= lo or (j >= 0 and ends[j] >= hi):
            out.add(i)
    return out


def _union(spans: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    starts: list[int] = []
    ends: list[int] = []
    for a, b in sorted(spans):
        if ends and a <= ends[-1]:
            ends[-1] = max(ends[-1], b)
        else:
            starts.append(a)
            ends.append(b)
    return starts, ends


def _merge(intervals: list[list[int]], lo: int, hi: int) -> None:
    """Insert [lo, hi) into a sorted list of disjoint intervals, merging neighbours."""
    i = bisect.bisect_left(intervals, [lo, lo])
    if i > 0 and intervals[i - 1][1] >= lo:
        i -= 1
    j = i
    while j < len(intervals) and intervals[j][0] <= hi:
        lo, hi = min(lo, intervals[j][0]), max(hi, intervals[j][1])
        j += 1
    intervals[i:j] = [[lo, hi]]


def _covers(intervals, lo: int, hi: int) -> bool:
    """True if [lo, hi) lies inside one interval of the sorted disjoint list."""
    if hi <= lo:
        return True
    i = bisect.bisect_right(intervals, [lo, float("inf")]) - 1
    return i >= 0 and intervals[i][0] <= lo and intervals[i][1] >= hi
