"""What a collective computes, straight from its spec: the oracle no schedule touches."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from purlin.errors import SpecError
from purlin.spec.collective import Collective, output_sources
from purlin.spec.dtypes import DType

_UFUNC = {"add": np.add, "max": np.maximum, "min": np.minimum, "mul": np.multiply}


def reduce_arrays(parts: Sequence[np.ndarray], dt: DType, op: str) -> np.ndarray:
    """Reduce same-typed arrays in the given order, accumulating in ``dt.accumulator``
    and rounding once at the end: the rule every executor follows."""
    f = _UFUNC[op]
    with np.errstate(over="ignore", invalid="ignore"):
        acc = parts[0].astype(dt.accumulator)
        for part in parts[1:]:
            acc = f(acc, part.astype(dt.accumulator))
        return acc.astype(dt.numpy)


def evaluate(c: Collective, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Outputs of ``c`` for ``inputs`` (one array per rank, of the collective's dtype or raw
    uint8 bytes).

    Returns one uint8 array per rank. Reductions run in rank order.

    Examples
    --------
    >>> from purlin.spec import library
    >>> c = library.all_reduce(2, 8, "int32")
    >>> out = evaluate(c, [np.array([1, 2], np.int32), np.array([10, 20], np.int32)])
    >>> out[1].view(np.int32).tolist()
    [11, 22]
    """
    if not isinstance(c, Collective):
        raise SpecError(f"evaluate: expected a Collective, got {type(c).__name__}")
    if isinstance(inputs, np.ndarray) or not isinstance(inputs, (list, tuple)):
        raise SpecError(f"{c.name}: inputs: expected a list of {c.world} numpy arrays, got "
                        f"{type(inputs).__name__}")
    if len(inputs) != c.world:
        raise SpecError(f"{c.name}: {len(inputs)} input buffers given for a world of {c.world}")
    raw = []
    dt0: DType = c.dtype  # type: ignore[assignment]
    for r, x in enumerate(inputs):
        if not isinstance(x, np.ndarray):
            raise SpecError(f"{c.name}: input of rank {r}: expected a numpy array, got "
                            f"{type(x).__name__}")
        if x.dtype != np.uint8 and x.dtype != np.dtype(dt0.numpy):
            raise SpecError(f"{c.name}: input of rank {r}: dtype {x.dtype} does not match the "
                            f"collective's {dt0.name} (pass {np.dtype(dt0.numpy)} or raw uint8 bytes)")
        b = np.ascontiguousarray(x).reshape(-1).view(np.uint8)
        if b.size != c.input.nbytes(r):
            raise SpecError(f"{c.name}: input of rank {r} has {b.size} B, layout needs "
                            f"{c.input.nbytes(r)} B")
        raw.append(b)
    dt: DType = c.dtype  # type: ignore[assignment]
    outs = [np.zeros(c.output.nbytes(q), np.uint8) for q in range(c.world)]
    for p, srcs in output_sources(c):
        pieces = [raw[s.rank][s.offset:s.offset + s.nbytes] for s in srcs]
        if c.is_reduce:
            vals = reduce_arrays([x.view(dt.numpy) for x in pieces], dt, c.op)
            outs[p.rank][p.offset:p.offset + p.nbytes] = vals.view(np.uint8)
        else:
            outs[p.rank][p.offset:p.offset + p.nbytes] = pieces[0]
    return outs
