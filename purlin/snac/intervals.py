"""A map from disjoint byte intervals to values: shadow memory for planning and checking."""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Any, Iterator


class IntervalMap:
    """Disjoint half-open intervals [start, end) each holding a value; unset bytes hold none.

    Examples
    --------
    >>> m = IntervalMap()
    >>> m.assign(0, 10, "a"); m.assign(4, 6, "b")
    >>> list(m.query(0, 10))
    [(0, 4, 'a'), (4, 6, 'b'), (6, 10, 'a')]
    """

    __slots__ = ("_starts", "_ends", "_vals")

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._vals: list[Any] = []

    def _first(self, start: int) -> int:
        i = bisect_right(self._starts, start) - 1
        if i >= 0 and self._ends[i] > start:
            return i
        return i + 1

    def query(self, start: int, end: int) -> Iterator[tuple[int, int, Any]]:
        """The stored pieces overlapping [start, end), clipped to it, in order."""
        i = self._first(start)
        while i < len(self._starts) and self._starts[i] < end:
            yield max(start, self._starts[i]), min(end, self._ends[i]), self._vals[i]
            i += 1

    def assign(self, start: int, end: int, value: Any) -> None:
        """Set [start, end) to ``value``, splitting what it overlaps."""
        if end <= start:
            return
        starts, ends = self._starts, self._ends
        if not ends or start >= ends[-1]:   # past everything stored (writes mostly come in order)
            starts.append(start); ends.append(end); self._vals.append(value)
            return
        if self.fill_gap(start, end, value):
            return
        i = self._first(start)
        if i < len(starts) and starts[i] == start and ends[i] == end:   # exactly one piece
            self._vals[i] = value
            return
        j = i
        new_s, new_e, new_v = [], [], []
        while j < len(self._starts) and self._starts[j] < end:
            if self._starts[j] < start:
                new_s.append(self._starts[j]); new_e.append(start); new_v.append(self._vals[j])
            if self._ends[j] > end:
                tail = (end, self._ends[j], self._vals[j])
            else:
                tail = None
            j += 1
        new_s.append(start); new_e.append(end); new_v.append(value)
        if j > i and tail is not None:
            new_s.append(tail[0]); new_e.append(tail[1]); new_v.append(tail[2])
        self._starts[i:j] = new_s
        self._ends[i:j] = new_e
        self._vals[i:j] = new_v

    def fill_gap(self, start: int, end: int, value: Any) -> bool:
        """Set [start, end) to ``value`` if no stored piece overlaps it (then True), else
        change nothing (False). A rack's packet windows fill out of order, each once: a
        bisect and three inserts instead of a split of what is there.

        Examples
        --------
        >>> m = IntervalMap()
        >>> m.fill_gap(8, 16, "a"), m.fill_gap(0, 8, "b"), m.fill_gap(4, 12, "c")
        (True, True, False)
        >>> list(m.items())
        [(0, 8, 'b'), (8, 16, 'a')]
        """
        starts, ends = self._starts, self._ends
        i = bisect_right(starts, start)
        if (i and ends[i - 1] > start) or (i < len(starts) and starts[i] < end) or end <= start:
            return False
        starts.insert(i, start)
        ends.insert(i, end)
        self._vals.insert(i, value)
        return True

    def update(self, start: int, end: int, fn) -> None:
        """Replace each piece's value v in [start, end) by fn(v) (fn(None) for gaps)."""
        pieces, pos = [], start
        for s, e, v in list(self.query(start, end)):
            if s > pos:
                pieces.append((pos, s, fn(None)))
            pieces.append((s, e, fn(v)))
            pos = e
        if pos < end:
            pieces.append((pos, end, fn(None)))
        for s, e, v in pieces:
            self.assign(s, e, v)

    def append_to(self, start: int, end: int, item: Any) -> None:
        """Append ``item`` to the tuple each piece of [start, end) holds (gaps become
        ``(item,)``): :meth:`update` with ``fn(v) = (v or ()) + (item,)``, in one splice
        instead of a closure call and an assign per piece.

        Examples
        --------
        >>> m = IntervalMap()
        >>> m.append_to(0, 8, 1); m.append_to(4, 12, 2)
        >>> list(m.items())
        [(0, 4, (1,)), (4, 8, (1, 2)), (8, 12, (2,))]
        """
        if end <= start:
            return
        ends = self._ends
        if not ends or start >= ends[-1]:   # past everything stored
            self._starts.append(start); ends.append(end); self._vals.append((item,))
            return
        i, j = self.cut(start, end)
        starts, vals = self._starts, self._vals
        new_s, new_e, new_v, pos = [], [], [], start
        for x in range(i, j):
            s = starts[x]
            if s > pos:
                new_s.append(pos); new_e.append(s); new_v.append((item,))
            new_s.append(s); new_e.append(ends[x]); new_v.append((vals[x] or ()) + (item,))
            pos = ends[x]
        if pos < end:
            new_s.append(pos); new_e.append(end); new_v.append((item,))
        starts[i:j] = new_s
        ends[i:j] = new_e
        vals[i:j] = new_v

    def is_empty(self, start: int, end: int) -> bool:
        """Whether no stored piece overlaps [start, end)."""
        starts = self._starts
        i = bisect_right(starts, start) - 1
        if i >= 0 and self._ends[i] > start:
            return False
        return i + 1 >= len(starts) or starts[i + 1] >= end

    def covers(self, start: int, end: int, value: Any) -> bool:
        """Whether every byte of [start, end) is set and holds ``value`` (== compare).

        Examples
        --------
        >>> m = IntervalMap()
        >>> m.assign(0, 8, 1); m.assign(8, 16, 1)
        >>> m.covers(4, 12, 1), m.covers(4, 20, 1), m.covers(0, 4, 2)
        (True, False, False)
        """
        i = self._first(start)
        starts, ends, vals = self._starts, self._ends, self._vals
        pos = start
        while pos < end:
            if i >= len(starts) or starts[i] > pos or vals[i] != value:
                return False
            pos = ends[i]
            i += 1
        return True

    def cut(self, start: int, end: int) -> tuple[int, int]:
        """Split the pieces that straddle ``start`` or ``end``, and return the index range
        [i, j) of the pieces inside [start, end) (see :meth:`piece`, :meth:`replace`).
        Splitting keeps every byte's value."""
        self._split(start)
        self._split(end)
        return self._first(start), bisect_left(self._starts, end)

    def piece(self, i: int) -> tuple[int, int, Any]:
        """The ``i``-th piece as (start, end, value), for callers walking by index."""
        return self._starts[i], self._ends[i], self._vals[i]

    def set_value(self, i: int, value: Any) -> None:
        """Replace the value of piece ``i`` (an index from :meth:`cut`)."""
        self._vals[i] = value

    def replace(self, i: int, j: int, pieces: list[tuple[int, int, Any]]) -> None:
        """Replace pieces [i, j) (from :meth:`cut`) by ``pieces``: sorted, disjoint, and
        inside the span the old ones had (gaps included)."""
        self._starts[i:j] = [p[0] for p in pieces]
        self._ends[i:j] = [p[1] for p in pieces]
        self._vals[i:j] = [p[2] for p in pieces]

    def _split(self, x: int) -> None:
        i = bisect_right(self._starts, x) - 1
        if i >= 0 and self._starts[i] < x < self._ends[i]:
            self._starts.insert(i + 1, x)
            self._ends.insert(i + 1, self._ends[i])
            self._vals.insert(i + 1, self._vals[i])
            self._ends[i] = x

    def __len__(self) -> int:
        return len(self._starts)

    def items(self) -> Iterator[tuple[int, int, Any]]:
        """(start, end, value) of every stored interval, in order."""
        return zip(self._starts, self._ends, self._vals)
