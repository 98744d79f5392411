"""Fit the simulator's parameters of a GPU from raw GPU microbenchmarks (no collectives).

``benchmarks/calibrate.py`` (the Atom kernels) and ``benchmarks/calibrate_executor.py``
(the SNAC executor, the cases of :mod:`purlin.sim.microbench`) measure on a GPU;
:func:`refit` turns their results into the measured parameters of that GPU's file
(``topologies/calibration/h200.json`` for the H200), each with its provenance, and
:func:`derive` carries the H200's executor-derived ones over to the other GPUs' files,
except what a GPU's own fit measured. ``benchmarks/fit_calibration.py``
is the command line over these. Parameters one GPU cannot measure (NVLink rates,
in-switch reduction) keep their priors. The fits:

- ``<atom>.cta_local_gbps`` and ``<atom>.op_start_us``: least squares of one CTA's time per
  launch against bytes (t = a + n / r) over chunk sizes; ``op_start_us = a - launch_us``;
- ``launch_us``: a CUDA-graph replay of an empty kernel;
- ``launch_grid_us`` / ``launch_per_cta_us``: c CTAs copying 4 KiB each, over the simulator
  without these terms (the memory load of c copies is the simulator's, not the launch's);
- ``hbm_efficiency``: the best SM-copy payload rate at any CTA count x 2 (read + write)
  over the topology's nominal HBM bandwidth;
- ``signal_latency_us``: slope of a CTA flag chain's time against hops, less the
  Notify issue cost (one hop = wait sees the flag + release-store of the next);
- ``ce.*``: line through cudaMemcpyAsync time against bytes (start = intercept);
- ``<atom>.reduce_out_gbps`` / ``reduce_src_gbps``: one CTA reducing k sources of n
  output bytes, t = a + n/out + k n/src (least squares over k and n);
- ``<atom>.store_gbps``: one CTA copying n bytes to d destinations,
  t(d) - t(1) = (d - 1) n / store;
- where the ``loaded`` runs exist (32 CTAs at once, data in HBM), the per-CTA copy, store
  and reduce rates come from them instead: collectives run many CTAs at once;
- ``packet_gbps``: the largest push/unpack pairs (push-bound); ``packet_read_gbps`` /
  ``packet_read_us``: the smaller ones (unpack-bound), step - s = read + n / rate;
- ``packet_src_us``: one CTA reducing m packet sources, the slope against m less the
  bytes read;
- ``packet_crowd_us``: p push/reduce pairs at once against one pair, per doubling of
  the CTAs that use packets;
- ``packet_put_us``: one CTA's k PutPackets (put_ops) against one, less the batch starts
  and the bytes at the packet rate (which is fit less this cost, twice round);
- ``l2_reduce_speedup`` and ``reduce_src_us``: the factor on the reduce rates when the
  buffers sit in the L2, and a Reduce's start per plain source beyond the first, that best
  reproduce the reduce microbenchmarks through the simulator;
- ``packet_poll_us``: a reader waiting for the last put of a 3-pass run (put_pass, alone)
  against the simulator without the term, once every other parameter is fit;
- ``copy_head_us``: copies to destinations off the executor's alignment boundary
  (copy_shifted) against the same aligned copies;
- ``hbm_knee``: how softly memory saturates, the exponent whose whole fit best
  reproduces c = 1 .. 128 CTAs copying 4 MiB each (the loaded rates are taken back to
  the uncontended caps that, at that exponent, ran as measured).

A fit is a dict ``parameter -> (value, how)``; every function here is pure (files are the
command line's business).

Examples
--------
>>> a, b = line([1, 2, 3], [3.0, 5.0, 7.0])
>>> round(a, 9), round(b, 9)
(1.0, 2.0)
>>> round(unknee(rate=10.0, ctas=4, weight=2.0, capacity=100.0, k=4.0), 3)   # ran at 80 of 100
11.408
"""
from __future__ import annotations

import json
import statistics
from collections import Counter
from typing import Any, Callable

import numpy as np

from purlin.sim import microbench as mb
from purlin.sim.calibration import CalibrationError
from purlin.snac import kernel_constants

Fit = dict[str, tuple[float, str]]

BEYOND_L2 = 256 << 20   # copies this large run from HBM, not the cache (a method choice)
KNEES = (0.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0)
REDUCE_CASES = ("reduce_ops", "reduce_small", "reduce_shifted", "reduce_dst_shifted", "reduce_ctas")


# Parameters of the other GPUs' files that rest on the H200 executor fit: the same
# executor (same value), or a rate in proportion to that GPU's per-CTA copy rate.
SAME_EXECUTOR = ("launch_us", "launch_grid_us", "launch_per_cta_us", "signal_latency_us", "notify_issue_us",
                 "wait_check_us", "packet_read_us", "packet_src_us", "packet_crowd_us", "packet_poll_us",
                 "packet_put_us", "copy_head_us", "l2_reduce_speedup", "reduce_src_us",
                 "sm.op_start_us", "tma.op_start_us")
