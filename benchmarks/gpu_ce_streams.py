"""Copy engines under many streams: what a copy-engine plan's memcpys cost together.

A microbenchmark, not a collective: ``--total-mib`` of device-to-device memcpys on one
GPU, cut into ops of ``s`` bytes dealt round-robin over ``k`` streams (forked from one
stream and joined back, captured as one CUDA graph), for every (k, s). What it separates:
the bytes' cost (HBM, the same total in every row) from a cost per op that may grow with
the streams in flight (engine scheduling, a serial front end), which the simulator's
``ce`` Atom does not have (one op's start-up, ``ce.op_start_us``, is fitted from memcpys
on one stream). The copy-engine loopback plans of ``gpu_loopback.py --atoms sm,ce`` slow
down as their chunks shrink (more memcpys) where the simulator predicts no change; this
measures the cause on its own, so that a model of it comes from here and not from them.

Writes benchmarks/results/NAME (``--out``, default h200-ce-streams.json): per (k, s) the
samples (us per graph replay), GB/s (read + written), the ratio to the baseline (one
cudaMemcpy of the whole total in the same run, event-timed) and the time each op adds over
that baseline.
"""
from __future__ import annotations

import argparse
import sys

from gpu_common import cupy, header, median, time_graph, write

MiB = 1 << 20


def enqueue(cp, src, dst, total: int, size: int, streams: int):
    """A function enqueuing ``total // size`` memcpys of ``size`` bytes over ``streams``
    streams, forked from the current stream and joined back (so a capture takes them all)."""
    rt = cp.cuda.runtime
    lanes = [cp.cuda.Stream(non_blocking=True) for _ in range(streams)]
    fork = cp.cuda.Event(disable_timing=True)
    joins = [cp.cuda.Event(disable_timing=True) for _ in lanes]

    def go():
        home = cp.cuda.get_current_stream()
        fork.record(home)
        for s in lanes:
            s.wait_event(fork)
        for i in range(total // size):
            rt.memcpyAsync(dst.data.ptr + i * size, src.data.ptr + i * size, size, rt.memcpyDeviceToDevice,
                           lanes[i % streams].ptr)
        for s, e in zip(lanes, joins):
            e.record(s)
            home.wait_event(e)
    return go


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="h200-ce-streams.json")
    ap.add_argument("--total-mib", type=int, default=512)
    ap.add_argument("--streams", default="1,2,4,8,16,32,64")
    ap.add_argument("--sizes-mib", default="0.5,1,2,4,8")
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args(argv)
    try:
        streams = [int(x) for x in args.streams.split(",")]
        sizes = [int(float(x) * MiB) for x in args.sizes_mib.split(",")]
    except ValueError:
        ap.error("--streams and --sizes-mib take comma lists of numbers")
    total = args.total_mib * MiB
    if any(k < 1 for k in streams) or any(s < 4096 or total % s for s in sizes):
        ap.error(f"--streams >= 1; each size >= 4 KiB and dividing --total-mib ({args.total_mib} MiB)")
    cp = cupy()
    src = cp.random.randint(0, 255, total, dtype=cp.uint8)
    dst = cp.empty(total, cp.uint8)
    doc = header("PYTHONPATH=. python3 benchmarks/gpu_ce_streams.py " + " ".join(argv or sys.argv[1:]))
    doc["total_bytes"] = total
    s0 = cp.cuda.Stream(non_blocking=True)
    base = []
    for _ in range(args.reps + 2):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record(s0)
        cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, total, cp.cuda.runtime.memcpyDeviceToDevice, s0.ptr)
        b.record(s0)
        b.synchronize()
        base.append(cp.cuda.get_elapsed_time(a, b) * 1e3)
    base = base[2:]
    doc["raw"] = {"memcpy_whole_us": base, "rows": []}
    print(f"# {doc['machine']}: one memcpy of {args.total_mib} MiB {median(base):.1f} us "
          f"({2 * total / median(base) / 1e3:.0f} GB/s read + written)")
    rows = doc["raw"]["rows"]
    for size in sizes:
        for k in streams:
            t = time_graph(enqueue(cp, src, dst, total, size, k), calls=1, replays=args.reps)
            assert bool((dst == src).all()), f"memcpys of {size} B over {k} streams left wrong bytes"
            dst.fill(0)
            ops = total // size
            rows.append({"streams": k, "op_bytes": size, "ops": ops, "samples_us": t,
                         "gbps": 2 * total / median(t) / 1e3, "vs_one_memcpy": median(base) / median(t),
                         "extra_us_per_op": (median(t) - median(base)) / ops})
            r = rows[-1]
            print(f"{size / MiB:5.2f} MiB x {ops:5d} ops on {k:3d} streams: {median(t):8.1f} us "
                  f"{r['gbps']:6.0f} GB/s  {r['vs_one_memcpy']:.3f} x one memcpy  "
                  f"{r['extra_us_per_op']:+.3f} us/op", flush=True)
    doc["summary"] = {
        "baseline": "one cudaMemcpyAsync of the whole total, event-timed, same run",
        "worst_vs_one_memcpy": min(r["vs_one_memcpy"] for r in rows),
        "by_streams_at_smallest_op": {str(r["streams"]): r["vs_one_memcpy"] for r in rows
                                      if r["op_bytes"] == min(sizes)},
        "by_streams_at_largest_op": {str(r["streams"]): r["vs_one_memcpy"] for r in rows
                                     if r["op_bytes"] == max(sizes)},
    }
    path = write(args.out, doc)
    print(f"summary worst {doc['summary']['worst_vs_one_memcpy']:.3f} x one memcpy -> {path}")
    return doc


if __name__ == "__main__":
    main()
