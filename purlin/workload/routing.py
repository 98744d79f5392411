"""Which experts each token picks, where the experts live, and the bytes that follow.

A :class:`Routing` holds, for every rank of one expert-parallel group, the top-k expert ids
of each token that rank dispatches. It is given (measured routings, hand-made cases) or
drawn by :func:`draw_routing` from a skewed expert popularity with a seed. The experts of a
layer sit on the group's ranks in contiguous, balanced blocks (:func:`placement`), so a
routing turns into a matrix of bytes from rank to rank: the MoE dispatch's V splits.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from purlin.errors import SpecError


@dataclass(frozen=True, eq=False)
class Routing:
    """Top-k expert choices of every token, per source rank of one expert-parallel group.

    Attributes
    ----------
    experts : int
        Experts in the layer (ids ``0 .. experts-1``).
    choices : tuple of numpy arrays
        ``choices[r]`` has shape ``(tokens_r, top_k)``: the expert ids of each token that
        rank r dispatches, distinct within a row.

    Examples
    --------
    >>> r = Routing.of(4, [[[0, 1], [1, 2]], [[3, 0]]])
    >>> r.world, r.top_k, r.tokens
    (2, 2, (2, 1))
    """

    experts: int
    choices: tuple[np.ndarray, ...]

    def __post_init__(self) -> None:
        top = {c.shape[1] for c in self.choices if c.size}
        if len(top) > 1:
            raise SpecError(f"routing: every token picks the same number of experts, got "
                            f"{sorted(top)}")
        for r, c in enumerate(self.choices):
            if c.ndim != 2:
                raise SpecError(f"routing: rank {r}: expected a (tokens, top_k) array, got "
                                f"shape {c.shape}")
            if c.size and (c.min() < 0 or c.max() >= self.experts):
                raise SpecError(f"routing: rank {r}: expert ids must lie in 0..{self.experts - 1}, "
                                f"got {int(c.min())}..{int(c.max())}")
            s = np.sort(c, axis=1)
            dup = np.nonzero((s[:, 1:] == s[:, :-1]).any(axis=1))[0] if c.shape[1] > 1 else ()
            if len(dup):
                raise SpecError(f"routing: rank {r}, token {int(dup[0])}: picks expert "
                                f"{sorted(c[dup[0]].tolist())} more than once (rule: top-k "
                                f"experts are distinct)")

    @staticmethod
    def of(experts: int, choices: Sequence[Sequence[Sequence[int]]]) -> "Routing":
        """Build from nested lists: ``choices[rank][token]`` is that token's expert ids."""
        arrays = []
        for rank in choices:
            a = np.asarray(rank, dtype=np.int64)
            arrays.append(a.reshape(0, 0) if a.size == 0 else a)
        return Routing(int(experts), tuple(arrays))

    @property
    def world(self) -> int:
        """Ranks that send tokens."""
        return len(self.choices)

    @property
    def top_k(self) -> int:
        """Experts each token goes to."""
        return next((c.shape[1] for c in self.choices if c.size), 0)

    @property
    def tokens(self) -> tuple[int, ...]:
        """Tokens per rank."""
        return tuple(int(c.shape[0]) for c in self.choices)

    def expert_load(self) -> np.ndarray:
        """Tokens routed to each expert, over all ranks."""
        counts = np.zeros(self.experts, dtype=np.int64)
        for c in self.choices:
            counts += np.bincount(c.ravel(), minlength=self.experts)
        return counts


def placement(experts: int, world: int) -> np.ndarray:
    """The rank of each expert: contiguous blocks, as even as integers allow.

    Rank g holds experts ``e`` with ``e * world // experts == g``; with more ranks than
    experts some ranks hold none (replicated experts are not modelled).

    Examples
    --------
    >>> placement(8, 4).tolist()
    [0, 0, 1, 1, 2, 2, 3, 3]
    >>> [int((placement(256, 72) == g).sum()) for g in (0, 1, 2)]
    [4, 4, 3]
    """
    return (np.arange(experts, dtype=np.int64) * world) // experts


