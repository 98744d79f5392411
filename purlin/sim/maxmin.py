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

A round is a few dozen numpy calls on arrays of a few thousand entries, so what it costs
is mostly the number of calls: the free flows' live resources are kept as contiguous
columns (one row per path position) and a round works on all columns at once; with
integral weights the free weight per resource is updated by what froze rather than summed
again. Every sum that a rate depends on is formed as it always was (the same terms, in
the same order), so the rates come out bit for bit as before.
"""
from __future__ import annotations

import sys

import numpy as np

from purlin.sim.order import lex_order

SAT_REL = 1e-9
"""A resource counts as saturated when its unused capacity is below this fraction."""
_TIE = 1e-9
"""Shares within this relative distance count as equal when finding local bottlenecks."""
_KEEP_NEAR = 1e-8
"""A resource the free flows cannot fill is still solved for when its share is within
this fraction of their largest cap (see :func:`_free_columns`)."""
_WIDE = 8
"""Paths of more positions than this are solved row by row (:func:`_fill_packed`); the
fluid model keeps such paths once each and solves them with
:mod:`purlin.sim.sparse_fill`, which gives the same rates bit for bit."""
_WORD = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_ONES = {k: int.from_bytes(b"\x01" * k, "little") for k in _WORD}
_LITTLE = sys.byteorder == "little"


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
    n, k = idx.shape
    if k > _WIDE:
        return _fill_packed(idx, w, cap, capacity, dummy, keep, keep_rate)
    r1 = len(capacity)
    rate = np.zeros(n)
    limit = capacity.copy()
    limit[dummy] = np.inf
    if keep is not None and keep.any():
        kp = keep.nonzero()[0]
        kr = keep_rate.take(kp)
        rate[kp] = kr
        used = np.bincount(idx.ravel(), w.ravel() * rate.repeat(k), minlength=r1)   # zeros add nothing
        F = (~keep).nonzero()[0]
    else:
        used = np.zeros(r1)
        F = np.arange(n)
    if len(F):
        fi, fw, fc = idx.take(F, axis=0), w.take(F, axis=0), cap.take(F)
        with np.errstate(divide="ignore", invalid="ignore"):
            C, W, load = _free_columns(fi, fw, fc, limit, used, dummy)
            rate[F] = _rounds(fi, fw, fc, C, W, load, limit, used, dummy)
    rem = capacity - np.bincount(idx.ravel(), w.ravel() * rate.repeat(k), minlength=r1)
    return rate, rem


def _fill_packed(idx: np.ndarray, w: np.ndarray, cap: np.ndarray, capacity: np.ndarray, dummy: int,
                 keep: np.ndarray | None, keep_rate: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`fill` for wide paths, row by row: each flow's live resources packed to the
    left, as many columns as the most a flow has. A switch reduction's flow crosses every
    source's link (W + 1 positions at W ranks), and the column form keeps every position
    any flow has live: at 72 ranks the ReduceScatterV of 64 MiB simulated markedly slower
    that way. The same allocation, bit for bit (the same sums in the same order)."""
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


