"""`purlin plan` says where its default came from; `purlin codesign` writes a table."""
import json

import yaml

from purlin.cli import main
from purlin.topology import data_root


def test_plan_prints_the_table_and_band_it_used(tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert main(["plan", "all_reduce", "-t", "hgx-h200-8", "-b", "64K", "--json", str(out)]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("# default from topologies/codesign/hgx-h200-8.json, world 8, band (")
    src = json.loads(out.read_text())["summary"]["policy_source"]
    assert src["source"] == "table" and src["world"] == 8 and src["band"][0] < 65536 <= src["band"][1]


def test_plan_says_when_the_generic_rules_or_the_caller_chose(capsys):
    assert main(["plan", "all_gather", "--world", "4", "-b", "4K"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == (
        "# default from the generic rules (purlin.snac.policy): minimal-4 is not a shipped "
        "topology unchanged")
    assert main(["plan", "all_gather", "-t", "hgx-h200-8", "-b", "4K", "--regime", "direct"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == (
        "# policy as given; the generic rules filled: algorithm, chunk_nbytes, put_ctas, consumer_ctas")


def test_a_table_that_leaves_larger_sizes_to_the_generic_rules_says_so(capsys):
    """h200-loopback's table was searched up to 256 KiB with ``--beyond generic``: inside
    it the planner takes its band, past it the generic rules (direct), and says why."""
    table = json.loads((data_root() / "codesign" / "h200-loopback.json").read_text())
    assert table["beyond"] == "generic" and table["search"]["sizes"][-1] == 256 << 10
    last_band = table["worlds"]["8"]["collectives"]["all_reduce"]["bands"][-1]
    assert main(["plan", "all_reduce", "-t", "h200-loopback", "--world", "8", "-b", "256K"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].startswith("# default from topologies/codesign/h200-loopback.json, world 8, band (")
    assert f"regime {last_band['policy']['regime']} " in out[1]
    assert main(["plan", "all_reduce", "-t", "h200-loopback", "--world", "8", "-b", "257K"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1] == ("# default from the generic rules (purlin.snac.policy): codesign/h200-loopback.json "
                       f"covers up to {last_band['max_nbytes']} B (beyond: generic), so larger sizes "
                       "take the generic rules")
    assert "regime direct " in out[1]


def test_codesign_writes_a_table_the_planner_reads(tmp_path, capsys):
    path = tmp_path / "t.json"
    argv = ["codesign", "hgx-h200-8", "--sizes", "1K,4K", "--collectives", "all_gather", "--quick",
            "--workers", "1", "--quiet", "--out", str(path)]
    assert main(argv) == 0
    t = json.loads(path.read_text())
    assert t["command"] == "purlin " + " ".join(argv)
    entry = t["worlds"]["8"]["collectives"]["all_gather"]
    assert [p["size"] for p in entry["points"]] == [1024, 2048, 4096]     # grid and midpoint
    assert all(p["pick"]["time_us"] <= 1.01 * p["best_us"] for p in entry["points"])
    assert t["search"]["stages"]["structures 1K"]["points"] >= 3
    printed = capsys.readouterr().out
    assert f"# wrote {path}" in printed and "# all_gather W=8" in printed
    from purlin.snac import Policy, plan
    from purlin.spec import library
    s = plan(library.from_size("all_gather", 8, 4096), "hgx-h200-8", table=t)   # the top band
    assert s.policy == Policy.from_dict(entry["bands"][-1]["policy"]).to_dict()


def test_codesign_of_a_yaml_of_ones_own_needs_out(tmp_path, capsys):
    data = yaml.safe_load(data_root().joinpath("hgx-h200-8.yaml").read_text())
    data["name"] = "my-box"
    path = tmp_path / "my-box.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["codesign", str(path)]) == 2
    err = capsys.readouterr().err
    assert "not a shipped topology" in err and "pass --out FILE" in err
