"""Shadow memory for the verifier: who wrote each byte range, what it holds, who read it.

What a byte holds is a tuple of *terms* (input rank, shift): byte p holds input byte
``p + shift`` of that rank, one term per source of a reduction, in order. Shifts make
contents position-free: a whole in-place AllReduce output is one tuple, and tuples are
interned, so comparing contents is mostly an identity test.

Inputs are read-only (a write to one is an error), so reads of them keep no shadow: their
bytes hold themselves and no rule ever asks who read them. Outputs must be written
exactly once; with ``defer_outputs`` their writes are only listed, and checked for
overlaps (and contents) after the walk: an output that is read during the walk is turned
back into an ordinary shadowed buffer first, replaying its writes in order. Every other
buffer is an :class:`~purlin.snac.intervals.IntervalMap` of cells
``(writer, terms, readers)``, writer and readers as (program, instruction).
"""
from __future__ import annotations

from array import array
from operator import lt
from typing import Callable, NamedTuple

import numpy as np

from purlin.errors import ScheduleError
from purlin.snac.clocks import Clocks
from purlin.snac.intervals import IntervalMap
from purlin.snac.ir import Ref, ref_buffer_set, ref_offsets, ref_ranks

Terms = tuple[tuple[int, int], ...]
_WIDE = 8
"""From this many destinations on, a store's deferred output writes are one record."""
_OUTPUT = {"output"}
_RANKS, _RANK_DTYPE = "H", np.uint16
"""A wide record's ranks, 2 bytes each (so a world is at most 65,536 ranks here)."""


class Overlap(Exception):
    """Deferred output writes overlap (internal: the verifier re-runs without deferring
    to name the first offending write)."""


class _Writes:
    """A deferred output's writes in walk order: start, end, program and instruction in
    arrays, the contents (interned, shared tuples) in a list. A rack's broadcast Copy
    defers a write per destination (9.6 million for a 576-rank AllGather of 256 MiB); a
    tuple each held about 150 bytes, these about 40."""

    __slots__ = ("a", "b", "k", "i", "seq", "terms")

    def __init__(self) -> None:
        self.a, self.b, self.k, self.i, self.seq = array("q"), array("q"), array("q"), array("q"), array("q")
        self.terms: list[Terms] = []

    def add(self, a: int, b: int, terms: Terms, k: int, i: int, seq: int) -> None:
        self.a.append(a)
        self.b.append(b)
        self.terms.append(terms)
        self.k.append(k)
        self.i.append(i)
        self.seq.append(seq)

    def __iter__(self):
        """(start, end, terms, program, instruction) of each write, in walk order."""
        order = sorted(range(len(self.seq)), key=self.seq.__getitem__)
        return ((self.a[x], self.b[x], self.terms[x], self.k[x], self.i[x]) for x in order)


class _Record(NamedTuple):
    """One wide store's deferred writes: the piece ``[at + start, at + start + nbytes)``
    as read, stored at each destination's offset plus ``start``."""

    seq: int                   # walk position (shared with the per-rank lists' rows)
    k: int                     # program
    i: int                     # instruction
    dsts: tuple                # the instruction's own destination Refs
    start: int
    nbytes: int
    terms: Terms               # contents as read at ``at``
    moved: Terms | None        # contents at the destinations, when they share one offset
    at: int
    ranks: array               # the destinations' ranks, 16 bits each
    offset: int | None         # the destinations' one offset, or None


