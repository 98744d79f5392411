"""Weighted max-min fair rates of flows over capacity resources.

The allocation is the one progressive filling gives (:func:`progressive`): every
unfrozen flow's rate rises by the same amount until a resource saturates or a flow
reaches its cap; those flows freeze; repeat. It is the unique allocation in which every
flow has a bottleneck: a saturated resource on its path where no flow runs faster, or
its own cap.

:func:`fill` computes the same allocation in fewer, vectorized rounds. With a fair share
``(capacity - frozen use) / free weight`` per resource, a resource whose share is no
larger than that of any resource sharing a free flow with it (and no larger than those
flows' caps) is a *local bottleneck*: progressive filling freezes its flows at exactly
that share, since shares only rise as other flows freeze below them. So every round
freezes the flows of all local bottlenecks (and of caps below every share on their path)
at once, and the global minimum is always among them. Two more exact savings: a resource
whose flows could not fill it even all at their caps never saturates and is dropped; and
after a change, the flows slower than every flow that left, and slower than the first
level at which a new flow could saturate anything, keep their rates (progressive filling
runs identically up to that level), so only the rest is solved again.
"""
from __future__ import annotations

import numpy as np

SAT_REL = 1e-9
"""A resource counts as saturated when its unused capacity is below this fraction."""
_TIE = 1e-9
"""Shares within this relative distance count as equal when finding local bottlenecks."""


