"""Aligned sizes lose nothing: the loopback collectives timed with the package as it was
before any element count was accepted and as it is now, in the same device call.

    PYTHONPATH=. python3 benchmarks/gpu_before_after.py --before DIR [--out FILE]

DIR holds the earlier package (``git archive <commit> purlin topologies | tar -x -C DIR``).
Each tree runs in its own process (its own kernels, compiled from its own source): the
seven at W=8 with 64 MiB per rank and the 8 KiB AllReduce, default policy, in CUDA
graphs. Writes benchmarks/results/h200-before-after.json with both sets of raw samples
and after/before time ratios (1.0: unchanged; above 1: slower now).
"""
from __future__ import annotations

import argparse
import json
import sys

MiB, KiB, W = 1 << 20, 1 << 10, 8


def measure(per_rank: int) -> dict:
    """Per-call graph times of this process's package (whichever tree the child process imports)."""
    from gpu_common import cupy, time_graph
    import purlin
    from purlin.backends.gpu import LoopbackWorld
    from purlin.spec import library
    cp = cupy()
    world = LoopbackWorld(W)
    out = {"package": purlin.__file__}
    cases = [("all_reduce_8KiB", library.all_reduce(W, 8 * KiB, "fp32"), 128)]
    cases += [(f"{n}_64MiB", library.from_size(n, W, per_rank * (W if n.startswith("all_gather") else 1),
                                                "fp32", seed=1), 8) for n in library.PURLIN_SEVEN]
    for key, c, calls in cases:
        ins = [cp.random.standard_normal(c.input.nbytes(r) // 4, dtype=cp.float32) if c.input.nbytes(r) else None
               for r in range(W)]
        outs = [cp.empty(c.output.nbytes(r) // 4, cp.float32) if c.output.nbytes(r) else None for r in range(W)]
        s = world.plan(c)
        out[key] = time_graph(lambda: world.run(s, ins, outs), calls=calls, replays=6)
        print(key, sorted(out[key])[len(out[key]) // 2], flush=True)
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", help="directory holding the earlier package")
    ap.add_argument("--out", default="h200-before-after.json")
    ap.add_argument("--per-rank-mib", type=int, default=64)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        json.dump(measure(args.per_rank_mib * MiB), sys.stdout)
        return {}
    from gpu_common import before_and_after, header, median, write
    runs = before_and_after(__file__, args.before, ["--per-rank-mib", str(args.per_rank_mib)])
    doc = header("python3 benchmarks/gpu_before_after.py " + " ".join(argv or sys.argv[1:]))
    doc["raw"] = runs
    ratios = {k: median(runs["after"][k]) / median(runs["before"][k]) for k in runs["after"] if k != "package"}
    doc["summary"] = {"after_over_before": ratios, "worst": max(ratios.values()),
                      "target": "<= 1.02 (aligned sizes lose nothing, within run-to-run noise)"}
    print(json.dumps(doc["summary"], indent=1))
    write(args.out, doc)
    return doc


if __name__ == "__main__":
    main()
