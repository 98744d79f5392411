"""How big a plan will be, known before it is built, and the limits it must stay within.

Planning is pure Python: about 50 us and 300 B per instruction on a laptop core, so a
request for a petabyte AllReduce or 100000 ranks would run for hours and then be killed
for memory. :func:`plan` refuses such a request at once instead: it counts what the
dataflow builders would emit (chunks x groups x holders and sources, per regime, plus
the Notify/Wait pairs that cross ranks) and compares that with ``max_instructions``
and ``max_memory_nbytes``, which the caller may raise.

The count is an estimate, within a factor of two or three of the plan it describes
(``tests/snac/test_limits.py`` checks it against real plans across regimes). A Notify or
Wait counts once per flag it names: verifying and simulating a plan costs per flag,
however many flags one instruction carries.

Examples
--------
>>> from purlin.spec import library
>>> from purlin.snac.policy import Policy
>>> e = estimate(library.all_gather(4, 1 << 20), Policy(regime="throughput", algorithm="one_shot",
...              chunk_nbytes=1 << 18, put_ctas=1, consumer_ctas=1), cta_budget=2)
>>> e.instructions > 0 and e.memory_nbytes > 0
True
"""
from __future__ import annotations

from dataclasses import dataclass

from purlin.check import check_limit, human_bytes
from purlin.errors import LimitError
from purlin.snac import dataflow as df
from purlin.snac.policy import MIN_CHUNK, Policy
from purlin.spec.collective import Collective

DEFAULT_MAX_INSTRUCTIONS = 1 << 21
"""2,097,152 instructions: a few minutes to plan and under 1 GiB; the largest plan the
shipped tests and benchmarks make (a 72-rank AllReduce at 1 GiB) has about 500,000."""
DEFAULT_MAX_MEMORY_NBYTES = 4 << 30
"""4 GiB for the plan's objects while it is built."""
BYTES_PER_INSTRUCTION = 320
"""Peak planning memory per instruction (tracemalloc over plans of 1,000 to 260,000
instructions: 105 to 350 B, plus the builder's intermediate ops)."""
BYTES_PER_REF = 64
"""A buffer reference (a Ref in a Copy or Reduce) beyond the instruction itself."""


