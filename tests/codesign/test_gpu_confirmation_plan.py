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
