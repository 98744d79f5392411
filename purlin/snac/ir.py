"""The Schedule IR: what every executor runs. Frozen data: nothing here executes it.

A Schedule holds, for every (rank, cta), an ordered tuple of instructions over named
per-rank buffers addressed as (rank, buffer, byte offset):

- ``input`` / ``output``: the user's buffers (sizes from the collective's layouts);
- ``staging``: symmetric scratch, ``staging_nbytes`` per half; two halves alternate
  by call parity, so offsets here are within the half of the current call;
- ``packets``: the latency-regime windows, ``packets_nbytes`` of *payload* per half
  (a 16-byte packet carries 8 data bytes and an 8-byte flag, so an executor that
  embeds flags needs twice that); also halved by call parity;
- signals: ``num_signals`` monotonic 64-bit flags per rank, never cleared.

An address is a :class:`Ref`; a Copy's or Reduce's list of them is a tuple of Refs or a
:class:`Fan` (one offset of one buffer on many ranks, equal to the tuple of its Refs).

Epochs. Call k (k = 0, 1, ...) has base ``k * epoch_stride``. ``Notify(peers, signals,
v)`` release-stores ``base + v`` into flag ``signals[i]`` of rank ``peers[i]`` for every i;
``Wait(signals, v)`` acquire-spins until each listed local flag is >= ``base + v``. One
Notify (Wait) over many flags is what the Purlin library does at a chunk's end: one
fence, then a store to every peer's signal pad (one poll of every peer's flag); a plan
of 72 ranks says it in one instruction instead of 71. ``PutPackets(..., v)`` tags every packet with
``base + v`` and ``WaitPackets(..., v)`` spins until each packet's tag == ``base + v``.
Every signal has one writing (rank, cta) per call, and its values rise in that CTA's
program order. Values are >= 1 and < ``epoch_stride``.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import MISSING, dataclass, field, fields
from itertools import repeat
from operator import attrgetter
from typing import Any, Iterator, Union

SCHEMA_VERSION = 3
BUFFERS = ("input", "output", "staging", "packets")
ATOMS = ("sm", "tma", "ce", "switch")
REDUCTIONS = ("rank", "any")
"""How a Schedule's reductions combine their sources (:attr:`Schedule.reduction`):
``rank``: every output is the spec's reduction in rank order, rounded once (bit-exact
with :func:`purlin.spec.evaluate`); executors combine a Reduce's ``srcs`` in the listed
order. ``any``: the same terms in some other order (a ring reduces along the ring and
rounds at each hop), equal to the spec up to rounding."""


def quick_init(cls: type) -> type:
    """Give a frozen, slotted dataclass an ``__init__`` that stores each field through its
    slot's descriptor. The generated one calls ``object.__setattr__`` by name per field,
    about twice the cost, and a rack's plan builds millions of Refs and instructions. Same
    parameters, defaults and ``__post_init__``; the instance stays frozen (assigning to a
    field afterwards still raises ``FrozenInstanceError``)."""
    fs = fields(cls)
    ns: dict[str, Any] = {}
    params, body = [], []
    for f in fs:
        ns[f"_set_{f.name}"] = getattr(cls, f.name).__set__
        if f.default is MISSING:
            params.append(f.name)
        else:
            ns[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        body.append(f"    _set_{f.name}(self, {f.name})")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    exec(f"def __init__(self, {', '.join(params)}):\n" + "\n".join(body), ns)
    init = ns["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init
    return cls


@dataclass(frozen=True, slots=True)
class TopologyRef:
    """Which topology a Schedule was planned for.

    ``name`` and ``digest`` (:func:`purlin.topology.identity.digest`, a hash of its
    content) identify it; ``world`` is its rank count; ``inline`` holds the topology
    itself (canonical JSON of :func:`purlin.topology.identity.to_dict`) when it is not a
    shipped file unchanged, and is None for a shipped one, found again by name."""

    name: str
    digest: str
    world: int
    inline: str | None = None


@quick_init
@dataclass(frozen=True, slots=True)
class Ref:
    """A byte address: ``offset`` bytes into ``buffer`` of ``rank``."""

    rank: int
    buffer: str
    offset: int

    def __add__(self, nbytes: int) -> "Ref":
        return Ref(self.rank, self.buffer, self.offset + nbytes)

    def __str__(self) -> str:
        return f"{self.buffer}[{self.rank}]+{self.offset}"


REF_RANK, REF_BUFFER, REF_OFFSET = attrgetter("rank"), attrgetter("buffer"), attrgetter("offset")
"""A Ref's fields as functions, for C-level maps over a rack's ~W Refs of one instruction."""


@dataclass(frozen=True, slots=True, eq=False)
class Fan(Sequence):
    """The same ``offset`` of ``buffer`` on each of ``ranks``, in that order: a sequence of
    Refs (``Fan(ranks, b, o)[i] == Ref(ranks[i], b, o)``) held as three fields. It is what
    one multicast address names, and what a rack's broadcast stores to or its switch
    reduction reads: 576 ranks x 22 chunks x 576 blocks were 14.6 M Refs to build, verify
    and hold. Equal to (and hashed as) the tuple of its Refs, so an instruction holding
    one is the instruction holding that tuple; :func:`ref_ranks` and its siblings read
    the fields without making a Ref per rank.

    >>> f = Fan((2, 0, 1), "output", 64)
    >>> f[0], len(f), f == (Ref(2, "output", 64), Ref(0, "output", 64), Ref(1, "output", 64))
    (Ref(rank=2, buffer='output', offset=64), 3, True)
    """

    ranks: tuple[int, ...]
    buffer: str
    offset: int

    def __post_init__(self) -> None:
        if type(self.ranks) is not tuple:   # a list or range given: held as the tuple
            object.__setattr__(self, "ranks", tuple(self.ranks))

    def __len__(self) -> int:
        return len(self.ranks)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return Fan(self.ranks[i], self.buffer, self.offset)
        return Ref(self.ranks[i], self.buffer, self.offset)

    def __iter__(self) -> Iterator[Ref]:
        return map(Ref, self.ranks, repeat(self.buffer), repeat(self.offset))

    def __eq__(self, other) -> bool:
        if type(other) is Fan:
            return (self.offset == other.offset and self.buffer == other.buffer
                    and self.ranks == other.ranks) or (not self.ranks and not other.ranks)
        if isinstance(other, tuple):
            return tuple(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __add__(self, other) -> tuple[Ref, ...]:
        return tuple(self) + tuple(other)

    def __radd__(self, other) -> tuple[Ref, ...]:
        return tuple(other) + tuple(self)

    def __str__(self) -> str:
        return f"{self.buffer}[{','.join(map(str, self.ranks))}]+{self.offset}"


Refs = Union[tuple[Ref, ...], Fan]
"""What an instruction's ``srcs`` and ``dsts`` hold: a tuple of Refs, or a Fan."""


