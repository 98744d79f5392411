"""Helpers for the simulator tests: a calibration with round numbers, hand schedules."""
from __future__ import annotations

from purlin.sim.calibration import from_values
from purlin.snac.ir import Copy, Notify, Program, Ref, Schedule, Wait
from purlin.spec import library

MB = 1_000_000


def round_calibration(**over: float):
    """Round numbers so expected times are easy to write down; CTA caps far above
    any link unless a test lowers them."""
    v = {"launch_us": 1.0, "launch_grid_us": 0.0, "launch_per_cta_us": 0.0, "signal_latency_us": 0.5,
         "notify_issue_us": 0.1, "wait_check_us": 0.0, "packet_batch": 1.0, "signal_batch": 1.0,
         "packet_gbps": 2e6, "packet_read_gbps": 2e6, "packet_read_us": 0.0, "packet_src_us": 0.0,
         "packet_crowd_us": 0.0, "reduce_src_us": 0.0, "packet_poll_us": 0.0, "packet_put_us": 0.0,
         "copy_head_us": 0.0, "copy_align_bytes": 0.0, "copy_align_min_bytes": 0.0,
         "hbm_efficiency": 1.0, "hbm_knee": 0.0, "l2_resident_mib": 0.0, "l2_speedup": 1.0,
         "l2_reduce_speedup": 1.0, "link_efficiency": 1.0}
    for atom in ("sm", "tma", "ce", "switch"):
        v[f"{atom}.cta_local_gbps"] = 1e6
        v[f"{atom}.cta_remote_gbps"] = 1e6
        v[f"{atom}.op_start_us"] = 0.2
        v[f"{atom}.wire_efficiency"] = 1.0
        v[f"{atom}.reduce_out_gbps"] = 1e6
        v[f"{atom}.reduce_src_gbps"] = 1e6
        v[f"{atom}.store_gbps"] = 1e6
    v.update(over)
    return from_values(v, gpu_kind="test")


def schedule(programs, world: int = 2, nbytes: int = MB, num_signals: int = 4) -> Schedule:
    """A Schedule around hand-written programs (the collective is only for sizes)."""
    c = library.all_gather(world, nbytes)
    return Schedule(c, tuple(programs), staging_nbytes=world * nbytes,
                    packets_nbytes=world * nbytes, num_signals=num_signals, epoch_stride=16)


def pull_copy(nbytes: int = MB) -> Schedule:
    """rank0 stages input, notifies rank1; rank1 waits and pulls staging[0] into output."""
    p0 = Program(0, 0, "put", (Copy(Ref(0, "input", 0), (Ref(0, "staging", 0),), nbytes),
                               Notify(1, 0, 1)))
    p1 = Program(1, 0, "consume", (Wait(0, 1),
                                   Copy(Ref(0, "staging", 0), (Ref(1, "output", nbytes),), nbytes)))
    return schedule([p0, p1], nbytes=nbytes)
