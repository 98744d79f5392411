"""The launch's grid and per-CTA terms are fit over the simulator, not over one CTA's time.

c CTAs copying 4 KiB each also load memory with c copies, which the simulator charges;
``fit_launch_ctas`` takes what is left over it as grid + (c - 1) per CTA."""
import json
from pathlib import Path

import pytest

from purlin.sim import fit, microbench as mb
from purlin.sim.calibration import parse_calibration
from purlin.sim.engine import simulate
from purlin.topology import load_topology

CAL = Path(__file__).resolve().parents[2] / "topologies" / "calibration" / "h200.json"


def _runs(doc: dict, grid: float, per: float) -> dict:
    """Executor results whose c-CTA copies take the simulator's time (both terms at 0)
    plus ``grid + (c - 1) * per``."""
    params = json.loads(json.dumps(doc["parameters"]))
    params["launch_grid_us"]["value"] = params["launch_per_cta_us"]["value"] = 0.0
    cal = parse_calibration({**doc, "parameters": params}, "test")
    topo = load_topology("h200-loopback", world=1)
    rows = []
    for name, p, s in mb.CASES:
        if name == "ctas" and p["n"] <= 4096:
            t = simulate(s, topo, cal, record=False).time_us + (grid + (p["c"] - 1) * per if p["c"] > 1 else 0.0)
            rows.append({"case": name, **p, "us_per_call": [t, t, t]})
    return {"raw": rows}


@pytest.mark.parametrize("grid, per", [(0.4, 0.0), (0.3, 0.002), (0.0, 0.0005)])
def test_fit_recovers_what_the_simulator_leaves(grid, per):
    doc = json.loads(CAL.read_text())
    got = fit.fit_launch_ctas(_runs(doc, grid, per), doc)
    assert got["launch_grid_us"][0] == pytest.approx(grid, abs=1e-9)
    assert got["launch_per_cta_us"][0] == pytest.approx(per, abs=1e-12)
    assert "c = 2, 16, 128" in got["launch_per_cta_us"][1]
    assert "less the simulator without launch_grid_us and launch_per_cta_us" in got["launch_grid_us"][1]


def test_the_terms_do_not_go_below_zero_and_need_two_runs():
    doc = json.loads(CAL.read_text())
    got = fit.fit_launch_ctas(_runs(doc, -0.1, -0.001), doc)   # faster than the simulator: no launch cost
    assert got["launch_grid_us"][0] == 0.0 and got["launch_per_cta_us"][0] == 0.0
    one = {"raw": _runs(doc, 0.4, 0.001)["raw"][:1]}
    assert fit.fit_launch_ctas(one, doc) is None
    assert fit.fit_launch_ctas({"raw": []}, doc) is None
