"""Uncontended runs: every flow at its own cap, checked as it runs.

Where no resource ever fills, max-min fairness gives every flow its cap, so the fluid
model's answer is fixed the moment a flow is issued: it moves its bytes at ``cap`` from
the end of its start-up on. A rack's call at small sizes is like that throughout (the
576-rank AllGatherV of 16 KiB starts 557k flows and fills nothing), and there the fluid
bookkeeping, a timer and a wake-up per flow are most of what a run costs. So the engine
may run such a call *quiet*: a data instruction sleeps through its start-up and
``nbytes / cap``, and only its load is kept, here.

That assumption is checked, not trusted. :class:`QuietLoad` counts a flow's demand
(weight x cap on each resource it crosses) from the moment it is issued, before its
start-up ends, until it ends; so at every instant it counts at least the flows then
moving bytes. Where that count comes within ``MARGIN`` of a resource's capacity it raises
:class:`Contended` at once, and the engine runs the call again with the fluid model from
the start. A call that runs to its end quiet is one where the flows moving at any instant
never asked a resource for more than ``1 - MARGIN`` of it (the fluid model calls a
resource full within 1e-9), so there max-min fairness kept every flow at its cap, as this
run timed them: ``tests/sim/test_quiet.py`` compares the two runs.
"""
from __future__ import annotations

from array import array
from typing import Sequence

import numpy as np

MARGIN = 1e-6
"""A quiet run gives up where the flows moving at one instant ask a resource for more than
``1 - MARGIN`` of its capacity."""
TRIP = 1.5
"""... or, at once, where the flows issued and not yet ended ask for more than ``TRIP``
times it (a count that runs ahead of the flows moving, see :class:`QuietLoad`)."""
WIDE = 8
"""A flow crossing more resources than this (a switch reduction reads every source's
memory and link: 1,152 of them at 576 ranks) ends a quiet run: the sweep would keep an
entry per resource, and such calls move bulk data through the switch."""
CHECK_EVERY = 4096
"""Flows issued between two sweeps of what the flows moving asked (the first sweeps come
sooner: after 64 flows, then twice as many each time up to this)."""


class Contended(Exception):
    """Flows of a quiet run would have shared a resource (internal: the engine runs the
    call again with the fluid model)."""