def fill(idx: np.ndarray, w: np.ndarray, cap: np.ndarray, capacity: np.ndarray, dummy: int,
         keep: np.ndarray | None = None, keep_rate: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Max-min fair rates of flows ``idx`` (resource indices per flow, padded with
    ``dummy``), ``w`` (capacity bytes per payload byte on each) and ``cap`` (each flow's
    own bound), over resources of ``capacity`` (``dummy`` infinite). ``keep`` marks flows
    whose rates are known to be unchanged (given in ``keep_rate``). Returns (rates,
    unused capacity per resource).

    Examples
    --------
    >>> import numpy as np
    >>> rate, rem = fill(np.array([[0, 2], [0, 1]]), np.array([[1.0, 0.0], [1.0, 1.0]]),
    ...                  np.array([np.inf, 10.0]), np.array([100.0, 50.0, np.inf]), 2)
    >>> rate.tolist(), rem[:2].tolist()
    ([90.0, 10.0], [0.0, 40.0])
    """
    n = len(idx)
    r1 = len(capacity)
    rate = np.zeros(n)
    limit = capacity.copy()
    limit[dummy] = np.inf
    free = np.ones(n, bool)
    used = np.zeros(r1)
    if keep is not None and keep.any():
        kp = np.flatnonzero(keep)
        kr = keep_rate.take(kp)
        rate[kp] = kr
        used = np.bincount(idx.take(kp, axis=0).ravel(), (w.take(kp, axis=0) * kr[:, None]).ravel(), minlength=r1)
        free = ~keep
    F = np.flatnonzero(free)
    fi, fw, fc = idx.take(F, axis=0), w.take(F, axis=0), cap.take(F)
    # resources the free flows could not fill even at their caps never saturate
    demand = used + np.bincount(fi.ravel(), (fw * np.minimum(fc, 1e300)[:, None]).ravel(), minlength=r1)
    live = demand > limit * (1 + 1e-12)
    live[dummy] = False
    on = live[fi]
    width = int(_row_sum(on).max()) if len(F) else 0
    if width < fi.shape[1] // 2:   # keep only the live columns, packed to the left
        cols = np.argsort(~on, axis=1, kind="stable")[:, :max(width, 1)]
        on = np.take_along_axis(on, cols, 1)
        fi = np.where(on, np.take_along_axis(fi, cols, 1), dummy)
        fw = np.where(on, np.take_along_axis(fw, cols, 1), 0.0)
    if len(F) and not np.isfinite(np.minimum(_row_min(limit[fi]), fc)).all():
        raise ValueError("a flow has neither a finite cap nor a finite resource")
    loose, tight = 1 + _TIE, 1 - _TIE
    with np.errstate(divide="ignore", invalid="ignore"):
        while len(F):
            flat = fi.ravel()
            load = np.bincount(flat, fw.ravel(), minlength=r1)
            share = (limit - used) / load
            share[dummy] = np.inf
            at = share.take(fi)
            path = _row_min(at)
            best = np.minimum(path, fc)
            # a resource is a local bottleneck if no free flow through it is held lower
            held = np.bincount(flat, (best[:, None] < at * tight).ravel(), minlength=r1)
            notlocal = held != 0
            notlocal[dummy] = True
            done = (fc <= path * loose) | ~_row_all(notlocal.take(fi))
            d = np.flatnonzero(done)   # take() on positions: 3x faster than a mask here
            x = best.take(d)
            rate[F.take(d)] = x
            if len(d) == len(F):
                break
            used += np.bincount(fi.take(d, axis=0).ravel(), (fw.take(d, axis=0) * x[:, None]).ravel(),
                                minlength=r1)
            r = np.flatnonzero(~done)
            F, fi, fw, fc = F.take(r), fi.take(r, axis=0), fw.take(r, axis=0), fc.take(r)
    rem = capacity - np.bincount(idx.ravel(), (w * rate[:, None]).ravel(), minlength=r1)
    return rate, rem


def _row_min(a: np.ndarray) -> np.ndarray:
    """``a.min(axis=1)`` for the few columns a flow has, one column at a time (numpy reduces
    short rows an order of magnitude slower than it combines whole columns)."""
    out = a[:, 0].copy()
    for j in range(1, a.shape[1]):
        np.minimum(out, a[:, j], out=out)
    return out


def _row_all(a: np.ndarray) -> np.ndarray:
    """``a.all(axis=1)``, a column at a time (see :func:`_row_min`)."""
    out = a[:, 0].copy()
    for j in range(1, a.shape[1]):
        out &= a[:, j]
    return out


def _row_sum(a: np.ndarray) -> np.ndarray:
    """``a.sum(axis=1)`` of a boolean array as integers, a column at a time."""
    out = a[:, 0].astype(np.int64)
    for j in range(1, a.shape[1]):
        out += a[:, j]
    return out


def kept_below(idx: np.ndarray, w: np.ndarray, cap: np.ndarray, capacity: np.ndarray, dummy: int,
               old_rate: np.ndarray, new: np.ndarray, left_rates: list[float]) -> np.ndarray:
    """Which flows keep their rates after a change: those slower than every flow that
    left (rates ``left_rates``) and than the first level at which a flow marked ``new``
    could saturate a resource or reach its cap, given the old rates of the others.

    On a resource r a new flow crosses, progressive filling with the new flows follows
    the old rates until r fills: at the level L with sum(w_f * min(x_f, L)) + w_new * L =
    capacity, found for every such resource at once (flows sorted by old rate)."""
    level = min(left_rates, default=np.inf)
    if new.any():
        level = min(level, float(cap[new].min()))
        touched = np.unique(idx[new])
        touched = touched[touched != dummy]
        if len(touched):
            level = min(level, float(_water_levels(idx, w, capacity, old_rate, new, touched).min()))
    if not np.isfinite(level) or level <= 0:
        return np.zeros(len(idx), bool)
    return (~new) & (old_rate < level * (1 - 1e-12))


def _water_levels(idx, w, capacity, old_rate, new, touched) -> np.ndarray:
    """Per resource in ``touched``: the level L at which it fills, old flows held at
    min(old rate, L) and new ones rising with L."""
    ng = len(touched)
    pos = np.full(len(capacity), -1)
    pos[touched] = np.arange(ng)
    g = pos[idx]                       # group of each (flow, resource) entry, -1 if none
    fl, col = np.nonzero(g >= 0)
    grp, wt = g[fl, col], w[fl, col]
    is_new = new[fl]
    add = np.bincount(grp[is_new], wt[is_new], minlength=ng)
    grp, wt, x = grp[~is_new], wt[~is_new], old_rate[fl[~is_new]]
    order = np.lexsort((x, grp))
    grp, wt, x = grp[order], wt[order], x[order]
    held = np.bincount(grp, wt * x, minlength=ng)      # every old flow held at its rate
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (capacity[touched] - held) / add
    if not len(x):
        return out
    # entry j as the first old flow still rising: those before it in its group are held
    first = np.r_[True, grp[1:] != grp[:-1]]
    cw = np.cumsum(wt * x)
    cwt = np.cumsum(wt)
    start = np.maximum.accumulate(np.where(first, np.arange(len(x)), 0))
    before_w = np.r_[0.0, cw][:-1] - np.r_[0.0, cw][start]
    before_wt = np.r_[0.0, cwt][:-1] - np.r_[0.0, cwt][start]
    rising = add[grp] + np.bincount(grp, wt, minlength=ng)[grp] - before_wt
    with np.errstate(divide="ignore", invalid="ignore"):
        lv = (capacity[touched][grp] - before_w) / rising
    fits = lv <= x
    big = len(x)
    firstfit = np.full(ng, big)
    np.minimum.at(firstfit, grp[fits], np.flatnonzero(fits))
    found = firstfit < big
    out[found] = lv[firstfit[found]]
    return out


def progressive(idx: np.ndarray, w: np.ndarray, cap: np.ndarray, capacity: np.ndarray,
                dummy: int) -> tuple[np.ndarray, np.ndarray]:
    """Progressive filling itself, one saturation level at a time: the definition
    :func:`fill` is checked against."""
    n = len(idx)
    rate = np.zeros(n)
    rem = capacity.copy()
    tol = capacity * SAT_REL
    free = np.arange(n)
    r1 = len(rem)
    while len(free):
        fidx, fw = idx[free], w[free]
        load = np.bincount(fidx.ravel(), fw.ravel(), minlength=r1)
        load[dummy] = 0.0
        used = load > 0
        step = float((rem[used] / load[used]).min()) if used.any() else float("inf")
        headroom = cap[free] - rate[free]
        step = min(step, float(headroom.min()))
        if not np.isfinite(step):
            raise ValueError("a flow has neither a finite cap nor a finite resource")
        step = max(step, 0.0)
        rate[free] += step
        rem -= step * load
        saturated = used & (rem <= tol)
        capped = headroom - step <= np.minimum(cap[free], 1e300) * 1e-12
        frozen = saturated[fidx].any(axis=1) | capped
        free = free[~frozen]
    return rate, rem
