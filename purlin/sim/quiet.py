"""Uncontended runs: every flow at its own cap, checked as it runs.

Where no resource ever fills, max-min fairness gives every flow its cap, so the fluid
model's answer is fixed the moment a flow is issued: it moves its bytes at ``cap`` from
the end of its start-up on. A rack's call at small sizes is like that throughout (the
576-rank AllGatherV of 16 KiB starts 557k flows and fills nothing), and there the fluid
bookkeeping, a timer and a wake-up per flow are most of what a run costs. So the engine
may run such a call *quiet*: a data instruction sleeps through its start-up and
``nbytes / cap``, and only its load is kept, here.

That assumption is checked, not trusted. :class:`QuietLoad` keeps each flow's interval
and sweeps them every few thousand flows (sooner at first) and at the end: where the flows
moving at one instant ask a resource for more than ``1 - MARGIN`` of its capacity (the
fluid model calls a resource full within 1e-9), it raises :class:`Contended`, and the
engine runs the call again with the fluid model from the start. A call that runs to its
end quiet is one where max-min fairness kept every flow at its cap, as this run timed
them: ``tests/sim/test_quiet.py`` compares the two runs.
"""
from __future__ import annotations

from array import array
from typing import Sequence

import numpy as np

from purlin.sim.order import lex_order

