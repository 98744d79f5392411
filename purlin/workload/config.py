"""A model-parallel inference step as a small frozen config: shape, split and batch.

Only what decides the step's communication is here: the hidden size (every activation a
collective moves is ``tokens x hidden`` elements), the layers, the heads (they must divide
over tensor parallelism), the experts and top-k, the element types, the parallel degrees
and the tokens. Compute, memory and the KV cache are not modelled.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from purlin.errors import SpecError
from purlin.spec.dtypes import dtype as _dtype

PHASES = ("prefill", "decode")


@dataclass(frozen=True)
class StepConfig:
    """One inference step of a transformer, split over GPUs.

    Attributes
    ----------
    name : str
        Label (a preset's name).
    hidden : int
        Hidden size (d_model): the width of every activation a collective moves.
    layers : int
        Transformer layers.
    heads, kv_heads : int
        Query and key/value attention heads; each must divide by ``tp``.
    experts, top_k : int
        Routed experts per MoE layer and experts per token (0, 0: a dense model).
    dense_layers : int
        Leading layers with a dense MLP in an MoE model (DeepSeek-V3: 3).
    expert_groups, topk_groups : int
        Group-limited routing: experts fall into ``expert_groups`` equal groups and a
        token picks its experts from its ``topk_groups`` best groups (1, 1: no limit).
    dtype : str
        Activations (all-reduce, reduce-scatter, all-gather, MoE combine).
    dispatch_dtype : str or None
        The MoE dispatch payload (None: ``dtype``); DeepSeek-V3 dispatches in FP8.
    tp : int
        Tensor-parallel degree: attention heads (and the dense MLP, and the experts when
        ``ep == 1``) split over ``tp`` consecutive ranks, which reduce their partial
        outputs after attention and after the MLP.
    ep : int or None
        Expert-parallel degree: the experts of a layer spread over ``ep`` consecutive
        ranks, which exchange tokens (dispatch) and results (combine) by AllToAllV.
        None: every rank of the topology. 1: no expert parallelism.
    sp : bool
        Sequence parallelism (Megatron): each tensor-parallel reduction is a
        reduce-scatter over tokens, and an all-gather brings the tokens back before the
        next tensor-parallel block. Needed when ``tp > 1`` and ``ep > 1``.
    tokens : int
        Tokens one attention replica (one tensor-parallel group) processes in the step:
        the batch in decode (one new token per sequence), the prompt tokens in prefill.
    phase : str
        ``"prefill"`` or ``"decode"``; a label (the tokens decide the bytes).
    dedupe : bool
        Dispatch one copy of a token per destination GPU (its experts there share it)
        instead of one per (token, expert); combine returns as many.
    skew : float
        Expert popularity of a drawn routing: expert of popularity rank i is chosen with
        weight ``1 / i**skew`` (0: uniform). An assumption, not a fact of the model.
    seed : int
        Seed of the drawn routing (which experts are popular, which tokens pick what).
    routings : int
        Distinct routings drawn per step; MoE layer i uses routing ``i % routings``.

    Examples
    --------
    >>> c = StepConfig("toy", hidden=1024, layers=2, heads=8, tp=4, tokens=16)
    >>> c.is_moe, c.moe_layers, c.with_(tokens=32).tokens
    (False, 0, 32)
    """

    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int | None = None
    experts: int = 0
    top_k: int = 0
    dense_layers: int = 0
    expert_groups: int = 1
    topk_groups: int = 1
    dtype: str = "bf16"
    dispatch_dtype: str | None = None
    tp: int = 1
    ep: int | None = 1
    sp: bool = False
    tokens: int = 128
    phase: str = "decode"
    dedupe: bool = False
    skew: float = 0.2
    seed: int = 0
    routings: int = 1

    def __post_init__(self) -> None:
        check(self)

    @property
    def is_moe(self) -> bool:
        """Whether the step routes tokens to experts."""
        return self.experts > 0

    @property
    def moe_layers(self) -> int:
        """Layers with a routed-expert MLP."""
        return self.layers - self.dense_layers if self.is_moe else 0

    @property
    def activation_itemsize(self) -> int:
        """Bytes per activation element (``dtype``)."""
        return _dtype(self.dtype).itemsize

    @property
    def dispatch_itemsize(self) -> int:
        """Bytes per element of the MoE dispatch (``dispatch_dtype``, else ``dtype``)."""
        return _dtype(self.dispatch_dtype or self.dtype).itemsize

    def with_(self, **changes: Any) -> "StepConfig":
        """A copy with some fields changed (checked again)."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise SpecError(f"workload {self.name!r}: unknown field(s) {', '.join(unknown)}; "
                            f"known: {', '.join(f.name for f in dataclasses.fields(self))}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The config as plain data."""
        return dataclasses.asdict(self)


RANGES: dict[str, tuple[int, int]] = {
    "hidden": (1, 1 << 20), "layers": (1, 10_000), "heads": (1, 1 << 16), "tp": (1, 1 << 16),
    "tokens": (1, 1 << 22), "expert_groups": (1, 1 << 16), "topk_groups": (1, 1 << 16),
    "routings": (1, 4096), "experts": (0, 1 << 16), "top_k": (0, 1 << 16),
    "dense_layers": (0, 10_000), "seed": (0, (1 << 63) - 1)}
"""Range of each integer field. The upper ends are sanity bounds (the largest public models
have hidden sizes near 2**14, a few hundred layers, 256 experts): a value past one is a
typo, and expanding or drawing it would take hours or the machine's memory."""
MAX_SKEW = 100.0
"""Largest expert-popularity skew: at 100 the most popular expert already takes
everything, so more changes nothing."""


def check(c: StepConfig) -> None:
    """Raise SpecError for the first field that breaks a rule, naming field, value and rule."""
    def bad(field: str, rule: str) -> SpecError:
        return SpecError(f"workload {c.name!r}: {field}={getattr(c, field)!r}: {rule}")

    if not isinstance(c.name, str) or not c.name:
        raise SpecError(f"workload name {c.name!r:.40}: must be a non-empty string (a label)")
    for field, (lo, hi) in RANGES.items():
        value = getattr(c, field)
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise bad(field, f"must be an int in {lo}..{hi:,}"
                      + (" (a sanity bound: past any model or deployment)" if
                         isinstance(value, int) and not isinstance(value, bool) and value > hi else ""))
    for field in ("kv_heads", "ep"):
        value = getattr(c, field)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or not 1 <= value <= RANGES["heads"][1]):
            raise bad(field, f"must be an int in 1..{RANGES['heads'][1]:,}, or None ("
                      + ("every rank" if field == "ep" else "as many as heads") + ")")
    for field in ("sp", "dedupe"):
        if not isinstance(getattr(c, field), bool):
            raise bad(field, "must be True or False")
    if c.phase not in PHASES:
        raise bad("phase", f"choose one of {', '.join(PHASES)}")
    for field in ("dtype", "dispatch_dtype"):
        if getattr(c, field) is not None:
            if not isinstance(getattr(c, field), str):
                raise bad(field, "must be a dtype name (a string)")
            _dtype(getattr(c, field))   # SpecError naming the known dtypes
    if not isinstance(c.skew, (int, float)) or isinstance(c.skew, bool) or \
            not 0 <= c.skew <= MAX_SKEW:   # NaN fails here too
        raise bad("skew", f"must be a number in 0..{MAX_SKEW:g} (0: uniform popularity)")
    if c.heads % c.tp:
        raise bad("heads", f"must divide by tp={c.tp} (each tensor-parallel rank takes whole heads)")
    if c.kv_heads is not None and (c.kv_heads < 1 or c.kv_heads % c.tp and c.tp % c.kv_heads):
        raise bad("kv_heads", f"must divide by tp={c.tp}, or divide it (heads replicated)")
    if (c.experts == 0) != (c.top_k == 0):
        raise bad("top_k", f"experts={c.experts}: a dense model has experts=0 and top_k=0; an "
                           f"MoE model has both >= 1")
    if c.top_k > c.experts:
        raise bad("top_k", f"cannot exceed experts={c.experts}")
    if c.dense_layers > c.layers:
        raise bad("dense_layers", f"cannot exceed layers={c.layers}")
    if c.experts and c.experts % c.expert_groups:
        raise bad("expert_groups", f"must divide experts={c.experts}")
    if c.topk_groups > c.expert_groups:
        raise bad("topk_groups", f"cannot exceed expert_groups={c.expert_groups}")
    if c.experts and c.top_k > c.topk_groups * (c.experts // c.expert_groups):
        raise bad("top_k", f"{c.topk_groups} group(s) of {c.experts // c.expert_groups} experts "
                           f"cannot supply {c.top_k} experts")
    ep = c.ep if c.ep is not None else 0
    if c.is_moe and c.tp > 1 and ep != 1 and not c.sp:
        raise bad("sp", f"tp={c.tp} with expert parallelism needs sp=True: each tensor-parallel "
                        f"rank dispatches its own share of the tokens")
    if c.is_moe and c.tp > 1 and ep > 1 and ep % c.tp:
        raise bad("ep", f"must be a multiple of tp={c.tp} (expert groups hold whole "
                        f"tensor-parallel groups)")