def _free_columns(fi: np.ndarray, fw: np.ndarray, fc: np.ndarray, limit: np.ndarray, used: np.ndarray,
                  dummy: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The free flows' resources that can bound them, as columns: (resource ids, weights),
    each of shape (path positions kept, free flows), ``dummy`` (weight 0) where a flow has
    none; and the free weight per resource.

    A resource the free flows could not fill even all at their caps (*dead*) never
    saturates. Its share starts at or above the average of those caps and only rises (a
    flow freezes at most at its share), so once it is above every cap it can neither bound
    a flow nor freeze one, and leaving it out changes nothing. A dead one whose share is
    near or below the largest cap stays (it ties with caps, and the tie rule sees it),
    except where no flow has half its positions live: then all dead ones go, as they
    always did there. The rest of what this keeps is a few columns instead of all of
    them: a round costs in proportion."""
    r1 = len(limit)
    n, k = fi.shape
    flat = fi.ravel()
    load = np.bincount(flat, fw.ravel(), minlength=r1)
    demand = used + np.bincount(flat, fw.ravel() * np.minimum(fc, 1e300).repeat(k), minlength=r1)
    live = demand > limit * (1 + 1e-12)
    live[dummy] = False
    top = float(fc.max())
    if top == np.inf:
        bound = limit.take(fi)
        if _few_live(live, fi):
            bound[~live.take(fi)] = np.inf
        if not np.isfinite(np.minimum(_row_min(bound), fc)).all():
            raise ValueError("a flow has neither a finite cap nor a finite resource")
        top = float(fc[fc < np.inf].max(initial=0.0))
    near = ~live & (load > 0) & ~((limit - used) / load > top * (1 + _KEEP_NEAR))
    near[dummy] = False
    active = live if not near.any() or _few_live(live, fi) else live | near
    on = active.take(fi)
    sel = _any_columns(on)
    C, W = fi.T[sel], fw.T[sel]
    off = ~on.T[sel]
    if off.any():
        C[off] = dummy
        W[off] = 0.0
    return C, W, load


def _few_live(live: np.ndarray, fi: np.ndarray) -> bool:
    """Whether no flow has half its path positions on live resources."""
    on = live.take(fi)
    k = on.shape[1]
    if k in _WORD:   # a row's bytes (0 or 1) summed in the top byte of row * 0x0101...
        count = (on.view(_WORD[k]).ravel() * _WORD[k](_ONES[k])) >> _WORD[k](8 * (k - 1))
    else:
        count = _row_sum(on)
    return int(count.max()) < k // 2


def _rounds(fi: np.ndarray, fw: np.ndarray, fc: np.ndarray, C: np.ndarray, W: np.ndarray, load: np.ndarray,
            limit: np.ndarray, used: np.ndarray, dummy: int) -> np.ndarray:
    """Freeze local bottlenecks (and capped flows) round by round; the rates of the free
    flows (rows ``fi``/``fw``, caps ``fc``, columns ``C``/``W``), adding what froze to
    ``used``.

    The dummy resource needs no special case: its share is inf/0 or inf/w = inf, so any
    flow that has it blocks it and it is never a local bottleneck. While every cap is
    above every path's share no cap binds, and min(path, cap) is the path. A resource's
    frozen use adds its terms flow by flow, as it always did (their order fixes the bits
    of every later share): straight from the columns where no resource is in two of them,
    else from the frozen flows' whole rows. The free weight is exact in any order when
    the weights are integers, and is otherwise summed again the same way."""
    r1, n, ks = len(limit), len(fc), len(C)
    exact = bool((W == np.rint(W)).all()) and float(np.abs(W).max(initial=0.0)) * W.size < 2.0 ** 50
    split = _rows_disjoint(C, r1, dummy)
    loose, tight = 1 + _TIE, 1 - _TIE
    pair = ks == 2
    low = float(fc.min())
    bincount, minimum = np.bincount, np.minimum
    # columns, positions, caps and weights in one array: one take compacts them all
    M = np.empty((2 * ks + 2, n), np.int64)
    M[:ks] = C
    M[ks] = np.arange(n)
    M[ks + 1] = fc.view(np.int64)
    M[ks + 2:] = W.view(np.int64)
    where, rates = [], []
    while True:
        C = M[:ks]
        share = limit - used
        share /= load
        at = share.take(C)
        if pair:
            path = minimum(at[0], at[1])
        else:
            path = at.min(axis=0) if ks else np.full(M.shape[1], np.inf)
        top = float(path.max())
        capped = not (low > top * loose and low > top)
        if capped:
            fc = M[ks + 1].view(np.float64)
            best = minimum(path, fc)
        else:
            best = path
        # a resource is a local bottleneck if no free flow through it is held lower
        at *= tight
        notlocal = bincount(C.ravel(), (best < at).ravel(), minlength=r1) != 0
        nl = notlocal.take(C)
        if capped:
            stay = fc <= path * loose
            np.logical_not(stay, out=stay)
            for row in nl:
                stay &= row
        else:
            stay = nl[0] & nl[1] if pair else nl.all(axis=0)
        d = (~stay).nonzero()[0]   # take() on positions: faster than masks here
        x, Md = best.take(d), M.take(d, axis=1)
        where.append(Md[ks])
        rates.append(x)
        if len(d) == M.shape[1]:
            x_free = np.empty(n)
            x_free[np.concatenate(where)] = np.concatenate(rates)
            return x_free
        if split:
            di, dw = Md[:ks].ravel(), Md[ks + 2:].view(np.float64)
            used += bincount(di, (dw * x).ravel(), minlength=r1)
        else:
            dw = fw.take(Md[ks], axis=0)
            di = fi.take(Md[ks], axis=0).ravel()
            used += bincount(di, (dw * x[:, None]).ravel(), minlength=r1)
        M = M.compress(stay, axis=1)
        if exact:
            load -= bincount(di, dw.ravel(), minlength=r1)
        elif split:
            load = bincount(M[:ks].ravel(), M[ks + 2:].view(np.float64).ravel(), minlength=r1)
        else:
            load = bincount(M[:ks].T.ravel(), M[ks + 2:].view(np.float64).T.ravel(), minlength=r1)


def _rows_disjoint(C: np.ndarray, r1: int, dummy: int) -> bool:
    """Whether no resource but the dummy is in two rows of ``C`` (then a resource's terms
    in a row, in order, are its terms flow by flow)."""
    seen = np.zeros(r1, bool)
    for row in C:
        seen[dummy] = False
        if seen.take(row).any():
            return False
        seen[row] = True
    return True


def _any_columns(on: np.ndarray) -> list[int]:
    """The columns of a C-ordered boolean array that hold a True: each row read as one
    unsigned integer and all of them or-ed (numpy reduces a narrow array along its long
    axis an order of magnitude slower than a flat one)."""
    n, k = on.shape
    if k not in _WORD or not n:
        return [j for j in range(k) if on[:, j].any()]
    bits = int(np.bitwise_or.reduce(on.view(_WORD[k]).ravel()))
    return [j for j in range(k) if (bits >> (8 * (j if _LITTLE else k - 1 - j))) & 0xFF]


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
    nw = new.nonzero()[0]
    if len(nw):
        level = min(level, float(cap.take(nw).min()))
        mark = np.zeros(len(capacity), bool)
        mark[idx.take(nw, axis=0)] = True
        mark[dummy] = False
        touched = mark.nonzero()[0]
        if len(touched):
            level = min(level, float(_water_levels(idx, w, capacity, old_rate, new, touched).min()))
    if not np.isfinite(level) or level <= 0:
        return np.zeros(len(idx), bool)
    return (~new) & (old_rate < level * (1 - 1e-12))


def _water_levels(idx, w, capacity, old_rate, new, touched) -> np.ndarray:
    """Per resource in ``touched``: the level L at which it fills, old flows held at
    min(old rate, L) and new ones rising with L."""
    ng = len(touched)
    k = idx.shape[1]
    pos = np.full(len(capacity), -1)
    pos[touched] = np.arange(ng)
    g = pos.take(idx).ravel()          # group of each (flow, resource) entry, -1 if none
    e = (g >= 0).nonzero()[0]          # those entries, flow by flow
    fl = e // k
    grp, wt = g.take(e), w.ravel().take(e)
    is_new = new.take(fl)
    add = np.bincount(grp[is_new], wt[is_new], minlength=ng)
    old = ~is_new
    grp, wt, x = grp[old], wt[old], old_rate.take(fl[old])
    order = lex_order((x, grp))
    grp, wt, x = grp.take(order), wt.take(order), x.take(order)
    held = np.bincount(grp, wt * x, minlength=ng)      # every old flow held at its rate
    cap_t = capacity.take(touched)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (cap_t - held) / add
    m = len(x)
    if not m:
        return out
    # entry j as the first old flow still rising: those before it in its group are held
    first = np.empty(m, bool)
    first[0] = True
    np.not_equal(grp[1:], grp[:-1], out=first[1:])
    cw = np.zeros(m + 1)
    np.cumsum(wt * x, out=cw[1:])
    cwt = np.zeros(m + 1)
    np.cumsum(wt, out=cwt[1:])
    first_fits(first, grp, x, cw, cwt, add.take(grp) + np.bincount(grp, wt, minlength=ng).take(grp), cap_t, out)
    return out


def first_fits(first: np.ndarray, grp: np.ndarray, x: np.ndarray, cw: np.ndarray, cwt: np.ndarray,
               rising_all: np.ndarray, cap_t: np.ndarray, out: np.ndarray) -> None:
    """For entries sorted by group (``first`` marks each group's first), with running sums
    ``cw`` of held use and ``cwt`` of weight (one longer than the entries): the level at
    which each group saturates with entry j the first still rising (those before it held),
    written to ``out[group]`` for the first entry whose own rate ``x`` it reaches.
    ``rising_all``: per entry, the group's added weight plus all its entries' weight."""
    start = np.maximum.accumulate(np.where(first, np.arange(len(grp)), 0))
    before_w = cw[:-1] - cw.take(start)
    before_wt = cwt[:-1] - cwt.take(start)
    rising = rising_all - before_wt
    with np.errstate(divide="ignore", invalid="ignore"):
        lv = (cap_t.take(grp) - before_w) / rising
    fits = (lv <= x).nonzero()[0]      # the first fit of each group (groups are sorted)
    if len(fits):
        gf = grp.take(fits)
        head = np.empty(len(fits), bool)
        head[0] = True
        np.not_equal(gf[1:], gf[:-1], out=head[1:])
        out[gf[head]] = lv.take(fits[head])


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
