"""Simulator speed against the targets of issue 20, point by point.

Targets (2 cores, default policy, plan + verify + simulate in one process): every library
collective (the seven Purlin ones) at every size from 1 KiB to 1 GiB (factor 4) within
2 s a point on gb200-nvl72, 5 s on rubin-nvl144, 30 s on rubin-ultra-nvl576; the whole
gb200-nvl72 curve (77 points) within 180 s; at most 2 GB (peak resident set) for any
point. Each point runs in a fresh process (``sim_point.py``): its caches and memory peak
are its own, as a first ``purlin sim`` call's would be. A point that runs past
``--timeout-factor`` times its target is stopped and recorded as a miss.

Baseline in the same run: the engine before the rack-scale work (commit 3934e54; others
with ``--baseline COMMIT,COMMIT``, each on the same cases) on the cases the issue quotes (NVL72 AllReduce 1 GiB and 64 KiB,
AllToAllV 64 MiB; others with ``--baseline-cases``), against this
engine given the old default policy (one schedule: the engine's own speedup, and the same
answer), and against this engine's default (what a user gets now), as ratios.

Writes ``benchmarks/results/sim_speed.json``: per point the phase times, instruction,
flow and event counts, peak memory, target and whether it was met; a ``summary``.

Run: ``python benchmarks/sim_speed.py [--topologies gb200-nvl72,rubin-nvl144,rubin-ultra-nvl576]
[--quick] [--quick-for rubin-ultra-nvl576] [--timeout-factor 4] [--no-old] [--out FILE]
[--reuse FILE]`` (the full run takes hours on 2 cores; ``--reuse`` re-measures only the
baseline, keeping the points of an earlier result file).
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from common import RESULTS, write
from sim_point import baseline_checkout, measure, measure_all

from purlin.spec.library import PURLIN_SEVEN

SEVEN = PURLIN_SEVEN
SIZES = [1 << e for e in range(10, 31, 2)]          # 1 KiB .. 1 GiB, factor 4
TARGET_S = {"gb200-nvl72": 2.0, "rubin-nvl144": 5.0, "rubin-ultra-nvl576": 30.0}
CURVE_TARGET_S = 180.0
MEMORY_TARGET_MB = 2048.0
BASELINE = "3934e54"
BASELINE_CASES = (("gb200-nvl72", "all_reduce", 1 << 30), ("gb200-nvl72", "all_to_all_v", 64 << 20),
                  ("gb200-nvl72", "all_reduce", 64 << 10))


def run_targets(topologies: list[str], sizes: dict[str, list[int]], factor: float,
                longest: float, jobs: int = 1) -> list[dict]:
    rows = []
    for topo in topologies:
        target = TARGET_S[topo]
        points = [{"topology": topo, "collective": name, "size": size}
                  for name in SEVEN for size in sizes[topo]]
        for pt, m in zip(points, measure_all(points, jobs, timeout_s=min(factor * target, longest))):
            name, size = pt["collective"], pt["size"]
            ok = "error" not in m
            row = {"topology": topo, "collective": name, "size": size, "target_s": target, **m,
                   "within_target": ok and m["total_s"] <= target and m["rss_peak_mb"] <= MEMORY_TARGET_MB}
            rows.append(row)
            print(f"{topo:>18} {name:>16} {size:>11}: "
                  + (m["error"] if not ok else
                     f"{m['total_s']:7.2f} s (plan {m['plan_s']:.2f} verify {m['verify_s']:.2f} "
                     f"sim {m['sim_s']:.2f})  {m['instructions']:>9} instrs  {m['rss_peak_mb']:6.0f} MB"
                     + ("" if row["within_target"] else "  MISS")), flush=True)
    return rows


def run_baseline(rows: list[dict], timeout_s: float, commit: str = BASELINE,
                 cases: tuple = BASELINE_CASES) -> list[dict]:
    """The baseline engine (``commit``) on ``cases`` with its own default policy, and this
    engine with that same policy: the pair runs one schedule, so its speedup is the
    engine's alone and its answers must agree (``same_time_us``). ``default_speedup``
    compares each engine's own default (what a user got then and gets now)."""
    old_root = baseline_checkout(commit, Path(tempfile.gettempdir()) / "purlin-baseline")
    out = []
    for topo, name, size in cases:
        point = {"topology": topo, "collective": name, "size": size}
        new = next((r for r in rows if (r["topology"], r["collective"], r["size"]) == (topo, name, size)
                    and "error" not in r), None) or measure(point, timeout_s=timeout_s)
        old = measure(point, root=old_root, timeout_s=timeout_s)
        row = {**point, "commit": commit, "new": new, "old": old}
        if "error" not in old:
            same = measure({**point, "policy": old["policy"]}, timeout_s=timeout_s)
            row["new_same_policy"] = same
            if "error" not in same:
                row["speedup"] = {ph: old[f"{ph}_s"] / same[f"{ph}_s"] for ph in ("plan", "verify", "sim", "total")}
                row["memory_ratio"] = old["rss_peak_mb"] / same["rss_peak_mb"]
                row["same_time_us"] = abs(old["time_us"] / same["time_us"] - 1) < 5e-3
            if "error" not in new:
                row["default_speedup"] = old["total_s"] / new["total_s"]
        out.append(row)
        print(f"baseline {topo} {name} {size}: "
              + (f"old {old['total_s']:.1f} s / new, same policy {row['new_same_policy']['total_s']:.1f} s "
                 f"= x{row['speedup']['total']:.1f} (same answer: {row['same_time_us']}); "
                 f"new default {new.get('total_s', float('nan')):.1f} s"
                 if "speedup" in row else f"old: {old.get('error')}"), flush=True)
    return out