RATIO_OF_COPY = ("packet_gbps", "packet_read_gbps", "sm.reduce_out_gbps", "sm.reduce_src_gbps", "sm.store_gbps",
                 "tma.reduce_out_gbps", "tma.reduce_src_gbps", "tma.store_gbps")
# Per-SM copy rate of each generation over Hopper's (Purlin's tuning numbers,
# docs/sources.md#per-sm-read-rates); MI300X is taken as Hopper-like.
PER_SM_VS_HOPPER = {"a100": (32, 46), "h100": (46, 46), "b200": (48, 46), "gb200": (48, 46),
                    "mi300x": (46, 46), "rubin": (48, 46)}
DERIVED = tuple(PER_SM_VS_HOPPER)
THROUGH_SIMULATOR = ("launch_grid_us", "launch_per_cta_us", "l2_reduce_speedup", "reduce_src_us", "packet_poll_us")
"""Parameters :func:`refit` fits through the simulator once the rest is fit (the direct
fits give the launch terms a first estimate, which the packet fits use)."""

__all__ = ["BEYOND_L2", "DERIVED", "KNEES", "REDUCE_CASES", "THROUGH_SIMULATOR", "derive", "executor_raw", "fit", "fit_all",
           "fit_executor", "fit_knee", "fit_launch_ctas", "fit_poll", "fit_reduce_l2", "line", "refit", "rel_lstsq", "unknee", "with_fit"]


def executor_raw(gpu: str) -> str:
    """The results file a GPU's executor microbenchmarks are in (``calibrate_executor.py --out``)."""
    return f"{gpu}-executor-calibration-raw.json"


def line(xs, ys) -> tuple[float, float]:
    """Least-squares intercept and slope."""
    slope, intercept = np.polyfit(np.asarray(xs, float), np.asarray(ys, float), 1)
    return float(intercept), float(slope)


def rel_lstsq(rows, ts) -> list[float]:
    """Least squares on relative error: small runs count as much as large ones."""
    A, t = np.asarray(rows, float), np.asarray(ts, float)
    coef, *_ = np.linalg.lstsq(A / t[:, None], np.ones_like(t), rcond=None)
    return [float(c) for c in coef]


def _through_zero(pts) -> float:
    """Least-squares slope of a line through the origin."""
    return sum(a * b for a, b in pts) / sum(a * a for a, _ in pts)


def unknee(rate: float, ctas: int, weight: float, capacity: float, k: float) -> float:
    """The per-CTA cap that, with ``ctas`` such CTAs sharing a memory of ``capacity`` that
    saturates with exponent k, runs at the measured ``rate`` (B/us, ``weight`` memory
    bytes per payload byte)."""
    total = rate * ctas * weight          # what the memory delivered
    if k <= 0 or total >= capacity:
        return rate
    return (total ** -k - capacity ** -k) ** (-1.0 / k) / (ctas * weight)


# ---- the Atom kernels (calibrate.py) ----------------------------------------------------

def fit(raw: dict, hbm_nominal_gbps: float) -> Fit:
    """The parameters the Atom-kernel microbenchmarks (``calibrate.py``) give: launch,
    per-CTA copy rate and start, reduce rates, HBM efficiency, the flag-chain hop and the
    copy engine."""
    med = statistics.median
    r = raw["raw"]
    out: Fit = {}
    launch = med(r["launch"]["graph_replay_empty_us"])
    out["launch_us"] = (launch, "CUDA-graph replay of an empty kernel, median per launch")
    for kind in ("sm", "tma"):
        pts = [(p["bytes_moved"], med(p["us_per_launch"])) for p in r["copy_rate"]
               if p["kind"] == kind and p["ctas"] == 1]
        if len(pts) < 2:
            continue
        a, slope = line(*zip(*pts))
        out[f"{kind}.cta_local_gbps"] = (1e-3 / slope, f"one CTA, time vs bytes over {len(pts)} chunk sizes: 1/slope (payload)")
        out[f"{kind}.op_start_us"] = (max(0.0, a - launch), f"intercept {a:.3f} us of that line less launch_us")
    red = [(p["sources"], p["output_bytes"], med(p["us_per_launch"])) for p in r.get("reduce_rate", ())
           if p["ctas"] == 1]
    if len(red) >= 3:
        A = np.array([[1.0, n, n * k] for k, n, _ in red])
        (_, per_out, per_src), *_ = np.linalg.lstsq(A, np.array([t for *_, t in red]), rcond=None)
        how = (f"one CTA reducing k sources of n output bytes, least squares t = a + n/out + k n/src "
               f"over {len(red)} runs")
        for kind in ("sm", "tma"):
            out[f"{kind}.reduce_out_gbps"] = (1e-3 / per_out, how + ": out")
            out[f"{kind}.reduce_src_gbps"] = (1e-3 / per_src, how + ": src")
    big = [p for p in r["copy_rate"] if p["kind"] == "sm" and p["bytes_moved"] >= BEYOND_L2]
    best = max(p["bytes_moved"] / med(p["us_per_launch"]) / 1e3 for p in big)
    out["hbm_efficiency"] = (min(1.0, 2 * best / hbm_nominal_gbps),
                             f"best SM copy of >= {BEYOND_L2 >> 20} MiB (past the L2) {best:.0f} GB/s "
                             f"payload x 2 / {hbm_nominal_gbps:.0f} GB/s nominal")
    chain = [(p["hops"], med(p["us_per_launch"])) for p in r["signal"]]
    _, hop = line(*zip(*chain))
    out["signal_hop_us"] = (hop, "slope of a flag chain's time vs hops")
    ce = [(p["bytes"], med(p["us_per_copy"])) for p in r["copy_engine"]]
    a, slope = line(*zip(*ce))
    out["ce.cta_local_gbps"] = (1e-3 / slope, "cudaMemcpyAsync D2D in a graph: 1/slope of time vs bytes")
    out["ce.op_start_us"] = (max(0.0, a), "intercept of that line")
    return out


