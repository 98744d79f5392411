"""Flow paths stored once and shared: the incidence of wide flows without a row per flow.

A reduction over every rank crosses each source's memory and link (1152 resources at
576 ranks: the ReduceScatter of 256 MiB on ``rubin-ultra-nvl576`` runs 16,704 such flows
at once), but such flows are instances of a few hundred paths (the
:class:`~purlin.sim.fabric.Fabric` caches one ``FlowSpec`` per instruction shape). Kept as a
dense flow x position array they took more memory than the schedule itself; here each
distinct path is a *pattern* (its resource indices and weights, once), and a flow is a
pattern id.

What the max-min solver needs from the flows takes two forms. A per-flow minimum or "all"
over the path is the pattern's, computed once per pattern. A per-resource sum over flows
(load, frozen use, demand) is formed per pattern (:meth:`Rows.sums`): the flows of a
pattern are summed first, then each pattern's weights applied once. Its cost is that of
the patterns in use, not of every flow's path: a rack's reduction runs thousands of flows
over a few hundred patterns, each as wide as the rack. The dense rows sum flow by flow,
so the two agree to rounding, not to the bit.
The bytes a flow leaves on its resources are still added flow by flow
(:meth:`Rows.add_at`: ``np.add.at`` is unbuffered), a chunk of flows at a time.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

CHUNK = 1 << 19
"""(flow, resource) entries expanded at a time: a few MiB per array."""


class Rows:
    """Flows as pattern ids over a table of patterns stored back to back: flow ``i`` crosses
    ``res[ptr[p]:ptr[p + 1]]`` with weights ``w[...]``, ``p = pid[i]``."""

    __slots__ = ("ptr", "res", "w", "pid", "plen", "_full")

    def __init__(self, ptr: np.ndarray, res: np.ndarray, w: np.ndarray, pid: np.ndarray,
                 plen: np.ndarray | None = None, full: bool | None = None) -> None:
        self.ptr, self.res, self.w, self.pid = ptr, res, w, pid
        self.plen = np.diff(ptr) if plen is None else plen
        self._full = full   # whether no pattern is empty (None: not known yet)

    @classmethod
    def of_dense(cls, idx: np.ndarray, w: np.ndarray, dummy: int) -> Rows:
        """Each row of a padded flow x position array its own pattern (for tests)."""
        on = idx != dummy
        ptr = np.zeros(len(idx) + 1, np.int64)
        np.cumsum(on.sum(axis=1), out=ptr[1:])
        return cls(ptr, idx[on].astype(np.int64), w[on].astype(float), np.arange(len(idx)))

    @property
    def n(self) -> int:
        """How many flows."""
        return len(self.pid)

    def take(self, sel: np.ndarray) -> Rows:
        """The flows ``sel`` (positions, in that order) over the same patterns."""
        return Rows(self.ptr, self.res, self.w, self.pid.take(sel), self.plen, self._full)

    def only(self, keep: np.ndarray) -> Rows:
        """The same flows with each path cut to the resources marked in ``keep``."""
        on = keep.take(self.res)
        ptr = np.zeros(len(self.ptr), np.int64)
        np.cumsum(_seg(np.add, on.astype(np.int64), self.ptr, 0), out=ptr[1:])
        return Rows(ptr, self.res[on], self.w[on], self.pid)

    # ---- per pattern -------------------------------------------------------------------
    def seg_min(self, per_resource: np.ndarray) -> np.ndarray:
        """Per pattern, the minimum of ``per_resource`` over its path (inf if empty)."""
        return self._seg(np.minimum, per_resource.take(self.res), np.inf)

    def seg_all(self, per_resource: np.ndarray) -> np.ndarray:
        """Per pattern, whether ``per_resource`` (bool) holds on its whole path."""
        return self._seg(np.logical_and, per_resource.take(self.res), True)

    def seg_any(self, per_resource: np.ndarray) -> np.ndarray:
        """Per pattern, whether ``per_resource`` (bool) holds somewhere on its path."""
        return self._seg(np.logical_or, per_resource.take(self.res), False)

    def seg_count(self, per_resource: np.ndarray) -> np.ndarray:
        """Per pattern, how many of its resources are marked in ``per_resource``."""
        return self._seg(np.add, per_resource.take(self.res).astype(np.int64), 0)

    def _seg(self, ufunc: np.ufunc, vals: np.ndarray, empty) -> np.ndarray:
        """:func:`_seg` over the patterns; one reduceat where none is empty."""
        if self._full is None:
            self._full = bool(self.plen.all())
        if self._full and len(vals):
            return ufunc.reduceat(vals, self.ptr[:-1])
        return _seg(ufunc, vals, self.ptr, empty)

    def resources(self) -> np.ndarray:
        """The resources the flows cross (sorted, distinct)."""
        used = np.zeros(len(self.plen), bool)
        used[self.pid] = True
        return np.unique(self.res[used.repeat(self.plen)])

    # ---- per resource ------------------------------------------------------------------
    def sums(self, r1: int, scale: np.ndarray | None = None) -> np.ndarray:
        """Per resource, the flows' weights (times ``scale`` per flow) summed: first each
        pattern's flows (their scales, in flow order), then one term per pattern and
        resource, patterns in id order. The dense rows sum the same terms flow by flow,
        so the two agree to rounding (a few units in the last place), not to the bit;
        here the work is that of the patterns in use, not of every flow's path."""
        npat = len(self.plen)
        count = np.bincount(self.pid, minlength=npat)
        present = np.flatnonzero(count)
        per = (count.take(present).astype(float) if scale is None
               else np.bincount(self.pid, scale, minlength=npat).take(present))
        ln = self.plen.take(present)
        g = _ranges(self.ptr.take(present), ln)
        return np.bincount(self.res.take(g), self.w.take(g) * per.repeat(ln), minlength=r1)

    def add_at(self, out: np.ndarray, scale: np.ndarray | None = None) -> None:
        """Add each flow's weights (times ``scale``) to ``out`` one term at a time, in flow
        order (as ``np.add.at`` over the dense rows), a chunk of flows at a time."""
        ln = self.plen.take(self.pid)
        for a, b in _chunks(ln):
            la = ln[a:b]
            g = _ranges(self.ptr.take(self.pid[a:b]), la)
            vals = self.w.take(g)
            if scale is not None:
                vals *= scale[a:b].repeat(la)
            np.add.at(out, self.res.take(g), vals)


