"""Schedule <-> plain dict / JSON. Instruction names in JSON are the class names.

Same schedule, same bytes: keys are sorted and nothing depends on dict order, so plans
cache under a hash of their JSON.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

from purlin.errors import PurlinError, ScheduleError
from purlin.snac.ir import (ATOMS, BUFFERS, INSTRUCTIONS, REDUCTIONS, SCHEMA_VERSION, Copy, Fan, Notify,
                            Program, PutPackets, Reduce, Ref, Schedule, TopologyRef, Wait,
                            WaitPackets)
from purlin.spec.collective import Collective
from purlin.spec.layout import Layout

_BY_NAME = {cls.__name__: cls for cls in INSTRUCTIONS}
READS = (2, SCHEMA_VERSION)
"""Schema versions :func:`from_dict` reads (an older file is read as this version)."""


def _ref(r: Ref) -> list:
    return [r.rank, r.buffer, r.offset]


def instr_to_dict(ins) -> dict:
    """One instruction as plain data: its class name under ``instr`` and its fields (Refs as lists)."""
    d: dict[str, Any] = {"instr": type(ins).__name__}
    for name in ins.__slots__:
        v = getattr(ins, name)
        if isinstance(v, Ref):
            v = _ref(v)
        elif isinstance(v, (tuple, Fan)):
            v = [_ref(x) if isinstance(x, Ref) else x for x in v]
        d[name] = v
    return d


MAX_NBYTES = 1 << 44
"""Largest byte count or offset a serialized schedule may hold (16 TiB: past any GPU's
memory)."""
_INT_FIELDS = {"nbytes": (1, MAX_NBYTES), "value": (1, 1 << 62)}
_INT_LISTS = {"peers": (0, 1 << 24), "signals": (0, 1 << 24)}
_V2_SINGLE = {"Notify": {"peer": "peers", "signal": "signals"}, "Wait": {"signal": "signals"}}
"""Schema 2 named one flag a Notify or Wait (``peer``, ``signal``); read as a list of one."""


def _int(at: str, v, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ScheduleError(f"schedule {at}: must be an integer, got {type(v).__name__} {v!r:.40}")
    if not lo <= v <= hi:
        raise ScheduleError(f"schedule {at}: must be in {lo}..{hi:,}, got {v:,}")
    return v


def _ref_from(v, at: str, world: int) -> Ref:
    if not isinstance(v, list) or len(v) != 3:
        raise ScheduleError(f"schedule {at}: a buffer address is [rank, buffer, offset], got {v!r:.60}")
    if v[1] not in BUFFERS:
        raise ScheduleError(f"schedule {at}: buffer {v[1]!r:.40} is not one of {', '.join(BUFFERS)}")
    return Ref(_int(f"{at}[0] (rank)", v[0], 0, max(world - 1, 0)), v[1],
               _int(f"{at}[2] (offset)", v[2], 0, MAX_NBYTES))


def instr_from_dict(d: dict, at: str = "instr", world: int = 1 << 24, version: int = SCHEMA_VERSION):
    """The instruction ``d`` describes; ScheduleError naming ``at`` and the field when a
    field is missing, unknown, of the wrong type or out of range. ``version`` 2 reads the
    one-flag Notify and Wait of that schema."""
    if not isinstance(d, dict):
        raise ScheduleError(f"schedule {at}: an instruction is an object, got {type(d).__name__}")
    name = d.get("instr")
    cls = _BY_NAME.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ScheduleError(f"unknown instruction {name!r:.40}; known: {', '.join(_BY_NAME)}")
    if version == 2 and name in _V2_SINGLE:
        d = {_V2_SINGLE[name].get(k, k): ([v] if k in _V2_SINGLE[name] else v) for k, v in d.items()}
    extra = set(d) - set(cls.__slots__) - {"instr"}
    if extra:
        raise ScheduleError(f"schedule {at}: {name} has no field(s) {', '.join(sorted(map(str, extra)))}")
    kw = {}
    for field in cls.__slots__:
        if field not in d:
            raise ScheduleError(f"schedule {at}: {name} is missing field {field!r}")
        v, here = d[field], f"{at}.{field}"
        if field in ("src", "dst"):
            v = _ref_from(v, here, world)
        elif field in ("srcs", "dsts"):
            if not isinstance(v, list) or not v or len(v) > (1 << 20):
                raise ScheduleError(f"schedule {here}: must be a non-empty list of buffer addresses")
            v = tuple(_ref_from(x, f"{here}[{j}]", world) for j, x in enumerate(v))
        elif field in _INT_FIELDS:
            v = _int(here, v, *_INT_FIELDS[field])
        elif field in _INT_LISTS:
            if not isinstance(v, list) or not v or len(v) > (1 << 24):
                raise ScheduleError(f"schedule {here}: must be a non-empty list of integers")
            v = tuple(_int(f"{here}[{j}]", x, *_INT_LISTS[field]) for j, x in enumerate(v))
        elif field == "atom":
            if v not in ATOMS:
                raise ScheduleError(f"schedule {here}: {v!r:.40} is not one of {', '.join(ATOMS)}")
        elif not isinstance(v, str):   # dtype, op: checked against the spec by the verifier
            raise ScheduleError(f"schedule {here}: must be a string, got {type(v).__name__}")
        kw[field] = v
    return cls(**kw)


def collective_to_dict(c: Collective) -> dict:
    """A collective as plain data: name, op, dtype and both layouts as [name, nbytes] lists."""
    return {"name": c.name, "op": c.op, "dtype": c.dtype.name,
            "input": [[[b.name, b.nbytes] for b in blocks] for blocks in c.input.ranks],
            "output": [[[b.name, b.nbytes] for b in blocks] for blocks in c.output.ranks]}


def collective_from_dict(d: dict) -> Collective:
    """The Collective :func:`collective_to_dict` gave; ScheduleError for a malformed one."""
    if not isinstance(d, dict):
        raise ScheduleError(f"schedule collective: expected an object, got {type(d).__name__}")
    for key in ("name", "op", "dtype"):
        if not isinstance(d.get(key), str):
            raise ScheduleError(f"schedule collective.{key}: must be a string, got {d.get(key)!r:.40}")
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
    if version not in READS:
        raise ScheduleError(f"schedule schema_version {version!r} is not supported "
                            f"(this Purlin reads versions {', '.join(map(str, READS))}; plan it again)")
    try:
        c = collective_from_dict(d["collective"])
        c.validate(c.dtype.itemsize)
        world = c.world
        for key, (lo, hi) in (("staging_nbytes", (0, MAX_NBYTES)), ("packets_nbytes", (0, MAX_NBYTES)),
                              ("num_signals", (1, 1 << 24)), ("epoch_stride", (1, 1 << 62))):
            _int(key, d[key], lo, hi)
        if d["reduction"] not in REDUCTIONS:
            raise ScheduleError(f"schedule reduction {d['reduction']!r:.40}: must be one of "
                                f"{', '.join(REDUCTIONS)}")
        if not isinstance(d.get("policy", {}), dict):
            raise ScheduleError("schedule policy: must be an object (report only)")
        if not isinstance(d["programs"], list):
            raise ScheduleError(f"schedule programs: must be a list, got {type(d['programs']).__name__}")
        progs = []
        for k, p in enumerate(d["programs"]):
            at = f"programs[{k}]"
            if not isinstance(p, dict) or set(p) != {"rank", "cta", "role", "instrs"}:
                raise ScheduleError(f"schedule {at}: expected an object with rank, cta, role, instrs")
            if not isinstance(p["role"], str) or not isinstance(p["instrs"], list):
                raise ScheduleError(f"schedule {at}: role is a string and instrs a list")
            progs.append(Program(_int(f"{at}.rank", p["rank"], 0, world - 1),
                                 _int(f"{at}.cta", p["cta"], 0, 1 << 16), p["role"],
                                 tuple(instr_from_dict(i, f"{at}.instrs[{j}]", world, version)
                                       for j, i in enumerate(p["instrs"]))))
        s = Schedule(c, tuple(progs), d["staging_nbytes"], d["packets_nbytes"], d["num_signals"],
                     d["epoch_stride"], topology=_topology_from_dict(d["topology"]),
                     reduction=d["reduction"], policy=d.get("policy", {}))
    except KeyError as e:
        raise ScheduleError(f"schedule: missing field {e}") from None
    except PurlinError as e:
        if isinstance(e, ScheduleError):
            raise
        raise ScheduleError(f"schedule: {e}") from None
    except (TypeError, ValueError, AttributeError, IndexError, RecursionError) as e:
        raise ScheduleError(f"schedule: malformed field ({type(e).__name__}: {e})") from None
    return s


def to_json(s: Schedule, indent: int | None = None) -> str:
    """Canonical JSON (sorted keys; compact unless ``indent``): same schedule, same text."""
    return json.dumps(to_dict(s), sort_keys=True, indent=indent, separators=(",", ":") if indent is None else None)


def from_json(text: str) -> Schedule:
    """The Schedule in ``text`` (from :func:`to_json`); ScheduleError if it is not one."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ScheduleError(f"schedule: not UTF-8 JSON text (byte {e.start})") from None
    if not isinstance(text, str):
        raise ScheduleError(f"schedule: expected JSON text, got {type(text).__name__}")
    try:
        data = json.loads(text)
    except (ValueError, TypeError, RecursionError) as e:
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
    same programs run the same instructions, whatever their policy or topology label.
    Signals are hashed flag by flag, so it does not depend on how a run of flags is
    grouped into Notify and Wait instructions (every executor runs a run of flags alike,
    however grouped): a plan of schema 2 and its schema 3 form hash the same."""
    h = hashlib.sha256()
    for p in s.programs:
        h.update(json.dumps([p.rank, p.cta, p.role, [d for i in p.instrs for d in _flag_dicts(i)]],
                            sort_keys=True, separators=(",", ":")).encode())
    return h.hexdigest()[:16]


def _flag_dicts(ins) -> list[dict]:
    """``ins`` as plain data, a Notify or Wait as one-flag instructions (schema 2's form)."""
    t = type(ins)
    if t is Notify:
        return [{"instr": "Notify", "peer": q, "signal": g, "value": ins.value}
                for q, g in zip(ins.peers, ins.signals)]
    if t is Wait:
        return [{"instr": "Wait", "signal": g, "value": ins.value} for g in ins.signals]
    return [instr_to_dict(ins)]


__all__ = ["to_dict", "from_dict", "to_json", "from_json", "digest", "programs_digest", "Copy", "Reduce", "Notify",
           "Wait", "PutPackets", "WaitPackets"]
