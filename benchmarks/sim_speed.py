"""Simulator speed on this machine (issue 3, "Speed").

Headline cases, each timed ``--repeats`` times on a freshly loaded topology (so route
look-ups are paid, as a first ``purlin sim`` call pays them), planning timed apart:

- 8-GPU AllReduce of 1 GiB on hgx-h200-8 (target: simulation <= 2 s wall);
- 72-GPU AllToAll of 64 MiB on gb200-nvl72 (target: <= 30 s).

Then the cost curve: wall time vs number of instructions over several sizes, worlds
and topologies, with a least-squares line (wall = a + b * instructions) and its R^2,
to show the cost grows about linearly; and a stress case without symmetry (AllToAllV,
every flow its own size, so no two events share a rate recompute). Writes
benchmarks/results/sim_speed.json.

Run: ``python benchmarks/sim_speed.py [--repeats 3] [--quick]``
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import simpy
from common import write

from purlin.sim import simulate
from purlin.snac import Policy, plan
from purlin.spec import library
from purlin.topology import load_topology

MiB, GiB = 1 << 20, 1 << 30
HEADLINE = [  # (label, collective, size, topology, world, policy, target_s)
    ("ar8_1GiB_hgx-h200-8", "all_reduce", GiB, "hgx-h200-8", None, None, 2.0),
    ("a2a72_64MiB_gb200-nvl72", "all_to_all", 64 * MiB, "gb200-nvl72", None, None, 30.0),
]
SMALL_CHUNKS = Policy(regime="throughput", chunk_nbytes=256 << 10)
CURVE = (
    [(f"ag8_{s >> 20}MiB_chunk256K", "all_gather", s, "hgx-h200-8", None, SMALL_CHUNKS)
     for s in (16 * MiB, 64 * MiB, 256 * MiB, GiB)]
    + [(f"ar8_{s >> 20}MiB", "all_reduce", s, "hgx-h200-8", None, None)
       for s in (64 * MiB, 256 * MiB, GiB)]
    + [(f"a2a{w}_64MiB_loopback", "all_to_all", 64 * MiB, "h200-loopback", w, None)
       for w in (4, 8, 16, 32)]
    + [(f"a2a72_{s >> 20}MiB", "all_to_all", s, "gb200-nvl72", None, None)
       for s in (16 * MiB, 256 * MiB)]
)
STRESS = [  # no symmetry to batch: every flow has its own size, so every event recomputes
    ("a2av72_64MiB_gb200-nvl72", "all_to_all_v", 64 * MiB, "gb200-nvl72", None, None),
]


def measure(label, name, size, topo_name, world, policy, repeats):
    """Plan once per sample and simulate on a fresh topology; raw samples back."""
    plan_s, sim_s, events, recomputes = [], [], [], []
    for _ in range(repeats):
        topo = load_topology(topo_name, world=world)
        c = library.from_size(name, topo.world, size)
        t0 = time.perf_counter()
        schedule = plan(c, topo, policy)
        t1 = time.perf_counter()
        result = simulate(schedule, topo, record=False)
        t2 = time.perf_counter()
        plan_s.append(t1 - t0)
        sim_s.append(t2 - t1)
        events.append(result.stats["events"])
        recomputes.append(result.stats["recomputes"])
    warm0 = time.perf_counter()
    simulate(schedule, topo, record=False)   # routes now cached on the topology
    warm = time.perf_counter() - warm0
    med = statistics.median(sim_s)
    row = {"label": label, "family": f"{name}@{topo_name}", "collective": name, "bytes": size, "topology": topo_name,
           "world": topo.world, "policy": schedule.policy,
           "instructions": result.stats["instructions"], "flows": result.stats["flows"],
           "events": events[0], "recomputes": recomputes[0],
           "simulated_time_us": result.time_us, "busbw_gbps": result.busbw_gbps,
           "plan_s": plan_s, "sim_s": sim_s, "sim_warm_s": warm,
           "median_sim_s": med, "median_plan_s": statistics.median(plan_s),
           "events_per_s": events[0] / med, "us_per_instruction": med / result.stats["instructions"] * 1e6}
    print(f"{label:>28}: {row['instructions']:>7} instrs {row['events']:>8} events  "
          f"plan {row['median_plan_s']:.3f} s  sim {med:.3f} s (warm {warm:.3f} s)  "
          f"{row['events_per_s']:,.0f} ev/s  busbw {row['busbw_gbps']:.1f} GB/s")
    return row


def linear_fit(rows):
    x = np.array([r["instructions"] for r in rows], dtype=float)
    y = np.array([r["median_sim_s"] for r in rows])
    b, a = np.polyfit(x, y, 1)
    pred = a + b * x
    r2 = 1.0 - float(((y - pred) ** 2).sum() / ((y - y.mean()) ** 2).sum())
    per = y / x * 1e6
    return {"intercept_s": float(a), "slope_us_per_instruction": float(b * 1e6), "r2": r2,
            "us_per_instruction_min": float(per.min()), "us_per_instruction_max": float(per.max()),
            "points": [[int(xi), float(yi)] for xi, yi in zip(x, y)]}


def main() -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="headline cases only")
    args = ap.parse_args()
    head = [measure(label, n, s, t, w, p, args.repeats) | {"target_s": target,
                                                            "within_target": None}
            for label, n, s, t, w, p, target in HEADLINE]
    for row in head:
        row["within_target"] = row["median_sim_s"] <= row["target_s"]
    curve = [] if args.quick else [measure(*case, max(1, args.repeats - 1)) for case in CURVE]
    stress = [] if args.quick else [measure(*case, 1) for case in STRESS]
    fit = linear_fit(curve) if len(curve) >= 3 else None
    if fit:  # the same line within each family (one collective/topology, size or world varied)
        families: dict[str, list] = {}
        for row in curve:
            families.setdefault(row["family"], []).append(row)
        fit["families"] = {k: linear_fit(v) for k, v in families.items() if len(v) >= 3}
    summary = {
        "ar8_1GiB_sim_s": head[0]["median_sim_s"], "ar8_1GiB_plan_s": head[0]["median_plan_s"],
        "ar8_1GiB_events_per_s": head[0]["events_per_s"], "ar8_target_s": 2.0,
        "a2a72_64MiB_sim_s": head[1]["median_sim_s"], "a2a72_64MiB_plan_s": head[1]["median_plan_s"],
        "a2a72_64MiB_events_per_s": head[1]["events_per_s"], "a2a72_target_s": 30.0,
        "all_within_target": all(r["within_target"] for r in head),
        "curve_linear_fit": fit,
        "stress_a2av72_64MiB_sim_s": stress[0]["median_sim_s"] if stress else None,
        "note": "sim_s excludes planning; each sample loads the topology afresh (route look-ups "
                "paid); sim_warm_s reuses it. events = simpy events scheduled.",
    }
    path = write("sim_speed.json", {"summary": summary,
                                    "versions": {"simpy": simpy.__version__, "numpy": np.__version__},
                                    "headline": head, "curve": curve,
                                    "stress": stress})
    print(f"wrote {path}")
    return summary


if __name__ == "__main__":
    s = main()
    print({k: v for k, v in s.items() if k != "curve_linear_fit"})
    if s["curve_linear_fit"]:
        f = s["curve_linear_fit"]
        print(f"curve: wall = {f['intercept_s']:.3f} s + {f['slope_us_per_instruction']:.1f} us x "
              f"instructions, R^2 = {f['r2']:.3f}")
