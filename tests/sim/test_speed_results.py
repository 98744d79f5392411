"""The committed simulator-speed results say what their points say (no test times anything:
these check that benchmarks/results/sim_speed_*.json and sim_scale.json, written by
benchmarks/sim_speed.py and sim_scale.py, are consistent with their own raw rows)."""

import json
import math
from pathlib import Path

import pytest

from tests.helpers import load_result


_load = load_result


SPEED_FILES = ("sim_speed_racks.json", "sim_speed_nvl72_2core.json", "sim_speed_memory.json", "sim_speed_nvl144.json",
               "sim_speed_nvl576.json", "sim_speed_nvl576_solo.json", "sim_speed_verify_memory.json")


@pytest.mark.parametrize("name", SPEED_FILES)
def test_sim_speed_summary_counts_its_points(name):
    doc = _load(name)
    assert {"machine", "date", "command", "summary", "points"} <= set(doc)
    for topo, s in doc["summary"].items():
        if not isinstance(s, dict) or "target_s" not in s:
            continue
        rows = [r for r in doc["points"] if r["topology"] == topo]
        undefined = {(c, n) for c, n, _ in s.get("undefined", [])}
        for r in rows if "undefined" in s else ():   # files since 2026-12-05: only a size the
            # library refuses (SpecError) is left out of the count, and it is named
            assert ((r["collective"], r["size"]) in undefined) == str(r.get("error", "")).startswith(
                "purlin.errors.SpecError")
        rows = [r for r in rows if (r["collective"], r["size"]) not in undefined]
        assert s["points"] == len(rows)
        assert s["within_target"] == sum(r["within_target"] for r in rows)
        done = [r for r in rows if "error" not in r]
        assert s["curve_total_s"] == pytest.approx(sum(r["total_s"] for r in done))
        for r in done:
            assert r["total_s"] == pytest.approx(r["plan_s"] + r["verify_s"] + r["sim_s"])
            assert r["within_target"] == (r["total_s"] <= r["target_s"] and r["rss_peak_mb"] <= 2048.0)


def _model_change_bounds() -> tuple[float, float]:
    """How far the model changes recorded in the reference set moved any of its 225
    predictions, compounded (new over previous): a baseline engine from before them may
    differ by that much on one schedule, and no more."""
    ref = json.loads((Path(__file__).resolve().parents[1] / "data" / "sim-reference.json").read_text())
    lo = math.prod(u["min_ratio"] for u in ref.get("updates", []))
    hi = math.prod(u["max_ratio"] for u in ref.get("updates", []))
    return lo, hi


@pytest.mark.parametrize("name", SPEED_FILES)
def test_sim_speed_baseline_gives_the_same_answers(name):
    """On one schedule the baseline engine and this one agree within 0.5%, or, where a
    recorded model change came between them, within what it moved the reference set."""
    doc = _load(name)
    lo, hi = _model_change_bounds()
    checked = 0
    for b in doc["baseline"]:
        same = b.get("new_same_policy", b["new"])   # older files: both engines ran one default
        if "error" in b["old"] or "error" in same:
            continue
        ratio = same["time_us"] / b["old"]["time_us"]
        assert b["same_time_us"] == (abs(b["old"]["time_us"] / same["time_us"] - 1) < 5e-3)
        assert b["same_time_us"] or lo * (1 - 5e-3) <= ratio <= hi * (1 + 5e-3), (b["collective"], b["size"], ratio)
        assert b["speedup"]["total"] == pytest.approx(b["old"]["total_s"] / same["total_s"])
        checked += 1
    assert checked >= 1 or "--no-old" in doc["command"]   # a run without the baseline says so


def test_sim_scale_fits_and_answers():
    doc = _load("sim_scale.json")
    rows = doc["rows"]
    assert {r["curve"] for r in rows} == {"ranks", "size"}
    for r in rows:   # the engines' answers, compared on one schedule
        if "old" in r and "error" not in r["old"] and "error" not in r["new"]:
            ours = r["new_on_old_policy"] if r["default_changed"] else r["new"]
            if r["default_changed"]:   # ours ran again with the baseline's policy
                assert {**r["old"]["policy"], "fence": "rank"} != {"fence": "rank", **r["new"]["policy"]}
                assert ours["policy"] == {**r["old"]["policy"], **{k: v for k, v in ours["policy"].items()
                                                                   if k not in r["old"]["policy"]}}
            assert r["same_time_us"] == (abs(r["old"]["time_us"] / ours["time_us"] - 1) < 5e-3)
            assert r["speedup"]["total"] == pytest.approx(r["old"]["total_s"] / r["new"]["total_s"])
    compared = [r for r in rows if "same_time_us" in r]
    assert doc["summary"]["compared"] == len(compared) >= 1
    assert doc["summary"]["same_answers"] == all(r["same_time_us"] for r in compared)
    assert doc["summary"]["same_answers"], doc["summary"]["different_answers"]
    for curve in ("ranks", "size"):
        growth = doc["summary"][f"growth_{curve}"]
        assert set(growth) == {"plan", "verify", "sim"}


@pytest.mark.parametrize("name", ("sim_symmetry.json", "sim_symmetry_racks.json"))
def test_sim_symmetry_runs_one_schedule_both_ways(name):
    doc = _load(name)
    rows = doc["points"]
    for topo, s in doc["summary"].items():
        if not isinstance(s, dict):
            continue
        rs = [r for r in rows if r["topology"] == topo]
        assert s["points"] == len(rs)
        periodic = [r for r in rs if "sim_speedup" in r and r["symmetric"]["period"] < r["symmetric"]["world"]]
        assert [tuple(p) for p in s["periodic_points"]] == [(r["collective"], r["size"], r["symmetric"]["period"])
                                                            for r in periodic]
        for r in rs:   # the baseline simulated every rank; both ran the same schedule
            assert r["full"]["period"] == r["full"]["world"]
            if "sim_speedup" in r:
                assert r["same_time_us"] and r["full"]["time_us"] == r["symmetric"]["time_us"]
                assert r["sim_speedup"] == pytest.approx(r["full"]["sim_s"] / r["symmetric"]["sim_s"])
        assert s["all_same_time_us"]


@pytest.mark.parametrize("name", ("sim_ab.json", "sim_ab_gc.json"))
def test_sim_ab_compares_one_schedule_with_equal_answers(name):
    """benchmarks/sim_ab.py: the summary is its rows', and a speed-up changed no answer."""
    doc = _load(name)
    rows = [r for r in doc["rows"] if "error" not in r]
    s = doc["summary"]
    assert s["compared"] == len(rows) >= 1 and s["cases"] == len(doc["rows"])
    for r in rows:
        assert len(r["before"]) == len(r["after"]) == s["repeat"]
        assert all(a["policy"] == r["before"][0]["policy"] for a in r["after"])   # one schedule
        assert r["time_rel_diff"] == max(abs(b["time_us"] / a["time_us"] - 1)
                                         for b, a in zip(r["before"], r["after"]))
        assert r["time_rel_diff"] == 0.0
        assert r["total_ratio"] == pytest.approx(min(b["total_s"] for b in r["before"])
                                                 / min(a["total_s"] for a in r["after"]))
    assert s["total_ratio_geomean"] == pytest.approx(math.exp(sum(math.log(r["total_ratio"]) for r in rows)
                                                              / len(rows)))
    assert s["max_time_rel_diff"] == 0.0
