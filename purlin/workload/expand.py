"""A step config -> the collectives the step issues, each a library spec on its group.

Per layer (Megatron-style tensor parallelism, MoE expert parallelism):

- attention, when ``tp > 1``: an all-reduce of the partial outputs over the tensor-parallel
  group, or with sequence parallelism an all-gather of the tokens before it and a
  reduce-scatter after it;
- a dense MLP (and an MoE MLP whose experts are split by tensor parallelism, ``ep == 1``):
  the same again;
- an MoE MLP with ``ep > 1``: the dispatch (each rank sends each token to the ranks of its
  top-k experts) and the combine (the results come back), each an AllToAllV over the
  expert-parallel group whose V splits come from the routing; with ``tp > 1`` every
  tensor-parallel rank dispatches its own share of the tokens (sequence parallelism), and
  the next layer's all-gather brings them together again.

Embedding and output-layer collectives, pipeline parallelism and overlap with compute are
not modelled.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from purlin.check import check_instance, check_int
from purlin.errors import LimitError, SpecError
from purlin.spec import library
from purlin.spec.collective import Collective
from purlin.workload.config import StepConfig
from purlin.workload.groups import tile
from purlin.workload.routing import Routing, dispatch_counts, draw_routing

KINDS = ("all_reduce", "reduce_scatter", "all_gather", "dispatch", "combine")
"""Collective kinds of a step, in the order tables list them."""


@dataclass(frozen=True)
class Call:
    """One collective of the step on one group, and the layers that issue it.

    Attributes
    ----------
    kind : str
        One of :data:`KINDS`.
    block : str
        ``"attention"``, ``"mlp"`` or ``"moe"``.
    layers : tuple of int
        Layers that issue this very collective (same spec, same group).
    group : int
        Index of the group among the step's groups of its size.
    ranks : tuple of int
        The group's ranks on the topology; rank ``ranks[i]`` is rank i of the spec.
    collective : Collective
        A library spec on ``len(ranks)`` ranks.
    """

    kind: str
    block: str
    layers: tuple[int, ...]
    group: int
    ranks: tuple[int, ...]
    collective: Collective

    @property
    def count(self) -> int:
        """How many times the step issues this call."""
        return len(self.layers)


@dataclass(frozen=True)
class Step:
    """What a step issues on a world of ranks: its calls, and the routings behind them."""

    config: StepConfig
    world: int
    calls: tuple[Call, ...]
    routings: tuple[tuple[Routing, ...], ...] = ()   # [ep group][routing index]

    def kinds(self) -> list[str]:
        """Kinds present, in table order."""
        have = {c.kind for c in self.calls}
        return [k for k in KINDS if k in have]

    def count(self, kind: str, group: int = 0) -> int:
        """Calls of ``kind`` one group takes part in per step."""
        return sum(c.count for c in self.calls if c.kind == kind and c.group == group)


def token_shares(tokens: int, parts: int) -> list[int]:
    """Tokens per rank when ``parts`` ranks split ``tokens`` (the first ranks take one more).

    Examples
    --------
    >>> token_shares(10, 4)
    [3, 3, 2, 2]
    """
    return [tokens // parts + (1 if r < tokens % parts else 0) for r in range(parts)]


def expand(config: StepConfig, world: int,
           routing: Routing | Sequence[Routing] | None = None) -> Step:
    """The collectives of one step of ``config`` on ``world`` ranks.

    Parameters
    ----------
    config : StepConfig
    world : int
        Ranks of the topology; tensor- and expert-parallel groups tile it.
    routing : Routing or sequence of Routing, optional
        The MoE routing: one for every expert-parallel group, or one per group; every MoE
        layer uses it. Default: ``config.routings`` routings drawn per group.

    Raises
    ------
    SpecError, TopologyError
        If a degree does not tile the world, or a given routing does not fit the step.

    Examples
    --------
    >>> c = StepConfig("toy", hidden=1024, layers=2, heads=8, tp=4, tokens=16)
    >>> s = expand(c, 8)
    >>> s.kinds(), s.count("all_reduce"), s.calls[0].collective.input.nbytes(0)
    (['all_reduce'], 4, 32768)
    """
    check_instance("expand: config", config, StepConfig, "a StepConfig",
                   fix="build one with purlin.workload.preset(name) or StepConfig(...)",
                   error=SpecError)
    world = check_int("expand: world", world, lo=1, error=SpecError, fix="it is a rank count")
    tp_groups = tile(world, config.tp, "tp")
    ep = (config.ep or world) if config.is_moe else 1
    ep_groups = tile(world, ep, "ep") if ep > 1 else []
    if routing is not None and not ep_groups:
        raise SpecError(f"routing: applies to MoE layers with expert parallelism, and "
                        f"{config.name!r} on {world} ranks has none "
                        f"({'ep=1' if config.is_moe else 'a dense model'}); leave routing out")
    calls: dict[tuple, list] = {}

    def issue(kind: str, block: str, layer: int, group: int, ranks: tuple[int, ...],
              c: Collective, variant: int = 0) -> None:
        calls.setdefault((kind, block, group, variant), [ranks, c, []])[2].append(layer)

    tp_specs = _tp_specs(config)
    routings = _routings(config, ep, len(ep_groups), routing) if ep_groups else ()
    moe_specs = [[_moe_specs(config, r) for r in per_group] for per_group in routings]
    for layer in range(config.layers):
        moe = config.is_moe and layer >= config.dense_layers
        blocks = ("attention",) + (() if moe and ep > 1 else ("mlp",))
        for block in blocks:
            for g, ranks in enumerate(tp_groups):
                for kind, c in tp_specs:
                    issue(kind, block, layer, g, ranks, c)
        if moe and ep > 1:
            j = (layer - config.dense_layers) % config.routings if routing is None else 0
            for g, ranks in enumerate(ep_groups):
                dispatch, combine = moe_specs[g][j]
                issue("dispatch", "moe", layer, g, ranks, dispatch, j)
                issue("combine", "moe", layer, g, ranks, combine, j)
    out = tuple(Call(kind, block, tuple(layers), group, ranks, c)
                for (kind, block, group, _), (ranks, c, layers) in calls.items())
    return Step(config, world, out, tuple(routings))


def _tp_specs(config: StepConfig) -> list[tuple[str, Collective]]:
    """The tensor-parallel collectives of one block, in issue order."""
    if config.tp == 1:
        return []
    b = config.activation_itemsize
    if not config.sp:
        return [("all_reduce", library.all_reduce(config.tp, config.tokens * config.hidden * b,
                                                  config.dtype))]
    sizes = [n * config.hidden * b for n in token_shares(config.tokens, config.tp)]
    return [("all_gather", library.all_gather_v(config.tp, sizes, config.dtype)),
            ("reduce_scatter", library.reduce_scatter_v(config.tp, sizes, config.dtype))]


def _tokens_per_rank(config: StepConfig, ep: int) -> list[int]:
    """Tokens each rank of an expert-parallel group dispatches."""
    share = token_shares(config.tokens, config.tp)
    return [share[r % config.tp] for r in range(ep)]


MAX_DRAW = 1 << 27
"""Most (token, expert) scores one rank's routing draw may hold (a float64 each, a few
copies while sorting: about 3 GiB at the limit)."""
MAX_DRAWS = 1 << 31
"""Most (token, expert) scores a step's routings may draw in all (minutes of numpy)."""


