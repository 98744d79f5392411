"""The committed GPU results stay consistent with the code that claims them.

- the calibration in topologies/calibration/h200.json is what purlin.sim.fit (run by
  benchmarks/fit_calibration.py) fits from the committed raw microbenchmarks, and the other
  GPUs' executor-derived parameters follow from it;
- the simulator, with that calibration, reproduces every committed prediction of
  benchmarks/results/h200-validation.json (same schedule digest, same time);
- the summaries are what their points say.
"""
import json
import statistics
from pathlib import Path

import pytest

from purlin.sim import fit as fc
from purlin.sim import simulate, validation
from purlin.snac import plan
from purlin.snac.serialize import programs_digest
from purlin.spec import library
from purlin.topology import load_topology
from tests.helpers import load_result

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
# The loopback codesign table against the measured crossover: a pick measured slower than
# the faster regime by more than 5% is counted; at most MAX_WORSE such, none over MAX_SLOWER
# (the simulator's largest validation error is 15%).
MAX_SLOWER, MAX_WORSE = 1.15, 12


load = load_result


# GPUs measured on the lent machines: their calibration is the fit of their own raw files
MEASURED_GPUS = {"h200": 4.0, "h100": 3.0}   # the memory knee each fit picks (None: any)


@pytest.mark.parametrize("gpu", MEASURED_GPUS)
def test_calibration_is_the_fit_of_the_committed_microbenchmarks(gpu):
    """<gpu>.json is what the fit makes of the committed raw files: the memory knee it
    picks and every measured parameter at that knee."""
    raw = load(f"{gpu}-calibration-raw.json")
    ex = load(f"{gpu}-executor-calibration-raw.json")
    hbm = load_topology(f"{gpu}-loopback").gpus[0].hbm_bandwidth_gbps
    doc = json.loads((ROOT / "topologies" / "calibration" / f"{gpu}.json").read_text())
    cal = doc["parameters"]
    knee, fitted, _ = fc.fit_knee(raw, ex, doc, hbm, "test")
    assert knee == cal["hbm_knee"]["value"] and fitted.pop("hbm_knee")[0] == knee
    assert MEASURED_GPUS[gpu] in (None, knee)
    assert fitted == fc.fit_all(raw, ex, cal, hbm, knee, gpu)
    for key, (value, _) in fitted.items():
        assert cal[key]["provenance"] == "measured", key
        if key in fc.THROUGH_SIMULATOR:   # a first estimate, refit below
            continue
        assert cal[key]["value"] == pytest.approx(value, rel=1e-3, abs=1e-4), key


@pytest.mark.parametrize("gpu", MEASURED_GPUS)
def test_the_simulator_fitted_terms_are_the_fit_of_the_committed_microbenchmarks(gpu):
    """The terms fit through the simulator (reduce in the L2, per-source reduce start,
    packet poll, the launch's grid and per-CTA terms) are what the fit makes of the
    committed raws and calibration."""
    ex = load(f"{gpu}-executor-calibration-raw.json")
    doc = json.loads((ROOT / "topologies" / "calibration" / f"{gpu}.json").read_text())
    cal = doc["parameters"]
    got = fc.fit_reduce_l2(ex, doc)
    got["packet_poll_us"] = fc.fit_poll(ex, doc)
    got.update(fc.fit_launch_ctas(ex, doc))
    assert sorted(got) == sorted(fc.THROUGH_SIMULATOR)
    for key, (value, _) in got.items():
        assert cal[key]["provenance"] == "measured", key
        assert cal[key]["value"] == pytest.approx(value, abs=1e-4), key
    assert cal["l2_reduce_speedup"]["value"] > 1.0 and 0 <= cal["packet_poll_us"]["value"] < 1.0


@pytest.mark.parametrize("gpu", ["a100", "h100", "b200", "gb200", "mi300x", "rubin"])
def test_other_gpus_derive_from_the_committed_h200_fit(gpu):
    """What a GPU's own microbenchmarks did not measure follows from the H200 fit; what
    they measured (the H100's executor) stays as measured."""
    cal_dir = ROOT / "topologies" / "calibration"
    h200 = json.loads((cal_dir / "h200.json").read_text())["parameters"]
    other = json.loads((cal_dir / f"{gpu}.json").read_text())["parameters"]
    assert fc.derive(h200, other, gpu) == other
    if gpu in MEASURED_GPUS:
        assert other["launch_us"]["provenance"] == other["packet_gbps"]["provenance"] == "measured"
        return
    assert other["launch_us"]["value"] == h200["launch_us"]["value"]       # the same executor
    assert other["packet_gbps"]["value"] == pytest.approx(
        other["sm.cta_local_gbps"]["value"] * h200["packet_gbps"]["value"] / h200["sm.cta_local_gbps"]["value"],
        abs=0.01)


