"""cudaMemcpy D2D and the Atom copies, each run a few times, for a profiler to compare.

The copy target (Atom copy over cudaMemcpy at 64 MiB and up) sits at 0.95: this script is
what Nsight Compute runs to show how the driver's copy and ours use the memory system
(launch shape, DRAM bytes, L2 sectors, instruction mix). Without a profiler it prints the
event-timed bandwidth of each, bytes read + written.

    ncu --clock-control none -o OUT/copy python3 benchmarks/gpu_profile_copy.py
"""
from __future__ import annotations

import argparse
import statistics

import numpy as np

from gpu_common import cupy, time_launches

MiB = 1 << 20


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--reps", type=int, default=2)
    args = ap.parse_args(argv)
    cp = cupy()
    from purlin.backends.gpu import atomset, kernels
    import gpu_kernels
    k = gpu_kernels.for_device(0)
    n = args.mib * MiB
    src = cp.random.randint(0, 255, n, dtype=cp.uint8)
    dst = cp.empty(n, cp.uint8)
    s = lambda: cp.cuda.get_current_stream().ptr
    runs = {"memcpy": lambda: cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, n,
                                                          cp.cuda.runtime.memcpyDeviceToDevice, s())}
    for name, ctas, chunk in (("atom_copy", 4 * k.sm_count, 64 << 10), ("atom_copy", 4 * k.sm_count, 256 << 10),
                              ("atom_copy_cs", 4 * k.sm_count, 64 << 10)):
        fn = k.fn(name)
        runs[f"{name}/{ctas}/{chunk}"] = (lambda fn=fn, ctas=ctas, chunk=chunk:
                                          fn((ctas,), (atomset.THREADS,), (src, dst, np.int64(n), np.int64(chunk))))
    for name, run in runs.items():
        t = time_launches(run, args.reps, warmup=1)
        print(f"{name:28s} {2 * n / statistics.median(t) / 1e3:7.0f} GB/s  ({statistics.median(t):.1f} us)")
    assert bool(cp.array_equal(src, dst))


if __name__ == "__main__":
    main()
