"""The engine on tiny hand-made schedules, with exact expected times.

minimal(2): 100 GB/s links (1e5 B/us), 0.05 us per link + 0.4 us switch = 0.5 us path
latency, 1 TB/s HBM. Calibration from conftest: launch 1, op start 0.2, signal 0.5,
notify issue 0.1, CTA caps out of the way unless a test lowers them.
"""
import json

import pytest

from purlin.errors import Deadlock, ScheduleError
from purlin.sim import simulate
from purlin.snac.ir import (INSTRUCTIONS, Copy, Notify, Program, PutPackets, Reduce, Ref, Wait,
                            WaitPackets)
from purlin.topology import minimal

from tests.sim.simkit import MB, pull_copy, round_calibration, schedule


def test_pull_copy_1mb_over_100gbps_is_10us_plus_latencies(cal):
    r = simulate(pull_copy(), minimal(2), cal)
    t = {(x.rank, x.instr): (x.start_us, x.end_us) for x in r.timeline}
    assert t[(0, 0)] == pytest.approx((1.0, 3.2))     # local copy: HBM read+write at 1 TB/s
    assert t[(0, 1)] == pytest.approx((3.2, 3.3))     # notify issue
    assert t[(1, 0)] == pytest.approx((1.0, 4.3))     # flag lands 0.5 signal + 0.5 path later
    # pull: 0.2 start + 1.0 round trip + 1 MB / 100 GB/s = 10 us
    assert t[(1, 1)] == pytest.approx((4.3, 4.3 + 0.2 + 1.0 + 10.0))
    assert r.time_us == pytest.approx(15.5)
    u = r.utilisation
    assert u["gpu0->switch"]["bytes"] == pytest.approx(MB)
    assert u["switch->gpu1"]["busy_fraction"] == pytest.approx(MB / (100e9 * 15.5e-6))
    assert u["gpu1->switch"]["bytes"] == 0.0


def _two_pulls(atoms=("sm", "sm")):
    progs = [Program(1, k, "consume", (Copy(Ref(0, "input", 0), (Ref(1, "output", k * MB),), MB,
                                            atom),))
             for k, atom in enumerate(atoms)]
    return schedule(progs)


def test_two_flows_on_one_link_each_get_half(cal):
    r = simulate(_two_pulls(), minimal(2), cal)
    ends = [x.end_us for x in r.timeline]
    assert ends == pytest.approx([1.0 + 1.2 + 20.0] * 2)  # 50 GB/s each


def test_cta_capped_flow_leaves_spare_capacity_to_the_other(cal):
    # the sm CTA is capped at 20 GB/s; the tma one takes the remaining 80 (max-min)
    c = round_calibration(**{"sm.cta_remote_gbps": 20.0})
    r = simulate(_two_pulls(("sm", "tma")), minimal(2), c)
    ends = {x.cta: x.end_us for x in r.timeline}
    assert ends[1] == pytest.approx(2.2 + MB / 80e3)            # 12.5 us at 80 GB/s
    assert ends[0] == pytest.approx(2.2 + MB / 20e3)            # 50 us at its own cap


def test_reduce_cta_cap_is_per_stream():
    # 2 remote sources at 50 GB/s per stream plus the output side at 100 => 20 GB/s out
    c = round_calibration(**{"sm.cta_remote_gbps": 50.0, "sm.reduce_out_gbps": 100.0})
    prog = Program(2, 0, "reduce", (Reduce((Ref(0, "input", 0), Ref(1, "input", 0)),
                                           (Ref(2, "output", 0),), MB, "fp32", "add"),))
    r = simulate(schedule([prog], world=3), minimal(3), c)
    assert r.time_us == pytest.approx(1.0 + 1.2 + MB / 20e3)


def test_local_reduce_pays_per_source_and_per_output():
    # 4 local sources at 100 GB/s each plus the output at 50 => 1/(1/50 + 4/100) = 16.7 GB/s
    c = round_calibration(**{"sm.reduce_src_gbps": 100.0, "sm.reduce_out_gbps": 50.0})
    prog = Program(0, 0, "reduce", (Reduce(tuple(Ref(0, "input", 0) for _ in range(4)),
                                           (Ref(0, "output", 0),), MB, "fp32", "add"),))
    r = simulate(schedule([prog], world=2), minimal(2), c)
    assert r.time_us == pytest.approx(1.0 + 0.2 + MB / (1e3 / (1 / 50 + 4 / 100)))


