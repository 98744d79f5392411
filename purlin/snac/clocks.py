"""Happens-before for the verifier, at the cost of what a schedule actually shares.

The verifier asks two kinds of ordering questions, and answers each with the smallest
structure that is exact for it:

- "is event (a, j) ordered before the current point of program k?", where a wrote or
  read bytes that k now reads or overwrites. :class:`Clocks` are vector clocks with one
  component per *tracked* program (:func:`tracked_programs`): one whose accesses overlap
  another access, one of them a write, on some byte that is not an input. Only such a
  program can be the earlier side of such a question, and a clock join is a
  componentwise maximum, so dropping the other components changes no answer. A clock
  is a never-mutated numpy base shared between snapshots plus a small dict of newer
  entries: a run of Notifies shares one snapshot, a program without Waits owns no array.
- "is some CTA of rank r ordered before (after) this event?", for the call windows:
  rank masks (Python ints, bit r for rank r) in :mod:`purlin.snac.verify`.

Both ride on the walk order of :mod:`purlin.snac.walk`, a topological order of
happens-before (a Wait is walked after the Notify that satisfies it).
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

FOLD = 48
"""Entries a clock keeps in its dict before folding them into a new numpy base."""


class Untracked(Exception):
    """An ordering question about a program the clocks do not track (internal: the
    verifier then tracks every program and starts again)."""


def tracked_programs(group: Sequence[int], start: Sequence[int], end: Sequence[int],
                     program: Sequence[int], write: Sequence[bool]) -> set[int]:
    """Programs with an access that overlaps another access, one of the two a write, in
    the same ``group`` (a (rank, buffer)). Parallel sequences, one entry per access to a
    byte range that is not an input. Conservative: an overlap within one program counts.

    Examples
    --------
    >>> sorted(tracked_programs([0, 0, 0, 0], [0, 4, 20, 21], [8, 12, 24, 23],
    ...                         [1, 2, 3, 4], [True, False, False, False]))
    [1, 2]
    """
    if not len(group):
        return set()
    # at most a few arrays of one entry per access alive at once (about 32 bytes an
    # access at the peak): a 576-rank broadcast AllGather makes 9.6 million accesses
    lo, hi = np.asarray(start, np.int64), np.asarray(end, np.int64)
    big = int(hi.max()) + 1
    ks = np.asarray(group, np.int64) * big   # keyed by group: groups never overlap
    ks += lo
    order = np.argsort(ks, kind="stable")    # by group, then start (ks orders both)
    if len(order) < 1 << 31:
        order = order.astype(np.int32)
    ks.sort(kind="stable")                   # in place: ks[order], with no copy
    ke = hi[order]
    ke -= lo[order]
    ke += ks
    del lo, hi
    w = np.asarray(write, bool)[order]
    n = len(ks)
    neg, pos = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    # an earlier interval (in start order) overlaps x iff its end passes x's start; the
    # first later one overlaps iff it starts before x's end
    run = np.maximum.accumulate(ke)
    hit = np.zeros(n, bool)                  # any overlap, for the writes
    hit[1:] = ks[1:] < run[:-1]
    hit[:-1] |= ks[1:] < ke[:-1]
    del run
    run = np.where(w, ke, neg)
    np.maximum.accumulate(run, out=run)
    near = np.zeros(n, bool)                 # an overlap with a write, for the reads
    near[1:] = ks[1:] < run[:-1]
    del run
    run = np.where(w[::-1], ks[::-1], pos)   # write starts from the end: the first later one
    np.minimum.accumulate(run, out=run)
    near[:-1] |= run[::-1][1:] < ke[:-1]
    del run, ks, ke
    np.copyto(hit, near, where=~w)
    return set(np.unique(np.asarray(program, np.int64)[order[hit]]).tolist())


class Clocks:
    """Vector clocks over the tracked programs of one walk.

    A snapshot is (base, extra, own column, own value): ``base`` a numpy array or None,
    ``extra`` a dict column -> value; both are never changed once shared (a program
    copies its dict before changing it again).
    """

    def __init__(self, nprog: int, tracked: set[int]):
        self.col = {k: j for j, k in enumerate(sorted(tracked))}
        self.width = len(self.col)
        self.base: list[np.ndarray | None] = [None] * nprog
        self.extra: list[dict[int, int]] = [{} for _ in range(nprog)]
        self.shared = [False] * nprog
        self.pending: list[list | None] = [None] * nprog
        self._last: list[tuple | None] = [None] * nprog   # reusable snapshot, if no join since

    def snapshot(self, k: int, i: int) -> tuple:
        """The clock of program k as of instruction i done (its own entry i + 1)."""
        if self.pending[k]:
            self._join(k)
        c = self.col.get(k)
        last = self._last[k]
        if last is not None and c is None:
            return last
        self.shared[k] = True
        snap = (self.base[k], self.extra[k], c, i + 1)
        self._last[k] = snap
        return snap

    def join_later(self, k: int, snap: tuple) -> None:
        """Join ``snap`` into program k's clock before its next question or snapshot."""
        p = self.pending[k]
        if p is None:
            self.pending[k] = [snap]
        else:
            p.append(snap)

    def join_all_later(self, k: int, snaps: Iterable[tuple]) -> None:
        """:meth:`join_later` for each of ``snaps``, in order (a Wait's ~70 flags at once)."""
        p = self.pending[k]
        if p is None:
            self.pending[k] = list(snaps)
        else:
            p.extend(snaps)

    def before(self, a: int, j: int, k: int) -> bool:
        """Whether instruction j of program a is ordered before program k's current point
        (callers ask only for a != k)."""
        c = self.col.get(a)
        if c is None:
            raise Untracked(a)
        if self.pending[k]:
            self._join(k)
        v = self.extra[k].get(c, 0)
        b = self.base[k]
        if b is not None and b[c] > v:
            v = int(b[c])
        return j < v

    def _join(self, k: int) -> None:
        snaps, self.pending[k] = self.pending[k], None
        b = self.base[k]
        bases = []
        ex = self.extra[k]
        mine = not self.shared[k]    # ex may be changed in place
        changed = False
        for sb, se, oc, ov in snaps:
            if sb is not None and sb is not b and all(sb is not x for x in bases):
                bases.append(sb)
            if se or oc is not None:
                if not mine:
                    ex, mine = dict(ex), True
                for col, v in se.items():
                    if v > ex.get(col, 0):
                        ex[col] = v
                        changed = True
                if oc is not None and ov > ex.get(oc, 0):
                    ex[oc] = ov
                    changed = True
        if bases:
            if b is not None:
                bases.append(b)
            b = bases[0] if len(bases) == 1 else np.maximum.reduce(bases)
            changed = True
        if not changed:
            return
        if len(ex) > FOLD:
            b = np.zeros(self.width, np.int64) if b is None else b.copy()
            cols = np.fromiter(ex.keys(), np.int64, len(ex))
            vals = np.fromiter(ex.values(), np.int64, len(ex))
            b[cols] = np.maximum(b[cols], vals)
            ex, mine = {}, True
        self.base[k], self.extra[k] = b, ex
        self.shared[k] = not mine
        self._last[k] = None