@pytest.mark.parametrize("gpu", MEASURED_GPUS)
def test_measured_parameters_name_the_gpus_own_raw_files(gpu):
    """A GPU's fit cites its own executor results, never another GPU's."""
    cal = json.loads((ROOT / "topologies" / "calibration" / f"{gpu}.json").read_text())["parameters"]
    cited = {key for key, p in cal.items() if "executor-calibration-raw.json" in p["source"]}
    assert {"launch_us", "hbm_knee", "packet_src_us", "l2_reduce_speedup"} <= cited
    for key in cited:
        assert f"{gpu}-executor-calibration-raw.json" in cal[key]["source"], key
        assert cal[key]["source"].count("executor-calibration-raw.json") == 1, key


def test_a_knee_whose_fit_reads_an_impossible_rate_is_ruled_out():
    """On the H100's loaded runs (reduce of 2, 4, 8 sources: 211, 227, 282 us), knee 2
    reads the per-source rate as negative: that knee is ruled out by name, not a crash."""
    raw, ex = load("h100-calibration-raw.json"), load("h100-executor-calibration-raw.json")
    doc = json.loads((ROOT / "topologies" / "calibration" / "h100.json").read_text())
    hbm = load_topology("h100-loopback").gpus[0].hbm_bandwidth_gbps
    lines: list[str] = []
    knee, _, how = fc.fit_knee(raw, ex, doc, hbm, "test", log=lines.append)
    ruled = [x for x in lines if "ruled out" in x]
    assert len(ruled) == 1 and ruled[0].startswith("hbm_knee    2: ruled out")
    assert "sm.reduce_src_gbps.value: must be > 0" in ruled[0]
    assert knee == 3.0 and len(lines) == len(fc.KNEES)


def test_packet_source_cost_is_fit_at_the_smallest_size_run_alone_at_several_m():
    """A size measured only with many pairs at once (n = 256, p = 64) does not hide the
    single-pair runs of the next size from the fit."""
    def row(m, n, p, us):
        return {"case": "pkt_reduce", "m": m, "n": n, "p": p, "us_per_call": [us] * 3}
    rows = [row(1, 1024, 1, 4.0), row(4, 1024, 1, 4.6), row(7, 1024, 1, 5.2), row(7, 256, 64, 6.0),
            row(3, 4096, 1, 9.0)]
    got = fc._packet_reduce(rows, per=0.0001)
    assert got["packet_src_us"][0] == pytest.approx(0.2 - 1024 * 0.0001)
    assert "m = [1, 4, 7] packet sources of 1024 B" in got["packet_src_us"][1]
    assert "packet_src_us" not in fc._packet_reduce([row(7, 256, 64, 6.0), row(1, 1024, 1, 4.0)], per=0.0)


def test_derive_keeps_what_the_gpu_measured_itself():
    h200 = {"launch_us": {"value": 1.5, "provenance": "measured"}}
    other = {"launch_us": {"value": 1.9, "provenance": "measured", "source": "its own fit"}}
    assert fc.derive({**h200, **_all_derived(h200)}, {**other, **_all_derived(other, 7.0)}, "h100")["launch_us"] == \
        other["launch_us"]


def _all_derived(base: dict, v: float = 10.0) -> dict:
    """Every other parameter derive() reads, as assumptions."""
    keys = set(fc.SAME_EXECUTOR) | set(fc.RATIO_OF_COPY) | {"sm.cta_local_gbps", "tma.cta_local_gbps"}
    return {k: {"value": v, "provenance": "assumption"} for k in keys if k not in base}


def test_simulator_reproduces_the_committed_predictions():
    doc = load("h200-validation.json")
    points = doc["points"]
    for p in points[::7]:   # every 7th point: all collectives, worlds and sizes appear
        topo = load_topology("h200-loopback", world=p["world"])
        c = library.from_size(p["collective"], p["world"], p["requested"], "fp32")
        s = plan(c, topo, p["policy"], cta_budget=p["cta_budget"])
        assert programs_digest(s) == p["programs_digest"], (p["collective"], p["world"], p["requested"])
        r = simulate(s, topo, "h200", record=False)
        assert r.time_us == pytest.approx(p["predicted_us"], rel=1e-6), (p["collective"], p["requested"])