class _Broadcasts:
    """Deferred output writes of wide stores, one record per instruction: its own tuple of
    destinations, where the piece sits relative to them, and its contents (shifted once
    when every destination has one offset). A 576-rank AllGather of 256 MiB defers 9.6
    million writes from 16,704 Copies; listed one by one they cost the walk about 5 s and
    48 bytes each. They are spread over the ranks only for the output check, in one pass
    (:meth:`spread`), or, should an output be read during the walk, into the per-rank
    lists (:meth:`Shadow._explode`)."""

    __slots__ = ("recs", "_by_rank", "_starts", "_ends", "_rec", "_moved")

    def __init__(self) -> None:
        self.recs: list[_Record] = []
        self._by_rank: dict[int, np.ndarray] | None = None

    def spread(self) -> None:
        """Each rank's entries, once the walk is over: positions into flat columns."""
        recs = self.recs
        lens = [len(r.dsts) for r in recs]
        total = sum(lens)
        ranks = np.concatenate([np.frombuffer(r.ranks, _RANK_DTYPE) for r in recs]) if recs else np.zeros(0, _RANK_DTYPE)
        self._rec = np.repeat(np.arange(len(recs), dtype=np.int64), lens)
        # a record with one offset (an AllGather's) starts every entry there; the others
        # are read Ref by Ref
        base = np.array([(r.offset or 0) + r.start for r in recs], np.int64)
        self._starts = base.take(self._rec)
        at = 0
        for r, m in zip(recs, lens):
            if r.offset is None:
                self._starts[at:at + m] += np.fromiter(ref_offsets(r.dsts), np.int64, m)
            at += m
        self._ends = self._starts + np.array([r.nbytes for r in recs], np.int64).take(self._rec)
        moved = [r.moved for r in recs]
        self._moved = moved if None not in moved else None
        order = np.argsort(ranks, kind="stable")   # (16-bit keys: a radix sort)
        sr = ranks.take(order)
        cut = np.flatnonzero(sr[1:] != sr[:-1]) + 1
        heads = np.r_[0, cut] if total else np.zeros(0, np.int64)
        self._by_rank = dict(zip(sr.take(heads).tolist(), np.split(order, cut))) if total else {}

    def of(self, rank: int, shift: Callable[[Terms, int], Terms]) -> tuple[np.ndarray, np.ndarray, list[Terms]]:
        """(starts, ends, terms) of ``rank``'s entries."""
        if self._by_rank is None:
            self.spread()
        pos = self._by_rank.pop(rank, None)
        if pos is None:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), []
        starts, recs = self._starts.take(pos), self._rec.take(pos).tolist()
        if self._moved is not None:   # every record has one offset (an AllGather's): its contents
            return starts, self._ends.take(pos), list(map(self._moved.__getitem__, recs))
        terms = []
        for rec, start in zip(recs, starts.tolist()):
            r = self.recs[rec]
            terms.append(r.moved if r.moved is not None else shift(r.terms, start - r.start - r.at))
        return starts, self._ends.take(pos), terms


