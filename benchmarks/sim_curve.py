"""A rack's whole nccl-tests curve from the command line, as a user runs it: issue 20's
"seven collectives on gb200-nvl72, 1 KiB to 1 GiB by x4, in at most 3 minutes".

Runs ``purlin sim -t TOPOLOGY --sizes 1K:1G:4 --json FILE`` (the seven Purlin collectives,
default policy, plan with its verification and simulation, the CLI's process pool over the
machine's cores) in a fresh process, once with this tree and once with a baseline commit's
code, one after the other, and records each run's wall time, the peak resident set of its
largest process, and every point's predicted time; the summary gives new over old as a
ratio and whether the curve is within the target.

Writes ``benchmarks/results/sim_curve.json``.

Run: ``python benchmarks/sim_curve.py --baseline 9884acb`` (about 5 minutes on 2 cores).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import write
from sim_point import ROOT, baseline_checkout

TARGET_S = 180.0
# the command line of the code on PYTHONPATH (the `purlin` script runs the installed package)
CLI = "import sys; from purlin.cli import main; sys.exit(main(sys.argv[1:]))"


def run_curve(root: Path, topology: str, sizes: str, out: Path, timeout: float) -> dict:
    """One CLI curve with the code under ``root``: wall time, peak memory, rows."""
    args = ["sim", "-t", topology, "--sizes", sizes, "--json", str(out)]
    env = {**os.environ, "PYTHONPATH": str(root)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-c", CLI, *args], cwd=out.parent, env=env, capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s", "wall_s": time.perf_counter() - t0}
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    got = {"wall_s": wall, "returncode": p.returncode, "stdout_tail": p.stdout[-2000:],
           "stderr_tail": p.stderr[-2000:],
           "peak_rss_mb": peak / 1024 if peak > before else None}   # ru_maxrss: the largest child so far
    if p.returncode == 0 and out.is_file():
        rows = json.loads(out.read_text())
        rows = rows.get("rows", rows) if isinstance(rows, dict) else rows
        got["points"] = [{k: r.get(k) for k in ("collective", "size", "time_us", "busbw", "error")} for r in rows]
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", required=True, help="the commit whose code runs the same curve")
    ap.add_argument("--topology", default="gb200-nvl72")
    ap.add_argument("--sizes", default="1K:1G:4")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--out", default="sim_curve.json")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        old_root = baseline_checkout(a.baseline, tmp / "old")
        new = run_curve(ROOT, a.topology, a.sizes, tmp / "new.json", a.timeout)
        old = run_curve(old_root, a.topology, a.sizes, tmp / "old.json", a.timeout)
    same = None
    if "points" in new and "points" in old:
        by_old = {(p["collective"], p["size"]): p["time_us"] for p in old["points"]}
        same = sum(1 for p in new["points"] if by_old.get((p["collective"], p["size"])) == p["time_us"])
    summary = {"topology": a.topology, "sizes": a.sizes, "cores": os.cpu_count(), "target_s": TARGET_S,
               "wall_s": new["wall_s"], "within_target": new.get("returncode") == 0 and new["wall_s"] <= TARGET_S,
               "baseline": a.baseline, "baseline_wall_s": old["wall_s"],
               "old_over_new": old["wall_s"] / new["wall_s"],
               "points": len(new.get("points", [])), "same_prediction_as_baseline": same}
    write(a.out, {"summary": summary, "new": new, "old": old})
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