def test_validation_summary_matches_its_points():
    doc = load("h200-validation.json")
    errs = [abs(p["predicted_us"] - p["measured_us"]) / p["measured_us"] for p in doc["points"]]
    s = doc["summary"]
    assert s["points"] == len(doc["points"]) == 7 * 10 * 3
    assert s["median_abs_err"] == pytest.approx(statistics.median(errs))
    assert s["max_abs_err"] == pytest.approx(max(errs))
    assert all(p["wrong"] in (0, None) for p in doc["points"])      # the GPU ran them correctly
    assert {p["world"] for p in doc["points"]} == {2, 4, 8}


def test_gpu_summaries_match_their_targets_fields():
    atoms = load("h200-atoms.json")["summary"]
    loop = load("h200-loopback.json")["summary"]
    assert 0.5 < atoms["copy_vs_memcpy_64MiB"] < 1.2 and atoms["reduce8_vs_roofline"] >= 0.9
    by = loop["loopback_large_by_collective"]
    assert set(by) == set(library.PURLIN_SEVEN)
    assert loop["loopback_large_vs_roofline"] == pytest.approx(min(v["vs_roofline"] for v in by.values()))
    assert 0 < loop["loopback_ar8_8KiB_us"] < 50


def test_copy_vs_memcpy_is_the_median_of_its_paired_rounds():
    """Each size's figure comes from rounds that time cudaMemcpy and the Atom copy back to
    back (the faster of two timings for each); the summary is the worst size's median."""
    doc = load("h200-atoms.json")
    by = doc["summary"]["copy_vs_memcpy_by_size"]
    assert set(by) == set(doc["raw"]["rounds"]) and all(int(n) >= 64 << 20 for n in by)
    for n, entry in doc["raw"]["rounds"].items():
        rounds = entry["rounds"]
        assert len(rounds) >= 5
        for r in rounds:
            assert r["ratio"] == pytest.approx(min(r["memcpy_graph"], r["memcpy_events"])
                                               / min(r["copy_graph"], r["copy_events"]))
        assert by[n] == pytest.approx(statistics.median(r["ratio"] for r in rounds))
        assert entry["config"] == doc["summary"]["copy_best_config"][n]
    assert doc["summary"]["copy_vs_memcpy_64MiB"] == pytest.approx(min(by.values()))


def test_simulator_reproduces_the_executor_microbenchmarks():
    """The calibrated simulator against the microbenchmarks it was fit from, and against
    the ones it was not (the smaller single push/unpack pairs test the packet model). The
    larger packet reduce is a gap the model has no term for: bounded here, so that a
    change in it shows."""
    errs = validation.microbenchmark_errors(load("h200-executor-calibration-raw.json"))
    gaps = validation.known_gaps(errs)
    rest = [abs(e) for k, e in errs.items() if k not in gaps]
    assert len(errs) >= 88 and len(gaps) == 1
    assert statistics.median(rest) < 0.05
    # 2 push/unpack pairs, 30 push/read consumer shapes, 8 fan-in shapes: whole 8-16 KiB
    # puts copied out, and runs of puts from fewer CTAs, run 10-14% slower than charged;
    # many small pairs copied out 5-14% faster (the model has no term for either:
    # docs/simulator.md)
    held = validation.held_out(errs)
    assert len(held) == 40 and max(abs(e) for e in held) < 0.15
    pkt = [e for (name, p), e in errs.items() if name == "pkt_reduce" and (name, p) not in gaps]
    assert len(pkt) == 11 and max(abs(e) for e in pkt) < 0.10   # m = 1, 3, 4, 7 alone; crowded (fit)
    fit = [e for (name, p), e in errs.items() if name in ("put_ops", "copy_shifted", "put_pass")]
    # put_ops k=32 of 1 KiB: +16% (the kernel's put runs no longer walk their records,
    # 2026-12-04; the per-put cost fit is 0 and the bytes at the packet rate over-charge them)
    assert len(fit) == 16 and max(abs(e) for e in fit) < 0.18
    # +25% since the kernel's start got 0.6 us cheaper (2026-12-05; +20% before, two runs):
    # the same gap over a shorter call
    assert all(abs(e) < 0.30 for e in gaps.values())
    committed = load("h200-validation.json")["summary"]["microbenchmarks"]
    assert committed["median_abs_err"] == pytest.approx(statistics.median(rest))


