"""The reference executor: a numpy interpreter of Schedules, the oracle for the others.

It is also the definition of what each instruction does. Buffers persist between calls
(staging halves alternate by call parity, flags are never cleared), so repeated calls on
the same object exercise the epoch scheme exactly as a GPU would.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from purlin.errors import ScheduleError
from purlin.snac.ir import Copy, PutPackets, Reduce, Ref, Schedule
from purlin.snac.walk import SyncState, walk
from purlin.spec.dtypes import dtype as _dtype
from purlin.spec.semantics import reduce_arrays

__all__ = ["Reference", "run"]


class Reference:
    """Persistent buffers for one schedule; call it like a collective.

    Examples
    --------
    >>> from purlin.snac import plan
    >>> from purlin.spec import library
    >>> ref = Reference(plan(library.all_reduce(2, 16, "int32")))
    >>> out = ref([np.arange(4, dtype=np.int32), np.ones(4, np.int32)])
    >>> out[1].view(np.int32).tolist()
    [1, 2, 3, 4]
    """

    def __init__(self, schedule: Schedule):
        self.schedule = schedule
        self.state = SyncState()
        w = schedule.world
        self.scratch = {(r, b, h): np.zeros(n, np.uint8)
                        for r in range(w) for h in (0, 1)
                        for b, n in (("staging", schedule.staging_nbytes),
                                     ("packets", schedule.packets_nbytes))}

    def __call__(self, inputs: Sequence[np.ndarray],
                 outputs: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
        s, c = self.schedule, self.schedule.collective
        if len(inputs) != s.world:
            raise ScheduleError(f"{len(inputs)} inputs given for a world of {s.world} ranks")
        ins = [_bytes(x, c.input.nbytes(r), f"input of rank {r}") for r, x in enumerate(inputs)]
        if outputs is None:
            outputs = [np.zeros(c.output.nbytes(r), np.uint8) for r in range(s.world)]
        outs = [_bytes(x, c.output.nbytes(r), f"output of rank {r}") for r, x in enumerate(outputs)]
        half = self.state.calls % 2

        def view(ref: Ref, n: int) -> np.ndarray:
            if ref.buffer == "input":
                buf = ins[ref.rank]
            elif ref.buffer == "output":
                buf = outs[ref.rank]
            else:
                buf = self.scratch[(ref.rank, ref.buffer, half)]
            return buf[ref.offset:ref.offset + n]

        for _, _, _, ins_ in walk(s, self.state):
            t = type(ins_)
            if t is Copy:
                data = view(ins_.src, ins_.nbytes).copy()
                for d in ins_.dsts:
                    view(d, ins_.nbytes)[:] = data
            elif t is Reduce:
                dt = _dtype(ins_.dtype)
                parts = [view(r, ins_.nbytes).view(dt.numpy) for r in ins_.srcs]
                data = reduce_arrays(parts, dt, ins_.op).view(np.uint8)
                for d in ins_.dsts:
                    view(d, ins_.nbytes)[:] = data
            elif t is PutPackets:
                view(ins_.dst, ins_.nbytes)[:] = view(ins_.src, ins_.nbytes)
        return list(outputs) if all(isinstance(o, np.ndarray) and o.dtype == np.uint8
                                    for o in outputs) else outs


def _bytes(x: np.ndarray, nbytes: int, what: str) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        raise ScheduleError(f"{what}: expected a numpy array, got {type(x).__name__}")
    if not x.flags.c_contiguous:
        raise ScheduleError(f"{what}: must be C-contiguous")
    b = x.reshape(-1).view(np.uint8)
    if b.size != nbytes:
        raise ScheduleError(f"{what}: {b.size} B given, the layout needs {nbytes} B")
    return b


def run(schedule: Schedule, inputs: Sequence[np.ndarray],
        outputs: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
    """Run one call of ``schedule`` on fresh state; returns the outputs as uint8 arrays."""
    return Reference(schedule)(inputs, outputs)