def max_blocks_for(max_instructions: int) -> int:
    """The spec-size limit that goes with an instruction limit (a plan needs an instruction
    or a reference per block): the layout default, or a quarter of ``max_instructions``
    if that is more. What the CLI passes to the library when ``--max-instructions`` is raised."""
    from purlin.spec.layout import MAX_BLOCKS
    return max(MAX_BLOCKS, max_instructions // 4)


@dataclass(frozen=True)
class PlanEstimate:
    """What a plan will hold: ``instructions`` over all programs, and ``refs``, the buffer
    references in its Copy and Reduce instructions (a Reduce of W sources holds W)."""

    instructions: int
    refs: int

    @property
    def memory_nbytes(self) -> int:
        """Bytes the Python objects of such a plan take while it is built (the estimate
        the memory limit is held against)."""
        return self.instructions * BYTES_PER_INSTRUCTION + self.refs * BYTES_PER_REF


def check_plan_size(est: PlanEstimate, max_instructions: int, max_memory_nbytes: int,
                    what: str) -> None:
    """Raise LimitError if ``est`` is over either limit, saying the estimate, the limit
    and how to raise it."""
    check_limit(what, est.instructions, max_instructions, "instructions",
                "max_instructions= (on the command line --max-instructions)",
                f" (~{human_bytes(est.memory_nbytes)} to build)")
    if est.memory_nbytes > max_memory_nbytes:
        raise LimitError(f"{what}: about {human_bytes(est.memory_nbytes)} of plan memory "
                         f"({est.instructions:,} instructions holding {est.refs:,} buffer "
                         f"references), over the limit of {human_bytes(max_memory_nbytes)}; "
                         f"raise it with max_memory_nbytes= (on the command line --max-memory) "
                         f"if you mean it")


def lower_bound(c: Collective, align: int = 16,
                groups: list[df.Group] | None = None) -> PlanEstimate:
    """The least any plan of ``c`` holds, whatever the policy: every holder of a copy
    block is written by some instruction, and a reduction reads each source once for
    every piece the holders split it into. Cheap (one pass over the blocks), so
    :func:`plan` runs it before looking at the topology. ``groups``: ``df.groups(c)``
    when the caller has it already."""
    instrs = refs = 0
    for g in df.groups(c) if groups is None else groups:
        if c.is_reduce:
            pieces = min(len(g.holders), max(1, g.nbytes // align))
            instrs += pieces
            refs += pieces * (len(g.sources) + 1)
        else:
            instrs += 1
            refs += 1 + len(g.holders)
    return PlanEstimate(instrs, refs)


def library_lower_bound(name: str, world: int, size: int, align: int = 16) -> PlanEstimate:
    """:func:`lower_bound` of a library collective from its name, world and nccl-tests
    ``size`` alone, without building its spec: what the CLI checks first, so a request
    for 100000 ranks is refused before 100000 blocks exist.

    Examples
    --------
    >>> library_lower_bound("all_to_all", 8, 1024)
    PlanEstimate(instructions=8, refs=128)
    """
    from purlin.spec.library import canonical
    key, w = canonical(name), max(1, int(world))
    # a bound for every policy, loopback ones included (whose direct plans deal many
    # small copies into few instructions): references, one per block a holder receives
    if key == "all_reduce":
        pieces = min(w, max(1, size // align))
        return PlanEstimate(pieces, pieces * (w + 1))
    if key in ("reduce_scatter", "all_gather"):
        return PlanEstimate(w, w * (w + 1))
    if key == "all_to_all":
        return PlanEstimate(w, 2 * w * w)
    if key in ("gather", "scatter"):
        return PlanEstimate(1, 2 * w)
    return PlanEstimate(1, w + 1)   # broadcast, reduce; V forms (their splits may be 0 B)


def estimate(c: Collective, pol: Policy, cta_budget: int, spread: bool = False,
             groups: list[df.Group] | None = None) -> PlanEstimate:
    """The size of the plan of ``c`` under the resolved policy ``pol`` (no ``auto``
    fields): data instructions per regime as the builders in :mod:`purlin.snac.dataflow`
    emit them, plus a Notify and a Wait for every reference to another rank's buffer, and
    the start and end handshakes. ``spread``: the direct regime deals work over every
    CTA of every rank (a loopback topology). ``groups``: ``df.groups(c)`` if at hand."""
    groups = df.groups(c) if groups is None else groups
    chunk, w = pol.chunk_nbytes, c.world
    data = refs = remote = items_total = 0
    home = [0] * w   # direct regime: data instructions on each rank (they issue its touches)
    for g in groups:
        d, r, x, items = (_reduce_group if c.is_reduce else _copy_group)(g, pol, chunk, w)
        data, refs, remote, items_total = data + d, refs + r, remote + x, items_total + items
        if pol.regime == "direct":
            owners = [g.sources[0].rank] if not c.is_reduce else [h.rank for h in g.holders]
            for o in owners:
                home[o] += -(-d // len(owners))
    budget = min(cta_budget, pol.put_ctas + pol.consumer_ctas)
    if pol.algorithm == "ring":   # a relay waits for its upstream and notifies on
        return PlanEstimate(data + 3 * remote + 2 * w, refs)
    if pol.regime != "direct":    # a Notify and a Wait per reference to another rank
        return PlanEstimate(data + 2 * remote + 2 * w, refs)
    if spread and items_total:
        workers = w * budget
        total = _direct_total(c, pol, groups)
        runs = max(1, -(-total // chunk), min(workers, total // max(1, min(chunk, MIN_CHUNK))))
        if runs > workers:
            runs = -(-runs // workers) * workers
        grow = (runs + items_total) / items_total
        data, refs, remote = int(data * grow), int(refs * grow), int(remote * grow)
        home = [-(-(runs + items_total) // w)] * w
    # Direct ops touch peers' user buffers: a start handshake and an end fence for every
    # (CTA, peer) pair that touches, not for every reference; a gated start (a gathered
    # fence) sends one flag per rank pair and one local flag per working CTA instead.
    active = sum(min(budget, n) for n in home)
    touch = min(remote, active * (w - 1))
    per_rank = 2 * w * (w - 1) + 2 * active
    shake = sum(per_rank if how in ("gate", "gather") else 3 * touch // 2 for how in (pol.start, pol.fence))
    return PlanEstimate(data + shake + 2 * w, refs)


def _chunks(n: int, chunk: int) -> int:
    return -(-n // chunk)


def _copy_group(g: df.Group, pol: Policy, chunk: int, w: int) -> tuple[int, int, int, int]:
    k = _chunks(g.nbytes, chunk)
    src = g.sources[0].rank
    local = sum(1 for h in g.holders if h.rank == src)
    rem = len(g.holders) - local
    if pol.algorithm == "ring":
        return k * w, 2 * k * w, k * w, k
    if pol.regime == "direct":
        return k, k * (1 + len(g.holders)), k * rem, k
    if pol.regime == "latency":
        d = k * (local + 2 * rem)
        return d, 2 * d, k * rem, k
    if rem == 0:
        return k, 2 * k, 0, k
    return k * (1 + rem), k * (2 + local) + 2 * k * rem, k * rem, k


def _reduce_group(g: df.Group, pol: Policy, chunk: int, w: int) -> tuple[int, int, int, int]:
    s, h = len(g.sources), len(g.holders)
    two = pol.algorithm in ("two_shot", "ring") and h > 1
    if two:
        pieces = min(h, max(1, g.nbytes // pol.align))
        items = pieces * _chunks(-(-g.nbytes // pieces), chunk)
    else:
        items = h * _chunks(g.nbytes, chunk)
    tails = items * (h - 1) if two else 0
    if pol.algorithm == "ring":
        d = items * 2 * w
        return d, 2 * d + items, d, items
    if pol.regime == "direct":
        dsts = h if two else 1
        return items, items * (s + dsts), items * (s - 1 + dsts - 1), items
    if pol.regime == "latency":
        pushes = (s - 1) * items
        return pushes + items + 2 * tails, 2 * pushes + items * (s + 1) + 4 * tails, \
            pushes + tails, items
    stages = (s - 1) * (items if two else _chunks(g.nbytes, chunk))
    return stages + items + tails, 2 * stages + items * (s + 2) + 2 * tails, \
        items * (s - 1) + tails, items


def _direct_total(c: Collective, pol: Policy, groups: list[df.Group]) -> int:
    """Bytes of the items the direct builder deals out (what ``_deal`` cuts into runs)."""
    total = 0
    for g in groups:
        if c.is_reduce:
            total += g.nbytes * (1 if pol.algorithm == "two_shot" else len(g.holders))
        else:
            total += g.nbytes
    return total
