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
from typing import Callable

import numpy as np

from purlin.errors import ScheduleError
from purlin.snac.clocks import Clocks
from purlin.snac.intervals import IntervalMap
from purlin.snac.ir import Ref

Terms = tuple[tuple[int, int], ...]


class Overlap(Exception):
    """Deferred output writes overlap (internal: the verifier re-runs without deferring
    to name the first offending write)."""


class _Writes:
    """A deferred output's writes in walk order: start, end, program and instruction in
    arrays, the contents (interned, shared tuples) in a list. A rack's broadcast Copy
    defers a write per destination (9.6 million for a 576-rank AllGather of 256 MiB); a
    tuple each held about 150 bytes, these about 40."""

    __slots__ = ("a", "b", "k", "i", "terms")

    def __init__(self) -> None:
        self.a, self.b, self.k, self.i = array("q"), array("q"), array("q"), array("q")
        self.terms: list[Terms] = []

    def add(self, a: int, b: int, terms: Terms, k: int, i: int) -> None:
        self.a.append(a)
        self.b.append(b)
        self.terms.append(terms)
        self.k.append(k)
        self.i.append(i)

    def __iter__(self):
        """(start, end, terms, program, instruction) of each write, in walk order."""
        return zip(self.a, self.b, self.terms, self.k, self.i)


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
        if r.buffer == "output" and self.defer and r.rank in self.deferred:
            self._undefer(r.rank)
        m = self.maps.get(key)
        if m is None:
            m = self.maps[key] = IntervalMap()
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
                        lst.add(one[0] + delta, one[1] + delta, moved, k, i)
                    else:
                        for a, b, t in got:
                            lst.add(a + delta, b + delta, shift(t, delta), k, i)
                    continue
            self._store(k, i, d, [(a + delta, b + delta, shift(t, delta)) for a, b, t in got])

    def _store(self, k: int, i: int, r: Ref, pieces: list[tuple[int, int, Terms]]) -> None:
        """A write into a shadowed buffer: never an input's, and never over bytes whose
        writer or readers are not ordered before it."""
        if r.buffer == "input":
            raise ScheduleError(f"{self.where(k, i)}: writes into input of rank {r.rank} "
                                f"(rule: inputs are read-only)")
        key = (r.rank, r.buffer)
        m = self.maps.get(key)
        if m is None:
            m = self.maps[key] = IntervalMap()
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
        lst = self.deferred.pop(rank)
        m = self.maps[(rank, "output")] = IntervalMap()
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
        if lst is None:
            m = self.maps.get((rank, "output"))
            items = list(m.items()) if m is not None else []
            return [a for a, _, _ in items], [b for _, b, _ in items], [v[1] for _, _, v in items]
        a = np.frombuffer(lst.a, np.int64)
        order = np.argsort(a, kind="stable")   # ties: walk order
        starts = a[order].tolist()
        ends = np.frombuffer(lst.b, np.int64)[order].tolist()
        if any(map(lt, starts[1:], ends)):   # a piece starts before the last ends
            raise Overlap(rank)
        return starts, ends, list(map(lst.terms.__getitem__, order.tolist()))
