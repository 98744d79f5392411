"""Sweeps on a Dask cluster give the process pool's table, with the same progress bar.

A ``distributed.LocalCluster`` of two worker processes (one thread each) on the loopback
interface stands in for a cluster; ``distributed`` is in the ``dev`` extra, so CI runs it.
"""
import pytest

from purlin.cli import main
from purlin.errors import BackendUnavailable, PurlinError, UsageError
from purlin.sim import sweep
from purlin.snac import Policy

distributed = pytest.importorskip("distributed", reason="Dask sweeps need distributed "
                                  "(pip install -e '.[dask]')")

POINTS = (["all_gather", "all_reduce"], [4096, 1 << 20], ["hgx-h200-8"],
          [None, Policy(regime="throughput")])


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  host="127.0.0.1", dashboard_address=None) as c:
        yield c


@pytest.fixture(scope="module")
def pool_result():
    return sweep(*POINTS, progress=False, max_workers=2)


def test_a_client_gives_the_process_pool_table(cluster, pool_result):
    with distributed.Client(cluster) as client:
        on_dask = sweep(*POINTS, executor=client, progress=False)
        assert client.status == "running"            # a given client is left open
    assert len(on_dask.rows) == 8
    assert on_dask.rows == pool_result.rows          # every value, in input order
    assert on_dask.table() == pool_result.table()
    assert [r["time_us"] for r in on_dask.rows] == [r["time_us"] for r in pool_result.rows]
    assert all(r["error"] is None and r["time_us"] > 0 for r in on_dask.rows)


def test_a_scheduler_address_gives_the_same_table(cluster, pool_result):
    on_dask = sweep(*POINTS, scheduler=cluster.scheduler_address, progress=False)
    assert on_dask.rows == pool_result.rows


def test_progress_shows_on_dask_and_on_the_pool(cluster, capsys):
    with distributed.Client(cluster) as client:
        sweep("all_gather", [4096, 8192, 16384], "hgx-h200-8", executor=client)
    dask_bar = capsys.readouterr().err
    sweep("all_gather", [4096, 8192, 16384], "hgx-h200-8", max_workers=1)
    pool_bar = capsys.readouterr().err
    assert "sweep (dask)" in dask_bar and "3/3" in dask_bar
    assert "sweep:" in pool_bar and "3/3" in pool_bar


def test_cli_sweep_on_a_scheduler_prints_the_pool_table(cluster, capsys):
    argv = ["sweep", "all_to_all", "--sizes", "4K,64K", "-T", "hgx-h200-8", "--try", "regime=direct"]
    assert main(argv + ["--workers", "1"]) == 0
    local = capsys.readouterr().out
    assert main(argv + ["--scheduler", cluster.scheduler_address]) == 0
    remote = capsys.readouterr().out
    assert remote == local
    assert "# all_to_all | hgx-h200-8 | regime=direct" in remote


def test_bad_scheduler_and_executor_are_clear_errors(capsys):
    assert main(["sweep", "all_gather", "--sizes", "4K", "--scheduler", "no-port-here"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert err.startswith("purlin sweep: error: --scheduler 'no-port-here': needs a host and a "
                          "port in 1..65535; give it as tcp://HOST:PORT")
    with pytest.raises(UsageError, match="needs a host and a port"):
        sweep("all_gather", [4096], "hgx-h200-8", scheduler="no-port-here", progress=False)
    with pytest.raises(UsageError, match="expected a concurrent.futures.Executor, a "
                                         "distributed.Client or None"):
        sweep("all_gather", [4096], "hgx-h200-8", executor="tcp://x:1", progress=False)
    with pytest.raises(PurlinError, match="not both"):
        sweep("all_gather", [4096], "hgx-h200-8", executor=object(), scheduler="tcp://x:1")


def test_missing_dask_is_a_clear_error(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "distributed", None)     # as if not installed
    with pytest.raises(BackendUnavailable, match=r"needs Dask distributed: pip install -e '\.\[dask\]'"):
        sweep("all_gather", [4096], "hgx-h200-8", scheduler="tcp://127.0.0.1:8786", progress=False)
