"""One engine change, measured: an earlier commit against this tree on the same schedules.

Each case (topology, collective, size) is planned, verified and simulated (``sim_point.py``,
a fresh process per sample) by the code of ``--before`` and by this tree, alternately,
``--repeat`` times each, so that a drift of the shared machine falls on both alike. This
tree runs the policy the earlier code chose (one schedule), and the two predicted times
must be equal: a speed-up must not change an answer. The ratio per phase is before / after
of the fastest sample of each (the least disturbed), with the medians beside it.

Writes ``benchmarks/results/<--out>``: per case every sample, the ratios, and the
relative difference of the predicted times; a ``summary`` (geometric mean of the total's
ratio, the largest time difference).

Run: ``python benchmarks/sim_ab.py --before COMMIT --cases TOPOLOGY:COLLECTIVE:BYTES,...
[--repeat 3] [--out sim_ab.json]``.
"""
from __future__ import annotations

import argparse
import math
import statistics
import tempfile
from pathlib import Path

from common import write
from sim_point import baseline_checkout, measure

PHASES = ("plan", "verify", "sim", "total")


def compare(case: tuple[str, str, int], before_root: Path, repeat: int, timeout_s: float) -> dict:
    """Alternate samples of the two engines on one case; their ratios and answers."""
    topo, name, size = case
    point = {"topology": topo, "collective": name, "size": size}
    old, new = [], []
    for _ in range(repeat):
        old.append(measure(point, root=before_root, timeout_s=timeout_s))
        if "error" in old[-1]:
            return {**point, "error": f"before: {old[-1]['error']}", "before": old}
        new.append(measure({**point, "policy": old[0]["policy"]}, timeout_s=timeout_s))
        if "error" in new[-1]:
            return {**point, "error": f"after: {new[-1]['error']}", "before": old, "after": new}
    row = {**point, "before": old, "after": new,
           "time_rel_diff": max(abs(o["time_us"] / n["time_us"] - 1) for o, n in zip(old, new))}
    for ph in PHASES:
        o, n = [x[f"{ph}_s"] for x in old], [x[f"{ph}_s"] for x in new]
        row[f"{ph}_ratio"] = min(o) / min(n)
        row[f"{ph}_ratio_median"] = statistics.median(o) / statistics.median(n)
    return row


def main() -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="commit of the engine before the change")
    ap.add_argument("--cases", required=True, help="TOPOLOGY:COLLECTIVE:BYTES,...")
    ap.add_argument("--repeat", type=int, default=3, help="samples of each engine per case")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds a sample may take")
    ap.add_argument("--out", default="sim_ab.json", help="result file name under benchmarks/results")
    args = ap.parse_args()
    try:
        cases = [(t, c, int(n)) for t, c, n in (x.split(":") for x in args.cases.split(",") if x)]
    except ValueError:
        ap.error(f"--cases {args.cases!r}: expected TOPOLOGY:COLLECTIVE:BYTES,...")
    if args.repeat < 1:
        ap.error(f"--repeat {args.repeat}: at least 1")
    root = baseline_checkout(args.before, Path(tempfile.gettempdir()) / "purlin-baseline")
    rows = []
    for case in cases:
        row = compare(case, root, args.repeat, args.timeout)
        rows.append(row)
        print(" ".join(map(str, case)) + ": " + (row["error"] if "error" in row else
              "  ".join(f"{ph} x{row[f'{ph}_ratio']:.2f}" for ph in PHASES)
              + f"  (total {min(x['total_s'] for x in row['before']):.2f} -> "
                f"{min(x['total_s'] for x in row['after']):.2f} s; time differs by {row['time_rel_diff']:.1e})"),
              flush=True)
    done = [r for r in rows if "error" not in r]
    summary = {"before": args.before, "repeat": args.repeat, "cases": len(rows), "compared": len(done),
               "total_ratio_geomean": math.exp(statistics.fmean(math.log(r["total_ratio"]) for r in done))
               if done else None,
               "total_ratio_range": [min(r["total_ratio"] for r in done), max(r["total_ratio"] for r in done)]
               if done else None,
               "max_time_rel_diff": max((r["time_rel_diff"] for r in done), default=None),
               "note": "ratio = before / after of each engine's fastest sample; the after engine runs "
                       "the policy the before engine chose"}
    path = write(args.out, {"summary": summary, "rows": rows})
    print(f"wrote {path}")
    return summary


if __name__ == "__main__":
    print(main())
