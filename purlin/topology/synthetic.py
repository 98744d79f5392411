"""Topologies built in code, for tests and the planner when no file is wanted.

The default numbers are round, synthetic values, not any product: they only keep
arithmetic in doctests easy to follow. Pass real numbers, or load a YAML file, to
model hardware.
"""

from __future__ import annotations

from purlin.check import check_bool, check_int
from purlin.errors import TopologyError
from purlin.topology.model import Gpu, Link, Switch, Topology


def minimal(
    world: int,
    *,
    bandwidth_gbps: float = 100.0,
    latency_us: float = 0.05,
    switch_latency_us: float = 0.4,
    in_switch_reduce: bool = False,
    hbm_bandwidth_gbps: float = 1000.0,
    sms: int = 16,
    copy_engines: int = 2,
    nvlink_per_sm_gbps: float = 10.0,
    memory_gib: float = 16.0,
    link_class: str = "nvlink",
    loopback: bool = False,
) -> Topology:
    """A fully connected ``world``-rank topology: every GPU on one switch.

    All numeric defaults are synthetic (round numbers, no real GPU). With
    ``loopback=True`` the ``world`` ranks share one GPU and there are no links.

    Parameters
    ----------
    world : int
        Number of ranks (and GPUs unless loopback).
    bandwidth_gbps, latency_us : float
        Each GPU-switch link, per direction (GB/s, microseconds).
    switch_latency_us : float
        Latency of crossing the switch.
    in_switch_reduce : bool
        Whether the switch can reduce (NVLS-style).
    hbm_bandwidth_gbps, sms, copy_engines, nvlink_per_sm_gbps, memory_gib
        Per-GPU numbers, as in the YAML ``gpu`` block.
    link_class : str
        Class of the links.
    loopback : bool
        Build a single-GPU loopback topology instead.

    Examples
    --------
    >>> t = minimal(2)
    >>> t.source, t.world, len(t.links)
    ('synthetic', 2, 4)
    >>> minimal(8, loopback=True).gpus[0].name
    'gpu0'
    """
    world = check_int("minimal: world", world, lo=1, error=TopologyError)
    check_bool("minimal: loopback", loopback, error=TopologyError)
    gpu_count = 1 if loopback else world
    gpus = tuple(
        Gpu(f"gpu{i}", hbm_bandwidth_gbps, sms, copy_engines, nvlink_per_sm_gbps, memory_gib, None)
        for i in range(gpu_count)
    )
    switches: tuple[Switch, ...] = ()
    links: tuple[Link, ...] = ()
    if not loopback:
        switches = (Switch("switch", switch_latency_us, in_switch_reduce, max(world, 1)),)
        links = tuple(
            Link(a, b, bandwidth_gbps, latency_us, link_class)
            for g in gpus
            for a, b in ((g.name, "switch"), ("switch", g.name))
        )
    return Topology(
        name=f"minimal-{'loopback-' if loopback else ''}{world}",
        source="synthetic",
        gpu_kind="synthetic",
        world=world,
        gpus=gpus,
        switches=switches,
        links=links,
        loopback=loopback,
        description="built in code by purlin.topology.minimal; synthetic numbers",
    )
