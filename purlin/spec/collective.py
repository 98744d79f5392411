"""A collective = (input layout, output layout, op, dtype), and the rules it must keep.

``validate`` is the boundary: every planner and executor may assume a spec that passed
it. Each broken rule raises :class:`SpecError` naming rank, block and rule.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Iterable

from purlin.errors import SpecError
from purlin.spec.dtypes import REDUCE_OPS, DType, dtype as _dtype
from purlin.spec.layout import Layout, Placed

OPS = ("copy",) + REDUCE_OPS
_OP_ALIASES = {"sum": "add", "prod": "mul", "reduce": "add", "gather": "copy"}


def normalize_op(op: str) -> str:
    """The op's canonical name: ``sum`` -> ``add``, ``reduce(max)`` -> ``max``, ``gather``
    -> ``copy`` (an unknown name is kept, and :func:`validate` names it).

    Examples
    --------
    >>> normalize_op("SUM"), normalize_op("reduce(max)")
    ('add', 'max')
    """
    if not isinstance(op, str):
        raise SpecError(f"op {op!r}: must be a string, one of {', '.join(OPS)}")
    op = op.lower()
    if op.startswith("reduce(") and op.endswith(")"):
        op = op[7:-1]
    return _OP_ALIASES.get(op, op)


@dataclass(frozen=True)
class Collective:
    """What a collective means. ``op`` is ``copy`` or a reduction (add, max, min, mul).

    Examples
    --------
    >>> from purlin.spec.layout import packed
    >>> c = Collective("allgather", packed(2, 16, name="{r}"), Layout.of([[("0", 16), ("1", 16)]] * 2))
    >>> c.validate().is_reduce
    False
    """

    name: str
    input: Layout
    output: Layout
    op: str = "copy"
    dtype: DType | str = "fp32"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise SpecError(f"Collective name {self.name!r}: must be a non-empty string")
        for side in ("input", "output"):
            if not isinstance(getattr(self, side), Layout):
                raise SpecError(f"{self.name}: {side} {getattr(self, side)!r:.60}: expected a "
                                f"Layout (build one with Layout.of, packed, scattered or "
                                f"transposed), got {type(getattr(self, side)).__name__}")
        object.__setattr__(self, "op", normalize_op(self.op))
        object.__setattr__(self, "dtype", _dtype(self.dtype))

    @property
    def world(self) -> int:
        """Number of ranks."""
        return self.input.world

    @property
    def is_reduce(self) -> bool:
        """Whether outputs reduce their sources (any op but ``copy``)."""
        return self.op != "copy"

    def sources(self) -> dict[str, tuple[Placed, ...]]:
        """Every input block by name, in rank order (the reduction order); each call gets
        its own dict."""
        return dict(self._sources)

    @cached_property
    def _sources(self) -> dict[str, tuple[Placed, ...]]:
        """Found once per collective (validation, planning and verifying each ask; at rack
        scale a pass costs a second). Not a field: equality and hash ignore it."""
        found: dict[str, list[Placed]] = {}
        for p in self.input.all_placed():
            v = found.get(p.name)
            if v is None:
                found[p.name] = [p]
            else:
                v.append(p)
        return {k: tuple(v) for k, v in found.items()}

    def validate(self, align: int | None = None) -> "Collective":
        """Check every rule; return self so calls chain. Any whole number of elements at
        any element offset is valid; ``align`` (bytes) adds the rule that every offset and
        size is a multiple of it, for an executor that moves only whole vectors."""
        validate(self, align)
        return self


def validate(c: Collective, align: int | None = None) -> None:
    """Raise SpecError for the first broken rule, naming rank, block and rule."""
    dt: DType = c.dtype  # type: ignore[assignment]
    if c.op not in OPS:
        raise SpecError(f"{c.name}: op {c.op!r} is unknown (rule: op is one of {', '.join(OPS)})")
    if c.is_reduce and dt.accumulator is None:
        raise SpecError(f"{c.name}: op {c.op!r} is not supported for dtype {dt.name} "
                        f"(rule: {dt.name} is copy-only)")
    if c.input.world != c.output.world:
        raise SpecError(f"{c.name}: world size mismatch: input layout has {c.input.world} "
                        f"ranks, output layout has {c.output.world}")
    if c.world < 1:
        raise SpecError(f"{c.name}: world size must be at least 1, got {c.world}")
    if align is not None and (align < 1 or align % dt.itemsize):
        raise SpecError(f"{c.name}: alignment {align} B is not a multiple of the {dt.name} "
                        f"element size {dt.itemsize} B")
    for side, layout in (("input", c.input), ("output", c.output)):
        for r in range(layout.world):
            _check_blocks(c, side, layout.placed(r), dt, align)
    _check_sources(c)


def _check_blocks(c: Collective, side: str, placed: tuple[Placed, ...], dt: DType,
                  align: int | None) -> None:
    """One rank's blocks of one side: named once each, whole elements, aligned. The
    common case (every block fine) costs a few comparisons per block; the message is
    built only for a broken rule."""
    seen: set[str] = set()
    item = dt.itemsize
    for p in placed:
        n = p.nbytes
        if (p.name and p.name not in seen and type(n) is int and n >= 0 and not n % item
                and (align is None or not n or not (p.offset % align or n % align))):
            seen.add(p.name)
            continue
        where = f"{c.name}: {side} rank {p.rank}, block {p.name!r}"
        if not p.name:
            raise SpecError(f"{where}: empty block name (rule: blocks are named)")
        if p.name in seen:
            raise SpecError(f"{where}: named twice on one rank (rule: a name appears "
                            f"once per rank and buffer)")
        seen.add(p.name)
        if not isinstance(p.nbytes, int) or p.nbytes < 0:
            raise SpecError(f"{where}: size {p.nbytes!r} must be a non-negative int")
        if p.nbytes % dt.itemsize:
            raise SpecError(f"{where}: size {p.nbytes} B is not a whole number of "
                            f"{dt.name} elements ({dt.itemsize} B)")
        if align is not None and p.nbytes and (p.offset % align or p.nbytes % align):
            raise SpecError(f"{where}: offset {p.offset} / size {p.nbytes} B not "
                            f"aligned to {align} B (rule: the Atom moves {align}-byte "
                            f"vectors)")


def _check_sources(c: Collective) -> None:
    """Every output block has its input source(s), one for a copy, of its size."""
    sources = c.sources()
    # one size per name when its sources agree (checked once per name, not per holder)
    uniform = {k: v[0].nbytes for k, v in sources.items() if all(s.nbytes == v[0].nbytes for s in v)}
    copy = not c.is_reduce
    for q in range(c.world):
        for p in c.output.placed(q):
            srcs = sources.get(p.name)
            if srcs and (len(srcs) == 1 or not copy) and uniform.get(p.name) == p.nbytes:
                continue   # the common case, without building a message
            where = f"{c.name}: output rank {q}, block {p.name!r}"
            if not srcs:
                raise SpecError(f"{where}: no input block named {p.name!r} on any rank "
                                f"(rule: every output block needs a source)")
            if not c.is_reduce and len(srcs) > 1:
                ranks = ", ".join(str(s.rank) for s in srcs)
                raise SpecError(f"{where}: copy block has {len(srcs)} sources (ranks {ranks}) "
                                f"(rule: a copy output has exactly one source)")
            if uniform.get(p.name) == p.nbytes:
                continue
            for s in srcs:
                if s.nbytes != p.nbytes:
                    raise SpecError(f"{where}: size {p.nbytes} B disagrees with input rank "
                                    f"{s.rank}'s block of {s.nbytes} B (rule: sizes match)")


def output_sources(c: Collective) -> Iterable[tuple[Placed, tuple[Placed, ...]]]:
    """(output block, its input sources in rank order) for every output block."""
    sources = c.sources()
    for q in range(c.world):
        for p in c.output.placed(q):
            yield p, sources[p.name]
