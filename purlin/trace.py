"""Timelines of one call, from any engine, and their Chrome/Perfetto trace.

The simulator and the GPU executor both describe a call as :class:`OpRecord` tuples (one
per executed instruction), so one writer serves both, and two timelines of the same
Schedule can sit side by side in one trace (predicted above, measured below).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping, NamedTuple

from purlin.snac.ir import Schedule


class OpRecord(NamedTuple):
    """One executed instruction: where, what, when (microseconds from call start)."""

    rank: int
    cta: int
    instr: int
    kind: str
    start_us: float
    end_us: float
    nbytes: int


def perfetto(schedule: Schedule, timelines: Mapping[str, Iterable[tuple]],
             meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A Chrome/Perfetto trace of one or more timelines of ``schedule``: per timeline,
    one process per rank (named ``"<label>: rank r"``), one thread per CTA, one complete
    ("X") event per instruction; timestamps in microseconds."""
    roles = {(p.rank, p.cta): p.role for p in schedule.programs}
    events: list[dict] = []
    for k, (label, records) in enumerate(timelines.items()):
        pid0 = k * schedule.world
        for rank in range(schedule.world):
            name = f"{label}: rank {rank}" if len(timelines) > 1 else f"rank {rank}"
            events.append({"ph": "M", "name": "process_name", "pid": pid0 + rank, "tid": 0,
                           "args": {"name": name}})
            events.append({"ph": "M", "name": "process_sort_index", "pid": pid0 + rank, "tid": 0,
                           "args": {"sort_index": pid0 + rank}})
        for (rank, cta), role in sorted(roles.items()):
            events.append({"ph": "M", "name": "thread_name", "pid": pid0 + rank, "tid": cta,
                           "args": {"name": f"cta {cta} ({role})"}})
        for rank, cta, i, kind, t0, t1, nbytes in records:
            events.append({"ph": "X", "name": kind, "cat": roles.get((rank, cta), ""),
                           "pid": pid0 + rank, "tid": cta, "ts": t0, "dur": t1 - t0,
                           "args": {"instr": i, "nbytes": nbytes}})
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"collective": schedule.collective.name, "timelines": list(timelines),
                          **(meta or {})}}


def write(path: str | Path, trace: Mapping[str, Any]) -> Path:
    """Write a trace as JSON (open it in https://ui.perfetto.dev)."""
    from purlin.check import check_output_path
    path = check_output_path("trace path", path)
    path.write_text(json.dumps(trace))
    return path
