"""The library collectives, each a naming of layouts and nothing more.

Sizes are per block in bytes. ``from_size`` converts an nccl-tests "size" into these
(AllReduce: the buffer; AllGather: the whole output; ReduceScatter, AllToAll: the
whole per-rank input).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from purlin.errors import SpecError
from purlin.spec.collective import Collective
from purlin.spec.layout import Layout, packed, scattered, transposed


def all_reduce(world: int, nbytes: int, dtype="fp32", op: str = "add") -> Collective:
    """Every rank ends with the reduction of every rank's ``x``."""
    return Collective("all_reduce", packed(world, nbytes), packed(world, nbytes), op, dtype)


def all_gather(world: int, nbytes: int, dtype="fp32") -> Collective:
    """Rank r contributes block r; every rank ends with blocks 0..W-1."""
    return all_gather_v(world, [nbytes] * world, dtype)


def all_gather_v(world: int, sizes: Sequence[int], dtype="fp32") -> Collective:
    """Rank r contributes ``sizes[r]`` bytes as block r; every rank ends with blocks 0..W-1."""
    return Collective("all_gather_v" if len(set(sizes)) > 1 else "all_gather",
                      packed(world, list(sizes), name="{r}"), scattered(world, list(sizes)),
                      "copy", dtype)


def reduce_scatter(world: int, nbytes: int, dtype="fp32", op: str = "add") -> Collective:
    """Every rank holds blocks 0..W-1; rank q ends with the reduction of block q."""
    return reduce_scatter_v(world, [nbytes] * world, dtype, op)


def reduce_scatter_v(world: int, sizes: Sequence[int], dtype="fp32", op: str = "add") -> Collective:
    """Every rank holds blocks 0..W-1 of ``sizes``; rank q ends with the reduction of block q."""
    return Collective("reduce_scatter_v" if len(set(sizes)) > 1 else "reduce_scatter",
                      scattered(world, list(sizes)), packed(world, list(sizes), name="{r}"),
                      op, dtype)


def all_to_all(world: int, nbytes: int, dtype="fp32") -> Collective:
    """Rank r holds r->0..r->W-1; rank q ends with 0->q..W-1->q."""
    return all_to_all_v(world, [[nbytes] * world for _ in range(world)], dtype)


def all_to_all_v(world: int, matrix: Sequence[Sequence[int]], dtype="fp32") -> Collective:
    """``matrix[s][d]`` bytes go from rank s to rank d."""
    uniform = len({n for row in matrix for n in row}) == 1
    return Collective("all_to_all" if uniform else "all_to_all_v",
                      scattered(world, matrix, name="{r}->{s}"), transposed(world, matrix),
                      "copy", dtype)


def broadcast(world: int, nbytes: int, dtype="fp32", root: int = 0) -> Collective:
    """Rank ``root``'s ``x`` ends on every rank."""
    _check_root(world, root)
    return Collective("broadcast", packed(world, nbytes, ranks=[root]), packed(world, nbytes),
                      "copy", dtype)


def reduce(world: int, nbytes: int, dtype="fp32", op: str = "add", root: int = 0) -> Collective:
    """Rank ``root`` ends with the reduction of every rank's ``x``."""
    _check_root(world, root)
    return Collective("reduce", packed(world, nbytes), packed(world, nbytes, ranks=[root]),
                      op, dtype)


def gather(world: int, nbytes: int, dtype="fp32", root: int = 0) -> Collective:
    """Rank ``root`` ends with every rank's block, in rank order."""
    _check_root(world, root)
    out = Layout(tuple(scattered(world, nbytes).ranks[r] if r == root else ()
                       for r in range(world)))
    return Collective("gather", packed(world, nbytes, name="{r}"), out, "copy", dtype)


def scatter(world: int, nbytes: int, dtype="fp32", root: int = 0) -> Collective:
    """Rank ``root`` holds blocks 0..W-1; rank q ends with block q."""
    _check_root(world, root)
    inp = Layout(tuple(scattered(world, nbytes).ranks[r] if r == root else ()
                       for r in range(world)))
    return Collective("scatter", inp, packed(world, nbytes, name="{r}"), "copy", dtype)


