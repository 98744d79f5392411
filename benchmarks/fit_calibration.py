"""Fit the simulator's H200 parameters from raw GPU microbenchmarks (no collectives).

    python benchmarks/fit_calibration.py [--raw benchmarks/results/h200-calibration-raw.json]

Reads what ``benchmarks/calibrate.py`` and ``benchmarks/calibrate_executor.py`` measured on
the GPU and rewrites the measured parameters of ``topologies/calibration/h200.json``, each
with its provenance (the fit, the raw file, GPU, date), then the executor-derived
parameters of the other GPUs' files. The fits themselves are :mod:`purlin.sim.fit`.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from purlin.sim import fit
from purlin.topology import load_topology

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
CAL = ROOT / "topologies" / "calibration" / "h200.json"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--raw", type=Path, default=RESULTS / "h200-calibration-raw.json")
    ap.add_argument("--executor-raw", type=Path, default=RESULTS / fit.EXECUTOR_RAW,
                    help="executor microbenchmarks; where present they replace the Atom-kernel fits "
                         "of launch, op start, per-CTA rate and signal hop")
    ap.add_argument("--out", type=Path, default=CAL)
    args = ap.parse_args(argv)
    raw = json.loads(args.raw.read_text())
    hbm = load_topology("hgx-h200-8").gpus[0].hbm_bandwidth_gbps
    where = (f"fit by benchmarks/fit_calibration.py from {args.raw.name} "
             f"({raw['machine'].get('gpu', raw['machine'])}, {raw['date']})")
    ex = json.loads(args.executor_raw.read_text()) if args.executor_raw.exists() else None
    doc, fitted = fit.refit(raw, ex, json.loads(args.out.read_text()), hbm, where, log=print)
    doc["source"] = (f"H200 SXM. Measured parameters refit from GPU microbenchmarks ({where}; raw "
                     f"samples in benchmarks/results/{args.raw.name}); NVLink and in-switch "
                     "parameters stay priors (one GPU cannot measure them).")
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    for gpu in fit.DERIVED:
        path = args.out.parent / f"{gpu}.json"
        other = json.loads(path.read_text())
        other["parameters"] = fit.derive(doc["parameters"], other["parameters"], gpu)
        path.write_text(json.dumps(other, indent=2) + "\n")
    for key, (value, how) in sorted(fitted.items()):
        print(f"{key:>22} = {value:10.4f}   {how}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