@pytest.mark.xfail(strict=True, reason=(
    "the simulator's loopback table (2026-12-01) picks the latency regime for W=8 AllGather "
    "and AllToAll at 32-512 KiB (large pushes) where h200-diagnose.json measured latency, with "
    "the hand table's knobs of the time, 1.2-3.3x slower than direct; 114 of 139 comparable "
    "cases agree within 5%, 25 do not (15 pick throughput, not measured there). "
    "benchmarks/gpu_codesign.py measures the table's own candidates and settles it"))
def test_loopback_codesign_table_against_the_committed_crossover():
    """h200-diagnose.json measured each of the seven at W = 2, 4, 8 in the latency and the
    direct regime (the hand table's knobs of the time) across the crossover. The loopback
    codesign table, made on the simulator, picks its regime per band; where it picks one
    of those two, it picks the measured faster one, or one measured at most 15% slower
    (the simulator's largest validation error) in a few cases, counted here."""
    from purlin.snac.tables import lookup
    raw = load("h200-diagnose.json")["raw"]["crossover"]
    table = json.loads((ROOT / "topologies" / "codesign" / "h200-loopback.json").read_text())
    agree, worse, other = 0, [], 0
    for key, row in raw.items():
        parts = key.split("/")
        name, per_rank = parts[0], int(parts[-1])
        w = int(parts[1][1:]) if len(parts) == 3 else 8
        c = library.from_size(name, w, per_rank * w if name.startswith("all_gather") else per_rank,
                              "fp32", seed=1)
        nbytes = max(max(c.input.nbytes(r), c.output.nbytes(r)) for r in range(w))
        regime = lookup(table, c.name, "h200-loopback", w, nbytes)[0].regime
        times = {"latency": row["latency"]["median_us"],
                 "direct": min(v["median_us"] for k, v in row.items() if k.startswith("direct"))}
        if regime not in times:
            other += 1
            continue
        ratio = times[regime] / min(times.values())
        if ratio <= 1.05:
            agree += 1
        else:
            worse.append((key, regime, round(ratio, 3)))
    assert agree + len(worse) + other == len(raw) >= 150
    assert all(r <= MAX_SLOWER for *_, r in worse), worse
    assert len(worse) <= MAX_WORSE, worse


def test_two_gpu_run_and_its_prediction_reproduce():
    """h200x2-collectives.json is a run of the hand table's defaults of the time (the box
    is a what-if of hgx-h200-8, so today it gets the generic rules; its policies are
    recorded per row): every point correct; h200x2-prediction.json is what the simulator
    says for those schedules."""
    from purlin.snac import Policy
    runs = load("h200x2-collectives.json")
    pred = load("h200x2-prediction.json")
    topo = load_topology("hgx-h200-8", gpus=2)
    assert topo.name == pred["topology"] == "hgx-h200-2of8"
    assert runs["summary"]["all_correct"] and all(r["wrong"] == 0 for r in runs["rows"])
    assert len(runs["rows"]) == len(pred["rows"]) == 99
    # the run predates the kernel's cheaper start (2026-12-05): predicted with the
    # calibration of the kernel it ran, kept beside it
    assert pred["calibration_file"] == "h200-calibration-2026-12-04.json"
    cal = str(RESULTS / pred["calibration_file"])
    for r, p in list(zip(runs["rows"], pred["rows"]))[::7]:
        c = library.from_size(r["collective"], 2, r["size"], "fp32")
        pol = Policy.from_dict(r["policy"])
        s = plan(c, topo, pol, cta_budget=pol.put_ctas + pol.consumer_ctas)
        assert simulate(s, topo, cal, record=False).time_us == pytest.approx(p["predicted_us"], rel=1e-9)
    errs = [abs(p["error"]) for p in pred["rows"]]
    assert pred["summary"]["median_abs_err"] == pytest.approx(statistics.median(errs))


