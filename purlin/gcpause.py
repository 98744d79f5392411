"""Hold Python's cyclic garbage collector off while a phase builds many small objects.

Planning, verifying and simulating a rack-scale call allocate millions of small containers
(instructions, interval entries, flag books) while the ones already built stay alive. The
collector then runs again and again over all of them and finds nothing to free: at 72 ranks
that was about a quarter of each phase's time. Nothing here makes reference cycles worth
collecting mid-phase, so the collector waits until the phase ends, and what the phase built
then counts as old (collected with the oldest generation, not traversed at once). Reference
counting still frees everything else at once.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def paused() -> Iterator[None]:
    """The collector off for the block (or function, as a decorator), then as it was.

    Examples
    --------
    >>> import gc
    >>> with paused():
    ...     gc.isenabled()
    False
    >>> gc.isenabled()
    True
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            _age()
            gc.enable()


def _age() -> None:
    """Move every tracked object to the oldest generation (freeze, then unfreeze: two list
    splices). What the block built is all still alive, and left in the youngest generation
    the first collection after it would traverse all of it (at 576 ranks, millions of
    objects: about a second a phase) to free nothing. Skipped when the caller has objects
    frozen (``gc.freeze``, say for fork sharing): theirs stay where they are."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