def ref_ranks(refs: Refs):
    """The ranks of ``refs`` in order (a Fan's own tuple, no Ref made)."""
    return refs.ranks if type(refs) is Fan else map(REF_RANK, refs)


def ref_buffer_set(refs: Refs) -> set[str]:
    """The buffers ``refs`` name (a Fan's one buffer, with no Ref made)."""
    if type(refs) is Fan:
        return {refs.buffer} if refs.ranks else set()
    return set(map(REF_BUFFER, refs))


def ref_offsets(refs: Refs):
    """The offsets of ``refs`` in order."""
    return repeat(refs.offset, len(refs.ranks)) if type(refs) is Fan else map(REF_OFFSET, refs)


@quick_init
@dataclass(frozen=True, slots=True)
class Copy:
    """Read ``nbytes`` once from ``src`` and store them to every Ref in ``dsts`` with the
    Atom ``atom``. Any side may be a peer's buffer (NVLink loads or stores by the issuing
    CTA); several ``dsts`` are a broadcast-store (one read, many writes)."""

    src: Ref
    dsts: Refs
    nbytes: int
    atom: str = "sm"


@quick_init
@dataclass(frozen=True, slots=True)
class Reduce:
    """``op(srcs[0], srcs[1], ...)`` over ``nbytes`` of ``dtype``, read in the given order,
    accumulated in fp32 (int32 for int32), rounded once and stored to every Ref in
    ``dsts``. Sources in rank order make the result deterministic."""

    srcs: Refs
    dsts: Refs
    nbytes: int
    dtype: str
    op: str
    atom: str = "sm"