def test_packets_cost_twice_the_wire_and_land_with_their_flag(cal):
    put = Program(0, 0, "put", (PutPackets(Ref(0, "input", 0), Ref(1, "packets", 0), MB, 1),))
    wait = Program(1, 0, "consume", (WaitPackets(Ref(1, "packets", 0), MB, 1),))
    r = simulate(schedule([put, wait]), minimal(2), cal)
    t = {x.rank: x.end_us for x in r.timeline}
    assert t[0] == pytest.approx(1.0 + 0.2 + 20.0)      # 2 MB on the wire at 100 GB/s
    assert t[1] == pytest.approx(t[0] + 0.5 + 0.5)      # path + signal latency
    assert r.utilisation["gpu0->switch"]["bytes"] == pytest.approx(2 * MB)


def test_wait_packets_needs_every_piece_with_its_value(cal):
    half = MB // 2
    puts = [Program(0, k, "put", (PutPackets(Ref(0, "input", k * half), Ref(1, "packets", k * half),
                                             half, 1),)) for k in range(2)]
    wait = Program(1, 0, "consume", (WaitPackets(Ref(1, "packets", 0), MB, 1),))
    r = simulate(schedule(puts + [wait]), minimal(2), cal)
    assert r.time_us == pytest.approx(1.0 + 0.2 + 20.0 + 1.0)  # two halves share the link

    wrong = [Program(0, 0, "put", (PutPackets(Ref(0, "input", 0), Ref(1, "packets", 0), MB, 2),)),
             wait]
    with pytest.raises(Deadlock, match=r"rank 1, cta 0, instr 0: WaitPackets"):
        simulate(schedule(wrong), minimal(2), cal)


def _reduce_to_rank0(atom):
    srcs = tuple(Ref(r, "input", 0) for r in range(4))
    return schedule([Program(0, 0, "reduce", (Reduce(srcs, (Ref(0, "output", 0),), MB, "fp32",
                                                     "add", atom),))], world=4)


def test_switch_reduce_crosses_each_uplink_once(cal):
    topo = minimal(4, in_switch_reduce=True)
    r = simulate(_reduce_to_rank0("switch"), topo, cal)
    assert r.time_us == pytest.approx(1.0 + 0.2 + 1.0 + 10.0)
    for g in range(4):
        assert r.utilisation[f"gpu{g}->switch"]["bytes"] == pytest.approx(MB)
    assert r.utilisation["switch->gpu0"]["bytes"] == pytest.approx(MB)
    # the same Reduce by SM loads: three remote sources share rank 0's downlink
    r_sm = simulate(_reduce_to_rank0("sm"), topo, cal)
    assert r_sm.utilisation["switch->gpu0"]["bytes"] == pytest.approx(3 * MB)
    assert r_sm.time_us == pytest.approx(1.0 + 0.2 + 1.0 + 30.0)


def test_switch_atom_without_in_switch_reduce_is_refused(cal):
    with pytest.raises(ScheduleError, match=r"rank 0, cta 0, instr 0: .*in.switch"):
        simulate(_reduce_to_rank0("switch"), minimal(4), cal)


def test_loopback_touches_only_hbm(cal):
    prog = Program(1, 0, "consume", (Copy(Ref(0, "input", 0), (Ref(1, "output", 0),), MB),))
    r = simulate(schedule([prog]), minimal(2, loopback=True), cal)
    assert r.time_us == pytest.approx(1.0 + 0.2 + 2.0)   # HBM read + write at 1 TB/s
    assert set(r.utilisation) == {"gpu0.hbm"}


def test_copy_engine_uses_its_own_rate():
    c = round_calibration(**{"ce.cta_remote_gbps": 50.0, "sm.cta_remote_gbps": 1.0})
    prog = Program(1, 0, "consume", (Copy(Ref(0, "input", 0), (Ref(1, "output", 0),), MB, "ce"),))
    r = simulate(schedule([prog]), minimal(2), c)
    assert r.time_us == pytest.approx(1.0 + 0.2 + 0.5 + 20.0)


