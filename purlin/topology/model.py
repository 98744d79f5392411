"""The Topology object: GPUs, switches and links as frozen data over a networkx graph.

A topology says where bytes can go and how fast. It is plain data: every number comes
from a YAML file (or from the documented arguments of :func:`purlin.topology.minimal`),
never from code, so a what-if study is a new Topology, not an edited one.

Graph nodes are GPUs ``gpu0 .. gpuN-1`` and switches by name. Each bidirectional link
becomes two directed edges, one per direction; each edge is one capacity resource whose
id is ``"<src>-><dst>"``. A GPU's HBM is a separate resource ``"<gpu>.hbm"``.

Ranks map to GPUs: rank r runs on ``gpu<r>``, except in a *loopback* topology, where
``world`` virtual ranks share the single GPU ``gpu0`` (its HBM and SMs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import networkx as nx

from purlin.errors import TopologyError

_SWITCH_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_GPU_NAME = re.compile(r"gpu[0-9]+")

RANGES = {
    "hbm_bandwidth_gbps": (1e-6, 1e9), "nvlink_per_sm_gbps": (1e-6, 1e9),
    "bandwidth_gbps": (1e-6, 1e9), "line_bandwidth_gbps": (1e-6, 1e9),
    "memory_gib": (1e-6, 1e6), "latency_us": (0.0, 1e6),
    "sms": (1, 100_000), "copy_engines": (0, 10_000), "ports": (1, 1_000_000),
}
"""Sane range of every number of a topology, by field: bandwidths from 1 KB/s to 1 EB/s,
latencies up to a second, memory up to an exbibyte. A value outside is a typo or a unit
slip (bits for bytes), and past them the simulator's arithmetic loses meaning."""

