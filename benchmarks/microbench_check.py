"""The calibrated simulator against a GPU's executor microbenchmarks, by case family (CPU).

``validate.py predict`` records this check for the H200 beside its collective errors; this
script records it for any GPU whose executor microbenchmarks are committed
(``calibrate_executor.py --out <gpu>-executor-calibration-raw.json``), with that GPU's own
calibration, so a model or calibration change can be read against runs it was or was not
fit from. Writes benchmarks/results/<gpu>-microbench-check.json: the raw file's machine
and date, every case's error, and per family (copy_ops, put_wave, ...) the case count and
the median and largest absolute error, with whether the fit uses the family
(``purlin.sim.validation.HELD_OUT_FAMILIES`` names the ones it does not).

Run: ``python3 benchmarks/microbench_check.py --gpu h100``   (a few seconds)
"""
from __future__ import annotations

import argparse
import statistics

from common import load, write

from purlin.sim import validation


def families(errors: dict[str, float]) -> dict:
    """Per case family: cases, median and max absolute error, and whether it is held out
    (``errors`` keyed as :func:`purlin.sim.validation.microbenchmark_check` writes them:
    the family name, a space, the parameters)."""
    by: dict[str, list[float]] = {}
    for key, e in errors.items():
        by.setdefault(key.split(" ", 1)[0], []).append(abs(e))
    return {name: {"cases": len(v), "median_abs_err": statistics.median(v), "max_abs_err": max(v),
                   "held_out": name in validation.HELD_OUT_FAMILIES}
            for name, v in sorted(by.items())}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", default="h200", help="GPU kind: reads results/<gpu>-executor-calibration-raw.json")
    args = ap.parse_args(argv)
    raw_name = f"{args.gpu}-executor-calibration-raw.json"
    ex = load(raw_name)
    check = validation.microbenchmark_check(ex, args.gpu)
    doc = {"gpu": args.gpu, "raw": raw_name, "raw_machine": ex["machine"], "raw_date": ex["date"],
           "calibration": f"topologies/calibration/{args.gpu}.json",
           "summary": {"families": families(check["errors"]),
                       **{k: v for k, v in check.items() if k not in ("errors", "known_gaps")}},
           "errors": check["errors"]}
    path = write(f"{args.gpu}-microbench-check.json", doc)
    for name, f in doc["summary"]["families"].items():
        print(f"{name:>18} {f['cases']:3d} cases  median {f['median_abs_err']:.3f}  max {f['max_abs_err']:.3f}"
              + ("  (held out)" if f["held_out"] else ""))
    print(f"-> {path}")
    return doc


if __name__ == "__main__":
    main()
