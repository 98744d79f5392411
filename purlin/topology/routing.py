"""Where a byte goes between two ranks, and what that path offers.

Plain functions with the topology first (networkx style). A *route* is the tuple of
directed link resources a byte crosses; HBM reads and writes are not on it (see
:func:`hbm_resource`), so the simulator charges memory separately from the fabric.

Two ranks are *direct* peers when one can load/store the other's memory with no GPU
in between: over one link, or through switches only (an NVSwitch fabric, PCIe switches
under one root complex). Routes between peers that are not direct cross other GPUs,
which a schedule must relay explicitly (GPUs do not forward traffic by themselves).

Routes are shortest by hop count; ties go to the path whose node sequence sorts first
(GPUs by index, then switches by name), so every run gives the same route.
"""

from __future__ import annotations

from collections import deque

import networkx as nx

from purlin.errors import TopologyError
from purlin.topology.model import Switch, Topology

_RING_SEARCH_BUDGET = 200_000
"""DFS steps ``ring_order`` tries before giving up on a large sparse topology."""


def hbm_resource(topology: Topology, rank: int) -> str:
    """The HBM resource id of ``rank``'s GPU; reads and writes share its capacity.

    Examples
    --------
    >>> from purlin.topology import minimal
    >>> hbm_resource(minimal(2), 1)
    'gpu1.hbm'
    >>> hbm_resource(minimal(4, loopback=True), 3)  # virtual ranks share one HBM
    'gpu0.hbm'
    """
    return f"{topology.gpu_of(rank).name}.hbm"


def capacity_gbps(topology: Topology, resource: str) -> float:
    """Capacity in GB/s of a resource id from :func:`route` or :func:`hbm_resource`.

    Examples
    --------
    >>> from purlin.topology import minimal
    >>> t = minimal(2)
    >>> capacity_gbps(t, "gpu0->switch"), capacity_gbps(t, "gpu0.hbm")
    (100.0, 1000.0)
    """
    gpu, dot, what = resource.partition(".")
    if dot:
        part = topology.graph.nodes[gpu]["part"] if gpu in topology.graph else None
        if what != "hbm" or isinstance(part, Switch) or part is None:
            raise TopologyError(f"{topology.name}: no resource {resource!r}")
        return part.hbm_bandwidth_gbps
    return topology.link(resource).bandwidth_gbps


def route(topology: Topology, src_rank: int, dst_rank: int) -> tuple[str, ...]:
    """Ids of the directed link resources a byte crosses from src_rank to dst_rank.

    Returns an empty tuple when both ranks are on the same GPU (loopback, or a rank
    to itself): such traffic only touches that GPU's HBM.

    Raises
    ------
    TopologyError
        If a rank is out of range.

    Examples
    --------
    >>> from purlin.topology import minimal
    >>> route(minimal(4), 0, 3)
    ('gpu0->switch', 'switch->gpu3')
    >>> route(minimal(4, loopback=True), 0, 3)
    ()
    """
    nodes = _path(topology, topology.gpu_of(src_rank).name, topology.gpu_of(dst_rank).name)
    return tuple(f"{a}->{b}" for a, b in zip(nodes, nodes[1:]))


def is_direct(topology: Topology, p: int, q: int) -> bool:
    """True if rank p can load/store rank q's memory with no GPU in between.

    Examples
    --------
    >>> from purlin.topology import minimal
    >>> is_direct(minimal(4), 0, 3)
    True
    """
    a, b = topology.gpu_of(p).name, topology.gpu_of(q).name
    return a == b or b in _direct_gpus(topology, a)


def is_fully_connected(topology: Topology) -> bool:
    """True if every rank is a direct peer of every other rank.

    Examples
    --------
    >>> from purlin.topology import minimal
    >>> is_fully_connected(minimal(8))
    True
    """
    others = {g.name for g in topology.gpus}
    return all(_direct_gpus(topology, g.name) >= others - {g.name} for g in topology.gpus)


def link_class(topology: Topology, p: int, q: int) -> str:
    """Class of the first link from p to q (``"nvlink"``, ...); ``"hbm"`` on one GPU.

    Examples
    --------
    >>> from purlin.topology import minimal
    >>> link_class(minimal(2), 0, 1), link_class(minimal(2, loopback=True), 0, 1)
    ('nvlink', 'hbm')
    """
    hops = route(topology, p, q)
    return topology.link(hops[0]).link_class if hops else "hbm"


