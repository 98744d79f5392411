"""Plan and simulate a size sweep of one library collective: the ``purlin sim`` job.

Rows are nccl-tests-like dicts (size, count, dtype, redop, time_us, algbw, busbw, in
GB/s), plus collective, topology and the resolved policy, so they print as a table or
dump as JSON unchanged.
"""
from __future__ import annotations

import re
from typing import Any, Iterable, Sequence

from purlin.errors import SpecError
from purlin.sim.calibration import Calibration
from purlin.sim.engine import simulate
from purlin.sim.result import SimResult
from purlin.spec import library
from purlin.topology import Topology, resolve_topology

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20,
          "MB": 1 << 20, "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}
ROW_KEYS = ("size", "count", "dtype", "redop", "time_us", "algbw", "busbw")


def parse_size(text: str | int) -> int:
    """``"64K"`` -> 65536 (binary units, as nccl-tests).

    Examples
    --------
    >>> parse_size("1K"), parse_size("2M"), parse_size(16)
    (1024, 2097152, 16)
    """
    if isinstance(text, int):
        return text
    m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", str(text))
    if not m or m.group(2).upper() not in _UNITS:
        raise SpecError(f"size {text!r}: expected a number with an optional K/M/G suffix")
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


def parse_sizes(text: str) -> list[int]:
    """nccl-tests-style size ranges: ``"1K:1G"`` (x2 steps), ``"1K:1G:4"`` (x4 steps) or
    a comma list ``"1K,64K,1M"``.

    Examples
    --------
    >>> parse_sizes("1K:8K")
    [1024, 2048, 4096, 8192]
    >>> parse_sizes("1K,1M")
    [1024, 1048576]
    """
    if "," in text:
        return [parse_size(s) for s in text.split(",") if s.strip()]
    parts = text.split(":")
    if len(parts) == 1:
        return [parse_size(parts[0])]
    if len(parts) not in (2, 3):
        raise SpecError(f"sizes {text!r}: expected LO:HI or LO:HI:FACTOR")
    lo, hi = parse_size(parts[0]), parse_size(parts[1])
    factor = int(parts[2]) if len(parts) == 3 else 2
    if lo < 1 or hi < lo or factor < 2:
        raise SpecError(f"sizes {text!r}: need 1 <= LO <= HI and FACTOR >= 2")
    out, n = [], lo
    while n <= hi:
        out.append(n)
        n *= factor
    return out


def simulate_collective(collective: str, topology: Topology | str, size: int | str,
                        policy: Any = None, *, dtype: str = "fp32", op: str = "add",
                        calibration: Calibration | str | None = None, world: int | None = None,
                        cta_budget: int = 64, record: bool = True) -> SimResult:
    """Plan and simulate one library collective at one nccl-tests ``size``; the full
    :class:`SimResult` (timeline, trace, utilisation), e.g. for ``--trace``/``--gantt``.

    Examples
    --------
    >>> from purlin.topology import minimal
    >>> r = simulate_collective("all_reduce", minimal(4), "64K", calibration="synthetic")
    >>> r.size, r.row()["redop"]
    (65536, 'add')
    """
    from purlin.snac import plan  # the planner; imported here so `purlin.sim` loads fast

    topo = resolve_topology(topology, world)
    c = library.from_size(collective, topo.world, parse_size(size), dtype, op)
    return simulate(plan(c, topo, policy, cta_budget=cta_budget), topo, calibration,
                    record=record)


def predict(collective: str, topology: Topology | str, sizes: Iterable[int | str] | str,
            policy: Any = None, *, dtype: str = "fp32", op: str = "add",
            calibration: Calibration | str | None = None, world: int | None = None,
            cta_budget: int = 64) -> list[dict[str, Any]]:
    """Plan (``purlin.snac.plan``) and simulate ``collective`` at every size.

    Parameters
    ----------
    collective : str
        A library name (``"all_reduce"``, ``"AllGather"``, ``"all_to_all_v"``...).
    topology : Topology or str
        A Topology or a shipped name; ``world`` sets the rank count of a loopback one.
    sizes : iterable of int/str, or str
        nccl-tests sizes in bytes (``"1K:1G"`` accepted, see :func:`parse_sizes`).
    policy : Policy, dict or None
        Handed to the planner as is (None: the codesign table picks).
    dtype, op : str
        Element type and reduction op (op ignored for copy collectives).
    calibration : Calibration or str, optional
        Default: the topology's ``gpu_kind`` file.

    Returns
    -------
    list of dict
        One row per size: collective, topology, size, count, dtype, redop, time_us,
        algbw, busbw (GB/s), policy (the resolved knobs).

    Examples
    --------
    >>> from purlin.topology import minimal
    >>> rows = predict("all_gather", minimal(2), [1024, 4096], calibration="synthetic")
    >>> [r["size"] for r in rows], rows[0]["time_us"] > 0
    ([1024, 4096], True)
    """
    topo = resolve_topology(topology, world)
    if isinstance(sizes, str):
        sizes = parse_sizes(sizes)
    return [simulate_collective(collective, topo, size, policy, dtype=dtype, op=op,
                                calibration=calibration, cta_budget=cta_budget,
                                record=False).row()
            for size in sizes]


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """nccl-tests-style text table of rows from :func:`predict` or a sweep."""
    head = f"{'size':>12} {'count':>12} {'type':>8} {'redop':>6} {'time(us)':>10} " \
           f"{'algbw':>8} {'busbw':>8}"
    lines = [head, f"{'(B)':>12} {'(elements)':>12} {'':>8} {'':>6} {'':>10} {'(GB/s)':>8} {'(GB/s)':>8}"]
    for r in rows:
        if r.get("error"):
            lines.append(f"{r['size']:>12} {'-':>12} {r.get('dtype', ''):>8} "
                         f"{r.get('redop', ''):>6}  error: {r['error']}")
            continue
        lines.append(f"{r['size']:>12} {r['count']:>12} {r['dtype']:>8} {r['redop']:>6} "
                     f"{r['time_us']:>10.2f} {r['algbw']:>8.2f} {r['busbw']:>8.2f}")
    return "\n".join(lines)
