"""Ties the simulator cannot resolve go to the schedule whose busiest CTA stores the
fewest bytes (``codesign_bands.preferred``), in the search's bands and in the GPU
confirmation's rerank alike."""
import pytest

from purlin.sim import codesign as cd
from purlin.sim.codesign_bands import _grid_picks, busiest_nbytes, preferred
from purlin.snac import plan
from purlin.spec import library
from purlin.topology import load_topology


@pytest.mark.parametrize("chunk, put_ctas, expected", [
    (4096, 16, 4096),    # 12 pushes of 4 KiB (3 peers x 4 chunks) over 16 put CTAs: one each
    (8192, 16, 8192),    # 6 pushes of 8 KiB: one each
    (4096, 8, 8192),     # 12 pushes of 4 KiB over 8 put CTAs: two on some
])
def test_busiest_counts_the_bytes_of_the_most_loaded_cta(chunk, put_ctas, expected):
    # AllGather of 64 KiB on 4 loopback ranks: each rank's 16 KiB block to 3 peers
    topo = load_topology("h200-loopback", world=4)
    c = library.from_size("all_gather", 4, 64 << 10, "fp32")
    policy = {"regime": "latency", "algorithm": "one_shot", "chunk_nbytes": chunk,
              "put_ctas": put_ctas, "consumer_ctas": 16}
    assert busiest_nbytes(plan(c, topo, policy, cta_budget=33)) == expected


def _row(name, t, busiest):
    return {"policy": {"regime": name}, "time_us": t, "busiest_nbytes": busiest}


def test_within_merge_the_least_loaded_busiest_cta_wins():
    rows = [_row("a", 10.0, 8192), _row("b", 10.15, 4096), _row("c", 10.5, 1024)]
    assert preferred(rows, 0.02)["policy"]["regime"] == "b"    # c is 5% off: not a tie
    assert preferred(rows, 0.0)["policy"]["regime"] == "a"     # no tolerance: the fastest
    assert preferred(rows, 0.06)["policy"]["regime"] == "c"
    same = [_row("a", 10.1, 4096), _row("b", 10.0, 4096)]
    assert preferred(same, 0.02)["policy"]["regime"] == "b"    # equal load: the faster


def test_a_band_takes_the_least_loaded_policy_that_ties_at_every_size():
    def rows(*cands):
        return {(name,): {"policy": {"regime": name}, "time_us": t, "busiest_nbytes": b,
                          "programs_digest": name + str(t)} for name, t, b in cands}
    results = {1024: rows(("a", 5.0, 4096), ("b", 5.05, 1024), ("c", 5.06, 512)),
               4096: rows(("a", 6.0, 16384), ("b", 6.1, 4096), ("c", 6.5, 2048))}
    picks = _grid_picks(results, [1024, 4096], 0.02)
    # c ties at 1 KiB only, so the run of both sizes shares a and b; b is less loaded
    assert [p["regime"] for p in picks] == ["b", "b"]
    assert [p["regime"] for p in _grid_picks(results, [1024, 4096], 0.0)] == ["a", "a"]


def test_the_search_records_its_tie_rule_and_tolerance():
    spec = cd.Search(sizes=(1024,), collectives=("all_gather",), budget_s=1e-9)
    t = cd.search("hgx-h200-8", spec, workers=1, progress=False, lines=False)
    assert t["search"]["merge"] == 0.02 and t["search"]["tie"] == "busiest_nbytes"
    pt = t["worlds"]["8"]["collectives"]["all_gather"]["points"][0]
    assert pt["pick"]["time_us"] <= 1.02 * pt["best_us"]
