"""Quiet runs (purlin.sim.quiet) against the fluid model, on whole rack curves.

Each point (the seven collectives, 1 KiB to 1 GiB by 4, default policy) is simulated twice
in the same process: as the engine does (a quiet run where it holds, the fluid model
where a resource fills) and with quiet runs refused (the fluid model always, as before
them). Records both predictions, whether the first ran quiet, and the simulate phase's
wall time of each; a ``summary`` per topology: points, how many ran quiet, how many
predictions differ at all, and the largest slowdown of a point whose quiet attempt failed.

Writes ``benchmarks/results/sim_quiet.json``. Run: ``python benchmarks/sim_quiet.py
[--topologies gb200-nvl72,rubin-nvl144]`` (one process per topology, about 4 minutes on
2 cores).
"""
from __future__ import annotations

import argparse
import time
from multiprocessing import Pool

from common import write

SIZES = [1 << e for e in range(10, 31, 2)]


def curve(topology: str) -> list[dict]:
    from purlin.sim import engine, simulate
    from purlin.sim.quiet import Contended, QuietLoad
    from purlin.snac import plan
    from purlin.spec import library
    from purlin.topology import load_topology

    class Refused(QuietLoad):
        def __init__(self, capacities):
            raise Contended("refused")

    topo = load_topology(topology)
    rows = []
    for name in library.PURLIN_SEVEN:
        for size in SIZES:
            try:
                s = plan(library.from_size(name, topo.world, size), topo, check=False)
            except Exception as e:   # a size too small for the world: the library says which
                rows.append({"topology": topology, "collective": name, "size": size, "error": str(e)})
                continue
            engine.QuietLoad = QuietLoad
            t = time.perf_counter()
            now = simulate(s, topo, record=False)
            now_s = time.perf_counter() - t
            engine.QuietLoad = Refused
            t = time.perf_counter()
            fluid = simulate(s, topo, record=False)
            fluid_s = time.perf_counter() - t
            engine.QuietLoad = QuietLoad
            rows.append({"topology": topology, "collective": name, "size": size,
                         "quiet": now.stats["quiet"], "time_us": now.time_us, "fluid_time_us": fluid.time_us,
                         "sim_s": now_s, "fluid_sim_s": fluid_s})
            print(f"{topology:>12} {name:>16} {size:>11} quiet={now.stats['quiet']!s:5} "
                  f"same={now.time_us == fluid.time_us!s:5} {fluid_s:6.2f} s -> {now_s:6.2f} s", flush=True)
    return rows


def summarize(rows: list[dict]) -> dict:
    out = {}
    for topo in sorted({r["topology"] for r in rows}):
        rs = [r for r in rows if r["topology"] == topo and "error" not in r]
        failed = [r for r in rs if not r["quiet"]]
        out[topo] = {"points": len(rs), "quiet": sum(r["quiet"] for r in rs),
                     "different_predictions": sum(r["time_us"] != r["fluid_time_us"] for r in rs),
                     "quiet_sim_speedup_max": max((r["fluid_sim_s"] / r["sim_s"] for r in rs if r["quiet"]),
                                                  default=None),
                     "failed_attempt_extra_s_max": max((r["sim_s"] - r["fluid_sim_s"] for r in failed),
                                                       default=None)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topologies", default="gb200-nvl72,rubin-nvl144")
    args = ap.parse_args()
    topologies = args.topologies.split(",")
    from purlin.errors import PurlinError
    from purlin.topology import load_topology
    for name in topologies:   # a name that is no topology stops here, before any work
        try:
            load_topology(name)
        except (PurlinError, OSError, ValueError) as e:
            raise SystemExit(f"--topologies: {e}")
    with Pool(len(topologies)) as pool:
        rows = [r for rs in pool.map(curve, topologies) for r in rs]
    summary = summarize(rows)
    print(summary)
    print("wrote", write("sim_quiet.json", {"points": rows, "summary": summary}))


if __name__ == "__main__":
    main()
