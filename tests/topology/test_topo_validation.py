"""Bad topology inputs fail with TopologyError naming the file, the key path and why."""

import copy

import pytest
import yaml

from purlin.errors import TopologyError
from purlin.topology import Gpu, Link, Topology, data_root, load_topology, parse_topology


def _good():
    """A small valid topology: 4 GPUs on one switch."""
    return {
        "name": "box", "source": "test", "gpu_kind": "x", "gpus": 4,
        "gpu": {"hbm_bandwidth_gbps": 1000, "sms": 8, "copy_engines": 2,
                "nvlink_per_sm_gbps": 10, "memory_gib": 16, "compute_capability": "9.0"},
        "switches": [{"name": "nvswitch", "latency_us": 0.4, "in_switch_reduce": False, "ports": 4}],
        "links": [{"star": "nvswitch", "bandwidth_gbps": 100, "line_bandwidth_gbps": 120,
                   "latency_us": 0.05, "link_class": "nvlink"}],
    }


def _edit(path, value):
    """A copy of _good() with the value at a dotted key path set (None deletes it)."""
    d = copy.deepcopy(_good())
    *head, last = path
    target = d
    for key in head:
        target = target[key]
    if value is None:
        del target[last]
    elif isinstance(target, list) and last == len(target):
        target.append(value)
    else:
        target[last] = value
    return d


def test_the_good_dict_parses():
    assert parse_topology(_good(), where="box.yaml").world == 4