@quick_init
@dataclass(frozen=True, slots=True)
class Notify:
    """One release fence, then ``base + value`` stored into signal ``signals[i]`` of rank
    ``peers[i]`` (may be self) for every i, in any order. ``Notify(peer, signal, value)``
    with two integers is a Notify of one flag. Executors that time Notifies charge a run
    of them by the flags it stores, whether one instruction or many name them."""

    peers: tuple[int, ...]
    signals: tuple[int, ...]
    value: int

    def __post_init__(self) -> None:
        _one_or_many(self, "peers")
        _one_or_many(self, "signals")


@quick_init
@dataclass(frozen=True, slots=True)
class Wait:
    """Acquire-spin until each of the issuing rank's signals ``signals`` (in that order)
    is >= ``base + value``. ``Wait(signal, value)`` with an integer waits on one flag."""

    signals: tuple[int, ...]
    value: int

    def __post_init__(self) -> None:
        _one_or_many(self, "signals")


def _one_or_many(ins: Any, name: str) -> None:
    """An integer field of a signal instruction is the tuple of that one integer."""
    v = getattr(ins, name)
    if type(v) is not tuple:
        object.__setattr__(ins, name, (v,) if isinstance(v, int) and not isinstance(v, bool)
                           else tuple(v) if isinstance(v, list) else v)


@quick_init
@dataclass(frozen=True, slots=True)
class PutPackets:
    """Latency regime: stage and notify in one store. Push ``nbytes`` from ``src`` into the
    packet window ``dst`` (a ``packets`` Ref, usually on a peer), each 8 data bytes tagged
    with ``base + value``."""

    src: Ref
    dst: Ref
    nbytes: int
    value: int


@quick_init
@dataclass(frozen=True, slots=True)
class WaitPackets:
    """Spin until every packet of the local window ``src`` (``nbytes`` of payload) carries
    tag ``base + value``; the following instruction then reads the payload."""

    src: Ref
    nbytes: int
    value: int


Instruction = Union[Copy, Reduce, Notify, Wait, PutPackets, WaitPackets]
INSTRUCTIONS: tuple[type, ...] = (Copy, Reduce, Notify, Wait, PutPackets, WaitPackets)


@quick_init
@dataclass(frozen=True, slots=True)
class Program:
    """The instruction list of one CTA of one rank. ``role`` is a label for reports
    (put, consume, reduce, tail, local, relay...)."""

    rank: int
    cta: int
    role: str
    instrs: tuple[Instruction, ...]