def summarize(rows: list[dict], baseline: list[dict]) -> dict:
    out: dict = {}
    for topo in sorted({r["topology"] for r in rows}):
        rs = [r for r in rows if r["topology"] == topo]
        # a size below one element a rank (1 KiB over 576 ranks) has no such collective:
        # the library refuses it with a SpecError naming the smallest size; not a miss
        undefined = [r for r in rs if str(r.get("error", "")).startswith("purlin.errors.SpecError")]
        rs = [r for r in rs if r not in undefined]
        done = [r for r in rs if "error" not in r]
        out[topo] = {"target_s": TARGET_S[topo], "points": len(rs),
                     "undefined": [(r["collective"], r["size"], r["error"]) for r in undefined],
                     "within_target": sum(r["within_target"] for r in rs),
                     "max_total_s": max((r["total_s"] for r in done), default=None),
                     "max_rss_mb": max((r["rss_peak_mb"] for r in done), default=None),
                     "curve_total_s": sum(r["total_s"] for r in done),
                     "misses": [(r["collective"], r["size"], r.get("error") or round(r["total_s"], 2))
                                for r in rs if not r["within_target"]]}
    if "gb200-nvl72" in out:
        g = out["gb200-nvl72"]
        g["curve_target_s"] = CURVE_TARGET_S
        g["curve_within_target"] = (g["points"] == len(SEVEN) * len(SIZES)
                                    and all("error" not in r for r in rows if r["topology"] == "gb200-nvl72")
                                    and g["curve_total_s"] <= CURVE_TARGET_S)
    out["memory_target_mb"] = MEMORY_TARGET_MB
    out["baseline"] = [{k: b[k] for k in ("topology", "collective", "size", "commit")} | {
        "speedup": b.get("speedup"), "memory_ratio": b.get("memory_ratio"), "same_time_us": b.get("same_time_us"),
        "old_total_s": b["old"].get("total_s"), "new_same_policy_total_s": b.get("new_same_policy", {}).get("total_s"),
        "default_speedup": b.get("default_speedup"), "new_total_s": b["new"].get("total_s")} for b in baseline]
    out["note"] = ("total_s = plan + verify + simulate (default policy, check=False then verify); each point "
                   "in a fresh process; rss_peak_mb is the process's peak resident set")
    return out


def main() -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topologies", default=",".join(TARGET_S))
    ap.add_argument("--quick", action="store_true", help="sizes 1 KiB, 64 KiB, 4 MiB, 256 MiB only")
    ap.add_argument("--quick-for", default="", help="topologies (comma-separated) measured at those sizes only")
    ap.add_argument("--no-old", action="store_true", help="skip the baseline engine")
    ap.add_argument("--timeout-factor", type=float, default=4.0,
                    help="stop a point after this many times its target")
    ap.add_argument("--jobs", type=int, default=1,
                    help="points measured at once, one process each (at most the idle cores)")
    ap.add_argument("--max-timeout", type=float, default=600.0, help="and never after more seconds than this")
    ap.add_argument("--out", default="sim_speed.json", help="result file name under benchmarks/results")
    ap.add_argument("--reuse", default="", help="take the points from this results file; measure the baseline only")
    ap.add_argument("--baseline", default=BASELINE,
                    help=f"commits of the baseline engines, comma-separated (default {BASELINE})")
    ap.add_argument("--baseline-cases", default="",
                    help="TOPOLOGY:COLLECTIVE:BYTES,... for the baseline (default: the issue's NVL72 cases)")
    args = ap.parse_args()
    cases = BASELINE_CASES
    if args.baseline_cases:
        try:
            cases = tuple((t, c, int(n)) for t, c, n in (x.split(":") for x in args.baseline_cases.split(",")))
        except ValueError:
            ap.error(f"--baseline-cases {args.baseline_cases!r}: expected TOPOLOGY:COLLECTIVE:BYTES,...")
    topologies = [t for t in args.topologies.split(",") if t]
    quick = set(args.quick_for.split(",")) | (set(topologies) if args.quick else set())
    sizes = {t: SIZES[::3] if t in quick else SIZES for t in topologies}
    points_from = None
    if args.reuse:   # the points of an earlier run of this script; only the baseline is measured
        if not (RESULTS / args.reuse).is_file():
            ap.error(f"--reuse {args.reuse}: no such file in {RESULTS}")
        earlier = json.loads((RESULTS / args.reuse).read_text())
        rows = [r for r in earlier["points"] if r["topology"] in topologies]
        # the run that measured the points (an earlier --reuse names it in turn)
        points_from = earlier.get("points_from") or {k: earlier.get(k) for k in ("command", "date", "machine")}
    else:
        rows = run_targets(topologies, sizes, args.timeout_factor, args.max_timeout, args.jobs)
    baseline = [] if args.no_old else [b for commit in args.baseline.split(",") if commit
                                        for b in run_baseline(rows, 600.0, commit, cases)]
    summary = summarize(rows, baseline)
    doc = {"summary": summary, "jobs": args.jobs, "cpus": os.cpu_count(), "points": rows, "baseline": baseline}
    if points_from:
        doc["points_from"] = points_from
    path = write(args.out, doc)
    print(f"wrote {path}")
    return summary


if __name__ == "__main__":
    s = main()
    for k, v in s.items():
        if isinstance(v, dict):
            print(k, {x: y for x, y in v.items() if x != "misses"})
