"""Step predictions: each distinct collective simulated once, rows that add up, groups."""
from concurrent.futures import ThreadPoolExecutor

import pytest

import purlin.sim
from purlin.errors import TopologyError
from purlin.spec import library
from purlin.topology import Gpu, Link, Switch, Topology, load_topology, with_overrides
from purlin.workload import (NCCL_LIKE, RING, SimCache, predict_step, predict_steps, preset,
                             spec_digest)
from purlin.workload.groups import check_disjoint, group_topology
from purlin.workload.predict import POINT_TO_POINT, policy_for


@pytest.fixture
def engine_calls(monkeypatch):
    """Count the simulator runs behind a prediction."""
    seen = []
    real = purlin.sim.simulate

    def counting(schedule, *args, **kwargs):
        seen.append(schedule.collective.name)
        return real(schedule, *args, **kwargs)
    monkeypatch.setattr(purlin.sim, "simulate", counting)
    return seen


def test_identical_collectives_are_simulated_once(engine_calls):
    """Llama-3-70B on NVL72: 9 TP8 groups x 160 all-reduces, one distinct collective."""
    cache = SimCache()
    p = predict_step(preset("llama3-70b", tokens=8), "gb200-nvl72", cache=cache)
    assert engine_calls == ["all_reduce"]
    assert cache.simulations == 1 and len(cache.entries) == 1
    assert cache.hits == 9 * 2 - 1                  # 9 groups x (attention, mlp) calls
    row = p.row("all_reduce")
    assert row.calls == 160 and row.nbytes == 160 * 8 * 8192 * 2
    one = p.calls[0].time_us
    assert all(c.time_us == one for c in p.calls)
    assert row.time_us == pytest.approx(160 * one) and p.total_us == pytest.approx(160 * one)
    # the same cache answers again without simulating; a changed topology or policy does not
    predict_step(preset("llama3-70b", tokens=8), "gb200-nvl72", cache=cache)
    assert cache.simulations == 1 and len(engine_calls) == 1
    fast = with_overrides(load_topology("gb200-nvl72"), link_bandwidth_scale=2)
    predict_step(preset("llama3-70b", tokens=8), fast, cache=cache)
    predict_step(preset("llama3-70b", tokens=8), "gb200-nvl72", RING, cache=cache)
    assert cache.simulations == 3 and len(engine_calls) == 3


def test_moe_step_simulates_each_group_routing_once(engine_calls):
    """Mixtral on NVL72: 9 EP8 groups, each its own routing: 9 dispatch + 9 combine specs,
    one reduce-scatter and one all-gather; the 56 layers share them."""
    cache = SimCache()
    p = predict_step(preset("mixtral-8x22b", tokens=64), "gb200-nvl72", cache=cache)
    assert cache.simulations == len(engine_calls) == 20
    assert sorted(set(engine_calls)) == ["all_gather", "all_to_all_v", "reduce_scatter"]
    for kind in ("reduce_scatter", "all_gather", "dispatch", "combine"):
        assert p.row(kind).calls == 56
    # a layer's dispatch costs the slowest of the nine groups
    worst = max(c.time_us for c in p.calls if c.call.kind == "dispatch")
    assert p.row("dispatch").time_us == pytest.approx(56 * worst)
    assert p.total_us == pytest.approx(sum(r.time_us for r in p.rows))


def test_default_and_baseline_share_a_cache_and_a_pool():
    cfg = preset("deepseek-v3", tokens=16)
    cache = SimCache()
    serial = predict_steps(cfg, ["hgx-h200-8", "hgx-b200-8"], cache=cache)
    assert [(p.topology, p.label) for p in serial] == [
        ("hgx-h200-8", "default"), ("hgx-h200-8", "nccl-like ring"),
        ("hgx-b200-8", "default"), ("hgx-b200-8", "nccl-like ring")]
    assert cache.simulations == 2 * 2 * 2            # dispatch, combine x 2 policies x 2 boxes
    with ThreadPoolExecutor(2) as ex:
        pooled = predict_steps(cfg, ["hgx-h200-8", "hgx-b200-8"], executor=ex)
    assert [p.total_us for p in pooled] == [p.total_us for p in serial]
    base = serial[1]
    assert all(c.policy["regime"] == "throughput" and c.policy["algorithm"] == "one_shot"
               for c in base.calls)                  # AllToAllV: point to point, as NCCL


def test_baseline_policy_per_collective():
    ar = library.all_reduce(8, 1 << 20)
    a2a = library.all_to_all_v(2, [[16, 32], [48, 0]])
    assert policy_for(NCCL_LIKE, ar) is RING and policy_for(NCCL_LIKE, a2a) is POINT_TO_POINT
    assert policy_for(None, ar) is None and policy_for({"regime": "direct"}, ar).regime == "direct"
    p = predict_step(preset("llama3-70b", tokens=8), "hgx-h200-8", NCCL_LIKE, label="ring")
    assert p.label == "ring" and p.calls[0].policy["algorithm"] == "ring"
    assert spec_digest(ar) == spec_digest(library.all_reduce(8, 1 << 20)) != spec_digest(a2a)


def test_to_dict_holds_rows_and_calls():
    p = predict_step(preset("mixtral-8x22b", tokens=16), "hgx-h200-8")
    d = p.to_dict()
    assert d["topology"] == "hgx-h200-8" and d["world"] == 8 and d["label"] == "default"
    assert [r["kind"] for r in d["rows"]] == ["reduce_scatter", "all_gather", "dispatch", "combine"]
    assert d["total_us"] == pytest.approx(sum(r["time_us"] for r in d["rows"]))
    assert {c["kind"] for c in d["calls"]} == {"reduce_scatter", "all_gather", "dispatch", "combine"}
    assert d["config"]["tokens"] == 16


def _tree4() -> Topology:
    """Four GPUs, two leaf switches joined through a root; gpu0/gpu2 on one leaf."""
    gpus = tuple(Gpu(f"gpu{i}", 1000.0, 16, 2, 10.0, 16.0) for i in range(4))
    sw = (Switch("leaf_a", 0.1, False, 3), Switch("leaf_b", 0.1, False, 3), Switch("root", 0.1, False, 2))
    pairs = [("gpu0", "leaf_a"), ("gpu2", "leaf_a"), ("gpu1", "leaf_b"), ("gpu3", "leaf_b"),
             ("leaf_a", "root"), ("leaf_b", "root")]
    links = tuple(Link(a, b, 50.0, 0.1, "pcie") for x, y in pairs for a, b in ((x, y), (y, x)))
    return Topology("tree4", "synthetic", "synthetic", 4, gpus, sw, links)


def test_groups_that_share_a_link_are_refused():
    with pytest.raises(TopologyError, match=r"tensor-parallel groups 0 \(ranks 0..1\) and 1 "
                                            r"\(ranks 2..3\) share link leaf_a->root"):
        predict_step(preset("llama3-70b", tp=2, tokens=4), _tree4(), calibration="synthetic")
    check_disjoint(load_topology("pcie-gen5-8"), [range(0, 4), range(4, 8)], "tp")   # own switches
    sub = group_topology(load_topology("pcie-gen5-8"), range(4, 8))
    assert sub.world == 4 and {s.name for s in sub.switches} == {"pcie_sw2", "pcie_sw3", "root"}
    assert group_topology(load_topology("hgx-h200-8"), range(8)) is not None
    with pytest.raises(TopologyError, match="loopback"):
        predict_step(preset("llama3-70b", tokens=4), "h200-loopback", world=16)
