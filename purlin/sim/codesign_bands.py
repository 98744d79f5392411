"""Bands from a codesign search's results, and the table around them.

:func:`make_bands` turns the simulated points of one (world, collective) into size bands
(see :mod:`purlin.sim.codesign` for the search and :mod:`purlin.snac.tables` for the
format); the rest writes, prints and fingerprints a table.
"""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Callable

from purlin.errors import PurlinError
from purlin.snac.ir import Copy, PutPackets, Reduce
from purlin.snac.tables import FOLDER
from purlin.spec import library

KNOBS = ("regime", "algorithm", "atom", "fence", "chunk_nbytes", "push_nbytes", "put_ctas",
         "consumer_ctas", "notify_order")


def policy_key(p: dict) -> tuple:
    """A policy's searched knobs as a hashable key."""
    return tuple(p.get(k) for k in KNOBS)


def compact(p: dict) -> dict:
    """A policy's searched knobs (the rest are the defaults)."""
    out = {k: p[k] for k in KNOBS if p.get(k) is not None}
    out.setdefault("fence", "rank")
    if out.get("notify_order") == "rank":   # the default: tables of before never name it
        del out["notify_order"]
    return out


def family(p: dict) -> tuple:
    """The family a candidate belongs to: its regime and algorithm (its Atom, fence, CTAs
    and chunks are knobs within it)."""
    return (p["regime"], p["algorithm"])


def ranked(rows: dict[tuple, dict]) -> list[dict]:
    """The rows that planned, fastest first, one per distinct schedule (programs digest)."""
    ok = [r for r in rows.values() if "error" not in r]
    uniq = {}
    for r in sorted(ok, key=lambda r: (r["time_us"], str(policy_key(r["policy"])))):
        uniq.setdefault(r["programs_digest"], r)
    return list(uniq.values())


def busiest_nbytes(schedule) -> int:
    """The most bytes one CTA of ``schedule`` stores (a Copy or Reduce once per
    destination, a PutPackets once): the longest serial data path of any CTA."""
    return max((sum(ins.nbytes * (len(ins.dsts) if isinstance(ins, (Copy, Reduce)) else 1)
                    for ins in prog.instrs if isinstance(ins, (Copy, Reduce, PutPackets)))
                for prog in schedule.programs), default=0)


def preferred(rows: list[dict], merge: float) -> dict:
    """The row the search takes among ``rows`` of one size: of those predicted within
    ``merge`` of the fastest (closer than the simulator resolves on the GPU's executor),
    the one whose busiest CTA stores the fewest bytes, then the fastest. A tie goes to
    the schedule least exposed to per-CTA costs the model does not see (see
    docs/policy.md#ties)."""
    fastest = min(r["time_us"] for r in rows)
    near = [r for r in rows if r["time_us"] <= (1 + merge) * fastest]
    return min(near, key=lambda r: (r.get("busiest_nbytes", 0), r["time_us"], str(policy_key(r["policy"]))))


def nbytes_of(name: str, world: int, size: int) -> int:
    """The planner's size key at nccl ``size``: the largest buffer of any rank."""
    c = library.from_size(name, world, size, "fp32")
    return max(max(c.input.nbytes(r), c.output.nbytes(r)) for r in range(c.world))


def _grid_picks(results: dict[int, dict], sizes: list[int], merge: float) -> list[dict]:
    """One policy per grid size: greedy runs of sizes that share a candidate within
    ``merge`` of each size's best; the run's pick is the one whose busiest CTA stores the
    fewest bytes (summed over the run, each size's relative to its least), then the one
    with the least summed excess (:func:`preferred` at one size)."""
    near, best = [], []
    for s in sizes:
        r = ranked(results[s])
        best.append(r[0]["time_us"])
        near.append({policy_key(x["policy"]): x for x in r if x["time_us"] <= (1 + merge) * best[-1]})
    picks: list[dict] = []
    i = 0
    while i < len(sizes):
        common, j = set(near[i]), i
        while j + 1 < len(sizes) and common & set(near[j + 1]):
            common &= set(near[j + 1])
            j += 1
        least = [min(r.get("busiest_nbytes", 0) for r in near[x].values()) or 1 for x in range(i, j + 1)]
        key = min(common, key=lambda k: (sum(near[x][k].get("busiest_nbytes", 0) / least[x - i] for x in range(i, j + 1)),
                                         sum(near[x][k]["time_us"] / best[x] for x in range(i, j + 1)), str(k)))
        picks += [near[x][key]["policy"] for x in range(i, j + 1)]
        i = j + 1
    return picks


