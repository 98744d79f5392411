"""Codesign tables: the default policy per collective, world and size band, as data.

A shipped topology ``X`` has ``topologies/codesign/X.json``, made by ``purlin codesign X``
(:mod:`purlin.sim.codesign`, a search of the planner's policies on the simulator with X's
calibration). The planner reads a table only for the topology it was made for: same name
and same content digest at that world (a what-if topology is another system, so it gets
the generic rules of :mod:`purlin.snac.policy` unless a table is passed to ``plan``).

Format (``schema_version`` 1)::

    {"topology": name, "gpu_kind": ..., "command": ..., "date": ...,
     "calibration": {"gpu_kind": ..., "digest": ...}, "planner": {"fingerprint": ...},
     "search": {...what was searched, its cost...},
     "worlds": {"8": {"topology_digest": ..., "cta_budget": 64,
                      "collectives": {"all_reduce": {"bands": [
                          {"min_nbytes": 0, "max_nbytes": 65536, "policy": {...},
                           "probe": {"nbytes": ..., "programs_digest": ..., "time_us": ...}},
                          ...], "points": [...]}}}}}

A band covers per-rank buffers (the largest buffer of any rank) in ``(min_nbytes,
max_nbytes]``; the first band also covers smaller ones and the last larger ones, unless
the table says ``"beyond": "generic"`` (``purlin codesign --beyond generic``): then past
its last band the generic rules choose (a search over small sizes only, say, claims
nothing about large ones).
"""
from __future__ import annotations

import json
import logging
from functools import lru_cache
from typing import Any, Mapping

from purlin.errors import PlanError
from purlin.snac.policy import Policy

log = logging.getLogger("purlin.codesign")

SCHEMA_VERSION = 1
FOLDER = "codesign"


def table_path(name: str):
    """Where the shipped table of topology ``name`` lives (it may not exist)."""
    from purlin.topology import data_root
    return data_root().joinpath(FOLDER).joinpath(f"{name}.json")


@lru_cache(maxsize=64)
def shipped_table(name: str) -> dict | None:
    """The shipped codesign table of topology ``name``, or None if it has none."""
    path = table_path(name)
    if not path.is_file():
        return None
    where = f"topologies/{FOLDER}/{name}.json"
    return {**parse_table(json.loads(path.read_text()), where), "file": where}


def parse_table(doc: Mapping[str, Any], where: str = "<table>") -> dict:
    """Check the shape of a codesign table (as loaded from JSON) and return it."""
    if not isinstance(doc, Mapping) or doc.get("schema_version") != SCHEMA_VERSION:
        raise PlanError(f"{where}: not a codesign table of schema_version {SCHEMA_VERSION} "
                        f"(regenerate it with purlin codesign)")
    for w, entry in doc.get("worlds", {}).items():
        for name, coll in entry.get("collectives", {}).items():
            if not coll.get("bands"):
                raise PlanError(f"{where}: world {w}, {name}: no bands")
    return dict(doc)


def _band(bands: list, nbytes: int) -> dict:
    for band in bands:           # in ascending max_nbytes
        if nbytes <= band["max_nbytes"]:
            return band
    return bands[-1]


def past_table(t: Mapping, bands: list, nbytes: int) -> bool:
    """Whether ``nbytes`` lies past the last band of a table that leaves larger sizes to
    the generic rules."""
    return t.get("beyond", "last-band") == "generic" and nbytes > bands[-1]["max_nbytes"]


def lookup(tables, collective: str, topology: str | None, world: int | None,
           nbytes: int, digest: str | None = None) -> tuple[Policy, dict] | None:
    """The policy a table gives for this case and where it came from, or None.

    ``tables``: a codesign table, a sweep's ``best_policy_table`` output, or a list of
    them. A codesign table answers only for its topology name, for a world it holds and,
    when ``digest`` is given, for that topology digest at that world.
    """
    for t in [tables] if isinstance(tables, Mapping) else list(tables or ()):
        if "worlds" in t:
            hit = _codesign_lookup(t, collective, topology, world, nbytes, digest)
        else:
            hit = _sweep_lookup(t, collective, topology, nbytes)
        if hit is not None:
            return hit
    return None


def _codesign_lookup(t, collective, topology, world, nbytes, digest):
    if topology is not None and t.get("topology") != topology:
        return None
    entry = t["worlds"].get(str(world)) if world is not None else None
    if entry is None or collective not in entry.get("collectives", {}):
        return None
    if digest is not None and entry.get("topology_digest") != digest:
        return None
    bands = entry["collectives"][collective]["bands"]
    if past_table(t, bands, nbytes):
        return None
    band = _band(bands, nbytes)
    where = {"source": "table", "table": t.get("file", f"{FOLDER}/{t.get('topology')}.json"),
             "world": world, "band": [band["min_nbytes"], band["max_nbytes"]],
             "band_index": bands.index(band), "bands": len(bands)}
    return Policy.from_dict(band["policy"]), where


def _sweep_lookup(t, collective, topology, nbytes):
    if t.get("collective") != collective or t.get("topology") not in (topology, None):
        return None
    bands = sorted(t.get("bands", ()), key=lambda b: b["max_nbytes"])
    if not bands:
        return None
    band = _band(bands, nbytes)
    return Policy.from_dict(band["policy"]), {"source": "table", "table": "given (sweep)",
                                              "band": [None, band["max_nbytes"]]}


def shipped_lookup(topology, collective: str, nbytes: int) -> tuple[Policy, dict] | dict:
    """The shipped table's answer for ``topology`` (a Topology), or, when there is none,
    a dict saying why (for the report of where a default came from)."""
    from purlin.topology import shipped_name, topology_digest
    name = shipped_name(topology)
    if name is None:
        return {"why": f"{topology.name} is not a shipped topology unchanged"}
    table = shipped_table(name)
    if table is None:
        return {"why": f"no codesign table ships for {name}"}
    entry = table["worlds"].get(str(topology.world))
    if entry is None:
        return {"why": f"{FOLDER}/{name}.json has no world {topology.world} "
                       f"(it has {', '.join(sorted(table['worlds'], key=int))})"}
    if collective not in entry["collectives"]:
        return {"why": f"{FOLDER}/{name}.json has no {collective}"}
    bands = entry["collectives"][collective]["bands"]
    if past_table(table, bands, nbytes):
        return {"why": f"{FOLDER}/{name}.json covers up to {bands[-1]['max_nbytes']} B "
                       f"(beyond: generic), so larger sizes take the generic rules"}
    digest = topology_digest(topology)
    hit = lookup(table, collective, name, topology.world, nbytes, digest)
    if hit is None:
        return {"why": f"{FOLDER}/{name}.json was made for topology digest "
                       f"{entry.get('topology_digest')}, not {digest} (stale: regenerate it)"}
    log.debug("codesign table %s W=%d %s %d B -> band %s", name, topology.world, collective,
              nbytes, hit[1]["band"])
    return hit
