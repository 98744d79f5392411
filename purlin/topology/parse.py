"""Turn a topology mapping (as read from YAML) into a Topology, checking every field.

Parse is dict in, Topology out; it never opens a file (that is ``load``). Every
error names the place (``where``, usually the file name) and the key path, and says
what is wrong, e.g. ``hgx-h200-8.yaml: links[0].bandwidth_gbps: must be > 0, got -5``.

The schema, one mapping per level (``*`` marks required fields)::

    schema_version: 1            # optional; only 1 exists
    name*: str
    source*: str                 # where the numbers come from
    description: str
    gpu_kind*: str               # lower-case id, picks a calibration file
    gpus*: int                   # GPU count; GPUs are gpu0..gpu<n-1>
    loopback: bool               # default false; then gpus must be 1
    ranks: int                   # loopback only (required there): virtual ranks
    gpu*:                        # every GPU of the system
      hbm_bandwidth_gbps*, sms*, copy_engines*, nvlink_per_sm_gbps*, memory_gib*
      compute_capability: str    # quoted, e.g. "9.0"
    switches: list of
      name*, latency_us*, in_switch_reduce*: bool, ports*: int, description
    links: list of groups, each
      bandwidth_gbps*            # effective, per direction
      line_bandwidth_gbps        # nominal, per direction, >= bandwidth_gbps
      latency_us*, link_class*: nvlink | xgmi | pcie | hbm, description
      and exactly one of
        pairs: [[a, b], ...]     # one bidirectional link per pair
        star: <node>             # every GPU to <node>
        all_pairs: true          # every GPU pair (full mesh)

Each bidirectional link becomes two directed resources, one per direction.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from purlin.errors import TopologyError
from purlin.topology.model import (LINK_CLASSES, RANGES, Gpu, Link, Switch, Topology,
                                   check_structure)

SCHEMA_VERSION = 1

MAX_GPUS = 1 << 16
"""Most GPUs a file may describe (the largest announced scale-up domain has 576)."""
MAX_LINKS = 1 << 20
"""Most bidirectional links a file may describe (``all_pairs`` over n GPUs makes
n(n-1)/2): past this the graph alone takes gigabytes."""

_TOP_REQUIRED = ("name", "source", "gpu_kind", "gpus", "gpu")
_TOP_OPTIONAL = ("schema_version", "description", "loopback", "ranks", "switches", "links")
_GPU_REQUIRED = ("hbm_bandwidth_gbps", "sms", "copy_engines", "nvlink_per_sm_gbps", "memory_gib")
_GPU_OPTIONAL = ("compute_capability",)
_SWITCH_REQUIRED = ("name", "latency_us", "in_switch_reduce", "ports")
_SWITCH_OPTIONAL = ("description",)
_LINK_REQUIRED = ("bandwidth_gbps", "latency_us", "link_class")
_LINK_SHAPES = ("pairs", "star", "all_pairs")
_LINK_OPTIONAL = ("line_bandwidth_gbps", "description", *_LINK_SHAPES)
_GPU_KIND = re.compile(r"[a-z0-9_-]+")
_SWITCH_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def parse_topology(data: Mapping[str, Any], where: str = "<dict>", world: int | None = None) -> Topology:
    """Check a topology mapping and build the Topology it describes.

    Parameters
    ----------
    data : mapping
        The content of a topology YAML file (see the module docstring for fields).
    where : str
        Names the input in error messages, usually the file name.
    world : int, optional
        Rank count for a loopback topology, replacing its ``ranks``; for any other
        topology it must equal the GPU count.

    Raises
    ------
    TopologyError
        On an unknown or missing field, a wrong type, a value out of range, an unknown
        or duplicate node, a duplicate link, or a GPU that cannot reach another.

    Examples
    --------
    >>> t = parse_topology({
    ...     "name": "two", "source": "doc example", "gpu_kind": "x", "gpus": 2,
    ...     "gpu": {"hbm_bandwidth_gbps": 1000, "sms": 4, "copy_engines": 1,
    ...             "nvlink_per_sm_gbps": 10, "memory_gib": 1},
    ...     "links": [{"pairs": [["gpu0", "gpu1"]], "bandwidth_gbps": 50,
    ...                "latency_us": 0.5, "link_class": "nvlink"}]})
    >>> t.world, [link.id for link in t.links]
    (2, ['gpu0->gpu1', 'gpu1->gpu0'])
    >>> parse_topology({"name": "x"}, where="x.yaml")
    Traceback (most recent call last):
    ...
    purlin.errors.TopologyError: x.yaml: source: missing required field
    """
    p = _Fields(where)
    top = p.mapping(data, "", _TOP_REQUIRED, _TOP_OPTIONAL)
    version = p.integer(top, "", "schema_version", default=SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise TopologyError(f"{where}: schema_version: must be {SCHEMA_VERSION}, got {version}")
    name = p.string(top, "", "name")
    kind = p.string(top, "", "gpu_kind")
    if not _GPU_KIND.fullmatch(kind):
        raise TopologyError(f"{where}: gpu_kind: must match [a-z0-9_-]+, got {kind!r}")
    loopback = p.boolean(top, "", "loopback", default=False)
    count = p.integer(top, "", "gpus", low=1, high=MAX_GPUS)
    ranks = _parse_world(p, top, loopback, count, world)
    gpus = _parse_gpus(p, top["gpu"], count)
    switches = _parse_switches(p, top.get("switches", []))
    links = _parse_links(p, top.get("links", []), gpus, switches)
    check_structure(where, gpus, switches, links, loopback, ranks)
    return Topology(
        name=name,
        source=p.string(top, "", "source"),
        gpu_kind=kind,
        world=ranks,
        gpus=gpus,
        switches=switches,
        links=links,
        loopback=loopback,
        description=p.string(top, "", "description", default=""),
    )


def _parse_world(p: _Fields, top: dict, loopback: bool, count: int, world: int | None) -> int:
    """The rank count: ``ranks`` (or the ``world`` argument) for loopback, else ``gpus``."""
    if not loopback:
        if "ranks" in top:
            raise TopologyError(f"{p.where}: ranks: only a loopback topology takes ranks (set loopback: true)")
        if world is not None and world != count:
            raise TopologyError(
                f"{p.where}: world={world} asked for, but this topology has {count} GPUs; "
                "only a loopback topology takes a world"
            )
        return count
    if count != 1:
        raise TopologyError(f"{p.where}: gpus: a loopback topology has exactly 1 GPU, got {count}")
    if world is not None:
        return p.integer({"world": world}, "", "world", low=1)
    if "ranks" not in top:
        raise TopologyError(f"{p.where}: ranks: missing required field (a loopback topology needs it)")
    return p.integer(top, "", "ranks", low=1)


def _parse_gpus(p: _Fields, raw: Any, count: int) -> tuple[Gpu, ...]:
    gpu = p.mapping(raw, "gpu", _GPU_REQUIRED, _GPU_OPTIONAL)
    numbers = dict(
        hbm_bandwidth_gbps=p.number(gpu, "gpu", "hbm_bandwidth_gbps", positive=True),
        sms=p.integer(gpu, "gpu", "sms", low=1, high=RANGES["sms"][1]),
        copy_engines=p.integer(gpu, "gpu", "copy_engines", low=0, high=RANGES["copy_engines"][1]),
        nvlink_per_sm_gbps=p.number(gpu, "gpu", "nvlink_per_sm_gbps", positive=True),
        memory_gib=p.number(gpu, "gpu", "memory_gib", positive=True),
        compute_capability=p.string(gpu, "gpu", "compute_capability", default=None),
    )
    return tuple(Gpu(name=f"gpu{i}", **numbers) for i in range(count))


def _parse_switches(p: _Fields, raw: Any) -> tuple[Switch, ...]:
    switches, names = [], set()
    for i, item in enumerate(p.sequence(raw, "switches")):
        at = f"switches[{i}]"
        sw = p.mapping(item, at, _SWITCH_REQUIRED, _SWITCH_OPTIONAL)
        name = p.string(sw, at, "name")
        if not _SWITCH_NAME.fullmatch(name) or re.fullmatch(r"gpu[0-9]+", name):
            raise TopologyError(
                f"{p.where}: {at}.name: {name!r} must match [A-Za-z_][A-Za-z0-9_-]* and not be a GPU name (gpu<i>)"
            )
        if name in names:
            raise TopologyError(f"{p.where}: {at}.name: duplicate name {name!r}")
        names.add(name)
        p.string(sw, at, "description", default="")
        switches.append(
            Switch(
                name=name,
                latency_us=p.number(sw, at, "latency_us"),
                in_switch_reduce=p.boolean(sw, at, "in_switch_reduce"),
                ports=p.integer(sw, at, "ports", low=1, high=RANGES["ports"][1]),
            )
        )
    return tuple(switches)


def _parse_links(p: _Fields, raw: Any, gpus: tuple[Gpu, ...], switches: tuple[Switch, ...]) -> tuple[Link, ...]:
    nodes = [g.name for g in gpus] + [s.name for s in switches]
    owner: dict[frozenset[str], str] = {}
    links = []
    groups = p.sequence(raw, "links")
    _check_link_count(p, groups, len(gpus))
    for i, item in enumerate(groups):
        at = f"links[{i}]"
        group = p.mapping(item, at, _LINK_REQUIRED, _LINK_OPTIONAL)
        bandwidth = p.number(group, at, "bandwidth_gbps", positive=True)
        line = p.number(group, at, "line_bandwidth_gbps", positive=True, default=None)
        if line is not None and line < bandwidth:
            raise TopologyError(
                f"{p.where}: {at}.line_bandwidth_gbps: must be >= bandwidth_gbps {bandwidth:g}, got {line:g}"
            )
        latency = p.number(group, at, "latency_us")
        cls = p.string(group, at, "link_class")
        if cls not in LINK_CLASSES:
            raise TopologyError(f"{p.where}: {at}.link_class: must be one of {list(LINK_CLASSES)}, got {cls!r}")
        p.string(group, at, "description", default="")
        for path, a, b in _link_ends(p, group, at, nodes, len(gpus)):
            key = frozenset((a, b))
            if a == b:
                raise TopologyError(f"{p.where}: {path}: a link cannot join {a!r} to itself")
            if key in owner:
                raise TopologyError(f"{p.where}: {path}: duplicate link {a}-{b} (already in {owner[key]})")
            owner[key] = path
            for src, dst in ((a, b), (b, a)):
                links.append(Link(src, dst, bandwidth, latency, cls, line))
    return tuple(links)


def _check_link_count(p: _Fields, groups: list, gpus: int) -> None:
    """Refuse a file whose links would exceed MAX_LINKS before any is built."""
    total = 0
    for item in groups:
        if isinstance(item, Mapping):
            if item.get("all_pairs") is True:
                total += gpus * (gpus - 1) // 2
            elif "star" in item:
                total += gpus
            elif isinstance(item.get("pairs"), list):
                total += len(item["pairs"])
    if total > MAX_LINKS:
        raise TopologyError(f"{p.where}: links: {total:,} links, more than the {MAX_LINKS:,} a "
                            f"topology may have (all_pairs over {gpus} GPUs makes "
                            f"{gpus * (gpus - 1) // 2:,}); use a switch (star) instead")


def _link_ends(p: _Fields, group: dict, at: str, nodes: list[str], count: int) -> list[tuple[str, str, str]]:
    """(key path, a, b) for each bidirectional link of a group."""
    shapes = [s for s in _LINK_SHAPES if s in group]
    if len(shapes) != 1:
        raise TopologyError(f"{p.where}: {at}: give exactly one of {', '.join(_LINK_SHAPES)}, got {shapes or 'none'}")
    gpus = [f"gpu{i}" for i in range(count)]
    if shapes[0] == "star":
        hub = p.node(group, at, "star", nodes)
        return [(f"{at}.star", g, hub) for g in gpus]
    if shapes[0] == "all_pairs":
        if p.boolean(group, at, "all_pairs") is not True:
            raise TopologyError(f"{p.where}: {at}.all_pairs: only true is meaningful, got false")
        return [(f"{at}.all_pairs", a, b) for i, a in enumerate(gpus) for b in gpus[i + 1 :]]
    ends = []
    for j, pair in enumerate(p.sequence(group["pairs"], f"{at}.pairs")):
        here = f"{at}.pairs[{j}]"
        if not isinstance(pair, list) or len(pair) != 2:
            raise TopologyError(f"{p.where}: {here}: must be a list of 2 node names, got {pair!r}")
        a = p.node({0: pair[0]}, here, 0, nodes)
        b = p.node({1: pair[1]}, here, 1, nodes)
        ends.append((here, a, b))
    return ends


class _Fields:
    """Typed field readers that raise TopologyError naming ``where`` and the key path."""

    def __init__(self, where: str) -> None:
        self.where = where

    def _fail(self, at: str, key: Any, reason: str) -> TopologyError:
        path = f"{at}[{key}]" if isinstance(key, int) else (f"{at}.{key}" if at else str(key))
        return TopologyError(f"{self.where}: {path}: {reason}")

    def mapping(self, raw: Any, at: str, required: tuple[str, ...], optional: tuple[str, ...]) -> dict:
        if not isinstance(raw, Mapping):
            raise TopologyError(f"{self.where}: {at or '<top>'}: must be a mapping, got {type(raw).__name__}")
        allowed = (*required, *optional)
        for key in raw:
            if key not in allowed:
                raise self._fail(at, key, f"unknown field; allowed: {', '.join(sorted(allowed))}")
        for key in required:
            if key not in raw:
                raise self._fail(at, key, "missing required field")
        return dict(raw)

    def sequence(self, raw: Any, at: str) -> list:
        if not isinstance(raw, list):
            raise TopologyError(f"{self.where}: {at}: must be a list, got {type(raw).__name__}")
        return raw

    def number(self, d: dict, at: str, key: str, positive: bool = False, default: Any = ...) -> Any:
        if key not in d and default is not ...:
            return default
        value = d[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            hint = ""
            if isinstance(value, str) and re.fullmatch(r"[-+]?[0-9.]+[eE][-+]?[0-9]+", value.strip()):
                hint = " (YAML reads 1e3 as text: write 1.0e+3)"
            raise self._fail(at, key, f"must be a number, got {type(value).__name__} {_short(value)}{hint}")
        if value != value or value in (float("inf"), float("-inf")):
            raise self._fail(at, key, f"must be finite, got {value}")
        if positive and value <= 0:
            raise self._fail(at, key, f"must be > 0, got {value}")
        if value < 0:
            raise self._fail(at, key, f"must be >= 0, got {value}")
        lo, hi = RANGES.get(key, (0.0, float("inf")))
        if not lo <= value <= hi:
            raise self._fail(at, key, f"must be in [{lo:g}, {hi:g}] (a sanity bound on the "
                                      f"unit in its name), got {_short(value)}")
        return float(value)

    def integer(self, d: dict, at: str, key: str, low: int = 0, default: Any = ...,
                high: int | None = None) -> Any:
        if key not in d and default is not ...:
            return default
        value = d[key]
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._fail(at, key, f"must be an integer, got {type(value).__name__} {_short(value)}")
        if value < low:
            raise self._fail(at, key, f"must be >= {low}, got {value}")
        if high is not None and value > high:
            raise self._fail(at, key, f"must be <= {high:,}, got {_short(value)}")
        return value

    def boolean(self, d: dict, at: str, key: str, default: Any = ...) -> Any:
        if key not in d and default is not ...:
            return default
        if not isinstance(d[key], bool):
            raise self._fail(at, key, f"must be true or false, got {type(d[key]).__name__} {_short(d[key])}")
        return d[key]

    def string(self, d: dict, at: str, key: str, default: Any = ...) -> Any:
        if key not in d and default is not ...:
            return default
        value = d[key]
        if not isinstance(value, str) or not value.strip():
            hint = " (quote it)" if key == "compute_capability" and isinstance(value, (int, float)) else ""
            raise self._fail(at, key, f"must be a non-empty string{hint}, got {type(value).__name__} {_short(value)}")
        return value

    def node(self, d: dict, at: str, key: Any, nodes: list[str]) -> str:
        value = self.string(d, at, key)
        if value not in nodes:
            raise self._fail(at, key, f"unknown node {value!r}; known: {_summary(nodes)}")
        return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _summary(nodes: list[str]) -> str:
    """``gpu0..gpu7, nvswitch``: GPUs as a range, switches by name."""
    gpus = [n for n in nodes if re.fullmatch(r"gpu[0-9]+", n)]
    rest = [n for n in nodes if n not in gpus]
    head = [f"{gpus[0]}..{gpus[-1]}"] if len(gpus) > 1 else gpus
    return ", ".join(head + rest)
