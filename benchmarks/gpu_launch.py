"""What a call costs before its first byte moves: the interpreter's start and end, timed
with the package as it was (``--before DIR``) and as it is, in the same device call.

    PYTHONPATH=. python3 benchmarks/gpu_launch.py --before DIR [--rounds 2] [--out FILE]

DIR holds the earlier package (``git archive <commit> purlin topologies | tar -x -C DIR``).
Each tree runs in its own process (its own kernels, compiled from its own source), the two
alternating ``--rounds`` times so that a drift of the machine falls on both. Each process
times, in CUDA graphs of 128 calls:

- an empty kernel of 1, 16 and 128 CTAs (the machine's floor for a graph node, the same
  code in both trees: the control);
- the executor microbenchmarks that set the simulator's launch terms (``copy_ops`` of
  4 KiB, ``ctas``, ``chain``: purlin.sim.microbench);
- small collectives in a loopback world, default policy: AllReduce of 2, 8, 16 and 64 KiB
  at W = 8 and of 8 KiB at W = 2 and 4, ReduceScatter of 16 KiB and AllGather of 64 KiB at
  W = 8, each checked against the oracle once.

Writes benchmarks/results/h200-launch.json: raw samples per tree and round, and a summary
of after/before ratios of the medians (below 1: faster now).
"""
from __future__ import annotations

import argparse
import json
import sys

KiB = 1 << 10
EMPTY = 'extern "C" __global__ void purlin_empty() {}'


def _collectives():
    from purlin.spec import library
    yield "all_reduce_W8_2KiB", library.all_reduce(8, 2 * KiB, "fp32")
    yield "all_reduce_W8_8KiB", library.all_reduce(8, 8 * KiB, "fp32")
    yield "all_reduce_W8_16KiB", library.all_reduce(8, 16 * KiB, "fp32")
    yield "all_reduce_W8_64KiB", library.all_reduce(8, 64 * KiB, "fp32")
    yield "all_reduce_W4_8KiB", library.all_reduce(4, 8 * KiB, "fp32")
    yield "all_reduce_W2_8KiB", library.all_reduce(2, 8 * KiB, "fp32")
    yield "reduce_scatter_W8_16KiB", library.from_size("reduce_scatter", 8, 16 * KiB, "fp32", seed=1)
    yield "all_gather_W8_64KiB", library.from_size("all_gather", 8, 64 * KiB, "fp32", seed=1)


def measure() -> dict:
    """Per-call graph times (us) of this process's package."""
    from gpu_common import cupy, time_graph, wrong_bytes
    import purlin
    from purlin.backends.gpu import LoopbackWorld
    from purlin.sim.microbench import CASES
    cp = cupy()
    out: dict = {"package": purlin.__file__}
    empty = cp.RawKernel(EMPTY, "purlin_empty")
    for grid in (1, 16, 128):
        out[f"empty_kernel_{grid}"] = time_graph(lambda: empty((grid,), (512,), ()), calls=128, replays=6)
    one = LoopbackWorld(1)
    for name, params, s in CASES:
        if not (name in ("ctas", "chain") or (name == "copy_ops" and params["n"] == 4096)):
            continue
        c = s.collective
        x = cp.random.standard_normal(max(1, c.input.nbytes(0) // 4), dtype=cp.float32).view(cp.uint8)
        ins = [x[: c.input.nbytes(0)] if c.input.nbytes(0) else None]
        outs = [cp.empty(c.output.nbytes(0), cp.uint8) if c.output.nbytes(0) else None]
        key = name + "_" + "_".join(f"{k}{v}" for k, v in params.items())
        out[key] = time_graph(lambda: one.run(s, ins, outs, verify=False), calls=128, replays=6)
        one.check()
    worlds = {}
    for key, c in _collectives():
        w = worlds.setdefault(c.world, LoopbackWorld(c.world))
        ins = [cp.random.standard_normal(c.input.nbytes(r) // 4, dtype=cp.float32) if c.input.nbytes(r) else None
               for r in range(c.world)]
        outs = [cp.empty(c.output.nbytes(r) // 4, cp.float32) if c.output.nbytes(r) else None
                for r in range(c.world)]
        s = w.plan(c)
        w.run(s, ins, outs)
        w.synchronize()
        out[key + "_wrong_bytes"] = wrong_bytes(c, ins, outs)
        out[key] = time_graph(lambda: w.run(s, ins, outs), calls=128, replays=6)
        w.check()
    return out


def summarize(rounds: list[dict]) -> dict:
    """after/before of the medians of all samples of each case (rounds pooled)."""
    from gpu_common import median
    keys = [k for k, v in rounds[0]["after"].items() if isinstance(v, list)]
    pooled = {side: {k: [x for r in rounds for x in r[side][k]] for k in keys} for side in ("before", "after")}
    med = {side: {k: median(v) for k, v in pooled[side].items()} for side in pooled}
    ratios = {k: med["after"][k] / med["before"][k] for k in keys}
    wrong = {side: {k: r[side][k] for r in rounds for k in r[side] if k.endswith("_wrong_bytes")}
             for side in ("before", "after")}
    return {"median_us": med, "after_over_before": ratios, "wrong_bytes": wrong,
            "control": {k: ratios[k] for k in keys if k.startswith("empty_kernel")}}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", help="directory holding the earlier package")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default="h200-launch.json")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        json.dump(measure(), sys.stdout)
        return {}
    if args.rounds < 1:
        raise SystemExit(f"--rounds {args.rounds}: give at least 1")
    from gpu_common import before_and_after, header, write
    rounds = [before_and_after(__file__, args.before, []) for _ in range(args.rounds)]
    doc = header("python3 benchmarks/gpu_launch.py " + " ".join(argv if argv is not None else sys.argv[1:]))
    doc["raw"] = rounds
    doc["summary"] = summarize(rounds)
    print(json.dumps(doc["summary"]["after_over_before"], indent=1))
    write(args.out, doc)
    return doc


if __name__ == "__main__":
    main()
