"""Routings: drawn the same way from the same seed, well formed, and their V splits add up."""
import numpy as np
import pytest

from purlin.errors import SpecError
from purlin.workload import Routing, dispatch_counts, draw_routing, expand, placement, preset
from purlin.workload.routing import popularity


def test_same_seed_same_routing_other_seed_other_routing():
    a = draw_routing(256, 8, [128] * 4, seed=7, expert_groups=8, topk_groups=4)
    b = draw_routing(256, 8, [128] * 4, seed=7, expert_groups=8, topk_groups=4)
    c = draw_routing(256, 8, [128] * 4, seed=8, expert_groups=8, topk_groups=4)
    assert all(np.array_equal(x, y) for x, y in zip(a.choices, b.choices))
    assert not all(np.array_equal(x, y) for x, y in zip(a.choices, c.choices))
    # a step drawn twice from one config issues the same specs
    s1, s2 = expand(preset("deepseek-v3", tokens=16), 8), expand(preset("deepseek-v3", tokens=16), 8)
    assert [c.collective for c in s1.calls] == [c.collective for c in s2.calls]
    s3 = expand(preset("deepseek-v3", tokens=16, seed=1), 8)
    assert [c.collective for c in s1.calls] != [c.collective for c in s3.calls]


def test_drawn_routing_is_well_formed_and_group_limited():
    r = draw_routing(256, 8, [100, 0, 37], seed=3, expert_groups=8, topk_groups=4)
    assert r.tokens == (100, 0, 37) and r.top_k == 8 and r.experts == 256
    for c in r.choices:
        assert c.shape[1:] == (8,) or c.size == 0
        assert ((0 <= c) & (c < 256)).all()
        assert all(len(set(row)) == 8 for row in c.tolist())          # distinct experts
        assert all(len({e // 32 for e in row}) <= 4 for row in c.tolist())  # <= 4 groups of 32
    assert int(r.expert_load().sum()) == (100 + 37) * 8


def test_popularity_is_one_over_rank_to_the_skew():
    p = popularity(4, 1.0, np.random.default_rng(0))
    assert sorted(p.tolist(), reverse=True) == pytest.approx([12 / 25, 6 / 25, 4 / 25, 3 / 25])
    assert popularity(5, 0.0, np.random.default_rng(0)).tolist() == pytest.approx([0.2] * 5)
    # skew concentrates load: the busiest expert gets more of a skewed routing
    flat = draw_routing(64, 2, [2000], skew=0.0, seed=1).expert_load()
    steep = draw_routing(64, 2, [2000], skew=1.0, seed=1).expert_load()
    assert flat.sum() == steep.sum() == 4000
    assert steep.max() > 2 * flat.max()


def test_placement_is_contiguous_and_balanced():
    assert placement(256, 72).tolist()[:8] == [0, 0, 0, 0, 1, 1, 1, 1]
    held = np.bincount(placement(256, 72), minlength=72)
    assert held.sum() == 256 and set(held.tolist()) == {3, 4}
    assert np.bincount(placement(8, 8)).tolist() == [1] * 8
    assert (np.bincount(placement(4, 8), minlength=8) == [1, 0, 1, 0, 1, 0, 1, 0]).all()


def test_v_splits_sum_to_the_routing():
    r = draw_routing(32, 4, [50, 40, 30, 20], seed=5)
    where = placement(32, 4)
    counts = dispatch_counts(r, 4)
    assert counts.sum(axis=1).tolist() == [200, 160, 120, 80]           # tokens x top-k
    assert counts.sum(axis=0).tolist() == np.bincount(where[np.concatenate(r.choices).ravel()],
                                                      minlength=4).tolist()
    deduped = dispatch_counts(r, 4, dedupe=True)
    by_hand = np.zeros((4, 4), dtype=int)
    for s, c in enumerate(r.choices):
        for row in c.tolist():
            for d in {int(where[e]) for e in row}:
                by_hand[s, d] += 1
    assert (deduped == by_hand).all()
    assert (deduped <= counts).all() and (deduped.sum(axis=1) >= [50, 40, 30, 20]).all()


def test_dispatch_spec_carries_the_splits():
    cfg = preset("deepseek-v3", tokens=24)
    step = expand(cfg, 8)
    (routing,), = step.routings
    counts = dispatch_counts(routing, 8)
    d = next(c for c in step.calls if c.kind == "dispatch").collective
    k = next(c for c in step.calls if c.kind == "combine").collective
    for s in range(8):
        assert [b.nbytes for b in d.input.ranks[s]] == (counts[s] * 7168).tolist()
        assert [b.nbytes for b in k.output.ranks[s]] == (counts[s] * 7168 * 2).tolist()
    total = 24 * 8 * 8 * 7168
    assert sum(d.input.nbytes(r) for r in range(8)) == sum(d.output.nbytes(r) for r in range(8)) == total


def test_given_routing_is_checked():
    with pytest.raises(SpecError, match="expert ids must lie in 0..3"):
        Routing.of(4, [[[0, 4]]])
    with pytest.raises(SpecError, match="the expert-parallel group has 3"):
        dispatch_counts(Routing.of(4, [[[0, 1]]]), 3)
