"""What a simulated call produced: time, bandwidths, timeline, utilisation, trace.

Bandwidths follow nccl-tests: ``algbw = size / time`` where ``size`` is the largest
buffer of any rank (AllReduce: the buffer; AllGather: the whole output; ReduceScatter
and AllToAll: the whole per-rank input; V forms: the same, summed over blocks), and
``busbw = algbw * factor`` with the factor of :data:`purlin.spec.library.BUSBW_FACTOR`
(1.0 for a collective outside the library).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from purlin.errors import SpecError
from purlin.snac.ir import Schedule
from purlin.trace import OpRecord, perfetto
from purlin.trace import write as write_json
from purlin.spec import library
from purlin.spec.library import nccl_size  # noqa: F401  (re-exported for callers)


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
        Engine figures: wall_s, events, flows, recomputes, coalesced, instructions,
        period (the ranks simulated per class), quiet (every flow timed at its cap,
        :mod:`purlin.sim.quiet`), events_per_s.
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
        """The spec the simulated schedule implements."""
        return self.schedule.collective

    @property
    def size(self) -> int:
        """The nccl-tests size of the call (bytes), as the busbw factors expect."""
        return nccl_size(self.collective)

    @property
    def algbw_gbps(self) -> float:
        """nccl-tests algorithm bandwidth: size / time, GB/s."""
        return self.size / (self.time_us * 1e3) if self.time_us > 0 else 0.0

    @property
    def busbw_gbps(self) -> float:
        """nccl-tests bus bandwidth: algbw times the collective's busbw factor, GB/s."""
        return self.algbw_gbps * busbw_factor(self.collective)

    @property
    def timeline(self) -> list[OpRecord]:
        """One OpRecord per instruction run (empty when simulated with ``record=False``)."""
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
        return perfetto(self.schedule, {"simulated": self.records},
                        {"topology": self.topology, "time_us": self.time_us})

    def write_trace(self, path: str | Path) -> Path:
        """Write :meth:`trace` as JSON (open it in https://ui.perfetto.dev)."""
        return write_json(path, self.trace())

    def __str__(self) -> str:
        r = self.row()
        return (f"{r['collective']} on {self.topology}: size {r['size']} B, "
                f"time {r['time_us']:.2f} us, algbw {r['algbw']:.1f} GB/s, "
                f"busbw {r['busbw']:.1f} GB/s")
