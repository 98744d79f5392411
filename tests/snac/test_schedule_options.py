"""The schedule options the codesign search added (policy.fence, policy.push_nbytes,
policy.notify_order, policy.start):
unset they plan exactly as before; set, every plan verifies and the reference executor
gives the spec's answer, over repeated calls; and they change what they say they change."""
import numpy as np
import pytest

from purlin.backends.reference import Reference
from purlin.errors import PlanError
from purlin.snac import Notify, Policy, PutPackets, Reduce, Wait, WaitPackets, plan
from purlin.snac.serialize import programs_digest, to_json
from purlin.snac.verify import verify
from purlin.spec import library
from purlin.topology import load_topology, minimal
from tests.backends.test_reference import collectives
from tests.helpers import assert_matches, random_inputs

SHAPES = [Policy(regime="direct", algorithm="two_shot", fence="cta"),
          Policy(regime="direct", algorithm="one_shot", fence="cta"),
          Policy(regime="throughput", algorithm="two_shot", fence="cta"),
          Policy(regime="throughput", algorithm="ring", fence="cta"),
          Policy(regime="latency", algorithm="one_shot", push_nbytes=128),
          Policy(regime="latency", algorithm="two_shot", push_nbytes=192),
          Policy(regime="direct", algorithm="two_shot", fence="cta", notify_order="rotated"),
          Policy(regime="throughput", algorithm="one_shot", notify_order="rotated"),
          Policy(regime="direct", algorithm="two_shot", fence="gather", start="gate"),
          Policy(regime="direct", algorithm="one_shot", fence="gather", start="gate", notify_order="rotated"),
          Policy(regime="throughput", algorithm="ring", fence="gather", start="gate"),
          Policy(regime="throughput", algorithm="two_shot", start="gate")]


def run(c, pol, calls=3, chunk=64, staging=512, topology=None, budget=64):
    s = plan(c, topology, pol.with_(chunk_nbytes=chunk, staging_nbytes=staging), budget)
    ref = Reference(s)
    rng = np.random.default_rng(c.world)
    outs = [np.full(c.output.nbytes(r), 0xCD, np.uint8) for r in range(c.world)]
    for _ in range(calls):
        x = random_inputs(c, rng)
        assert_matches(c, s, ref(x, outs), x)
    return s


@pytest.mark.parametrize("pol", SHAPES, ids=lambda p: f"{p.regime}-{p.algorithm}-{p.fence}-{p.push_nbytes}-{p.notify_order}-{p.start}")
@pytest.mark.parametrize("w", [2, 3, 5, 8])
def test_new_shapes_run_right_on_the_reference_executor(w, pol):
    for c in collectives(w, 96):
        run(c, pol, budget=6)   # few CTAs: roles fold, fences land on busy CTAs


def test_new_shapes_on_one_gpu_and_at_world_16():
    for pol in SHAPES:
        for c in (library.all_reduce(8, 8 * 256), library.all_to_all_v(8, [library.v_splits(8, 8 * 96, seed=r) for r in range(8)])):
            run(c, pol, topology=minimal(8, loopback=True), budget=4)
        run(library.reduce_scatter(16, 16 * 64), pol, budget=8)


def test_unset_options_plan_as_before():
    """fence='rank' and push_nbytes=None are what the planner did before they existed:
    the policy dict, the JSON and the programs do not mention or change them."""
    c = library.all_reduce(4, 4096)
    for regime in ("latency", "throughput", "direct"):
        a = plan(c, policy=Policy(regime=regime, chunk_nbytes=256))
        b = plan(c, policy=Policy(regime=regime, chunk_nbytes=256, fence="rank", push_nbytes=None,
                                  notify_order="rank", start="cta"))
        assert to_json(a) == to_json(b)
        assert not {"fence", "push_nbytes", "notify_order", "start"} & set(a.policy)
    one = plan(c, policy=Policy(regime="latency", chunk_nbytes=256, push_nbytes=256))
    assert programs_digest(one) == programs_digest(plan(c, policy=Policy(regime="latency", chunk_nbytes=256)))


