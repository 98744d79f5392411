"""Per-instruction traces of the executor's packet microbenchmarks, beside the simulator's.

``calibrate_executor.py`` times each case of :mod:`purlin.sim.microbench` as a whole; the
fit matches those totals. Two models can match a total and still place its time apart
(a put that holds its CTA long and lands at once, or one that frees its CTA early and
lands late), and a collective's critical path depends on which. This traces the packet
cases (and the plain copies, as a reference) with ``LoopbackWorld.trace`` (a timestamp at
each instruction's start and end), keeps the run of median span, and reports per case the
put's own record, when its reader's wait ends and when the reader ends, measured against
simulated (that GPU's own calibration).

    python3 benchmarks/trace_microbench.py --out h100-microbench-traces.json   (GPU; ~1 min)
    python3 benchmarks/trace_microbench.py --report h100-microbench-traces.json [--gpu h100]
                                                                               (CPU: adds "report")

Writes benchmarks/results/<--out>: machine, date, command; per case its traced spans
(every run) and the median run's records; ``--report`` adds ``report``: the comparison with
the simulator per case and its ``summary`` by family (median of simulated minus traced).
"""
from __future__ import annotations

import argparse
import statistics

from common import revise, save

from purlin.sim import microbench as mb

FAMILIES = ("copy_ops", "packets", "put_ops", "put_pass", "put_wave", "pkt_reduce", "push_read", "fan_in")


def cases():
    return [(name, params, s) for name, params, s in mb.CASES if name in FAMILIES]


def measure(runs: int) -> list[dict]:
    """Every case traced ``runs`` times on the GPU (after one untraced warm-up call)."""
    from gpu_common import cupy

    from purlin.backends.gpu import LoopbackWorld
    cp = cupy()
    world = LoopbackWorld(1)
    rows = []
    for name, params, s in cases():
        c = s.collective
        x = cp.random.standard_normal(max(1, c.input.nbytes(0) // 4), dtype=cp.float32).view(cp.uint8)
        ins = [x[: c.input.nbytes(0)] if c.input.nbytes(0) else None]
        outs = [cp.empty(c.output.nbytes(0), cp.uint8) if c.output.nbytes(0) else None]
        world.run(s, ins, outs, verify=False)
        world.synchronize()
        traced = [world.trace(s, ins, outs, verify=False) for _ in range(runs)]
        spans = [max(r.end_us for r in recs) for recs in traced]
        mid = sorted(range(runs), key=spans.__getitem__)[runs // 2]
        rows.append({"case": name, **params, "spans_us": spans, "records": [list(r) for r in traced[mid]]})
        print(f"{name:>10} {params}  span {statistics.median(spans):7.2f} us", flush=True)
    return rows


def shape(records: list) -> dict:
    """What a case's timeline says of its puts and readers (microseconds): each put's own
    record; a reader's wait end and its end, each after the end of the latest put it waits
    for (the put that wrote the window it reads); and the span."""
    recs = [tuple(r) for r in records]
    t0 = min((r[4] for r in recs), default=0.0)   # from the first instruction's start, as traced
    recs = [r[:4] + (r[4] - t0, r[5] - t0) + r[6:] for r in recs]
    puts = [r for r in recs if r[3] == "PutPackets"]
    by_cta: dict[int, list] = {}
    for r in recs:
        by_cta.setdefault(r[1], []).append(r)
    put_ctas = {r[1] for r in puts}
    last_put_end = max((r[5] for r in puts), default=0.0)
    wait_after, end_after = [], []
    for cta, rs in by_cta.items():
        if cta in put_ctas:
            continue
        waits = [r for r in rs if r[3] == "WaitPackets"]
        if waits and puts:
            # the put CTA this reader pairs with is the one before it (microbench layout)
            mine = [r for r in puts if r[1] == cta - 1] or puts
            end = max(r[5] for r in mine)
            wait_after.append(max(r[5] for r in waits) - end)
            end_after.append(max(r[5] for r in rs) - end)
    return {"put_us": [r[5] - r[4] for r in puts],
            "put_span_us": max((r[5] for r in puts), default=0.0) - min((r[4] for r in puts), default=0.0),
            "last_put_end_us": last_put_end,
            "wait_end_after_put_us": wait_after, "reader_end_after_put_us": end_after,
            "span_us": max((r[5] for r in recs), default=0.0)}


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def report(doc: dict, gpu: str) -> dict:
    """The measured shapes beside the simulated ones, per case and by family."""
    from purlin.sim.engine import simulate
    from purlin.topology import load_topology
    topo = load_topology(f"{gpu}-loopback", world=1)
    sims = {mb.case_key(n, p): s for n, p, s in cases()}
    rows, fam = [], {}
    for row in doc["raw"]:
        params = {k: v for k, v in row.items() if k not in ("case", "spans_us", "records")}
        s = sims.get(mb.case_key(row["case"], params))
        if s is None:
            continue
        g = shape(row["records"])
        m = shape(simulate(s, topo, gpu, record=True).records)
        out = {"case": row["case"], **params}
        for key in ("put_us", "wait_end_after_put_us", "reader_end_after_put_us"):
            out[key] = {"gpu": _median(g[key]), "sim": _median(m[key])}
        for key in ("put_span_us", "span_us"):
            out[key] = {"gpu": g[key], "sim": m[key]}
        rows.append(out)
        # a batch of puts shares one record on the GPU (the executor runs them together), so
        # a run of puts is compared whole: its first start to its last end
        f = fam.setdefault(row["case"], {k: [] for k in ("put_span_us", "reader_end_after_put_us", "span_us")})
        for key in f:
            a, b = out[key]["gpu"], out[key]["sim"]
            if a is not None and b is not None:
                f[key].append(b - a)
    summary = {name: {f"{key}_sim_minus_gpu_median": _median(v) for key, v in f.items()} | {"cases": len(f["span_us"])}
               for name, f in fam.items()}
    return {"calibration": gpu, "cases": rows, "summary": summary}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="h200-microbench-traces.json")
    ap.add_argument("--runs", type=int, default=9, help="traced runs per case (the median span's is kept)")
    ap.add_argument("--report", default=None, metavar="FILE", help="CPU: add the simulator's comparison to FILE")
    ap.add_argument("--gpu", default=None, help="calibration for --report (default: FILE's prefix)")
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error(f"--runs {args.runs}: at least 1")
    if args.report:
        gpu = args.gpu or args.report.split("-", 1)[0]
        doc = revise(args.report, "report", lambda d: report(d, gpu))
        for name, v in doc["report"]["summary"].items():
            print(f"{name:>10} " + "  ".join(f"{k}={v[k]:.3f}" if isinstance(v[k], float) else f"{k}={v[k]}"
                                             for k in v))
        return
    from gpu_common import header
    doc = {**header(), "raw": measure(args.runs)}
    print(save(args.out, doc))


if __name__ == "__main__":
    main()
