"""The simulator against the GPU on the copy-engine plans a loopback run measured.

Reads a ``gpu_loopback.py --atoms sm,ce`` results file, plans every measured direct
configuration again with its recorded policy on the loopback topology of the GPU that ran
it (the executor's CTA budget), simulates it, and writes simulated / measured per row,
grouped by Atom: the SM rows are the control (the same plans' shapes, the model the
validation suite checks), the ``ce`` rows what the copy-engine model predicts. CPU only.
Rows run with a stream per program (``/lanes=program``) are left out: the simulator has
no lanes.

    python3 benchmarks/ce_model_check.py benchmarks/results/h100-loopback-ce-all.json \\
        --out h100-ce-model-check.json
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from common import write
from gpu_loopback import W, large_collective



def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("measured", help="a gpu_loopback.py results file with ce rows")
    ap.add_argument("--out", default="ce-model-check.json")
    args = ap.parse_args(argv)
    try:
        src = json.loads(Path(args.measured).read_text())
        gpu, budget, large = src["machine"]["gpu"], src["cta_budget_per_rank"], src["raw"]["large"]
        per_rank = src["summary"]["large_input_per_rank_bytes"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        ap.error(f"{args.measured}: not a gpu_loopback.py results file ({type(e).__name__}: {e})")
    from purlin.sim import simulate
    from purlin.snac import Policy, plan
    from purlin.snac.ir import Copy
    from purlin.topology import loopback_for
    topo = loopback_for(gpu, W)
    rows = []
    for name, configs in large.items():
        c = large_collective(name, per_rank)
        for key, r in configs.items():
            if not key.startswith("direct/") or "lanes=" in key or "samples_us" not in r:
                continue
            s = plan(c, topo, Policy.from_dict(r["policy"]), cta_budget=budget, check=False)
            sim = simulate(s, topo, None, record=False).time_us
            copies = [i for p in s.programs for i in p.instrs if isinstance(i, Copy)]
            meas = statistics.median(r["samples_us"])
            rows.append({"collective": name, "config": key, "atom": r["policy"]["atom"],
                         "chunk_nbytes": r["policy"]["chunk_nbytes"], "programs": len(s.programs),
                         "copies": len(copies), "memcpys": sum(len(i.dsts) for i in copies), "measured_us": meas,
                         "simulated_us": sim, "sim_over_measured": sim / meas})
            print(f"{name:14s} {key:40s} measured {meas:8.1f} us  simulated {sim:8.1f} us  "
                  f"{sim / meas:.3f}", flush=True)
    for r in rows:   # a ce plan against the ce plan with the next larger chunk, same collective and CTAs
        bigger = [q for q in rows if q["atom"] == r["atom"] == "ce" and q["collective"] == r["collective"]
                  and q["programs"] == r["programs"] and q["memcpys"] < r["memcpys"]]
        if bigger:
            q = max(bigger, key=lambda q: q["memcpys"])
            r["measured_us_per_added_memcpy"] = (r["measured_us"] - q["measured_us"]) / (r["memcpys"] - q["memcpys"])
            r["simulated_us_per_added_memcpy"] = (r["simulated_us"] - q["simulated_us"]) / (r["memcpys"] - q["memcpys"])
    by_atom = {}
    for atom in sorted({r["atom"] for r in rows}):
        ratios = [r["sim_over_measured"] for r in rows if r["atom"] == atom]
        by_atom[atom] = {"rows": len(ratios), "median": statistics.median(ratios),
                         "min": min(ratios), "max": max(ratios)}
    added = [r["measured_us_per_added_memcpy"] for r in rows if "measured_us_per_added_memcpy" in r]
    doc = {"measured_file": str(Path(args.measured).name), "measured_machine": src["machine"],
           "measured_date": src.get("date"), "topology": topo.name, "cta_budget_per_rank": budget,
           "rows": rows,
           "summary": {"sim_over_measured_by_atom": by_atom,
                       "ce_measured_us_per_added_memcpy": {"median": statistics.median(added), "min": min(added),
                                                           "max": max(added)} if added else None,
                       "rule": "simulated / measured time of the same plan (median of the GPU's samples); "
                               "1.0 is a perfect prediction, below 1 the simulator is too fast"}}
    path = write(args.out, doc)
    for atom, v in by_atom.items():
        print(f"{atom}: simulated / measured median {v['median']:.3f} ({v['min']:.3f} .. {v['max']:.3f}, "
              f"{v['rows']} plans)")
    print(f"-> {path}")
    return doc


if __name__ == "__main__":
    main()
