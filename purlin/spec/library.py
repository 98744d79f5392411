"""The library collectives, each a naming of layouts and nothing more.

Sizes are per block in bytes. ``from_size`` converts an nccl-tests "size" into these
(AllReduce: the buffer; AllGather: the whole output; ReduceScatter, AllToAll: the
whole per-rank input).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from purlin.check import check_int
from purlin.errors import SpecError
from purlin.spec.collective import Collective, normalize_op
from purlin.spec.dtypes import REDUCE_OPS, dtype as _dtype
from purlin.spec.layout import MAX_BLOCKS, Layout, packed, scattered, transposed

VECTOR_ALIGN = 16
"""Where :func:`from_size` cuts blocks by default: one 16-byte vector (whole elements
below that, see there)."""


def all_reduce(world: int, nbytes: int, dtype="fp32", op: str = "add") -> Collective:
    """Every rank ends with the reduction of every rank's ``x``."""
    op = _reduce_op("all_reduce", op)
    return Collective("all_reduce", packed(world, nbytes), packed(world, nbytes), op, dtype)


def all_gather(world: int, nbytes: int, dtype="fp32", *, max_blocks: int = MAX_BLOCKS) -> Collective:
    """Rank r contributes block r; every rank ends with blocks 0..W-1."""
    _world(world, max_blocks)
    return all_gather_v(world, [_nbytes(nbytes)] * world, dtype, max_blocks=max_blocks)


def all_gather_v(world: int, sizes: Sequence[int], dtype="fp32", *,
                 max_blocks: int = MAX_BLOCKS) -> Collective:
    """Rank r contributes ``sizes[r]`` bytes as block r; every rank ends with blocks 0..W-1."""
    sizes = _sizes(world, sizes, max_blocks)
    return Collective("all_gather_v" if len(set(sizes)) > 1 else "all_gather",
                      packed(world, sizes, name="{r}"),
                      scattered(world, sizes, max_blocks=max_blocks), "copy", dtype)


def reduce_scatter(world: int, nbytes: int, dtype="fp32", op: str = "add", *,
                   max_blocks: int = MAX_BLOCKS) -> Collective:
    """Every rank holds blocks 0..W-1; rank q ends with the reduction of block q."""
    _world(world, max_blocks)
    return reduce_scatter_v(world, [_nbytes(nbytes)] * world, dtype, op, max_blocks=max_blocks)


def reduce_scatter_v(world: int, sizes: Sequence[int], dtype="fp32", op: str = "add", *,
                     max_blocks: int = MAX_BLOCKS) -> Collective:
    """Every rank holds blocks 0..W-1 of ``sizes``; rank q ends with the reduction of block q."""
    op = _reduce_op("reduce_scatter", op)
    sizes = _sizes(world, sizes, max_blocks)
    return Collective("reduce_scatter_v" if len(set(sizes)) > 1 else "reduce_scatter",
                      scattered(world, sizes, max_blocks=max_blocks),
                      packed(world, sizes, name="{r}"), op, dtype)


def all_to_all(world: int, nbytes: int, dtype="fp32", *, max_blocks: int = MAX_BLOCKS) -> Collective:
    """Rank r holds r->0..r->W-1; rank q ends with 0->q..W-1->q."""
    _world(world, max_blocks)
    n = _nbytes(nbytes)
    return all_to_all_v(world, [[n] * world for _ in range(world)], dtype, max_blocks=max_blocks)


def all_to_all_v(world: int, matrix: Sequence[Sequence[int]], dtype="fp32", *,
                 max_blocks: int = MAX_BLOCKS) -> Collective:
    """``matrix[s][d]`` bytes go from rank s to rank d."""
    _world(world, max_blocks)
    inp = scattered(world, matrix, name="{r}->{s}", max_blocks=max_blocks)
    uniform = len({b.nbytes for blocks in inp.ranks for b in blocks}) == 1
    return Collective("all_to_all" if uniform else "all_to_all_v", inp,
                      transposed(world, matrix, max_blocks=max_blocks), "copy", dtype)


def broadcast(world: int, nbytes: int, dtype="fp32", root: int = 0) -> Collective:
    """Rank ``root``'s ``x`` ends on every rank."""
    _check_root(world, root)
    return Collective("broadcast", packed(world, nbytes, ranks=[root]), packed(world, nbytes),
                      "copy", dtype)


