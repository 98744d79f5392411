"""What the model says about two surprises on gb200-nvl72 under the default policy of
before 2026-12-01 (the first pinned here as ``OLD_DEFAULT``).

1. AllGather 64 MiB takes ~1,412 us and 256 MiB ~1,592 us (busbw 47, then 166 GB/s).
   Mechanism: a direct AllGather copies each chunk of a rank's block once, storing it to
   all 72 outputs (a broadcast store), so the issuing CTA's loop runs 72 store streams:
   its rate is 1 / (72 / 48 GB/s) = 0.67 GB/s (sm.cta_remote_gbps 48 per stream). The
   default chunk (1 MiB) is sized from the 64 MiB *output*, but a rank's block is 1/72 of
   it (0.93 MB): one chunk, so one CTA of 32 works and the call lasts block / 0.67 GB/s.
   At 256 MiB a block is 3.6 chunks: four CTAs, each with at most 1 MiB, so the time
   grows only by 1 MiB / 0.93 MB while the bytes grow 4x. Links (720 GB/s) never fill.
   Chunks that spread a block over the 32 put CTAs make it ~8x faster; the generic rules
   now split a rank's input (not its output) over its put CTAs, 13x faster.
2. AllReduce takes 148 us at 128 KiB and 30 us at 256 KiB: the default table switches
   from the latency regime (one-shot: every rank pushes its whole buffer to all 71 peers
   as packets, 8 put CTAs building them at packet_gbps) to the direct regime at 128 KiB,
   the threshold Purlin found at W=8. Pushes grow with W: at W=72 the latency regime
   already loses at 128 KiB (the direct regime takes ~24 us there).

Both are the default policy's choices (chunk from the wrong buffer; an 8-GPU threshold
at 72 GPUs), not the simulator's physics: the codesign tables per system replace them.
"""
import pytest

from purlin.sim import simulate
from purlin.sim.calibration import load_calibration
from purlin.sim.fabric import Fabric
from purlin.snac import Policy, plan
from purlin.snac.ir import Copy
from purlin.spec import library
from purlin.topology import load_topology

NVL72 = load_topology("gb200-nvl72")
CAL = load_calibration("gb200")


# the generic rules' direct AllGather on NVL72 until 2026-12-01: the chunk sized from the
# output, the budget split evenly between the roles
OLD_DEFAULT = Policy(regime="direct", algorithm="one_shot", chunk_nbytes=1 << 20, put_ctas=32,
                     consumer_ctas=32, fence="cta")


def _all_gather(size, policy=OLD_DEFAULT):
    c = library.from_size("all_gather", 72, size)
    s = plan(c, NVL72, policy, check=False)
    return c, s, simulate(s, NVL72, CAL)


def test_allgather_64mib_is_one_broadcast_copy_per_rank_at_one_ctas_rate():
    c, s, r = _all_gather(64 << 20)
    block = c.input.nbytes(0)
    assert s.policy["regime"] == "direct" and s.policy["chunk_nbytes"] == 1 << 20 > block
    copies = [(p, ins) for p in s.programs for ins in p.instrs if isinstance(ins, Copy)]
    assert len(copies) == 72 and {len(ins.dsts) for _, ins in copies} == {72}
    assert len({(p.rank, p.cta) for p, _ in copies}) == 72          # one CTA per rank works
    spec = Fabric(NVL72, CAL).flow(copies[0][1], copies[0][0].rank, "copy")
    per_stream = CAL.sm.cta_remote_gbps * 1e3                       # B/us per store stream
    assert spec.cap_Bpus == pytest.approx(per_stream / 72)          # 0.67 GB/s
    # the copy of rank 0 runs its op start, then its bytes at that cap, nothing else
    span = next(x for x in r.timeline if x.kind == "Copy" and x.rank == 0)
    assert span.end_us - span.start_us == pytest.approx(spec.pre_us + block / spec.cap_Bpus, rel=1e-6)
    assert r.time_us == pytest.approx(1411.8, rel=1e-3)
    assert r.busbw_gbps == pytest.approx(46.9, rel=1e-2)
    busiest = max(v["busy_fraction"] for k, v in r.utilisation.items() if "->" in k)
    assert busiest < 0.1                                             # the links idle


def test_allgather_256mib_spreads_over_four_ctas_so_time_grows_by_the_largest_chunk():
    c64, _, r64 = _all_gather(64 << 20)
    c256, s, r256 = _all_gather(256 << 20)
    copies = [(p, ins) for p in s.programs for ins in p.instrs if isinstance(ins, Copy)]
    per_rank = {}
    for p, ins in copies:
        per_rank.setdefault(p.rank, set()).add(p.cta)
    assert {len(v) for v in per_rank.values()} == {4}
    assert max(ins.nbytes for _, ins in copies) == 1 << 20
    # bytes x4, time x(largest chunk per CTA / the one 64 MiB chunk)
    assert r256.time_us / r64.time_us == pytest.approx((1 << 20) / c64.input.nbytes(0), rel=0.01)
    assert r256.busbw_gbps / r64.busbw_gbps == pytest.approx(3.55, rel=0.02)


