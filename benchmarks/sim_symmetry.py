"""Rank symmetry in the simulator: each point simulated every rank and by representatives.

For every point (default policy) two fresh processes plan, verify and simulate it: one
with ``symmetry=False`` (every rank: the engine before this change, the baseline) and one
with the default (representatives where the call is rank-periodic). Both run the same
schedule, so their answers must be equal (``same_time_us``); the ratio of their simulate
and total times is what symmetry buys. Targets are issue 20's (``sim_speed.TARGET_S``).

Writes ``benchmarks/results/sim_symmetry.json`` (per point both runs, with the period
found; a ``summary`` per topology: points within target with and without symmetry, the
points that found a period, the geometric mean of their simulate speedups).

Run: ``python benchmarks/sim_symmetry.py [--topologies gb200-nvl72] [--sizes 10:30:2]
[--points TOPOLOGY:COLLECTIVE:BYTES,...] [--timeout 12] [--out sim_symmetry.json]``
(``--points`` replaces the grid of topologies x the seven x sizes).
"""
from __future__ import annotations

import argparse
import math

from common import write
from sim_point import measure
from sim_speed import SEVEN, TARGET_S


def run(points: list[tuple[str, str, int]], timeout_s: float) -> list[dict]:
    rows = []
    for topo, name, size in points:
        point = {"topology": topo, "collective": name, "size": size}
        full = measure({**point, "symmetry": False}, timeout_s=timeout_s)
        sym = measure(point, timeout_s=timeout_s)
        row = {**point, "target_s": TARGET_S.get(topo), "full": full, "symmetric": sym}
        if "error" not in full and "error" not in sym:
            row["same_time_us"] = full["time_us"] == sym["time_us"]
            row["sim_speedup"] = full["sim_s"] / sym["sim_s"]
            row["total_speedup"] = full["total_s"] / sym["total_s"]
        rows.append(row)
        print(f"{topo:>18} {name:>16} {size:>11}: period {sym.get('period', '-'):>3}  "
              f"full {full.get('total_s', float('nan')):7.2f} s (sim {full.get('sim_s', float('nan')):6.2f})  "
              f"symmetric {sym.get('total_s', float('nan')):7.2f} s (sim {sym.get('sim_s', float('nan')):6.2f})"
              + ("" if row.get("same_time_us", True) else "  ANSWERS DIFFER"), flush=True)
    return rows


def _within(m: dict, target: float | None) -> bool:
    return "error" not in m and target is not None and m["total_s"] <= target


def summarize(rows: list[dict]) -> dict:
    out = {}
    for topo in sorted({r["topology"] for r in rows}):
        rs = [r for r in rows if r["topology"] == topo]
        periodic = [r for r in rs if "sim_speedup" in r and r["symmetric"]["period"] < r["symmetric"]["world"]]
        out[topo] = {
            "points": len(rs), "target_s": TARGET_S.get(topo),
            "within_target_full": sum(_within(r["full"], r["target_s"]) for r in rs),
            "within_target_symmetric": sum(_within(r["symmetric"], r["target_s"]) for r in rs),
            "periodic_points": [(r["collective"], r["size"], r["symmetric"]["period"]) for r in periodic],
            "periodic_sim_speedup_geomean": (math.exp(sum(math.log(r["sim_speedup"]) for r in periodic)
                                                      / len(periodic)) if periodic else None),
            "periodic_total_speedup_geomean": (math.exp(sum(math.log(r["total_speedup"]) for r in periodic)
                                                        / len(periodic)) if periodic else None),
            "aperiodic_total_ratio_geomean": _geo([r["total_speedup"] for r in rs
                                                   if "total_speedup" in r and r not in periodic]),
            "all_same_time_us": all(r.get("same_time_us", True) for r in rs),
            "errors": [(r["collective"], r["size"], r["full"].get("error"), r["symmetric"].get("error"))
                       for r in rs if "error" in r["full"] or "error" in r["symmetric"]]}
    out["note"] = ("full: symmetry=False (every rank simulated); symmetric: the default. Each run is a fresh "
                   "process: plan (check=False) + verify + simulate; speedups are full over symmetric")
    return out


def _geo(xs: list[float]) -> float | None:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def main() -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topologies", default="gb200-nvl72")
    ap.add_argument("--sizes", default="10:30:2", help="log2 sizes FIRST:LAST:STEP (default 1 KiB..1 GiB by 4)")
    ap.add_argument("--points", default="", help="TOPOLOGY:COLLECTIVE:BYTES,... instead of the grid")
    ap.add_argument("--timeout", type=float, default=12.0, help="seconds a run may take")
    ap.add_argument("--out", default="sim_symmetry.json")
    args = ap.parse_args()
    try:
        a, b, c = (int(x) for x in args.sizes.split(":"))
    except ValueError:
        ap.error(f"--sizes {args.sizes!r}: expected FIRST:LAST:STEP (log2 bytes)")
    points = [(t, n, 1 << e) for t in args.topologies.split(",") if t for n in SEVEN for e in range(a, b + 1, c)]
    if args.points:
        try:
            points = [(t, n, int(x)) for t, n, x in (p.split(":") for p in args.points.split(","))]
        except ValueError:
            ap.error(f"--points {args.points!r}: expected TOPOLOGY:COLLECTIVE:BYTES,...")
    rows = run(points, args.timeout)
    summary = summarize(rows)
    print(f"wrote {write(args.out, {'summary': summary, 'points': rows})}")
    return summary


if __name__ == "__main__":
    for k, v in main().items():
        print(k, v)