def _interleave_by_size(tasks: list[tuple[int, dict]]) -> list[tuple[int, dict]]:
    """Each midpoint's first rival, then each one's second, ... (so a budget that stops
    early leaves every midpoint some)."""
    by: dict[int, list] = {}
    for t in tasks:
        by.setdefault(t[0], []).append(t)
    out, k = [], 0
    while any(k < len(v) for v in by.values()):
        out += [v[k] for v in by.values() if k < len(v)]
        k += 1
    return out


def midpoint(a: int, b: int) -> int:
    """The size between grid sizes ``a`` and ``b`` that is checked too (0: none)."""
    m = int(round(math.sqrt(a * b) / 256)) * 256
    return m if a < m < b else 0


Run = Callable[..., int]   # run(stage, [(size, policy)...], limited=False): points left out


def make_bands(name: str, world: int, results: dict[int, dict], grid: tuple[int, ...],
               merge: float, top: int, run: Run) -> dict:
    """Bands and recorded points of one (world, collective) from ``results`` (size ->
    policy key -> row). ``run(stage, [(size, policy)...], limited)`` simulates more points
    into ``results``: at the midpoints both neighbours' picks (always), then their three
    best rivals and the best of each family (regime, algorithm) there (``limited``: as far
    as the search's budget goes)."""
    sizes = sorted(s for s in results if ranked(results[s]))
    if not sizes:
        raise PurlinError(f"codesign: no policy plans {name} at world {world}")
    picks = _grid_picks(results, sizes, merge)
    mids, tasks, rivals = {}, [], []
    for i in range(len(sizes) - 1):
        m = midpoint(sizes[i], sizes[i + 1])
        if m:
            mids[m] = (picks[i], picks[i + 1])
            tasks += [(m, p) for p in (picks[i], picks[i + 1])]
            for s in (sizes[i], sizes[i + 1]):
                rk = ranked(results[s])
                rivals += [(m, r["policy"]) for r in rk[:3]]
                # and the best of each family there: a midpoint's size can cut chunks
                # badly for the leaders and leave another family ahead
                firsts: dict[tuple, dict] = {}
                for r in rk:
                    firsts.setdefault(family(r["policy"]), r["policy"])
                rivals += [(m, p) for p in firsts.values()]
    run(f"midpoints {name} W={world}", tasks)
    run(f"midpoint rivals {name} W={world}", _interleave_by_size(rivals), limited=True)
    chosen = dict(zip(sizes, picks))
    for m, (low, high) in mids.items():
        rows, r = results.get(m, {}), ranked(results.get(m, {}))
        if not r:
            continue
        near = lambda p: rows.get(policy_key(p), {}).get("time_us", math.inf) <= (1 + merge) * r[0]["time_us"]  # noqa: E731
        chosen[m] = high if near(high) else low if near(low) else preferred(r, merge)["policy"]
    _repair(name, world, results, chosen, merge, run)
    points = sorted(chosen)
    runs: list[dict] = []
    for s in points:
        if runs and policy_key(runs[-1]["policy"]) == policy_key(chosen[s]):
            runs[-1]["sizes"].append(s)
        else:
            runs.append({"policy": chosen[s], "sizes": [s]})
    bands, lo = [], 0
    for b in runs:
        hi = nbytes_of(name, world, b["sizes"][-1])
        probe = min([s for s in b["sizes"] if s in grid] or b["sizes"])   # the cheapest to re-plan
        row = results[probe][policy_key(b["policy"])]
        bands.append({"min_nbytes": lo, "max_nbytes": hi, "policy": compact(b["policy"]),
                      "probe": {"size": probe, "nbytes": nbytes_of(name, world, probe),
                                "programs_digest": row["programs_digest"], "time_us": row["time_us"]}})
        lo = hi
    recorded = []
    for s in points:
        pick = results[s][policy_key(chosen[s])]
        r = ranked(results[s])
        rivals = [x for x in r if x["programs_digest"] != pick["programs_digest"]][:top]
        recorded.append({"size": s, "nbytes": nbytes_of(name, world, s), "grid": s in grid,
                         "band": next(k for k, b in enumerate(runs) if s in b["sizes"]),
                         "pick": {"time_us": pick["time_us"], "programs_digest": pick["programs_digest"]},
                         "best_us": r[0]["time_us"], "simulated": len(r),
                         "rivals": [{"policy": x["policy"], "time_us": x["time_us"],
                                     "programs_digest": x["programs_digest"]} for x in rivals]})
    return {"bands": bands, "points": recorded}