MARGIN = 1e-6
"""A quiet run gives up where the flows moving at one instant ask a resource for more than
``1 - MARGIN`` of its capacity."""
TRIP = 1.5
"""... or, at a sweep, where the flows issued and not yet ended ask for more than ``TRIP``
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

    A flow is kept as its spec's row, its bytes and its interval; a spec's resources and
    demands (weight x cap) are tabled once, at the first sweep after it comes. Every
    :data:`CHECK_EVERY` flows (sooner at first) and once at the end, a sweep of the flows
    not yet swept away checks two things, each over the instants before the clock (a
    flow issued later starts no earlier than it, so those are final):

    - the *proof*: at no instant may the flows then moving ask a resource for more than
      ``1 - MARGIN`` of its capacity;
    - the *trip*: the flows issued and not yet ended (moving, or still in their start-up)
      may not ask for more than :data:`TRIP` times it. Such a call is plainly contended,
      and this says so at the first sweeps, before any of its flows has begun to move.

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
    >>> load.begin(a, 60, 0.0, 1.0); load.begin(a, 60, 1.0, 2.0); load.check(1.5)
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
        self._trip = np.asarray(self.capacity) * TRIP
        self._rows: dict[int, int] = {}   # id(spec) -> its row in the tables
        self._specs: list = []            # kept, so that no id is reused
        # per spec row: resources (-1 past its last), weights, demands; rows of new specs
        # are filled in at the next sweep, all at once
        self._res = np.full((64, 4), -1, np.int64)
        self._wt, self._dem = np.zeros((64, 4)), np.zeros((64, 4))
        self._filled = 0
        # the flows not yet swept away: spec row and interval; and every flow's row and bytes
        self._f, self._t0, self._t1 = array("q"), array("d"), array("d")
        self._all, self._bytes = array("q"), array("q")
        self._since = -float("inf")   # the sweeps so far covered every instant before this
        self._count = 0
        self._every = 64

    def begin(self, spec, nbytes: int, start: float, end: float) -> None:
        """A flow of ``spec`` moving ``nbytes`` over [``start``, ``end``) is issued
        (:class:`Contended` at once if it is uncapped or crosses more than :data:`WIDE`
        resources)."""
        row = self._rows.get(id(spec))
        if row is None:
            row = self._table(spec)
        self._f.append(row)
        self._t0.append(start)
        self._t1.append(end)
        self._all.append(row)
        self._bytes.append(nbytes)
        self._count += 1

    def _table(self, spec) -> int:
        """A new spec's row."""
        if spec.cap_Bpus == float("inf"):
            raise Contended("an uncapped flow shares whatever it crosses")
        if len(spec.resources) > WIDE:
            raise Contended(f"a flow crosses {len(spec.resources)} resources (more than {WIDE})")
        row = self._rows[id(spec)] = len(self._specs)
        self._specs.append(spec)
        return row

    def _expand(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
        """The (flow, resource) entries of flows ``rows``, flow by flow in each spec's
        resource order: each one's flow and resource, and its weight and demand."""
        if self._filled < len(self._specs):   # table the specs that came since
            self._fill()
        flow, col = np.nonzero(self._res.take(rows, axis=0) >= 0)
        entries = rows.take(flow)
        return flow, self._res[entries, col], (self._wt[entries, col], self._dem[entries, col])

    def _fill(self) -> None:
        """Rows for the specs that came since the last sweep (the tables double as needed)."""
        new = self._specs[self._filled:]
        end = len(self._specs)
        k = max(self._res.shape[1], max(len(x.resources) for x in new))
        if end > len(self._res) or k > self._res.shape[1]:
            grow = ((0, max(0, 2 * end - len(self._res))), (0, k - self._res.shape[1]))
            self._res = np.pad(self._res, grow, constant_values=-1)
            self._wt, self._dem = np.pad(self._wt, grow), np.pad(self._dem, grow)
        for j, x in enumerate(new, self._filled):
            n = len(x.resources)
            self._res[j, :n], self._wt[j, :n] = x.resources, x.weights
            self._dem[j, :n] = [w * x.cap_Bpus for w in x.weights]
        self._filled = end

    @property
    def bytes_on(self) -> np.ndarray:
        """Capacity bytes each resource carried (weight x payload), as the fluid model
        counts them (flow by flow, in the order they were issued)."""
        out = np.zeros(len(self.capacity) + 1)   # as FluidModel.bytes_on (and its dummy)
        if len(self._all):
            flow, r, (w, _) = self._expand(np.frombuffer(self._all, np.int64))
            out += np.bincount(r, w * np.frombuffer(self._bytes, np.int64).take(flow), minlength=len(out))
        return out

    def maybe_check(self, now: float) -> None:
        """:meth:`check` once enough flows came since the last sweep."""
        if self._count >= self._every:
            self._every = min(2 * self._every, CHECK_EVERY)
            self.check(now)

    def check(self, now: float) -> None:
        """:class:`Contended` if at an instant in [last sweep, ``now``) the flows moving
        ask a resource for more than ``1 - MARGIN`` of its capacity, or if the flows not
        ended by ``now`` ask for more than :data:`TRIP` times it; then forget the flows
        that ended before ``now``."""
        self._count = 0
        if not len(self._f):
            return
        f = np.frombuffer(self._f, np.int64)
        T0, T1 = np.frombuffer(self._t0), np.frombuffer(self._t1)
        flow, r, (_, d) = self._expand(f)
        t0, t1 = T0.take(flow), T1.take(flow)
        if now < float("inf"):
            issued = np.bincount(r, d * (t1 > now), minlength=len(self._trip))
            over = np.flatnonzero(issued > self._trip)
            if len(over):
                j = over[0]
                raise Contended(f"resource {j}: flows issued ask {issued[j]:.6g} of its "
                                f"{self.capacity[j]:.6g} B/us")
        if now <= self._since:   # no instant to prove yet (flows issued at one time)
            return
        # each resource's demand steps up at each start and down at each end; at one time
        # the ends go first (a flow ending then and one starting then do not overlap)
        rr, tt = np.concatenate([r, r]), np.concatenate([t0, t1])
        up = np.zeros(len(rr), bool)
        up[:len(r)] = True
        order = lex_order((up, tt, rr))
        rr, tt, up = rr.take(order), tt.take(order), up.take(order)
        level = np.cumsum(np.concatenate([d, -d]).take(order))
        head = np.flatnonzero(np.r_[True, rr[1:] != rr[:-1]])
        level -= np.repeat(np.r_[0.0, level][head], np.diff(np.r_[head, len(rr)]))
        over = np.flatnonzero(up & (tt >= self._since) & (tt < now) & (level > self._full.take(rr)))
        if len(over):
            j = over[0]
            raise Contended(f"resource {rr[j]}: flows moving at t={tt[j]:.6g} us ask "
                            f"{level[j]:.6g} of its {self.capacity[rr[j]]:.6g} B/us")
        keep = np.flatnonzero(T1 > now)   # the others no longer overlap what is unchecked
        self._f = array("q", f.take(keep).tobytes())
        self._t0, self._t1 = array("d", T0.take(keep).tobytes()), array("d", T1.take(keep).tobytes())
        self._since = now
