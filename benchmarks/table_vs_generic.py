"""What a shipped codesign table gains over the generic rules, on its own simulator.

For each topology given and each (world, collective, size) its table searched, plan the
default (the table's pick) and the generic rules' policy (``purlin.snac.planner.generic``: what the planner did before the table shipped), simulate both, and
record the times and their ratio (generic over table: above 1, the table is faster).

Writes ``benchmarks/results/table_vs_generic.json``: per point both policies, times and
the ratio; a ``summary`` per topology (points, geometric mean and range of the ratio,
points where the table loses by more than 1%).

Run: ``python benchmarks/table_vs_generic.py gb200-nvl72 rubin-nvl144``
"""
from __future__ import annotations

import argparse
import json
import math

from common import write

from purlin.sim import simulate
from purlin.snac import plan
from purlin.snac.planner import generic
from purlin.spec import library
from purlin.topology import load_topology
from purlin.sim.codesign import default_path


def compare(name: str) -> list[dict]:
    topo = load_topology(name)
    table = json.loads(default_path(name).read_text())
    rows = []
    for w, entry in table["worlds"].items():
        budget = entry["cta_budget"]
        for cname, coll in entry["collectives"].items():
            for p in sorted(coll["points"], key=lambda p: p["size"]):
                if not p.get("grid"):
                    continue
                c = library.from_size(cname, int(w), p["size"], "fp32")
                t = plan(c, topo, cta_budget=budget, check=False)
                g = plan(c, topo, generic(c, topo, budget).to_dict(), cta_budget=budget, check=False)
                tt = simulate(t, topo, record=False).time_us
                gt = simulate(g, topo, record=False).time_us
                rows.append({"topology": name, "world": int(w), "collective": cname, "size": p["size"],
                             "table_policy": dict(t.policy), "table_us": tt,
                             "generic_policy": dict(g.policy), "generic_us": gt, "ratio": gt / tt})
                print(f"{name:>14} W={w:>3} {cname:>16} {p['size']:>9}: table {tt:8.2f} us  "
                      f"generic {gt:8.2f} us  x{gt / tt:5.2f}", flush=True)
    return rows


def summarize(rows: list[dict]) -> dict:
    out = {}
    for name in sorted({r["topology"] for r in rows}):
        rs = [r["ratio"] for r in rows if r["topology"] == name]
        out[name] = {"points": len(rs), "geomean_generic_over_table": math.exp(sum(map(math.log, rs)) / len(rs)),
                     "min": min(rs), "max": max(rs), "table_slower_by_1pct": sum(x < 0.99 for x in rs)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("topologies", nargs="+")
    args = ap.parse_args()
    rows = [r for name in args.topologies for r in compare(name)]
    doc = {"about": "default (table) against the generic rules, simulated; ratio = generic / table",
           "summary": summarize(rows), "points": rows}
    print(json.dumps(doc["summary"], indent=1))
    print(f"-> {write('table_vs_generic.json', doc)}")


if __name__ == "__main__":
    main()
