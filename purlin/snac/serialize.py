"""Schedule <-> plain dict / JSON. Instruction names in JSON are the class names.

Same schedule, same bytes: keys are sorted and nothing depends on dict order, so plans
cache under a hash of their JSON.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

from purlin.errors import ScheduleError
from purlin.snac.ir import (INSTRUCTIONS, SCHEMA_VERSION, Copy, Notify, Program, PutPackets,
                            Reduce, Ref, Schedule, Wait, WaitPackets)
from purlin.spec.collective import Collective
from purlin.spec.layout import Layout

_BY_NAME = {cls.__name__: cls for cls in INSTRUCTIONS}


def _ref(r: Ref) -> list:
    return [r.rank, r.buffer, r.offset]


def instr_to_dict(ins) -> dict:
    d: dict[str, Any] = {"instr": type(ins).__name__}
    for name in ins.__slots__:
        v = getattr(ins, name)
        if isinstance(v, Ref):
            v = _ref(v)
        elif isinstance(v, tuple):
            v = [_ref(x) for x in v]
        d[name] = v
    return d


def instr_from_dict(d: dict):
    cls = _BY_NAME.get(d.get("instr"))
    if cls is None:
        raise ScheduleError(f"unknown instruction {d.get('instr')!r}; known: {', '.join(_BY_NAME)}")
    kw = {}
    for name in cls.__slots__:
        v = d[name]
        if name in ("src", "dst"):
            v = Ref(*v)
        elif name in ("srcs", "dsts"):
            v = tuple(Ref(*x) for x in v)
        kw[name] = v
    return cls(**kw)


def collective_to_dict(c: Collective) -> dict:
    return {"name": c.name, "op": c.op, "dtype": c.dtype.name,
            "input": [[[b.name, b.nbytes] for b in blocks] for blocks in c.input.ranks],
            "output": [[[b.name, b.nbytes] for b in blocks] for blocks in c.output.ranks]}


def collective_from_dict(d: dict) -> Collective:
    return Collective(d["name"], Layout.of(d["input"]), Layout.of(d["output"]), d["op"], d["dtype"])


def to_dict(s: Schedule) -> dict:
    return {
        "schema_version": s.schema_version,
        "collective": collective_to_dict(s.collective),
        "topology": s.topology,
        "policy": s.policy,
        "staging_nbytes": s.staging_nbytes,
        "packets_nbytes": s.packets_nbytes,
        "num_signals": s.num_signals,
        "epoch_stride": s.epoch_stride,
        "programs": [{"rank": p.rank, "cta": p.cta, "role": p.role,
                      "instrs": [instr_to_dict(i) for i in p.instrs]} for p in s.programs],
    }


def from_dict(d: dict) -> Schedule:
    version = d.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ScheduleError(f"schedule schema_version {version!r} is not supported "
                            f"(this Purlin reads version {SCHEMA_VERSION})")
    progs = tuple(Program(p["rank"], p["cta"], p["role"],
                          tuple(instr_from_dict(i) for i in p["instrs"])) for p in d["programs"])
    return Schedule(collective_from_dict(d["collective"]), progs, d["staging_nbytes"],
                    d["packets_nbytes"], d["num_signals"], d["epoch_stride"], d.get("policy", {}),
                    d.get("topology", "minimal"), version)


def to_json(s: Schedule, indent: int | None = None) -> str:
    return json.dumps(to_dict(s), sort_keys=True, indent=indent, separators=(",", ":") if indent is None else None)


def from_json(text: str) -> Schedule:
    return from_dict(json.loads(text))


def digest(s: Schedule) -> str:
    """A stable hash of the schedule, for caching compiled plans."""
    return hashlib.sha256(to_json(s).encode()).hexdigest()[:16]


__all__ = ["to_dict", "from_dict", "to_json", "from_json", "digest", "Copy", "Reduce", "Notify",
           "Wait", "PutPackets", "WaitPackets"]
