"""An event-driven fluid model: flows share capacity resources max-min fairly.

A *flow* moves ``nbytes`` of payload. Progressing it by one byte costs ``weight`` bytes
of capacity on each resource it crosses (a local copy reads and writes one HBM: weight
2; a packet push puts 16 wire bytes per 8 payload bytes on a link: weight 2), and its
rate is also bounded by a private ``cap`` (the issuing CTA's own rate).

Rates are the weighted max-min fair allocation (:mod:`purlin.sim.maxmin`). A resource
may saturate softly (``knee`` k > 0): with demand D (the sum of its flows' weighted caps)
and capacity H it delivers (D^-k + H^-k)^(-1/k) rather than min(D, H), so its flows slow
down before it is full (memory does: requests queue as utilisation rises); each flow runs
at its fair rate times the smallest such factor on its path. Flows without a cap add no
finite demand: a resource they cross keeps its hard limit. Rates change only when a flow
starts or ends, so between those moments every flow runs at a constant rate, and the
model jumps straight to the next completion. Nothing here is per byte, and nothing here
knows the event loop: the engine asks :meth:`FluidModel.next_finish_us`, advances time,
and pops finished flows.

What an event costs: a flow's remaining bytes are kept as (bytes, as of when) and only
brought up to date when its rate changes, with its finish time, and the earliest finish
is remembered until a flow ends or rates change; so a flow that starts at its cap in
spare capacity (or ends on resources nobody waits for) touches only its own entries, and
a recompute re-times only the flows whose rates changed.

What a flow's path costs: up to ``maxmin._WIDE`` positions, a row of dense flow x
position arrays (the solver's column form works on those). Once a wider path comes (a
reduction over every rank crosses each source's memory and link: 1152 resources at 576
ranks), every path is kept once in a :class:`~purlin.sim.paths.PathStore` and a flow is
a pattern id, solved by :mod:`purlin.sim.sparse_fill` to the same rates, to rounding:
thousands of such flows are instances of a few hundred paths, and the dense arrays took
more memory than the schedule.

Units: bytes, microseconds, bytes per microsecond (1 GB/s = 1000 B/us).
"""
from __future__ import annotations

from array import array
from typing import Sequence

import numpy as np

from purlin.sim import maxmin
from purlin.sim.maxmin import SAT_REL, fill, kept_below
from purlin.sim.paths import PathStore, Rows
from purlin.sim.sparse_fill import fill_rows, kept_below_rows

TIME_EPS_US = 1e-9
"""Flows finishing within this many microseconds of each other finish together."""
_SAT_REL = SAT_REL
_MANY = 16
"""From this many flows on, a batch's bookkeeping runs vectorized (the same sums)."""


