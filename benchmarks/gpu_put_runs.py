"""What a run of PutPackets costs the interpreter, before and after a kernel change, in
the same device call.

    PYTHONPATH=. python3 benchmarks/gpu_put_runs.py --before DIR [--out FILE]

DIR holds the earlier package (``git archive <commit> purlin topologies | tar -x -C DIR``).
Each tree runs in its own process (its own kernels, compiled from its own source), on
the H200 loopback world of W=8, in CUDA graphs:

- ``put_fan``: rank 0's one CTA pushes k PutPackets of n bytes (distinct sources) to the
  packet windows of ranks 1..k, nobody reading (a latency-regime put CTA of few CTAs);
  ``fan_read``: the same, and rank k waits for its window and copies it out;
- the latency-regime collectives of the codesign misses at 1 to 16 KiB, with 1, 2, 4
  and 8 put CTAs (the pick's other fields), and the default 8 KiB AllReduce.

Writes benchmarks/results/h200-put-runs.json: both sets of raw samples and the
after/before time ratios (below 1: faster now).
"""
from __future__ import annotations

import argparse
import json
import sys

W = 8
KiB = 1 << 10
FAN = [(k, n) for k in (1, 2, 4, 7) for n in (128, 1024, 4096)]
COLLECTIVES = [  # (collective, size, policy without put_ctas): picks of h200-codesign.json misses
    ("reduce_scatter", 1024, dict(regime="latency", algorithm="one_shot", consumer_ctas=11, chunk_nbytes=1024,
                                  fence="rank", atom="sm")),
    ("all_reduce", 4096, dict(regime="latency", algorithm="one_shot", consumer_ctas=11, chunk_nbytes=512,
                              push_nbytes=2048, fence="rank", atom="sm")),
    ("all_to_all", 4096, dict(regime="latency", algorithm="one_shot", consumer_ctas=11, chunk_nbytes=1024,
                              push_nbytes=2048, fence="rank", atom="sm")),
    ("reduce_scatter_v", 16384, dict(regime="latency", algorithm="one_shot", consumer_ctas=11, chunk_nbytes=512,
                                     push_nbytes=4096, fence="rank", atom="sm"))]
PUTS = (1, 2, 4, 8)


def fan(k: int, n: int, read: bool):
    """Rank 0, CTA 0 pushes k PutPackets of n bytes to ranks 1..k (every other rank an
    empty program); with ``read``, rank k waits for its window and copies it out."""
    from purlin.snac.ir import Copy, Program, PutPackets, Ref, Schedule, WaitPackets
    from purlin.spec import Collective, Layout
    lay = lambda b: Layout.of([[(f"b{r}", b)] for r in range(W)])  # noqa: E731
    c = Collective("micro", lay(k * n), lay(n), "add", "fp32")
    progs = [Program(0, 0, "push", tuple(PutPackets(Ref(0, "input", i * n), Ref(1 + i, "packets", 0), n, 1)
                                         for i in range(k)))]
    if read:
        win = Ref(k, "packets", 0)
        progs.append(Program(k, 0, "read", (WaitPackets(win, n, 1), Copy(win, (Ref(k, "output", 0),), n))))
    have = {p.rank for p in progs}
    progs += [Program(r, 0, "idle", ()) for r in range(W) if r not in have]
    return Schedule(c, tuple(progs), 0, n, 1, 2)


def measure() -> dict:
    """Per-call graph times (us) of this process's package."""
    from gpu_common import cupy, time_graph
    from gpu_loopback import buffers
    import purlin
    from purlin.backends.gpu import LoopbackWorld
    from purlin.snac import plan
    from purlin.spec import library
    from purlin.topology import load_topology
    cp = cupy()
    topo = load_topology("h200-loopback", world=W)
    world = LoopbackWorld(W, topology=topo)
    out: dict = {"package": purlin.__file__}
    for read in (False, True):
        for k, n in FAN:
            s = fan(k, n, read)
            c = s.collective
            ins = [cp.random.standard_normal(c.input.nbytes(r) // 4, dtype=cp.float32) for r in range(W)]
            outs = [cp.empty(c.output.nbytes(r) // 4, cp.float32) for r in range(W)]
            # hand-made, not a collective: its stand-in spec says nothing verify could hold
            key = f"{'fan_read' if read else 'put_fan'} k={k} n={n}"
            out[key] = time_graph(lambda: world.run(s, ins, outs, verify=False), calls=64, replays=6)
            world.check()
    cases = [(name, size, dict(pol, put_ctas=p)) for name, size, pol in COLLECTIVES for p in PUTS]
    cases.append(("all_reduce", 8 * KiB, None))
    for name, size, pol in cases:
        c = library.from_size(name, W, size, "fp32")
        ins, outs = buffers(cp, c, rng_seed=3)
        s = plan(c, topo, pol)
        key = f"{name} {size} " + (f"put={pol['put_ctas']}" if pol else "default")
        out[key] = time_graph(lambda: world.run(s, ins, outs), calls=64, replays=6)
        world.check()
        print(key, sorted(out[key])[len(out[key]) // 2], flush=True)
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", help="directory holding the earlier package")
    ap.add_argument("--out", default="h200-put-runs.json")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(measure()))
        return {}
    if not args.before:
        ap.error("--before DIR is required: the earlier package to compare with")
    from gpu_common import before_and_after, header, median, write
    runs = before_and_after(__file__, args.before, [])
    doc = header("python3 benchmarks/gpu_put_runs.py " + " ".join(argv or sys.argv[1:]))
    doc["raw"] = runs
    ratios = {k: median(runs["after"][k]) / median(runs["before"][k]) for k in runs["after"] if k != "package"}
    doc["summary"] = {"after_over_before": ratios, "best": min(ratios.values()), "worst": max(ratios.values()),
                      "before_us": {k: median(runs["before"][k]) for k in ratios},
                      "after_us": {k: median(runs["after"][k]) for k in ratios}}
    print(json.dumps(doc["summary"]["after_over_before"], indent=1))
    write(args.out, doc)
    return doc


if __name__ == "__main__":
    main()
