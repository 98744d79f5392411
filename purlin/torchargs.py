"""Checks of :mod:`purlin.torch`'s arguments that need no torch.

``purlin.torch`` imports torch (an optional extra); the rules for what its ops accept live
here, over plain values and anything tensor-like (``shape``, ``dtype``, ``device``,
``is_cuda``, ``numel()``), so CI checks them without torch installed and the messages are
stated once. Each raises :class:`~purlin.errors.SpecError` naming the op, the argument,
the value and the rule.

Examples
--------
>>> check_op("all_reduce", "sum")
'add'
>>> check_op("all_reduce", "xor")
Traceback (most recent call last):
...
purlin.errors.SpecError: all_reduce: op 'xor': choose one of sum, add, prod, mul, max, min
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

from purlin.errors import SpecError

OPS = {"sum": "add", "add": "add", "prod": "mul", "mul": "mul", "max": "max", "min": "min"}
"""torch.distributed's reduction names (and Purlin's own) -> Purlin's op."""
SPLIT = ("reduce_scatter", "all_to_all")
"""Ops that cut each rank's tensor into one equal block per rank."""


def check_op(name: str, op: Any) -> str:
    """Purlin's op for ``op`` (``"sum"`` -> ``"add"``)."""
    if not isinstance(op, str) or op not in OPS:
        raise SpecError(f"{name}: op {op!r:.40}: choose one of {', '.join(OPS)}")
    return OPS[op]


def out_numel(name: str, n: int, w: int) -> int:
    """Elements of each rank's result for ``n`` elements in on each of ``w`` ranks.

    Examples
    --------
    >>> out_numel("all_gather", 3, 4), out_numel("reduce_scatter", 8, 4)
    (12, 2)
    """
    if name == "all_gather":
        return n * w
    if name in SPLIT and n % w:
        raise SpecError(f"{name}: {n} elements do not split into {w} equal blocks (rule: each "
                        f"rank's tensor holds a multiple of the {w} ranks' elements)")
    return n // w if name == "reduce_scatter" else n


def check_tensors(name: str, xs: Any) -> list:
    """``xs`` as a list of one tensor per rank: not a single tensor (which would iterate as
    its rows), not empty, every one of one dtype, shape and device."""
    if hasattr(xs, "shape") or not isinstance(xs, Sequence) or isinstance(xs, (str, bytes)):
        shape = f" of shape {tuple(xs.shape)}" if hasattr(xs, "shape") else ""
        raise SpecError(f"{name}: xs is one {type(xs).__name__}{shape}; pass one tensor per "
                        f"rank, as a list ([x0, x1, ...])")
    xs = list(xs)
    if not xs:
        raise SpecError(f"{name}: no tensors given (one per rank)")
    for r, x in enumerate(xs):
        if not all(hasattr(x, a) for a in ("shape", "dtype", "device")):
            raise SpecError(f"{name}: xs[{r}] is {type(x).__name__}: expected a tensor")
    x0 = xs[0]
    for r, x in enumerate(xs[1:], 1):
        for attr in ("dtype", "shape", "device"):
            if getattr(x, attr) != getattr(x0, attr):
                raise SpecError(f"{name}: every rank's tensor must have one dtype, shape and "
                                f"device; xs[{r}] has {attr} {getattr(x, attr)}, xs[0] "
                                f"{getattr(x0, attr)}")
    return xs


def check_world(name: str, is_cuda: bool, world: Any, registered: bool) -> None:
    """A world goes with CUDA tensors (registered first); CPU tensors run on the reference
    executor and take none, so a world given with them is a mistake, not ignored."""
    if is_cuda and not registered:
        raise SpecError(f"{name}: CUDA tensors need a world registered first "
                        f"(purlin.torch.register(w), then world=w)")
    if not is_cuda and world:
        raise SpecError(f"{name}: world {world!r:.40}: CPU tensors run on the reference executor, "
                        f"which takes no world; move the tensors to the GPU or leave world out")


def check_max_nbytes(max_nbytes: Any) -> int:
    """A Communicator's symmetric buffer size: a whole number of bytes, at least 1."""
    if isinstance(max_nbytes, bool) or not isinstance(max_nbytes, numbers.Integral) \
            or max_nbytes < 1:
        raise SpecError(f"Communicator: max_nbytes {max_nbytes!r:.40}: must be an integer >= 1 "
                        f"(the IPC buffer per rank, in bytes)")
    return int(max_nbytes)