# ---- the SNAC executor (calibrate_executor.py) ------------------------------------------

def _median_of(rows: list, case: str) -> list[tuple[dict, float]]:
    return [(r, statistics.median(r["us_per_call"])) for r in rows if r["case"] == case]


def fit_executor(raw: dict, signal_batch: int = kernel_constants.SIGNAL_BATCH,
                 batch_p: int = kernel_constants.PACKET_BATCH, knee: float = 0.0,
                 hbm_Bpus: float = 0.0) -> Fit:
    """Per-instruction costs of the SNAC interpreter, from ``calibrate_executor.py``:
    t = launch + k (start + n / rate) over one CTA's k Copy instructions of n bytes; the
    Wait/Notify hop from a CTA chain; packets from a push/pull pair. k Notifies (Waits) in
    a row run as ceil(k / signal_batch) batches, so their costs are slopes against that."""
    rows = raw["raw"]
    cp = [(r["k"], r["n"], t) for r, t in _median_of(rows, "copy_ops")]
    launch, start, inv_rate = rel_lstsq([[1.0, k, k * n] for k, n, _ in cp], [t for *_, t in cp])
    how = (f"least squares (relative error) t = L + k (s + n/r) over {len(cp)} (k, n) runs of one "
           f"CTA's Copy instructions")
    out: Fit = {"launch_us": (float(launch), f"{how}: L"), "sm.op_start_us": (float(start), f"{how}: s"),
                "sm.cta_local_gbps": (float(1e-3 / inv_rate), f"{how}: r (payload)")}
    out.update(_launch_grid(rows, launch + start, inv_rate))
    _, hop = line(*zip(*((r["ctas"] - 1, t) for r, t in _median_of(rows, "chain"))))
    out["signal_hop_us"] = (hop, "slope of an executor CTA chain (Wait, then Notify the next) vs hops")
    out.update(_signals(rows, signal_batch))
    out.update(_stores(rows))
    out.update(_reduces(rows))
    out.update(_loaded(rows, launch, start, knee, hbm_Bpus))
    two = launch + out.get("launch_grid_us", (0.0,))[0] + out.get("launch_per_cta_us", (0.0,))[0]
    out.update(_packets(rows, two, start, batch_p))
    head = _copy_head(rows)
    if head:
        out["copy_head_us"] = head
    return out


def _launch_run(p: dict) -> bool:
    """Whether a ``ctas`` run is one the launch terms are fit from: c > 1 CTAs with a tiny
    copy each."""
    return p["n"] <= 4096 and p["c"] > 1


def _launch_grid(rows: list, fixed: float, inv_rate: float) -> Fit:
    """c CTAs with a tiny copy each, over one CTA's time: grid + (c - 1) per CTA."""
    few = [(r["c"] - 1, t - (fixed + r["n"] * inv_rate)) for r, t in _median_of(rows, "ctas") if _launch_run(r)]
    if len(few) < 2:
        return {}
    grid, per_cta = line(*zip(*few))
    how = f"c CTAs copying 4 KiB each, time less one CTA's (the copy_ops fit) = grid + (c - 1) per CTA ({len(few)} runs)"
    return {"launch_grid_us": (max(0.0, grid), f"{how}: grid"),
            "launch_per_cta_us": (max(0.0, per_cta), f"{how}: per CTA")}


