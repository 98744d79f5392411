"""``benchmarks/gpu_codesign.py --gpu G --dry-run`` plans, on the CPU, every candidate the
GPU confirmation of G's loopback table would run, each the exact schedule the table
predicted (same programs digest), on that GPU's own loopback topology."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("gpu", ["h200", "h100"])
def test_dry_run_plans_the_tables_own_candidates(gpu):
    table = json.loads((ROOT / "topologies" / "codesign" / f"{gpu}-loopback.json").read_text())
    names = ["all_reduce", "reduce_scatter_v"]
    colls = table["worlds"]["2"]["collectives"]
    cases = sum(len(colls[n]["bands"]) for n in names)
    schedules = 0
    for n in names:
        for k in range(len(colls[n]["bands"])):
            pts = [p for p in colls[n]["points"] if p["band"] == k]
            grid = [p for p in pts if p["grid"]] or pts
            p = grid[len(grid) // 2]
            schedules += 1 + min(5, len(p["rivals"]))
    out = subprocess.run([sys.executable, "benchmarks/gpu_codesign.py", "--gpu", gpu, "--dry-run", "--workers", "1",
                          "--worlds", "2", "--collectives", ",".join(names)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    m = re.search(r"# (\d+) cases, (\d+) schedules, every digest as the table predicted", out.stdout)
    assert m and (int(m[1]), int(m[2])) == (cases, schedules), out.stdout
    assert table["topology"] == f"{gpu}-loopback" and table["calibration"]["gpu_kind"] == gpu


def test_a_gpu_without_a_loopback_table_is_refused_by_name():
    out = subprocess.run([sys.executable, "benchmarks/gpu_codesign.py", "--gpu", "tpu", "--dry-run"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "--gpu tpu: no loopback table topologies/codesign/tpu-loopback.json" in out.stderr


def _dry_run(*extra):
    return subprocess.run([sys.executable, "benchmarks/gpu_codesign.py", "--gpu", "h200", "--dry-run", "--workers", "1",
                           "--worlds", "2", "--collectives", "all_reduce", *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_a_baseline_table_adds_its_policy_where_the_table_has_none(tmp_path):
    table = json.loads((ROOT / "topologies" / "codesign" / "h200-loopback.json").read_text())
    bands = table["worlds"]["2"]["collectives"]["all_reduce"]["bands"]
    same = tmp_path / "same.json"
    same.write_text(json.dumps(table))
    out = _dry_run("--baseline-table", str(same))
    assert out.returncode == 0, out.stderr
    assert f"a candidate of the table in {len(bands)} cases, added in 0" in out.stdout
    # the band of the smallest size runs a policy nobody searched there: one more schedule
    other = json.loads(json.dumps(table))
    first = other["worlds"]["2"]["collectives"]["all_reduce"]["bands"][0]
    first["policy"] = {**first["policy"], "put_ctas": 3, "consumer_ctas": 3, "push_nbytes": None}
    (tmp_path / "other.json").write_text(json.dumps(other))
    base = _dry_run()
    got = _dry_run("--baseline-table", str(tmp_path / "other.json"))
    assert got.returncode == 0, got.stderr
    n = [int(re.search(r"(\d+) schedules", o.stdout)[1]) for o in (base, got)]
    assert n[1] == n[0] + 1
    assert f"a candidate of the table in {len(bands) - 1} cases, added in 1" in got.stdout


def test_a_baseline_table_of_another_topology_is_refused_by_name():
    out = _dry_run("--baseline-table", "topologies/codesign/h100-loopback.json")
    assert out.returncode == 2
    assert ("--baseline-table topologies/codesign/h100-loopback.json: a table of h100-loopback, "
            "not h200-loopback") in out.stderr


def test_a_baseline_file_that_is_no_codesign_table_is_refused_by_name(tmp_path):
    bad = tmp_path / "list.json"
    bad.write_text("[1, 2]")
    out = _dry_run("--baseline-table", str(bad))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"--baseline-table {bad}: not a codesign table of schema_version 1" in out.stderr