def test_cta_fence_waits_one_signal_per_peer_per_cta():
    """Direct AllReduce, 8 ranks x 16 reducers: with fence='rank' CTA 0 of each rank
    waits for 7 x 16 end signals; with 'cta' CTA c waits for the 7 CTAs c of its peers."""
    c = library.all_reduce(8, 1 << 20)
    t = load_topology("hgx-h200-8")
    base = Policy(regime="direct", algorithm="two_shot", chunk_nbytes=8192, put_ctas=1, consumer_ctas=16)

    def end_waits(s):   # Waits after a CTA's last data instruction
        out = {}
        for p in s.programs:
            last = max((i for i, x in enumerate(p.instrs) if not isinstance(x, (Wait, Notify))), default=-1)
            out[(p.rank, p.cta)] = sum(len(x.signals) for x in p.instrs[last + 1:] if isinstance(x, Wait))
        return out
    rank = end_waits(plan(c, t, base))
    cta = end_waits(plan(c, t, base.with_(fence="cta")))
    assert rank[(0, 0)] == 7 * 16 and max(v for k, v in rank.items() if k[1]) == 0
    assert max(cta.values()) == 7 and cta[(0, 0)] == 0 and cta[(0, 1)] == 7
    assert sum(cta.values()) == sum(rank.values())   # the same fences, spread


def test_push_nbytes_pushes_fewer_larger_packets():
    """One-shot latency AllReduce of 16 KiB at W=8: 1 KiB chunks, 4 KiB pushes: a rank
    pushes 7 x 4 windows of 4 KiB, and still reduces 16 pieces of 1 KiB, each waiting
    on the packets of its piece only."""
    c = library.all_reduce(8, 16 << 10)
    s = plan(c, policy=Policy(regime="latency", chunk_nbytes=1024, push_nbytes=4096, put_ctas=4,
                              consumer_ctas=16))
    puts = [i for p in s.programs if p.rank == 0 for i in p.instrs if isinstance(i, PutPackets)]
    assert len(puts) == 7 * 4 and {i.nbytes for i in puts} == {4096}
    reds = [(p, i) for p in s.programs if p.rank == 0 for i in p.instrs if isinstance(i, Reduce)]
    assert len(reds) == 16 and {i.nbytes for _, i in reds} == {1024}
    waits = [i for p in s.programs if p.rank == 0 for i in p.instrs if isinstance(i, WaitPackets)]
    assert len(waits) == 16 * 7 and {i.nbytes for i in waits} == {1024}
    verify(s)


def test_rotated_notify_order_starts_each_rank_with_the_next():
    """Direct AllGather, 8 ranks: every notifying run of rank r names r+1, r+2, ... and
    wraps; in rank order it names 0, 1, ... skipping r. The same Notifies either way."""
    c = library.all_gather(8, 8 * 4096)
    base = Policy(regime="direct", algorithm="one_shot", chunk_nbytes=4096, put_ctas=2, consumer_ctas=1)

    def runs(s):
        out = {}
        for p in s.programs:
            peers = [q for x in p.instrs if isinstance(x, Notify) for q in x.peers]
            out[(p.rank, p.cta)] = peers[:7]
        return out
    rank, rot = runs(plan(c, policy=base)), runs(plan(c, policy=base.with_(notify_order="rotated")))
    assert rank[(3, 0)] == [0, 1, 2, 4, 5, 6, 7] and rot[(3, 0)] == [4, 5, 6, 7, 0, 1, 2]
    assert rot[(7, 1)] == [0, 1, 2, 3, 4, 5, 6] and rank[(0, 0)] == rot[(0, 0)]
    assert all(sorted(rank[k]) == sorted(rot[k]) for k in rank)


def test_bad_option_values_are_refused():
    with pytest.raises(PlanError, match="policy.fence 'all': choose one of rank, cta"):
        Policy(fence="all").check()
    with pytest.raises(PlanError, match="policy.notify_order 'ring': choose one of rank, rotated"):
        Policy(notify_order="ring")
    with pytest.raises(PlanError, match="push_nbytes 100 is not a multiple of chunk_nbytes 64"):
        Policy(chunk_nbytes=64, push_nbytes=100).check()