def test_a_copy_engine_copy_to_two_destinations_is_two_transfers():
    """A DMA engine has no broadcast store: the executor runs a ce Copy as one memcpy per
    destination, one after another, each reading the source. Twice the time of one, and
    the source's HBM read twice."""
    c = round_calibration(**{"ce.cta_remote_gbps": 50.0, "sm.cta_remote_gbps": 1.0})
    prog = Program(0, 0, "put", (Copy(Ref(0, "input", 0), (Ref(1, "output", 0), Ref(2, "output", 0)), MB, "ce"),))
    r = simulate(schedule([prog], world=3), minimal(3), c)
    assert r.time_us == pytest.approx(1.0 + 0.2 + 0.5 + 40.0)
    big = round_calibration(**{"ce.cta_remote_gbps": 1e6, "hbm_efficiency": 1.0})
    r = simulate(schedule([prog], world=3), minimal(3), big)
    one = simulate(schedule([Program(0, 0, "put", (Copy(Ref(0, "input", 0), (Ref(1, "output", 0),), MB, "ce"),))],
                            world=3), minimal(3), big)
    assert r.time_us - one.time_us == pytest.approx(one.time_us - 1.0 - 0.2 - 0.5, rel=0.02)


def test_deadlock_names_rank_cta_instr_and_signal(cal):
    lonely = Program(1, 0, "consume", (Wait(3, 1),))
    with pytest.raises(Deadlock, match=r"rank 1, cta 0, instr 0: Wait on signal 3 .*no CTA notifies"):
        simulate(schedule([lonely]), minimal(2), cal)
    cycle = [Program(0, 0, "a", (Wait(0, 1), Notify(1, 0, 1))),
             Program(1, 0, "b", (Wait(0, 1), Notify(0, 0, 1)))]
    with pytest.raises(Deadlock, match=r"rank 0, cta 0, instr 0: .*signal 0.*rank 1 cta 0 instr 1 \(stuck\)"):
        simulate(schedule(cycle), minimal(2), cal)


def test_every_instruction_type_has_a_handler(cal):
    prog0 = Program(0, 0, "all", (
        Copy(Ref(0, "input", 0), (Ref(0, "staging", 0),), 1024),
        Reduce((Ref(0, "input", 0), Ref(1, "input", 0)), (Ref(0, "output", 0),), 1024, "fp32", "add"),
        PutPackets(Ref(0, "input", 0), Ref(1, "packets", 0), 1024, 1),
        Notify(1, 0, 1)))
    prog1 = Program(1, 0, "all", (Wait(0, 1), WaitPackets(Ref(1, "packets", 0), 1024, 1)))
    r = simulate(schedule([prog0, prog1]), minimal(2), cal)
    assert {x.kind for x in r.timeline} == {cls.__name__ for cls in INSTRUCTIONS}


def test_trace_is_chrome_json(cal, tmp_path):
    r = simulate(pull_copy(), minimal(2), cal)
    data = json.loads(r.write_trace(tmp_path / "t.json").read_text())
    spans = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == 4
    assert {(e["pid"], e["tid"]) for e in spans} == {(0, 0), (1, 0)}
    assert all(e["dur"] >= 0 and "ts" in e for e in spans)


def test_result_row_and_default_calibration():
    r = simulate(pull_copy(), minimal(2))            # gpu_kind "synthetic" -> synthetic.json
    row = r.row()
    assert row["size"] == 2 * MB and row["redop"] == "none" and row["dtype"] == "fp32"
    assert row["algbw"] == pytest.approx(2 * MB / (r.time_us * 1e3))
    assert row["busbw"] == pytest.approx(row["algbw"] / 2)      # all_gather, W=2
    assert r.stats["events"] > 0 and r.stats["instructions"] == 4


def test_world_mismatch_is_an_error(cal):
    with pytest.raises(ScheduleError, match="ranks"):
        simulate(pull_copy(), minimal(4), cal)


def test_wire_efficiency_charges_links_not_hbm():
    c = round_calibration(**{"switch.wire_efficiency": 0.5})
    r = simulate(_reduce_to_rank0("switch"), minimal(4, in_switch_reduce=True), c)
    assert r.time_us == pytest.approx(1.0 + 0.2 + 1.0 + 20.0)
    assert r.utilisation["gpu1->switch"]["bytes"] == pytest.approx(2 * MB)
    assert r.utilisation["gpu1.hbm"]["bytes"] == pytest.approx(MB)


