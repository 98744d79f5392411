"""The generic rules before and after a change, where no codesign table answers.

For each topology and collective, at sizes past its table (or all, for a topology without
one), plan and simulate the default with the rules of a baseline commit and with this
tree's, each point in a fresh process (``sim_point.py``), and record both defaults, their
predicted times and the ratio (before over after: above 1, the new rules are faster).
Both engines give the same answer for one schedule (``tests/sim/test_reference_predictions.py``),
so a ratio other than 1 is the policy's doing.

Writes ``benchmarks/results/generic_rules.json``: per point both policies, times, ratio
and the phase times; a ``summary`` per topology (geometric mean, range, points where the
new rules lose by more than 1%).

Run: ``python benchmarks/generic_rules.py --baseline 52df19d --jobs 2`` (the racks), or
``--topologies h200-loopback,b200-loopback --out generic_rules_loopback.json`` (``nvswitch-W``:
a synthetic switch world of W GPUs with the GB200 numbers, as in ``sim_point.py``); a rule for
some collectives only: ``--collectives all_gather,all_gather_v --sizes 1M:1G:4`` (the
sizes for every topology named).
"""
from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path

from common import write
from sim_point import baseline_checkout, measure_all

from purlin.cliargs import sizes_option
from purlin.spec.library import PURLIN_SEVEN as SEVEN

SIZES = {"gb200-nvl72": [1 << e for e in range(20, 31, 2)],          # 1 MiB .. 1 GiB, x4
         "rubin-nvl144": [1 << 18, 1 << 20, 1 << 24],                     # 256 KiB .. 16 MiB
         # loopback worlds (W=8) past their tables' 256 KiB: 1 MiB .. 1 GiB, x4
         "h200-loopback": [1 << e for e in range(20, 31, 2)],
         "b200-loopback": [1 << e for e in range(20, 31, 2)],
         "rubin-ultra-nvl576": [1 << e for e in range(22, 29, 2)]}                # 4 MiB .. 256 MiB


def _budget(name: str) -> dict:
    """A loopback world plans with its GPU's SMs shared among its ranks (what
    ``LoopbackWorld`` and ``purlin codesign`` use: every CTA co-resident); others with 64."""
    from sim_point import _topology
    t, _ = _topology(name)   # a shipped topology, or nvswitch-W (a synthetic switch world)
    return {"cta_budget": t.gpu_of(0).sms // t.world} if t.loopback else {}


def summarize(rows: list[dict]) -> dict:
    out = {}
    for topo in sorted({r["topology"] for r in rows}):
        ratios = [r["before_over_after"] for r in rows if r["topology"] == topo and "before_over_after" in r]
        if not ratios:
            continue
        out[topo] = {"points": len(ratios),
                     "geomean_before_over_after": math.exp(sum(map(math.log, ratios)) / len(ratios)),
                     "min": min(ratios), "max": max(ratios),
                     "new_slower_by_over_1pct": [(r["collective"], r["size"], round(r["before_over_after"], 4))
                                                 for r in rows if r["topology"] == topo
                                                 and r.get("before_over_after", 1) < 0.99]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", required=True, help="the commit whose generic rules are compared")
    ap.add_argument("--topologies", default=",".join(SIZES))
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds a point may take")
    ap.add_argument("--out", default="generic_rules.json", help="result file name under benchmarks/results")
    ap.add_argument("--collectives", default=",".join(SEVEN), help="comma-separated (default: the seven)")
    ap.add_argument("--sizes", help="FROM:TO[:FACTOR] for every topology named (default: each one's own)")
    args = ap.parse_args()
    sizes = sizes_option("--sizes", args.sizes) if args.sizes else None
    points = [{"topology": t, "collective": c, "size": s, **_budget(t)}
              for t in args.topologies.split(",") for c in args.collectives.split(",") for s in sizes or SIZES[t]]
    with tempfile.TemporaryDirectory() as tmp:
        old = baseline_checkout(args.baseline, Path(tmp))
        before = measure_all(points, args.jobs, root=old, timeout_s=args.timeout)
    after = measure_all(points, args.jobs, timeout_s=args.timeout)
    rows = []
    for p, b, a in zip(points, before, after):
        row = {**p, "before": b, "after": a}
        if "error" not in b and "error" not in a:
            row["before_over_after"] = b["time_us"] / a["time_us"]
            row["same_policy"] = b["policy"] == a["policy"]
        rows.append(row)
        print(f"{p['topology']:>14} {p['collective']:>16} {p['size']:>11}: "
              + (f"{b.get('time_us', b.get('error'))} -> {a.get('time_us', a.get('error'))}"))
    write(args.out, {"baseline": args.baseline, "jobs": args.jobs, "collectives": args.collectives.split(","),
                                 "summary": summarize(rows), "points": rows})


if __name__ == "__main__":
    main()
