"""The engine's discrete-event loop: a heap of timed callbacks, in the style of simpy's core.

An entry is (time, seq, sub, callback, argument); ``seq`` orders entries of equal time
in the order they were scheduled, as simpy's event ids do. ``seq`` is also what makes
"did this flag land before that CTA looked?" answerable without an event per flag: a
Notify draws a seq when it is issued (as the landing event of a simpy model would be
scheduled then), so a flag landing exactly when a CTA arrives is visible to it iff the
flag's seq is the smaller. :meth:`Clock.at_seq` files an entry under an earlier seq, in
the place that landing event would have had.
"""
from __future__ import annotations

import heapq
from typing import Any, Callable


class Clock:
    """Simulated time in microseconds and the queue of what happens next.

    Examples
    --------
    >>> c = Clock(); out = []
    >>> _ = c.at(2.0, out.append, "b"), c.at(1.0, out.append, "a"); c.run(); out, c.now
    (['a', 'b'], 2.0)
    """

    __slots__ = ("now", "seq", "cur", "events", "_q", "_sub")

    def __init__(self) -> None:
        self.now = 0.0
        self.seq = 0          # last seq drawn
        self.cur = 0          # seq of the entry being run
        self.events = 0       # entries scheduled
        self._q: list[tuple] = []
        self._sub = 0

    def draw(self) -> int:
        """A fresh seq (for something filed without an entry, such as a flag landing)."""
        self.seq += 1
        return self.seq

    def at(self, delay_us: float, fn: Callable[[Any], Any], arg: Any = None) -> int:
        """Call ``fn(arg)`` ``delay_us`` from now, after everything already due then."""
        self.seq += 1
        self.events += 1
        heapq.heappush(self._q, (self.now + delay_us, self.seq, 0, fn, arg))
        return self.seq

    def at_seq(self, time_us: float, seq: int, fn: Callable[[Any], Any], arg: Any = None) -> None:
        """Call ``fn(arg)`` at ``time_us`` as if scheduled when ``seq`` was drawn."""
        self._sub += 1
        self.events += 1
        heapq.heappush(self._q, (time_us, seq, self._sub, fn, arg))

    def run(self) -> None:
        q, pop = self._q, heapq.heappop
        while q:
            t, self.cur, _, fn, arg = pop(q)
            self.now = t
            fn(arg)