class QuietLoad:
    """What a quiet run's flows ask of each resource, checked against its capacity.

    Two counts. The *proof* sweeps each flow's interval [start, end) with its demand on
    each resource it crosses (weight x cap): at no instant may the flows then moving ask a
    resource for more than ``1 - MARGIN`` of its capacity. It runs every
    :data:`CHECK_EVERY` flows (sooner at first) and once at the end, each time over the instants before the
    clock (a flow issued later starts no earlier than the clock, so those are final).
    The *trip* counts a flow from when it is issued, before its start-up ends, to its
    end: at least what is moving at any instant, available at once; past :data:`TRIP`
    times a capacity the call is plainly contended and the run stops there instead of
    at the next sweep.

    Parameters
    ----------
    capacities_Bpus : sequence of float
        Capacity of each resource, bytes per microsecond (as the fluid model has them).

    Examples
    --------
    Two flows of 60 B/us fit a 100 B/us resource one after the other, not together:

    >>> from purlin.sim.fabric import FlowSpec
    >>> a = FlowSpec((0,), (1.0,), 60.0, 0.0, 0.0)
    >>> load = QuietLoad([100.0])
    >>> load.begin(a, 60, 0.0, 1.0); load.end(a); load.begin(a, 60, 1.0, 2.0); load.check(1.5)
    >>> load.begin(a, 60, 1.5, 2.5); load.check(float("inf"))
    Traceback (most recent call last):
    ...
    purlin.sim.quiet.Contended: resource 0: flows moving at t=1.5 us ask 120 of its 100 B/us
    >>> load.bytes_on.tolist()[:1]
    [180.0]
    """

    def __init__(self, capacities_Bpus: Sequence[float]) -> None:
        self.capacity = [float(x) for x in capacities_Bpus]
        self._full = np.asarray(self.capacity) * (1.0 - MARGIN)   # what a sweep allows
        self.trip = [x * TRIP for x in self.capacity]
        self.used = [0.0] * len(self.capacity)
        self._on = [0.0] * (len(self.capacity) + 1)   # as FluidModel.bytes_on (and its dummy)
        # one entry per (flow, resource) not yet swept away: resource, demand, interval
        self._r, self._d = array("q"), array("d")
        self._t0, self._t1 = array("d"), array("d")
        self._since = -float("inf")   # the sweeps so far covered every instant before this
        self._count = 0
        self._every = 64

    @property
    def bytes_on(self) -> np.ndarray:
        """Capacity bytes each resource carried (weight x payload), as the fluid model
        counts them."""
        return np.asarray(self._on)

    def begin(self, spec, nbytes: int, start: float, end: float) -> None:
        """A flow of ``spec`` moving ``nbytes`` over [``start``, ``end``) is issued
        (:class:`Contended` if the flows not yet ended ask more than :data:`TRIP`
        times a resource it crosses)."""
        cap = spec.cap_Bpus
        if cap == float("inf"):
            raise Contended("an uncapped flow shares whatever it crosses")
        if len(spec.resources) > WIDE:
            raise Contended(f"a flow crosses {len(spec.resources)} resources (more than {WIDE})")
        used, trip, on = self.used, self.trip, self._on
        for r, w in zip(spec.resources, spec.weights):
            u = used[r] + w * cap
            if u > trip[r]:
                raise Contended(f"resource {r}: flows issued ask {u:.6g} of its {self.capacity[r]:.6g} B/us")
            used[r] = u
            on[r] += w * nbytes
        k = len(spec.resources)
        self._r.extend(spec.resources)
        self._d.extend([w * cap for w in spec.weights])
        self._t0.extend([start] * k)
        self._t1.extend([end] * k)
        self._count += 1

    def end(self, spec) -> None:
        """A flow of ``spec`` has ended."""
        used, cap = self.used, spec.cap_Bpus
        for r, w in zip(spec.resources, spec.weights):
            used[r] -= w * cap

    def maybe_check(self, now: float) -> None:
        """:meth:`check` once enough flows came since the last sweep."""
        if self._count >= self._every:
            self._every = min(2 * self._every, CHECK_EVERY)
            self.check(now)

    def check(self, now: float) -> None:
        """:class:`Contended` if at an instant in [last sweep, ``now``) the flows moving
        ask a resource for more than ``1 - MARGIN`` of its capacity; then forget the
        flows that ended before ``now``."""
        self._count = 0
        if now <= self._since or not len(self._r):
            return
        r = np.frombuffer(self._r, dtype=np.int64)
        d = np.frombuffer(self._d)
        t0, t1 = np.frombuffer(self._t0), np.frombuffer(self._t1)
        # each resource's demand steps up at each start and down at each end; at one time
        # the ends go first (a flow ending then and one starting then do not overlap)
        rr, tt = np.concatenate([r, r]), np.concatenate([t0, t1])
        up = np.zeros(len(rr), bool)
        up[:len(r)] = True
        order = np.lexsort((up, tt, rr))
        rr, tt, up = rr.take(order), tt.take(order), up.take(order)
        level = np.cumsum(np.concatenate([d, -d]).take(order))
        head = np.flatnonzero(np.r_[True, rr[1:] != rr[:-1]])
        level -= np.repeat(np.r_[0.0, level][head], np.diff(np.r_[head, len(rr)]))
        over = np.flatnonzero(up & (tt >= self._since) & (tt < now) & (level > self._full.take(rr)))
        if len(over):
            j = over[0]
            raise Contended(f"resource {rr[j]}: flows moving at t={tt[j]:.6g} us ask "
                            f"{level[j]:.6g} of its {self.capacity[rr[j]]:.6g} B/us")
        keep = np.flatnonzero(t1 > now)   # the others no longer overlap what is unchecked
        self._r, self._d = array("q", r.take(keep).tobytes()), array("d", d.take(keep).tobytes())
        self._t0, self._t1 = array("d", t0.take(keep).tobytes()), array("d", t1.take(keep).tobytes())
        self._since = now
