"""Parallel groups on a topology: which ranks form each group, and the fabric one group sees.

Groups are consecutive ranks (tensor-parallel groups of ``tp``, expert-parallel groups of
``ep``), and every group of a step runs the same collective at the same time. When no two
groups share a link (one non-blocking switch, a full mesh, PCIe switches under a root with
groups on their own switches), nothing one group does slows another in the simulator's
model (links and HBM are its only shared capacities), so a group's collective is simulated
on :func:`group_topology`: its GPUs, renumbered from 0, and the links and switches between
them. Groups that do share a link are refused (:func:`check_disjoint`) rather than
predicted as if alone.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

from purlin.errors import TopologyError
from purlin.topology import Topology, route


def tile(world: int, size: int, what: str) -> list[tuple[int, ...]]:
    """Consecutive groups of ``size`` ranks covering ``world``.

    Examples
    --------
    >>> tile(8, 4, "tp")
    [(0, 1, 2, 3), (4, 5, 6, 7)]
    """
    if size < 1 or world % size:
        raise TopologyError(f"{what}={size} does not divide the topology's {world} ranks "
                            f"(rule: groups of {what} consecutive ranks tile every rank)")
    return [tuple(range(g, g + size)) for g in range(0, world, size)]


def group_links(topology: Topology, ranks: Sequence[int]) -> set[str]:
    """Link resources on the routes between the ranks of one group."""
    return {link for p in ranks for q in ranks if p != q for link in route(topology, p, q)}


def check_disjoint(topology: Topology, groups: Sequence[Sequence[int]], what: str) -> None:
    """Raise TopologyError if two groups' routes share a link (they would slow each other)."""
    if len(groups) < 2 or topology.loopback:
        if topology.loopback and len(groups) > 1:
            raise TopologyError(f"{topology.name}: {len(groups)} {what} groups on one loopback "
                                f"GPU would share its memory; give a world of one group")
        return
    owner: dict[str, int] = {}
    for i, ranks in enumerate(groups):
        for link in sorted(group_links(topology, ranks)):
            j = owner.setdefault(link, i)
            if j != i:
                raise TopologyError(
                    f"{topology.name}: {what} groups {j} (ranks {groups[j][0]}..{groups[j][-1]}) "
                    f"and {i} (ranks {ranks[0]}..{ranks[-1]}) share link {link}; the workload "
                    f"model predicts each group alone, so it needs groups that share no link "
                    f"(choose a degree that matches the topology's islands)")


def group_topology(topology: Topology, ranks: Sequence[int]) -> Topology:
    """The part of ``topology`` one group uses: its GPUs as ``gpu0..``, and the switches
    and links on the routes between them. The whole topology when the group is every rank.

    Examples
    --------
    >>> from purlin.topology import load_topology
    >>> t = group_topology(load_topology("gb200-nvl72"), range(8, 16))
    >>> t.world, t.name, len(t.links), t.link("gpu0->nvswitch").bandwidth_gbps
    (8, 'gb200-nvl72[8:16]', 16, 720.0)
    """
    ranks = tuple(ranks)
    if ranks == tuple(range(topology.world)):
        return topology
    if topology.loopback:
        raise TopologyError(f"{topology.name}: a group of {len(ranks)} of its {topology.world} "
                            f"loopback ranks would share the GPU with the others; give a world "
                            f"of one group")
    links = group_links(topology, ranks)
    nodes = {end for link in links for end in link.split("->")}
    rename = {topology.gpu_of(r).name: f"gpu{i}" for i, r in enumerate(ranks)}
    nodes |= set(rename)
    gpus = tuple(dataclasses.replace(topology.gpu_of(r), name=rename[topology.gpu_of(r).name])
                 for r in ranks)
    switches = tuple(sw for sw in topology.switches if sw.name in nodes)
    kept = tuple(dataclasses.replace(link, src=rename.get(link.src, link.src),
                                     dst=rename.get(link.dst, link.dst))
                 for link in topology.links if link.src in nodes and link.dst in nodes)
    return Topology(name=f"{topology.name}[{ranks[0]}:{ranks[-1] + 1}]",
                    source=topology.source + f"; ranks {ranks[0]}..{ranks[-1]} of {topology.world}",
                    gpu_kind=topology.gpu_kind, world=len(ranks), gpus=gpus, switches=switches,
                    links=kept, loopback=False, description=topology.description)
