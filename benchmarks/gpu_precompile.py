"""Compile the executor's and the benchmarks' cubins on a machine with no GPU, into the
disk cache a device call can carry (``--carry .purlin-cache``).

Why: a cold NVRTC compile of the sm_90 Atoms (one ~4.6 MB cubin, the benchmark kernels a
second) takes minutes on a lent GPU machine, and every stage of a device call that starts
cold pays it again until one finishes; a 10-minute call can go by in compiling. The cache
is keyed by source, options and NVRTC version (:func:`purlin.backends.gpu.atomset.compile_cubin`),
so a cubin built here is used there only where the NVRTC major.minor matches: install the
device's NVRTC here (e.g. ``pip install --target DIR nvidia-cuda-nvrtc==13.0.* cupy-cuda13x``,
``LD_LIBRARY_PATH=DIR/nvidia/cu13/lib``, ``PYTHONPATH=DIR``) and name the version with
``--expect``; a mismatch is an error, not a cache that is silently never hit.

    python3 benchmarks/gpu_precompile.py --arch 90 --expect 13.0 [--cache .purlin-cache]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", type=int, default=90, help="compute capability as MAJOR*10+MINOR, e.g. 80, 90, 100")
    ap.add_argument("--expect", default=None, help="the device's NVRTC version, MAJOR.MINOR")
    ap.add_argument("--cache", default=str(ROOT / ".purlin-cache"), help="PURLIN_CACHE_DIR to fill")
    ap.add_argument("--only", choices=("executor", "bench"), default=None)
    args = ap.parse_args(argv)
    os.environ["PURLIN_CACHE_DIR"] = args.cache
    from purlin.backends.gpu import atomset
    from purlin.errors import BackendUnavailable
    try:
        atoms = atomset.for_capability(args.arch)
    except BackendUnavailable as e:
        ap.error(f"--arch {args.arch}: {e}")
    try:
        nvrtc = atomset._nvrtc()
    except BackendUnavailable as e:
        ap.error(f"{e} (install cupy and the device's NVRTC here: see this script's docstring)")
    have = "%d.%d" % tuple(nvrtc.getVersion())
    if args.expect and have != args.expect:
        ap.error(f"NVRTC here is {have}, --expect {args.expect}: the device would not hit this cache")
    jobs = {}
    if args.only != "bench":
        jobs["executor"] = lambda: atomset.compile_cubin(atoms)
    if args.only != "executor":
        import gpu_kernels
        jobs["bench"] = lambda: gpu_kernels.cubin(atoms)
    for name, job in jobs.items():
        t = time.perf_counter()
        blob = job()
        print(f"{atoms.name} {name}: {len(blob) / 1e6:.1f} MB, NVRTC {have}, {time.perf_counter() - t:.0f} s "
              f"-> {atomset.cache_dir()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