def reduce(world: int, nbytes: int, dtype="fp32", op: str = "add", root: int = 0) -> Collective:
    """Rank ``root`` ends with the reduction of every rank's ``x``."""
    op = _reduce_op("reduce", op)
    _check_root(world, root)
    return Collective("reduce", packed(world, nbytes), packed(world, nbytes, ranks=[root]),
                      op, dtype)


def gather(world: int, nbytes: int, dtype="fp32", root: int = 0) -> Collective:
    """Rank ``root`` ends with every rank's block, in rank order."""
    _check_root(world, root)
    out = Layout(tuple(_row(world, nbytes) if r == root else () for r in range(world)))
    return Collective("gather", packed(world, nbytes, name="{r}"), out, "copy", dtype)


def scatter(world: int, nbytes: int, dtype="fp32", root: int = 0) -> Collective:
    """Rank ``root`` holds blocks 0..W-1; rank q ends with block q."""
    _check_root(world, root)
    inp = Layout(tuple(_row(world, nbytes) if r == root else () for r in range(world)))
    return Collective("scatter", inp, packed(world, nbytes, name="{r}"), "copy", dtype)


def _check_root(world: int, root: int) -> None:
    check_int("world", world, lo=1, error=SpecError)
    root = check_int("root", root, error=SpecError)
    if not 0 <= root < world:
        raise SpecError(f"root {root} is not a rank of a world of {world} (rule: 0 <= root < W)")


def _row(world: int, nbytes: int) -> tuple:
    """The blocks 0..W-1 of one rank (a root's buffer in gather and scatter)."""
    from purlin.spec.layout import Block
    n = _nbytes(nbytes)
    return tuple(Block(str(s), n) for s in range(world))


def _world(world: int, max_blocks: int) -> int:
    """A rank count whose W x W layout is within ``max_blocks`` (checked before any is built)."""
    from purlin.spec.layout import _check_blocks
    world = check_int("world", world, lo=1, error=SpecError)
    _check_blocks(world, world * world, max_blocks)
    return world


def _nbytes(nbytes) -> int:
    return check_int("nbytes", nbytes, lo=0, error=SpecError)


def _sizes(world: int, sizes, max_blocks: int) -> list[int]:
    _world(world, max_blocks)
    if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__iter__"):
        raise SpecError(f"sizes {sizes!r:.60}: expected one size per rank (a list of {world} "
                        f"ints), got {type(sizes).__name__}")
    return [check_int(f"sizes[{r}]", n, lo=0, error=SpecError) for r, n in enumerate(sizes)]


def _reduce_op(name: str, op: str) -> str:
    """A reducing collective's op: a reduction, not ``copy``."""
    op = normalize_op(op)
    if op not in REDUCE_OPS:
        raise SpecError(f"{name}: op {op!r} is not a reduction; choose one of {', '.join(REDUCE_OPS)}")
    return op


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


ROOTED = ("broadcast", "reduce", "gather", "scatter")
REDUCING = ("all_reduce", "reduce_scatter", "reduce_scatter_v", "reduce")


def canonical(name: str) -> str:
    """The library name for ``name`` (``AllReduce`` and ``all-reduce`` -> ``all_reduce``);
    SpecError if none."""
    if not isinstance(name, str):
        raise SpecError(f"collective {name!r}: expected a library name (a string), one of "
                        f"{', '.join(ALL)}")
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
    world = check_int("world", world, lo=1, error=SpecError)
    total = check_int("total", total, lo=0, error=SpecError)
    align = check_int("align", align, lo=1, error=SpecError)
    rng = np.random.default_rng(check_int("seed", seed, lo=0, error=SpecError))
    weights = 1.0 / np.arange(1, world + 1) ** 0.5
    rng.shuffle(weights)
    if zeros and world > 2:
        weights[rng.integers(world)] = 0.0
    units = total // align
    raw = np.floor(weights / weights.sum() * units).astype(int)
    return [int(u) * align for u in raw]


def smallest_size(name: str, world: int, align: int = VECTOR_ALIGN, seed: int = 0) -> int:
    """The smallest nccl-tests ``size`` at which :func:`from_size` gives ``name`` a block
    that is not empty (split collectives cut the size into W aligned blocks; V forms into
    skewed splits).

    Examples
    --------
    >>> smallest_size("all_reduce", 8), smallest_size("all_gather", 8)
    (16, 128)
    """
    key = canonical(name)
    world = check_int("world", world, lo=1, error=SpecError)
    if key in ("all_reduce", "broadcast", "reduce"):
        return align
    if key in ("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter"):
        return world * align
    lo, hi = align, align   # V forms: double until a split is not empty, then bisect
    while not sum(v_splits(world, hi, align, seed)):
        lo, hi = hi, hi * 2
    while hi - lo > align:
        mid = (lo + hi) // 2 // align * align
        lo, hi = (lo, mid) if sum(v_splits(world, mid, align, seed)) else (mid, hi)
    return hi