def _signals(rows: list, signal_batch: int) -> Fit:
    """Notify issue and satisfied-Wait check costs, per batch of ``signal_batch``."""
    notes = [(r["k"], t) for r, t in _median_of(rows, "notify_ops")]
    waits = {r["k"]: t for r, t in _median_of(rows, "wait_ops")}
    batches = lambda k: -(-k // signal_batch)   # noqa: E731
    if len({batches(k) for k, _ in notes}) < 2:
        return {}
    _, per_notify = line(*zip(*((batches(k), t) for k, t in notes)))
    _, per_wait = line(*zip(*((batches(k), waits[k] - t) for k, t in notes if k in waits)))
    return {"notify_issue_us": (per_notify, f"slope of one CTA's time vs ceil(k / {signal_batch}) for k "
                                            f"Notifies in a row ({len(notes)} runs)"),
            "wait_check_us": (max(0.0, per_wait), f"slope of (k Notifies + k satisfied Waits) - (k Notifies) "
                                                  f"vs ceil(k / {signal_batch})")}


def _stores(rows: list) -> Fit:
    """One CTA copying n bytes to d destinations: t(d) - t(1) = (d - 1) n / store."""
    cd = {(r["d"], r["n"]): t for r, t in _median_of(rows, "copy_dsts")}
    pts = [((d - 1) * n, t - cd[(1, n)]) for (d, n), t in cd.items() if d > 1 and (1, n) in cd]
    if not pts:
        return {}
    xs, ys = zip(*pts)
    per = float(np.dot(xs, ys) / np.dot(xs, xs))
    return {f"{kind}.store_gbps": (1e-3 / per, f"one CTA copying n bytes to d destinations: "
                                               f"t(d) - t(1) = (d - 1) n / store over {len(pts)} runs")
            for kind in ("sm", "tma")}


def _reduces(rows: list) -> Fit:
    """One CTA's k Reduce instructions of m sources: t = L + k (s + n/out + m n/src)."""
    red = [(r["k"], r["n"], r["m"], t) for r, t in _median_of(rows, "reduce_ops")]
    if not red:
        return {}
    _, _, per_out, per_src = rel_lstsq([[1.0, k, k * n, k * n * m] for k, n, m, _ in red],
                                       [t for *_, t in red])
    how = f"least squares t = L + k (s + n/out + m n/src) over {len(red)} runs of one CTA's Reduce instructions"
    out: Fit = {}
    for kind in ("sm", "tma"):
        out[f"{kind}.reduce_out_gbps"] = (float(1e-3 / per_out), how + ": out")
        out[f"{kind}.reduce_src_gbps"] = (float(1e-3 / per_src), how + ": src")
    return out


def _loaded(rows: list, launch: float, start: float, knee: float, hbm_Bpus: float) -> Fit:
    """Rates under load, which replace the single-CTA ones where measured: collectives run
    many CTAs at once, and a CTA's loads wait longer on a busy memory (32 CTAs, data in
    HBM, memory not saturated); launch and op start stay the single-CTA fits."""
    ld = {(r["m"], r["d"]): (r["n"], t - launch - start) for r, t in _median_of(rows, "loaded")}
    where = "32 CTAs at once, 2 MiB each from HBM (t - L - s)"
    if knee > 0 and ld:   # the caps that, on a memory saturating softly, ran at the measured rates
        c = next(r["c"] for r in rows if r["case"] == "loaded")
        ld = {(m, d): (n, n / unknee(n / t, c, m + d, hbm_Bpus, knee)) for (m, d), (n, t) in ld.items()}
        where += f", unkneed (hbm_knee {knee:g})"
    out: Fit = {}
    if (1, 1) in ld:
        n, t = ld[(1, 1)]
        out["sm.cta_local_gbps"] = (n / t / 1e3, f"{where}: copy, n / t")
        pts = [((d - 1) * n1, t1 - t) for (m, d), (n1, t1) in ld.items() if m == 1 and d > 1]
        if pts:
            xs, ys = zip(*pts)
            per = float(np.dot(xs, ys) / np.dot(xs, xs))
            for kind in ("sm", "tma"):
                out[f"{kind}.store_gbps"] = (1e-3 / per, f"{where}: copies to d destinations, "
                                                         f"t(d) - t(1) = (d - 1) n / store over {len(pts)} runs")
    red_ld = [(m, n, t) for (m, d), (n, t) in ld.items() if m > 1 and d == 1]
    if len(red_ld) >= 2:
        coef, *_ = np.linalg.lstsq(np.asarray([[n, m * n] for m, n, _ in red_ld], float),
                                   np.asarray([t for *_, t in red_ld], float), rcond=None)
        how = f"{where}: reduce of m sources, t = n/out + m n/src over {len(red_ld)} runs"
        for kind in ("sm", "tma"):
            out[f"{kind}.reduce_out_gbps"] = (float(1e-3 / coef[0]), f"{how}: out")
            out[f"{kind}.reduce_src_gbps"] = (float(1e-3 / coef[1]), f"{how}: src")
    return out


def _packets(rows: list, two: float, start: float, batch_p: int) -> Fit:
    """Packet rates and costs from push/unpack pairs (``two``: the launch of two CTAs).

    A push runs its vectors over all the CTA's threads. The largest pushes are push-bound:
    alone (k = 1, t = s + n / rate) and streaming k steps against the unpacking CTA
    (step = s / batch + n / rate), which is ~15% slower; the model has one rate, the
    least-squares middle of the two. The k smaller steps are unpack-bound: step = s +
    read + n / read rate. Held out (:func:`purlin.sim.validation.held_out`): the smaller
    single pairs."""
    pk = sorted((r["n"], (t - two) / r["k"]) for r, t in _median_of(rows, "packets") if r["k"] > 1)
    one = max(((r["n"], t - two) for r, t in _median_of(rows, "packets") if r["k"] == 1), default=None)
    if len(pk) < 3 or not one:
        return {}
    (n1, t1), (nk, stepk) = one, pk[-1]
    a = np.asarray([n1, nk], float)
    put_us, how_put = 0.0, ""
    for _ in range(2):   # the rate less each put's own cost, that cost at this rate
        b = np.asarray([t1 - start - put_us, stepk - start / batch_p - put_us], float)
        inv = float(a @ b / (a @ a))
        put_us, how_put = _put(rows, start, inv, batch_p)
    out: Fit = {"packet_gbps": (1e-3 / inv, f"the largest push/unpack pairs ({n1} B alone, {nk} B in k steps), "
                                            f"push-bound: least squares n / rate = t - s - put (alone), "
                                            f"step - s / batch - put")}
    if how_put:
        out["packet_put_us"] = (put_us, how_put)
    read, per = line(*zip(*((n, t - start) for n, t in pk[:-1])))
    how = f"push/unpack pairs, the {len(pk) - 1} smaller unpack-bound: step - s = read + n / rate"
    out["packet_read_gbps"] = (1e-3 / per, f"{how}: rate")
    out["packet_read_us"] = (max(0.0, read), f"{how}: read")
    out.update(_packet_reduce(rows, per))
    return out


def _packet_reduce(rows: list, per: float) -> Fit:
    """One reducing CTA alone with m packet sources of n bytes: each further source costs
    the slope of t against m, less reading its n bytes (``per`` us per byte). p such pairs
    at once (2p CTAs using packets) over one pair, same m and n: each doubling of the
    packet CTAs beyond two adds the same to the reduce's start."""
    out: Fit = {}
    runs = _median_of(rows, "pkt_reduce")
    if not runs:
        return out
    alone = [(r["n"], r["m"], t) for r, t in runs if r["p"] == 1]
    runs_of = Counter(n for n, _, _ in alone)
    n = min((x for x, k in runs_of.items() if k >= 2), default=None)   # the smallest size run at two or more m
    pr = [(m, t) for x, m, t in alone if x == n]
    if len(pr) >= 2:
        _, slope = line(*zip(*pr))
        out["packet_src_us"] = (max(0.0, slope - n * per), f"one CTA reducing m = {sorted(m for m, _ in pr)} "
                                f"packet sources of {n} B (pkt_reduce, p = 1): slope of t vs m less n / read rate")
    t = {(r["m"], r["n"], r["p"]): us for r, us in runs}
    crowd = [(np.log2(p), us - t[m, n, 1]) for (m, n, p), us in t.items() if p > 1 and (m, n, 1) in t]
    if crowd:
        out["packet_crowd_us"] = (max(0.0, _through_zero(crowd)),
                                  f"p push/reduce pairs at once over one pair (pkt_reduce, "
                                  f"p = {sorted(int(2 ** a) for a, _ in crowd)}): log2(p) x, least squares")
    return out


def _put(rows: list, start: float, inv: float, batch_p: int) -> tuple[float, str]:
    """``packet_put_us``: one CTA's k PutPackets of n bytes (put_ops), over k = 1 of the
    same n, less the batch starts and the bytes at the packet rate: (k - 1) puts' own
    cost, least squares through zero."""
    t = {(r["k"], r["n"]): us for r, us in _median_of(rows, "put_ops")}
    pts = [(k - 1, t[k, n] - t[1, n] - (-(-k // batch_p) - 1) * start - (k - 1) * n * inv)
           for k, n in t if k > 1 and (1, n) in t]
    if not pts:
        return 0.0, ""
    return max(0.0, _through_zero(pts)), (f"one CTA's k PutPackets of n bytes ({len(pts)} runs, k > 1) less k = 1, "
                                          f"the batch starts and n / packet rate: (k - 1) x, least squares")


def _copy_head(rows: list) -> tuple[float, str] | None:
    """``copy_head_us``: k copies to destinations off the alignment boundary
    (copy_shifted) less the same k aligned copies (copy_ops, same run): k x."""
    aligned = {(r["k"], r["n"]): t for r, t in _median_of(rows, "copy_ops")}
    pts = [(r["k"], t - aligned[r["k"], r["n"]]) for r, t in _median_of(rows, "copy_shifted")
           if (r["k"], r["n"]) in aligned]
    if not pts:
        return None
    return max(0.0, _through_zero(pts)), (f"k copies to destinations 16 B past a 512 B boundary less k aligned ones "
                                          f"({len(pts)} (k, n) runs): k x, least squares")


def fit_l2(raw: dict, fitted: Fit, hbm_gbps: float, l2_mib: float) -> tuple[float, str] | None:
    """``l2_speedup``: the fastest memory traffic (bytes read + written per us of copying,
    launch and start taken off) of the ``ctas`` runs whose buffers fit in the L2, over the
    HBM capacity. A lower bound: those runs may be limited by the CTAs, not the cache."""
    v = {k: val for k, (val, _) in fitted.items()}
    pts = []
    for r in raw["raw"]:
        if r["case"] == "ctas" and r["n"] > 4096 and 2 * r["c"] * r["n"] <= l2_mib * (1 << 20):
            t = (statistics.median(r["us_per_call"]) - v["launch_us"] - v["launch_grid_us"] * (r["c"] > 1)
                 - v["launch_per_cta_us"] * (r["c"] - 1) - v["sm.op_start_us"])
            pts.append(2 * r["c"] * r["n"] / t / 1e3)
    if not pts:
        return None
    return (max(1.0, max(pts) / (hbm_gbps * v["hbm_efficiency"])),
            f"fastest traffic of {len(pts)} runs of c CTAs copying n bytes whose buffers fit in the L2 "
            f"({max(pts):.0f} GB/s) over the HBM capacity; a lower bound (they may be CTA-bound)")


def fit_all(raw: dict, ex: dict | None, params: dict, hbm: float, knee: float,
            gpu: str = "h200") -> Fit:
    """Every fitted parameter (value, how) for one memory knee exponent, from the Atom
    results ``raw``, the executor results ``ex`` (or None) and the current ``params`` of
    GPU kind ``gpu``."""
    fitted = fit(raw, hbm)
    ex_file = executor_raw(gpu)
    if ex is not None:
        cap = hbm * fitted["hbm_efficiency"][0] * 1e3 if "hbm_efficiency" in fitted else 0.0
        fitted.update({k: (v, f"{how}; {ex_file}")
                       for k, (v, how) in fit_executor(ex, kernel_constants.SIGNAL_BATCH,
                                                       kernel_constants.PACKET_BATCH,
                                                       knee, cap).items()})
        l2 = fit_l2(ex, fitted, hbm, params["l2_resident_mib"]["value"])
        if l2:
            fitted["l2_speedup"] = (l2[0], f"{l2[1]}; {ex_file}")
    hop, how = fitted.pop("signal_hop_us")
    notify = fitted["notify_issue_us"][0] if "notify_issue_us" in fitted else params["notify_issue_us"]["value"]
    fitted["signal_latency_us"] = (max(0.05, hop - notify), f"{how} ({hop:.3f} us) less notify_issue_us {notify:.3f}")
    return fitted


def with_fit(params: dict, fitted: Fit, where: str) -> dict:
    """A copy of a calibration's ``parameters`` with the ``fitted`` ones as measured."""
    out = json.loads(json.dumps(params))
    for key, (value, how) in fitted.items():
        out[key] = {"value": round(value, 4), "provenance": "measured", "source": f"{how}; {where}"}
    return out


# ---- the fits that go through the simulator ---------------------------------------------

def _simulator(doc: dict, where: str) -> Callable[..., float]:
    """``time_us(schedule, **values)``: the simulator's time for a microbenchmark on one
    GPU of ``doc``'s kind (its loopback topology) with ``doc``'s calibration, some
    parameter values replaced."""
    from purlin.sim.calibration import parse_calibration
    from purlin.sim.engine import simulate
    from purlin.topology import load_topology
    topo = load_topology(f"{doc['gpu_kind']}-loopback", world=1)
    cals: dict[tuple, Any] = {}

    def time_us(schedule, **values: float) -> float:
        key = tuple(sorted(values.items()))
        if key not in cals:
            params = json.loads(json.dumps(doc["parameters"]))
            for name, v in values.items():
                params[name]["value"] = v
            cals[key] = parse_calibration({**doc, "parameters": params}, where)
        return simulate(schedule, topo, cals[key], record=False).time_us
    return time_us


def _measured_cases(ex: dict, keep: Callable[[str, dict], bool]) -> list[tuple[float, Any]]:
    """(median us, schedule) of the executor microbenchmarks that ran and ``keep`` keeps."""
    meas = mb.measured(ex)
    return [(meas[key], s) for name, p, s in mb.CASES
            if keep(name, p) and (key := mb.case_key(name, p)) in meas]


def fit_knee(raw: dict, ex: dict, doc: dict, hbm: float, where: str,
             log: Callable[[str], None] | None = None) -> tuple[float, Fit, str]:
    """``hbm_knee``: the exponent (of KNEES) whose whole fit best reproduces the runs of c
    CTAs copying 4 MiB each (c = 1 .. 128, from one CTA to a saturated memory) in the
    simulator (mean relative error; the loaded runs the rates come from match any k).
    Returns (knee, the fit at that knee with ``hbm_knee``, how)."""
    cases = _measured_cases(ex, lambda name, p: name == "ctas" and p["n"] >= 1 << 22)
    sim = _simulator(doc, "knee fit")
    best = None
    for k in KNEES:
        fitted = fit_all(raw, ex, doc["parameters"], hbm, k, doc["gpu_kind"])
        fitted["hbm_knee"] = (k, "")
        values = {key: round(v, 4) for key, (v, _) in fitted.items()}   # as written to the file
        try:
            e = statistics.mean(abs(sim(s, **values) / t - 1) for t, s in cases)
        except CalibrationError as why:   # this knee reads the loaded runs as an impossible value
            if log:
                log(f"hbm_knee {k:4g}: ruled out ({why})")
            continue
        if log:
            log(f"hbm_knee {k:4g}: mean error {e:.4f} over {len(cases)} runs")
        if best is None or e < best[0]:
            best = (e, k, fitted)
    if best is None:
        raise ValueError("every memory knee reads these runs as an impossible calibration (the log names "
                         "why): check the loaded and ctas microbenchmarks")
    e, k, fitted = best
    return k, fitted, (f"of {', '.join(f'{x:g}' for x in KNEES)}, the exponent whose fit best reproduces "
                       f"{len(cases)} runs of c = 1..128 CTAs copying 4 MiB each in the simulator "
                       f"(mean error {e:.3f})")


def fit_reduce_l2(ex: dict, doc: dict) -> Fit | None:
    """``l2_reduce_speedup`` (of 1.00, 1.02, ..., 2.00) and ``reduce_src_us`` (of 0.00,
    0.01, ..., 0.15): the pair whose simulator best reproduces the reduce microbenchmarks
    that one of them touches (buffers in the L2, or more than one source; one CTA and 8 or
    64 at once), every other parameter as fit; mean relative error, each refit in turn."""
    cases = _measured_cases(ex, lambda name, p: name in REDUCE_CASES)
    if not cases:
        return None
    sim = _simulator(doc, "reduce fit")

    def err(f: float, s: float) -> float:
        return statistics.mean(abs(sim(sc, l2_reduce_speedup=f, reduce_src_us=s) / t - 1) for t, sc in cases)
    grid_f, grid_s = np.round(np.arange(1.0, 2.001, 0.02), 2), np.round(np.arange(0.0, 0.151, 0.01), 2)
    f, s = 1.0, 0.0
    for _ in range(3):
        f = min(grid_f, key=lambda x: err(x, s))
        s = min(grid_s, key=lambda x: err(f, x))
    how = (f"the pair whose simulator best reproduces {len(cases)} reduce runs ({', '.join(REDUCE_CASES)}; "
           f"mean error {err(f, s):.3f}), each refit three times in turn")
    return {"l2_reduce_speedup": (float(f), f"of 1.00, 1.02, ..., 2.00 with reduce_src_us, {how}"),
            "reduce_src_us": (float(s), f"of 0.00, 0.01, ..., 0.15 with l2_reduce_speedup, {how}")}


def fit_poll(ex: dict, doc: dict) -> tuple[float, str] | None:
    """``packet_poll_us``: how much later than the simulator (this term at 0, every other
    parameter as fit) a reader waiting for a run's last put has it and is done."""
    meas = mb.measured(ex).get(mb.case_key("put_pass", {"last": True, "p": 1}))
    if meas is None:
        return None
    sim = _simulator(doc, "poll fit")(mb.put_pass(True, 1), packet_poll_us=0.0)
    return max(0.0, meas - sim), (f"one CTA reading the last of a 3-pass run of PutPackets (put_pass, "
                                  f"{meas:.3f} us) less the simulator without this term ({sim:.3f} us)")


def fit_launch_ctas(ex: dict, doc: dict) -> Fit | None:
    """``launch_grid_us`` and ``launch_per_cta_us``: c CTAs copying 4 KiB each (c = 2, 16,
    128) over the simulator with both terms at 0, every other parameter as fit: grid +
    (c - 1) per CTA, least squares. The simulator already charges what c CTAs' copies
    load on memory; the analytic first estimate (:func:`_launch_grid`, over one CTA's
    time, which the packet fits use) counted that load again as launch cost."""
    meas = mb.measured(ex)
    cases = [(meas[key], s, p["c"]) for name, p, s in mb.CASES if name == "ctas" and _launch_run(p)
             and (key := mb.case_key(name, p)) in meas]
    if len(cases) < 2:
        return None
    sim = _simulator(doc, "launch fit")
    pts = [(c - 1, t - sim(s, launch_grid_us=0.0, launch_per_cta_us=0.0)) for t, s, c in cases]
    grid, per_cta = line(*zip(*pts))
    how = (f"c CTAs copying 4 KiB each ({len(pts)} runs, c = {', '.join(str(c) for *_, c in cases)}) less the "
           f"simulator without launch_grid_us and launch_per_cta_us = grid + (c - 1) per CTA, least squares")
    return {"launch_grid_us": (max(0.0, grid), f"{how}: grid"),
            "launch_per_cta_us": (max(0.0, per_cta), f"{how}: per CTA")}


def refit(raw: dict, ex: dict | None, doc: dict, hbm: float, where: str,
          log: Callable[[str], None] | None = None) -> tuple[dict, Fit]:
    """The whole fit: a new calibration document from ``doc`` (the current h200.json) with
    every parameter the microbenchmarks measure replaced, in order (the knee and the
    direct fits, then the fits through the simulator), and the fit itself."""
    doc = json.loads(json.dumps(doc))
    if ex is not None:
        k, fitted, how = fit_knee(raw, ex, doc, hbm, where, log)
        fitted["hbm_knee"] = (k, f"{how}; {executor_raw(doc['gpu_kind'])}")
    else:
        fitted = fit_all(raw, None, doc["parameters"], hbm, 0.0, doc["gpu_kind"])
    doc["parameters"] = with_fit(doc["parameters"], fitted, where)
    if ex is not None:   # through the simulator, once the rest is fit, in this order
        got = fit_launch_ctas(ex, doc) or {}
        got.update(fit_reduce_l2(ex, {**doc, "parameters": with_fit(doc["parameters"], got, where)}) or {})
        poll = fit_poll(ex, {**doc, "parameters": with_fit(doc["parameters"], got, where)})
        if poll is not None:
            got["packet_poll_us"] = poll
        got = {k: (v, f"{how}; {executor_raw(doc['gpu_kind'])}") for k, (v, how) in got.items()}
        fitted.update(got)
        doc["parameters"] = with_fit(doc["parameters"], got, where)
    return doc, fitted


def derive(h200: dict, other: dict, gpu: str) -> dict:
    """Rewrite the executor-derived parameters of ``gpu``'s calibration (``other``) from
    the H200 fit (``h200``; both parameter dicts): its copy rates are the H200's times
    its per-SM ratio, the rest the same executor or in proportion to the copy rate. A
    parameter measured on that GPU itself stays as measured."""
    out = json.loads(json.dumps(other))
    a, b = PER_SM_VS_HOPPER[gpu]
    own = {key for key, p in other.items() if p.get("provenance") == "measured"}
    for key in ("sm.cta_local_gbps", "tma.cta_local_gbps"):
        if key in own:
            continue
        out[key] = {"value": round(h200[key]["value"] * a / b, 2), "provenance": "assumption",
                    "source": f"assumption: the H200's measured per-CTA executor copy rate x {a}/{b} "
                              f"(Purlin's per-SM rate for this generation over Hopper's, "
                              f"docs/sources.md#per-sm-read-rates)"}
    for key in SAME_EXECUTOR:
        if key in own:
            continue
        out[key] = {"value": h200[key]["value"], "provenance": "assumption",
                    "source": f"assumption: the same SNAC executor as measured on the H200 (h200.json "
                              f"{key} = {h200[key]['value']}); not measured on this GPU"}
    for key in RATIO_OF_COPY:
        if key in own:
            continue
        base = "sm.cta_local_gbps" if key.startswith("packet") else key.split(".")[0] + ".cta_local_gbps"
        ratio = h200[key]["value"] / h200[base]["value"]
        out[key] = {"value": round(out[base]["value"] * ratio, 2), "provenance": "assumption",
                    "source": f"assumption: this GPU's per-CTA copy rate x the H200 executor's ratio "
                              f"{ratio:.3f} (h200.json {key} / {base})"}
    return out