@dataclass(frozen=True)
class Schedule:
    """A whole plan: programs for every (rank, cta) plus the buffer sizes they need.

    Attributes
    ----------
    collective : purlin.spec.Collective
        The spec it implements.
    programs : tuple of Program
        One per (rank, cta) that has work, sorted by (rank, cta).
    staging_nbytes, packets_nbytes : int
        Bytes of one half of each rank's staging buffer and of its packet window payload.
    num_signals, epoch_stride : int
        Signals per rank; the per-call epoch step (every value is below it).
    topology : TopologyRef or None
        The topology it was planned for (None: built by hand for no topology; an
        executor then needs one given explicitly).
    reduction : str
        How reductions order their sources, one of :data:`REDUCTIONS`; the verifier
        checks the outputs against it.
    policy : dict
        The knobs that produced it, for reports only: no executor reads it.

    Schedules are immutable and hash by content (:meth:`digest`); :meth:`to_json` /
    :meth:`from_json` and :meth:`save` / :meth:`load` are their file form.
    """

    collective: Any
    programs: tuple[Program, ...]
    staging_nbytes: int
    packets_nbytes: int
    num_signals: int
    epoch_stride: int
    topology: TopologyRef | None = None
    reduction: str = "rank"
    policy: dict = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    def __hash__(self) -> int:
        from purlin.snac.serialize import digest
        return hash(digest(self))

    @property
    def world(self) -> int:
        """Ranks of the collective it implements."""
        return self.collective.world

    def ctas(self, rank: int) -> tuple[Program, ...]:
        """The programs of ``rank``, one per CTA that has work, in CTA order."""
        return tuple(p for p in self.programs if p.rank == rank)

    def max_ctas(self) -> int:
        """The most CTAs any one rank runs (what a launch must make co-resident)."""
        return max((sum(1 for p in self.programs if p.rank == r) for r in range(self.world)),
                   default=0)

    def to_json(self, indent: int | None = None) -> str:
        """Canonical JSON: sorted keys, compact unless ``indent``; the same schedule gives
        the same text (:func:`purlin.snac.serialize.to_json`)."""
        from purlin.snac.serialize import to_json
        return to_json(self, indent)

    @classmethod
    def from_json(cls, text: str) -> "Schedule":
        """The Schedule in ``text`` (from :meth:`to_json`).

        Raises
        ------
        ScheduleError
            If ``text`` is not JSON, or not a schedule of this schema version (naming
            the field).
        """
        from purlin.snac.serialize import from_json
        return from_json(text)

    def save(self, path: Any) -> Any:
        """Write :meth:`to_json` to ``path`` (a file name or Path); returns the Path.

        Examples
        --------
        >>> import tempfile, pathlib
        >>> from purlin.snac import plan
        >>> from purlin.spec import library
        >>> s = plan(library.all_gather(2, 64))
        >>> path = s.save(pathlib.Path(tempfile.mkdtemp()) / "ag.json")
        >>> Schedule.load(path) == s and Schedule.load(path).digest() == s.digest()
        True
        """
        from pathlib import Path
        path = Path(path)
        path.write_text(self.to_json() + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: Any) -> "Schedule":
        """The Schedule :meth:`save` wrote to ``path``.

        Raises
        ------
        ScheduleError
            If the file cannot be read or does not hold a schedule (naming the path).
        """
        from pathlib import Path

        from purlin.errors import ScheduleError
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise ScheduleError(f"{path}: cannot read a schedule ({e.strerror or e})") from None
        try:
            return cls.from_json(text)
        except ScheduleError as e:
            raise ScheduleError(f"{path}: {e}") from None

    def digest(self, programs_only: bool = False) -> str:
        """A stable 16-hex-digit hash of everything the schedule says (what plans and
        compiled kernels are cached under), or with ``programs_only`` of its programs
        alone (two plans with the same programs run the same instructions, whatever
        their policy or topology label).

        Examples
        --------
        >>> from purlin.snac import plan
        >>> from purlin.spec import library
        >>> a = plan(library.all_reduce(2, 64, "fp32"))
        >>> b = plan(library.all_reduce(2, 64, "fp32"))
        >>> a.digest() == b.digest() and len(a.digest()) == 16
        True
        """
        from purlin.snac import serialize
        return serialize.programs_digest(self) if programs_only else serialize.digest(self)

    def buffer_nbytes(self, rank: int, buffer: str) -> int:
        """Addressable bytes of ``buffer`` on ``rank`` (staging/packets: one half)."""
        if buffer == "input":
            return self.collective.input.nbytes(rank)
        if buffer == "output":
            return self.collective.output.nbytes(rank)
        if buffer == "staging":
            return self.staging_nbytes
        if buffer == "packets":
            return self.packets_nbytes
        raise KeyError(buffer)

    def instructions(self) -> Iterator[tuple[Program, int, Instruction]]:
        """Every (program, index, instruction), programs in order."""
        for prog in self.programs:
            for i, ins in enumerate(prog.instrs):
                yield prog, i, ins


def sources(ins: Instruction) -> tuple[Ref, ...]:
    """The Refs an instruction reads: a Reduce's ``srcs``, the ``src`` of a Copy,
    PutPackets or WaitPackets; none for signals."""
    if isinstance(ins, Reduce):
        return ins.srcs
    return (ins.src,) if isinstance(ins, (Copy, PutPackets, WaitPackets)) else ()


def fused_read(instrs: tuple[Instruction, ...] | list, i: int) -> bool:
    """Whether WaitPackets ``i`` of a program is fused into the read after it: the first
    non-WaitPackets instruction that follows reads (as packet sources) every byte it
    waits for, so that read can check the tags itself and start before the bytes are all
    there. Executors agree on this rule (the GPU one turns such a wait into a NOP)."""
    wait = instrs[i]
    j = i + 1
    while j < len(instrs) and isinstance(instrs[j], WaitPackets):
        j += 1
    if j == len(instrs) or not isinstance(instrs[j], (Copy, Reduce)):
        return False
    nxt = instrs[j]
    srcs = sources(nxt)
    lo, hi = wait.src.offset, wait.src.offset + wait.nbytes
    spans = sorted((r.offset, r.offset + nxt.nbytes) for r in srcs
                   if r.buffer == "packets" and r.rank == wait.src.rank)
    pos = lo
    for a, b in spans:
        if a > pos:
            break
        pos = max(pos, b)
        if pos >= hi:
            return True
    return pos >= hi
