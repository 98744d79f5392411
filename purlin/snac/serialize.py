"""Schedule <-> plain dict / JSON. Instruction names in JSON are the class names.

Same schedule, same bytes: keys are sorted and nothing depends on dict order, so plans
cache under a hash of their JSON.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

from purlin.errors import PurlinError, ScheduleError
from purlin.snac.ir import (INSTRUCTIONS, SCHEMA_VERSION, Copy, Notify, Program, PutPackets,
                            Reduce, Ref, Schedule, TopologyRef, Wait, WaitPackets)
from purlin.spec.collective import Collective
from purlin.spec.layout import Layout

_BY_NAME = {cls.__name__: cls for cls in INSTRUCTIONS}


def _ref(r: Ref) -> list:
    return [r.rank, r.buffer, r.offset]


def instr_to_dict(ins) -> dict:
    """One instruction as plain data: its class name under ``instr`` and its fields (Refs as lists)."""
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
    """The instruction :func:`instr_to_dict` gave; ScheduleError for an unknown name."""
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
    """A collective as plain data: name, op, dtype and both layouts as [name, nbytes] lists."""
    return {"name": c.name, "op": c.op, "dtype": c.dtype.name,
            "input": [[[b.name, b.nbytes] for b in blocks] for blocks in c.input.ranks],
            "output": [[[b.name, b.nbytes] for b in blocks] for blocks in c.output.ranks]}


def collective_from_dict(d: dict) -> Collective:
    """The Collective :func:`collective_to_dict` gave."""
    return Collective(d["name"], Layout.of(d["input"]), Layout.of(d["output"]), d["op"], d["dtype"])


def _topology_to_dict(t: TopologyRef | None) -> dict | None:
    if t is None:
        return None
    return {"name": t.name, "digest": t.digest, "world": t.world, "inline": t.inline}


def _topology_from_dict(d: dict | None) -> TopologyRef | None:
    if d is None:
        return None
    if not isinstance(d, dict) or set(d) != {"name", "digest", "world", "inline"}:
        raise ScheduleError("schedule field topology: expected null or {name, digest, world, inline}")
    if not (isinstance(d["name"], str) and isinstance(d["digest"], str)
            and isinstance(d["world"], int) and isinstance(d["inline"], (str, type(None)))):
        raise ScheduleError("schedule field topology: name and digest are strings, world an int, "
                            "inline a string or null")
    return TopologyRef(d["name"], d["digest"], d["world"], d["inline"])


def to_dict(s: Schedule) -> dict:
    """The schedule as plain data (JSON-able); :func:`from_dict` inverts it."""
    return {
        "schema_version": s.schema_version,
        "collective": collective_to_dict(s.collective),
        "topology": _topology_to_dict(s.topology),
        "reduction": s.reduction,
        "policy": s.policy,
        "staging_nbytes": s.staging_nbytes,
        "packets_nbytes": s.packets_nbytes,
        "num_signals": s.num_signals,
        "epoch_stride": s.epoch_stride,
        "programs": [{"rank": p.rank, "cta": p.cta, "role": p.role,
                      "instrs": [instr_to_dict(i) for i in p.instrs]} for p in s.programs],
    }


def from_dict(d: dict) -> Schedule:
    """The Schedule :func:`to_dict` gave. Raises ScheduleError naming the field when
    ``d`` is not one (the verifier then checks what it says)."""
    if not isinstance(d, dict):
        raise ScheduleError(f"a schedule is a JSON object, got {type(d).__name__}")
    version = d.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ScheduleError(f"schedule schema_version {version!r} is not supported "
                            f"(this Purlin reads version {SCHEMA_VERSION}; plan it again)")
    try:
        progs = tuple(Program(p["rank"], p["cta"], p["role"],
                              tuple(instr_from_dict(i) for i in p["instrs"])) for p in d["programs"])
        s = Schedule(collective_from_dict(d["collective"]), progs, d["staging_nbytes"],
                     d["packets_nbytes"], d["num_signals"], d["epoch_stride"],
                     topology=_topology_from_dict(d["topology"]), reduction=d["reduction"],
                     policy=d.get("policy", {}), schema_version=version)
    except KeyError as e:
        raise ScheduleError(f"schedule: missing field {e}") from None
    except PurlinError:
        raise
    except (TypeError, ValueError, AttributeError, IndexError) as e:
        raise ScheduleError(f"schedule: malformed field ({type(e).__name__}: {e})") from None
    return s


def to_json(s: Schedule, indent: int | None = None) -> str:
    """Canonical JSON (sorted keys; compact unless ``indent``): same schedule, same text."""
    return json.dumps(to_dict(s), sort_keys=True, indent=indent, separators=(",", ":") if indent is None else None)


def from_json(text: str) -> Schedule:
    """The Schedule in ``text`` (from :func:`to_json`); ScheduleError if it is not one."""
    try:
        data = json.loads(text)
    except (ValueError, TypeError) as e:
        raise ScheduleError(f"schedule: not JSON ({e})") from None
    return from_dict(data)


def digest(s: Schedule) -> str:
    """A stable hash of everything the schedule says (cached on it): what plans and
    compiled kernels are cached under, and what ``hash(schedule)`` uses."""
    d = s.__dict__.get("_digest")
    if d is None:
        d = hashlib.sha256(to_json(s).encode()).hexdigest()[:16]
        object.__setattr__(s, "_digest", d)
    return d


def programs_digest(s: Schedule) -> str:
    """A hash of the programs alone (not the metadata around them): two plans with the
    same programs run the same instructions, whatever their policy or topology label."""
    h = hashlib.sha256()
    for p in s.programs:
        h.update(json.dumps([p.rank, p.cta, p.role, [instr_to_dict(i) for i in p.instrs]],
                            sort_keys=True, separators=(",", ":")).encode())
    return h.hexdigest()[:16]


__all__ = ["to_dict", "from_dict", "to_json", "from_json", "digest", "programs_digest", "Copy", "Reduce", "Notify",
           "Wait", "PutPackets", "WaitPackets"]
