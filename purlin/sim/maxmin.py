"""Weighted max-min fair rates of flows over capacity resources (progressive filling).

Every unfrozen flow's rate rises by the same amount until a resource saturates or a
flow reaches its cap; those flows freeze; repeat. The result is the unique allocation in
which every flow has a bottleneck: a saturated resource on its path where no flow runs
faster, or its own cap.
"""
from __future__ import annotations

import numpy as np

SAT_REL = 1e-9
"""A resource counts as saturated when its unused capacity is below this fraction."""


def fill(idx: np.ndarray, w: np.ndarray, cap: np.ndarray, capacity: np.ndarray,
         dummy: int) -> tuple[np.ndarray, np.ndarray]:
    """Rates of flows ``idx`` (resource indices per flow, padded with ``dummy``), ``w``
    (capacity bytes per payload byte on each) and ``cap`` (each flow's own bound), over
    resources of ``capacity`` (``dummy`` infinite). Returns (rates, unused capacity).

    Examples
    --------
    >>> import numpy as np
    >>> rate, rem = fill(np.array([[0, 2], [0, 1]]), np.array([[1.0, 0.0], [1.0, 1.0]]),
    ...                  np.array([np.inf, 10.0]), np.array([100.0, 50.0, np.inf]), 2)
    >>> rate.tolist(), rem[:2].tolist()
    ([90.0, 10.0], [0.0, 40.0])
    """
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
