"""Nothing ignored: an option reaches what it applies to, a harmless mismatch warns on
stderr, and a limit that refused a request can be raised to let it through."""
import json

import pytest

from purlin import cli
from purlin.errors import LimitError
from purlin.sim import simulate_collective
from purlin.snac import plan
from purlin.spec import library
from purlin.topology import load_topology


def test_root_reaches_the_simulation():
    t = load_topology("hgx-h200-8")
    r = simulate_collective("broadcast", t, 1 << 16, root=5)
    holders = [q for q in range(8) if r.schedule.collective.input.ranks[q]]
    assert holders == [5]
    assert {p.rank for p in r.schedule.programs if "push" in p.role} == {5}


def test_cli_root_reaches_the_trace(tmp_path, capsys):
    trace = tmp_path / "t.json"
    assert cli.main(["sim", "broadcast", "-s", "64K", "--root", "5", "--trace", str(trace)]) == 0
    events = json.loads(trace.read_text())["traceEvents"]
    pushers = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"
               and "push" in e["args"]["name"]}
    assert pushers == {5}
    out = capsys.readouterr().out
    assert "# broadcast on hgx-h200-8" in out and "65536" in out


def test_world_equal_to_the_topology_is_harmless(capsys):
    assert cli.main(["plan", "all_gather", "-t", "hgx-h200-8", "--world", "8", "-b", "64K"]) == 0
    assert capsys.readouterr().err == ""


def test_op_for_some_collectives_warns_and_applies(tmp_path, capsys):
    out = tmp_path / "rows.json"
    assert cli.main(["sim", "all_reduce", "all_gather", "-s", "4K", "--op", "max",
                     "--json", str(out)]) == 0
    err = capsys.readouterr().err
    assert err == "purlin sim: warning: --op max applies to all_reduce only\n"
    rows = {r["collective"]: r for r in json.loads(out.read_text())}
    assert rows["all_reduce"]["redop"] == "max" and rows["all_gather"]["redop"] == "none"


def test_trace_of_several_collectives_says_which(tmp_path, capsys):
    assert cli.main(["sim", "all_gather", "all_to_all", "-s", "4K", "--gantt",
                     str(tmp_path / "g.png")]) == 0
    assert "--trace/--gantt show one call: all_gather at 4096 B" in capsys.readouterr().err
    assert (tmp_path / "g.png").stat().st_size > 1000


def test_a_refused_plan_goes_through_when_the_limit_is_raised(capsys):
    assert cli.main(["plan", "all_reduce", "-b", "64K", "--max-instructions", "50"]) == 2
    err = capsys.readouterr().err
    assert "over the limit of 50" in err and "--max-instructions" in err
    assert cli.main(["plan", "all_reduce", "-b", "64K", "--max-instructions", "100000"]) == 0
    c = library.all_reduce(8, 64 << 10)
    with pytest.raises(LimitError, match="over the limit of 50"):
        plan(c, max_instructions=50)
    s = plan(c, max_instructions=10 ** 5)
    # the limit counts a Notify or Wait once per flag (limits.py): 56 + 56 + 112 + 8 here
    flags = sum(len(getattr(i, "peers", getattr(i, "signals", (0,)))) for p in s.programs for i in p.instrs)
    assert sum(len(p.instrs) for p in s.programs) == 40 and flags == 232


def test_an_outputs_folder_is_checked_before_the_work(tmp_path, capsys, monkeypatch):
    ran = []
    monkeypatch.setattr("purlin.sim.predict", lambda *a, **k: ran.append(1) or [])
    assert cli.main(["sim", "all_reduce", "-s", "1K", "--plot", str(tmp_path / "no" / "p.png")]) == 2
    assert ran == [] and "folder" in capsys.readouterr().err


def test_a_deadlock_prints_one_line(monkeypatch, capsys):
    from purlin.errors import Deadlock

    def stuck(*a, **k):
        raise Deadlock("wait cycle: rank 0 cta 0 -> rank 1 cta 0\n  rank 0, cta 0, instr 1: ...")
    monkeypatch.setattr("purlin.snac.plan", stuck)
    assert cli.main(["plan", "all_reduce"]) == 2
    assert capsys.readouterr().err == ("purlin plan: error: wait cycle: rank 0 cta 0 -> rank 1 "
                                       "cta 0 (1 more lines with --debug)\n")


def test_dedupe_on_a_dense_preset_warns_and_changes_nothing(capsys):
    argv = ["workload", "llama3-70b", "-t", "hgx-h200-8", "--no-baseline", "--workers", "1"]
    assert cli.main(argv) == 0
    plain = capsys.readouterr()
    assert cli.main(argv + ["--dedupe"]) == 0
    deduped = capsys.readouterr()
    assert plain.err == ""
    assert deduped.err == ("purlin workload: warning: --dedupe and --seed apply to MoE dispatch; "
                           "llama3-70b is dense, so they change nothing\n")
    assert deduped.out == plain.out and "all_reduce" in plain.out


def test_every_workload_topology_is_checked_before_the_first_runs(monkeypatch, capsys):
    ran = []
    monkeypatch.setattr("purlin.workload.predict_steps", lambda *a, **k: ran.append(1) or [])
    assert cli.main(["workload", "llama3-70b", "-t", "hgx-h200-8", "-t", "no-such-box"]) == 2
    assert ran == [] and "unknown topology 'no-such-box'" in capsys.readouterr().err


def test_a_bad_scheduler_address_fails_before_any_connect(monkeypatch, capsys):
    import importlib
    dialled = []
    sweep_module = importlib.import_module("purlin.sim.sweep")   # purlin.sim.sweep is the function
    monkeypatch.setattr(sweep_module, "connect", lambda *a, **k: dialled.append(a))
    assert cli.main(["sweep", "all_gather", "-s", "4K", "--scheduler", "tcp://host:0"]) == 2
    assert dialled == []
    assert capsys.readouterr().err == ("purlin sweep: error: --scheduler 'tcp://host:0': needs a "
                                       "host and a port in 1..65535; give it as tcp://HOST:PORT "
                                       "(the address `dask scheduler` prints)\n")


@pytest.mark.parametrize("address", ["tcp://10.0.0.5:8786", "10.0.0.5:8786", "tls://[::1]:8786",
                                     "inproc://10.0.0.5/1234/1"])
def test_scheduler_addresses_dask_accepts_pass(address):
    from purlin.sim.sweep import check_scheduler_address
    assert check_scheduler_address(address) == address
