"""Structural tests: plans checked without running them."""
import json

import pytest
from hypothesis import given, settings, strategies as st

from purlin.snac import Copy, Notify, Policy, PutPackets, Reduce, Wait, plan
from purlin.snac.policy import codesign
from purlin.snac.report import summarize
from purlin.snac.serialize import digest, from_json, to_json
from purlin.snac.verify import verify
from purlin.spec import library
from purlin.topology import load_topology, minimal


def ops(s, kind):
    return [(p, i) for p in s.programs for i in p.instrs if isinstance(i, kind)]


def test_latency_all_gather_pushes_w_times_w_minus_1_packets():
    s = plan(library.all_gather(4, 1024), policy=Policy(regime="latency", chunk_nbytes=1024))
    puts = ops(s, PutPackets)
    assert len(puts) == 4 * 3
    assert {(p.rank, i.dst.rank) for p, i in puts} == {(a, b) for a in range(4) for b in range(4) if a != b}
    assert s.staging_nbytes == 0 and s.packets_nbytes == 3 * 1024
    assert not ops(s, Wait) and not ops(s, Notify)   # the flag travels in the packet


def test_throughput_stages_locally_and_consumers_pull():
    s = plan(library.all_gather(4, 4096), policy=Policy(regime="throughput", chunk_nbytes=1024))
    for p, c in ops(s, Copy):
        if p.role == "put":
            assert c.src.rank == p.rank and all(d.rank == p.rank for d in c.dsts)  # stage is local
        else:
            assert c.src.buffer == "staging" and c.src.rank != p.rank and c.dsts[0].rank == p.rank
    assert sum(c.nbytes for p, c in ops(s, Copy) if p.role == "consume") == 4 * 3 * 4096


def test_two_shot_allreduce_reduces_each_byte_once():
    w, n = 8, 1 << 20
    s = plan(library.all_reduce(w, n), policy=Policy(regime="throughput", algorithm="two_shot"))
    red = ops(s, Reduce)
    assert sum(r.nbytes for _, r in red) == n          # each byte reduced once, by its owner
    assert all(len(r.srcs) == w for _, r in red)
    assert all([x.rank for x in r.srcs] == list(range(w)) for _, r in red)  # rank order
    one = plan(library.all_reduce(w, n), policy=Policy(regime="throughput", algorithm="one_shot"))
    assert sum(r.nbytes for _, r in ops(one, Reduce)) == w * n


def test_direct_reduce_broadcast_stores_to_every_holder():
    s = plan(library.all_reduce(4, 4096), policy=Policy(regime="direct", algorithm="two_shot"))
    for _, r in ops(s, Reduce):
        assert sorted(d.rank for d in r.dsts) == [0, 1, 2, 3]
    assert s.staging_nbytes == 0


def test_ring_touches_only_neighbours():
    t = load_topology("mesh-2d-16")
    s = plan(library.all_reduce(16, 16 * 256), t)
    from purlin.topology import is_direct
    for p in s.programs:
        for ins in p.instrs:
            refs = getattr(ins, "srcs", None) or (getattr(ins, "src", None),)
            for r in list(refs) + list(getattr(ins, "dsts", ())):
                if r is not None and r.rank != p.rank:
                    assert is_direct(t, p.rank, r.rank)


def test_cta_budget_is_honoured():
    for budget in (1, 2, 5, 64):
        s = plan(library.all_reduce(4, 1 << 20), cta_budget=budget)
        assert s.max_ctas() <= budget
        assert all(p.cta < budget for p in s.programs)


def test_staging_cycles_with_drain_signals():
    s = plan(library.all_gather(2, 1 << 16), policy=Policy(regime="throughput", chunk_nbytes=1024,
                                                           staging_nbytes=4096))
    assert s.staging_nbytes == 4096
    puts = [p for p in s.programs if p.role == "put"]
    assert any(isinstance(i, Wait) for p in puts for i in p.instrs)  # drains before reuse


def test_plan_is_pure_and_byte_identical():
    c = library.all_to_all_v(5, [library.v_splits(5, 4096, seed=r) for r in range(5)])
    a, b = plan(c), plan(c)
    assert to_json(a) == to_json(b) and digest(a) == digest(b)


def test_serialise_roundtrip_is_identity():
    for pol in ("latency", "throughput", "direct"):
        s = plan(library.all_reduce(3, 3 * 256, "bf16"), policy=Policy(regime=pol))
        back = from_json(to_json(s))
        assert back == s and to_json(back) == to_json(s)
        verify(back)


def test_golden_schedule_unchanged():
    """A small plan kept as JSON; a diff here means the planner's output changed."""
    import pathlib
    golden = pathlib.Path(__file__).parent.parent / "data" / "allgather-w3-throughput.json"
    s = plan(library.all_gather(3, 64), policy=Policy(regime="throughput", chunk_nbytes=32))
    assert json.loads(to_json(s)) == json.loads(golden.read_text())