def test_copy_engine_cannot_reduce(cal):
    with pytest.raises(ScheduleError, match="rank 0, cta 0, instr 0: a copy engine cannot Reduce"):
        simulate(_reduce_to_rank0("ce"), minimal(4), cal)


def test_topology_defaults_to_the_one_the_schedule_names():
    from purlin.snac import plan
    from purlin.spec import library
    s = plan(library.all_gather(8, 4096), "h200-loopback")
    r = simulate(s)
    assert r.topology == "h200-loopback" and r.gpu_kind == "h200"
    assert set(r.utilisation) == {"gpu0.hbm"}


def test_access_to_a_non_direct_peer_is_refused(cal):
    from purlin.topology import load_topology
    mesh = load_topology("mesh-2d-16")
    prog = Program(15, 0, "consume", (Copy(Ref(0, "input", 0), (Ref(15, "output", 0),), 1024),))
    with pytest.raises(ScheduleError, match="rank 15, cta 0, instr 0: ranks 0 and 15 are not direct"):
        simulate(schedule([prog], world=16), mesh, cal)


def test_each_put_of_a_batch_pays_its_own_cost():
    # 3 puts of 1 MB to a local window at 100 GB/s (HBM, 3 MB per put at 1 TB/s, is not
    # the bound): one op start, then each put's bytes and its packet_put_us
    c = round_calibration(packet_put_us=0.3, packet_batch=8.0, packet_gbps=100.0)
    puts = Program(0, 0, "put", tuple(PutPackets(Ref(0, "input", 0), Ref(0, "packets", k * MB), MB, 1)
                                      for k in range(3)))
    r = simulate(schedule([puts], world=2, nbytes=3 * MB), minimal(2), c)
    assert r.time_us == pytest.approx(1.0 + 0.2 + 3 * (0.3 + MB / 1e5))


@pytest.mark.parametrize("dst_offset, nbytes, extra", [
    (16, 8192, 0.7),      # off the 512-byte boundary: the executor's head copy
    (512, 8192, 0.0),     # on it
    (16, 2048, 0.0),      # too short to be aligned first
    (4, 8192, 0.0),       # not 16-byte aligned: moved as 4-byte words, no head copy
])
def test_a_copy_off_the_alignment_boundary_pays_its_head(dst_offset, nbytes, extra):
    c = round_calibration(copy_head_us=0.7, copy_align_bytes=512.0, copy_align_min_bytes=4096.0)
    prog = Program(0, 0, "copy", (Copy(Ref(0, "input", 0), (Ref(0, "output", dst_offset),), nbytes),))
    r = simulate(schedule([prog], world=2), minimal(2), c)
    assert r.time_us == pytest.approx(1.0 + 0.2 + extra + 2 * nbytes / 1e6)   # read + write at 1 TB/s


def test_packet_reads_pay_for_the_crowd_on_their_gpu_once():
    # 8 CTAs of rank 1 read packets that landed long before (rank 0 puts them while the
    # readers copy 1 MB each): each one's first packet read pays packet_crowd_us per
    # doubling of the 8 packet CTAs on GPU 1 beyond two, its second read none
    c = round_calibration(packet_crowd_us=0.25)
    put = Program(0, 0, "put", (PutPackets(Ref(0, "input", 0), Ref(1, "packets", 0), 16, 1),))
    reads = [Program(1, k, "read", (Copy(Ref(1, "input", 0), (Ref(1, "staging", 0),), MB),
                                    WaitPackets(Ref(1, "packets", 0), 16, 1),
                                    Copy(Ref(1, "packets", 0), (Ref(1, "output", 32 * k),), 16),
                                    Copy(Ref(1, "packets", 0), (Ref(1, "output", 32 * k + 16),), 16)))
             for k in range(8)]
    base = simulate(schedule([put] + reads), minimal(2), round_calibration()).time_us
    r = simulate(schedule([put] + reads), minimal(2), c)
    assert r.time_us == pytest.approx(base + 0.25 * 2)   # log2(8 / 2) = 2 doublings, paid once


