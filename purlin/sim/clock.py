"""The engine's discrete-event loop: simpy's :class:`~simpy.core.Environment`, driven with
timed callbacks.

simpy orders its queue by (time, priority, event id). Every entry here is scheduled with
its ``seq`` as the priority, so entries of equal time run in the order they were
scheduled, as simpy's event ids would order them. ``seq`` is also what makes "did this
flag land before that CTA looked?" answerable without an event per flag: a Notify draws a
seq when it is issued (when the landing event of a one-event-per-flag model would be
scheduled), so a flag landing exactly when a CTA arrives is visible to it iff the flag's
seq is the smaller. :meth:`Clock.at_seq` files an entry under an earlier seq, in the place
that landing event would have had. Only a CTA that has to wait gets an entry, which is
what keeps a rack-scale run to tens of thousands of events.
"""
from __future__ import annotations

from typing import Any, Callable

import simpy
from simpy.events import Event


class _Call(Event):
    """A simpy event that is already triggered and, when processed, calls ``fn(arg)``
    (simpy's own ``Initialize`` events are built the same way)."""

    def __init__(self, clock: "Clock", seq: int, fn: Callable[[Any], Any], arg: Any):
        self.env = clock.env
        self.seq, self.fn, self.arg = seq, fn, arg
        self._ok, self._value = True, None
        self.callbacks = [clock._fire]


class Clock:
    """Simulated time in microseconds and the queue of what happens next.

    Examples
    --------
    >>> c = Clock(); out = []
    >>> _ = c.at(2.0, out.append, "b"), c.at(1.0, out.append, "a"); c.run(); out, c.now
    (['a', 'b'], 2.0)
    """

    __slots__ = ("env", "now", "seq", "cur", "events")

    def __init__(self) -> None:
        self.env = simpy.Environment()
        self.now = 0.0        # mirrors env.now (read on every instruction: an attribute)
        self.seq = 0          # last seq drawn
        self.cur = 0          # seq of the entry being run
        self.events = 0       # entries scheduled

    def draw(self) -> int:
        """A fresh seq (for something filed without an entry, such as a flag landing)."""
        self.seq += 1
        return self.seq

    def at(self, delay_us: float, fn: Callable[[Any], Any], arg: Any = None) -> int:
        """Call ``fn(arg)`` ``delay_us`` from now, after everything already due then."""
        self.seq += 1
        self.events += 1
        self.env.schedule(_Call(self, self.seq, fn, arg), self.seq, delay_us)
        return self.seq

    def at_seq(self, time_us: float, seq: int, fn: Callable[[Any], Any], arg: Any = None) -> None:
        """Call ``fn(arg)`` at ``time_us`` as if scheduled when ``seq`` was drawn."""
        self.events += 1
        self.env.schedule(_Call(self, seq, fn, arg), seq, time_us - self.env.now)

    def _fire(self, ev: _Call) -> None:
        self.now, self.cur = self.env.now, ev.seq
        ev.fn(ev.arg)

    def run(self) -> None:
        """Process every entry, in (time, seq) order, until none is left."""
        self.env.run()
        self.now = self.env.now