@pytest.mark.parametrize("pol", SHAPES, ids=lambda p: f"{p.regime}-{p.algorithm}-{p.fence}-{p.push_nbytes}-{p.notify_order}-{p.start}")
def test_new_shapes_run_right_on_the_gpu_kernels_cpu_model(pol):
    """The GPU interpreter's CPU model (purlin.backends.gpu.emulate reads the encoded
    arrays as cuda/snac.cu does) gives the reference executor's bytes, over calls."""
    from purlin.backends.gpu.emulate import Emulator, encode
    for name in ("all_reduce", "reduce_scatter_v", "all_gather", "all_to_all_v"):
        c = library.from_size(name, 4, 4096, "fp32", seed=2)
        s = plan(c, policy=pol.with_(chunk_nbytes=64), cta_budget=5)
        emu, ref = Emulator(encode(s), s), Reference(s)
        rng = np.random.default_rng(1)
        for call in range(3):
            x = random_inputs(c, rng)
            got, want = emu(x), ref(x)
            assert all(np.array_equal(got[r], want[r]) for r in range(4)), (name, call)


def test_gate_and_gather_signal_each_peer_once_per_rank():
    """Direct AllGather, 8 ranks x 4 put CTAs. Per rank, with the start and the end per CTA:
    7 start flags out, each CTA waits for the 7 peers' starts, tells the 7 owners' CTA c it
    is done and waits for the 7 peers' CTA c (35 flags out, 56 waited). With start='gate'
    and fence='gather' only CTA 0 meets the peers: 7 starts waited, 1 local release, 3 local
    reports, 7 reports out and 7 in (18 out, 20 waited). CTA 1 waits for its CTA 0's second
    Notify (value 2) on rank 3's eighth signal (the first seven are the peers' CTAs 0)."""
    c = library.all_gather(8, 8 * 4096)
    base = Policy(regime="direct", algorithm="one_shot", chunk_nbytes=1024, put_ctas=4, consumer_ctas=1)

    def flags(s, rank, kind):
        return sum(len(i.signals) for p in s.programs if p.rank == rank for i in p.instrs
                   if isinstance(i, kind))
    per_cta, gated = plan(c, policy=base.with_(fence="cta")), plan(c, policy=base.with_(start="gate", fence="gather"))
    for r in range(8):
        assert (flags(per_cta, r, Notify), flags(per_cta, r, Wait)) == (35, 56)
        assert (flags(gated, r, Notify), flags(gated, r, Wait)) == (18, 20)
    cta1 = next(p for p in gated.programs if (p.rank, p.cta) == (3, 1)).instrs
    assert cta1[0] == Wait((7,), 2) and isinstance(cta1[-1], Notify) and cta1[-1].peers == (3,)
    cta0 = next(p for p in gated.programs if (p.rank, p.cta) == (3, 0)).instrs
    assert [type(i).__name__ for i in cta0[:3]] == ["Notify", "Wait", "Notify"] and cta0[2].peers == (3,)


def test_gated_start_still_guards_peer_buffers():
    """The gate carries the start: a gated plan whose gate Wait is dropped is refused for
    touching a peer's buffer before that peer started."""
    from purlin.errors import ScheduleError
    from dataclasses import replace
    c = library.all_gather(4, 4 * 4096)
    s = plan(c, policy=Policy(regime="direct", algorithm="one_shot", chunk_nbytes=1024, put_ctas=2,
                              consumer_ctas=1, start="gate", fence="gather"))
    k = next(j for j, p in enumerate(s.programs) if (p.rank, p.cta) == (1, 1))
    prog = s.programs[k]
    assert isinstance(prog.instrs[0], Wait)
    bad = replace(s, programs=s.programs[:k] + (replace(prog, instrs=prog.instrs[1:]),) + s.programs[k + 1:])
    with pytest.raises(ScheduleError, match=r"missing start handshake"):
        verify(bad)


def test_bad_start_option_is_a_clear_error():
    with pytest.raises(PlanError, match=r"policy.start 'gated': choose one of cta, gate"):
        Policy(start="gated")
