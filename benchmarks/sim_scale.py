"""How the cost of plan, verify and simulate grows with ranks and with size (issue 20).

Against ranks: synthetic NVLink-switch worlds of W = 8, 16, 36, 72, 144, 288, 576 GPUs
with the B200/GB200 numbers (``nvswitch-W`` in ``sim_point.py``; the shipped racks are
72 ranks, and no shipped file has the others), the default policy, fixed nccl-tests sizes:
AllReduce 1 MiB, AllGather 16 MiB, AllToAll 4 MiB. Against size: gb200-nvl72, AllReduce
and AllToAllV from 1 KiB to 1 GiB, factor 4.

Every point runs in a process of its own, once for time and once under tracemalloc for
each phase's peak memory. The baseline is the engine before the rack-scale work (commit
3934e54, extracted with ``git archive``), timed in the same run on the points where it
finishes within ``--old-timeout``: ``speedup`` is its time over ours, per phase, and
``same_time_us`` whether both predict the same time (within 0.5%) for one schedule: where
today's default policy differs from the baseline's, ours runs again with the baseline's
policy for that comparison (``--recheck FILE`` does just this for an earlier run). Per phase,
a least-squares line of log(wall) against log(ranks), log(size) and log(instructions)
gives the growth exponent. Writes ``benchmarks/results/sim_scale.json`` and
``benchmarks/results/sim_scale.png``.

Run: ``python benchmarks/sim_scale.py [--quick] [--no-old] [--timeout 900] [--old-timeout 300]``
(the full run takes hours on 2 cores: the 576-rank points are millions of instructions).
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from common import RESULTS, write
from sim_point import baseline_checkout, measure

BASELINE = "3934e54"
PHASES = ("plan", "verify", "sim")
RANKS = (8, 16, 36, 72, 144, 288, 576)
RANK_CASES = (("all_reduce", 1 << 20), ("all_gather", 16 << 20), ("all_to_all", 4 << 20))
SIZES = [1 << e for e in range(10, 31, 2)]
SIZE_CASES = ("all_reduce", "all_to_all_v")


def points(quick: bool) -> list[dict]:
    ranks = RANKS[:5] if quick else RANKS
    sizes = SIZES[::2] if quick else SIZES
    out = [{"curve": "ranks", "topology": f"nvswitch-{w}", "collective": c, "size": n}
           for c, n in RANK_CASES for w in ranks]
    out += [{"curve": "size", "topology": "gb200-nvl72", "collective": c, "size": n}
            for c in SIZE_CASES for n in sizes]
    return out


def fit(xs, ys) -> dict | None:
    """log-log least squares: y ~ a * x^b; the exponent b and R^2."""
    pts = [(x, y) for x, y in zip(xs, ys) if x and y and y > 0]
    if len(pts) < 3:
        return None
    lx, ly = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
    b, a = np.polyfit(lx, ly, 1)
    pred = a + b * lx
    ss = float(((ly - ly.mean()) ** 2).sum())
    return {"exponent": float(b), "r2": 1.0 - float(((ly - pred) ** 2).sum()) / ss if ss else 1.0,
            "points": len(pts)}


def run(args) -> dict:
    old_root = None
    if not args.no_old:
        old_root = baseline_checkout(BASELINE, Path(tempfile.gettempdir()) / "purlin-baseline")
    def one(pt: dict) -> dict:
        spec = {k: pt[k] for k in ("topology", "collective", "size")}
        row = dict(pt, new=measure(spec, timeout_s=args.timeout))
        if "error" not in row["new"] and not args.no_memory:
            row["new_memory"] = measure(dict(spec, memory=True), timeout_s=args.timeout)
        if old_root is not None and "error" not in row["new"]:
            row["old"] = measure(spec, root=old_root, timeout_s=args.old_timeout)
            if "error" not in row["old"]:
                row["speedup"] = {ph: row["old"][f"{ph}_s"] / row["new"][f"{ph}_s"] for ph in PHASES + ("total",)}
                same_plan(row, args.timeout)
        return row

    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        rows = list(pool.map(one, points(args.quick)))
    for row in rows:
        pt = row
        n = row["new"]
        print(f"{pt['curve']:>5} {pt['topology']:>14} {pt['collective']:>14} {pt['size']:>11}: "
              + (n["error"] if "error" in n else
                 f"{n['instructions']:>9} instrs  plan {n['plan_s']:7.2f}  verify {n['verify_s']:7.2f}  "
                 f"sim {n['sim_s']:7.2f} s" + (f"  x{row['speedup']['total']:.1f} vs old" if "speedup" in row else
                                              f"  old: {row['old']['error']}" if "old" in row else "")),
              flush=True)
    return {"rows": rows, "summary": summarize(rows)}


def same_plan(row: dict, timeout_s: float) -> None:
    """Whether the engines agree: where the default policy has changed since the baseline
    (the codesign tables and generic rules of today plan another schedule), this engine
    runs again with the baseline's policy, so both simulate one schedule. Sets
    ``default_changed``, ``same_time_us`` and, where it ran, ``new_on_old_policy``."""
    old, new = row["old"], row["new"]
    row["default_changed"] = _policy(old["policy"]) != _policy(new["policy"])
    ours = new
    if row["default_changed"]:
        spec = {k: row[k] for k in ("topology", "collective", "size")}
        ours = row["new_on_old_policy"] = measure(dict(spec, policy=old["policy"]), timeout_s=timeout_s)
    row["same_time_us"] = ("error" not in ours and abs(old["time_us"] / ours["time_us"] - 1) < 5e-3)


def _policy(p: dict) -> dict:
    """A recorded policy with the options added since the baseline at their old values."""
    from purlin.snac.policy import LATER_OPTIONS
    return {**LATER_OPTIONS, **p}


def recheck(path: Path, timeout_s: float) -> dict:
    """Apply :func:`same_plan` to the rows of an earlier run (its timings stay as they
    were) and summarize again; the recheck says where and when it ran."""
    import json
    from common import header
    doc = json.loads(path.read_text())
    for row in doc["rows"]:
        if "speedup" in row:
            same_plan(row, timeout_s)
    doc["summary"] = summarize(doc["rows"])
    doc["recheck"] = header()
    return doc


def summarize(rows: list[dict]) -> dict:
    out: dict = {"baseline": f"commit {BASELINE} (before the rack-scale work), same machine, same run"}
    ok = [r for r in rows if "error" not in r["new"]]
    for curve, key in (("ranks", "world"), ("size", "size")):
        sel = [r for r in ok if r["curve"] == curve]
        fits = {}
        for ph in PHASES:
            by_case: dict = {}
            for r in sel:
                by_case.setdefault(r["collective"], []).append(r)
            fits[ph] = {c: {"vs_" + key: fit([r["new"]["world"] if key == "world" else r["size"] for r in rs],
                                              [r["new"][f"{ph}_s"] for r in rs]),
                            "vs_instructions": fit([r["new"]["instructions"] for r in rs],
                                                   [r["new"][f"{ph}_s"] for r in rs])}
                        for c, rs in by_case.items()}
        out[f"growth_{curve}"] = fits
    sp = [r["speedup"]["total"] for r in rows if "speedup" in r]
    out["speedup_total"] = {"min": min(sp), "median": float(np.median(sp)), "max": max(sp)} if sp else None
    both = [r for r in rows if "same_time_us" in r]
    out["compared"] = len(both)
    out["default_changed"] = sum(r.get("default_changed", False) for r in both)
    out["same_answers"] = all(r["same_time_us"] for r in both)   # one schedule, two engines, 0.5%
    out["different_answers"] = [(r["topology"], r["collective"], r["size"]) for r in both if not r["same_time_us"]]
    out["largest_point"] = max(((r["new"]["instructions"], r["topology"], r["collective"], r["size"],
                                 r["new"]["total_s"]) for r in ok), default=None)
    out["errors"] = [(r["topology"], r["collective"], r["size"], r["new"]["error"]) for r in rows if "error" in r["new"]]
    return out


def plot(doc: dict, path: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = [r for r in doc["rows"] if "error" not in r["new"]]
    fig, axes = plt.subplots(2, 2, figsize=(12, 9))
    for col, (curve, key, label) in enumerate((("ranks", "world", "ranks W"), ("size", "size", "size (B)"))):
        for c in sorted({r["collective"] for r in rows if r["curve"] == curve}):
            rs = sorted((r for r in rows if r["curve"] == curve and r["collective"] == c),
                        key=lambda r: r["new"]["world"] if key == "world" else r["size"])
            x = [r["new"]["world"] if key == "world" else r["size"] for r in rs]
            for ph, ls in zip(PHASES, ("-", "--", ":")):
                axes[0, col].loglog(x, [r["new"][f"{ph}_s"] for r in rs], ls, marker="o", ms=3,
                                    label=f"{c} {ph}")
                mem = [r.get("new_memory", {}).get(f"{ph}_peak_mb") for r in rs]
                if any(m is not None for m in mem):
                    axes[1, col].loglog([xi for xi, m in zip(x, mem) if m], [m for m in mem if m], ls,
                                        marker="o", ms=3, label=f"{c} {ph}")
            old = [(xi, r["old"]["total_s"]) for xi, r in zip(x, rs) if "error" not in r.get("old", {"error": 1})]
            if old:
                axes[0, col].loglog(*zip(*old), "k.", ms=6, label=f"{c} total, before ({BASELINE})")
        axes[0, col].set(xlabel=label, ylabel="wall (s)", title=f"time vs {label}")
        axes[1, col].set(xlabel=label, ylabel="peak traced memory (MB)", title=f"memory vs {label}")
        for ax in axes[:, col]:
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer worlds and sizes")
    ap.add_argument("--no-old", action="store_true", help="skip the baseline engine")
    ap.add_argument("--no-memory", action="store_true", help="skip the tracemalloc runs")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per point (ours)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="points measured at once, one process each (at most the idle cores)")
    ap.add_argument("--old-timeout", type=float, default=300.0, help="seconds per point (baseline)")
    ap.add_argument("--recheck", type=Path, default=None,
                    help="only compare the engines on one schedule for the rows of this earlier result")
    args = ap.parse_args()
    if args.recheck and not args.recheck.is_file():
        ap.error(f"--recheck {args.recheck}: no such file (pass an earlier sim_scale.json)")
    doc = recheck(args.recheck, args.timeout) if args.recheck else run(args)
    path = write("sim_scale.json", doc)
    plot(doc, RESULTS / "sim_scale.png")
    print(f"wrote {path} and {RESULTS / 'sim_scale.png'}")


if __name__ == "__main__":
    main()
