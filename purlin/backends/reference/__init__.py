"""The reference executor: a numpy interpreter of Schedules, the oracle for the others.

It is also the definition of what each instruction does. Buffers persist between calls
(staging halves alternate by call parity, flags are never cleared), so repeated calls on
the same object exercise the epoch scheme exactly as a GPU would.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from purlin.check import check_int
from purlin.errors import LimitError, UsageError
from purlin.snac.ir import Copy, PutPackets, Reduce, Ref, Schedule
from purlin.snac.verify import check_bounds
from purlin.snac.walk import SyncState, walk
from purlin.spec.dtypes import DType, dtype as _dtype
from purlin.spec.semantics import reduce_arrays

DEFAULT_MAX_SCRATCH_NBYTES = 4 << 30
"""Most staging and packet-window bytes the executor allocates for one schedule (both
halves, every rank) unless ``max_scratch_nbytes=`` says more."""

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

    def __init__(self, schedule: Schedule, *, max_scratch_nbytes: int = DEFAULT_MAX_SCRATCH_NBYTES):
        check_bounds(schedule)   # every address in bounds before any is used
        limit = check_int("max_scratch_nbytes", max_scratch_nbytes, lo=0, error=UsageError)
        w = schedule.world
        need = 2 * w * (schedule.staging_nbytes + schedule.packets_nbytes)
        if need > limit:
            raise LimitError(f"reference executor: the schedule needs {need:,} B of staging and "
                             f"packet windows ({w} ranks x 2 halves), over the limit of "
                             f"{limit:,} B; raise it with max_scratch_nbytes= if you mean it")
        self.schedule = schedule
        self.state = SyncState()
        self.scratch = {(r, b, h): np.zeros(n, np.uint8)
                        for r in range(w) for h in (0, 1)
                        for b, n in (("staging", schedule.staging_nbytes),
                                     ("packets", schedule.packets_nbytes))}

    def __call__(self, inputs: Sequence[np.ndarray],
                 outputs: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
        s, c = self.schedule, self.schedule.collective
        inputs = _buffers("inputs", inputs, s.world)
        ins = [_bytes(x, c.input.nbytes(r), f"input of rank {r}", c.dtype)
               for r, x in enumerate(inputs)]
        if outputs is None:
            outputs = [np.zeros(c.output.nbytes(r), np.uint8) for r in range(s.world)]
        outputs = _buffers("outputs", outputs, s.world)
        outs = [_bytes(x, c.output.nbytes(r), f"output of rank {r}", c.dtype, write=True)
                for r, x in enumerate(outputs)]
        _no_overlap(ins, outs)
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


def _buffers(what: str, xs, world: int) -> list:
    """One buffer per rank, as a list."""
    if isinstance(xs, np.ndarray) or not isinstance(xs, (list, tuple)):
        raise UsageError(f"{what}: expected a list of {world} numpy arrays (one per rank), got "
                         f"{type(xs).__name__}")
    if len(xs) != world:
        raise UsageError(f"{what}: {len(xs)} given for a world of {world} ranks (rule: one per "
                         f"rank, empty arrays for ranks with no data)")
    return list(xs)


def _bytes(x: np.ndarray, nbytes: int, what: str, dt: DType, write: bool = False) -> np.ndarray:
    """The bytes of one rank's buffer, refused unless it is a C-contiguous numpy array of
    the collective's dtype (or raw uint8 bytes) and the layout's size."""
    if not isinstance(x, np.ndarray):
        raise UsageError(f"{what}: expected a numpy array, got {type(x).__name__}")
    if x.dtype != np.uint8 and x.dtype != np.dtype(dt.numpy):
        raise UsageError(f"{what}: dtype {x.dtype} does not match the collective's {dt.name} "
                         f"(rule: pass {np.dtype(dt.numpy)} elements, or raw bytes as uint8; "
                         f"convert with .astype() if the values should change type)")
    if not x.flags.c_contiguous:
        raise UsageError(f"{what}: must be C-contiguous (pass np.ascontiguousarray(x))")
    if write and not x.flags.writeable:
        raise UsageError(f"{what}: is read-only; pass a writable array (e.g. x.copy())")
    b = x.reshape(-1).view(np.uint8)
    if b.size != nbytes:
        raise UsageError(f"{what}: {b.size} B given, the layout needs {nbytes} B"
                         + (f" ({nbytes // dt.itemsize} {dt.name} elements)" if nbytes else ""))
    return b


def _no_overlap(ins: list[np.ndarray], outs: list[np.ndarray]) -> None:
    """An output that shares memory with an input or another output would be read after
    it is written: refuse it."""
    for q, o in enumerate(outs):
        if not o.size:
            continue
        for r, x in enumerate(ins):
            if x.size and np.shares_memory(o, x):
                raise UsageError(f"output of rank {q} overlaps the input of rank {r} "
                                 f"(rule: outputs are separate buffers)")
        for p in range(q):
            if outs[p].size and np.shares_memory(o, outs[p]):
                raise UsageError(f"outputs of ranks {p} and {q} overlap (rule: one buffer each)")


def run(schedule: Schedule, inputs: Sequence[np.ndarray],
        outputs: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
    """Run one call of ``schedule`` on fresh state; returns the outputs as uint8 arrays."""
    return Reference(schedule)(inputs, outputs)
