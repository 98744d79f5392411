"""Scale-up topologies: GPUs, switches and links, loaded from YAML into networkx.

Imports only ``purlin.errors``. Hardware numbers live in ``topologies/*.yaml``
(shipped as ``purlin.data.topologies``), never in this package's code.

Examples
--------
>>> from purlin.topology import load_topology, route
>>> t = load_topology("hgx-h200-8")
>>> route(t, 0, 3)
('gpu0->nvswitch', 'nvswitch->gpu3')
"""

from purlin.topology.load import data_root, list_topologies, load_topology
from purlin.topology.model import LINK_CLASSES, Gpu, Link, Switch, Topology, check_structure
from purlin.topology.parse import SCHEMA_VERSION, parse_topology
from purlin.topology.routing import (
    capacity_gbps,
    direct_peers,
    hbm_resource,
    is_direct,
    is_fully_connected,
    link_class,
    path_bandwidth_gbps,
    path_latency_us,
    ring_order,
    route,
)
from purlin.topology.synthetic import minimal
from purlin.topology.whatif import with_overrides
from purlin.topology.identity import loopback_for, resolve_topology, shipped_name
from purlin.topology.identity import digest as topology_digest

__all__ = [
    "LINK_CLASSES",
    "SCHEMA_VERSION",
    "Gpu",
    "Link",
    "Switch",
    "Topology",
    "capacity_gbps",
    "check_structure",
    "data_root",
    "direct_peers",
    "hbm_resource",
    "is_direct",
    "is_fully_connected",
    "link_class",
    "list_topologies",
    "load_topology",
    "loopback_for",
    "minimal",
    "parse_topology",
    "path_bandwidth_gbps",
    "path_latency_us",
    "resolve_topology",
    "ring_order",
    "route",
    "shipped_name",
    "topology_digest",
    "with_overrides",
]
