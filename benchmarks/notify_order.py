"""What the order a CTA signals its peers in changes, one schedule shape at a time.

For each case, the generic rules' policy is planned twice, with ``notify_order="rank"``
and ``"rotated"`` (nothing else differs), and simulated; the predicted times, their ratio
(rotated over rank: below 1, rotating is faster) and the wall time of planning plus
simulating each are recorded. Rotated order puts every rank's start flags on the same
footing, so symmetric ranks end their flows together and the simulator solves the rates
once for all of them instead of once per rank.

Writes ``benchmarks/results/notify_order.json`` with a ``summary`` (per case the ratio of
times and of wall seconds).

Run: ``python benchmarks/notify_order.py``
"""
from __future__ import annotations

import time
from dataclasses import replace

from common import write

from purlin.sim import simulate
from purlin.snac import plan
from purlin.snac.planner import generic
from purlin.spec import library
from purlin.topology import load_topology

CASES = [("gb200-nvl72", "all_to_all", 16 << 20), ("gb200-nvl72", "all_to_all", 256 << 20),
         ("gb200-nvl72", "all_to_all_v", 16 << 20), ("gb200-nvl72", "all_gather", 256 << 20),
         ("gb200-nvl72", "all_gather_v", 16 << 20), ("gb200-nvl72", "all_reduce", 16 << 20),
         ("gb200-nvl72", "all_reduce", 1 << 20), ("hgx-h200-8", "all_to_all", 64 << 20)]


def main() -> None:
    rows = []
    for tname, name, size in CASES:
        topo = load_topology(tname)
        c = library.from_size(name, topo.world, size)
        pol = generic(c, topo, 64)
        row = {"topology": tname, "collective": name, "size": size,
               "policy": {k: v for k, v in pol.to_dict().items() if k != "notify_order"}}
        for order in ("rank", "rotated"):
            t0 = time.perf_counter()
            s = plan(c, topo, replace(pol, notify_order=order), check=False)
            r = simulate(s, topo, record=False)
            row[order] = {"time_us": r.time_us, "wall_s": time.perf_counter() - t0,
                          "recomputes": r.stats["recomputes"], "events": r.stats["events"]}
        row["time_rotated_over_rank"] = row["rotated"]["time_us"] / row["rank"]["time_us"]
        row["wall_rotated_over_rank"] = row["rotated"]["wall_s"] / row["rank"]["wall_s"]
        rows.append(row)
        print(f"{tname:>12} {name:>13} {size:>11}: {row['rank']['time_us']:9.2f} -> "
              f"{row['rotated']['time_us']:9.2f} us ({row['time_rotated_over_rank']:.4f}x), wall "
              f"{row['rank']['wall_s']:.2f} -> {row['rotated']['wall_s']:.2f} s", flush=True)
    summary = {f"{r['topology']} {r['collective']} {r['size']}": {
        "time_rotated_over_rank": round(r["time_rotated_over_rank"], 4),
        "wall_rotated_over_rank": round(r["wall_rotated_over_rank"], 3)} for r in rows}
    write("notify_order.json", {"summary": summary, "points": rows})


if __name__ == "__main__":
    main()
