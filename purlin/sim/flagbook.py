"""When each flag landed: the engine's record of (value, time, seq) per (rank, signal).

A rack's direct plan files W^2 C flags a call (every CTA tells every peer's matching CTA
it is done) and nearly every flag lands once. A dict of tuples paid a key, a tuple and its
boxed numbers per flag; here a flag's first landing takes three 8-byte slots in per-rank arrays (grown to the highest signal filed), and only a
flag that lands again keeps a list, of its later landings. Values are as issued: a flag's
landings rise in value in issue order (the IR's Notify values rise along a CTA), so the
first landing at or above a wanted value is found by bisection.
"""
from __future__ import annotations

from array import array
from bisect import bisect_left
from operator import itemgetter

NONE = -1
"""The value slot of a flag that has not landed (a Notify may store 0)."""
_value = itemgetter(0)


class FlagBook:
    """Landings per (rank, signal): the first in arrays, later ones in ``more``.

    Examples
    --------
    >>> b = FlagBook(2)
    >>> b.add(1, 3, 1, 0.5, 7); b.add(1, 3, 2, 0.9, 8)
    >>> b.first(1, 3), b.landing(1, 3, 2), b.reached(1, 3), b.first(0, 3)
    ((1, 0.5, 7), (0.9, 8), 2, None)
    """

    __slots__ = ("value", "time", "seq", "more")

    def __init__(self, ranks: int) -> None:
        self.value = [array("q") for _ in range(ranks)]
        self.time = [array("d") for _ in range(ranks)]
        self.seq = [array("q") for _ in range(ranks)]
        self.more: dict[tuple[int, int], list[tuple[int, float, int]]] = {}

    def add(self, rank: int, sig: int, value: int, t: float, seq: int) -> None:
        """File a landing of ``value`` at (``t``, ``seq``)."""
        vs = self.value[rank]
        if sig >= len(vs):
            grow = max(sig + 1 - len(vs), len(vs) // 2)   # amortized: few regrowths a rank
            vs.extend(array("q", [NONE]) * grow)
            self.time[rank].extend(array("d", [0.0]) * grow)
            self.seq[rank].extend(array("q", [0]) * grow)
        if vs[sig] == NONE:
            vs[sig] = value
            self.time[rank][sig] = t
            self.seq[rank][sig] = seq
        else:
            self.more.setdefault((rank, sig), []).append((value, t, seq))

    def first(self, rank: int, sig: int) -> tuple[int, float, int] | None:
        """The first landing, or None."""
        vs = self.value[rank]
        if sig >= len(vs) or vs[sig] == NONE:
            return None
        return vs[sig], self.time[rank][sig], self.seq[rank][sig]

    def landing(self, rank: int, sig: int, want: int) -> tuple[float, int] | None:
        """(time, seq) of the first landing of a value at least ``want``, or None."""
        got = self.first(rank, sig)
        if got is None:
            return None
        if got[0] >= want:
            return got[1], got[2]
        later = self.more.get((rank, sig))
        if not later or later[-1][0] < want:
            return None
        _, t, seq = later[bisect_left(later, want, key=_value)]
        return t, seq

    def reached(self, rank: int, sig: int) -> int:
        """The highest value landed (0 if none)."""
        got = self.first(rank, sig)
        if got is None:
            return 0
        return max([got[0]] + [v for v, _, _ in self.more.get((rank, sig), ())])