@pytest.mark.parametrize("reader_busy_bytes, fused, extra", [
    (0, True, 0.4),        # polls before the packets land: has them packet_poll_us later
    (0, False, 0.4),       # a lone WaitPackets (the next read is of other bytes) as well
    (4 * MB, True, 0.0),   # busy until long after they landed: no poll to wait out
])
def test_a_reader_that_waited_has_its_packets_a_poll_later(reader_busy_bytes, fused, extra):
    # rank 0 copies 1 MB, then puts 16 B into rank 1's window; rank 1's reader copies
    # ``reader_busy_bytes`` first, then waits for the window and reads 16 B
    c = round_calibration(packet_poll_us=0.4)
    put = Program(0, 0, "put", (Copy(Ref(0, "input", 0), (Ref(0, "staging", 0),), MB),
                                PutPackets(Ref(0, "input", 0), Ref(1, "packets", 0), 16, 1)))
    busy = (Copy(Ref(1, "input", 0), (Ref(1, "staging", 0),), reader_busy_bytes),) if reader_busy_bytes else ()
    src = Ref(1, "packets", 0) if fused else Ref(1, "input", 0)
    read = Program(1, 0, "read", busy + (WaitPackets(Ref(1, "packets", 0), 16, 1),
                                         Copy(src, (Ref(1, "output", 0),), 16)))
    s = schedule([put, read], nbytes=4 * MB)
    base = simulate(s, minimal(2), round_calibration()).time_us
    assert simulate(s, minimal(2), c).time_us == pytest.approx(base + extra)


def test_a_waiting_reader_still_pays_the_crowd():
    # 8 CTAs of rank 1 wait for a window rank 0 fills after a 1 MB copy, then read it: the
    # crowd (2 doublings of 8 packet CTAs on GPU 1, 0.25 us each) comes after the wait
    c = round_calibration(packet_crowd_us=0.25)
    put = Program(0, 0, "put", (Copy(Ref(0, "input", 0), (Ref(0, "staging", 0),), MB),
                                PutPackets(Ref(0, "input", 0), Ref(1, "packets", 0), 16, 1)))
    reads = [Program(1, k, "read", (WaitPackets(Ref(1, "packets", 0), 16, 1),
                                    Copy(Ref(1, "packets", 0), (Ref(1, "output", 16 * k),), 16)))
             for k in range(8)]
    s = schedule([put] + reads)
    assert simulate(s, minimal(2), c).time_us == pytest.approx(
        simulate(s, minimal(2), round_calibration()).time_us + 0.5)


@pytest.mark.parametrize("packet_windows, extra", [(0, 2 * 0.3), (2, 0.0)])
def test_each_plain_reduce_source_beyond_the_first_adds_its_start(packet_windows, extra):
    # a Reduce of 3 sources: all plain (2 beyond the first, 0.3 us each), or 2 packet
    # windows and the CTA's own input (their cost is packet_src_us, not this)
    srcs = tuple(Ref(0, "packets", k * 1024) for k in range(packet_windows))
    srcs += tuple(Ref(0, "input", k * 1024) for k in range(3 - packet_windows))
    prog = Program(0, 0, "reduce", (Reduce(srcs, (Ref(0, "output", 0),), 1024, "fp32", "add"),))
    s = schedule([prog])
    base = simulate(s, minimal(2), round_calibration()).time_us
    assert simulate(s, minimal(2), round_calibration(reduce_src_us=0.3)).time_us == pytest.approx(base + extra)


@pytest.mark.parametrize("l2_mib, us_of_bytes", [(100.0, 30 / 2), (0.5, 30.0)])
def test_a_reduce_in_the_l2_runs_l2_reduce_speedup_times_faster(l2_mib, us_of_bytes):
    # one CTA reduces 2 sources of 1 MB at 100 GB/s per stream (out + 2 sources: 30 us,
    # CTA-bound); its 3 MB of buffers fit in 100 MiB of L2, not in 0.5 MiB
    c = round_calibration(l2_reduce_speedup=2.0, l2_resident_mib=l2_mib,
                          **{"sm.reduce_out_gbps": 100.0, "sm.reduce_src_gbps": 100.0})
    prog = Program(0, 0, "reduce", (Reduce((Ref(0, "input", 0), Ref(0, "input", MB)), (Ref(0, "output", 0),),
                                           MB, "fp32", "add"),))
    r = simulate(schedule([prog], nbytes=MB), minimal(2), c)
    assert r.time_us == pytest.approx(1.0 + 0.2 + us_of_bytes)