# (what is wrong, the edited input, fragments the message must contain)
BAD = [
    ("unknown top-level field", _edit(("gpu_count",), 4),
     ["box.yaml: gpu_count: unknown field", "allowed:", "gpus", "links"]),
    ("unknown gpu field", _edit(("gpu", "hbm_gbps"), 5),
     ["box.yaml: gpu.hbm_gbps: unknown field", "hbm_bandwidth_gbps"]),
    ("unknown link field", _edit(("links", 0, "bandwith_gbps"), 5),
     ["box.yaml: links[0].bandwith_gbps: unknown field", "bandwidth_gbps"]),
    ("missing required field", _edit(("links", 0, "bandwidth_gbps"), None),
     ["box.yaml: links[0].bandwidth_gbps: missing required field"]),
    ("missing source", _edit(("source",), None), ["box.yaml: source: missing required field"]),
    ("negative bandwidth", _edit(("links", 0, "bandwidth_gbps"), -5),
     ["box.yaml: links[0].bandwidth_gbps: must be > 0, got -5"]),
    ("zero bandwidth", _edit(("links", 0, "bandwidth_gbps"), 0),
     ["box.yaml: links[0].bandwidth_gbps: must be > 0, got 0"]),
    ("negative latency", _edit(("switches", 0, "latency_us"), -0.1),
     ["box.yaml: switches[0].latency_us: must be >= 0, got -0.1"]),
    ("zero HBM", _edit(("gpu", "hbm_bandwidth_gbps"), 0), ["gpu.hbm_bandwidth_gbps: must be > 0, got 0"]),
    ("string for an integer", _edit(("gpu", "sms"), "many"),
     ["box.yaml: gpu.sms: must be an integer, got str 'many'"]),
    ("float for an integer", _edit(("gpus",), 4.0), ["box.yaml: gpus: must be an integer, got float 4.0"]),
    ("bool for a number", _edit(("links", 0, "latency_us"), True),
     ["box.yaml: links[0].latency_us: must be a number, got bool True"]),
    ("string for a bool", _edit(("switches", 0, "in_switch_reduce"), "yes"),
     ["box.yaml: switches[0].in_switch_reduce: must be true or false, got str 'yes'"]),
    ("unquoted compute capability", _edit(("gpu", "compute_capability"), 9.0),
     ["gpu.compute_capability: must be a non-empty string (quote it)"]),
    ("switches not a list", _edit(("switches",), {"name": "s"}), ["box.yaml: switches: must be a list, got dict"]),
    ("unknown link class", _edit(("links", 0, "link_class"), "infiniband"),
     ["box.yaml: links[0].link_class: must be one of", "'infiniband'"]),
    ("unknown node in a star", _edit(("links", 0, "star"), "nvswich"),
     ["box.yaml: links[0].star: unknown node 'nvswich'", "known: gpu0..gpu3, nvswitch"]),
    ("unknown node in a pair", _edit(("links", 0), {"pairs": [["gpu0", "gpu1"], ["gpu1", "gpu9"]],
                                                     "bandwidth_gbps": 1, "latency_us": 0, "link_class": "nvlink"}),
     ["box.yaml: links[0].pairs[1][1]: unknown node 'gpu9'"]),
    ("pair of three", _edit(("links", 0), {"pairs": [["gpu0", "gpu1", "gpu2"]],
                                            "bandwidth_gbps": 1, "latency_us": 0, "link_class": "nvlink"}),
     ["box.yaml: links[0].pairs[0]: must be a list of 2 node names"]),
    ("two link shapes", _edit(("links", 0, "all_pairs"), True),
     ["box.yaml: links[0]: give exactly one of pairs, star, all_pairs", "got ['star', 'all_pairs']"]),
    ("no link shape", _edit(("links", 0, "star"), None), ["links[0]: give exactly one of", "none"]),
    ("line rate below effective", _edit(("links", 0, "line_bandwidth_gbps"), 50),
     ["box.yaml: links[0].line_bandwidth_gbps: must be >= bandwidth_gbps 100, got 50"]),
    ("duplicate switch name", _edit(("switches", 1), {"name": "nvswitch", "latency_us": 0,
                                                      "in_switch_reduce": False, "ports": 4}),
     ["box.yaml: switches[1].name: duplicate name 'nvswitch'"]),
    ("switch named like a GPU", _edit(("switches", 0, "name"), "gpu7"),
     ["box.yaml: switches[0].name: 'gpu7'", "GPU name"]),
    ("too few switch ports", _edit(("switches", 0, "ports"), 3),
     ["box.yaml: switch nvswitch: 4 links attached but ports is 3"]),
    ("ranks on a non-loopback", _edit(("ranks",), 4), ["box.yaml: ranks: only a loopback topology takes ranks"]),
    ("loopback of several GPUs", _edit(("loopback",), True),
     ["box.yaml: gpus: a loopback topology has exactly 1 GPU, got 4"]),
    ("wrong schema version", _edit(("schema_version",), 2), ["box.yaml: schema_version: must be 1, got 2"]),
    ("bad gpu_kind", _edit(("gpu_kind",), "H200 SXM"), ["box.yaml: gpu_kind: must match", "'H200 SXM'"]),
]


@pytest.mark.parametrize("what,data,fragments", BAD, ids=[b[0] for b in BAD])
def test_bad_input_names_file_field_and_reason(what, data, fragments):
    with pytest.raises(TopologyError) as err:
        parse_topology(data, where="box.yaml")
    for fragment in fragments:
        assert fragment in str(err.value), f"{what}: {fragment!r} not in {str(err.value)!r}"


def test_duplicate_link_names_both_places():
    d = _good()
    d["links"].append({"pairs": [["gpu2", "nvswitch"]], "bandwidth_gbps": 1, "latency_us": 0, "link_class": "pcie"})
    with pytest.raises(TopologyError) as err:
        parse_topology(d, where="box.yaml")
    assert str(err.value) == "box.yaml: links[1].pairs[0]: duplicate link gpu2-nvswitch (already in links[0].star)"


def test_self_link_is_refused():
    d = _good()
    d["links"].append({"pairs": [["gpu1", "gpu1"]], "bandwidth_gbps": 1, "latency_us": 0, "link_class": "nvlink"})
    with pytest.raises(TopologyError, match=r"links\[1\].pairs\[0\]: a link cannot join 'gpu1' to itself"):
        parse_topology(d, where="box.yaml")


