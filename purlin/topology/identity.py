"""A topology's identity: a canonical dict, a content digest, and the one resolver.

A plan is only as good as the topology it was made for, so a Schedule carries that
topology's name and digest (and the topology itself when it is not a shipped file).
Everything here is about telling two topologies apart and finding one again:

- :func:`to_dict` / :func:`from_dict`: every field that shapes a prediction, as plain
  JSON-able data, and back (the structure checks run again on the way in);
- :func:`digest`: a hash of that content (name, source and description left out: they
  do not change what a plan or a prediction does);
- :func:`shipped_name`: the shipped file a topology is, if it is one unchanged;
- :func:`resolve_topology`: the one place that turns what a user passes (a Topology, a
  shipped name, a YAML path, or nothing) into a Topology for a given world.
"""
from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from purlin.errors import TopologyError
from purlin.topology.load import list_topologies, load_topology
from purlin.topology.model import Gpu, Link, Switch, Topology
from purlin.topology.synthetic import minimal

_GPU_FIELDS = ("name", "hbm_bandwidth_gbps", "sms", "copy_engines", "nvlink_per_sm_gbps",
               "memory_gib", "compute_capability")
_SWITCH_FIELDS = ("name", "latency_us", "in_switch_reduce", "ports")
_LINK_FIELDS = ("src", "dst", "bandwidth_gbps", "latency_us", "link_class", "line_bandwidth_gbps")
_FLOATS = {"hbm_bandwidth_gbps", "nvlink_per_sm_gbps", "memory_gib", "latency_us",
           "bandwidth_gbps", "line_bandwidth_gbps"}   # 10 and 10.0 are one topology


def _value(obj: Any, name: str) -> Any:
    v = getattr(obj, name)
    return float(v) if name in _FLOATS and v is not None and not isinstance(v, bool) else v
_CONTENT = ("gpu_kind", "world", "loopback", "gpus", "switches", "links")


def to_dict(t: Topology) -> dict[str, Any]:
    """Every field of ``t`` as plain data (lists of field values per part).

    Examples
    --------
    >>> d = to_dict(minimal(2))
    >>> d["world"], d["gpus"][0][:2], len(d["links"])
    (2, ['gpu0', 1000.0], 4)
    """
    return {
        "name": t.name, "source": t.source, "description": t.description,
        "gpu_kind": t.gpu_kind, "world": t.world, "loopback": t.loopback,
        "gpus": [[_value(g, f) for f in _GPU_FIELDS] for g in t.gpus],
        "switches": [[_value(s, f) for f in _SWITCH_FIELDS] for s in t.switches],
        "links": [[_value(link, f) for f in _LINK_FIELDS] for link in t.links],
    }


def from_dict(d: Mapping[str, Any], where: str = "topology") -> Topology:
    """The Topology :func:`to_dict` gave; a malformed dict raises TopologyError.

    Examples
    --------
    >>> t = minimal(3, bandwidth_gbps=10)
    >>> from_dict(to_dict(t)) == t
    True
    """
    if not isinstance(d, Mapping):
        raise TopologyError(f"{where}: expected a mapping, got {type(d).__name__}")
    missing = [k for k in ("name",) + _CONTENT if k not in d]
    if missing:
        raise TopologyError(f"{where}: missing field(s) {', '.join(missing)}")

    if not isinstance(d["loopback"], bool):
        raise TopologyError(f"{where}: loopback: must be true or false, got {d['loopback']!r:.40}")

    def parts(key: str, cls: type, names: tuple[str, ...]) -> tuple:
        rows = d[key]
        if not isinstance(rows, list):
            raise TopologyError(f"{where}: {key}: expected a list, got {type(rows).__name__}")
        out = []
        for i, row in enumerate(rows):
            if not isinstance(row, list) or len(row) != len(names):
                raise TopologyError(f"{where}: {key}[{i}]: expected a list of {len(names)} values "
                                    f"({', '.join(names)})")
            out.append(cls(**dict(zip(names, row))))
        return tuple(out)

    try:
        return Topology(name=str(d["name"]), source=str(d.get("source", "")),
                        gpu_kind=str(d["gpu_kind"]), world=d["world"],
                        gpus=parts("gpus", Gpu, _GPU_FIELDS),
                        switches=parts("switches", Switch, _SWITCH_FIELDS),
                        links=parts("links", Link, _LINK_FIELDS),
                        loopback=bool(d["loopback"]), description=str(d.get("description", "")))
    except TopologyError as e:
        raise TopologyError(f"{where}: {e}") from None
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as e:
        raise TopologyError(f"{where}: malformed topology data ({type(e).__name__}: {e})") from None


