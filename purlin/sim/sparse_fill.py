"""The max-min solver of :mod:`purlin.sim.maxmin` for wide paths, over shared patterns.

:func:`fill_rows` and :func:`kept_below_rows` compute what :func:`~purlin.sim.maxmin.fill`
(its row-by-row form for paths wider than ``_WIDE``) and
:func:`~purlin.sim.maxmin.kept_below` compute over the dense flow x position arrays, from
:class:`~purlin.sim.paths.Rows`: a reduction's flows over 576 ranks are 1152 positions
wide and number in the thousands, and the dense arrays (and the temporaries of a round,
each as large) held gigabytes. Here a per-flow minimum or "all" over a path is taken once
per pattern, and every per-resource sum is formed per pattern
(:meth:`~purlin.sim.paths.Rows.sums`), so the rates are the dense ones to rounding (the
property tests hold the two together, and both to progressive filling); memory is the
patterns and per-flow vectors.
"""
from __future__ import annotations

import numpy as np

from purlin.sim.maxmin import _TIE, first_fits
from purlin.sim import paths
from purlin.sim.paths import Rows, _ranges


def fill_rows(rows: Rows, cap: np.ndarray, capacity: np.ndarray, dummy: int, k: int,
              keep: np.ndarray | None = None,
              keep_rate: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~purlin.sim.maxmin.fill` of the flows ``rows`` as the dense form of width
    ``k`` (> ``_WIDE``) would give it: (rates, unused capacity per resource). ``k`` only
    decides, as there, whether the free flows' paths are cut to their live resources."""
    n, r1 = rows.n, len(capacity)
    rate = np.zeros(n)
    limit = capacity.copy()
    limit[dummy] = np.inf
    used = np.zeros(r1)
    if keep is not None and keep.any():
        kp = np.flatnonzero(keep)
        kr = keep_rate.take(kp)
        rate[kp] = kr
        used = rows.take(kp).sums(r1, kr)
        F = np.flatnonzero(~keep)
    else:
        F = np.arange(n)
    fr, fc = rows.take(F), cap.take(F)
    # resources the free flows could not fill even at their caps never saturate
    demand = used + fr.sums(r1, np.minimum(fc, 1e300))
    live = demand > limit * (1 + 1e-12)
    live[dummy] = False
    width = int(fr.seg_count(live).take(fr.pid).max()) if len(F) else 0
    if width < k // 2:   # as the dense form keeps only the live columns
        fr = fr.only(live)
    if len(F) and not np.isfinite(np.minimum(fr.seg_min(limit).take(fr.pid), fc)).all():
        raise ValueError("a flow has neither a finite cap nor a finite resource")
    with np.errstate(divide="ignore", invalid="ignore"):
        while len(F):
            x, done = _round(fr, fc, limit, used, dummy)
            d = np.flatnonzero(done)
            x = x.take(d)
            rate[F.take(d)] = x
            if len(d) == len(F):
                break
            used += fr.take(d).sums(r1, x)
            r = np.flatnonzero(~done)
            F, fr, fc = F.take(r), fr.take(r), fc.take(r)
    return rate, capacity - rows.sums(r1, rate)


def _round(fr: Rows, fc: np.ndarray, limit: np.ndarray, used: np.ndarray,
           dummy: int) -> tuple[np.ndarray, np.ndarray]:
    """One round of local bottlenecks: each free flow's candidate rate and whether it
    freezes. A resource is a local bottleneck if no free flow through it is held lower
    than its share; "some flow of a pattern held lower" is "the lowest of them is"."""
    share = (limit - used) / fr.sums(len(limit))
    share[dummy] = np.inf
    path = fr.seg_min(share).take(fr.pid)
    best = np.minimum(path, fc)
    low = np.full(len(fr.plen), np.inf)
    np.minimum.at(low, fr.pid, best)
    held = low.repeat(fr.plen) < (share * (1 - _TIE)).take(fr.res)
    notlocal = np.zeros(len(limit), bool)
    notlocal[fr.res[held]] = True
    notlocal[dummy] = True
    done = (fc <= path * (1 + _TIE)) | ~fr.seg_all(notlocal).take(fr.pid)
    return best, done


def kept_below_rows(rows: Rows, cap: np.ndarray, capacity: np.ndarray, dummy: int,
                    old_rate: np.ndarray, new: np.ndarray, left_rates: list[float]) -> np.ndarray:
    """:func:`~purlin.sim.maxmin.kept_below` of the flows ``rows``."""
    level = min(left_rates, default=np.inf)
    nw = new.nonzero()[0]
    if len(nw):
        level = min(level, float(cap.take(nw).min()))
        touched = rows.take(nw).resources()
        touched = touched[touched != dummy]
        if len(touched):
            level = min(level, float(_water_levels(rows, capacity, old_rate, new, touched).min()))
    if not np.isfinite(level) or level <= 0:
        return np.zeros(rows.n, bool)
    return (~new) & (old_rate < level * (1 - 1e-12))


def _water_levels(rows: Rows, capacity: np.ndarray, old_rate: np.ndarray, new: np.ndarray,
                  touched: np.ndarray) -> np.ndarray:
    """:func:`~purlin.sim.maxmin._water_levels`: per resource in ``touched`` the level at
    which it fills. There, the old flows' entries on touched resources are sorted by
    (resource, old rate, flow) and run through one cumulative sum; here they are made a
    run of resources at a time, in that order, the cumulative sums carried from run to
    run (the same additions in the same order)."""
    r1, ng = len(capacity), len(touched)
    pos = np.full(r1, -1)
    pos[touched] = np.arange(ng)
    add = rows.take(np.flatnonzero(new)).sums(r1).take(touched)
    cap_t = capacity.take(touched)
    old = np.flatnonzero(~new)
    old = old.take(np.argsort(old_rate.take(old), kind="stable"))   # by old rate, then flow
    orows, x_of = rows.take(old), old_rate.take(old)
    # old entries per touched resource; a run ends where they reach a quarter CHUNK
    per_pat = np.bincount(orows.pid, minlength=len(orows.plen))
    count = np.bincount(pos.take(orows.res) + 1, per_pat.repeat(orows.plen), minlength=ng + 1)[1:]
    cum = np.concatenate(([0], np.cumsum(count).astype(np.int64)))
    step = max(1, paths.CHUNK // 4)
    cuts = np.searchsorted(cum, np.arange(step, int(cum[-1]), step), side="right") - 1
    bounds = np.unique(np.concatenate(([0], cuts, [ng])))
    held = np.zeros(ng)
    out_lv = np.full(ng, np.nan)   # the first level that fits, where one does
    carry = None
    for g0, g1 in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        if cum[g1] > cum[g0]:
            carry = _levels_run(orows, x_of, pos, g0, g1, add, cap_t, held, out_lv, carry)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (cap_t - held) / add
    fit = ~np.isnan(out_lv)
    out[fit] = out_lv[fit]
    return out


def _levels_run(orows: Rows, x_of: np.ndarray, pos: np.ndarray, g0: int, g1: int, add: np.ndarray,
                cap_t: np.ndarray, held: np.ndarray, out_lv: np.ndarray,
                carry: tuple[float, float] | None) -> tuple[float, float]:
    """The old entries of touched resources g0..g1-1: their held use into ``held``, the
    first level that fits into ``out_lv``; returns the cumulative sums' last values,
    which the next run continues from (None: this is the first run)."""
    run = orows.only((pos >= g0) & (pos < g1))
    ln = run.plen.take(run.pid)
    e = _ranges(run.ptr.take(run.pid), ln)
    grp = pos.take(run.res.take(e))
    order = np.argsort(grp, kind="stable")          # by resource, then old rate, then flow
    grp, wt = grp.take(order), run.w.take(e).take(order)
    x = x_of.repeat(ln).take(order)
    wx = wt * x
    local = grp - g0
    held[g0:g1] = np.bincount(local, wx, minlength=g1 - g0)
    m = len(grp)
    first = np.empty(m, bool)
    first[0] = True
    np.not_equal(grp[1:], grp[:-1], out=first[1:])
    cw, cwt = _cumsum(wx, carry and carry[0]), _cumsum(wt, carry and carry[1])
    first_fits(first, grp, x, cw, cwt, add.take(grp) + np.bincount(local, wt, minlength=g1 - g0).take(local),
               cap_t, out_lv)
    return float(cw[-1]), float(cwt[-1])


def _cumsum(v: np.ndarray, carry: float | None) -> np.ndarray:
    """[c, c + v0, c + v0 + v1, ...]: a cumulative sum that continues one ending in
    ``carry`` (None: a fresh one, from 0.0, whose first sum is v0 itself)."""
    if carry is not None:
        return np.cumsum(np.concatenate(([carry], v)))
    out = np.zeros(len(v) + 1)
    np.cumsum(v, out=out[1:])
    return out