def test_allgather_64mib_with_chunks_for_every_put_cta_is_eight_times_faster():
    c, _, slow = _all_gather(64 << 20)
    chunk = -(-c.input.nbytes(0) // 32 // 16) * 16                  # a block over 32 CTAs
    _, _, fast = _all_gather(64 << 20, Policy(regime="direct", chunk_nbytes=chunk, put_ctas=32))
    assert slow.time_us / fast.time_us > 8.0
    assert fast.busbw_gbps > 375.0


def test_the_default_now_spreads_a_block_over_the_put_ctas_that_fill_the_links():
    """The generic rules split a rank's 0.93 MB block over its put CTAs (one CTA for the
    idle consumer role), and a broadcast takes as many as fill the links twice over: 30
    at 720 GB/s and 48 GB/s a CTA. 30 chunks of 31,072 B per rank, 13x the old default;
    the whole budget's 63 CTAs (16 KiB chunks) predicted 105.99 us, within 0.1%."""
    c, s, r = _all_gather(64 << 20, None)
    assert (s.policy["regime"], s.policy["put_ctas"], s.policy["consumer_ctas"]) == ("direct", 30, 1)
    assert 30 * CAL.sm.cta_remote_gbps >= 2 * 720.0 > 29 * CAL.sm.cta_remote_gbps
    assert s.policy["chunk_nbytes"] == 31072 and -(-c.input.nbytes(0) // 31072) == 30
    _, _, old = _all_gather(64 << 20)
    assert r.time_us == pytest.approx(106.08, rel=1e-3) and old.time_us / r.time_us > 13
    _, _, whole = _all_gather(64 << 20, Policy(regime="direct", put_ctas=63, consumer_ctas=1, fence="cta",
                                               notify_order="rotated"))
    assert whole.time_us == pytest.approx(105.99, rel=1e-3)
    assert r.busbw_gbps > 600.0


def test_a_small_broadcast_chunk_counts_every_store():
    """At 4 MiB a rank's block is 58,240 B. Its share over 30 put CTAs is 1,952 B, and a
    copy of it stores 71 x 1,952 = 138 KB: the 16 KiB least chunk bounds those stored
    bytes, not the read ones. Held to 16 KiB, the block took 4 chunks on 4 CTAs and 38.65
    us, as long as the 16 MiB AllGather (15 chunks of 16 KiB: the same per-CTA work);
    one chunk per CTA takes half that."""
    c, s, r = _all_gather(4 << 20, None)
    assert c.input.nbytes(0) == 58240 and -(-58240 // 30 // 16) * 16 == 1952
    assert (s.policy["regime"], s.policy["put_ctas"], s.policy["chunk_nbytes"]) == ("direct", 30, 1952)
    copies = [i for p in s.programs if p.rank == 0 for i in p.instrs if type(i) is Copy and len(i.dsts) > 1]
    assert len(copies) == 30 and {len(i.dsts) for i in copies} == {72}
    held = Policy(regime="direct", chunk_nbytes=16 << 10, put_ctas=30, consumer_ctas=1, fence="cta",
                  notify_order="rotated")
    _, _, old = _all_gather(4 << 20, held)
    _, _, old16 = _all_gather(16 << 20, held)
    assert old.time_us == pytest.approx(38.65, rel=1e-3) and old16.time_us == pytest.approx(old.time_us, rel=1e-9)
    assert r.time_us == pytest.approx(19.15, rel=1e-3)


def test_an_all_to_all_in_whole_blocks_is_as_fast_as_in_chunks():
    """A direct AllToAll of 1 GiB is link-bound (busbw ~711 GB/s of 720): its 72 blocks of
    14.9 MB as whole copies on 36 CTAs (two each: 36 x 48 GB/s fills the links twice) take
    1482.37 us, where the old rule's 2 MiB chunks on 58 CTAs took 1488.31 in 41,472 flows
    (benchmarks/results/generic_rules_all_to_all_blocks.json: a minute to simulate, too
    long for a test); here 5,184 flows."""
    c = library.from_size("all_to_all", 72, 1 << 30)
    s = plan(c, NVL72, check=False)
    assert (s.policy["put_ctas"], s.policy["chunk_nbytes"]) == (36, 14913072)
    new = simulate(s, NVL72, CAL, record=False, exact=True)   # settled at every change
    assert new.time_us == pytest.approx(1482.37, rel=1e-5) and new.stats["flows"] == 5184
    assert 700.0 < new.busbw_gbps <= 720.0                        # the links, nearly full


def test_allreduce_128k_was_slow_because_the_hand_table_kept_it_in_the_latency_regime():
    """The H200 hand table's latency regime at 128 KiB on NVL72 took 148 us (issue 16). The
    latency one-shot pushes 71 copies of the buffer as packets from 8 put CTAs: a floor of
    71 x 128 KiB / (8 x packet_gbps) = 64 us, against ~26 us in the direct regime, which is
    what the default (generic rules reading NVL72's links, until its codesign table is
    committed, or that table) now picks."""
    c = library.from_size("all_reduce", 72, 128 << 10)
    latency = plan(c, NVL72, Policy(regime="latency", put_ctas=8), check=False)
    assert latency.policy["put_ctas"] == 8
    slow = simulate(latency, NVL72, CAL, record=False).time_us
    floor = 71 * (128 << 10) / (8 * CAL.packet_gbps * 1e3)
    assert floor == pytest.approx(64.0, rel=1e-2) and slow > floor
    default = plan(c, NVL72, check=False)
    assert default.policy["regime"] == "direct"
    assert simulate(default, NVL72, CAL, record=False).time_us < floor / 2
