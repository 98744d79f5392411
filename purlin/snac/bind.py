"""The Schedule's topology contract: what a plan names, and finding it again.

A Schedule names the topology it was planned for (:class:`~purlin.snac.ir.TopologyRef`).
Executors never guess it from a name: they call :func:`bind_topology`, which rebuilds
it from the Schedule (a shipped file by name, anything else from the copy the
Schedule carries) or checks that the one they were handed is the same, and refuses
otherwise.
"""
from __future__ import annotations

import json
from pathlib import Path

from purlin.errors import ScheduleError
from purlin.snac.ir import Schedule, TopologyRef
from purlin.topology import Topology
from purlin.topology import identity


def topology_ref(t: Topology) -> TopologyRef:
    """How a Schedule names ``t``: by name alone when it is a shipped file unchanged,
    else with its content inline.

    Examples
    --------
    >>> from purlin.topology import load_topology, minimal
    >>> topology_ref(load_topology("hgx-h200-8")).inline is None
    True
    >>> topology_ref(minimal(2)).inline is None
    False
    """
    shipped = identity.shipped_name(t)
    inline = None if shipped else json.dumps(identity.to_dict(t), sort_keys=True,
                                             separators=(",", ":"))
    return TopologyRef(t.name, identity.digest(t), t.world, inline)


def bind_topology(s: Schedule, topology: Topology | str | Path | None = None) -> Topology:
    """The topology ``s`` was planned for: rebuilt from ``s`` when ``topology`` is None,
    else ``topology`` once it is known to be that same one.

    Raises
    ------
    ScheduleError
        If ``topology`` differs from the one ``s`` was planned for, if ``s`` names none
        and none is given, or if the shipped file it names has changed since.

    Examples
    --------
    >>> from purlin.snac import plan
    >>> from purlin.spec import library
    >>> from purlin.topology import minimal
    >>> s = plan(library.all_gather(4, 64), minimal(4, bandwidth_gbps=10))
    >>> bind_topology(s).links[0].bandwidth_gbps
    10.0
    >>> bind_topology(s, minimal(4))
    Traceback (most recent call last):
    ...
    purlin.errors.ScheduleError: the schedule was planned for topology minimal-4 (digest ...
    """
    ref = s.topology
    if topology is not None:
        t = identity.resolve_topology(topology, s.world if not isinstance(topology, Topology) else None)
        if t.world != s.world:
            raise ScheduleError(f"the schedule has {s.world} ranks, topology {t.name} has {t.world}")
        if ref is not None and identity.digest(t) != ref.digest:
            raise ScheduleError(
                f"the schedule was planned for topology {ref.name} (digest {ref.digest}), "
                f"but was given {t.name} (digest {identity.digest(t)}), which differs: plan it "
                f"again on {t.name}, or leave the topology out to use the one it was planned for")
        return t
    if ref is None:
        raise ScheduleError("the schedule names no topology (it was built by hand): pass the "
                            "topology to run it on")
    if ref.inline is not None:
        try:
            data = json.loads(ref.inline)
        except ValueError as e:
            raise ScheduleError(f"the schedule's inline topology {ref.name} is not JSON ({e})") from None
        t = identity.from_dict(data, where=f"the schedule's topology {ref.name}")
    else:
        t = identity.load_shipped(ref.name, ref.world)
    if identity.digest(t) != ref.digest:
        where = "its inline copy" if ref.inline is not None else f"the shipped file {ref.name}.yaml"
        raise ScheduleError(
            f"the schedule was planned for topology {ref.name} with digest {ref.digest}, but "
            f"{where} now has digest {identity.digest(t)}: plan it again")
    return t