def popularity(experts: int, skew: float, rng: np.random.Generator) -> np.ndarray:
    """Probability of each expert: ``1 / rank**skew`` over a random order of the experts."""
    weights = 1.0 / np.arange(1, experts + 1, dtype=np.float64) ** skew
    return rng.permutation(weights / weights.sum())


def draw_routing(experts: int, top_k: int, tokens: Sequence[int], *, skew: float = 0.2,
                 seed: int | Sequence[int] = 0, expert_groups: int = 1,
                 topk_groups: int = 1) -> Routing:
    """Draw each token's top-k experts, without replacement, from a skewed popularity.

    Sampling uses the Gumbel-top-k rule (the k largest of ``log p + Gumbel noise`` are a
    draw without replacement with probabilities ``p``). With group-limited routing a token
    first keeps its ``topk_groups`` best groups (a group scores its best expert), then takes
    its top-k experts inside them. Same arguments, same routing.

    Parameters
    ----------
    experts, top_k : int
        Experts per layer and experts per token.
    tokens : sequence of int
        Tokens dispatched by each rank of the group.
    skew : float
        Popularity ``1 / rank**skew`` (0: uniform).
    seed : int or sequence of int
        Random seed (numpy ``default_rng``; a sequence mixes several, e.g. config seed,
        group, routing index).
    expert_groups, topk_groups : int
        Group-limited routing (1, 1: none).

    Examples
    --------
    >>> r = draw_routing(16, 2, [3, 3], seed=1)
    >>> r.tokens, r.top_k, bool((draw_routing(16, 2, [3, 3], seed=1).choices[1] == r.choices[1]).all())
    ((3, 3), 2, True)
    """
    if not 1 <= top_k <= experts:
        raise SpecError(f"routing: top_k={top_k} must be in 1..experts={experts}")
    rng = np.random.default_rng(seed)
    logp = np.log(popularity(experts, skew, rng))
    per_group = experts // expert_groups
    out = []
    for n in tokens:
        keys = logp[None, :] + rng.gumbel(size=(int(n), experts))
        if topk_groups < expert_groups:
            score = keys.reshape(int(n), expert_groups, per_group).max(axis=2)
            drop = np.argsort(-score, axis=1, kind="stable")[:, topk_groups:]
            mask = np.zeros((int(n), expert_groups), dtype=bool)
            np.put_along_axis(mask, drop, True, axis=1)
            keys = np.where(np.repeat(mask, per_group, axis=1), -np.inf, keys)
        top = np.argsort(-keys, axis=1, kind="stable")[:, :top_k]
        out.append(np.sort(top, axis=1))
    return Routing(experts, tuple(out))


def dispatch_counts(routing: Routing, ranks: int, dedupe: bool = False) -> np.ndarray:
    """``counts[s, d]``: token copies rank s sends rank d in the dispatch.

    One copy per (token, expert) by default; with ``dedupe`` one per (token, destination
    rank), however many of the token's experts that rank holds.

    Examples
    --------
    >>> r = Routing.of(4, [[[0, 1], [1, 2]], [[3, 0]]])   # experts 0,1 on rank 0; 2,3 on rank 1
    >>> dispatch_counts(r, 2).tolist(), dispatch_counts(r, 2, dedupe=True).tolist()
    ([[3, 1], [1, 1]], [[2, 1], [1, 1]])
    """
    if routing.world != ranks:
        raise SpecError(f"routing: has {routing.world} source ranks, the expert-parallel group "
                        f"has {ranks}")
    where = placement(routing.experts, ranks)
    counts = np.zeros((ranks, ranks), dtype=np.int64)
    for s, c in enumerate(routing.choices):
        if not c.size:
            continue
        dest = where[c]                                    # (tokens, top_k) destination ranks
        if dedupe:
            hit = np.zeros((c.shape[0], ranks), dtype=bool)
            np.put_along_axis(hit, dest, True, axis=1)
            counts[s] = hit.sum(axis=0)
        else:
            counts[s] = np.bincount(dest.ravel(), minlength=ranks)
    return counts
