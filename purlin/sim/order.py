"""The order :func:`numpy.lexsort` gives, found with one integer sort.

``np.lexsort`` runs a stable (merge) sort per key; the engine's sweeps sort tens of
thousands of entries by a resource, a time and a flag per sweep, and there those stable
passes were most of the sweep. Here each key becomes its dense rank (one quicksort for a
float key, none for a small integer one), the ranks and the entry's own position are
packed into one int64 per entry, and a single quicksort of those distinct integers gives
the same permutation: entries equal in every key keep their input order, as lexsort's
stable passes keep it.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

_BITS = 62
"""Packed keys stay below 2**62 (int64, with room); wider ones fall back to lexsort."""


def lex_order(keys: Sequence[np.ndarray]) -> np.ndarray:
    """``np.lexsort(keys)``: the last key is the primary one, ties keep input order.

    Examples
    --------
    >>> import numpy as np
    >>> t = np.array([2.0, 1.0, 2.0, 1.0]); r = np.array([1, 1, 0, 0])
    >>> lex_order((t, r)).tolist() == np.lexsort((t, r)).tolist() == [3, 2, 1, 0]
    True
    """
    n = len(keys[0]) if len(keys) else 0
    if n < 2:
        return np.lexsort(keys)
    packed = np.arange(n, dtype=np.int64)
    bits = int(n - 1).bit_length()
    scale = 1 << bits
    for key in keys:   # the first key is the least significant above the position
        rank, size = _dense_rank(np.asarray(key))
        if rank is None:
            return np.lexsort(keys)
        width = int(size - 1).bit_length()
        bits += width
        if bits > _BITS:
            return np.lexsort(keys)
        packed += rank * scale
        scale <<= width
    return np.argsort(packed)


def _dense_rank(key: np.ndarray) -> tuple[np.ndarray | None, int]:
    """Each entry's rank among the key's distinct values (equal values, -0.0 and 0.0
    included, share one) and how many there are; (None, 0) where a NaN makes equality
    unordered."""
    if key.dtype == bool:
        return key.astype(np.int64), 2
    if key.dtype.kind in "iu":
        lo, hi = int(key.min()), int(key.max())
        if hi - lo < len(key) * 4 and -(1 << 62) < lo and hi < 1 << 62:   # a small range: the values are their ranks
            return key.astype(np.int64) - lo, hi - lo + 1
    elif key.dtype.kind != "f" or np.isnan(key).any():
        return None, 0
    o = np.argsort(key)
    s = key.take(o)
    step = np.zeros(len(key), np.int64)
    np.cumsum(s[1:] != s[:-1], out=step[1:])
    rank = np.empty(len(key), np.int64)
    rank[o] = step
    return rank, int(step[-1]) + 1