def _repair(name: str, world: int, results: dict, chosen: dict, merge: float, run: Run,
            passes: int = 4) -> None:
    """Where a larger size's pick is faster (by more than 1%) than a smaller size's, the
    smaller size was under-searched: try the larger size's pick there, as it is and with
    its chunk scaled to the smaller size (the same number of chunks), each with either
    fence, and keep the faster, until no such pair is left or ``passes`` are done."""
    def t(s):
        return results[s][policy_key(chosen[s])]["time_us"]
    for k in range(passes):
        sizes = sorted(chosen)
        tasks = []
        for a, b in zip(sizes, sizes[1:]):
            if t(b) < 0.99 * t(a):
                p = chosen[b]
                ch = max(16, round(p["chunk_nbytes"] * nbytes_of(name, world, a)
                                   / nbytes_of(name, world, b) / 16) * 16)
                push = p.get("push_nbytes")
                scaled = {**p, "chunk_nbytes": ch,
                          "push_nbytes": push if push and push > ch and push % ch == 0 else None}
                tasks += [(a, p), (a, scaled)]
                if p["regime"] != "latency":   # and the other fence
                    tasks += [(a, {**q, "fence": "cta" if q.get("fence", "rank") == "rank" else "rank"})
                              for q in (p, scaled)]
        if not tasks:
            return
        run(f"monotone {name} W={world} {k + 1}", tasks)
        for a, pol in tasks:
            rows, best = results[a], ranked(results[a])[0]
            tried = rows.get(policy_key(pol))
            if tried and "error" not in tried and tried["time_us"] < t(a):
                chosen[a] = pol if tried["time_us"] <= (1 + merge) * best["time_us"] else best["policy"]


def fingerprint(table: dict) -> str:
    """The planner fingerprint: a hash of every band's probe (its pick's programs at one
    size), so a planner that plans any pick differently gives another one."""
    h = hashlib.sha256()
    for w in sorted(table["worlds"], key=int):
        for name, coll in sorted(table["worlds"][w]["collectives"].items()):
            for k, b in enumerate(coll["bands"]):
                h.update(f"{w}/{name}/{k}/{b['probe']['size']}/{b['probe']['programs_digest']};".encode())
    return h.hexdigest()[:16]


def default_path(name: str) -> Path:
    """Where ``purlin codesign`` writes a shipped topology's table: the source
    checkout's ``topologies/codesign/``."""
    return Path(__file__).resolve().parents[2] / "topologies" / FOLDER / f"{name}.json"


def write_table(table: dict, path: str | Path) -> Path:
    """Write ``table`` as JSON (one point per line, so a diff shows what moved)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    return path


def summary_lines(table: dict) -> list[str]:
    """The bands of a table, one line each, for the terminal."""
    lines = [f"# codesign {table['topology']}: {table['search']['points']} points simulated in "
             f"{table['search']['wall_s']} s on {table['search']['cpus']} CPUs; calibration "
             f"{table['calibration']['gpu_kind']} {table['calibration']['digest']}; planner "
             f"{table['planner']['fingerprint']}"]
    for w, entry in sorted(table["worlds"].items(), key=lambda kv: int(kv[0])):
        for name, coll in entry["collectives"].items():
            lines.append(f"# {name} W={w}")
            for b in coll["bands"]:
                p = b["policy"]
                push = f" push {p['push_nbytes']}" if p.get("push_nbytes") else ""
                lines.append(f"#   <= {b['max_nbytes']:>11} B  {p['regime']:>10} {p['algorithm']:>8} "
                             f"chunk {p['chunk_nbytes']:>8}{push}  ctas {p['put_ctas']:>3}+{p['consumer_ctas']:<3} "
                             f"{p['atom']:>6} fence {p.get('fence', 'rank'):>4}  "
                             f"({b['probe']['time_us']:.2f} us at {b['probe']['size']} B)")
    return lines
