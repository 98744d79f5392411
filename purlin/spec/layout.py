"""Layouts: which named blocks each rank's buffer holds, in order, with sizes.

A buffer is the concatenation of its blocks; a block's offset is the sum of the sizes
before it. Names are strings so specs serialise as plain JSON.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from purlin.check import check_int, fail
from purlin.errors import LimitError, SpecError

MAX_BLOCKS = 1 << 19
"""Most blocks the layout builders make by default (``max_blocks=``): a W x W layout
holds W**2 blocks, about 120 B each, and a plan needs at least one instruction or
buffer reference per block, so past this a spec is refused before it is built."""


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
        """Build from nested lists of Blocks or (name, nbytes) pairs; a size must be a
        whole number of bytes (1024.7 is refused, not truncated)."""
        if isinstance(per_rank, (str, bytes)) or not hasattr(per_rank, "__iter__"):
            raise fail("layout", per_rank, "expected a list (one per rank) of lists of "
                       "(name, nbytes) pairs", None, SpecError)
        ranks = []
        for r, blocks in enumerate(per_rank):
            if isinstance(blocks, (str, bytes, Block)) or not hasattr(blocks, "__iter__"):
                raise fail(f"layout rank {r}", blocks, "expected a list of (name, nbytes) "
                           "pairs", None, SpecError)
            row = []
            for k, b in enumerate(blocks):
                if not isinstance(b, Block):
                    if isinstance(b, (str, bytes)) or not hasattr(b, "__len__") or len(b) != 2:
                        raise fail(f"layout rank {r}, block {k}", b, "expected a Block or a "
                                   "(name, nbytes) pair", None, SpecError)
                    b = Block(str(b[0]), check_int(f"layout rank {r}, block {str(b[0])!r}: "
                                                   "nbytes", b[1], error=SpecError))
                row.append(b)
            ranks.append(tuple(row))
        return Layout(tuple(ranks))

    @property
    def world(self) -> int:
        """Number of ranks."""
        return len(self.ranks)

    def nbytes(self, rank: int) -> int:
        """Bytes of ``rank``'s buffer (the sum of its blocks)."""
        return self._per_rank("_nbytes", rank, lambda: sum(b.nbytes for b in self.ranks[rank]))

    def _per_rank(self, name: str, rank: int, make) -> Any:
        """``make()`` for ``rank``, made once and kept under ``name``: validation and
        planning ask for every rank several times, and a rack's rank has W blocks. Kept
        outside the fields, so equality and hash ignore it."""
        cache = self.__dict__.get(name)
        if cache is None:
            cache = self.__dict__[name] = {}
        got = cache.get(rank)
        if got is None:
            got = cache[rank] = make()
        return got

    def placed(self, rank: int) -> tuple[Placed, ...]:
        """The blocks of ``rank`` with their offsets (made once per rank)."""
        def make() -> tuple[Placed, ...]:
            out, offset = [], 0
            for b in self.ranks[rank]:
                out.append(Placed(rank, b.name, offset, b.nbytes))
                offset += b.nbytes
            return tuple(out)
        return self._per_rank("_placed", rank, make)

    def all_placed(self) -> Iterable[Placed]:
        """Every placed block of every rank, rank by rank."""
        for r in range(self.world):
            yield from self.placed(r)


# ---- Purlin's vocabulary: packed, scattered, transposed (and V forms) ----------------

def packed(world: int, nbytes: int | Sequence[int], name: str = "x",
           ranks: Iterable[int] | None = None, *, max_blocks: int = MAX_BLOCKS) -> Layout:
    """One contiguous payload per rank, not split by rank; ``name`` may hold ``{r}``.

    Examples
    --------
    >>> packed(2, 16).ranks
    ((Block(name='x', nbytes=16),), (Block(name='x', nbytes=16),))
    >>> [b.name for b in packed(2, 8, name="{r}").ranks[1]]
    ['1']
    """
    _check_blocks(world, world, max_blocks)
    sizes = _per_rank(world, nbytes, "nbytes")
    holders = set(range(world) if ranks is None else
                  (check_int("ranks", r, 0, world - 1, error=SpecError) for r in ranks))
    return Layout(tuple(
        (Block(_fmt(name, r=r), sizes[r]),) if r in holders else ()
        for r in range(world)))


