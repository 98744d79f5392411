"""Layouts: which named blocks each rank's buffer holds, in order, with sizes.

A buffer is the concatenation of its blocks; a block's offset is the sum of the sizes
before it. Names are strings so specs serialise as plain JSON.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from purlin.errors import SpecError


@dataclass(frozen=True, slots=True)
class Block:
    """A named, contiguous piece of one rank's buffer. ``nbytes`` may be zero (V forms)."""

    name: str
    nbytes: int


@dataclass(frozen=True, slots=True)
class Placed:
    """A block at its byte offset in one rank's buffer."""

    rank: int
    name: str
    offset: int
    nbytes: int


@dataclass(frozen=True)
class Layout:
    """Blocks per rank: ``ranks[r]`` is the ordered tuple of blocks on rank r."""

    ranks: tuple[tuple[Block, ...], ...]

    @staticmethod
    def of(per_rank: Iterable[Iterable[Block | tuple[str, int]]]) -> "Layout":
        """Build from nested lists of Blocks or (name, nbytes) pairs."""
        return Layout(tuple(
            tuple(b if isinstance(b, Block) else Block(str(b[0]), int(b[1])) for b in blocks)
            for blocks in per_rank))

    @property
    def world(self) -> int:
        """Number of ranks."""
        return len(self.ranks)

    def nbytes(self, rank: int) -> int:
        """Bytes of ``rank``'s buffer (the sum of its blocks)."""
        return sum(b.nbytes for b in self.ranks[rank])

    def placed(self, rank: int) -> tuple[Placed, ...]:
        """The blocks of ``rank`` with their offsets."""
        out, offset = [], 0
        for b in self.ranks[rank]:
            out.append(Placed(rank, b.name, offset, b.nbytes))
            offset += b.nbytes
        return tuple(out)

    def all_placed(self) -> Iterable[Placed]:
        """Every placed block of every rank, rank by rank."""
        for r in range(self.world):
            yield from self.placed(r)


# ---- Purlin's vocabulary: packed, scattered, transposed (and V forms) ----------------

def packed(world: int, nbytes: int | Sequence[int], name: str = "x",
           ranks: Iterable[int] | None = None) -> Layout:
    """One contiguous payload per rank, not split by rank; ``name`` may hold ``{r}``.

    Examples
    --------
    >>> packed(2, 16).ranks
    ((Block(name='x', nbytes=16),), (Block(name='x', nbytes=16),))
    >>> [b.name for b in packed(2, 8, name="{r}").ranks[1]]
    ['1']
    """
    sizes = _per_rank(world, nbytes, "nbytes")
    holders = set(range(world) if ranks is None else ranks)
    return Layout(tuple(
        (Block(name.format(r=r), sizes[r]),) if r in holders else ()
        for r in range(world)))


def scattered(world: int, nbytes: int | Sequence[int] | Sequence[Sequence[int]],
              name: str = "{s}") -> Layout:
    """Split by rank: slice s belongs to rank s. ``nbytes`` is per slice, a list per slice
    (V form, same on every rank) or a W x W matrix (per rank, per slice). ``name`` may use
    ``{r}`` (holding rank) and ``{s}`` (slice).

    Examples
    --------
    >>> [b.name for b in scattered(3, 4).ranks[0]]
    ['0', '1', '2']
    """
    sizes = _matrix(world, nbytes)
    return Layout(tuple(
        tuple(Block(name.format(r=r, s=s), sizes[r][s]) for s in range(world))
        for r in range(world)))


def transposed(world: int, nbytes: int | Sequence[Sequence[int]],
               name: str = "{s}->{r}") -> Layout:
    """Slice s on rank r is what rank s addressed to r. ``nbytes[s][r]`` is the size of
    the slice s sends to r (so a V form's matrix reads the same on both sides).

    Examples
    --------
    >>> [b.name for b in transposed(2, 4).ranks[1]]
    ['0->1', '1->1']
    """
    sizes = _matrix(world, nbytes)
    return Layout(tuple(
        tuple(Block(name.format(r=r, s=s), sizes[s][r]) for s in range(world))
        for r in range(world)))


def _per_rank(world: int, nbytes: int | Sequence[int], what: str) -> list[int]:
    if isinstance(nbytes, int):
        return [nbytes] * world
    sizes = [int(n) for n in nbytes]
    if len(sizes) != world:
        raise SpecError(f"{what}: {len(sizes)} sizes given for a world of {world} ranks")
    return sizes


def _matrix(world: int, nbytes) -> list[list[int]]:
    if isinstance(nbytes, int):
        return [[nbytes] * world for _ in range(world)]
    rows = list(nbytes)
    if rows and not isinstance(rows[0], (list, tuple)) and not hasattr(rows[0], "__len__"):
        rows = [list(rows)] * world  # one split vector shared by every rank
    if len(rows) != world or any(len(row) != world for row in rows):
        raise SpecError(f"split sizes: expected {world} x {world} sizes for a world of "
                        f"{world} ranks, got {len(rows)} rows")
    return [[int(n) for n in row] for row in rows]