def _check_draw(config: StepConfig, tokens: Sequence[int], groups: int) -> None:
    """LimitError, before drawing, for a routing past :data:`MAX_DRAW` or :data:`MAX_DRAWS`."""
    per_rank = max(tokens) * config.experts
    total = sum(tokens) * config.experts * groups * config.routings
    for est, limit, what in ((per_rank, MAX_DRAW, "one rank's routing draw"),
                             (total, MAX_DRAWS, "the step's routing draws")):
        if est > limit:
            raise LimitError(f"workload {config.name!r}: {what} would score {est:,} (token, "
                             f"expert) pairs, over the limit of {limit:,} (tokens={config.tokens}, "
                             f"experts={config.experts}, routings={config.routings}, {groups} "
                             f"expert-parallel group(s)); give fewer tokens or routings, or pass "
                             f"a routing of your own")


def _routings(config: StepConfig, ep: int, groups: int,
              given: Routing | Sequence[Routing] | None) -> list[tuple[Routing, ...]]:
    tokens = _tokens_per_rank(config, ep)
    if given is None:
        _check_draw(config, tokens, groups)
        return [tuple(draw_routing(config.experts, config.top_k, tokens, skew=config.skew,
                                   seed=[config.seed, g, j], expert_groups=config.expert_groups,
                                   topk_groups=config.topk_groups)
                      for j in range(config.routings)) for g in range(groups)]
    per_group = [given] * groups if isinstance(given, Routing) else list(given)
    if len(per_group) != groups:
        raise SpecError(f"routing: {len(per_group)} routings given for {groups} expert-parallel "
                        f"groups (give one, or one per group)")
    for g, r in enumerate(per_group):
        if not isinstance(r, Routing):
            raise SpecError(f"routing {g}: expected a purlin.workload.Routing, got "
                            f"{type(r).__name__}")
        if r.experts != config.experts or (r.top_k not in (0, config.top_k)):
            raise SpecError(f"routing {g}: {r.experts} experts, top-{r.top_k}; the config has "
                            f"{config.experts} experts, top-{config.top_k}")
        if list(r.tokens) != tokens:
            raise SpecError(f"routing {g}: tokens per rank {list(r.tokens)}; the step dispatches "
                            f"{tokens} (tokens={config.tokens} split over tp={config.tp})")
    return [(r,) for r in per_group]


def _moe_specs(config: StepConfig, routing: Routing) -> tuple[Collective, Collective]:
    """Dispatch and combine AllToAllV of one routing: the combine returns what came."""
    counts = dispatch_counts(routing, routing.world, config.dedupe)
    ep = routing.world
    dispatch = library.all_to_all_v(ep, (counts * config.hidden * config.dispatch_itemsize).tolist(),
                                    config.dispatch_dtype or config.dtype)
    back = np.ascontiguousarray(counts.T) * config.hidden * config.activation_itemsize
    return dispatch, library.all_to_all_v(ep, back.tolist(), config.dtype)
