"""The simulator still gives the answers it gave before the rack-scale engine work.

``tests/data/sim-reference.json`` holds 225 predictions (shipped topologies x the seven
collectives x sizes x policies) chosen by commit 740021e with
``benchmarks/sim_reference.py``. Each is re-planned with its recorded, fully resolved
policy; the programs must be the same ones (a planner change is not an engine change)
and the predicted time within 0.5%. A model change that moves one updates this file in
its own commit and says why (``sim_reference.py --update WHY``; the file's ``updates``
list them, each point keeps its ``previous_us``).
"""
import json
from pathlib import Path

import pytest

from purlin.sim import simulate
from purlin.snac import plan
from purlin.snac.serialize import programs_digest
from purlin.spec import library
from purlin.topology import load_topology

DATA = json.loads((Path(__file__).resolve().parents[1] / "data" / "sim-reference.json").read_text())
POINTS = DATA["points"]


def test_the_set_is_broad():
    assert len(POINTS) >= 100
    assert len({p["topology"] for p in POINTS}) >= 9
    assert {p["collective"] for p in POINTS} == set(library.PURLIN_SEVEN)
    assert {p["policy"]["regime"] for p in POINTS} == {"latency", "throughput", "direct"}


@pytest.mark.parametrize("p", POINTS, ids=lambda p: f"{p['topology']}-{p['collective']}-{p['size']}-"
                         f"{'-'.join(f'{k}={v}' for k, v in (p['requested'] or {}).items()) or 'default'}")
def test_prediction_reproduces(p):
    topo = load_topology(p["topology"], world=p["world"])
    c = library.from_size(p["collective"], topo.world, p["size"])
    s = plan(c, topo, p["policy"], cta_budget=p["cta_budget"], check=False)
    assert programs_digest(s) == p["programs_digest"], "the planner changed these programs"
    assert simulate(s, topo, record=False).time_us == pytest.approx(p["time_us"], rel=5e-3)
