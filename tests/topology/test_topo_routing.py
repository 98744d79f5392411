"""Routes, direct reach, rings and path numbers on shipped and synthetic topologies."""

import pytest

from purlin.errors import TopologyError
from purlin.topology import (
    capacity_gbps,
    direct_peers,
    hbm_resource,
    is_direct,
    is_fully_connected,
    link_class,
    load_topology,
    minimal,
    path_bandwidth_gbps,
    path_latency_us,
    ring_order,
    route,
    with_overrides,
)
from purlin.topology.model import Switch


def test_hgx_route_is_uplink_then_downlink():
    t = load_topology("hgx-h200-8")
    assert route(t, 0, 3) == ("gpu0->nvswitch", "nvswitch->gpu3")
    assert route(t, 3, 0) == ("gpu3->nvswitch", "nvswitch->gpu0")
    assert route(t, 5, 5) == ()
    assert path_latency_us(t, 0, 3) == pytest.approx(0.05 + 0.35 + 0.05)
    assert link_class(t, 0, 3) == "nvlink" and link_class(t, 2, 2) == "hbm"


def test_mi300x_route_is_one_direct_link():
    t = load_topology("mi300x-8")
    assert route(t, 0, 5) == ("gpu0->gpu5",)
    assert path_bandwidth_gbps(t, 0, 5) == 64.0
    assert link_class(t, 0, 5) == "xgmi"
    assert is_fully_connected(t)


def test_pcie_route_crosses_both_uplinks():
    t = load_topology("pcie-gen5-8")
    assert route(t, 0, 1) == ("gpu0->pcie_sw0", "pcie_sw0->gpu1")
    assert route(t, 0, 2) == ("gpu0->pcie_sw0", "pcie_sw0->root", "root->pcie_sw1", "pcie_sw1->gpu2")
    assert path_latency_us(t, 0, 2) == pytest.approx(4 * 0.1 + 0.15 + 0.3 + 0.15)
    assert is_direct(t, 0, 7)  # peer access through switches only
    assert link_class(t, 0, 2) == "pcie"


def test_mesh_is_not_fully_connected_and_routes_are_deterministic():
    t = load_topology("mesh-2d-16")
    assert not is_fully_connected(t)
    assert direct_peers(t, 0) == (1, 4) and direct_peers(t, 5) == (1, 4, 6, 9)
    assert not is_direct(t, 0, 5)
    # gpu0 -> gpu5 has two shortest paths (via gpu1 or gpu4): the lower index wins
    assert route(t, 0, 5) == ("gpu0->gpu1", "gpu1->gpu5")
    assert route(t, 0, 15) == route(t, 0, 15)
    assert len(route(t, 0, 15)) == 6


def test_mesh_ring_is_a_hamiltonian_cycle_of_neighbours():
    t = load_topology("mesh-2d-16")
    ring = ring_order(t)
    assert sorted(ring) == list(range(16)) and ring[0] == 0
    for a, b in zip(ring, ring[1:] + ring[:1]):
        assert is_direct(t, a, b), (a, b)
        assert len(route(t, a, b)) == 1


def test_ring_is_rank_order_when_fully_connected():
    assert ring_order(load_topology("hgx-b200-8")) == tuple(range(8))
    assert ring_order(load_topology("h200-loopback", world=3)) == (0, 1, 2)


def test_ring_order_names_the_stuck_rank():
    # a 3x3 mesh has an odd number of nodes and is bipartite: no Hamiltonian cycle
    pairs = []
    for i in range(9):
        if i % 3 < 2:
            pairs.append([f"gpu{i}", f"gpu{i + 1}"])
        if i < 6:
            pairs.append([f"gpu{i}", f"gpu{i + 3}"])
    from purlin.topology import parse_topology

    t = parse_topology(_mesh_dict(9, pairs), where="m.yaml")
    with pytest.raises(TopologyError, match=r"no ring .* stuck at rank \d+"):
        ring_order(t)
    line = parse_topology(_mesh_dict(3, [["gpu0", "gpu1"], ["gpu1", "gpu2"]]), where="line.yaml")
    with pytest.raises(TopologyError, match="rank 0 has 1 direct peer"):
        ring_order(line)


def _mesh_dict(n, pairs):
    return {
        "name": "m", "source": "test", "gpu_kind": "x", "gpus": n,
        "gpu": {"hbm_bandwidth_gbps": 1, "sms": 1, "copy_engines": 0, "nvlink_per_sm_gbps": 1, "memory_gib": 1},
        "links": [{"pairs": pairs, "bandwidth_gbps": 1, "latency_us": 0, "link_class": "nvlink"}],
    }


