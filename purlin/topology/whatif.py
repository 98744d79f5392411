"""What-if studies: a new Topology with some numbers scaled or switched.

"What if the links were twice as fast?" is a new Topology, never an edit, so a
result can always be traced to the exact numbers it used: the change is appended
to ``source``.
"""

from __future__ import annotations

import dataclasses

from purlin.check import check_bool, check_int, check_number, check_str
from purlin.errors import TopologyError
from purlin.topology.model import Topology


def with_overrides(
    topology: Topology,
    *,
    link_bandwidth_scale: float = 1.0,
    link_latency_scale: float = 1.0,
    switch_latency_scale: float = 1.0,
    hbm_bandwidth_scale: float = 1.0,
    in_switch_reduce: bool | None = None,
    world: int | None = None,
    name: str | None = None,
) -> Topology:
    """A copy of ``topology`` with numbers scaled or features switched.

    Parameters
    ----------
    topology : Topology
        The baseline; it is not changed.
    link_bandwidth_scale, link_latency_scale : float
        Multiply every link's bandwidth (effective and line rate) or latency.
    switch_latency_scale : float
        Multiply every switch's latency.
    hbm_bandwidth_scale : float
        Multiply every GPU's HBM bandwidth.
    in_switch_reduce : bool, optional
        Turn in-switch reduction on or off on every switch.
    world : int, optional
        New rank count; loopback topologies only.
    name : str, optional
        New name (default: unchanged).

    Raises
    ------
    TopologyError
        If a scale is not > 0, or ``world`` is given for a topology that is not loopback.

    Examples
    --------
    >>> from purlin.topology import minimal
    >>> fast = with_overrides(minimal(4), link_bandwidth_scale=2)
    >>> fast.link("gpu0->switch").bandwidth_gbps, fast.source
    (200.0, 'synthetic; what-if: link_bandwidth_scale=2')
    """
    changes = {
        "link_bandwidth_scale": link_bandwidth_scale,
        "link_latency_scale": link_latency_scale,
        "switch_latency_scale": switch_latency_scale,
        "hbm_bandwidth_scale": hbm_bandwidth_scale,
    }
    if not isinstance(topology, Topology):
        raise TopologyError(f"with_overrides: topology {topology!r:.60}: expected a Topology "
                            f"(load one with purlin.load_topology), got {type(topology).__name__}")
    for key, value in changes.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise TopologyError(f"{topology.name}: {key}: must be a number > 0, got {value!r}")
        check_number(f"{topology.name}: {key}", value, hi=1e6, error=TopologyError)
    if in_switch_reduce is not None:
        check_bool(f"{topology.name}: in_switch_reduce", in_switch_reduce, error=TopologyError)
    if name is not None:
        check_str(f"{topology.name}: name", name, error=TopologyError)
    if world is not None:
        check_int(f"{topology.name}: world", world, lo=1, error=TopologyError)
    if world is not None and not topology.loopback:
        raise TopologyError(f"{topology.name}: world: only a loopback topology takes a new world")
    said = [f"{k}={v:g}" for k, v in changes.items() if v != 1]
    said += [f"{k}={v}" for k, v in (("in_switch_reduce", in_switch_reduce), ("world", world)) if v is not None]
    links = tuple(
        dataclasses.replace(
            link,
            bandwidth_gbps=link.bandwidth_gbps * link_bandwidth_scale,
            line_bandwidth_gbps=_scaled(link.line_bandwidth_gbps, link_bandwidth_scale),
            latency_us=link.latency_us * link_latency_scale,
        )
        for link in topology.links
    )
    switches = tuple(
        dataclasses.replace(
            sw,
            latency_us=sw.latency_us * switch_latency_scale,
            in_switch_reduce=sw.in_switch_reduce if in_switch_reduce is None else in_switch_reduce,
        )
        for sw in topology.switches
    )
    gpus = tuple(
        dataclasses.replace(g, hbm_bandwidth_gbps=g.hbm_bandwidth_gbps * hbm_bandwidth_scale) for g in topology.gpus
    )
    return dataclasses.replace(
        topology,
        name=topology.name if name is None else name,
        source=topology.source + (f"; what-if: {', '.join(said)}" if said else ""),
        world=topology.world if world is None else world,
        gpus=gpus,
        switches=switches,
        links=links,
    )


def _scaled(value: float | None, scale: float) -> float | None:
    return None if value is None else value * scale