def test_traffic_mix_summary_is_what_its_samples_say():
    """h100-traffic-mix.json: each mix's ratio is its best grid's median over memcpy's best
    size (both bytes read plus written per second), and each collective of the seven is
    matched to the mix of its least traffic (an AllGather at W=8 writes each byte read 8
    times, a ReduceScatter reads 8 per byte written, the rest one per one)."""
    doc = load("h100-traffic-mix.json")
    s, raw = doc["summary"], doc["raw"]
    memcpy = max(2 * int(size) / statistics.median(v) / 1e3 for size, v in raw["memcpy_us"].items())
    assert s["memcpy_gbps"] == pytest.approx(memcpy, rel=1e-12)
    for name, by_grid in raw["raw_us"].items():
        t = min(statistics.median(v) for v in by_grid.values())
        assert s["best"][name]["vs_memcpy"] == pytest.approx(raw["bytes"][name] / t / 1e3 / memcpy, rel=1e-12)
    per = s["buffer_bytes"]
    assert raw["bytes"]["bcast_8_cs"] == 9 * per and raw["bytes"]["sum_8"] == 9 * per and raw["bytes"]["write"] == per
    mix = s["collectives_w8_64MiB"]
    assert {k: round(v["reads_per_write"], 3) for k, v in mix.items()} == {
        "all_reduce": 1.0, "all_gather": 0.125, "reduce_scatter": 8.0, "all_to_all": 1.0,
        "all_gather_v": 0.125, "reduce_scatter_v": 8.0, "all_to_all_v": 1.0}
    assert [mix[k]["kernel"] for k in ("all_gather", "reduce_scatter", "all_to_all")] == ["bcast_8_cs", "sum_8", "bcast_1_cs"]
    for v in mix.values():
        assert v["kernel_vs_memcpy"] == s["best"][v["kernel"]]["vs_memcpy"]


def test_codesign_rerank_is_what_todays_simulator_picks_among_the_measured_candidates():
    """h200-codesign.json's ``rerank`` (gpu_codesign.py --rerank): per case, today's
    simulator's time for each measured candidate and the one the search's rule would
    choose (within ``merge`` of the fastest, the least loaded busiest CTA); the summary is
    what those rows say. A sample is simulated and planned again: a model or planner
    change must re-run it."""
    from purlin.sim.codesign import Search
    from purlin.sim.codesign_bands import busiest_nbytes, preferred
    doc = load("h200-codesign.json")
    rr = doc["rerank"]
    rows = rr["by_case"]
    cases = {f"{c['collective']}/W{c['world']}/band{c['band']}": c for c in doc["cases"]}
    ratios = []
    for key, row in rows.items():
        pred, meas, busy = row["predicted_us"], row["measured_us"], row["busiest_nbytes"]
        assert set(pred) == set(meas) == set(busy)
        policies = {c["label"]: c["policy"] for c in cases[key]["candidates"]}
        chosen = preferred([{"time_us": pred[k], "busiest_nbytes": busy[k], "policy": policies[k], "label": k}
                            for k in pred], Search().merge)
        assert row["choice"] == chosen["label"]
        assert row["choice_over_best"] == pytest.approx(meas[row["choice"]] / min(meas.values()), rel=1e-12)
        ratios.append(row["choice_over_best"])
    assert rr["cases"] == len(rows) == 88 and rr["schedules"] == sum(len(r["predicted_us"]) for r in rows.values())
    assert rr["within_5pct_share"] == pytest.approx(sum(r <= 1.05 for r in ratios) / len(ratios))
    assert rr["geomean_choice_over_best"] == pytest.approx(statistics.geometric_mean(ratios))
    # --baseline: the earlier code's choices among the same measured candidates, and its summary
    base = rr["baseline"]
    assert base["commit"] == "5e223c1" and base["choices"].keys() == rows.keys()
    old = [rows[k]["measured_us"][c] / min(rows[k]["measured_us"].values()) for k, c in base["choices"].items()]
    assert base["within_5pct_share"] == pytest.approx(sum(r <= 1.05 for r in old) / len(old))
    assert base["geomean_choice_over_best"] == pytest.approx(statistics.geometric_mean(old))
    assert base["within_5pct_share_now_over_baseline"] == pytest.approx(rr["within_5pct_share"] / base["within_5pct_share"])
    for key in sorted(rows)[::13]:
        case = cases[key]
        topo = load_topology("h200-loopback", world=case["world"])
        c = library.from_size(case["collective"], case["world"], case["size"], "fp32")
        for cand in case["candidates"]:
            if cand["label"] in rows[key]["predicted_us"]:
                s = plan(c, topo, cand["policy"], cta_budget=case["cta_budget"], check=False)
                assert simulate(s, topo, record=False).time_us == pytest.approx(
                    rows[key]["predicted_us"][cand["label"]], rel=1e-9), (key, cand["label"])
                assert busiest_nbytes(s) == rows[key]["busiest_nbytes"][cand["label"]]