def test_loopback_ranks_share_one_gpu_and_its_hbm():
    t = load_topology("h200-loopback", world=4)
    assert t.world == 4 and len(t.gpus) == 1
    assert {hbm_resource(t, r) for r in range(4)} == {"gpu0.hbm"}
    assert route(t, 0, 3) == ()
    assert is_direct(t, 1, 2) and is_fully_connected(t)
    assert link_class(t, 0, 1) == "hbm"
    assert path_bandwidth_gbps(t, 0, 1) == 4800.0 and path_latency_us(t, 0, 1) == 0.0
    assert capacity_gbps(t, "gpu0.hbm") == 4800.0
    assert load_topology("h200-loopback").world == 8


def test_hbm_and_link_resources_have_capacities():
    t = load_topology("hgx-h100-8")
    assert hbm_resource(t, 6) == "gpu6.hbm"
    assert capacity_gbps(t, "gpu6.hbm") == 3350.0
    assert capacity_gbps(t, "nvswitch->gpu6") == 370.0
    with pytest.raises(TopologyError, match="no resource 'nvswitch.hbm'"):
        capacity_gbps(t, "nvswitch.hbm")
    with pytest.raises(TopologyError, match="no link resource 'gpu0->gpu1'"):
        capacity_gbps(t, "gpu0->gpu1")


def test_rank_out_of_range_is_named():
    with pytest.raises(TopologyError, match="rank 8 out of range 0..7"):
        route(load_topology("hgx-a100-8"), 0, 8)


def test_minimal_is_synthetic_and_fully_connected():
    t = minimal(4, bandwidth_gbps=50.0)
    assert t.source == "synthetic" and t.world == 4
    assert is_fully_connected(t) and ring_order(t) == (0, 1, 2, 3)
    assert path_bandwidth_gbps(t, 1, 2) == 50.0
    assert t == minimal(4, bandwidth_gbps=50.0)  # equal parts, equal topologies
    assert minimal(1).world == 1 and ring_order(minimal(1)) == (0,)


def test_overrides_double_bandwidth_and_leave_the_original():
    base = load_topology("hgx-h200-8")
    fast = with_overrides(base, link_bandwidth_scale=2.0)
    assert path_bandwidth_gbps(fast, 0, 3) == 740.0
    assert fast.link("gpu0->nvswitch").line_bandwidth_gbps == 900.0
    assert path_bandwidth_gbps(base, 0, 3) == 370.0
    assert "what-if: link_bandwidth_scale=2" in fast.source
    assert fast != base


def test_overrides_latency_nvls_hbm_and_world():
    base = load_topology("hgx-a100-8")
    t = with_overrides(
        base, link_latency_scale=0.5, switch_latency_scale=2, in_switch_reduce=True, hbm_bandwidth_scale=1.5
    )
    assert path_latency_us(t, 0, 1) == pytest.approx(0.025 + 0.7 + 0.025)
    assert t.switch("nvswitch").in_switch_reduce and not base.switch("nvswitch").in_switch_reduce
    assert t.gpus[3].hbm_bandwidth_gbps == 3000.0
    assert with_overrides(load_topology("b200-loopback"), world=2).world == 2
    with pytest.raises(TopologyError, match="only a loopback"):
        with_overrides(base, world=4)
    with pytest.raises(TopologyError, match="link_bandwidth_scale: must be a number > 0, got -1"):
        with_overrides(base, link_bandwidth_scale=-1)


@pytest.mark.parametrize("name", ["hgx-h200-8", "pcie-gen5-8", "mesh-2d-16", "mi300x-8", "gb200-nvl72",
                                  "rubin-ultra-nvl576"])
def test_each_route_is_the_first_shortest_path_by_node_order(name):
    """The route of a pair is the shortest path whose node sequence sorts first (GPUs by
    index, then switches by name), as networkx enumerates them all: the hop search may
    take shortcuts (a switch's last hop is not scanned port by port) but not another path."""
    import networkx as nx
    from purlin.topology.routing import _direct_gpus, _node_key
    t = load_topology(name)
    g = t.graph
    gpus = [t.gpu_of(r).name for r in range(t.world)]
    pairs = [(a, b) for i, a in enumerate(gpus) for b in gpus[i % 5::max(1, len(gpus) // 9)] if a != b]
    for a, b in pairs[:400]:
        view = g
        if b in _direct_gpus(t, a):   # direct pairs route over switches only
            view = nx.subgraph_view(g, filter_node=lambda n: n in (a, b) or isinstance(g.nodes[n]["part"], Switch))
        want = min(nx.all_shortest_paths(view, a, b), key=lambda p: [_node_key(n) for n in p])
        assert route(t, gpus.index(a), gpus.index(b)) == tuple(f"{x}->{y}" for x, y in zip(want, want[1:])), (a, b)