class Shadow:
    """Every non-input buffer's cells, the contents' intern table, and the output writes
    deferred to the end of the walk."""

    def __init__(self, clocks: Clocks | None, where: Callable[[int, int], str],
                 defer_outputs: bool):
        self.clocks = clocks
        self.where = where
        self.defer = defer_outputs
        self.maps: dict[tuple[int, str], IntervalMap] = {}
        self.deferred: dict[int, _Writes] = {}
        self.wide = _Broadcasts()
        self.live: set[int] = set()   # ranks whose output is a shadow map, not deferred
        self._seq = 0                 # deferred writes (and wide records) so far
        self._intern: dict[Terms, Terms] = {}
        self._shifted: dict[tuple[int, int], Terms] = {}
        self._inputs: dict[int, Terms] = {}   # rank -> its input's own terms, interned

    # ---- contents ------------------------------------------------------------------
    def intern(self, terms: Terms) -> Terms:
        """The one shared copy of ``terms``, so equal contents compare by identity."""
        return self._intern.setdefault(terms, terms)

    def shift(self, terms: Terms, by: int) -> Terms:
        """``terms`` as seen ``by`` bytes further on: shifts decrease by ``by``."""
        if not by:
            return terms
        key = (id(terms), by)
        out = self._shifted.get(key)
        if out is None:
            out = self._shifted[key] = self.intern(tuple((r, e - by) for r, e in terms))
        return out

    # ---- reads -----------------------------------------------------------------------
    def read(self, k: int, i: int, r: Ref, n: int) -> list[tuple[int, int, Terms]]:
        """Pieces (start, end, terms) of [offset, offset + n) of ``r``'s buffer, checking
        every piece was written, by an access ordered before this one."""
        lo, hi = r.offset, r.offset + n
        if r.buffer == "input":
            terms = self._inputs.get(r.rank)
            if terms is None:
                terms = self._inputs[r.rank] = self.intern(((r.rank, 0),))
            return [(lo, hi, terms)]
        key = (r.rank, r.buffer)
        if r.buffer == "output" and self.defer and r.rank not in self.live and (
                r.rank in self.deferred or self.wide.recs):
            self._undefer(r.rank)
        m = self.maps.get(key)
        if m is None:
            m = self._new_map(key)
        i0, j0 = m.cut(lo, hi)
        out, pos, me = [], lo, (k, i)
        for x in range(i0, j0):
            a, b, cell = m.piece(x)
            if a > pos:
                self._unwritten(k, i, r, pos, a)
            writer, terms, readers = cell
            if writer is not None and writer[0] != k and not self._before(writer, k):
                raise ScheduleError(f"{self.where(k, i)}: reads {r.buffer}[{r.rank}] bytes {a}..{b} "
                                    f"written by {self.where(*writer)} without waiting for it "
                                    f"(missing Notify/Wait)")
            m.set_value(x, (writer, terms, readers + (me,)))
            out.append((a, b, terms))
            pos = b
        if pos < hi:
            self._unwritten(k, i, r, pos, hi)
        return out

    def _unwritten(self, k: int, i: int, r: Ref, a: int, b: int) -> None:
        raise ScheduleError(f"{self.where(k, i)}: reads {r.buffer}[{r.rank}] bytes {a}..{b} before "
                            f"anything wrote them in this call (missing Wait for their producer?)")

    # ---- writes ----------------------------------------------------------------------
    def write(self, k: int, i: int, r: Ref, pieces: list[tuple[int, int, Terms]]) -> None:
        """Store ``pieces`` (absolute offsets of ``r``'s buffer), checking the old contents
        were not an output's, and that their writer and readers are ordered before."""
        self.copy_out(k, i, r.offset, (r,), pieces)

    def copy_out(self, k: int, i: int, at: int, dsts: tuple[Ref, ...],
                 got: list[tuple[int, int, Terms]]) -> None:
        """:meth:`write` of the pieces ``got`` (as they stand at offset ``at``) to each of
        ``dsts``, each shifted to its Ref. A deferred output's write (a broadcast's usual
        store) is listed here, without a call per destination; the rest go through
        :meth:`_store`."""
        deferred, maps, shift, defer = self.deferred, self.maps, self.shift, self.defer
        one = got[0] if len(got) == 1 else None
        if defer and one is not None and len(dsts) > _WIDE and ref_buffer_set(dsts) == _OUTPUT:
            try:
                ranks = array(_RANKS, ref_ranks(dsts))
            except OverflowError:   # a rank past 16 bits: listed one by one below
                ranks = None
            if ranks is not None and self.live.isdisjoint(ranks):   # to deferred outputs: one record
                offs = set(ref_offsets(dsts))
                off = offs.pop() if len(offs) == 1 else None
                moved = shift(one[2], off - at) if off is not None else None
                self.wide.recs.append(_Record(self._seq, k, i, dsts, one[0] - at, one[1] - one[0], one[2],
                                              moved, at, ranks, off))
                self._seq += 1
                return
        last, moved = None, None   # a broadcast's stores mostly share one shift: found once
        for d in dsts:
            delta = d.offset - at
            if defer and d.buffer == "output":
                lst = deferred.get(d.rank)
                if lst is None and (d.rank, "output") not in maps:
                    lst = deferred[d.rank] = _Writes()
                if lst is not None:
                    if one is not None:
                        if delta != last:
                            last, moved = delta, shift(one[2], delta)
                        lst.add(one[0] + delta, one[1] + delta, moved, k, i, self._seq)
                    else:
                        for a, b, t in got:
                            lst.add(a + delta, b + delta, shift(t, delta), k, i, self._seq)
                    self._seq += 1
                    continue
            self._store(k, i, d, [(a + delta, b + delta, shift(t, delta)) for a, b, t in got])

    def _new_map(self, key: tuple[int, str]) -> IntervalMap:
        m = self.maps[key] = IntervalMap()
        if key[1] == "output":
            self.live.add(key[0])
        return m

    def _explode(self) -> None:
        """Move the wide records into the per-rank lists (an output is read during the
        walk: its writes so far are replayed in walk order, see :meth:`_undefer`)."""
        recs, self.wide = self.wide.recs, _Broadcasts()
        for r in recs:
            for d in r.dsts:
                lst = self.deferred.get(d.rank)
                if lst is None:
                    lst = self.deferred[d.rank] = _Writes()
                t = r.moved if r.moved is not None else self.shift(r.terms, d.offset - r.at)
                lst.add(d.offset + r.start, d.offset + r.start + r.nbytes, t, r.k, r.i, r.seq)

    def _store(self, k: int, i: int, r: Ref, pieces: list[tuple[int, int, Terms]]) -> None:
        """A write into a shadowed buffer: never an input's, and never over bytes whose
        writer or readers are not ordered before it."""
        if r.buffer == "input":
            raise ScheduleError(f"{self.where(k, i)}: writes into input of rank {r.rank} "
                                f"(rule: inputs are read-only)")
        key = (r.rank, r.buffer)
        m = self.maps.get(key)
        if m is None:
            m = self._new_map(key)
        cell = (k, i)
        for a, b, terms in pieces:
            if m.fill_gap(a, b, (cell, terms, ())):   # bytes nobody wrote or read yet
                continue
            i0, j0 = m.cut(a, b)
            for x in range(i0, j0):
                self._check_overwrite(k, i, r, *m.piece(x))
            m.replace(i0, j0, [(a, b, (cell, terms, ()))])

    def _check_overwrite(self, k: int, i: int, r: Ref, x: int, y: int, cell: tuple) -> None:
        writer, _, readers = cell
        at = self.where(k, i)
        if r.buffer == "output" and writer is not None:
            raise ScheduleError(f"{at}: writes output[{r.rank}] bytes {x}..{y} already written by "
                                f"{self.where(*writer)} (rule: every output byte is written "
                                f"exactly once)")
        for acc in readers:
            if acc[0] != k and not self._before(acc, k):
                raise ScheduleError(f"{at}: overwrites {r.buffer}[{r.rank}] bytes {x}..{y} before "
                                    f"{self.where(*acc)} finished reading them (missing drain)")
        if writer is not None and writer[0] != k and not self._before(writer, k):
            raise ScheduleError(f"{at}: overwrites {r.buffer}[{r.rank}] bytes {x}..{y} written by "
                                f"{self.where(*writer)} with no order between the two")

    def _before(self, acc: tuple[int, int], k: int) -> bool:
        if self.clocks is None:
            from purlin.snac.clocks import Untracked
            raise Untracked(acc[0])
        return self.clocks.before(acc[0], acc[1], k)

    # ---- outputs ---------------------------------------------------------------------
    def _undefer(self, rank: int) -> None:
        """Turn a deferred output back into a shadowed buffer, replaying its writes in
        walk order (no output was read before, so only the exactly-once rule applies)."""
        if self.wide.recs:
            self._explode()
        lst = self.deferred.pop(rank, ())
        m = self._new_map((rank, "output"))
        for a, b, terms, k, i in lst:
            i0, j0 = m.cut(a, b)
            for x in range(i0, j0):
                self._check_overwrite(k, i, Ref(rank, "output", a), *m.piece(x))
            m.replace(i0, j0, [(a, b, ((k, i), terms, ()))])

    def output(self, rank: int) -> tuple[list[int], list[int], list[Terms]]:
        """The contents of ``rank``'s output after the walk, as parallel lists (starts,
        ends, terms) of its written pieces in offset order (empty if never written): the
        final check walks them once instead of querying a map per block.

        Raises :class:`Overlap` if deferred writes overlap."""
        lst = self.deferred.pop(rank, None)
        if rank in self.live or (lst is None and not self.wide.recs):
            m = self.maps.get((rank, "output"))
            items = list(m.items()) if m is not None else []
            return [a for a, _, _ in items], [b for _, b, _ in items], [v[1] for _, _, v in items]
        a = np.frombuffer(lst.a, np.int64) if lst is not None else np.zeros(0, np.int64)
        b = np.frombuffer(lst.b, np.int64) if lst is not None else np.zeros(0, np.int64)
        terms = lst.terms if lst is not None else []
        if self.wide.recs:
            wa, wb, wt = self.wide.of(rank, self.shift)
            if len(wa):
                a, b, terms = np.concatenate([a, wa]), np.concatenate([b, wb]), terms + wt
        order = np.argsort(a, kind="stable")   # (equal starts overlap: their order is moot)
        starts = a[order].tolist()
        ends = b[order].tolist()
        if any(map(lt, starts[1:], ends)):   # a piece starts before the last ends
            raise Overlap(rank)
        return starts, ends, list(map(terms.__getitem__, order.tolist()))