@pytest.mark.parametrize("name", ["h200-codesign.json", "h100-codesign.json", "h100-codesign-repeat.json",
                                  "h100-codesign-misses.json"])
def test_codesign_confirmation_summary_is_what_its_samples_say(name):
    """A codesign confirmation (gpu_codesign.py on the GPU it names): each candidate's
    median is the median of its samples, and the share of picks within 5% of the measured
    best and the geometric mean of pick over best are what those medians say."""
    doc = load(name)
    assert name.split("-")[0].upper() in doc["machine"]["gpu"]
    ratios, base = [], []
    for case in doc["cases"]:
        ok = [c for c in case["candidates"] if "median_us" in c and c["wrong"] in (0, -1)]
        for c in ok:
            assert c["median_us"] == statistics.median(c["samples_us"])
        pick = next(c for c in ok if c["label"] == "pick")
        best = min(c["median_us"] for c in ok)
        ratios.append(pick["median_us"] / best)
        if "baseline" in case:   # --baseline-table: that table's policy, in the same run
            base.append(next(c for c in ok if c["label"] == case["baseline"])["median_us"] / best)
    s = doc["summary"]
    assert s["cases"] == len(ratios) and s["wrong_runs"] == 0
    assert s["within_5pct_share"] == pytest.approx(sum(r <= 1.05 for r in ratios) / len(ratios))
    assert s["geomean_pick_over_best"] == pytest.approx(statistics.geometric_mean(ratios))
    if base:
        b = s["baseline"]
        assert b["cases"] == len(base) == len(ratios)
        assert b["within_5pct_share"] == pytest.approx(sum(r <= 1.05 for r in base) / len(base))
        assert b["geomean_pick_over_best"] == pytest.approx(statistics.geometric_mean(base))


def test_h100_microbenchmark_check_is_what_todays_simulator_says():
    """h100-microbench-check.json (microbench_check.py --gpu h100): every case's error is
    today's simulator on the H100's own calibration against the committed raw runs, and
    the per-family summary is what those errors say. A model change must re-run it."""
    from purlin.sim.validation import HELD_OUT_FAMILIES, microbenchmark_errors
    doc = load("h100-microbench-check.json")
    ex = load(doc["raw"])
    assert doc["raw_date"] == ex["date"] and doc["gpu"] == "h100"
    now = {f"{name} {dict(p)}": e for (name, p), e in microbenchmark_errors(ex, "h100").items()}
    assert now.keys() == doc["errors"].keys()
    for key, e in now.items():
        assert doc["errors"][key] == pytest.approx(e, rel=1e-9, abs=1e-12), key
    for name, fam in doc["summary"]["families"].items():
        errs = [abs(e) for key, e in now.items() if key.split(" ", 1)[0] == name]
        assert fam["cases"] == len(errs) and fam["max_abs_err"] == pytest.approx(max(errs))
        assert fam["median_abs_err"] == pytest.approx(statistics.median(errs))
        assert fam["held_out"] == (name in HELD_OUT_FAMILIES)
    assert doc["summary"]["families"]["put_wave"]["cases"] == 16