def from_size(name: str, world: int, size: int, dtype="fp32", op: str | None = None,
              root: int | None = None, seed: int = 0, align: int | None = None, *,
              max_blocks: int = MAX_BLOCKS) -> Collective:
    """Build a library collective from an nccl-tests-style ``size`` in bytes.

    Blocks are cut at multiples of ``align`` bytes. By default that is 16 B (one vector),
    or the element size where 16 B would leave every block empty: at 72 ranks 1 KiB is
    14 B a rank, three fp32 elements, as nccl-tests counts them.

    ``op`` (default add) applies to reducing collectives only and ``root`` (default 0) to
    rooted ones; either given where it does not apply is an error (except ``op="add"``,
    the default, which callers pass for every collective alike), as is a ``size`` too
    small to give any block a byte (the message names the smallest that works).

    Examples
    --------
    >>> from_size("all_gather", 4, 4096).output.nbytes(0)
    4096
    >>> from_size("all_gather", 8, 64).output.nbytes(0)   # 8 B a rank: two elements
    64
    >>> from_size("all_gather", 8, 16)
    Traceback (most recent call last):
    ...
    purlin.errors.SpecError: all_gather at world 8: size 16 B cuts into blocks of 0 B (each rank's block is size / 8 rounded down to 4 B); the smallest size that works is 32 B
    """
    key = canonical(name)
    world = check_int("world", world, lo=1, error=SpecError)
    size = check_int("size", size, lo=0, error=SpecError)
    auto = align is None
    align = VECTOR_ALIGN if auto else check_int("align", align, lo=1, error=SpecError)
    if op is not None and key not in REDUCING and normalize_op(op) not in ("copy", "add"):
        raise SpecError(f"op {op!r} does not apply to {key}: it is a copy collective (no "
                        f"reduction); leave op out")
    if root is not None and key not in ROOTED:
        raise SpecError(f"root {root!r} does not apply to {key}: only {', '.join(ROOTED)} "
                        f"have a root; leave root out")
    op = "add" if op is None else op
    root = 0 if root is None else root
    c = _from_size(key, world, size, dtype, op, root, seed, align, max_blocks)
    if auto and not any(c.output.nbytes(r) for r in range(world)):
        align = _dtype(dtype).itemsize   # below a vector a rank: whole elements
        c = _from_size(key, world, size, dtype, op, root, seed, align, max_blocks)
    if not any(c.output.nbytes(r) for r in range(world)):
        least = smallest_size(key, world, align, seed)
        rule = {"all_reduce": "", "broadcast": "", "reduce": ""}.get(
            key, f" (each rank's block is size / {world} rounded down to {align} B)"
            if "_v" not in key else f" (V splits of size, rounded down to {align} B)")
        raise SpecError(f"{key} at world {world}: size {size} B cuts into blocks of 0 B{rule}; "
                        f"the smallest size that works is {least} B")
    return c


def _from_size(key: str, world: int, size: int, dtype, op: str, root: int, seed: int,
               align: int, max_blocks: int) -> Collective:
    block = (size // world) // align * align
    if key == "all_reduce":
        return all_reduce(world, size, dtype, op)
    if key == "broadcast":
        return broadcast(world, size, dtype, root)
    if key == "reduce":
        return reduce(world, size, dtype, op, root)
    if key == "gather":
        return gather(world, block, dtype, root=root)
    if key == "scatter":
        return scatter(world, block, dtype, root=root)
    if key == "all_gather":
        return all_gather(world, block, dtype, max_blocks=max_blocks)
    if key == "reduce_scatter":
        return reduce_scatter(world, block, dtype, op, max_blocks=max_blocks)
    if key == "all_to_all":
        return all_to_all(world, block, dtype, max_blocks=max_blocks)
    _world(world, max_blocks)
    if key == "all_gather_v":
        return all_gather_v(world, v_splits(world, size, align, seed), dtype, max_blocks=max_blocks)
    if key == "reduce_scatter_v":
        return reduce_scatter_v(world, v_splits(world, size, align, seed), dtype, op,
                                max_blocks=max_blocks)
    # all_to_all_v: each rank splits its ``size`` bytes its own way
    return all_to_all_v(world, [v_splits(world, size, align, seed + r) for r in range(world)],
                        dtype, max_blocks=max_blocks)
