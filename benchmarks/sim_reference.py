"""The simulator's reference predictions: a fixed set of (topology, collective, size,
policy) points and what the simulator predicts for each, kept so that an engine change
that is meant to leave answers alone can be checked against them.

Each point stores the fully resolved policy (so later changes to the default policy do
not move it), the CTA budget, a digest of the planned programs (so a planner change that
alters the schedule is told apart from an engine change) and the predicted time.

Run: ``python benchmarks/sim_reference.py [--out tests/data/sim-reference.json]``
(takes minutes: rack-scale points are included). After a model change, ``--update WHY``
re-predicts the committed points (same policies and programs) instead of choosing them
again, keeps each old time as ``previous_us`` and records why in the file's ``updates``.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from purlin.sim import simulate
from purlin.snac import Policy, plan
from purlin.snac.serialize import programs_digest
from purlin.spec import library
from purlin.topology import load_topology

K, M, G = 1 << 10, 1 << 20, 1 << 30
SEVEN = library.PURLIN_SEVEN
BOXES = ("hgx-h200-8", "hgx-b200-8", "hgx-a100-8", "mi300x-8", "pcie-gen5-8", "mesh-2d-16")
RACKS = ("gb200-nvl72", "rubin-nvl144")


def points() -> list[tuple[str, int | None, str, int, dict | None]]:
    """(topology, world, collective, size, policy fields) of every reference point."""
    out = []
    for t in BOXES:
        for c in SEVEN:
            for s in (4 * K, 1 * M, 64 * M):
                out.append((t, None, c, s, None))
    for w in (2, 8):
        for c in SEVEN:
            for s in (16 * K, 4 * M):
                out.append(("h200-loopback", w, c, s, None))
    for t in RACKS:
        for c in SEVEN:
            for s in (64 * K, 4 * M, 256 * M):
                out.append((t, None, c, s, None))
    for c in ("all_reduce", "all_to_all_v"):
        out.append(("gb200-nvl72", None, c, 1 * G, None))
    for t in ("hgx-h200-8", "gb200-nvl72"):
        for c in ("all_reduce", "all_gather", "reduce_scatter_v", "all_to_all_v"):
            for regime in ("latency", "throughput", "direct"):
                out.append((t, None, c, 256 * K, {"regime": regime}))
    out.append(("hgx-h200-8", None, "all_reduce", 16 * M, {"regime": "direct", "atom": "switch"}))
    out.append(("gb200-nvl72", None, "all_reduce", 16 * M, {"regime": "direct", "atom": "switch"}))
    out.append(("hgx-h200-8", None, "all_gather", 16 * M, {"regime": "throughput", "chunk_nbytes": 256 * K}))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "tests" / "data" / "sim-reference.json"))
    ap.add_argument("--update", metavar="WHY", help="re-predict the committed points after a model change")
    args = ap.parse_args()
    if args.update:
        return update(Path(args.out), args.update)
    rows = []
    t_all = time.perf_counter()
    for topo_name, world, name, size, fields in points():
        topo = load_topology(topo_name, world=world)
        c = library.from_size(name, topo.world, size)
        t0 = time.perf_counter()
        s = plan(c, topo, Policy(**fields) if fields else None, check=False)
        pol = dict(s.policy)
        r = simulate(s, topo, record=False)
        rows.append({"topology": topo_name, "world": topo.world, "collective": name, "size": size,
                     "requested": fields, "policy": pol, "cta_budget": 64,
                     "programs_digest": programs_digest(s),
                     "instructions": r.stats["instructions"], "time_us": r.time_us,
                     "wall_s": round(time.perf_counter() - t0, 3)})
        print(f"{topo_name:>14} {name:>16} {size:>11} {str(fields or ''):>40} "
              f"{r.time_us:12.3f} us  {rows[-1]['wall_s']:7.2f} s", flush=True)
    from common import header
    doc = {**header(), "about": "simulator predictions made before the rack-scale engine work "
           "(issue 20); each point's policy is fully resolved", "points": rows,
           "total_wall_s": round(time.perf_counter() - t_all, 1)}
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(rows)} points -> {args.out}")


def update(path: Path, why: str) -> None:
    """Re-predict every committed point with its recorded policy; the programs must be the
    same (a model change moves times, not schedules)."""
    from common import header
    doc = json.loads(path.read_text())
    moved = []
    for p in doc["points"]:
        topo = load_topology(p["topology"], world=p["world"])
        c = library.from_size(p["collective"], topo.world, p["size"])
        s = plan(c, topo, p["policy"], cta_budget=p["cta_budget"], check=False)
        if programs_digest(s) != p["programs_digest"]:
            raise SystemExit(f"{p['topology']} {p['collective']} {p['size']}: the planner changed "
                             "these programs; that is not a model change")
        t = simulate(s, topo, record=False).time_us
        p["previous_us"], p["time_us"] = p["time_us"], t
        moved.append(t / p["previous_us"])
    h = header()
    big = sum(abs(m - 1) > 5e-3 for m in moved)
    doc.setdefault("updates", []).append({"date": h["date"], "command": h["command"], "why": why,
                                          "moved_over_0.5pct": big, "min_ratio": min(moved),
                                          "max_ratio": max(moved)})
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(moved)} points, {big} moved past 0.5% (new/old {min(moved):.3f} .. {max(moved):.3f}) -> {path}")


if __name__ == "__main__":
    main()