def test_codesign_table():
    assert codesign("all_reduce", 2, 512 << 10, is_reduce=True).regime == "latency"
    big = codesign("all_reduce", 8, 256 << 10, is_reduce=True)
    assert (big.regime, big.algorithm) == ("direct", "two_shot")        # across GPUs: direct
    wide = codesign("all_reduce", 2, 64 << 20, is_reduce=True, cta_budget=132)
    assert (wide.put_ctas, wide.consumer_ctas) == (64, 64)               # ...with 64 CTAs a role
    assert (big.put_ctas, big.consumer_ctas) == (32, 32)                 # within the budget (64)
    assert codesign("all_gather", 16, 1 << 20, fully_connected=False).regime == "throughput"
    assert codesign("all_gather", 8, 1 << 30).chunk_nbytes == 2 << 20
    assert codesign("all_gather", 8, 64 << 20).chunk_nbytes == 1 << 20
    assert codesign("all_gather", 16, 1 << 20, fully_connected=False).algorithm == "ring"


def test_codesign_on_shared_memory_uses_the_measured_crossover():
    """Loopback worlds leave the latency regime where the H200 measurement put the
    crossover, per collective and world; below that they keep the latency regime."""
    def regime(name, w, n, red=False):
        return codesign(name, w, n, is_reduce=red, shared_memory=True).regime
    assert [regime("all_reduce", 8, n, True) for n in (8 << 10, 16 << 10)] == ["latency", "direct"]
    assert [regime("all_reduce", 4, n, True) for n in (64 << 10, 128 << 10)] == ["latency", "direct"]
    assert [regime("all_reduce", 2, n, True) for n in (128 << 10, 256 << 10)] == ["latency", "direct"]
    assert regime("all_gather_v", 8, 4 << 10) == "direct"          # V blocks: never packets at W=8
    assert [regime("reduce_scatter_v", 16, n, True) for n in (256 << 10, 512 << 10)] == [
        "latency", "direct"]                                      # larger worlds: the W=8 row
    # a direct AllReduce on shared memory is one-shot up to 128 KiB, then two-shot
    algo = lambda n: codesign("all_reduce", 8, n, is_reduce=True, shared_memory=True).algorithm
    assert (algo(128 << 10), algo(256 << 10)) == ("one_shot", "two_shot")
    # a name outside the table (a user's spec) keeps the general rule
    assert codesign("my_gather", 8, 64 << 10, shared_memory=True).regime == "latency"


def test_summary_counts_bytes_per_link_class():
    t = load_topology("hgx-h200-8")
    s = plan(library.all_gather(8, 1 << 20), t, Policy(regime="throughput"))
    d = summarize(s, t)
    assert d["roles"]["consume"]["bytes"]["nvlink read"] == 8 * 7 * (1 << 20)


@settings(max_examples=30, deadline=None)
@given(w=st.integers(1, 9), n=st.integers(1, 40), name=st.sampled_from(library.ALL),
       regime=st.sampled_from(["latency", "throughput", "direct"]),
       algorithm=st.sampled_from(["one_shot", "two_shot"]), budget=st.integers(1, 8))
def test_property_every_plan_verifies(w, n, name, regime, algorithm, budget):
    c = library.from_size(name, w, 16 * n * w)
    s = plan(c, minimal(w), Policy(regime=regime, algorithm=algorithm, chunk_nbytes=64), budget)
    verify(s)
    assert from_json(to_json(s)) == s


def test_planner_uses_a_sweep_table():
    table = {"topology": "minimal-4", "collective": "all_gather",
             "bands": [{"max_nbytes": 4096, "policy": {"regime": "direct"}},
                       {"max_nbytes": 1 << 40, "policy": {"regime": "throughput", "chunk_nbytes": 2048}}]}
    small = plan(library.all_gather(4, 256), table=table)
    big = plan(library.all_gather(4, 8192), table=table)
    assert small.policy["regime"] == "direct"
    assert big.policy["regime"] == "throughput" and big.policy["chunk_nbytes"] == 2048
    assert plan(library.all_reduce(4, 256), table=table).policy["regime"] == "latency"  # not covered


@pytest.mark.parametrize("name", ["all_reduce", "reduce_scatter_v", "all_gather_v", "all_to_all_v"])
def test_direct_on_one_gpu_gives_every_cta_an_equal_share(name):
    """Loopback topologies: auto picks direct past the latency regime, and every CTA of
    every rank gets the same payload bytes (to within one alignment unit), V forms too."""
    c = library.from_size(name, 8, 64 << 20, "fp32", seed=3)
    s = plan(c, minimal(8, loopback=True), cta_budget=16)
    assert s.policy["regime"] == "direct"
    share = {}
    for p in s.programs:
        moved = sum(i.nbytes for i in p.instrs if isinstance(i, (Copy, Reduce)))
        if moved:
            share[(p.rank, p.cta)] = moved
    assert len(share) == 8 * 16                                   # every CTA of every rank works
    sizes = sorted(share.values())
    assert len(set(sizes[1:])) == 1                               # equal, but for the last run,
    assert sizes[-1] - sizes[0] < 16 * len(sizes)                 # short by its rounding only
    total = sum(share.values())
    if name == "all_reduce":                                       # each output byte reduced once
        assert total == c.output.nbytes(0)
