"""Structural tests: plans checked without running them."""
import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from purlin.snac import Copy, Notify, Policy, PutPackets, Reduce, Wait, plan
from purlin.snac.policy import codesign, latency_max_nbytes, traits
from purlin.snac.report import summarize
from purlin.snac.serialize import digest, from_json, to_json
from purlin.snac.verify import verify
from purlin.spec import library
from purlin.topology import load_topology, minimal, with_overrides


def multi_gpu_box(n):
    """hgx-h200-8 with n of its GPUs (a what-if topology)."""
    import yaml
    from purlin.topology import data_root, parse_topology
    data = yaml.safe_load(data_root().joinpath("hgx-h200-8.yaml").read_text())
    data["gpus"], data["name"] = n, f"hgx-h200-{n}of8"
    return parse_topology(data)


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
    s = plan(library.all_gather(3, 64), policy=Policy(regime="throughput", chunk_nbytes=32,
                                                     put_ctas=16, consumer_ctas=28))
    assert json.loads(to_json(s)) == json.loads(golden.read_text())


def test_a_schema_2_schedule_reads_as_the_same_plan_flag_for_flag():
    """Schema 2 named one flag a Notify or Wait; a file of it (the golden plan before
    schema 3) reads, and lists the same instructions once each run of one-flag Notifies
    (Waits on one value) is one instruction, as the planner now writes it."""
    import pathlib

    from purlin.snac.ir import Notify, Wait
    v2 = from_json((pathlib.Path(__file__).parent.parent / "data" /
                    "allgather-w3-throughput-v2.json").read_text())
    s = plan(library.all_gather(3, 64), policy=Policy(regime="throughput", chunk_nbytes=32,
                                                     put_ctas=16, consumer_ctas=28))
    assert v2.schema_version == 3 and sum(len(p.instrs) for p in v2.programs) == 42

    def merged(instrs):
        out = []
        for ins in instrs:
            last = out[-1] if out else None
            if type(ins) is Notify and type(last) is Notify and last.value == ins.value and \
                    not set(ins.peers) & set(last.peers):
                out[-1] = Notify(last.peers + ins.peers, last.signals + ins.signals, ins.value)
            elif type(ins) is Wait and type(last) is Wait and last.value == ins.value:
                out[-1] = Wait(last.signals + ins.signals, ins.value)
            else:
                out.append(ins)
        return tuple(out)
    assert [merged(p.instrs) for p in v2.programs] == [p.instrs for p in s.programs]
    assert sum(len(p.instrs) for p in s.programs) == 36
    verify(v2)


def test_the_planner_tells_the_rules_which_copies_broadcast():
    """``generic`` passes all output bytes over all input bytes as the fanout: W for the
    AllGathers (V too), 1 for the AllToAlls, whatever the split; and whether the split
    is even. The even AllToAll of 64 MiB: 72 blocks of one 1 MiB chunk each, two rounds
    on 63 CTAs or on 36; its V form keeps the budget."""
    from purlin.snac.planner import generic
    nvl72 = load_topology("gb200-nvl72")
    got = {name: generic(library.from_size(name, 72, 64 << 20), nvl72, 64)
           for name in ("all_gather", "all_gather_v", "all_to_all", "all_to_all_v")}
    assert {k: p.put_ctas for k, p in got.items()} == {"all_gather": 30, "all_gather_v": 30, "all_to_all": 36,
                                                        "all_to_all_v": 63}
    assert got["all_to_all"].chunk_nbytes == 1 << 20


