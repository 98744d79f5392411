"""Confirm the loopback codesign tables on the GPU: does the pick beat its rivals?

For each world W in 2, 4, 8 (the loopback world, W ranks on one GPU), each of the
seven collectives and each size band of ``topologies/codesign/<gpu>-loopback.json`` (``--gpu``,
default h200: the table of the GPU this runs on, made with that GPU's calibration), this
runs, at one size of the band, the table's pick and the next-best candidates the search
recorded there (``--rivals``, default 5, by predicted time), each the exact schedule the
simulator predicted (same programs digest), every output checked once (poisoned outputs,
random inputs), then timed in CUDA graphs in interleaved rounds (so drift hits all
candidates alike).

Writes benchmarks/results/<gpu>-codesign.json: machine, GPU, date, command, per case every
candidate's raw samples, and a ``summary``: the share of (collective, W, band) cases whose
pick is within 5% of the measured best (target >= 90%), the geometric mean of measured
pick / measured best (target <= 1.03), and per case which candidate won and how the
simulator ranked it.

Run (one device call, about 5 minutes of GPU time):

    PYTHONPATH=. python3 benchmarks/gpu_codesign.py
    PYTHONPATH=. python3 benchmarks/gpu_codesign.py --dry-run     # CPU: plan all, estimate
    PYTHONPATH=. python3 benchmarks/gpu_codesign.py --only-misses --trace 5 --name h200-codesign-misses.json

``--only-misses`` runs again only the cases whose pick was more than 5% off the best in
the committed results; ``--trace K`` also traces every candidate K times (per-instruction
GPU timestamps) and keeps the run of median length, so that the simulator's timeline of
the same schedule can be laid beside it (which instruction the model mis-times).
``--explain FILE`` (CPU) adds to such a file, per case, the pick's and the measured
best's graph time, traced span (first instruction to last, median of the K runs) and
simulated span (with the simulator's per-instruction records, to read beside the trace),
and whether the traced spans order the two as the graph times do (the model mis-times the
kernel body) or not (the difference lies outside one traced call).

``--rerank FILE`` (CPU) adds to a results file what today's simulator would pick among the
candidates it measured, and that choice's measured distance from the best: a model change
checked against runs it was not made from, before the tables are searched again and
measured. ``--baseline COMMIT`` adds the same rerank by that commit's code and calibration,
run in the same command, and the ratios of today's figures over its.

``--baseline-table FILE`` also runs, in every case, the policy that another table (the one
before a re-search) gives at that case's size, as candidate ``baseline`` (or names the
candidate that already has it): the summary's ``baseline`` is that table's share within
5% and geometric mean over the same cases, measured in the same run, and the best of each
case is the best of every candidate, the baseline's included.

``--dry-run`` plans every candidate here, checks each digest against the table, and prints
the estimated device time (launch and graph overheads included) without a GPU.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

from common import RESULTS, header as cpu_header, load, revise, save

ROOT = Path(__file__).resolve().parents[1]
OUT = "h200-codesign.json"
SIZE_CAP = 64 << 20          # measure a band at a size at most this (where the band allows)
# What one candidate costs the device beyond its timed calls: upload, capture, first run,
# check (from the loopback benchmarks' logs on the H200: tens of milliseconds a schedule).
SETUP_S = 0.06


def table_path(gpu: str) -> Path:
    """The loopback codesign table of a GPU kind."""
    return ROOT / "topologies" / "codesign" / f"{gpu}-loopback.json"


def calls_per_graph(predicted_us: float) -> int:
    """Calls per graph: about 1 ms of work, 2 to 128 calls."""
    return max(2, min(128, int(1000 / max(predicted_us, 1.0))))


def cases(table: dict, worlds, names, rivals: int, baseline: dict | None = None) -> list[dict]:
    """One case per (world, collective, band): the size to run and its candidates (and
    the ``baseline`` table's policy at that size, see :func:`add_baseline`)."""
    out = []
    loopback = table["topology"]
    for w in worlds:
        entry = table["worlds"][str(w)]
        for name in names:
            coll = entry["collectives"][name]
            for k, band in enumerate(coll["bands"]):
                pts = [p for p in coll["points"] if p["band"] == k]
                grid = [p for p in pts if p["grid"]] or pts
                small = [p for p in grid if p["size"] <= SIZE_CAP] or grid[:1]
                p = small[len(small) // 2]
                cands = [{"label": "pick", "policy": band["policy"], "predicted_us": p["pick"]["time_us"],
                          "programs_digest": p["pick"]["programs_digest"]}]
                cands += [{"label": f"rival{j + 1}", "policy": r["policy"], "predicted_us": r["time_us"],
                           "programs_digest": r["programs_digest"]} for j, r in enumerate(p["rivals"][:rivals])]
                out.append({"loopback": loopback, "world": w, "collective": name, "band": k, "band_nbytes": [band["min_nbytes"], band["max_nbytes"]],
                            "size": p["size"], "nbytes": p["nbytes"], "cta_budget": entry["cta_budget"],
                            "candidates": cands})
                if baseline is not None:
                    add_baseline(out[-1], baseline)
    return out


def add_baseline(case: dict, baseline: dict) -> None:
    """The ``baseline`` table's policy at the case's size: the label of the candidate that
    has it already, or a new candidate ``baseline`` (planned and predicted with the rest)."""
    from purlin.sim.codesign_bands import compact
    from purlin.snac.tables import lookup
    hit = lookup(baseline, case["collective"], None, case["world"], case["nbytes"])
    if hit is None:
        raise SystemExit(f"--baseline-table: no policy for {case['collective']} W={case['world']} "
                         f"at {case['nbytes']} B")
    policy = compact(hit[0].to_dict())
    same = next((c["label"] for c in case["candidates"] if compact(c["policy"]) == policy), None)
    if same is None:
        case["candidates"].append({"label": "baseline", "policy": policy, "predicted_us": None,
                                   "programs_digest": None})
        same = "baseline"
    case["baseline"] = same


def plan_all(all_cases: list[dict], workers: int | None = None) -> list:
    """``plan_case`` for every case, on a process pool (planning is host work: done
    before the first kernel, on all cores)."""
    import os
    from concurrent.futures import ProcessPoolExecutor
    with ProcessPoolExecutor(max_workers=workers or os.cpu_count() or 1) as ex:
        for case, got in zip(all_cases, ex.map(predict_baseline, all_cases)):
            for cand in case["candidates"]:
                if cand["label"] == "baseline":
                    cand["programs_digest"], cand["predicted_us"] = got
        return list(ex.map(plan_case, all_cases))


def predict_baseline(case: dict) -> tuple[str, float] | None:
    """The digest and predicted time of a case's ``baseline`` candidate (one the table
    did not search), as the search would have simulated it."""
    from purlin.sim.codesign import evaluate
    cand = next((c for c in case["candidates"] if c["label"] == "baseline"), None)
    if cand is None:
        return None
    r = evaluate(loopback_of(case), case["world"], case["collective"], case["size"], cand["policy"], None,
                 case["cta_budget"])
    if "error" in r:
        raise SystemExit(f"{case['collective']} W={case['world']} {case['size']} B: the baseline "
                         f"table's policy does not plan: {r['error']}")
    return r["programs_digest"], r["time_us"]


def loopback_of(case: dict) -> str:
    """The loopback topology a case ran on (results before --gpu name none: the H200's)."""
    return case.get("loopback", "h200-loopback")


def plan_case(case: dict):
    """The collective and the exact schedules the table predicted for a case."""
    from purlin.snac import plan
    from purlin.snac.serialize import programs_digest
    from purlin.spec import library
    from purlin.topology import load_topology
    topo = load_topology(loopback_of(case), world=case["world"])
    c = library.from_size(case["collective"], case["world"], case["size"], "fp32")
    scheds = []
    for cand in case["candidates"]:
        s = plan(c, topo, cand["policy"], cta_budget=case["cta_budget"])
        if programs_digest(s) != cand["programs_digest"]:
            raise SystemExit(f"{case['collective']} W={case['world']} {case['size']} B {cand['label']}: "
                             f"the planner no longer makes the schedule the table predicted (digest "
                             f"{programs_digest(s)} != {cand['programs_digest']}): regenerate the table")
        scheds.append(s)
    d = programs_digest(plan(c, topo, cta_budget=case["cta_budget"]))   # the default is the pick
    if d != case["candidates"][0]["programs_digest"]:
        raise SystemExit(f"{case['collective']} W={case['world']} {case['size']} B: the default "
                         f"plan is not the table's pick")
    return c, scheds


def estimate_s(all_cases: list[dict], rounds: int, replays: int) -> float:
    total = 0.0
    for case in all_cases:
        for cand in case["candidates"]:
            calls = calls_per_graph(cand["predicted_us"])
            total += SETUP_S + cand["predicted_us"] * 1e-6 * calls * (1 + rounds * (replays + 1))
    return total


def measure(all_cases: list[dict], planned: list, rounds: int, replays: int, budget_s: float,
            out_dir, command, name: str = OUT, trace: int = 0) -> dict:
    import cupy as cp

    from gpu_common import header, time_graph
    from gpu_loopback import buffers, poisoned_run_wrong
    from purlin.backends.gpu import LoopbackWorld
    from purlin.topology import load_topology

    doc = header(command)
    props = cp.cuda.runtime.getDeviceProperties(0)
    doc["gpu"] = {"name": props["name"].decode(), "sms": props["multiProcessorCount"],
                  "driver": cp.cuda.runtime.driverGetVersion(), "runtime": cp.cuda.runtime.runtimeGetVersion()}
    doc.update(table=f"topologies/codesign/{loopback_of(all_cases[0])}.json" if all_cases else None,
               rounds=rounds, replays=replays, cases=[])
    t0 = time.time()
    worlds: dict[int, object] = {}
    for case, (c, scheds) in zip(all_cases, planned):
        if time.time() - t0 > budget_s:
            doc["stopped_early"] = f"time budget {budget_s} s reached before {case['collective']} W={case['world']}"
            break
        w = case["world"]
        if w not in worlds:
            worlds.clear()
            cp.get_default_memory_pool().free_all_blocks()
            worlds[w] = LoopbackWorld(w, topology=load_topology(loopback_of(case), world=w))
        world = worlds[w]
        ins, outs = buffers(cp, c, rng_seed=case["band"] + 7 * w)
        for cand, s in zip(case["candidates"], scheds):
            try:
                cand["wrong"] = poisoned_run_wrong(cp, world, s, ins, outs)
                cand["samples_us"] = []
            except Exception as e:   # refused or broken: recorded, the case goes on
                cand["error"] = f"{type(e).__name__}: {e}"
        live = [(cand, s) for cand, s in zip(case["candidates"], scheds) if "error" not in cand]
        for _ in range(rounds):               # interleaved: each round times every candidate
            for cand, s in live:
                calls = calls_per_graph(cand["predicted_us"])
                cand["samples_us"] += time_graph(lambda s=s: world.run(s, ins, outs), calls, replays=replays, warmup=1)
                cand["calls_per_graph"] = calls
            world.check()
        for cand, s in live:
            cand["median_us"] = statistics.median(cand["samples_us"])
            if trace:
                runs = [world.trace(s, ins, outs) for _ in range(trace)]
                runs.sort(key=lambda recs: max(r.end_us for r in recs))
                cand["trace"] = [list(r) for r in runs[len(runs) // 2]]
                cand["trace_spans_us"] = [max(r.end_us for r in recs) for recs in runs]
        doc["cases"].append(case)
        _report(case)
        doc["elapsed_s"] = time.time() - t0
        doc["summary"] = summarize(doc["cases"])
        save(name, doc, out_dir)             # partial results survive a timeout
        del ins, outs
    doc["summary"] = summarize(doc["cases"])
    return doc


def summarize(done: list[dict]) -> dict:
    """The share within 5% and the geometric mean of pick / best, over cases whose pick
    ran correctly; per case, the measured order against the predicted one."""
    ratios, per_case, base_ratios = [], {}, []
    for case in done:
        ok = [c for c in case["candidates"] if "median_us" in c and c.get("wrong") in (0, -1)]
        pick = next((c for c in ok if c["label"] == "pick"), None)
        if pick is None:
            continue
        best = min(ok, key=lambda c: c["median_us"])
        ratio = pick["median_us"] / best["median_us"]
        ratios.append(ratio)
        order = sorted(ok, key=lambda c: c["median_us"])
        per_case[f"{case['collective']}/W{case['world']}/band{case['band']}"] = {
            "size": case["size"], "winner": best["label"], "winner_policy": best["policy"],
            "pick_over_best": ratio,
            "measured_order": [c["label"] for c in order],
            "predicted_rank_of_winner": [c["label"] for c in case["candidates"]].index(best["label"]),
            "pick_predicted_us": pick["predicted_us"], "pick_measured_us": pick["median_us"],
            "winner_predicted_us": best["predicted_us"], "winner_measured_us": best["median_us"]}
        base = next((c for c in ok if c["label"] == case.get("baseline")), None)
        if base is not None:
            per_case[f"{case['collective']}/W{case['world']}/band{case['band']}"]["baseline_over_best"] = \
                base["median_us"] / best["median_us"]
            base_ratios.append((ratio, base["median_us"] / best["median_us"]))
    out = {**_shares(ratios),
           "targets": {"within_5pct_share": ">= 0.90", "geomean_pick_over_best": "<= 1.03"},
           "wrong_runs": sum(1 for case in done for c in case["candidates"] if c.get("wrong") not in (0, -1, None)),
           "by_case": per_case}
    if base_ratios:   # the other table, over the cases where both ran
        pick, base = _shares([r for r, _ in base_ratios]), _shares([b for _, b in base_ratios])
        out["baseline"] = {**base, "pick_on_these_cases": pick,
                           "pick_share_over_baseline": (pick["within_5pct_share"] / base["within_5pct_share"]
                                                        if base["within_5pct_share"] else None),
                           "pick_geomean_over_baseline": pick["geomean_pick_over_best"] / base["geomean_pick_over_best"]}
    return out


def _shares(ratios: list[float]) -> dict:
    """Cases, share within 5% and geometric mean of a list of (pick / best) ratios."""
    n = len(ratios)
    return {"cases": n, "within_5pct_share": sum(r <= 1.05 for r in ratios) / n if n else None,
            "geomean_pick_over_best": math.exp(sum(math.log(r) for r in ratios) / n) if n else None}


def explain(doc: dict) -> dict:
    """Per traced case: is the pick's loss to the measured best inside the kernel body
    (the traced spans differ as the graph times do) or outside one traced call?"""
    from purlin.sim import simulate
    from purlin.topology import load_topology
    rows, verdicts = {}, []
    for case in doc["cases"]:
        live = [c for c in case["candidates"] if "trace_spans_us" in c and "median_us" in c]
        if not live or live[0]["label"] != "pick":
            continue
        _, scheds = plan_case(case)
        topo = load_topology(loopback_of(case), world=case["world"])
        by_label = dict(zip([c["label"] for c in case["candidates"]], scheds))

        def row(c):
            recs = simulate(by_label[c["label"]], topo, record=True).records
            t0 = min(r[4] for r in recs)
            return {"label": c["label"], "graph_us": c["median_us"],
                    "traced_span_us": statistics.median(c["trace_spans_us"]),
                    "simulated_span_us": max(r[5] for r in recs) - t0,
                    "predicted_us": c["predicted_us"],
                    # the simulator's timeline beside the candidate's trace: both from the first start
                    "simulated_records": [[*r[:4], r[4] - t0, r[5] - t0, r[6]] for r in recs]}
        pick, best = row(live[0]), row(min(live, key=lambda c: c["median_us"]))
        inside = pick["traced_span_us"] - best["traced_span_us"] > 0.1
        verdicts.append(inside)
        rows[f"{case['collective']}/W{case['world']}/band{case['band']}"] = {
            "pick": pick, "best": best, "loss_in_traced_body": inside}
    return {"cases": rows, "in_body": sum(verdicts), "outside_one_traced_call": len(verdicts) - sum(verdicts)}


def rerank(doc: dict) -> dict:
    """Today's simulator over the candidates a results file measured: per case, each
    candidate re-planned from its policy and simulated again; the candidate the search
    would now take (:func:`purlin.sim.codesign_bands.preferred`: within ``merge`` of the
    fastest, the fewest bytes on the busiest CTA), and how far that one measured from the
    measured best. The share
    within 5% and the geometric mean over the cases are what a table searched with
    today's model would score, as far as the measured candidates reach (a new pick
    outside them is not measured). Nothing here is fit: it checks a model change against
    runs the model was not made from."""
    from purlin.sim import codesign_bands, simulate
    from purlin.sim.codesign import Search
    from purlin.snac import plan
    from purlin.snac.serialize import programs_digest
    from purlin.spec import library
    from purlin.topology import load_topology
    rows, ratios, same = {}, [], 0
    merge = Search().merge
    for case in doc["cases"]:
        ok = [c for c in case["candidates"] if "median_us" in c and c.get("wrong") in (0, -1)]
        if not any(c["label"] == "pick" for c in ok):
            continue
        topo = load_topology(loopback_of(case), world=case["world"])
        coll = library.from_size(case["collective"], case["world"], case["size"], "fp32")
        now, busiest = {}, {}
        for c in ok:
            sched = plan(coll, topo, c["policy"], cta_budget=case["cta_budget"], check=False)
            same += programs_digest(sched) == c["programs_digest"]
            now[c["label"]] = simulate(sched, topo, record=False).time_us
            busiest[c["label"]] = codesign_bands.busiest_nbytes(sched)
        choice = codesign_bands.preferred([{"time_us": now[c["label"]], "busiest_nbytes": busiest[c["label"]],
                                            "policy": c["policy"], "candidate": c} for c in ok], merge)["candidate"]
        best = min(c["median_us"] for c in ok)
        ratios.append(choice["median_us"] / best)
        rows[f"{case['collective']}/W{case['world']}/band{case['band']}"] = {
            "choice": choice["label"], "choice_over_best": ratios[-1], "predicted_us": now,
            "busiest_nbytes": busiest, "measured_us": {c["label"]: c["median_us"] for c in ok}}
    n = len(ratios)
    return {"cases": n, "schedules_same_as_measured": same,
            "schedules": sum(len(r["predicted_us"]) for r in rows.values()),
            "within_5pct_share": sum(r <= 1.05 for r in ratios) / n if n else None,
            "geomean_choice_over_best": math.exp(sum(math.log(r) for r in ratios) / n) if n else None,
            "by_case": rows}


def rerank_at(commit: str, name: str) -> dict:
    """:func:`rerank` of results file ``name`` (as it is here) by the code and calibration
    of ``commit`` (extracted with ``git archive``, run in a process of its own): what the
    simulator before a model change would have picked among the same measured candidates."""
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        paths = ["purlin", "topologies", "benchmarks/common.py", "benchmarks/gpu_codesign.py"]
        try:
            tar = subprocess.run(["git", "-C", str(ROOT), "archive", commit, *paths], capture_output=True,
                                 check=True).stdout
        except subprocess.CalledProcessError as e:
            raise SystemExit(f"--baseline {commit}: git archive failed: {e.stderr.decode().strip()}") from None
        subprocess.run(["tar", "-x", "-C", tmp], input=tar, check=True)
        (Path(tmp) / "benchmarks" / "results").mkdir(parents=True, exist_ok=True)
        (Path(tmp) / "benchmarks" / "results" / name).write_text((RESULTS / name).read_text())   # this file, as it is
        env = {k: v for k, v in os.environ.items() if k != "OUT"} | {"PYTHONPATH": tmp}
        done = subprocess.run([sys.executable, "benchmarks/gpu_codesign.py", "--rerank", name], cwd=tmp, env=env,
                              capture_output=True, text=True)
        if done.returncode != 0:
            why = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise SystemExit(f"--baseline {commit}: its gpu_codesign.py --rerank {name} failed: {why}")
        got = json.loads((Path(tmp) / "benchmarks" / "results" / name).read_text())["rerank"]
    return {"commit": commit, **{k: v for k, v in got.items() if k != "by_case"},
            "choices": {case: row["choice"] for case, row in got["by_case"].items()}}


def _report(case: dict) -> None:
    cells = " ".join(f"{c['label']}={c.get('median_us', float('nan')):.2f}/{c['predicted_us']:.2f}"
                     for c in case["candidates"])
    print(f"W={case['world']} {case['collective']:>16} band {case['band']} {case['size']:>10} B  "
          f"measured/predicted us: {cells}", flush=True)


def main(argv=None) -> dict | None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline-table", default=None, metavar="FILE",
                    help="also run the policy this table gives at each case's size (same run)")
    ap.add_argument("--dry-run", action="store_true", help="plan everything on the CPU, estimate device time")
    ap.add_argument("--gpu", default="h200", help="the GPU kind whose loopback table to confirm (h200, h100, ...)")
    ap.add_argument("--worlds", default="2,4,8")
    ap.add_argument("--collectives", default=None, help="comma list (default: the table's seven)")
    ap.add_argument("--rivals", type=int, default=5, help="next-best candidates per case")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--replays", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=290.0, help="stop starting cases after this")
    ap.add_argument("--out", default=None, help="also write the results here (default $OUT)")
    ap.add_argument("--workers", type=int, default=None, help="planning processes (default: all cores)")
    ap.add_argument("--only-misses", action="store_true",
                    help="only the cases whose pick was > 5%% off the best in benchmarks/results/<gpu>-codesign.json")
    ap.add_argument("--trace", type=int, default=0, help="trace every candidate this many times")
    ap.add_argument("--name", default=None, help="results file name (default <gpu>-codesign.json)")
    ap.add_argument("--explain", default=None, metavar="FILE", help="CPU: explain a traced results file")
    ap.add_argument("--rerank", default=None, metavar="FILE",
                    help="CPU: what today's simulator would pick among a results file's measured candidates")
    ap.add_argument("--baseline", default=None, metavar="COMMIT",
                    help="with --rerank: the same rerank by COMMIT's code and calibration, in the same run")
    args = ap.parse_args(argv)
    if args.trace < 0:
        ap.error(f"--trace {args.trace}: a count of traced runs, 0 or more")
    if args.baseline and not args.rerank:
        ap.error("--baseline COMMIT goes with --rerank FILE")
    if args.rerank:
        def both(d: dict) -> dict:
            out = rerank(d)
            if args.baseline:
                out["baseline"] = rerank_at(args.baseline, args.rerank)
                for key in ("within_5pct_share", "geomean_choice_over_best"):
                    out["baseline"][f"{key}_now_over_baseline"] = out[key] / out["baseline"][key]
            return out
        doc = revise(args.rerank, "rerank", both)
        print({k: ({b: x for b, x in v.items() if b != "choices"} if k == "baseline" else v)
               for k, v in doc["rerank"].items() if k != "by_case"})
        return doc
    if args.explain:
        doc = revise(args.explain, "explain", explain)
        print({k: v for k, v in doc["explain"].items() if k != "cases"})
        return doc
    name = args.name or f"{args.gpu}-codesign.json"
    if not table_path(args.gpu).exists():
        ap.error(f"--gpu {args.gpu}: no loopback table {table_path(args.gpu).relative_to(ROOT)} "
                 f"(make it with `purlin codesign {args.gpu}-loopback`)")
    table = json.loads(table_path(args.gpu).read_text())
    worlds = [int(w) for w in args.worlds.split(",")]
    names = args.collectives.split(",") if args.collectives else list(table["worlds"][str(worlds[0])]["collectives"])
    baseline = None
    if args.baseline_table:
        from purlin.errors import PlanError
        from purlin.snac.tables import parse_table
        try:
            baseline = parse_table(json.loads(Path(args.baseline_table).read_text()), args.baseline_table)
        except PlanError as e:
            ap.error(f"--baseline-table {e}")
        except (OSError, ValueError) as e:
            ap.error(f"--baseline-table {args.baseline_table}: cannot read it as JSON ({e})")
        if baseline.get("topology") != table["topology"]:
            ap.error(f"--baseline-table {args.baseline_table}: a table of {baseline.get('topology')}, "
                     f"not {table['topology']}")
    all_cases = cases(table, worlds, names, args.rivals, baseline)
    if args.only_misses:
        done = load(f"{args.gpu}-codesign.json")["summary"]["by_case"]
        all_cases = [c for c in all_cases
                     if done.get(f"{c['collective']}/W{c['world']}/band{c['band']}", {}).get("pick_over_best", 1) > 1.05]
    command = "python3 benchmarks/gpu_codesign.py " + " ".join(sys.argv[1:] if argv is None else argv)
    t0 = time.time()
    planned = plan_all(all_cases, args.workers)
    plan_s = time.time() - t0
    if args.dry_run:
        est = estimate_s(all_cases, args.rounds, args.replays)
        n = sum(len(c["candidates"]) for c in all_cases)
        print(f"# {len(all_cases)} cases, {n} schedules, every digest as the table predicted "
              f"(planned in {plan_s:.1f} s on {cpu_header()['machine']['cpus']} CPUs here)")
        if baseline is not None:
            added = sum(c["baseline"] == "baseline" for c in all_cases)
            print(f"# the baseline table's policy: a candidate of the table in {len(all_cases) - added} "
                  f"cases, added in {added}")
        print(f"# estimated device time: {est:.0f} s of runs and setup, after the planning "
              f"(about {plan_s:.0f} s x {cpu_header()['machine']['cpus']} / the device host's CPUs)")
        return None
    doc = measure(all_cases, planned, args.rounds, args.replays, args.budget_s - plan_s, args.out, command,
                  name, args.trace)
    doc["plan_s"] = plan_s
    if baseline is not None:
        doc["baseline_table"] = {"path": args.baseline_table, "date": baseline.get("date"),
                                 "command": baseline.get("command"), "planner": baseline.get("planner")}
    path = save(name, doc, args.out)
    s = doc["summary"]
    print(f"summary: {s['cases']} cases, pick within 5% of the best in {s['within_5pct_share']:.0%}, "
          f"geomean pick/best {s['geomean_pick_over_best']:.3f} -> {path}")
    if "baseline" in s:
        b = s["baseline"]
        print(f"baseline table {args.baseline_table}: within 5% in {b['within_5pct_share']:.0%}, "
              f"geomean {b['geomean_pick_over_best']:.3f} over the same {b['cases']} cases")
    return doc


if __name__ == "__main__":
    main()
