"""What coalesced settles cost in accuracy and save in time, against exact settles.

In a call of thousands of CTAs the engine lets one settle of the rates serve every change
within a short window (:data:`purlin.sim.engine.COALESCE_REL` of the elapsed time;
:data:`~purlin.sim.engine.COALESCE_CTAS`). This runs each rack-scale point twice in the
same run, with ``exact=True`` (a settle at every change, the engine before) and by
default, each in a fresh process (``sim_point.py``), and records both predicted times,
their relative difference, and the simulate phase's wall time of each as a ratio.

Writes ``benchmarks/results/sim_coalesce.json``: machine, date, command, per point both
runs' phase times and predictions; a ``summary`` (largest and median relative
difference, the speed-up of the simulate phase: geometric mean and range, points with
coalesced settles).

Run: ``python benchmarks/sim_coalesce.py [--jobs 2] [--quick]`` (about 10 minutes on 2 cores;
``--quick`` a few points).
"""
from __future__ import annotations

import argparse
import math
import statistics

from common import write
from sim_point import measure_all

from purlin.spec.library import PURLIN_SEVEN

CASES = ([("gb200-nvl72", c, n) for c in PURLIN_SEVEN for n in (16 << 10, 1 << 20, 64 << 20)]
         + [("gb200-nvl72", "all_to_all_v", n) for n in (4 << 20, 256 << 20)]
         + [("gb200-nvl72", "all_gather_v", 256 << 10)]
         + [("rubin-nvl144", c, n) for c in ("all_gather", "all_gather_v", "all_to_all_v")
            for n in (1 << 20, 64 << 20)]
         + [("rubin-ultra-nvl576", c, 16 << 10) for c in ("all_gather_v", "all_to_all_v")])
QUICK = [("gb200-nvl72", "all_to_all_v", 4 << 20), ("gb200-nvl72", "all_gather", 1 << 20),
         ("gb200-nvl72", "all_reduce", 64 << 20)]


def compare(case: tuple, exact: dict, fast: dict) -> dict:
    """One point's two runs side by side: the change in the prediction and the speed-ups."""
    t, c, n = case
    row = {"topology": t, "collective": c, "size": n, "exact": exact, "coalesced": fast}
    if "error" not in exact and "error" not in fast:
        row["rel_diff"] = fast["time_us"] / exact["time_us"] - 1
        row["sim_speedup"] = exact["sim_s"] / fast["sim_s"]
        row["total_speedup"] = exact["total_s"] / fast["total_s"]
    nan = float("nan")
    print(f"{t:>18} {c:>16} {n:>11}  exact {exact.get('time_us', nan):10.3f} us {exact.get('sim_s', nan):6.2f} s"
          f"  coalesced {fast.get('time_us', nan):10.3f} us {fast.get('sim_s', nan):6.2f} s"
          f"  {row.get('rel_diff', nan):+.5f}", flush=True)
    return row


def summary(rows: list[dict]) -> dict:
    done = [r for r in rows if "rel_diff" in r]
    diffs = [abs(r["rel_diff"]) for r in done]
    speed = [r["sim_speedup"] for r in done]
    return {"points": len(rows), "compared": len(done),
            "with_coalesced_settles": sum(r["coalesced"].get("coalesced", 0) > 0 for r in done),
            "max_abs_rel_diff": max(diffs, default=None),
            "median_abs_rel_diff": statistics.median(diffs) if diffs else None,
            "diff_signs": {"later": sum(r["rel_diff"] > 0 for r in done),
                           "earlier": sum(r["rel_diff"] < 0 for r in done),
                           "same": sum(r["rel_diff"] == 0 for r in done)},
            "sim_speedup_geomean": math.exp(statistics.fmean(math.log(x) for x in speed)) if speed else None,
            "sim_speedup_range": [min(speed), max(speed)] if speed else None,
            "errors": [f"{r['topology']} {r['collective']} {r['size']}" for r in rows if "rel_diff" not in r]}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2, help="points measured at once, one process each")
    ap.add_argument("--quick", action="store_true", help="three points only")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds a run may take")
    ap.add_argument("--out", default="sim_coalesce.json")
    args = ap.parse_args(argv)
    if args.jobs < 1:
        ap.error(f"--jobs {args.jobs}: at least 1")
    if not args.timeout > 0:
        ap.error(f"--timeout {args.timeout}: a number of seconds above 0")
    cases = QUICK if args.quick else CASES
    points = [dict(topology=t, collective=c, size=n, exact=exact) for t, c, n in cases for exact in (True, False)]
    runs = measure_all(points, jobs=args.jobs, timeout_s=args.timeout)
    rows = [compare(case, exact, fast) for case, exact, fast in zip(cases, runs[0::2], runs[1::2])]
    doc = {"cases": rows, "summary": summary(rows)}
    print(write(args.out, doc))
    print(doc["summary"])
    return doc


if __name__ == "__main__":
    main()
