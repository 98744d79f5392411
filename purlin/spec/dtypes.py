"""Element types a collective can carry, and what each allows.

fp8 formats are copy-only: there is no agreed accumulation rule for them, and Purlin
itself reduces fp8 nowhere. Low-precision floats accumulate in fp32 and round once.
"""
from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from purlin.errors import SpecError

REDUCE_OPS = ("add", "max", "min", "mul")


@dataclass(frozen=True, slots=True)
class DType:
    """An element type: its name, size in bytes, numpy type and accumulator."""

    name: str
    itemsize: int
    numpy: type
    accumulator: type | None  # None: copy only
    is_float: bool

    def __str__(self) -> str:
        return self.name


_DTYPES = {
    d.name: d
    for d in (
        DType("fp32", 4, np.float32, np.float32, True),
        DType("fp16", 2, np.float16, np.float32, True),
        DType("bf16", 2, ml_dtypes.bfloat16, np.float32, True),
        DType("fp8_e4m3", 1, ml_dtypes.float8_e4m3fn, None, True),
        DType("fp8_e5m2", 1, ml_dtypes.float8_e5m2, None, True),
        DType("int32", 4, np.int32, np.int32, False),
    )
}
_ALIASES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "int": "int32",
            "float8_e4m3fn": "fp8_e4m3", "float8_e5m2": "fp8_e5m2", "e4m3": "fp8_e4m3",
            "e5m2": "fp8_e5m2", "half": "fp16", "float": "fp32"}


def dtype(name: str | DType) -> DType:
    """Look a dtype up by name ('fp32', 'bf16', 'fp8_e4m3', ...).

    Examples
    --------
    >>> dtype("bf16").itemsize
    2
    """
    if isinstance(name, DType):
        return name
    key = _ALIASES.get(str(name), str(name))
    if key not in _DTYPES:
        raise SpecError(f"dtype {name!r}: unknown; choose one of {', '.join(_DTYPES)}")
    return _DTYPES[key]


def all_dtypes() -> tuple[DType, ...]:
    """Every supported dtype."""
    return tuple(_DTYPES.values())
