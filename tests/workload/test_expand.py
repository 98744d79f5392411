"""A step expands into the collectives it issues: counts and bytes by hand from the config."""
import numpy as np
import pytest

from purlin.errors import SpecError, TopologyError
from purlin.workload import PRESETS, Routing, StepConfig, expand, preset
from purlin.workload.expand import token_shares


def calls(step, kind):
    return [c for c in step.calls if c.kind == kind]


def test_presets_are_the_public_configs():
    l3, mx, ds = PRESETS["llama3-70b"], PRESETS["mixtral-8x22b"], PRESETS["deepseek-v3"]
    assert (l3.hidden, l3.layers, l3.heads, l3.kv_heads, l3.tp, l3.experts) == (8192, 80, 64, 8, 8, 0)
    assert (mx.hidden, mx.layers, mx.heads, mx.kv_heads, mx.experts, mx.top_k) == (6144, 56, 48, 8, 8, 2)
    assert (mx.tp, mx.ep, mx.sp) == (8, 8, True)
    assert (ds.hidden, ds.layers, ds.heads, ds.experts, ds.top_k, ds.dense_layers) == (7168, 61, 128, 256, 8, 3)
    assert (ds.expert_groups, ds.topk_groups, ds.dispatch_dtype, ds.dtype) == (8, 4, "fp8_e4m3", "bf16")
    assert (ds.tp, ds.ep) == (1, None)
    assert preset("deepseek-v3").tokens == 128 and preset("deepseek-v3", "prefill").tokens == 4096


def test_llama_tp8_decode_is_two_all_reduces_per_layer():
    step = expand(preset("llama3-70b"), 8)                 # 128 tokens, TP8, one group
    assert step.kinds() == ["all_reduce"]
    assert step.count("all_reduce") == 80 * 2               # attention + MLP, 80 layers
    (attn, mlp) = calls(step, "all_reduce")
    assert (attn.block, mlp.block) == ("attention", "mlp")
    assert attn.collective is mlp.collective                # one spec, issued 160 times
    c = attn.collective
    assert c.name == "all_reduce" and c.world == 8 and c.dtype.name == "bf16"
    assert [c.input.nbytes(r) for r in range(8)] == [128 * 8192 * 2] * 8   # 2 MiB each
    assert attn.layers == tuple(range(80)) and attn.ranks == tuple(range(8))


def test_llama_on_72_ranks_is_nine_groups():
    step = expand(preset("llama3-70b"), 72)
    groups = sorted({c.ranks for c in step.calls})
    assert groups == [tuple(range(8 * g, 8 * g + 8)) for g in range(9)]
    assert all(step.count("all_reduce", g) == 160 for g in range(9))


def test_sequence_parallel_splits_tokens():
    step = expand(preset("llama3-70b", tokens=100, sp=True), 8)
    assert step.kinds() == ["reduce_scatter", "all_gather"]
    assert step.count("reduce_scatter") == step.count("all_gather") == 160
    rs = calls(step, "reduce_scatter")[0].collective
    ag = calls(step, "all_gather")[0].collective
    share = [13, 13, 13, 13, 12, 12, 12, 12]               # 100 tokens over 8 ranks
    assert token_shares(100, 8) == share
    assert [rs.output.nbytes(r) for r in range(8)] == [n * 8192 * 2 for n in share]
    assert [rs.input.nbytes(r) for r in range(8)] == [100 * 8192 * 2] * 8
    assert [ag.input.nbytes(r) for r in range(8)] == [n * 8192 * 2 for n in share]
    assert [ag.output.nbytes(r) for r in range(8)] == [100 * 8192 * 2] * 8
    assert rs.name == "reduce_scatter_v" and ag.name == "all_gather_v"


def test_mixtral_tp8_ep8_sp_per_layer():
    step = expand(preset("mixtral-8x22b"), 8)              # 128 tokens: 16 per rank
    assert step.kinds() == ["reduce_scatter", "all_gather", "dispatch", "combine"]
    for kind in step.kinds():
        assert step.count(kind) == 56
    rs = calls(step, "reduce_scatter")[0].collective
    assert [rs.output.nbytes(r) for r in range(8)] == [16 * 6144 * 2] * 8
    d = calls(step, "dispatch")[0].collective
    k = calls(step, "combine")[0].collective
    assert d.name == "all_to_all_v" and d.dtype.name == "bf16"
    # each rank sends 16 tokens x 2 experts x 6144 x 2 B, its own share included
    assert [d.input.nbytes(r) for r in range(8)] == [16 * 2 * 6144 * 2] * 8
    assert sum(d.output.nbytes(r) for r in range(8)) == 128 * 2 * 6144 * 2
    # the combine returns what came: its input is the dispatch's output, rank by rank
    assert [k.input.nbytes(r) for r in range(8)] == [d.output.nbytes(r) for r in range(8)]
    assert [k.output.nbytes(r) for r in range(8)] == [d.input.nbytes(r) for r in range(8)]