def path_bandwidth_gbps(topology: Topology, p: int, q: int) -> float:
    """Smallest link bandwidth on the route from p to q, in GB/s.

    On one GPU the only resource crossed is its HBM, so that bandwidth is returned.

    Examples
    --------
    >>> from purlin.topology import minimal
    >>> path_bandwidth_gbps(minimal(4), 0, 1)
    100.0
    """
    hops = route(topology, p, q)
    if not hops:
        return topology.gpu_of(p).hbm_bandwidth_gbps
    return min(topology.link(h).bandwidth_gbps for h in hops)


def path_latency_us(topology: Topology, p: int, q: int) -> float:
    """Latency from p to q in microseconds: link latencies plus switch latencies.

    GPUs relaying on the way add nothing here (the schedule pays for the relay);
    two ranks on one GPU give 0.0.

    Examples
    --------
    >>> from purlin.topology import minimal
    >>> round(path_latency_us(minimal(4), 0, 1), 3)  # 2 x 0.05 link + 0.4 switch
    0.5
    """
    a, b = topology.gpu_of(p).name, topology.gpu_of(q).name
    key = ("latency", a, b)
    if key not in topology._routes:   # cached: a rack asks for every pair of GPUs
        nodes = _path(topology, a, b)
        wire, hop = _latencies(topology)
        topology._routes[key] = (sum((wire[x, y] for x, y in zip(nodes, nodes[1:])), 0.0)
                                 + sum(hop[n] for n in nodes[1:-1]))
    return topology._routes[key]


def _latencies(topology: Topology) -> tuple[dict, dict]:
    """Per link (src, dst) its latency, per node what crossing it adds (a switch's
    latency, 0 for a GPU): read once, since a rack's pairs each sum a path of them."""
    got = topology._routes.get("latencies")
    if got is None:
        g = topology.graph
        wire = {(x, y): d["link"].latency_us for x, y, d in g.edges(data=True)}
        hop = {n: (d["part"].latency_us if isinstance(d["part"], Switch) else 0.0)
               for n, d in g.nodes(data=True)}
        got = topology._routes["latencies"] = (wire, hop)
    return got


def direct_peers(topology: Topology, rank: int) -> tuple[int, ...]:
    """Ranks other than ``rank`` that are direct peers of it, ascending.

    Examples
    --------
    >>> from purlin.topology import minimal
    >>> direct_peers(minimal(3), 1)
    (0, 2)
    """
    return tuple(q for q in range(topology.world) if q != rank and is_direct(topology, rank, q))


def ring_order(topology: Topology) -> tuple[int, ...]:
    """A cycle through all ranks in which each rank is a direct peer of the next.

    Rank order when the topology is fully connected; otherwise a depth-first search
    from rank 0 trying peers in ascending order (deterministic).

    Raises
    ------
    TopologyError
        If no such cycle exists; names the rank where the search got stuck.

    Examples
    --------
    >>> from purlin.topology import minimal
    >>> ring_order(minimal(4))
    (0, 1, 2, 3)
    """
    w = topology.world
    if is_fully_connected(topology):
        return tuple(range(w))
    peers = {r: direct_peers(topology, r) for r in range(w)}
    need = min(2, w - 1)
    for r in range(w):
        if len(peers[r]) < need:
            raise TopologyError(
                f"{topology.name}: no ring: rank {r} has {len(peers[r])} direct peer(s) {list(peers[r])}, needs {need}"
            )
    return _hamiltonian_cycle(topology.name, peers, w)


def _hamiltonian_cycle(name: str, peers: dict[int, tuple[int, ...]], w: int) -> tuple[int, ...]:
    """Iterative backtracking DFS from rank 0; raise naming the deepest stuck rank."""
    path, on_path = [0], {0}
    stack = [iter(peers[0])]
    deepest, steps = (1, 0), 0
    while stack and steps < _RING_SEARCH_BUDGET:
        steps += 1
        nxt = next((q for q in stack[-1] if q not in on_path), None)
        if nxt is None:
            on_path.discard(path.pop())
            stack.pop()
            continue
        path.append(nxt)
        on_path.add(nxt)
        if len(path) == w and 0 in peers[nxt]:
            return tuple(path)
        deepest = max(deepest, (len(path), nxt))
        stack.append(iter(peers[nxt]) if len(path) < w else iter(()))
    how = "no cycle exists" if not stack else f"gave up after {steps} steps"
    raise TopologyError(
        f"{name}: no ring through direct peers ({how}); the search got stuck at rank {deepest[1]} "
        f"after visiting {deepest[0]} of {w} ranks"
    )


