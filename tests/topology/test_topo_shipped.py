"""Every shipped topology file loads, says where its numbers come from, and has the
values docs/sources.md gives (world, bandwidth, HBM, SMs)."""

import re

import pytest
import yaml

from purlin.topology import data_root, list_topologies, load_topology, path_bandwidth_gbps

EXPECTED = {
    # name: (world, gpu_kind, effective link GB/s per direction, HBM GB/s, SMs, in-switch reduce)
    "hgx-a100-8": (8, "a100", 230.0, 2000.0, 108, False),
    "hgx-h100-8": (8, "h100", 370.0, 3350.0, 132, True),
    "hgx-h200-8": (8, "h200", 370.0, 4800.0, 132, True),
    "hgx-b200-8": (8, "b200", 720.0, 8000.0, 148, True),
    "gb200-nvl72": (72, "gb200", 720.0, 8000.0, 148, True),
    "rubin-nvl144": (72, "rubin", 1440.0, 22000.0, 148, True),
    "mi300x-8": (8, "mi300x", 64.0, 5300.0, 304, None),
    "pcie-gen5-8": (8, "h100", 64.0, 2000.0, 114, False),
    "mesh-2d-16": (16, "rubin", 360.0, 22000.0, 148, None),
    "a100-loopback": (8, "a100", None, 2000.0, 108, None),
    "h100-loopback": (8, "h100", None, 3350.0, 132, None),
    "h200-loopback": (8, "h200", None, 4800.0, 132, None),
    "b200-loopback": (8, "b200", None, 8000.0, 148, None),
}

LINE_RATE = {"hgx-a100-8": 300.0, "hgx-h100-8": 450.0, "hgx-h200-8": 450.0, "hgx-b200-8": 900.0,
             "gb200-nvl72": 900.0, "rubin-nvl144": 1800.0, "mi300x-8": 64.0}

PER_SM = {"a100": 32.0, "h100": 46.0, "h200": 46.0, "b200": 48.0, "gb200": 48.0}


def test_the_expected_files_ship():
    assert set(EXPECTED) <= set(list_topologies())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_shipped_file_loads_with_facts_values(name):
    world, kind, link_gbps, hbm, sms, nvls = EXPECTED[name]
    t = load_topology(name)
    assert t.name == name
    assert t.world == world and t.gpu_kind == kind
    assert t.gpus[0].hbm_bandwidth_gbps == hbm and t.gpus[0].sms == sms
    assert len({g for g in t.gpus}) == len({g.name for g in t.gpus})
    if kind in PER_SM:
        assert t.gpus[0].nvlink_per_sm_gbps == PER_SM[kind]
    if link_gbps is not None:
        assert {link.bandwidth_gbps for link in t.links} == {link_gbps}
        assert path_bandwidth_gbps(t, 0, 1) == link_gbps
    if name in LINE_RATE:
        assert {link.line_bandwidth_gbps for link in t.links} == {LINE_RATE[name]}
    if nvls is not None:
        assert [s.in_switch_reduce for s in t.switches if s.name == "nvswitch" or s.name == "root"][0] is nvls
    assert t.source.strip() and t.source != "synthetic"


def test_loopbacks_are_one_gpu_without_links():
    for name in ("a100-loopback", "h100-loopback", "h200-loopback", "b200-loopback"):
        t = load_topology(name)
        assert t.loopback and len(t.gpus) == 1 and t.links == () and t.switches == ()


def test_nvswitch_boxes_are_one_logical_switch():
    t = load_topology("hgx-h200-8")
    assert [s.name for s in t.switches] == ["nvswitch"]
    assert len(t.links) == 16  # 8 GPUs x 2 directions
    assert t.switch("nvswitch").ports == 8


def test_mi300x_is_a_full_mesh_without_switch():
    t = load_topology("mi300x-8")
    assert t.switches == () and len(t.links) == 8 * 7  # one link per ordered pair
    assert {link.link_class for link in t.links} == {"xgmi"}


def test_mesh_has_only_neighbour_links():
    t = load_topology("mesh-2d-16")
    for link in t.links:
        a, b = int(link.src[3:]), int(link.dst[3:])
        ra, ca, rb, cb = a // 4, a % 4, b // 4, b % 4
        assert abs(ra - rb) + abs(ca - cb) == 1
    assert len(t.links) == 2 * 24


_NUMBER_LINE = re.compile(r"^\s*-?\s*[a-z_]+:\s*-?[0-9][0-9.]*\s*(#.*)?$")


@pytest.mark.parametrize("name", list_topologies())
def test_every_number_has_a_source_comment(name):
    text = data_root().joinpath(f"{name}.yaml").read_text()
    assert yaml.safe_load(text)["source"].strip()
    for n, line in enumerate(text.splitlines(), 1):
        numeric = _NUMBER_LINE.match(line) or ("{" in line and re.search(r":\s*[0-9]", line))
        if numeric and not line.lstrip().startswith("schema_version"):
            assert "#" in line, f"{name}.yaml line {n} has a number without a source comment: {line!r}"