def test_unreachable_gpu_names_both_gpus():
    d = _good()
    d["links"] = [{"pairs": [["gpu0", "nvswitch"], ["gpu1", "nvswitch"], ["gpu2", "nvswitch"]],
                   "bandwidth_gbps": 1, "latency_us": 0, "link_class": "nvlink"}]
    with pytest.raises(TopologyError, match="box.yaml: gpu0 cannot reach gpu3"):
        parse_topology(d, where="box.yaml")


def test_world_only_for_loopback():
    with pytest.raises(TopologyError, match="box.yaml: world=2 asked for, but this topology has 4 GPUs"):
        parse_topology(_good(), where="box.yaml", world=2)
    with pytest.raises(TopologyError, match="hgx-h200-8.yaml: world=4 asked for"):
        load_topology("hgx-h200-8", world=4)
    with pytest.raises(TopologyError, match="h200-loopback.yaml: world: must be >= 1, got 0"):
        load_topology("h200-loopback", world=0)


def test_loopback_needs_ranks():
    d = yaml.safe_load(data_root().joinpath("h200-loopback.yaml").read_text())
    del d["ranks"]
    with pytest.raises(TopologyError, match="x.yaml: ranks: missing required field"):
        parse_topology(d, where="x.yaml")


def test_shipped_file_with_negative_bandwidth_gives_the_documented_message():
    d = yaml.safe_load(data_root().joinpath("hgx-h200-8.yaml").read_text())
    d["links"][0]["bandwidth_gbps"] = -5
    with pytest.raises(TopologyError) as err:
        parse_topology(d, where="hgx-h200-8.yaml")
    assert str(err.value) == "hgx-h200-8.yaml: links[0].bandwidth_gbps: must be > 0, got -5"


def test_bad_file_on_disk_names_its_path(tmp_path):
    d = _good()
    d["links"][0]["bandwidth_gbps"] = "fast"
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(d))
    with pytest.raises(TopologyError) as err:
        load_topology(path)
    assert str(err.value) == f"{path}: links[0].bandwidth_gbps: must be a number, got str 'fast'"


def test_duplicate_yaml_key_is_refused(tmp_path):
    path = tmp_path / "dup.yaml"
    text = yaml.safe_dump(_good()).replace("gpus: 4\n", "gpus: 4\ngpus: 8\n")
    path.write_text(text)
    with pytest.raises(TopologyError, match=r"dup.yaml: line \d+: not valid YAML: duplicate key 'gpus'"):
        load_topology(str(path))


def test_broken_yaml_and_non_mapping(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    with pytest.raises(TopologyError, match="broken.yaml: line .*not valid YAML"):
        load_topology(broken)
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n- 2\n")
    with pytest.raises(TopologyError, match="list.yaml: <top>: must be a mapping, got list"):
        load_topology(listy)


def test_unknown_name_and_missing_path():
    with pytest.raises(TopologyError, match="unknown topology 'hgx-h300-8'; shipped: .*hgx-h200-8"):
        load_topology("hgx-h300-8")
    with pytest.raises(TopologyError, match="nowhere/x.yaml: no such topology file"):
        load_topology("nowhere/x.yaml")


def test_code_built_topology_is_checked_too():
    gpu = Gpu("gpu0", 1.0, 1, 0, 1.0, 1.0)
    other = Gpu("gpu1", 1.0, 1, 0, 1.0, 1.0)
    with pytest.raises(TopologyError, match="topology 't': gpu0 cannot reach gpu1"):
        Topology("t", "test", "x", 2, (gpu, other))
    with pytest.raises(TopologyError, match=r"topology 't': gpu0->gpu1.bandwidth_gbps: must be > 0, got -1"):
        Topology("t", "test", "x", 2, (gpu, other),
                 links=(Link("gpu0", "gpu1", -1.0, 0.0, "nvlink"), Link("gpu1", "gpu0", 1.0, 0.0, "nvlink")))
    with pytest.raises(TopologyError, match="unknown node 'gpu2'"):
        Topology("t", "test", "x", 1, (gpu,), links=(Link("gpu0", "gpu2", 1.0, 0.0, "nvlink"),))