class FluidModel:
    """Flows over capacity resources with max-min fair rates.

    Parameters
    ----------
    capacities_Bpus : sequence of float
        Capacity of each resource in bytes per microsecond, indexed 0..R-1.
    knee : sequence of float, optional
        Soft-saturation exponent of each resource (0: a hard limit, the default).
    shared_paths : bool
        At the first path wider than ``maxmin._WIDE``, keep every path once, in a
        :class:`~purlin.sim.paths.PathStore` (False: the dense arrays, the form the store
        is checked against; the rates are the same to rounding).

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

    def __init__(self, capacities_Bpus: Sequence[float], knee: Sequence[float] | None = None,
                 shared_paths: bool = True) -> None:
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
        self._cap_list = self.capacity.tolist()
        self._tol_list = (self.capacity * _SAT_REL).tolist()
        self.now_us = 0.0
        self.bytes_on = np.zeros(len(caps) + 1)  # capacity bytes consumed, per resource
        self.recomputes = 0
        self.shortcuts = 0
        # once a path wider than maxmin._WIDE comes, flows are pattern ids into a PathStore
        # (each distinct path stored once) instead of rows of the dense idx/w arrays
        self._paths: PathStore | None = None
        self._shared_paths = shared_paths
        self._grow(64, 4)
        self._free: list[int] = list(range(63, -1, -1))
        self._active_count = 0
        self._act_cache: np.ndarray | None = None
        # after the last recompute: unused capacity per resource and which are saturated
        # (machine arrays: the shortcut reads a few entries as Python numbers, a solve
        # writes all of them through a numpy view, with no list to build from thousands
        # of resources); flows added since; whether a change since needs a full recompute
        self._rem = array("d", self._cap_list)
        self._sat = bytearray(len(caps) + 1)
        self._added: list[int] = []
        self._full = False
        self._left: list[float] = []   # rates of flows that left saturated resources since
        self._best: tuple[float, int] | None = (float("inf"), -1)   # (next finish, slot) or None: unknown

    # ---- storage ---------------------------------------------------------------------
    def _grow(self, slots: int, fanout: int) -> None:
        old = getattr(self, "_slots", 0)
        oldk = getattr(self, "_fanout", 0)
        if self._paths is None:
            idx = np.full((slots, fanout), self._dummy, dtype=np.int64)
            w = np.zeros((slots, fanout))
            if old:
                idx[:old, :oldk] = self.idx
                w[:old, :oldk] = self.w
            self.idx, self.w = idx, w
        pid = np.zeros(slots, dtype=np.int64)
        if old:
            pid[:old] = self._pid
        self._pid = pid
        for name in ("rate", "speed", "cap", "nbytes", "rem_at", "t_at", "finish"):
            arr = np.full(slots, np.inf) if name == "finish" else np.zeros(slots)
            if old:
                arr[:old] = getattr(self, name)
            setattr(self, name, arr)
        ver = np.zeros(slots, dtype=np.int64)
        active = np.zeros(slots, dtype=bool)
        if old:
            ver[:old] = self.version
            active[:old] = self.active
        self.version, self.active = ver, active
        self._res: list[tuple] = getattr(self, "_res", []) + [()] * (slots - old)
        self._slots, self._fanout = slots, fanout

    def add(self, resources: Sequence[int], weights: Sequence[float], cap: float,
            nbytes: float) -> int:
        """Start a flow now (call :meth:`advance` first); returns its slot id.

        ``resources`` must be distinct indices; ``cap`` is its private rate bound in
        bytes per microsecond (``inf`` for none). The rate is 0 until :meth:`recompute`.
        """
        k = len(resources)
        if k > self._fanout:
            fanout = max(k, 2 * self._fanout)
            if self._paths is None and fanout > maxmin._WIDE and self._shared_paths:
                self._to_paths()
            if self._paths is None:
                self._grow(self._slots, fanout)
            self._fanout = fanout
        if not self._free:
            n = self._slots
            self._grow(2 * n, self._fanout)
            self._free = list(range(2 * n - 1, n - 1, -1))
        s = self._free.pop()
        path = self._res[s] = (tuple(resources), tuple(weights))
        if self._paths is None:
            self.idx[s, :k] = resources
            self.idx[s, k:] = self._dummy
            self.w[s, :k] = weights
            self.w[s, k:] = 0.0
        else:
            self._pid[s] = self._paths.intern(*path)
            if self._paths.renumbered is not None:   # it dropped dead paths
                act = np.flatnonzero(self.active)
                self._pid[act] = self._paths.renumbered.take(self._pid.take(act))
                self._paths.renumbered = None
        self.rem_at[s] = nbytes
        self.t_at[s] = self.now_us
        self.nbytes[s] = nbytes
        self.rate[s] = self.speed[s] = 0.0
        self.finish[s] = np.inf
        self.cap[s] = cap
        self.active[s] = True
        self.version[s] += 1
        self._active_count += 1
        self._act_cache = None
        self._added.append(s)
        return s

    def _to_paths(self) -> None:
        """Keep paths in a :class:`PathStore` from now on (the dense arrays of a wide path
        are as wide as it for every flow, and the solver's temporaries with them)."""
        self._paths = PathStore()
        for s in np.flatnonzero(self.active).tolist():
            self._pid[s] = self._paths.intern(*self._res[s])
        self.idx = self.w = None

    def _rows(self, slots: np.ndarray) -> Rows:
        """The paths of flows ``slots`` (in that order)."""
        return self._paths.rows(self._pid.take(slots))

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

    def remaining(self, slot: int) -> float:
        """Bytes flow ``slot`` still has to move at ``now_us``."""
        return float(self.rem_at[slot] - self.speed[slot] * (self.now_us - self.t_at[slot]))

    # ---- time ------------------------------------------------------------------------
    def advance(self, now_us: float) -> None:
        """Move the clock to ``now_us`` (flows progress at their current rates)."""
        if now_us > self.now_us:
            self.now_us = now_us

    def next_finish_us(self) -> float:
        """Absolute time of the next completion at current rates (``inf`` if none)."""
        if self._best is None:   # idle slots finish at infinity
            j = int(np.argmin(self.finish))
            self._best = (float(self.finish[j]), j)
        t = self._best[0]
        return max(t, self.now_us) if t != float("inf") else t

    def pop_finished(self, eps_us: float = TIME_EPS_US) -> list[int]:
        """Slots of the flows that are done at ``now_us`` (within ``eps_us``); they
        leave the model and their bytes are charged to their resources."""
        if not self._active_count:
            return []
        now = self.now_us
        near = np.flatnonzero(self.finish <= now + eps_us + 1e-9)
        done: list[int] = []
        for s in near.tolist():
            sp = float(self.speed[s])
            if self.rem_at[s] - sp * (now - self.t_at[s]) <= sp * eps_us + 1e-9:
                done.append(s)
        if not done:
            return done
        d = np.asarray(done)
        # a flow leaving saturated resources may raise others' rates (a full recompute
        # follows, which sets the unused capacity anew); one leaving only unsaturated
        # ones bottlenecked nobody: its capacity just comes back
        leaves_saturated = (self._leave_many if len(done) >= _MANY else self._leave)(done, d)
        if self._paths is not None:
            self._paths.release(self._pid.take(d))
        self.active[d] = False
        self.rate[d] = self.speed[d] = 0.0
        self.finish[d] = np.inf
        self.version[d] += 1
        if leaves_saturated:
            self._full = True
        self._active_count -= len(done)
        self._free.extend(sorted(done, reverse=True))
        self._act_cache = None
        self._best = None
        return done

    def _leave(self, done: list[int], d: np.ndarray) -> bool:
        """Charge the bytes of flows ``done`` and give back their capacity, flow by flow;
        whether any left a saturated resource."""
        rem, sat, bytes_on = self._rem, self._sat, self.bytes_on
        leaves_saturated = False
        for s in done:
            res, wts = self._res[s]
            n = float(self.nbytes[s])
            r = float(self.rate[s])
            hit = False
            for i, w in zip(res, wts):
                bytes_on[i] += w * n
                if sat[i]:
                    hit = True
            if hit:
                leaves_saturated = True
                self._left.append(r)
            if not leaves_saturated:
                for i, w in zip(res, wts):
                    rem[i] += w * r
        return leaves_saturated

    def _leave_many(self, done: list[int], d: np.ndarray) -> bool:
        """:meth:`_leave` for many flows at once: the same sums in the same order
        (np.add.at is unbuffered and sequential), bit for bit. Once a flow has left a
        saturated resource the loop stops giving capacity back, and the full recompute
        that follows sets all of it anew: so here none is given back then."""
        if self._paths is not None:
            rows = self._rows(d)
            rows.add_at(self.bytes_on, self.nbytes[d])
            hit = rows.seg_any(np.frombuffer(self._sat, np.bool_)).take(rows.pid)
        else:
            idx, w = self.idx[d], self.w[d]
            np.add.at(self.bytes_on, idx.ravel(), (w * self.nbytes[d][:, None]).ravel())
            hit = np.frombuffer(self._sat, np.bool_)[idx].any(axis=1)
        if hit.any():
            self._left.extend(self.rate[d[hit]].tolist())
            return True
        rem = np.frombuffer(self._rem, np.float64)   # a view: the sums land in place
        if self._paths is not None:
            rows.add_at(rem, self.rate[d])
        else:
            np.add.at(rem, idx.ravel(), (w * self.rate[d][:, None]).ravel())
        rem[self._dummy] = np.inf
        return False

    # ---- rates -----------------------------------------------------------------------
    def try_shortcut(self) -> bool:
        """Apply :meth:`recompute` if it can take the exact shortcut (nothing left a
        saturated resource and every flow added since fits at its cap); else change
        nothing and return False."""
        if self._full or self._soft:
            return False
        if not self._fits(self._added):
            return False
        self._added = []
        self.recomputes += 1
        self.shortcuts += 1
        if not self._active_count:
            self._rem, self._sat = array("d", self._cap_list), bytearray(len(self._cap_list))
        return True

    def recompute(self) -> None:
        """Weighted max-min fair rates of all active flows.

        Exact shortcut: when no flow left a saturated resource and every flow added since
        fits at its own cap in the unused capacity, the old rates stay max-min fair (no
        bottleneck changed) and the new flows run at their caps."""
        self.recomputes += 1
        added, self._added = self._added, []
        full, self._full = self._full, False
        if not self._active_count:
            self._rem, self._sat = array("d", self._cap_list), bytearray(len(self._cap_list))
            self._left = []
            return
        act = self._act()
        if not full and self._fits(added):
            self.shortcuts += 1
            if self._soft:   # demand changed: every speed on a soft resource may
                self._retime(act, self.speed[act].copy())
            return
        old = self.speed.take(act)
        cap = self.cap.take(act)
        mark = np.zeros(self._slots, bool)   # the flows added since (np.isin sorts: slower)
        mark[added] = True
        new = mark.take(act)
        prev = self.rate.take(act)
        if self._paths is not None:
            rows = self._rows(act)
            keep = kept_below_rows(rows, cap, self.capacity, self._dummy, prev, new, self._left)
            rate, rem = fill_rows(rows, cap, self.capacity, self._dummy, self._fanout, keep, prev)
        else:
            idx, w = self.idx.take(act, axis=0), self.w.take(act, axis=0)
            keep = kept_below(idx, w, cap, self.capacity, self._dummy, prev, new, self._left)
            rate, rem = fill(idx, w, cap, self.capacity, self._dummy, keep, prev)
        self._left = []
        self.rate[act] = rate
        rem[self._dummy] = np.inf
        np.frombuffer(self._rem, np.float64)[:] = rem
        sat = rem <= self.capacity * _SAT_REL
        sat[self._dummy] = False
        self._sat[:] = sat.tobytes()
        self._retime(act, old)

    def _fits(self, added: list[int]) -> bool:
        if len(added) == 1 and not self._soft:
            return self._fits_one(added[0])
        slots = [s for s in added if self.active[s]]
        if not slots:
            return True
        if len(slots) >= _MANY:
            return self._fits_many(np.asarray(slots))
        rem, tol = self._rem, self._tol_list
        need: dict[int, float] = {}
        for s in slots:
            c = float(self.cap[s])
            if c == float("inf"):
                return False
            res, wts = self._res[s]
            for i, w in zip(res, wts):
                need[i] = need.get(i, 0.0) + w * c
        for i, x in need.items():
            if rem[i] - x <= tol[i]:
                return False   # would saturate a resource: bottlenecks change
        for i, x in need.items():
            rem[i] -= x
        for s in slots:
            self._at_cap(s, float(self.cap[s]))
        return True

    def _fits_one(self, s: int) -> bool:
        """:meth:`_fits` for one flow (most changes start one), with the same numbers: a
        flow's resources are distinct, so each needs ``w * cap`` (a sum of one term)."""
        if not self.active[s]:
            return True
        c = float(self.cap[s])
        if c == float("inf"):
            return False
        res, wts = self._res[s]
        rem, tol = self._rem, self._tol_list
        for i, w in zip(res, wts):
            if rem[i] - w * c <= tol[i]:
                return False   # would saturate a resource: bottlenecks change
        for i, w in zip(res, wts):
            rem[i] -= w * c
        self._at_cap(s, c)
        return True

    def _at_cap(self, s: int, c: float) -> None:
        """Flow ``s`` runs at its cap ``c`` from now on (where no resource is soft, its
        speed too, and its finish is filed)."""
        self.rate[s] = c
        if not self._soft:
            now = self.now_us
            self.speed[s] = c
            self.t_at[s] = now
            f = now + float(self.rem_at[s]) / c
            self.finish[s] = f
            if self._best is not None and f < self._best[0]:
                self._best = (f, s)

    def _fits_many(self, sl: np.ndarray) -> bool:
        """:meth:`_fits` for many flows at once, with the same sums (bincount adds each
        resource's terms in flow order, as the loop does) and the same earliest finish."""
        caps = self.cap[sl]
        if np.isinf(caps).any():
            return False
        if self._paths is not None:
            rows = self._rows(sl)
            need = rows.sums(len(self.capacity), caps)
            touched = rows.resources()
        else:
            idx = self.idx[sl]
            need = np.bincount(idx.ravel(), (self.w[sl] * caps[:, None]).ravel(), minlength=len(self.capacity))
            touched = np.unique(idx)
            touched = touched[touched != self._dummy]
        rem = np.frombuffer(self._rem, np.float64)
        left = rem[touched] - need[touched]
        if (left <= np.asarray(self._tol_list)[touched]).any():
            return False   # would saturate a resource: bottlenecks change
        rem[touched] = left
        self.rate[sl] = caps
        if not self._soft:
            now = self.now_us
            self.speed[sl] = caps
            self.t_at[sl] = now
            f = now + self.rem_at[sl] / caps
            self.finish[sl] = f
            j = int(np.argmin(f))
            if self._best is not None and f[j] < self._best[0]:
                self._best = (float(f[j]), int(sl[j]))
        return True

    def _retime(self, act: np.ndarray, old_speed: np.ndarray) -> None:
        """Set speeds from rates (:meth:`_slow_down`); bring the remaining bytes of every
        flow whose speed changed up to now and file its new finish time."""
        new = self._slow_down(act)
        m = (new != old_speed).nonzero()[0]   # take() on positions: faster than masks
        if not len(m):
            return
        changed = act.take(m)
        now = self.now_us
        rem = self.rem_at.take(changed) - old_speed.take(m) * (now - self.t_at.take(changed))
        self.rem_at[changed] = rem
        self.t_at[changed] = now
        self.version[changed] += 1
        with np.errstate(divide="ignore"):
            self.finish[changed] = now + rem / new.take(m)
        self._best = None

    def _slow_down(self, act: np.ndarray) -> np.ndarray:
        """Set (and return) the effective speeds of flows ``act``: fair rates times the
        soft-saturation factor of the worst resource on each flow's path (all 1 where
        every knee is 0)."""
        if not self._soft:
            new = self.rate.take(act)
            self.speed[act] = new
            return new
        cap = self.cap[act]
        if self._paths is not None:
            rows = self._rows(act)
            demand = rows.sums(len(self.capacity), cap)
        else:
            idx, w = self.idx[act], self.w[act]
            demand = np.bincount(idx.ravel(), (w * cap[:, None]).ravel(), minlength=len(self.capacity))
        k, h = self.knee, self.capacity
        factor = np.ones(len(h))
        soft = (k > 0) & (demand > 0) & np.isfinite(demand)
        d, hh, kk = demand[soft], h[soft], k[soft]
        factor[soft] = (d ** -kk + hh ** -kk) ** (-1.0 / kk) / np.minimum(d, hh)
        if self._paths is not None:   # a row shorter than the dense width had dummies (factor 1)
            low = rows.seg_min(factor)
            short = rows.plen < self._fanout
            low[short] = np.minimum(low[short], 1.0)
            new = self.rate[act] * low.take(rows.pid)
        else:
            new = self.rate[act] * factor[idx].min(axis=1)
        self.speed[act] = new
        return new