def test_an_even_all_to_all_takes_the_fewest_ctas_for_its_rounds():
    from purlin.snac.policy import _fewest_for_rounds
    assert [_fewest_for_rounds(n, 63) for n in (72, 576, 288, 63, 64, 8, 1)] == [36, 58, 58, 63, 32, 8, 1]
    for n in range(1, 300):
        for c in (1, 7, 36, 63):
            k = _fewest_for_rounds(n, c)
            assert k <= c and -(-n // k) == -(-n // c)          # no more rounds
            assert k == 1 or -(-n // (k - 1)) > -(-n // c)      # and no fewer CTAs would do
    t = traits(load_topology("gb200-nvl72"))
    mine = Policy(put_ctas=63)
    assert codesign("all_to_all", 72, 64 << 20, t, base=mine).put_ctas == 63   # a caller's count stays
    assert codesign("all_to_all", 72, 64 << 20, t, even=False).put_ctas == 63


def test_an_even_all_to_all_cuts_its_blocks_only_for_the_ctas_the_links_need():
    """A direct AllToAll feeds no pipeline (no consumer waits on a chunk), so a block is
    cut only into as many pieces as give the CTAs whose rates fill the links, one block in
    W being local (fill_ctas): 72 whole blocks on 36 CTAs on gb200-nvl72 at 1 GiB (not 512
    chunks of 2 MiB on 58; 16 would fill 720 GB/s at 48 a CTA), each 8 MiB block in 2 on
    an 8-GPU H200 box (16 chunks on 16 CTAs for 10, not 128 of 512 KiB on 43; a caller's
    chunk stays)."""
    t = traits(load_topology("gb200-nvl72"))
    assert t.fill_ctas == 16 == -(-720 * 72 // (71 * 48))
    big = codesign("all_to_all", 72, 1 << 30, t)
    assert (big.put_ctas, big.chunk_nbytes) == (36, 14913088)
    h200 = traits(load_topology("hgx-h200-8"))
    box = codesign("all_to_all", 8, 64 << 20, h200)
    assert (box.put_ctas, box.chunk_nbytes, h200.fill_ctas) == (16, 4 << 20, 10)
    assert codesign("all_to_all", 8, 64 << 20, h200, base=Policy(chunk_nbytes=512 << 10)).put_ctas == 43


def test_generic_rules_read_the_topology():
    """Without a table the rules read the topology: the latency regime while packets'
    flag bytes take less link time than two round trips (doubling the bandwidth doubles
    the threshold), Purlin's reader floor for CTAs, the budget less one on the role that
    works for direct, a chunk of one bandwidth-delay product."""
    h200 = load_topology("hgx-h200-8")
    t = dataclasses.replace(traits(h200), in_switch_reduce=False)   # the SM rules (switch: below)
    assert (t.link_gbps, round(t.rtt_us, 6), t.reader_floor) == (370.0, 0.9, 7)   # ceil(0.8 x 370 / 46)
    lat = latency_max_nbytes("all_reduce", 8, t, True)
    assert lat == pytest.approx(2 * 370e3 * 0.9 / 7)                               # 95 KB
    assert latency_max_nbytes("all_gather", 8, t, False) == pytest.approx(lat * 7 / (7 / 8))
    fast = traits(with_overrides(h200, link_bandwidth_scale=2))
    assert latency_max_nbytes("all_reduce", 8, fast, True) == pytest.approx(2 * lat)
    small = codesign("all_reduce", 8, 64 << 10, t, is_reduce=True)
    assert (small.regime, small.algorithm, small.put_ctas, small.consumer_ctas) == ("latency", "one_shot", 7, 14)
    big = codesign("all_reduce", 8, 256 << 10, t, is_reduce=True)
    assert (big.regime, big.algorithm, big.fence) == ("direct", "two_shot", "cta")
    assert (big.put_ctas, big.consumer_ctas) == (1, 63)          # the budget (64) on the reducers
    box = traits(multi_gpu_box(2))
    wide = codesign("all_reduce", 2, 64 << 20, dataclasses.replace(box, in_switch_reduce=False), cta_budget=132,
                    is_reduce=True)
    assert (wide.put_ctas, wide.consumer_ctas) == (1, 131)
    in_switch = codesign("all_reduce", 2, 64 << 20, box, cta_budget=132, is_reduce=True)
    assert (in_switch.atom, in_switch.consumer_ctas) == ("switch", box.link_ctas)
    copy = codesign("all_gather", 8, 64 << 20, t, even=False)
    assert (copy.put_ctas, copy.consumer_ctas) == (63, 1)                         # copies: put CTAs
    # even, one block per holder: 8 blocks of 16 chunks (a caller's), 3 rounds on 63 CTAs or on 43
    assert codesign("all_to_all", 8, 64 << 20, t, base=Policy(chunk_nbytes=512 << 10)).put_ctas == 43
    assert copy.chunk_nbytes == 512 << 10                                         # BDP 333 KB -> 2^19
    # each rank reads its 8 MiB block once: split over the 63 put CTAs, not the 64 MiB output
    assert codesign("all_gather", 8, 64 << 20, t, read_nbytes=8 << 20, even=False).chunk_nbytes == 133168   # ceil(8 MiB / 63, 16 B)
    assert codesign("all_gather", 8, 1 << 30, t, even=False).chunk_nbytes == 2 << 20          # at most 512 chunks
    # a broadcast (each input byte stored to 8 ranks) takes the CTAs that fill the links
    # twice over, ceil(2 x 370 / 46) = 17, and splits a rank's block over those
    assert t.link_ctas == 17
    bcast = codesign("all_gather", 8, 64 << 20, t, read_nbytes=8 << 20, fanout=8)
    assert (bcast.put_ctas, bcast.consumer_ctas, bcast.chunk_nbytes) == (17, 1, 493456)   # ceil(8 MiB / 17, 16 B)
    assert codesign("all_gather", 8, 64 << 20, t, fanout=1.99, even=False).put_ctas == 63   # not a broadcast
    # the least chunk (16 KiB) bounds what a copy moves: a broadcast's chunk stores to every
    # holder, so its share stands down to 16 KiB / fanout (a 64 KiB block: 3856 B on 17 CTAs)
    direct = Policy(regime="direct")
    small = codesign("all_gather", 8, 512 << 10, t, base=direct, read_nbytes=64 << 10, fanout=8)
    assert (small.put_ctas, small.chunk_nbytes) == (17, 3856)
    assert codesign("all_gather", 8, 512 << 10, t, base=direct, read_nbytes=64 << 10,
                    fanout=1.99).chunk_nbytes == 16 << 10
    assert codesign("all_gather", 8, 64 << 10, t, base=direct, read_nbytes=8 << 10, fanout=8).chunk_nbytes == 2048
    # ... in at most MAX_STORES (4096) stores a rank: 7 chunks to 576 holders, not 44
    rack = traits(load_topology("rubin-ultra-nvl576"))
    wide = codesign("all_gather", 576, 4 << 20, rack, read_nbytes=7280, fanout=576)
    assert (wide.put_ctas, wide.chunk_nbytes, -(-7280 // wide.chunk_nbytes)) == (44, 1040, 7)
    assert codesign("all_gather", 576, 64 << 20, rack, read_nbytes=116496, fanout=576).chunk_nbytes == 16 << 10
    assert codesign("all_reduce", 8, 64 << 20, t, is_reduce=True, fanout=8).consumer_ctas == 63
    one_gpu = dataclasses.replace(t, shared_memory=True)                          # HBM, not links
    assert codesign("all_gather", 8, 64 << 20, one_gpu, fanout=8).put_ctas == 63
    mesh = traits(load_topology("mesh-2d-16"))
    ring = codesign("all_gather", 16, 1 << 20, mesh)
    assert (ring.regime, ring.algorithm) == ("throughput", "ring")


def test_generic_rules_reduce_in_the_switch_where_it_reduces():
    """Where the switches reduce, a reduction left to the rules takes the direct regime
    and the switch Atom at every size, but an even ReduceScatter past 16 MiB a rank
    (links bind: the SM moves (W - 1) / W of each input, the switch all of it); copies
    signal their peers in rotated order, reductions in rank order."""
    t = traits(load_topology("gb200-nvl72"))
    assert t.in_switch_reduce and not traits(load_topology("mesh-2d-16")).in_switch_reduce
    for name, size, atom in (("all_reduce", 4 << 10, "switch"), ("all_reduce", 1 << 30, "switch"),
                             ("reduce_scatter", 16 << 20, "switch"), ("reduce_scatter", 64 << 20, "sm"),
                             ("reduce_scatter_v", 1 << 30, "switch")):
        p = codesign(name, 72, size, t, is_reduce=True)
        assert (p.regime, p.atom, p.notify_order) == ("direct", atom, "rank"), (name, size)
    for name in ("all_gather", "all_to_all_v"):
        p = codesign(name, 72, 64 << 20, t)
        assert (p.regime, p.atom, p.notify_order) == ("direct", "sm", "rotated")
    chosen = codesign("all_reduce", 72, 1 << 20, t, is_reduce=True, base=Policy(regime="direct"))
    assert (chosen.atom, chosen.notify_order) == ("sm", "rank")   # a caller's choice: no rule on top
    # in the switch a CTA's rate does not fall with W: an even reduction takes the CTAs
    # that fill the links twice over (ceil(2 x 720 / 48) = 30); on the SM, or a V split
    # (its largest shard's chunks), the budget less one
    cons = {(name, size, even): codesign(name, 72, size, t, is_reduce=True, even=even).consumer_ctas
            for name, size, even in (("all_reduce", 1 << 30, True), ("reduce_scatter", 16 << 20, True),
                                     ("reduce_scatter", 64 << 20, True), ("reduce_scatter_v", 1 << 30, False))}
    assert list(cons.values()) == [30, 30, 63, 63]


def test_generic_rules_on_one_gpu_take_the_direct_regime():
    """A loopback topology states no latency, so no round trip to hide: direct throughout,
    dealing the work over the budget's CTAs (a shipped loopback has a table instead)."""
    t = traits(minimal(8, loopback=True))
    assert t.shared_memory and t.rtt_us == 0 and t.link_gbps == 1000 / 8
    assert codesign("all_reduce", 8, 1 << 10, t, cta_budget=16, is_reduce=True).regime == "direct"


def test_a_shipped_topology_plans_from_its_table_and_a_what_if_from_the_rules():
    from purlin.snac.planner import resolve
    c = library.all_reduce(8, 64 << 10)
    h200 = load_topology("hgx-h200-8")
    pol, src = resolve(c, h200, None, 64)
    assert src["source"] == "table" and src["table"] == "topologies/codesign/hgx-h200-8.json"
    assert src["world"] == 8 and src["band"][0] < 64 << 10 <= src["band"][1]
    what_if = with_overrides(h200, link_bandwidth_scale=2)
    pol2, src2 = resolve(c, what_if, None, 64)
    assert src2["source"] == "generic" and "not a shipped topology unchanged" in src2["why"]
    assert pol2 == codesign("all_reduce", 8, 64 << 10, traits(what_if), 64, True)
    _, src3 = resolve(c, h200, Policy(regime="direct"), 64)          # a policy of one's own
    assert src3 == {"source": "policy", "auto_filled": ["algorithm", "chunk_nbytes", "put_ctas",
                                                        "consumer_ctas"]}
    table = json.loads((Path(__file__).parents[2] / "topologies" / "codesign" / "hgx-h200-8.json").read_text())
    _, src4 = resolve(c, what_if, None, 64, table=table)             # unless a table is given
    assert src4["source"] == "table" and src4["table"].startswith("given")


def test_summary_counts_bytes_per_link_class():
    t = load_topology("hgx-h200-8")
    s = plan(library.all_gather(8, 1 << 20), t, Policy(regime="throughput"))
    d = summarize(s, t)
    assert d["roles"]["consume"]["bytes"]["nvlink read"] == 8 * 7 * (1 << 20)


def test_large_defaults_stay_small_to_plan():
    """What planning costs grows with the instructions: the defaults at 1 GiB (8 ranks)
    and 64 MiB (72 ranks) stay within a few per chunk. (The time is a benchmark's
    figure: benchmarks/planner_speed.py.)"""
    big = plan(library.all_reduce(8, 1 << 30), load_topology("hgx-h200-8"))
    assert sum(len(p.instrs) for p in big.programs) < 16_000
    wide = plan(library.from_size("all_to_all_v", 72, 64 << 20), load_topology("gb200-nvl72"))
    assert sum(len(p.instrs) for p in wide.programs) < 40_000


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
