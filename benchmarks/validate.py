"""Predict, then validate: the seven Purlin collectives on an H200 loopback world.

Two steps, so the GPU run stays short and the prediction never sees the measurement:

  measure  (GPU)  python benchmarks/validate.py measure --out DIR
           plans each point with the toolkit's default policy on ``h200-loopback`` (W ranks
           on one GPU), runs it with poisoned outputs, checks small sizes against the
           spec, times it in CUDA graphs, and writes h200-validation-raw.json to
           benchmarks/results/ and to DIR (default $OUT, where the device tool fetches).
  predict  (CPU)  python benchmarks/validate.py predict --raw FILE
           re-plans every point (same policy and CTA budget: the schedule digest must
           match the one that ran), simulates it with the committed calibration, and
           writes benchmarks/results/h200-validation.json (+ .png, + a side-by-side trace).

Sizes are nccl-tests sizes 4 KiB to 1 GiB, W in {2, 4, 8}.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from common import RESULTS, header, save, write

from purlin.sim.validation import microbenchmark_check
from purlin.spec import library

SIZES = [4096 * 4 ** k for k in range(10)]          # 4 KiB .. 1 GiB
WORLDS = (2, 4, 8)
DTYPE = "fp32"


# Calls traced on the GPU (per-instruction timestamps) for side-by-side timelines: one per
# regime, and the points the model got worst on 2026-11-29 (a V-form AllToAll and a V-form
# ReduceScatter beside the plain ones of the same size; two latency-regime calls at W=4).
TRACED = ((8, "all_reduce", 4 << 20), (8, "all_gather", 64 << 10), (4, "reduce_scatter", 16 << 20),
          (8, "all_to_all_v", 4 << 20), (8, "all_to_all", 4 << 20), (4, "all_reduce", 16 << 10),
          (4, "all_reduce", 64 << 10), (4, "all_gather_v", 64 << 10), (8, "reduce_scatter_v", 1 << 20),
          (8, "reduce_scatter", 1 << 20), (2, "all_to_all", 16 << 10))


def calls_per_graph(size: int) -> int:
    return 128 if size <= 1 << 20 else 16 if size <= 64 << 20 else 2


# ---- measure (GPU) --------------------------------------------------------------------

def gpu_info(cp) -> dict:
    props = cp.cuda.runtime.getDeviceProperties(0)
    return {"gpu": props["name"].decode(), "sms": props["multiProcessorCount"],
            "driver": cp.cuda.runtime.driverGetVersion(), "runtime": cp.cuda.runtime.runtimeGetVersion(),
            "cupy": cp.__version__}


def memcpy_gbps(cp, nbytes: int = 1 << 30) -> float:
    from gpu_common import time_graph
    a = cp.empty(nbytes, cp.uint8)
    b = cp.empty_like(a)
    us = time_graph(lambda: cp.cuda.runtime.memcpyAsync(
        b.data.ptr, a.data.ptr, nbytes, cp.cuda.runtime.memcpyDeviceToDevice,
        cp.cuda.get_current_stream().ptr), 4)
    return 2 * nbytes / (statistics.median(us) * 1e3)   # bytes read + written, GB/s


def measure(out_dir: Path | None, worlds, sizes, names) -> Path:
    import cupy as cp
    import numpy as np
    from gpu_common import time_graph

    from purlin.backends.gpu import LoopbackWorld
    from purlin.snac.serialize import programs_digest
    from purlin.spec import evaluate
    from purlin.topology import load_topology

    rows = []
    t_start = time.time()
    info = gpu_info(cp)
    memcpy = memcpy_gbps(cp)
    print(f"# {info['gpu']}: cudaMemcpy D2D {memcpy:.0f} GB/s (read + written)", flush=True)
    for w in worlds:
        topo = load_topology("h200-loopback", world=w)
        world = LoopbackWorld(w, topology=topo)
        for name in names:
            for size in sizes:
                c = library.from_size(name, w, size, DTYPE)
                s = world.plan(c)
                check = size <= 16 << 20          # every element checked up to 16 MiB
                if check:
                    rng = np.random.default_rng(size + w)
                    host_in = [rng.standard_normal(c.input.nbytes(r) // 4).astype(np.float32)
                               .view(np.uint8) for r in range(w)]
                    ins = [cp.asarray(x) if x.size else None for x in host_in]
                else:                              # large: random on the GPU, timed only
                    ins = [cp.random.standard_normal(c.input.nbytes(r) // 4, dtype=cp.float32)
                           .view(cp.uint8) if c.input.nbytes(r) else None for r in range(w)]
                outs = [cp.full(c.output.nbytes(r), 0xFF, cp.uint8) if c.output.nbytes(r) else None
                        for r in range(w)]
                world.run(s, ins, outs)
                world.synchronize()
                wrong = None
                if check:
                    want = evaluate(c, host_in)
                    wrong = sum(int(np.count_nonzero(cp.asnumpy(o) != e)) for o, e in zip(outs, want)
                                if o is not None)
                us = time_graph(lambda: world.run(s, ins, outs), calls_per_graph(size), replays=5,
                                warmup=1)
                world.check()
                med = statistics.median(us)
                rows.append({"world": w, "collective": c.name, "requested": size,
                             "size": library.nccl_size(c), "programs_digest": programs_digest(s), "cta_budget": world.cta_budget,
                             "policy": s.policy, "calls_per_graph": calls_per_graph(size),
                             "samples_us": us, "time_us": med, "wrong": wrong})
                if (w, name, size) in TRACED:
                    world.run(s, ins, outs)   # warm, as in the timed graphs
                    rows[-1]["trace"] = [list(r) for r in world.trace(s, ins, outs)]
                print(f"W={w} {c.name:>16} {size:>11} B  {med:10.2f} us  wrong={wrong}", flush=True)
                _save(out_dir, info, memcpy, t_start, rows)   # partial results survive a timeout
                del ins, outs
        del world
        cp.get_default_memory_pool().free_all_blocks()
    return _save(out_dir, info, memcpy, t_start, rows)


def _save(out_dir: Path | None, info: dict, memcpy: float, t_start: float, rows: list) -> Path:
    payload = {**header(), "gpu": info, "memcpy_gbps": memcpy, "dtype": DTYPE,
               "topology": "h200-loopback", "elapsed_s": time.time() - t_start, "points": rows}
    return save("h200-validation-raw.json", payload, out_dir)   # results, and DIR or $OUT too


# ---- predict (CPU) --------------------------------------------------------------------

def predict(raw_path: Path, calibration: str = "h200") -> dict:
    from purlin.sim import simulate
    from purlin.snac import plan
    from purlin.snac.serialize import programs_digest
    from purlin.topology import load_topology

    raw = json.loads(raw_path.read_text())
    points, traces = [], []
    for p in raw["points"]:
        topo = load_topology(raw["topology"], world=p["world"])
        c = library.from_size(p["collective"], p["world"], p["requested"], raw["dtype"])
        s = plan(c, topo, p["policy"], cta_budget=p["cta_budget"])   # the policy that ran
        if programs_digest(s) != p["programs_digest"]:
            raise SystemExit(f"{p['collective']} W={p['world']} {p['requested']} B: the schedule "
                             f"planned here differs from the one measured (digest mismatch)")
        r = simulate(s, topo, calibration, record="trace" in p)
        err = (r.time_us - p["time_us"]) / p["time_us"]
        if "trace" in p:
            traces.append(_side_by_side(s, r, p))
        points.append({**{k: p[k] for k in ("world", "collective", "requested", "size", "policy", "wrong",
                                            "cta_budget", "programs_digest")},
                       "measured_us": p["time_us"], "measured_samples_us": p["samples_us"],
                       "predicted_us": r.time_us, "error": err})
    errs = [abs(p["error"]) for p in points]
    summary = {"median_abs_err": statistics.median(errs), "max_abs_err": max(errs),
               "points": len(points), "target_median": 0.05, "target_max": 0.15,
               "calibration": calibration,
               "worst": max(points, key=lambda p: abs(p["error"]))}
    by = {}
    for key in ("world", "collective"):
        groups: dict = {}
        for p in points:
            groups.setdefault(str(p[key]), []).append(abs(p["error"]))
        by[key] = {k: statistics.median(v) for k, v in groups.items()}
    summary["median_abs_err_by"] = by
    summary["traces"] = traces
    ex = json.loads((RESULTS / "h200-executor-calibration-raw.json").read_text())
    summary["microbenchmarks"] = microbenchmark_check(ex, calibration)
    out = write("h200-validation.json", {"summary": summary, "measured_on": {k: raw[k] for k in ("machine", "date", "command", "gpu", "memcpy_gbps")},
                                         "points": points})
    _plot(points, RESULTS / "h200-validation.png")
    print(f"median |err| {summary['median_abs_err']:.3f}  max |err| {summary['max_abs_err']:.3f}  "
          f"over {len(points)} points -> {out}")
    return summary


def _side_by_side(s, r, p) -> dict:
    """One call's predicted and measured timelines in one Perfetto trace. The GPU timeline
    starts at its first instruction; it is shifted to the simulator's first instruction
    (the modelled launch), so both share a time axis."""
    from purlin.trace import OpRecord, perfetto
    from purlin.trace import write as write_trace
    shift = min(x[4] for x in r.records)
    gpu = [OpRecord(*x[:4], x[4] + shift, x[5] + shift, x[6]) for x in p["trace"]]
    name = f"h200-validation-trace-{p['collective']}-W{p['world']}-{p['requested']}.json"
    write_trace(RESULTS / name, perfetto(s, {"predicted (simulator)": r.records, "measured (H200)": gpu},
                                         {"predicted_us": r.time_us, "measured_median_us": p["time_us"]}))
    ends = lambda recs: {(x[0], x[1]): x[5] for x in recs}   # noqa: E731  last instruction per CTA
    pe, me = ends(r.records), ends(gpu)
    errs = [(pe[k] - me[k]) / me[k] for k in me if k in pe and me[k] > 0]
    return {"file": name, "collective": p["collective"], "world": p["world"], "requested": p["requested"],
            "predicted_span_us": max(x[5] for x in r.records), "measured_span_us": max(x[5] for x in gpu),
            "median_abs_err_cta_end": statistics.median(abs(e) for e in errs) if errs else None}


def _plot(points, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.5, 6))
    for w, marker in zip(WORLDS, "os^"):
        pts = [p for p in points if p["world"] == w]
        ax.scatter([p["measured_us"] for p in pts], [p["predicted_us"] for p in pts], s=14,
                   marker=marker, label=f"W={w}", alpha=0.8)
    lo = min(min(p["measured_us"], p["predicted_us"]) for p in points) * 0.8
    hi = max(max(p["measured_us"], p["predicted_us"]) for p in points) * 1.25
    xs = [lo, hi]
    ax.plot(xs, xs, "k-", lw=0.8, label="predicted = measured")
    ax.fill_between(xs, [x * 0.85 for x in xs], [x * 1.15 for x in xs], color="k", alpha=0.08, label="±15%")
    ax.set(xscale="log", yscale="log", xlabel="measured per call (us)", ylabel="predicted per call (us)",
           title="Seven collectives on an H200 loopback world")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="step", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--out", type=Path, default=None)
    m.add_argument("--worlds", default="2,4,8")
    m.add_argument("--max-size", type=int, default=1 << 30)
    m.add_argument("--collectives", default=",".join(library.PURLIN_SEVEN))
    p = sub.add_parser("predict")
    p.add_argument("--raw", type=Path, default=RESULTS / "h200-validation-raw.json")
    p.add_argument("--calibration", default="h200")
    args = ap.parse_args(argv)
    if args.step == "measure":
        sizes = [s for s in SIZES if s <= args.max_size]
        print(measure(args.out, [int(x) for x in args.worlds.split(",")], sizes,
                      args.collectives.split(",")))
    else:
        predict(args.raw, args.calibration)


if __name__ == "__main__":
    main()
