"""predict, sweeps on executors, the best-policy table, and the plots."""
import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from purlin.sim import best_policy_table, plot_bandwidth, plot_timeline, predict, simulate, sweep
from purlin.sim.predict import ROW_KEYS, format_table, parse_sizes
from purlin.snac import Policy, plan
from purlin.spec import library
from purlin.topology import minimal

SIZES = [1 << 10, 1 << 14, 1 << 18]
POLICIES = [None, {"regime": "latency"}, Policy(regime="throughput")]


def test_predict_on_a_process_pool_gives_the_same_rows_in_size_order():
    from concurrent.futures import ProcessPoolExecutor
    sizes = [4096, 1 << 16, 1024, 1 << 20]
    serial = predict("all_reduce", minimal(4), sizes, calibration="synthetic")
    with ProcessPoolExecutor(2) as pool:
        pooled = predict("all_reduce", minimal(4), sizes, calibration="synthetic", executor=pool)
    assert [r["size"] for r in pooled] == sizes
    assert pooled == serial


def test_predict_rows_are_nccl_tests_rows():
    rows = predict("AllReduce", "hgx-h200-8", "1K:4K")
    assert [r["size"] for r in rows] == [1024, 2048, 4096]
    for r in rows:
        assert set(ROW_KEYS) <= set(r)
        assert r["redop"] == "add" and r["dtype"] == "fp32" and r["count"] == r["size"] // 4
        assert r["busbw"] == pytest.approx(r["algbw"] * 2 * 7 / 8)
    assert "time(us)" in format_table(rows)


def test_parse_sizes():
    assert parse_sizes("1K:1M:32") == [1 << 10, 1 << 15, 1 << 20]
    assert parse_sizes("16,1K") == [16, 1024]


def test_sweep_on_a_thread_pool_and_best_policy_table(tmp_path):
    with ThreadPoolExecutor(2) as ex:
        res = sweep(["all_gather"], SIZES, [minimal(4)], POLICIES, executor=ex,
                    calibration="synthetic", progress=False, plot=tmp_path / "bw.png")
    assert len(res.rows) == len(SIZES) * len(POLICIES)
    assert all(r["error"] is None for r in res.rows)
    assert res.plot_path.stat().st_size > 1000
    table = best_policy_table(res.rows, "minimal-4", "AllGather")
    assert json.loads(json.dumps(table)) == table
    assert table["topology"] == "minimal-4" and table["collective"] == "all_gather"
    bands = table["bands"]
    assert [b["max_nbytes"] for b in bands] == sorted(b["max_nbytes"] for b in bands)
    assert bands[-1]["max_nbytes"] == SIZES[-1]
    for b in bands:
        Policy.from_dict(b["policy"])          # the planner can read every band back
    # each band's policy is the fastest at its sizes
    for size in SIZES:
        best = min((r for r in res.rows if r["size"] == size), key=lambda r: r["time_us"])
        band = next(b for b in bands if size <= b["max_nbytes"])
        assert band["policy"] == (best["policy"] or {})
    assert "# all_gather | minimal-4" in res.table()


def test_sweep_errors_become_rows():
    with ThreadPoolExecutor(1) as ex:
        res = sweep("all_gather", [1024], "hgx-a100-8", [{"atom": "switch"}], executor=ex,
                    progress=False)
    assert res.rows[0]["error"] and res.rows[0]["time_us"] is None


def test_sweep_default_process_pool():
    res = sweep("all_to_all", [4096, 65536], ["hgx-h200-8"], progress=False, max_workers=2)
    assert [r["size"] for r in res.rows] == [4096, 65536]
    assert all(r["time_us"] > 0 for r in res.rows)


def test_plots_write_pngs(tmp_path):
    rows = predict("all_gather", minimal(4), SIZES, calibration="synthetic")
    assert plot_bandwidth(rows, tmp_path / "a.png", metric="time_us").stat().st_size > 1000
    r = simulate(plan(library.all_reduce(4, 1 << 16), minimal(4)), minimal(4), "synthetic")
    assert plot_timeline(r, tmp_path / "g.png").stat().st_size > 1000


def test_best_policy_table_feeds_the_planner():
    from purlin.snac import policy as policy_module
    from_table = getattr(policy_module, "from_table", None)
    if from_table is None:
        pytest.skip("planner has no from_table hook yet")
    with ThreadPoolExecutor(1) as ex:
        res = sweep("all_gather", SIZES, [minimal(4)], POLICIES, executor=ex,
                    calibration="synthetic", progress=False)
    table = res.best_policy_table("minimal-4", "all_gather")
    for size in SIZES:
        assert isinstance(from_table(table, "all_gather", "minimal-4", size), Policy)