def _check_root(world: int, root: int) -> None:
    if not 0 <= root < world:
        raise SpecError(f"root {root} is not a rank of a world of {world} (rule: 0 <= root < W)")


# ---- lookup by name, sizes the nccl-tests way -----------------------------------------

PURLIN_SEVEN = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                "all_gather_v", "reduce_scatter_v", "all_to_all_v")
ALL = PURLIN_SEVEN + ("broadcast", "reduce", "gather", "scatter")

# nccl-tests busbw factor per collective, as a function of W
BUSBW_FACTOR: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda w: 2 * (w - 1) / w,
    "all_gather": lambda w: (w - 1) / w, "all_gather_v": lambda w: (w - 1) / w,
    "reduce_scatter": lambda w: (w - 1) / w, "reduce_scatter_v": lambda w: (w - 1) / w,
    "all_to_all": lambda w: (w - 1) / w, "all_to_all_v": lambda w: (w - 1) / w,
    "broadcast": lambda w: 1.0, "reduce": lambda w: 1.0,
    "gather": lambda w: (w - 1) / w, "scatter": lambda w: (w - 1) / w,
}


def nccl_size(c: Collective) -> int:
    """The nccl-tests "size" of a collective in bytes: its largest per-rank buffer."""
    return max((max(c.input.nbytes(r), c.output.nbytes(r)) for r in range(c.world)), default=0)


def canonical(name: str) -> str:
    """The library name for ``name`` (``AllReduce`` and ``all-reduce`` -> ``all_reduce``);
    SpecError if none."""
    key = name.lower().replace("-", "_").replace(" ", "")
    key = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
           "alltoall": "all_to_all", "allgatherv": "all_gather_v", "reducescatterv": "reduce_scatter_v",
           "alltoallv": "all_to_all_v"}.get(key, key)
    if key not in ALL:
        raise SpecError(f"collective {name!r} is not in the library; choose one of {', '.join(ALL)}")
    return key


def v_splits(world: int, total: int, align: int = 16, seed: int = 0, zeros: bool = True) -> list[int]:
    """Random V split sizes summing to at most ``total``, ``align``-aligned, skewed
    (Zipf-like, as Purlin's harness uses), with a zero where ``zeros`` and W > 2."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, world + 1) ** 0.5
    rng.shuffle(weights)
    if zeros and world > 2:
        weights[rng.integers(world)] = 0.0
    units = total // align
    raw = np.floor(weights / weights.sum() * units).astype(int)
    return [int(u) * align for u in raw]


def from_size(name: str, world: int, size: int, dtype="fp32", op: str = "add",
              root: int = 0, seed: int = 0, align: int = 16) -> Collective:
    """Build a library collective from an nccl-tests-style ``size`` in bytes."""
    key = canonical(name)
    block = (size // world) // align * align
    if key in ("all_reduce",):
        return all_reduce(world, size, dtype, op)
    if key == "broadcast":
        return broadcast(world, size, dtype, root)
    if key == "reduce":
        return reduce(world, size, dtype, op, root)
    if key in ("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter"):
        f = {"all_gather": all_gather, "all_to_all": all_to_all, "gather": gather,
             "scatter": scatter}.get(key)
        if key == "reduce_scatter":
            return reduce_scatter(world, block, dtype, op)
        if key in ("gather", "scatter"):
            return f(world, block, dtype, root=root)
        return f(world, block, dtype)
    if key == "all_gather_v":
        return all_gather_v(world, v_splits(world, size, align, seed), dtype)
    if key == "reduce_scatter_v":
        return reduce_scatter_v(world, v_splits(world, size, align, seed), dtype, op)
    # all_to_all_v: each rank splits its ``size`` bytes its own way
    return all_to_all_v(world, [v_splits(world, size, align, seed + r) for r in range(world)], dtype)