LINK_CLASSES = ("nvlink", "xgmi", "pcie", "hbm")
"""Allowed ``link_class`` values; ``"hbm"`` is what :func:`link_class` reports for
two ranks on the same GPU, and may also name an on-package die-to-die link."""


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU: the per-GPU numbers the simulator and planner size things with.

    Attributes
    ----------
    name : str
        Graph node id, ``gpu<i>``.
    hbm_bandwidth_gbps : float
        Memory bandwidth in GB/s, reads and writes together (one shared resource).
    sms : int
        Streaming multiprocessors (compute units), the CTA budget.
    copy_engines : int
        Asynchronous copy engines (concurrent DMA queues).
    nvlink_per_sm_gbps : float
        Rate at which one SM can read a peer's memory, GB/s: sizes reader CTAs.
    memory_gib : float
        Device memory in GiB.
    compute_capability : str or None
        e.g. ``"9.0"``; None where it does not apply or is not announced.
    """

    name: str
    hbm_bandwidth_gbps: float
    sms: int
    copy_engines: int
    nvlink_per_sm_gbps: float
    memory_gib: float
    compute_capability: str | None = None


@dataclass(frozen=True, slots=True)
class Switch:
    """A switch node (NVSwitch fabric, PCIe switch, root complex).

    Attributes
    ----------
    name : str
        Graph node id.
    latency_us : float
        Latency a byte pays for crossing this switch, in microseconds.
    in_switch_reduce : bool
        True if the switch can reduce and multicast (NVLS / multimem).
    ports : int
        Most links that may attach to it (a consistency check).
    """

    name: str
    latency_us: float
    in_switch_reduce: bool
    ports: int


@dataclass(frozen=True, slots=True)
class Link:
    """One direction of a link: a capacity resource.

    Attributes
    ----------
    src, dst : str
        Node ids at either end; bytes flow src -> dst.
    bandwidth_gbps : float
        Effective bandwidth in this direction, GB/s (what a bandwidth-bound model uses).
    latency_us : float
        Latency of the wire in microseconds (switch latency is counted separately).
    link_class : str
        One of :data:`LINK_CLASSES`.
    line_bandwidth_gbps : float or None
        Nominal line rate in this direction, GB/s, for reference only.
    """

    src: str
    dst: str
    bandwidth_gbps: float
    latency_us: float
    link_class: str
    line_bandwidth_gbps: float | None = None

    @property
    def id(self) -> str:
        """Resource id, ``"<src>-><dst>"``."""
        return f"{self.src}->{self.dst}"


@dataclass(frozen=True, repr=False)
class Topology:
    """A frozen scale-up topology; build it with ``parse_topology``/``load_topology``.

    Attributes
    ----------
    name, source : str
        Name, and where its numbers come from (``"synthetic"`` when made in code).
    gpu_kind : str
        Selects a calibration file elsewhere, e.g. ``"h200"``.
    world : int
        Number of ranks.
    gpus, switches, links : tuple
        The parts; ``links`` holds one :class:`Link` per direction.
    loopback : bool
        True if all ``world`` ranks are virtual ranks on ``gpu0``.
    description : str
        Free text.
    graph : networkx.DiGraph
        Frozen view built from the parts: node attribute ``part`` (Gpu or Switch),
        edge attribute ``link`` (Link). Not compared by ``==``.

    Examples
    --------
    >>> from purlin.topology import minimal
    >>> t = minimal(4)
    >>> t
    Topology(name='minimal-4', world=4, gpu_kind='synthetic', gpus=4, switches=1, links=8)
    >>> t.world, t.gpu_of(2).name, t.link("gpu2->switch").bandwidth_gbps
    (4, 'gpu2', 100.0)
    """

    name: str
    source: str
    gpu_kind: str
    world: int
    gpus: tuple[Gpu, ...]
    switches: tuple[Switch, ...] = ()
    links: tuple[Link, ...] = ()
    loopback: bool = False
    description: str = ""
    graph: nx.DiGraph = field(init=False, compare=False, repr=False)
    _routes: dict = field(init=False, compare=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        check_structure(f"topology {self.name!r}", self.gpus, self.switches, self.links, self.loopback, self.world)
        object.__setattr__(self, "graph", _build_graph(self))

    def __repr__(self) -> str:
        """Short: a 72-GPU topology should not print 144 links."""
        loop = ", loopback=True" if self.loopback else ""
        return (
            f"Topology(name={self.name!r}, world={self.world}, gpu_kind={self.gpu_kind!r}, "
            f"gpus={len(self.gpus)}, switches={len(self.switches)}, links={len(self.links)}{loop})"
        )

    def gpu_of(self, rank: int) -> Gpu:
        """The GPU that ``rank`` runs on (``gpu0`` for every rank in a loopback)."""
        if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank < self.world:
            raise TopologyError(f"{self.name}: rank {rank!r} out of range 0..{self.world - 1}")
        return self.gpus[0 if self.loopback else rank]

    def link(self, resource: str) -> Link:
        """The :class:`Link` whose id is ``resource`` (``"gpu0->nvswitch"``)."""
        src, sep, dst = resource.partition("->")
        if not sep or not self.graph.has_edge(src, dst):
            raise TopologyError(f"{self.name}: no link resource {resource!r}")
        return self.graph.edges[src, dst]["link"]

    def switch(self, name: str) -> Switch:
        """The :class:`Switch` called ``name``."""
        part = self.graph.nodes[name]["part"] if name in self.graph else None
        if not isinstance(part, Switch):
            raise TopologyError(f"{self.name}: no switch {name!r}")
        return part


def check_structure(
    where: str,
    gpus: tuple[Gpu, ...],
    switches: tuple[Switch, ...],
    links: tuple[Link, ...],
    loopback: bool,
    world: int,
) -> None:
    """Raise TopologyError unless these parts form a valid topology.

    Checks what no single field can: GPU names, duplicate names, links to unknown
    nodes, duplicate links, switch port counts, the loopback shape, and that every
    GPU can reach every other GPU. ``where`` prefixes each message. The YAML parser
    runs it too, so a file's reachability error names the file.
    """
    if isinstance(world, bool) or not isinstance(world, int):
        raise TopologyError(f"{where}: world {world!r}: must be an integer >= 1")
    if loopback:
        if len(gpus) != 1:
            raise TopologyError(f"{where}: gpus: a loopback topology has exactly 1 GPU, got {len(gpus)}")
        if world < 1:
            raise TopologyError(f"{where}: ranks: must be >= 1, got {world}")
    elif world < 1:
        raise TopologyError(f"{where}: world {world!r}: must be an integer >= 1")
    elif world != len(gpus):
        raise TopologyError(f"{where}: world {world} must equal the number of GPUs {len(gpus)}")
    for i, gpu in enumerate(gpus):
        if gpu.name != f"gpu{i}":
            raise TopologyError(f"{where}: gpus[{i}]: must be named 'gpu{i}', got {gpu.name!r}")
    seen = {g.name for g in gpus}
    for i, sw in enumerate(switches):
        if not _SWITCH_NAME.fullmatch(sw.name) or _GPU_NAME.fullmatch(sw.name):
            raise TopologyError(
                f"{where}: switches[{i}].name: {sw.name!r} must match [A-Za-z_][A-Za-z0-9_-]* "
                "and not look like a GPU name (gpu<i>)"
            )
        if sw.name in seen:
            raise TopologyError(f"{where}: switches[{i}].name: duplicate name {sw.name!r}")
        seen.add(sw.name)
    pairs: set[tuple[str, str]] = set()
    degree = {sw.name: 0 for sw in switches}
    for link in links:
        for end in (link.src, link.dst):
            if end not in seen:
                raise TopologyError(f"{where}: link {link.id}: unknown node {end!r}; known: {sorted(seen)}")
        if link.src == link.dst:
            raise TopologyError(f"{where}: link {link.id}: a link cannot join a node to itself")
        if (link.src, link.dst) in pairs:
            raise TopologyError(f"{where}: link {link.id}: duplicate link")
        if link.link_class not in LINK_CLASSES:
            raise TopologyError(
                f"{where}: link {link.id}: link_class must be one of {list(LINK_CLASSES)}, got {link.link_class!r}"
            )
        pairs.add((link.src, link.dst))
        if link.src in degree:
            degree[link.src] += 1
    for sw in switches:
        if degree[sw.name] > sw.ports:
            raise TopologyError(
                f"{where}: switch {sw.name}: {degree[sw.name]} links attached but ports is {sw.ports}"
            )
    _check_numbers(where, gpus, switches, links)
    _check_reach(where, gpus, pairs)


def _check_numbers(
    where: str, gpus: tuple[Gpu, ...], switches: tuple[Switch, ...], links: tuple[Link, ...]
) -> None:
    """Backstop for topologies built in code (the YAML parser checks each field first)."""
    gpu_fields = ("hbm_bandwidth_gbps", "sms", "nvlink_per_sm_gbps", "memory_gib")
    positive = [(g.name, f, getattr(g, f)) for g in gpus for f in gpu_fields]
    positive += [(link.id, "bandwidth_gbps", link.bandwidth_gbps) for link in links]
    positive += [(sw.name, "ports", sw.ports) for sw in switches]
    positive += [(link.id, "line_bandwidth_gbps", link.line_bandwidth_gbps) for link in links
                 if link.line_bandwidth_gbps is not None]
    for owner, name, value in positive:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TopologyError(f"{where}: {owner}.{name}: must be a number, got {value!r}")
        if not value > 0:
            raise TopologyError(f"{where}: {owner}.{name}: must be > 0, got {value!r}")
    non_negative = [(g.name, "copy_engines", g.copy_engines) for g in gpus]
    non_negative += [(link.id, "latency_us", link.latency_us) for link in links]
    non_negative += [(sw.name, "latency_us", sw.latency_us) for sw in switches]
    for owner, name, value in non_negative:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TopologyError(f"{where}: {owner}.{name}: must be a number, got {value!r}")
        if not value >= 0:
            raise TopologyError(f"{where}: {owner}.{name}: must be >= 0, got {value!r}")
    for owner, name, value in positive + non_negative:
        if name in ("sms", "copy_engines", "ports") and not isinstance(value, int):
            raise TopologyError(f"{where}: {owner}.{name}: must be an integer, got {value!r}")
        lo, hi = RANGES[name]
        if not lo <= value <= hi:
            raise TopologyError(f"{where}: {owner}.{name}: must be in [{lo:g}, {hi:g}] (a sanity "
                                f"bound on the unit in its name), got {value!r}")
    for sw in switches:
        if not isinstance(sw.in_switch_reduce, bool):
            raise TopologyError(f"{where}: {sw.name}.in_switch_reduce: must be True or False, "
                                f"got {sw.in_switch_reduce!r}")


def _check_reach(where: str, gpus: tuple[Gpu, ...], pairs: set[tuple[str, str]]) -> None:
    """Every GPU must reach every other GPU over directed links. Linear time when they do
    (all reach gpu0 and gpu0 reaches all); the pairwise search that names the first pair
    that fails runs only when one does."""
    g = nx.DiGraph(list(pairs))
    g.add_nodes_from(gpu.name for gpu in gpus)
    names = [gpu.name for gpu in gpus]
    if len(names) < 2:
        return
    first = names[0]
    ahead, behind = nx.descendants(g, first), nx.ancestors(g, first)
    if all(n in ahead and n in behind for n in names[1:]):
        return
    for src in names:
        reached = nx.descendants(g, src)
        for dst in names:
            if dst != src and dst not in reached:
                raise TopologyError(f"{where}: {src} cannot reach {dst} over the links given")


def _build_graph(t: Topology) -> nx.DiGraph:
    g = nx.DiGraph(name=t.name)
    for part in (*t.gpus, *t.switches):
        g.add_node(part.name, part=part)
    for link in t.links:
        g.add_edge(link.src, link.dst, link=link)
    return nx.freeze(g)
