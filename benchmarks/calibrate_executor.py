"""Raw microbenchmarks of the SNAC executor itself (no collectives), for the simulator.

The Atom kernels alone (``calibrate.py``) miss what the interpreter adds: decoding an
instruction, a Wait/Notify hop between CTAs, packets. This runs the hand-made one-rank
Schedules of :mod:`purlin.sim.microbench` (which lists what each case measures) in a
loopback world, each timed in CUDA graphs; :mod:`purlin.sim.fit` fits the simulator from
the results (``benchmarks/fit_calibration.py``).

    python3 benchmarks/calibrate_executor.py [--out NAME]     (GPU; ~1 minute)

Writes h200-executor-calibration-raw.json (or NAME: machine, date, command, raw samples).
"""
from __future__ import annotations

import argparse

from purlin.sim.microbench import CASES, MiB


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="h200-executor-calibration-raw.json")
    args = ap.parse_args(argv)
    from gpu_common import cupy, header, median, time_graph, write

    from purlin.backends.gpu import LoopbackWorld
    cp = cupy()
    world = LoopbackWorld(1)
    rows = []
    for name, params, s in CASES:
        c = s.collective
        x = cp.random.standard_normal(max(1, c.input.nbytes(0) // 4), dtype=cp.float32).view(cp.uint8)
        ins = [x[: c.input.nbytes(0)] if c.input.nbytes(0) else None]
        outs = [cp.empty(c.output.nbytes(0), cp.uint8) if c.output.nbytes(0) else None]
        world.run(s, ins, outs, verify=False)   # not collectives: no spec for verify to hold
        world.synchronize()
        total = max(c.input.nbytes(0), 1)
        calls = 64 if total <= 4 * MiB else 8
        us = time_graph(lambda: world.run(s, ins, outs, verify=False), calls=calls, replays=5, warmup=1)
        world.check()
        rows.append({"case": name, **params, "us_per_call": us})
        print(f"{name:>10} {params}  {median(us):9.2f} us", flush=True)
    doc = {**header(), "raw": rows}
    print(write(args.out, doc))


if __name__ == "__main__":
    main()
