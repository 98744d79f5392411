"""Every shipped topology has a codesign table, made by ``purlin codesign``, that is
fresh: made with today's topology file, calibration file and planner. A table goes stale
when any of them changes; then these tests fail and say which, and the fix is to run the
command the table records."""
import hashlib

import pytest

from purlin.sim.calibration import load_calibration
from purlin.sim.codesign import fingerprint
from purlin.snac import plan
from purlin.snac.planner import resolve
from purlin.snac.serialize import programs_digest
from purlin.spec import library
from purlin.topology import topology_digest
from tests.codesign.conftest import SHIPPED, cases, table_of


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_topology_has_a_table_of_every_collective(name):
    t = table_of(name)
    assert t["topology"] == name and t["command"].startswith(f"purlin codesign {name}")
    assert t["date"][:2] == "20" and t["search"]["points"] > 0 and t["search"]["wall_s"] > 0
    worlds = {int(w) for w in t["worlds"]}
    topo = next(c[1] for c in cases(t))
    assert worlds == ({2, 4, 8} if topo.loopback else {topo.world})
    for w, entry in t["worlds"].items():
        assert set(entry["collectives"]) == set(library.PURLIN_SEVEN), w
        for coll in entry["collectives"].values():
            lows = [b["min_nbytes"] for b in coll["bands"]]
            highs = [b["max_nbytes"] for b in coll["bands"]]
            assert lows[0] == 0 and lows[1:] == highs[:-1] and highs == sorted(set(highs))


@pytest.mark.parametrize("name", SHIPPED)
def test_table_is_fresh_against_the_topology_and_calibration_files(name):
    t = table_of(name)
    for w, topo, *_ in cases(t):
        assert t["worlds"][str(w)]["topology_digest"] == topology_digest(topo), (
            f"{name}.yaml changed since the table was made: run `{t['command']}`")
    cal = load_calibration(t["calibration"]["gpu_kind"])
    with open(cal.path, "rb") as f:
        now = hashlib.sha256(f.read()).hexdigest()[:16]
    assert t["calibration"]["digest"] == now, (
        f"calibration/{cal.gpu_kind}.json changed since the table was made: run `{t['command']}`")


@pytest.mark.parametrize("name", SHIPPED)
def test_table_is_fresh_against_the_planner(name):
    """The planner fingerprint: each band's pick, re-planned at its probe size, is the
    schedule the search simulated (same programs digest) and verifies (on a box); and planning with
    no policy takes that band of that table."""
    t = table_of(name)
    assert t["planner"]["fingerprint"] == fingerprint(t)
    for w, topo, cname, entry, coll in cases(t):
        for k, band in enumerate(coll["bands"]):
            if band["probe"]["size"] < library.smallest_size(cname, w, 16, 0):
                continue   # a size whose blocks are empty: from_size refuses it, no plan asks
            c = library.from_size(cname, w, band["probe"]["size"], "fp32")
            # verified on a box; at rack scale (10^5-10^6 instructions a plan) the digest
            # alone says the planner is unchanged, and the verifier's own tests cover it
            s = plan(c, topo, band["policy"], cta_budget=entry["cta_budget"], check=w <= 16)
            assert programs_digest(s) == band["probe"]["programs_digest"], (
                f"{name} W={w} {cname} band {k}: the planner plans this pick differently now; "
                f"run `{t['command']}`")
            pol, src = resolve(c, topo, None, entry["cta_budget"])
            assert src["source"] == "table" and src["band_index"] == k, (cname, w, k, src)
            assert src["table"] == f"topologies/codesign/{name}.json"