def scattered(world: int, nbytes: int | Sequence[int] | Sequence[Sequence[int]],
              name: str = "{s}", *, max_blocks: int = MAX_BLOCKS) -> Layout:
    """Split by rank: slice s belongs to rank s. ``nbytes`` is per slice, a list per slice
    (V form, same on every rank) or a W x W matrix (per rank, per slice). ``name`` may use
    ``{r}`` (holding rank) and ``{s}`` (slice).

    Examples
    --------
    >>> [b.name for b in scattered(3, 4).ranks[0]]
    ['0', '1', '2']
    """
    _check_blocks(world, world * world, max_blocks)
    sizes = _matrix(world, nbytes)
    return Layout(tuple(
        tuple(Block(_fmt(name, r=r, s=s), sizes[r][s]) for s in range(world))
        for r in range(world)))


def transposed(world: int, nbytes: int | Sequence[Sequence[int]],
               name: str = "{s}->{r}", *, max_blocks: int = MAX_BLOCKS) -> Layout:
    """Slice s on rank r is what rank s addressed to r. ``nbytes[s][r]`` is the size of
    the slice s sends to r (so a V form's matrix reads the same on both sides).

    Examples
    --------
    >>> [b.name for b in transposed(2, 4).ranks[1]]
    ['0->1', '1->1']
    """
    _check_blocks(world, world * world, max_blocks)
    sizes = _matrix(world, nbytes)
    return Layout(tuple(
        tuple(Block(_fmt(name, r=r, s=s), sizes[s][r]) for s in range(world))
        for r in range(world)))


def _check_blocks(world: int, blocks: int, max_blocks: int) -> None:
    """The world is a rank count, and the layout it asks for is within ``max_blocks``."""
    check_int("world", world, lo=1, error=SpecError)
    if blocks > check_int("max_blocks", max_blocks, lo=1, error=SpecError):
        raise LimitError(f"world {world}: a layout of {blocks:,} blocks (about "
                         f"{blocks * 120 / 2**30:.1f} GiB before any plan), over the limit of "
                         f"{max_blocks:,} blocks; raise it with max_blocks= (on the command line "
                         f"--max-instructions) if you mean it, or use fewer ranks")


def _fmt(name: str, **fields: int) -> str:
    """A block name from its pattern (``{r}``: holding rank, ``{s}``: slice)."""
    if not isinstance(name, str):
        raise fail("name", name, "must be a string pattern such as '{r}'", None, SpecError)
    try:
        return name.format(**fields)
    except (KeyError, IndexError, ValueError, AttributeError) as e:
        raise fail("name", name, f"is not a valid pattern ({type(e).__name__}: {e}); use "
                   f"{' and '.join('{' + k + '}' for k in fields)}", None, SpecError) from None


def _size(what: str, n) -> int:
    return check_int(what, n, lo=0, error=SpecError)


def _is_seq(x) -> bool:
    return not isinstance(x, (str, bytes)) and hasattr(x, "__len__") and hasattr(x, "__iter__")


def _per_rank(world: int, nbytes: int | Sequence[int], what: str) -> list[int]:
    if not _is_seq(nbytes):
        return [_size(what, nbytes)] * world
    sizes = [_size(f"{what}[{r}]", n) for r, n in enumerate(nbytes)]
    if len(sizes) != world:
        raise SpecError(f"{what}: {len(sizes)} sizes given for a world of {world} ranks")
    return sizes


def _matrix(world: int, nbytes) -> list[list[int]]:
    if not _is_seq(nbytes):
        n = _size("nbytes", nbytes)
        return [[n] * world for _ in range(world)]
    rows = list(nbytes)
    if rows and not _is_seq(rows[0]):
        rows = [list(rows)] * world  # one split vector shared by every rank
    if len(rows) != world or any(not _is_seq(row) or len(row) != world for row in rows):
        raise SpecError(f"split sizes: expected {world} x {world} sizes for a world of "
                        f"{world} ranks, got {len(rows)} rows")
    return [[_size(f"split sizes[{r}][{s}]", n) for s, n in enumerate(row)]
            for r, row in enumerate(rows)]
