"""An event-driven fluid model: flows share capacity resources max-min fairly.

A *flow* moves ``nbytes`` of payload. Progressing it by one byte costs ``weight`` bytes
of capacity on each resource it crosses (a local copy reads and writes one HBM: weight
2; a packet push puts 16 wire bytes per 8 payload bytes on a link: weight 2), and its
rate is also bounded by a private ``cap`` (the issuing CTA's own rate).

Rates are the weighted max-min fair allocation (progressive filling): every unfrozen
flow's rate rises by the same amount until a resource saturates or a flow reaches its
cap; those flows freeze; repeat. A resource may saturate softly (``knee`` k > 0): with
demand D (the sum of its flows' weighted caps) and capacity H it delivers
(D^-k + H^-k)^(-1/k) rather than min(D, H), so its flows slow down before it is full
(memory does: requests queue as utilisation rises); each flow runs at its fair rate
times the smallest such factor on its path. Flows without a cap add no finite demand:
a resource they cross keeps its hard limit. Rates change only when a flow starts or ends, so
between those moments every flow runs at a constant rate, and the model jumps straight
to the next completion. Nothing here is per byte, and nothing here knows simpy: the
engine asks :meth:`FluidModel.next_finish_us`, advances time, and pops finished flows.

Storage is a set of preallocated numpy arrays (slot per flow, resource indices padded
with a dummy resource of infinite capacity), so one recompute is a handful of vector
operations over the active flows: O(iterations x flows x fan-out).

Units: bytes, microseconds, bytes per microsecond (1 GB/s = 1000 B/us).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

TIME_EPS_US = 1e-9
"""Flows finishing within this many microseconds of each other finish together."""
_SAT_REL = 1e-9
"""A resource counts as saturated when its unused capacity is below this fraction."""


class FluidModel:
    """Flows over capacity resources with max-min fair rates.

    Parameters
    ----------
    capacities_Bpus : sequence of float
        Capacity of each resource in bytes per microsecond, indexed 0..R-1.
    knee : sequence of float, optional
        Soft-saturation exponent of each resource (0: a hard limit, the default).

    Examples
    --------
    Two flows on one 100 B/us resource each get half:

    >>> m = FluidModel([100.0])
    >>> a = m.add([0], [1.0], cap=1e9, nbytes=1000.0)
    >>> b = m.add([0], [1.0], cap=1e9, nbytes=1000.0)
    >>> m.recompute(); m.rate_of(a), m.rate_of(b)
    (50.0, 50.0)
    >>> m.next_finish_us()
    20.0
    """

    def __init__(self, capacities_Bpus: Sequence[float], knee: Sequence[float] | None = None) -> None:
        caps = np.asarray(capacities_Bpus, dtype=float)
        if caps.ndim != 1 or (caps <= 0).any() or not np.isfinite(caps).all():
            raise ValueError("capacities must be a 1-D array of finite positive numbers")
        kn = np.zeros(len(caps)) if knee is None else np.asarray(knee, dtype=float)
        if kn.shape != caps.shape or (kn < 0).any() or not np.isfinite(kn).all():
            raise ValueError("knee must give a finite exponent >= 0 for every resource")
        self.knee = np.append(kn, 0.0)
        self._soft = bool((kn > 0).any())
        self.num_resources = len(caps)
        self._dummy = len(caps)
        self.capacity = np.append(caps, np.inf)
        self.now_us = 0.0
        self.bytes_on = np.zeros(len(caps) + 1)  # capacity bytes consumed, per resource
        self.recomputes = 0
        self._grow(64, 4)
        self._free: list[int] = list(range(63, -1, -1))
        self._active_count = 0
        self._act_cache: np.ndarray | None = None
        # after the last recompute: unused capacity per resource and which are saturated;
        # flows added since, and whether a change since needs a full recompute
        self._rem = self.capacity.copy()
        self._sat = np.zeros(len(caps) + 1, dtype=bool)
        self._added: list[int] = []
        self._full = False
        self.shortcuts = 0

    # ---- storage ---------------------------------------------------------------------
    def _grow(self, slots: int, fanout: int) -> None:
        old = getattr(self, "_slots", 0)
        oldk = getattr(self, "_fanout", 0)
        idx = np.full((slots, fanout), self._dummy, dtype=np.int64)
        w = np.zeros((slots, fanout))
        if old:
            idx[:old, :oldk] = self.idx
            w[:old, :oldk] = self.w
        self.idx, self.w = idx, w
        for name in ("remaining", "rate", "speed", "cap", "nbytes"):
            arr = np.zeros(slots)
            if old:
                arr[:old] = getattr(self, name)
            setattr(self, name, arr)
        active = np.zeros(slots, dtype=bool)
        if old:
            active[:old] = self.active
        self.active = active
        self._slots, self._fanout = slots, fanout

    def add(self, resources: Sequence[int], weights: Sequence[float], cap: float,
            nbytes: float) -> int:
        """Start a flow now (call :meth:`advance` first); returns its slot id.

        ``resources`` must be distinct indices; ``cap`` is its private rate bound in
        bytes per microsecond (``inf`` for none). The rate is 0 until :meth:`recompute`.
        """
        k = len(resources)
        if k > self._fanout:
            self._grow(self._slots, max(k, 2 * self._fanout))
        if not self._free:
            n = self._slots
            self._grow(2 * n, self._fanout)
            self._free = list(range(2 * n - 1, n - 1, -1))
        s = self._free.pop()
        self.idx[s, :k] = resources
        self.idx[s, k:] = self._dummy
        self.w[s, :k] = weights
        self.w[s, k:] = 0.0
        self.remaining[s] = nbytes
        self.nbytes[s] = nbytes
        self.rate[s] = self.speed[s] = 0.0
        self.cap[s] = cap
        self.active[s] = True
        self._active_count += 1
        self._act_cache = None
        self._added.append(s)
        return s

    def rate_of(self, slot: int) -> float:
        """Current rate of a flow in bytes per microsecond."""
        return float(self.speed[slot])

    @property
    def active_count(self) -> int:
        """Flows now moving bytes."""
        return self._active_count

    def _act(self) -> np.ndarray:
        if self._act_cache is None:
            self._act_cache = np.flatnonzero(self.active)
        return self._act_cache

    # ---- time ------------------------------------------------------------------------
    def advance(self, now_us: float) -> None:
        """Move every active flow forward at its current rate up to ``now_us``."""
        dt = now_us - self.now_us
        if dt > 0 and self._active_count:
            act = self._act()
            self.remaining[act] -= self.speed[act] * dt
        self.now_us = max(self.now_us, now_us)

    def next_finish_us(self) -> float:
        """Absolute time of the next completion at current rates (``inf`` if none)."""
        if not self._active_count:
            return float("inf")
        act = self._act()
        with np.errstate(divide="ignore"):
            t = self.remaining[act] / self.speed[act]
        return self.now_us + max(float(t.min()), 0.0)

    def pop_finished(self, eps_us: float = TIME_EPS_US) -> list[int]:
        """Slots of the flows that are done at ``now_us`` (within ``eps_us``); they
        leave the model and their bytes are charged to their resources."""
        if not self._active_count:
            return []
        act = self._act()
        done = act[self.remaining[act] <= self.speed[act] * eps_us + 1e-9]
        if len(done):
            np.add.at(self.bytes_on, self.idx[done].ravel(),
                      (self.w[done] * self.nbytes[done, None]).ravel())
            # a flow leaving saturated resources may raise others' rates; one leaving
            # only unsaturated ones bottlenecked nobody: its capacity just comes back
            if self._sat[self.idx[done]].any():
                self._full = True
            else:
                np.add.at(self._rem, self.idx[done].ravel(),
                          (self.w[done] * self.rate[done, None]).ravel())
            self.active[done] = False
            self.rate[done] = self.speed[done] = 0.0
            self._active_count -= len(done)
            self._free.extend(int(s) for s in done[::-1])
            self._act_cache = None
        return done.tolist()

    # ---- rates -----------------------------------------------------------------------
    def recompute(self) -> None:
        """Weighted max-min fair rates of all active flows (progressive filling).

        Exact shortcut: when no flow left a saturated resource and every flow added since
        fits at its own cap in the unused capacity, the old rates stay max-min fair (no
        bottleneck changed) and the new flows run at their caps."""
        self.recomputes += 1
        added, self._added = self._added, []
        full, self._full = self._full, False
        if not self._active_count:
            self._rem, self._sat = self.capacity.copy(), np.zeros_like(self._sat)
            return
        if not full and self._fits(added):
            self.shortcuts += 1
        else:
            self._progressive_fill()
        self._slow_down()

    def _slow_down(self) -> None:
        """Effective speeds: fair rates times the soft-saturation factor of the worst
        resource on each flow's path (all 1 where every knee is 0)."""
        act = self._act()
        if not self._soft:
            self.speed[act] = self.rate[act]
            return
        idx, w, cap = self.idx[act], self.w[act], self.cap[act]
        demand = np.bincount(idx.ravel(), (w * cap[:, None]).ravel(), minlength=len(self.capacity))
        k, h = self.knee, self.capacity
        factor = np.ones(len(h))
        soft = (k > 0) & (demand > 0) & np.isfinite(demand)
        d, hh, kk = demand[soft], h[soft], k[soft]
        factor[soft] = (d ** -kk + hh ** -kk) ** (-1.0 / kk) / np.minimum(d, hh)
        self.speed[act] = self.rate[act] * factor[idx].min(axis=1)

    def _fits(self, added: list[int]) -> bool:
        slots = [s for s in added if self.active[s]]
        if not slots:
            return True
        cap = self.cap[slots]
        if not np.isfinite(cap).all():
            return False
        need = np.zeros_like(self._rem)
        np.add.at(need, self.idx[slots].ravel(), (self.w[slots] * cap[:, None]).ravel())
        need[self._dummy] = 0.0
        rem = self._rem - need
        touched = need > 0
        if (rem[touched] <= self.capacity[touched] * _SAT_REL).any():
            return False   # would saturate a resource: bottlenecks change
        self.rate[slots] = cap
        self._rem = rem
        self._rem[self._dummy] = np.inf
        return True

    def _progressive_fill(self) -> None:
        act = self._act()
        idx, w, cap = self.idx[act], self.w[act], self.cap[act]
        n = len(act)
        rate = np.zeros(n)
        rem = self.capacity.copy()
        tol = self.capacity * _SAT_REL
        free = np.arange(n)
        R1 = len(rem)
        while len(free):
            fidx, fw = idx[free], w[free]
            load = np.bincount(fidx.ravel(), fw.ravel(), minlength=R1)
            load[self._dummy] = 0.0
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
        self.rate[act] = rate
        self._rem = rem
        self._rem[self._dummy] = np.inf
        self._sat = rem <= tol
        self._sat[self._dummy] = False
