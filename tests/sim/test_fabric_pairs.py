"""The fabric's one-lookup pair route (a rack's one-shot call asks it of every pair of
ranks): what the topology's route, latency and direct-peer functions say."""
import pytest

from purlin.topology import is_direct, load_topology, path_latency_us, route
from purlin.topology.routing import hop


@pytest.mark.parametrize("name", ["hgx-h200-8", "mesh-2d-16", "pcie-gen5-8", "gb200-nvl72", "h200-loopback"])
def test_hop_is_route_latency_and_directness_at_once(name):
    topo = load_topology(name)
    for p in range(0, topo.world, 3):
        for q in range(topo.world):
            links, lat, direct = hop(topo, p, q)
            assert links == route(topo, p, q) and direct == is_direct(topo, p, q)
            assert lat == (0.0 if topo.gpu_of(p) == topo.gpu_of(q) else path_latency_us(topo, p, q))
