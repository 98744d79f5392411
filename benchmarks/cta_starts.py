"""When the CTAs of one launch start, read from GPU traces, against the simulator's launch.

The simulator starts the CTAs of a launch one after another in grid order (by rank, then
CTA), ``launch_per_cta_us`` apart. The traced codesign runs (``gpu_codesign.py --trace``:
a timestamp at every instruction's start and end, per call) say when each CTA ran its
first instruction. This reads them and reports, per traced call, the least-squares slope
of that first start against the CTA's place in the grid (what ``launch_per_cta_us`` would
be if the stagger were in grid order) and the spread of the first starts, beside the
calibration's ``launch_per_cta_us`` and what it would stagger the last CTA of that grid by.

    python3 benchmarks/cta_starts.py [--gpus h100,h200]      (CPU; reads <gpu>-codesign-misses.json)

Writes benchmarks/results/cta-starts.json: machine, date, command, per GPU the per-call
rows (CTAs, slope, spread, 90th percentile of the first starts) and a ``summary``.
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import numpy as np

from common import RESULTS, header, load, save

ROOT = Path(__file__).resolve().parents[1]


def starts(trace: list) -> list[float]:
    """First-instruction start (us) of each CTA of one traced call, in grid order."""
    first: dict[tuple[int, int], float] = {}
    for rank, cta, _, _, t0, _, _ in trace:
        key = (rank, cta)
        first[key] = min(first.get(key, t0), t0)
    return [first[k] for k in sorted(first)]


def row(trace: list) -> dict:
    ys = starts(trace)
    xs = np.arange(len(ys), dtype=float)
    slope = float(np.polyfit(xs, ys, 1)[0]) if len(ys) > 2 else 0.0
    return {"ctas": len(ys), "slope_us_per_cta": slope, "spread_us": max(ys) - min(ys),
            "p90_start_us": float(np.percentile(ys, 90))}


def per_gpu(gpu: str) -> dict:
    doc = load(f"{gpu}-codesign-misses.json")
    cal = json.loads((ROOT / "topologies" / "calibration" / f"{gpu}.json").read_text())["parameters"]
    rows = [{"case": f"{c['collective']}/W{c['world']}/band{c['band']}", "label": k["label"], **row(k["trace"])}
            for c in doc["cases"] for k in c["candidates"] if k.get("trace")]
    per = cal["launch_per_cta_us"]["value"]
    med = lambda key: statistics.median(r[key] for r in rows)   # noqa: E731
    return {"source": f"benchmarks/results/{gpu}-codesign-misses.json ({doc['date']})", "rows": rows,
            "summary": {"calls": len(rows), "median_ctas": med("ctas"),
                        "median_slope_us_per_cta": med("slope_us_per_cta"),
                        "median_spread_us": med("spread_us"), "median_p90_start_us": med("p90_start_us"),
                        "calibration_launch_per_cta_us": per,
                        "calibration_last_cta_stagger_us_at_median_ctas": per * (med("ctas") - 1)}}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", default="h100,h200")
    args = ap.parse_args(argv)
    gpus = [g for g in args.gpus.split(",") if g]
    missing = [g for g in gpus if not (RESULTS / f"{g}-codesign-misses.json").exists()]
    if missing:
        ap.error(f"--gpus: no traced results for {', '.join(missing)} (benchmarks/results/<gpu>-codesign-misses.json)")
    doc = {**header(), "gpus": {g: per_gpu(g) for g in gpus}}
    doc["summary"] = {g: v["summary"] for g, v in doc["gpus"].items()}
    print(json.dumps(doc["summary"], indent=1))
    print(save("cta-starts.json", doc))


if __name__ == "__main__":
    main()
