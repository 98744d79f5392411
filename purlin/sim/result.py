"""What a simulated call produced: time, bandwidths, timeline, utilisation, trace.

Bandwidths follow nccl-tests: ``algbw = size / time`` where ``size`` is the largest
buffer of any rank (AllReduce: the buffer; AllGather: the whole output; ReduceScatter
and AllToAll: the whole per-rank input; V forms: the same, summed over blocks), and
``busbw = algbw * factor`` with the factor of :data:`purlin.spec.library.BUSBW_FACTOR`
(1.0 for a collective outside the library).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from purlin.errors import SpecError
from purlin.snac.ir import Schedule
from purlin.spec import library
from purlin.spec.library import nccl_size  # noqa: F401  (re-exported for callers)


class OpRecord(NamedTuple):
    """One executed instruction: where, what, when (microseconds from call start)."""

    rank: int
    cta: int
    instr: int
    kind: str
    start_us: float
    end_us: float
    nbytes: int


def busbw_factor(collective: Any) -> float:
    """nccl-tests bus-bandwidth factor for ``collective`` (1.0 if not a library one)."""
    try:
        key = library.canonical(collective.name)
    except SpecError:
        return 1.0
    return float(library.BUSBW_FACTOR[key](collective.world))


@dataclass
class SimResult:
    """The outcome of :func:`purlin.sim.simulate`.

    Attributes
    ----------
    time_us : float
        From launch to the last CTA finishing (or the last store landing), max over
        ranks, launch latency included.
    records : list
        Raw timeline tuples; see :attr:`timeline` for :class:`OpRecord` objects.
    utilisation : dict
        Resource id -> ``{"bytes", "capacity_gbps", "busy_fraction"}``: ``bytes`` is
        the capacity consumed (wire bytes: packet flags and an Atom's wire overhead
        included; HBM reads and writes together), busy_fraction = bytes / (capacity x
        time_us), the mean load over the call.
    stats : dict
        Engine figures: wall_s, events, flows, recomputes, instructions, events_per_s.
    """

    schedule: Schedule
    topology: str
    gpu_kind: str
    calibration: str
    time_us: float
    records: list = field(default_factory=list, repr=False)
    utilisation: dict = field(default_factory=dict, repr=False)
    stats: dict = field(default_factory=dict)

    @property
    def collective(self) -> Any:
        return self.schedule.collective

    @property
    def size(self) -> int:
        return nccl_size(self.collective)

    @property
    def algbw_gbps(self) -> float:
        return self.size / (self.time_us * 1e3) if self.time_us > 0 else 0.0

    @property
    def busbw_gbps(self) -> float:
        return self.algbw_gbps * busbw_factor(self.collective)

    @property
    def timeline(self) -> list[OpRecord]:
        return [OpRecord._make(r) for r in self.records]

    def row(self) -> dict[str, Any]:
        """One nccl-tests-style row: size, count, dtype, redop, time_us, algbw, busbw."""
        c = self.collective
        return {"collective": c.name, "topology": self.topology, "size": self.size,
                "count": self.size // c.dtype.itemsize, "dtype": c.dtype.name,
                "redop": c.op if c.is_reduce else "none", "time_us": self.time_us,
                "algbw": self.algbw_gbps, "busbw": self.busbw_gbps,
                "policy": dict(self.schedule.policy)}

    def busiest(self, n: int = 5) -> list[tuple[str, float]]:
        """The ``n`` resources with the highest busy fraction."""
        items = sorted(self.utilisation.items(), key=lambda kv: -kv[1]["busy_fraction"])
        return [(k, v["busy_fraction"]) for k, v in items[:n]]

    def to_dict(self, timeline: bool = False) -> dict[str, Any]:
        """JSON-able summary (with the timeline if asked)."""
        d = {**self.row(), "gpu_kind": self.gpu_kind, "calibration": self.calibration,
             "utilisation": self.utilisation, "stats": self.stats}
        if timeline:
            d["timeline"] = [r._asdict() for r in self.timeline]
        return d

    def trace(self) -> dict[str, Any]:
        """Chrome/Perfetto trace: one process per rank, one thread per CTA, one complete
        ("X") event per instruction; timestamps in microseconds."""
        roles = {(p.rank, p.cta): p.role for p in self.schedule.programs}
        events: list[dict] = []
        for rank in range(self.schedule.world):
            events.append({"ph": "M", "name": "process_name", "pid": rank, "tid": 0,
                           "args": {"name": f"rank {rank}"}})
        for (rank, cta), role in sorted(roles.items()):
            events.append({"ph": "M", "name": "thread_name", "pid": rank, "tid": cta,
                           "args": {"name": f"cta {cta} ({role})"}})
        for rank, cta, i, kind, t0, t1, nbytes in self.records:
            events.append({"ph": "X", "name": kind, "cat": roles.get((rank, cta), ""),
                           "pid": rank, "tid": cta, "ts": t0, "dur": t1 - t0,
                           "args": {"instr": i, "nbytes": nbytes}})
        return {"traceEvents": events, "displayTimeUnit": "ns",
                "otherData": {"collective": self.collective.name, "topology": self.topology,
                              "time_us": self.time_us}}

    def write_trace(self, path: str | Path) -> Path:
        """Write :meth:`trace` as JSON (open it in https://ui.perfetto.dev)."""
        path = Path(path)
        path.write_text(json.dumps(self.trace()))
        return path

    def __str__(self) -> str:
        r = self.row()
        return (f"{r['collective']} on {self.topology}: size {r['size']} B, "
                f"time {r['time_us']:.2f} us, algbw {r['algbw']:.1f} GB/s, "
                f"busbw {r['busbw']:.1f} GB/s")
