"""Fit the simulator's parameters of one GPU from raw GPU microbenchmarks (no collectives).

    python benchmarks/fit_calibration.py [--gpu h200] [--raw FILE] [--executor-raw FILE]

Reads what ``benchmarks/calibrate.py`` and ``benchmarks/calibrate_executor.py`` measured on
the GPU (``benchmarks/results/<gpu>-calibration-raw.json`` and
``<gpu>-executor-calibration-raw.json``) and rewrites the measured parameters of
``topologies/calibration/<gpu>.json``, each with its provenance (the fit, the raw file,
GPU, date). For the H200 it then rewrites the executor-derived parameters of the other
GPUs' files, except those measured on that GPU itself. The fits themselves are
:mod:`purlin.sim.fit`.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from purlin.sim import fit
from purlin.topology import load_topology

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
CALS = ROOT / "topologies" / "calibration"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", default="h200", help="the GPU kind measured (its calibration file and "
                                                  "loopback topology)")
    ap.add_argument("--raw", type=Path, default=None, help="default: results/<gpu>-calibration-raw.json")
    ap.add_argument("--executor-raw", type=Path, default=None,
                    help="executor microbenchmarks (default: results/<gpu>-executor-calibration-raw.json); "
                         "where present they replace the Atom-kernel fits of launch, op start, per-CTA "
                         "rate and signal hop")
    ap.add_argument("--out", type=Path, default=None, help="default: topologies/calibration/<gpu>.json")
    args = ap.parse_args(argv)
    raw_path = args.raw or RESULTS / f"{args.gpu}-calibration-raw.json"
    ex_path = args.executor_raw or RESULTS / f"{args.gpu}-executor-calibration-raw.json"
    out = args.out or CALS / f"{args.gpu}.json"
    for path, what in ((raw_path, "--raw"), (out, "--out")):
        if not path.exists():
            ap.error(f"{what} {path}: no such file (--gpu {args.gpu} reads results/<gpu>-calibration-raw.json "
                     f"and rewrites topologies/calibration/<gpu>.json)")
    raw = json.loads(raw_path.read_text())
    hbm = load_topology(f"{args.gpu}-loopback").gpus[0].hbm_bandwidth_gbps
    where = (f"fit by benchmarks/fit_calibration.py from {raw_path.name} "
             f"({raw['machine'].get('gpu', raw['machine'])}, {raw['date']})")
    ex = json.loads(ex_path.read_text()) if ex_path.exists() else None
    old = json.loads(out.read_text())
    try:
        doc, fitted = fit.refit(raw, ex, old, hbm, where, log=print)
    except ValueError as why:   # no memory knee gives a valid calibration from these runs
        ap.error(f"{raw_path.name}, {ex_path.name}: {why}")
    product = old.get("source", args.gpu).split(". ")[0]   # the file's own first sentence
    doc["source"] = (f"{product}. Measured parameters refit from GPU microbenchmarks ({where}; raw "
                     f"samples in benchmarks/results/{raw_path.name}"
                     + (f" and {ex_path.name}" if ex is not None else "") + "); NVLink and in-switch "
                     "parameters stay priors (one GPU cannot measure them).")
    out.write_text(json.dumps(doc, indent=2) + "\n")
    for gpu in (fit.DERIVED if args.gpu == "h200" else ()):
        path = out.parent / f"{gpu}.json"
        other = json.loads(path.read_text())
        other["parameters"] = fit.derive(doc["parameters"], other["parameters"], gpu)
        path.write_text(json.dumps(other, indent=2) + "\n")
    for key, (value, how) in sorted(fitted.items()):
        print(f"{key:>22} = {value:10.4f}   {how}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
