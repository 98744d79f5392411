"""Three public model shapes as step configs, each number from the model's public config.

Sources (also in docs/sources.md, "Workload presets"):

- [L3] meta-llama/Meta-Llama-3-70B, ``config.json`` on its model card;
- [MX] mistralai/Mixtral-8x22B-v0.1, ``config.json`` on its model card;
- [DS] deepseek-ai/DeepSeek-V3, ``config.json`` on its model card, and the DeepSeek-V3
  Technical Report (arXiv:2412.19437) for the FP8 dispatch;
- [EP] the DeepEP README (deepseek-ai/DeepEP): its benchmarks' "typical DeepSeek-V3/R1
  production setting" of 128 tokens per batch (decode) and 4096 tokens per batch (prefill),
  with FP8 dispatching and BF16 combining.

The parallel degrees and token counts are deployment choices, not facts of the models;
they are stated with each preset. The routing's skew is an assumption (see StepConfig).
"""
from __future__ import annotations

from typing import Any

from purlin.errors import SpecError
from purlin.workload.config import PHASES, StepConfig

DECODE_TOKENS = 128     # [EP] low-latency (decode) benchmark: 128 tokens per batch
PREFILL_TOKENS = 4096   # [EP] normal (prefill/training) benchmark: 4096 tokens per batch

PRESETS: dict[str, StepConfig] = {
    # Dense 70B-class model, tensor parallel over 8 GPUs (one HGX box's NVLink domain).
    "llama3-70b": StepConfig(
        "llama3-70b",
        hidden=8192,        # [L3] hidden_size
        layers=80,          # [L3] num_hidden_layers
        heads=64,           # [L3] num_attention_heads
        kv_heads=8,         # [L3] num_key_value_heads
        dtype="bf16",       # [L3] torch_dtype bfloat16
        tp=8,               # deployment: TP8, Megatron-style, no sequence parallelism
    ),
    # Sparse MoE: 8 experts, top-2; attention TP8 and experts EP8 over the same 8 GPUs,
    # with sequence parallelism so each rank dispatches its share of the tokens.
    "mixtral-8x22b": StepConfig(
        "mixtral-8x22b",
        hidden=6144,        # [MX] hidden_size
        layers=56,          # [MX] num_hidden_layers
        heads=48,           # [MX] num_attention_heads
        kv_heads=8,         # [MX] num_key_value_heads
        experts=8,          # [MX] num_local_experts
        top_k=2,            # [MX] num_experts_per_tok
        dtype="bf16",       # [MX] torch_dtype bfloat16
        tp=8, ep=8, sp=True,  # deployment: TP8 + EP8 + SP (Megatron-Core MoE style)
    ),
    # DeepSeek-V3-shaped MoE: 256 routed experts, top-8 from the best 4 of 8 groups; data-
    # parallel attention (tp=1) and every GPU of the system in one expert-parallel group.
    "deepseek-v3": StepConfig(
        "deepseek-v3",
        hidden=7168,        # [DS] hidden_size
        layers=61,          # [DS] num_hidden_layers
        heads=128,          # [DS] num_attention_heads
        kv_heads=128,       # [DS] num_key_value_heads
        experts=256,        # [DS] n_routed_experts (the one shared expert needs no exchange)
        top_k=8,            # [DS] num_experts_per_tok
        dense_layers=3,     # [DS] first_k_dense_replace
        expert_groups=8,    # [DS] n_group
        topk_groups=4,      # [DS] topk_group
        dtype="bf16",       # [DS] torch_dtype bfloat16; [EP] BF16 combining
        dispatch_dtype="fp8_e4m3",  # [DS] report sec. 3.3: FP8 activations into dispatch; [EP]
        tp=1, ep=None,      # deployment: DP attention, EP over all GPUs (as DeepEP)
    ),
}


def preset(name: str, phase: str = "decode", tokens: int | None = None,
           **changes: Any) -> StepConfig:
    """A preset step: ``phase`` sets the default tokens (decode 128, prefill 4096 per
    tensor-parallel group); ``changes`` override any other field.

    Raises
    ------
    SpecError
        If ``name`` is not a preset (naming them), or a change breaks a rule.

    Examples
    --------
    >>> c = preset("deepseek-v3", "prefill")
    >>> c.tokens, c.experts, c.top_k, c.moe_layers
    (4096, 256, 8, 58)
    >>> preset("llama3-70b", tokens=1, layers=2).layers
    2
    """
    if not isinstance(name, str):
        raise SpecError(f"workload preset {name!r:.40}: expected a preset name (a string), one "
                        f"of {', '.join(PRESETS)}")
    key = name.lower().replace("_", "-")
    if key not in PRESETS:
        raise SpecError(f"workload preset {name!r} is unknown; choose one of {', '.join(PRESETS)}")
    if not isinstance(phase, str) or phase not in PHASES:
        raise SpecError(f"workload {name}: phase {phase!r}: choose one of {', '.join(PHASES)}")
    default = DECODE_TOKENS if phase == "decode" else PREFILL_TOKENS
    return PRESETS[key].with_(phase=phase, tokens=default if tokens is None else tokens, **changes)
