"""Planning + verification speed on this machine (target: under 2 s each on the CI kind).

Cases: an 8-rank 1 GiB AllReduce on hgx-h200-8 and a 72-rank 64 MiB AllToAllV on
gb200-nvl72 (plus a few more for the curve). Five samples each; the summary takes medians.
The baseline, timed in the same run, is a fixed pure-Python workload (sorting a million
floats), so a figure from a slower or busier machine reads as a ratio to it. (The suite
asserted these times once, and failed on a loaded 2-core machine; speed lives here now.)

Run: ``python benchmarks/planner_speed.py``
"""
from __future__ import annotations

import statistics
import time

from common import write

from purlin.snac import plan
from purlin.snac.verify import verify
from purlin.spec import library
from purlin.topology import load_topology

CASES = [
    ("all_reduce", 8, 1 << 30, "hgx-h200-8"),
    ("all_to_all_v", 72, 64 << 20, "gb200-nvl72"),
    ("all_gather", 8, 1 << 30, "hgx-h200-8"),
    ("reduce_scatter", 72, 1 << 30, "gb200-nvl72"),
    ("all_reduce", 72, 256 << 20, "gb200-nvl72"),
]


def baseline_s(repeats: int = 5) -> list[float]:
    """Seconds to sort a million pseudo-random floats, ``repeats`` times."""
    import random
    rng = random.Random(0)
    xs = [rng.random() for _ in range(1_000_000)]
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        sorted(xs)
        out.append(time.perf_counter() - t0)
    return out


def main(repeats: int = 5) -> dict:
    base = baseline_s(repeats)
    rows = []
    for name, world, size, topo_name in CASES:
        topo = load_topology(topo_name)
        c = library.from_size(name, world, size)
        plan_s, verify_s = [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            s = plan(c, topo, check=False)
            t1 = time.perf_counter()
            verify(s)
            t2 = time.perf_counter()
            plan_s.append(t1 - t0)
            verify_s.append(t2 - t1)
        total = [a + b for a, b in zip(plan_s, verify_s)]
        rows.append({"collective": name, "world": world, "bytes": size, "topology": topo_name,
                     "policy": s.policy, "instructions": sum(len(p.instrs) for p in s.programs),
                     "programs": len(s.programs), "plan_s": plan_s, "verify_s": verify_s,
                     "median_total_s": statistics.median(total)})
        print(f"{name:>16} W={world:<3} {size:>11} B  {rows[-1]['instructions']:>7} instrs  "
              f"plan {statistics.median(plan_s):.3f} s  verify {statistics.median(verify_s):.3f} s")
    b = statistics.median(base)
    summary = {"ar8_1GiB_plan_verify_s": rows[0]["median_total_s"],
               "a2av72_64MiB_plan_verify_s": rows[1]["median_total_s"], "target_s": 2.0,
               "both_under_target": rows[0]["median_total_s"] < 2 and rows[1]["median_total_s"] < 2,
               "baseline_sort_1M_s": b,
               "ar8_1GiB_vs_baseline": rows[0]["median_total_s"] / b,
               "a2av72_64MiB_vs_baseline": rows[1]["median_total_s"] / b}
    path = write("planner.json", {"summary": summary, "baseline_s": base, "samples": rows})
    print(f"wrote {path}")
    return summary


if __name__ == "__main__":
    print(main())
