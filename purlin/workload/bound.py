"""The max-per-port bound: no collective beats the busiest GPU port's bytes / bandwidth.

For each GPU, count the bytes it must send to other GPUs and the bytes it must receive
from them (a rank's block to itself stays in its own memory and crosses no link). Every
byte a GPU sends leaves through its outgoing links, every byte it receives arrives through
its incoming links, so the call takes at least

    max over GPUs g of  max(sent_g / out_g, received_g / in_g)

where ``out_g`` (``in_g``) is the summed effective bandwidth of the links leaving
(entering) g in the topology. It ignores latency, synchronisation, the SMs' copy rate and
HBM, so a prediction must lie above it; how far above says how far the call is from
link-bound. In-switch reduction (the ``switch`` Atom) is the one datapath that could beat it
for a reduction, so the bound is meant for copy collectives such as the MoE AllToAllV.
"""
from __future__ import annotations

from purlin.errors import TopologyError
from purlin.spec.collective import Collective
from purlin.topology import Topology


def port_bytes(c: Collective) -> tuple[list[int], list[int]]:
    """(sent, received) bytes per rank of a copy collective, self-blocks left out.

    Examples
    --------
    >>> from purlin.spec import library
    >>> port_bytes(library.all_to_all_v(2, [[16, 32], [48, 0]]))
    ([32, 48], [48, 32])
    """
    if c.is_reduce:
        raise TopologyError(f"{c.name}: the port bound here counts copies; a reduction's "
                            f"bytes depend on its algorithm")
    sent, received = [0] * c.world, [0] * c.world
    sources = c.sources()
    for q in range(c.world):
        for p in c.output.placed(q):
            src = sources[p.name][0].rank
            if src != q:
                sent[src] += p.nbytes
                received[q] += p.nbytes
    return sent, received


def port_bandwidth_gbps(topology: Topology, rank: int) -> tuple[float, float]:
    """(out, in) effective link bandwidth of ``rank``'s GPU in GB/s."""
    gpu = topology.gpu_of(rank).name
    out = sum(link.bandwidth_gbps for link in topology.links if link.src == gpu)
    inn = sum(link.bandwidth_gbps for link in topology.links if link.dst == gpu)
    return out, inn


def port_bound_us(c: Collective, topology: Topology) -> float:
    """The max-per-port bound of copy collective ``c`` on ``topology``, in microseconds.

    Raises
    ------
    TopologyError
        On a loopback topology (ranks share one GPU: no port to bound by), or for a
        reduction.

    Examples
    --------
    >>> from purlin.spec import library
    >>> from purlin.topology import minimal
    >>> port_bound_us(library.all_to_all_v(2, [[0, 100_000], [50_000, 0]]), minimal(2))  # 100 GB/s
    1.0
    """
    if topology.loopback:
        raise TopologyError(f"{topology.name}: loopback ranks share one GPU; there is no "
                            f"port to bound by")
    if topology.world != c.world:
        raise TopologyError(f"{c.name} has {c.world} ranks, topology {topology.name} "
                            f"{topology.world}")
    sent, received = port_bytes(c)
    worst = 0.0
    for r in range(c.world):
        out, inn = port_bandwidth_gbps(topology, r)
        worst = max(worst, sent[r] / (out * 1e3), received[r] / (inn * 1e3))
    return worst