# ---- the engine's shortcuts give the answers of the slow ways ---------------------------

@pytest.mark.parametrize("name", ["all_reduce", "all_gather", "reduce_scatter_v", "all_to_all_v"])
def test_fused_positions_agree_with_the_ir_rule(name):
    from purlin.sim.packets import fused_positions
    from purlin.snac import Policy, plan
    from purlin.snac.ir import fused_read
    from purlin.spec import library
    for pol in (Policy(regime="latency"), Policy(regime="latency", algorithm="two_shot")):
        s = plan(library.from_size(name, 4, 8 << 10, seed=3), minimal(4), pol)
        for p in s.programs:
            want = {i for i, ins in enumerate(p.instrs) if isinstance(ins, WaitPackets) and fused_read(p.instrs, i)}
            assert fused_positions(p.instrs) == want


@pytest.mark.parametrize("name", ["all_reduce", "all_gather_v", "all_to_all_v"])
def test_packet_landing_times_equal_landing_events(name):
    """Packets filed as (time, seq) when a put starts or ends, with one entry per waiting
    CTA, give the times of landing them event by event."""
    from purlin.sim import engine
    from purlin.sim.packets import PacketEvents, PacketTimes
    from purlin.snac import Policy, plan
    from purlin.spec import library
    topo = minimal(4)
    s = plan(library.from_size(name, 4, 16 << 10, seed=5), topo, Policy(regime="latency"))
    cal = round_calibration(**{"packet_gbps": 20.0, "packet_read_gbps": 30.0, "packet_poll_us": 0.3,
                               "sm.cta_remote_gbps": 40.0})
    times = []
    for book in (PacketTimes, PacketEvents):
        run = engine._Run(s, topo, cal, True, book)
        run.go()
        times.append(sorted(run.records))
    assert times[0] == times[1]


def test_a_piece_found_by_its_start_answers_as_the_scan_does():
    """PacketTimes finds a put's end, and a window that begins a piece, by the piece's
    start while no piece of that rank and tag is empty (then starts are distinct); every
    other window, and every window once an empty put came, is scanned."""
    from types import SimpleNamespace
    from purlin.sim.packets import PacketTimes
    pt = PacketTimes(SimpleNamespace(now=0.0), lambda c: None)
    pt.begin((1, 0, 64, 7), 1.0, 1)
    pt.begin((1, 64, 32, 7), 2.0, 2)
    pt.end((1, 0, 64, 7), 3.0, 3)
    assert pt._when((1, 0, 64, 7), True) == ("at", 3.0, 3)
    assert pt._when((1, 0, 32, 7), False) == ("at", 1.0, 1)
    kind, piece, _ = pt._when((1, 64, 96, 7), True)
    assert kind == "piece" and piece[:2] == [64, 96]
    assert pt._when((1, 0, 96, 7), False) == ("at", 2.0, 2)   # two pieces: the later landing
    assert pt._when((1, 96, 100, 7), False) == ("gap", 96, 0)
    pt.end((1, 96, 0, 7), 4.0, 4)                             # an empty put
    assert pt.by_lo[(1, 7)] is None
    pt.end((1, 64, 32, 7), 5.0, 5)
    assert pt._when((1, 64, 96, 7), True) == ("at", 5.0, 5)
    assert pt._when((1, 0, 96, 7), True) == ("at", 5.0, 5)


def test_overlapping_puts_of_one_tag_fall_back_to_landing_events(cal):
    """Two puts write the same window with one tag (the IR never does): the engine lands
    packets event by event instead, and the reader still waits for both."""
    puts = [Program(0, k, "put", (PutPackets(Ref(0, "input", 0), Ref(1, "packets", k * 512), MB // 2, 1),))
            for k in range(2)]
    wait = Program(1, 0, "consume", (WaitPackets(Ref(1, "packets", 0), MB // 2, 1),))
    from purlin.sim import engine
    from purlin.sim.packets import Overlapping, PacketTimes
    s = schedule(puts + [wait])
    with pytest.raises(Overlapping):
        engine._Run(s, minimal(2), cal, False, PacketTimes).go()
    r = simulate(s, minimal(2), cal)
    assert r.time_us == pytest.approx(1.0 + 0.2 + 20.0 + 1.0)   # 2 x 1 MB of wire share the link