def test_traced_misses_explain_is_what_the_traces_say():
    """h100-codesign-misses.json (--only-misses --trace 5, then --explain): a case's loss
    lies in the kernel body when the pick's median traced span exceeds the best's by more
    than 0.1 us, and each span is the last record's end of a traced call."""
    doc = load("h100-codesign-misses.json")
    ex = doc["explain"]
    inside = 0
    for case in doc["cases"]:
        live = {c["label"]: c for c in case["candidates"] if "trace_spans_us" in c}
        for c in live.values():
            assert max(r[5] for r in c["trace"]) in c["trace_spans_us"]
        best = min(live.values(), key=lambda c: c["median_us"])
        row = ex["cases"][f"{case['collective']}/W{case['world']}/band{case['band']}"]
        span = {k: statistics.median(live[k]["trace_spans_us"]) for k in ("pick", best["label"])}
        assert row["pick"]["traced_span_us"] == span["pick"] and row["best"]["traced_span_us"] == span[best["label"]]
        assert row["loss_in_traced_body"] == (span["pick"] - span[best["label"]] > 0.1)
        inside += row["loss_in_traced_body"]
    assert ex["in_body"] == inside == 11 and ex["outside_one_traced_call"] == len(doc["cases"]) - inside == 4
    # the simulator's side, kept beside the traces, is today's timeline of the same schedules
    case = next(c for c in doc["cases"] if c["collective"] == "all_to_all" and c["world"] == 8)
    row = ex["cases"]["all_to_all/W8/band0"]["pick"]
    assert max(r[5] for r in row["simulated_records"]) == pytest.approx(row["simulated_span_us"], rel=1e-12)
    topo = load_topology(case["loopback"], world=8)
    c = library.from_size("all_to_all", 8, case["size"], "fp32")
    s = plan(c, topo, case["candidates"][0]["policy"], cta_budget=case["cta_budget"], check=False)
    recs = simulate(s, topo, record=True).records
    t0 = min(r[4] for r in recs)
    assert len(recs) == len(row["simulated_records"])
    for r, kept in zip(recs, row["simulated_records"]):
        assert [*r[:4], r[6]] == [*kept[:4], kept[6]]
        assert (r[4] - t0, r[5] - t0) == pytest.approx((kept[4], kept[5]), rel=1e-9, abs=1e-12)



def _spans(records: list) -> tuple[float, float]:
    """(a run of puts from its first start to its last end, the whole timeline), as
    trace_microbench.py --report reads a timeline."""
    puts = [r for r in records if r[3] == "PutPackets"]
    put_span = max((r[5] for r in puts), default=0.0) - min((r[4] for r in puts), default=0.0)
    return put_span, max(r[5] for r in records) - min(r[4] for r in records)


def test_microbench_traces_report_is_what_its_records_say():
    """h100-microbench-traces.json (trace_microbench.py on the H100, then --report): each
    case's traced spans are what its median run's records say, its simulated ones what
    today's simulator gives on the H100's calibration, and the summary per family the
    median of simulated minus traced."""
    from purlin.sim import microbench as mb
    doc = load("h100-microbench-traces.json")
    rep = doc["report"]
    assert rep["calibration"] == "h100" and len(rep["cases"]) == len(doc["raw"]) == 94
    raw = {(r["case"], tuple(sorted((k, v) for k, v in r.items() if k not in ("case", "spans_us", "records")))): r
           for r in doc["raw"]}
    fam: dict = {}
    for row in rep["cases"]:
        params = tuple(sorted((k, v) for k, v in row.items() if not isinstance(v, dict) and k != "case"))
        got = raw[(row["case"], params)]
        put_span, span = _spans(got["records"])
        assert len(got["spans_us"]) == 9 and span == pytest.approx(statistics.median(got["spans_us"]), abs=1e-9)
        assert (row["put_span_us"]["gpu"], row["span_us"]["gpu"]) == pytest.approx((put_span, span), abs=1e-9)
        f = fam.setdefault(row["case"], {k: [] for k in ("put_span_us", "reader_end_after_put_us", "span_us")})
        for key in f:
            if row[key]["gpu"] is not None and row[key]["sim"] is not None:
                f[key].append(row[key]["sim"] - row[key]["gpu"])
    for name, f in fam.items():
        for key, v in f.items():
            got = rep["summary"][name][f"{key}_sim_minus_gpu_median"]
            assert got == (pytest.approx(statistics.median(v), abs=1e-9) if v else None), (name, key)
    # the run of eight 2 KiB puts: one batch, one record on the GPU (0 to 1.92 us), the
    # reader's copy to 2.75; simulated again, the report's spans
    key = ("put_wave", (("last", True), ("m", 8), ("n", 2048)))
    assert _spans(raw[key]["records"]) == pytest.approx((1.92, 2.752))
    row = next(r for r in rep["cases"] if r["case"] == "put_wave" and r["m"] == 8 and r["n"] == 2048 and r["last"])
    s = next(s for n, p, s in mb.CASES if n == "put_wave" and p == {"m": 8, "n": 2048, "last": True})
    sim = _spans(simulate(s, load_topology("h100-loopback", world=1), "h100", record=True).records)
    assert sim == pytest.approx((row["put_span_us"]["sim"], row["span_us"]["sim"]), rel=1e-12)