def _direct_gpus(topology: Topology, gpu: str) -> frozenset[str]:
    """GPUs reachable from ``gpu`` through switches only (cached on the topology): its GPU
    neighbours and what its switches reach (found once per set of switches: a rack's
    GPUs all enter the same ones, and a walk per GPU cost 0.6 s of every plan at 576)."""
    key = ("direct", gpu)
    if key not in topology._routes:
        g = topology.graph
        nxt = list(g.successors(gpu))
        sws = frozenset(n for n in nxt if isinstance(g.nodes[n]["part"], Switch))
        gpus = {n for n in nxt if n not in sws} | _behind(topology, sws)
        topology._routes[key] = frozenset(gpus - {gpu})
    return topology._routes[key]


def _behind(topology: Topology, sws: frozenset[str]) -> frozenset[str]:
    """GPUs reachable from the switches ``sws`` through switches only (cached)."""
    key = ("behind", sws)
    if key not in topology._routes:
        g, seen, todo = topology.graph, set(sws), deque(sws)
        while todo:
            for nxt in g.successors(todo.popleft()):
                if nxt not in seen:
                    seen.add(nxt)
                    if isinstance(g.nodes[nxt]["part"], Switch):
                        todo.append(nxt)   # a GPU ends the walk: it does not forward
        topology._routes[key] = frozenset(n for n in seen if n not in sws and
                                          not isinstance(g.nodes[n]["part"], Switch))
    return topology._routes[key]


def _path(topology: Topology, a: str, b: str) -> tuple[str, ...]:
    """Node sequence of the route a -> b (cached); switch-only paths when direct.

    Hop counts to ``b`` are found once per destination (a rack asks for every pair):
    over the switches alone for a direct pair, which gives the same shortest paths as
    searching with ``a`` included (a path back through ``a`` is never shortest)."""
    if a == b:
        return ()
    key = ("path", a, b)
    if key not in topology._routes:
        topology._routes[key] = _short_path(topology, a, b) or _first_shortest_path(
            topology.graph, a, b, _hops_to(topology, b, b in _direct_gpus(topology, a)))
    return topology._routes[key]


def _short_path(topology: Topology, a: str, b: str) -> tuple[str, ...] | None:
    """The route a -> b where it is one link, or two through a switch (the first such
    switch under ``_node_key``): what :func:`_first_shortest_path` finds there, without a
    search of hop counts per destination (a rack's switch has a port per GPU). None
    where neither exists."""
    g = topology.graph
    if g.has_edge(a, b):
        return (a, b)
    via = [n for n in g.successors(a) if isinstance(g.nodes[n]["part"], Switch) and g.has_edge(n, b)]
    return (a, min(via, key=_node_key), b) if via else None


def _hops_to(topology: Topology, b: str, switches_only: bool) -> dict[str, int]:
    """Hop count to ``b`` from every node that reaches it (cached): through switches
    only, or through anything."""
    key = ("hops", b, switches_only)
    if key not in topology._routes:
        full = topology.graph
        g = full
        if switches_only:
            g = nx.subgraph_view(full, filter_node=lambda n: n == b or isinstance(full.nodes[n]["part"], Switch))
        topology._routes[key] = nx.single_source_shortest_path_length(g.reverse(copy=False), b)
    return topology._routes[key]


def _node_key(name: str) -> tuple[int, int, str]:
    """Sort GPUs by index first, then switches by name."""
    if name.startswith("gpu") and name[3:].isdigit():
        return (0, int(name[3:]), "")
    return (1, 0, name)


def _first_shortest_path(g: nx.DiGraph, a: str, b: str, dist: dict[str, int]) -> tuple[str, ...]:
    """The shortest a -> b path whose node sequence sorts first under ``_node_key``, given
    the hop counts ``dist`` to ``b`` of the nodes the path may cross (``a`` may be missing:
    it is then one hop more than its nearest successor)."""
    d = dist.get(a)
    if d is None:
        nxt = [dist[n] for n in g.successors(a) if n in dist]
        if not nxt:
            raise TopologyError(f"{g.graph.get('name', 'topology')}: no path from {a} to {b}")
        d = 1 + min(nxt)
    path, here = [a], a
    while here != b:
        if d == 1:   # b is the one node 0 hops from b: no need to scan a switch's W ports
            path.append(b)
            break
        closer = [n for n in g.successors(here) if dist.get(n) == d - 1]
        here = min(closer, key=_node_key)
        path.append(here)
        d -= 1
    return tuple(path)