def _chunks(ln: np.ndarray) -> list[tuple[int, int]]:
    """Runs of flows (of ``ln`` entries each) of about CHUNK entries."""
    n = len(ln)
    if not n or ln.sum() <= CHUNK:
        return [(0, n)] if n else []
    cum = np.cumsum(ln)
    total = int(cum[-1])
    cuts = np.searchsorted(cum, np.arange(CHUNK, total, CHUNK), side="right")
    bounds = np.unique(np.concatenate(([0], cuts, [n])))
    return list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))


def _ranges(start: np.ndarray, length: np.ndarray) -> np.ndarray:
    """The concatenation of ``arange(s, s + n)`` for each (s, n)."""
    if not len(start):
        return np.zeros(0, np.int64)
    k = int(length[0])
    if (length == k).all():   # all one width: a broadcast
        return (start[:, None] + np.arange(k)).ravel()
    g = np.repeat(start - (np.cumsum(length) - length), length)
    g += np.arange(len(g))
    return g


def _seg(ufunc: np.ufunc, vals: np.ndarray, ptr: np.ndarray, empty) -> np.ndarray:
    """``ufunc.reduceat`` over the segments ``ptr`` delimits, ``empty`` for empty ones
    (reduceat would give the next element there)."""
    starts = ptr[:-1]
    full = starts < ptr[1:]
    out = np.full(len(starts), empty, dtype=np.result_type(vals.dtype, type(empty)))
    if full.all():
        return ufunc.reduceat(vals, starts) if len(starts) else out
    if full.any():
        out[full] = ufunc.reduceat(vals, starts[full])
    return out