def test_deepseek_decode_on_72_ranks():
    step = expand(preset("deepseek-v3"), 72)
    assert step.kinds() == ["dispatch", "combine"]          # tp=1: no tensor-parallel calls
    (d,), (k,) = calls(step, "dispatch"), calls(step, "combine")
    assert d.layers == tuple(range(3, 61)) and d.count == 58    # 3 dense layers first
    assert d.ranks == tuple(range(72))
    c = d.collective
    assert c.dtype.name == "fp8_e4m3" and k.collective.dtype.name == "bf16"
    assert [c.input.nbytes(r) for r in range(72)] == [128 * 8 * 7168] * 72   # 1 B per element
    assert [k.collective.output.nbytes(r) for r in range(72)] == [128 * 8 * 7168 * 2] * 72
    assert [k.collective.input.nbytes(r) for r in range(72)] == \
        [2 * c.output.nbytes(r) for r in range(72)]


def test_dedupe_sends_one_copy_per_destination():
    cfg = StepConfig("toy", hidden=64, layers=1, heads=2, experts=4, top_k=2, ep=2, tokens=2)
    # experts 0,1 on rank 0 and 2,3 on rank 1
    r = Routing.of(4, [[[0, 1], [1, 2]], [[2, 3], [0, 3]]])
    per_expert = calls(expand(cfg, 2, r), "dispatch")[0].collective
    deduped = calls(expand(cfg.with_(dedupe=True), 2, r), "dispatch")[0].collective
    row = 64 * 2
    # rank 0: token 0 -> {0, 0}, token 1 -> {0, 1}; rank 1: token 0 -> {1, 1}, token 1 -> {0, 1}
    assert [b.nbytes for b in per_expert.input.ranks[0]] == [3 * row, 1 * row]
    assert [b.nbytes for b in per_expert.input.ranks[1]] == [1 * row, 3 * row]
    assert [b.nbytes for b in deduped.input.ranks[0]] == [2 * row, 1 * row]
    assert [b.nbytes for b in deduped.input.ranks[1]] == [1 * row, 2 * row]


def test_routings_cycle_over_moe_layers():
    step = expand(preset("deepseek-v3", tokens=8, routings=2), 8)
    d = calls(step, "dispatch")
    assert [c.layers for c in d] == [tuple(range(3, 61, 2)), tuple(range(4, 61, 2))]
    assert d[0].collective != d[1].collective
    assert step.count("dispatch") == 58


def test_rules_are_clear_errors():
    with pytest.raises(TopologyError, match="tp=8 does not divide the topology's 12 ranks"):
        expand(preset("llama3-70b"), 12)
    with pytest.raises(SpecError, match="needs sp=True"):
        preset("mixtral-8x22b", sp=False)
    with pytest.raises(SpecError, match=r"heads=64: must divide by tp=3"):
        preset("llama3-70b", tp=3)
    with pytest.raises(SpecError, match="unknown field.*tensor_parallel"):
        preset("llama3-70b", tensor_parallel=8)
    with pytest.raises(SpecError, match="preset 'gpt5' is unknown; choose one of llama3-70b"):
        preset("gpt5")
    with pytest.raises(SpecError, match="top_k=9: cannot exceed experts=8"):
        preset("mixtral-8x22b", top_k=9)
    cfg = StepConfig("toy", hidden=64, layers=1, heads=2, experts=4, top_k=2, ep=2, tokens=2)
    with pytest.raises(SpecError, match=r"tokens per rank \[1, 2\]; the step dispatches \[2, 2\]"):
        expand(cfg, 2, Routing.of(4, [[[0, 1]], [[2, 3], [0, 3]]]))
    with pytest.raises(SpecError, match="picks expert"):
        Routing.of(4, [[[1, 1]]])
    assert np.array_equal(Routing.of(4, [[[3, 0]]]).choices[0], [[3, 0]])
