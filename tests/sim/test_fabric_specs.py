"""The fabric's flow specs: the spec of a put or a copy from one rank to one rank (built by
its own short path, since a rack's one-shot call has one for every pair of ranks) is the
generic builder's, exactly, and
the one-lookup pair route is what the topology's route, latency and direct-peer
functions say."""
import random

import pytest

from purlin.errors import ScheduleError
from purlin.sim.calibration import load_calibration
from purlin.sim.fabric import Fabric
from purlin.topology import is_direct, list_topologies, load_topology, path_latency_us, route
from purlin.topology.routing import hop


KINDS = [("P", "sm", False), ("C", "sm", False), ("C", "sm", True), ("C", "tma", False), ("C", "tma", True)]


@pytest.mark.parametrize("name", list_topologies())
def test_a_one_to_one_spec_is_the_generic_builders(name):
    """Puts, and SM or TMA copies from one source (plain or packets) to one destination."""
    topo = load_topology(name)
    fab = Fabric(topo, load_calibration(topo.gpu_kind))
    rng = random.Random(name)
    w = topo.world
    trips = [(rng.randrange(w), rng.randrange(w), rng.randrange(w)) for _ in range(40)] + [(0, 0, w - 1)]
    for (c, s, d), (kind, atom, pk) in ((t, k) for t in trips for k in KINDS):
        key = (kind, atom, c, (s,), (d,), (pk,))
        try:
            want = fab._build(key, "here")
        except ScheduleError as e:
            with pytest.raises(ScheduleError, match="not direct peers") as got:
                fab._one(key, "here")
            assert str(got.value) == str(e)
            continue
        assert fab._one(key, "here") == want, key


@pytest.mark.parametrize("name", ["hgx-h200-8", "mesh-2d-16", "pcie-gen5-8", "gb200-nvl72", "h200-loopback"])
def test_hop_is_route_latency_and_directness_at_once(name):
    topo = load_topology(name)
    for p in range(0, topo.world, 3):
        for q in range(topo.world):
            links, lat, direct = hop(topo, p, q)
            assert links == route(topo, p, q) and direct == is_direct(topo, p, q)
            assert lat == (0.0 if topo.gpu_of(p) == topo.gpu_of(q) else path_latency_us(topo, p, q))
