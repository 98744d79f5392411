"""``purlin workload``: the table's numbers are the Python API's, JSON and plot on request."""
import json

import pytest

from purlin.cli import main
from purlin.workload import NCCL_LIKE, predict_step, preset


def _rows(out: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split() for line in out.splitlines()
            if line and not line.startswith("#")}


def test_table_values_are_the_api_values(capsys, tmp_path):
    js, png = tmp_path / "w.json", tmp_path / "w.png"
    assert main(["workload", "llama3-70b", "-t", "hgx-h200-8", "--tokens", "8", "--workers", "1",
                 "--json", str(js), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    cfg = preset("llama3-70b", tokens=8)
    default = predict_step(cfg, "hgx-h200-8")
    ring = predict_step(cfg, "hgx-h200-8", NCCL_LIKE)
    head = out.splitlines()[0]
    assert head == ("# llama3-70b decode: 8 tokens per tensor-parallel group, 80 layers | "
                    "hgx-h200-8, 8 ranks: tp=8 (1 group)")
    assert "default" in out.splitlines()[1] and "nccl-like ring" in out.splitlines()[1]
    rows = _rows(out)
    ar = rows["all_reduce"]
    assert ar[1:4] == ["160", str(160 * 8 * 8192 * 2), "-"]
    assert ar[4:] == [f"{default.row('all_reduce').time_per_call_us:.2f}",
                      f"{default.total_us:.1f}",
                      f"{ring.row('all_reduce').time_per_call_us:.2f}", f"{ring.total_us:.1f}"]
    assert rows["total"][1:] == ["160", str(160 * 8 * 8192 * 2), f"{default.total_us:.1f}",
                                 f"{ring.total_us:.1f}"]
    doc = json.loads(js.read_text())
    assert [d["label"] for d in doc] == ["default", "nccl-like ring"]
    assert doc[0]["total_us"] == pytest.approx(default.total_us)
    assert doc[0]["rows"][0]["calls"] == 160
    assert png.stat().st_size > 5000


def test_several_topologies_side_by_side_and_moe_bound(capsys):
    assert main(["workload", "deepseek-v3", "-t", "hgx-h200-8", "-t", "hgx-b200-8", "--tokens", "16",
                 "--no-baseline", "--workers", "2"]) == 0
    out = capsys.readouterr().out
    heads = [line for line in out.splitlines() if line.startswith("# deepseek-v3")]
    assert [h.split("| ")[1].split(",")[0] for h in heads] == ["hgx-h200-8", "hgx-b200-8"]
    assert "nccl-like ring" not in out
    for block, topo in zip(out.split("\n\n"), ("hgx-h200-8", "hgx-b200-8")):
        p = predict_step(preset("deepseek-v3", tokens=16), topo)
        rows = _rows(block)
        for kind in ("dispatch", "combine"):
            r = p.row(kind)
            assert rows[kind][1:] == ["58", str(r.nbytes), f"{r.bound_us:.1f}",
                                      f"{r.time_per_call_us:.2f}", f"{r.time_us:.1f}"]
        assert rows["total"][-1] == f"{p.total_us:.1f}"


def test_dedupe_and_prefill_flags(capsys):
    assert main(["workload", "mixtral-8x22b", "-t", "hgx-h200-8", "--phase", "prefill",
                 "--tokens", "64", "--dedupe", "--no-baseline", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# mixtral-8x22b prefill: 64 tokens per tensor-parallel group")
    p = predict_step(preset("mixtral-8x22b", "prefill", 64, dedupe=True), "hgx-h200-8")
    assert _rows(out)["dispatch"][2] == str(p.row("dispatch").nbytes)


@pytest.mark.parametrize("argv,message", [
    (["nope", "-t", "hgx-h200-8"], "workload preset 'nope' is unknown; choose one of"),
    (["llama3-70b", "-t", "hgx-h200-8", "--tokens", "0"], "--tokens 0: must be in 1..4194304"),
    (["llama3-70b", "-t", "no-such-box"], "unknown topology 'no-such-box'"),
    (["llama3-70b", "-t", "mesh-2d-16", "--workers", "0"], "--workers 0: must be an integer >= 1"),
    (["deepseek-v3", "-t", "hgx-h200-8", "--tokens", "3"], None),
])
def test_errors_are_one_line(capsys, argv, message):
    code = main(["workload"] + argv + (["--workers", "1"] if "--workers" not in argv else []))
    err = capsys.readouterr().err
    if message is None:                       # a valid odd size still predicts
        assert code == 0 and err == ""
        return
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("purlin workload: error: ") and message in err
