"""The calibrated simulator against the executor microbenchmarks it was fit from.

Given the results of ``benchmarks/calibrate_executor.py`` (the cases of
:mod:`purlin.sim.microbench`), :func:`microbenchmark_errors` simulates every case that ran
and returns its relative error; :func:`held_out` picks the cases the fit did not use and
:func:`known_gaps` the ones the model has no term for. ``benchmarks/validate.py predict``
writes :func:`microbenchmark_check` beside the collective errors; ``tests/results`` bounds
them.

Examples
--------
>>> raw = {"raw": [{"case": "copy_ops", "k": 1, "n": 4096, "us_per_call": [4.0, 4.2, 4.1]}]}
>>> errs = microbenchmark_errors(raw)
>>> list(errs), -0.5 < errs["copy_ops", (("k", 1), ("n", 4096))] < 0.5
([('copy_ops', (('k', 1), ('n', 4096)))], True)
"""
from __future__ import annotations

import statistics

from purlin.sim import microbench as mb

__all__ = ["HELD_OUT_FAMILIES", "held_out", "known_gaps", "microbenchmark_check", "microbenchmark_errors"]

HELD_OUT_FAMILIES = ("push_read", "fan_in", "put_wave")
"""Case families no fit reads: the push/read shapes of latency consumers and when a run's
windows become readable (besides the smaller single ``packets`` pairs)."""


def microbenchmark_errors(raw: dict, calibration: str = "h200") -> dict[tuple, float]:
    """(case, params) -> relative error of the simulated time against the median measured
    one, for every case of :data:`purlin.sim.microbench.CASES` in ``raw``, on the loopback
    topology of the GPU kind ``calibration`` names."""
    from purlin.sim.engine import simulate
    from purlin.topology import load_topology
    measured = mb.measured(raw)
    topo = load_topology(f"{calibration}-loopback", world=1)
    errs = {}
    for name, params, s in mb.CASES:
        key = mb.case_key(name, params)
        if key in measured:
            errs[key] = (simulate(s, topo, calibration, record=False).time_us - measured[key]) / measured[key]
    return errs


def held_out(errs: dict) -> list[float]:
    """Cases the fit does not use: the single push/unpack pairs but the largest, and the
    push/read shapes of latency consumers (push_read, fan_in), and when a run's windows
    become readable (put_wave)."""
    pk = [(dict(p)["k"], dict(p)["n"], e) for (name, p), e in errs.items() if name == "packets"]
    big = max(n for k, n, _ in pk if k == 1)
    return ([e for k, n, e in pk if k == 1 and n != big]
            + [e for (name, _), e in errs.items() if name in HELD_OUT_FAMILIES])


def known_gaps(errs: dict) -> dict:
    """Packet reduces the model does not capture: payloads past one pass of the CTA's
    threads (8 KiB of 8 sources: an L2-resident reduce writes faster than the HBM-loaded
    rate the model charges)."""
    return {(name, p): e for (name, p), e in errs.items()
            if name == "pkt_reduce" and dict(p)["n"] > 4096}


def microbenchmark_check(raw: dict, calibration: str = "h200") -> dict:
    """The summary ``validate.py predict`` records: case count, median and max error
    outside the known gaps, the held-out maximum, and every case's error."""
    errs = microbenchmark_errors(raw, calibration)
    gaps = known_gaps(errs)
    rest = [abs(e) for k, e in errs.items() if k not in gaps]
    return {"cases": len(errs), "median_abs_err": statistics.median(rest),
            "median_abs_err_all": statistics.median(abs(e) for e in errs.values()),
            "max_abs_err": max(rest),
            "held_out_max_abs_err": max(abs(e) for e in held_out(errs)),
            "known_gaps": {f"{name} {dict(params)}": e for (name, params), e in gaps.items()},
            "errors": {f"{name} {dict(params)}": e for (name, params), e in errs.items()}}