class PathStore:
    """The distinct paths of a :class:`~purlin.sim.fluid.FluidModel`'s flows, each once.

    A path given as the same tuple objects as before (a cached ``FlowSpec``'s) is found by
    identity, not compared; one whose flows have all ended stays until the storage
    fills, so a path that comes back is not stored again. When the storage is full and
    half of it is such paths, they are dropped and the rest renumbered (``renumbered``:
    the new id of each old one, for the owner to apply to its flows)."""

    def __init__(self) -> None:
        self.res = np.zeros(1024, np.int64)
        self.w = np.zeros(1024)
        self.top = 0                       # entries in use (live or not)
        self.ptr = np.zeros(65, np.int64)  # pattern p: entries ptr[p]..ptr[p + 1]
        self.length = np.zeros(64, np.int64)
        self.refs = np.zeros(64, np.int64)
        self.count = 0                     # patterns stored
        self._by_id: dict[int, tuple[tuple, tuple, int]] = {}
        self.renumbered: np.ndarray | None = None   # after a compaction: new id per old id

    def intern(self, resources: Sequence[int], weights: Sequence[float]) -> int:
        """The pattern id of a path (stored if new); one more flow refers to it."""
        hit = self._by_id.get(id(resources))
        if hit is not None and hit[0] is resources and hit[1] is weights:
            p = hit[2]
        else:
            p = self._append(resources, weights)
            if type(resources) is tuple and type(weights) is tuple:   # immutable: safe to know by id
                self._by_id[id(resources)] = (resources, weights, p)
        self.refs[p] += 1
        return p

    def release(self, pids: np.ndarray) -> None:
        """Flows of patterns ``pids`` ended."""
        np.subtract.at(self.refs, pids, 1)

    def rows(self, pids: np.ndarray) -> Rows:
        """The flows of patterns ``pids`` (in that order) as :class:`Rows` (over every
        stored pattern: no copy)."""
        n = self.count
        return Rows(self.ptr[:n + 1], self.res[:self.top], self.w[:self.top], pids, self.length[:n])

    def _append(self, resources: Sequence[int], weights: Sequence[float]) -> int:
        k = len(resources)
        if self.top + k > len(self.res) and 2 * self.garbage() >= self.top:
            self.renumbered = self.compact()
        if self.top + k > len(self.res):
            self.res = np.resize(self.res, max(2 * len(self.res), self.top + k))
            self.w = np.resize(self.w, len(self.res))
        if self.count == len(self.length):
            self.ptr = np.resize(self.ptr, 2 * self.count + 1)
            self.length, self.refs = np.resize(self.length, 2 * self.count), np.resize(self.refs, 2 * self.count)
        self.res[self.top:self.top + k] = resources
        self.w[self.top:self.top + k] = weights
        p = self.count
        self.ptr[p + 1], self.length[p], self.refs[p] = self.top + k, k, 0
        self.top += k
        self.count += 1
        return p

    def garbage(self) -> int:
        """Entries of patterns no flow refers to."""
        dead = self.refs[:self.count] == 0
        return int(self.length[:self.count][dead].sum())

    def compact(self) -> np.ndarray:
        """Drop the patterns no flow refers to; returns the new id of each old one (-1:
        dropped)."""
        n = self.count
        alive = self.refs[:n] > 0
        keep = np.flatnonzero(alive)
        new_id = np.full(n, -1, np.int64)
        new_id[keep] = np.arange(len(keep))
        ln = self.length.take(keep)
        g = _ranges(self.ptr.take(keep), ln)
        size = max(1024, 2 * len(g))
        res, w = np.zeros(size, np.int64), np.zeros(size)
        res[:len(g)], w[:len(g)] = self.res.take(g), self.w.take(g)
        m = max(64, 2 * len(keep))
        ptr, length, refs = np.zeros(m + 1, np.int64), np.zeros(m, np.int64), np.zeros(m, np.int64)
        np.cumsum(ln, out=ptr[1:len(keep) + 1])
        length[:len(keep)], refs[:len(keep)] = ln, self.refs.take(keep)
        self.res, self.w, self.top = res, w, len(g)
        self.ptr, self.length, self.refs, self.count = ptr, length, refs, len(keep)
        self._by_id = {k: (r, wt, int(new_id[p])) for k, (r, wt, p) in self._by_id.items() if alive[p]}
        return new_id