def digest(t: Topology) -> str:
    """A stable hash of what ``t`` is (not what it is called or where it comes from);
    cached on the topology.

    Examples
    --------
    >>> from purlin.topology import with_overrides
    >>> digest(minimal(4)) == digest(minimal(4)) != digest(with_overrides(minimal(4), link_bandwidth_scale=2))
    True
    """
    cached = t._routes.get("digest")
    if cached is None:
        d = to_dict(t)
        text = json.dumps({k: d[k] for k in _CONTENT}, sort_keys=True, separators=(",", ":"))
        cached = t._routes["digest"] = hashlib.sha256(text.encode()).hexdigest()[:16]
    return cached


@lru_cache(maxsize=256)
def _shipped_digest(name: str, world: int) -> str | None:
    try:
        t = load_topology(name)
        if t.loopback and t.world != world:
            t = load_topology(name, world=world)
    except TopologyError:
        return None
    return digest(t) if t.world == world else None


def shipped_name(t: Topology) -> str | None:
    """``t.name`` if ``t`` is that shipped file unchanged (at its world), else None.

    Examples
    --------
    >>> from purlin.topology import with_overrides
    >>> shipped_name(load_topology("h200-loopback", world=4))
    'h200-loopback'
    >>> shipped_name(with_overrides(load_topology("hgx-h200-8"), link_bandwidth_scale=2)) is None
    True
    """
    if t.name not in list_topologies():
        return None
    return t.name if _shipped_digest(t.name, t.world) == digest(t) else None


@lru_cache(maxsize=64)
def load_shipped(name: str, world: int) -> Topology:
    """The shipped topology ``name`` with ``world`` ranks (loopback files take any world);
    cached, since shipped files do not change while a process runs."""
    t = load_topology(name)
    if t.loopback and t.world != world:
        t = load_topology(name, world=world)
    if t.world != world:
        raise TopologyError(f"topology {name} has {t.world} ranks, not {world}")
    return t


def resolve_topology(topology: Topology | str | Path | None, world: int | None = None) -> Topology:
    """The Topology a user means: given, a shipped name or YAML path (a loopback file
    takes ``world`` ranks), or, when None, a synthetic switch of ``world`` GPUs.

    Raises
    ------
    TopologyError
        If the name or file is unknown or invalid, if it is not a Topology, a name or a
        path, or if its rank count is not ``world``.

    Examples
    --------
    >>> resolve_topology("h200-loopback", 4).world, resolve_topology(None, 3).name
    (4, 'minimal-3')
    """
    if world is not None and (isinstance(world, bool) or not isinstance(world, int) or world < 1):
        raise TopologyError(f"world {world!r}: must be an integer >= 1 (a rank count)")
    if topology is None:
        if world is None:
            raise TopologyError("no topology and no world given: pass topology= (a name from "
                                "purlin.list_topologies(), a YAML path or a Topology)")
        return minimal(world)
    if isinstance(topology, (str, Path)):
        t = load_topology(topology)
        if t.loopback and world is not None and t.world != world:
            t = load_topology(topology, world=world)
    elif isinstance(topology, Topology):
        t = topology
    else:
        raise TopologyError(f"topology {topology!r}: expected a Topology, a shipped name "
                            f"(one of {', '.join(list_topologies())}) or a path to a .yaml file, "
                            f"got {type(topology).__name__}")
    if world is not None and t.world != world:
        raise TopologyError(f"world size mismatch: topology {t.name} has {t.world} ranks, the "
                            f"collective has {world} (only a loopback topology takes any world)")
    return t


def loopback_for(gpu_name: str, world: int) -> Topology:
    """The shipped loopback topology of the GPU called ``gpu_name`` (as the driver names
    it, e.g. "NVIDIA H200") with ``world`` ranks: the one whose ``gpu_kind`` the name
    holds, so a loopback world plans with that GPU's numbers and its codesign table; a
    GPU no loopback file describes gets the generic :func:`minimal` loopback.

    Examples
    --------
    >>> loopback_for("NVIDIA H200", 4).name, loopback_for("Some Future GPU", 4).name
    ('h200-loopback', 'minimal-loopback-4')
    """
    from purlin.topology.synthetic import minimal
    words = set(gpu_name.lower().replace("-", " ").split())
    for name in list_topologies():
        if name.endswith("-loopback"):
            t = load_shipped(name, world)
            if t.loopback and t.gpu_kind and t.gpu_kind.lower() in words:
                return t
    return minimal(world, loopback=True)
