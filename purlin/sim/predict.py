"""Plan and simulate a size sweep of one library collective: the ``purlin sim`` job.

Rows are nccl-tests-like dicts (size, count, dtype, redop, time_us, algbw, busbw, in
GB/s), plus collective, topology and the resolved policy, so they print as a table or
dump as JSON unchanged.
"""
from __future__ import annotations

import re
from typing import Any, Iterable, Sequence

from purlin.errors import SpecError
from purlin.sim.calibration import Calibration, load_calibration
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
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise SpecError(f"size {text}: must be >= 0 bytes")
        return text
    if not isinstance(text, str):
        raise SpecError(f"size {text!r:.40}: expected an int or a string like '64K', got "
                        f"{type(text).__name__}")
    m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).upper() not in _UNITS:
        raise SpecError(f"size {text!r}: expected a whole number of bytes with an optional "
                        f"K/M/G suffix (e.g. 64K)")
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


MAX_SIZES = 4096
"""Most sizes one list or range may give (``1:1G:2`` gives 31)."""


def parse_sizes(text: str) -> list[int]:
    """nccl-tests-style size ranges: ``"1K:1G"`` (x2 steps), ``"1K:1G:4"`` (x4 steps) or
    a comma list ``"1K,64K,1M"``. An empty list is an error.

    Examples
    --------
    >>> parse_sizes("1K:8K")
    [1024, 2048, 4096, 8192]
    >>> parse_sizes("1K,1M")
    [1024, 1048576]
    >>> parse_sizes("1K:1G:x")
    Traceback (most recent call last):
    ...
    purlin.errors.SpecError: sizes '1K:1G:x': FACTOR 'x' must be a whole number >= 2
    """
    if not isinstance(text, str):
        raise SpecError(f"sizes {text!r:.40}: expected a string like '1K:1G', got {type(text).__name__}")
    if "," in text:
        out = [parse_size(s) for s in text.split(",") if s.strip()]
        if not out:
            raise SpecError(f"sizes {text!r}: no size given (e.g. 1K,64K,1M)")
        if len(out) > MAX_SIZES:
            raise SpecError(f"sizes {text!r:.40}: {len(out)} sizes, more than {MAX_SIZES}")
        return out
    parts = text.split(":")
    if len(parts) == 1:
        if not text.strip():
            raise SpecError("sizes '': no size given (e.g. 1K:1G or 1K,64K)")
        return [parse_size(parts[0])]
    if len(parts) not in (2, 3):
        raise SpecError(f"sizes {text!r}: expected LO:HI or LO:HI:FACTOR")
    lo, hi = parse_size(parts[0]), parse_size(parts[1])
    if len(parts) == 3 and not re.fullmatch(r"\s*\d+\s*", parts[2]):
        raise SpecError(f"sizes {text!r}: FACTOR {parts[2]!r} must be a whole number >= 2")
    factor = int(parts[2]) if len(parts) == 3 else 2
    if lo < 1 or hi < lo or factor < 2:
        raise SpecError(f"sizes {text!r}: need 1 <= LO <= HI and FACTOR >= 2")
    out, n = [], lo
    while n <= hi:
        out.append(n)
        n *= factor
    return out


def _size_list(sizes: Iterable[int | str] | str) -> list[int]:
    """Sizes as a non-empty list of byte counts."""
    if isinstance(sizes, str):
        return parse_sizes(sizes)
    if isinstance(sizes, int) and not isinstance(sizes, bool):
        return [parse_size(sizes)]
    if not hasattr(sizes, "__iter__"):
        raise SpecError(f"sizes {sizes!r:.40}: expected a list of sizes or a string like '1K:1G'")
    out = [parse_size(s) for s in sizes]
    if not out:
        raise SpecError("sizes: the list is empty; give at least one size")
    return out


def _collective(collective: str, topo: Topology, size: int, dtype: str, op: str | None,
                root: int | None, max_instructions: int):
    from purlin.snac.limits import DEFAULT_MAX_INSTRUCTIONS, max_blocks_for
    return library.from_size(collective, topo.world, size, dtype, op, root,
                             max_blocks=max_blocks_for(max_instructions or DEFAULT_MAX_INSTRUCTIONS))


def check_points(collective: str, topology: Topology, sizes: Iterable[int], policy: Any = None, *,
                 dtype: str = "fp32", op: str | None = None, root: int | None = None,
                 cta_budget: int = 64, max_instructions: int | None = None,
                 max_memory_nbytes: int | None = None) -> None:
    """Check every size of a run (spec, policy, plan limits) without planning any, so a
    bad point fails before the first one is simulated."""
    from purlin.snac import check_limits
    from purlin.snac.limits import (DEFAULT_MAX_INSTRUCTIONS, DEFAULT_MAX_MEMORY_NBYTES,
                                    check_plan_size, library_lower_bound)

    for size in sizes:
        check_plan_size(library_lower_bound(collective, topology.world, size),
                        max_instructions or DEFAULT_MAX_INSTRUCTIONS,
                        max_memory_nbytes or DEFAULT_MAX_MEMORY_NBYTES,
                        f"{library.canonical(collective)} at world {topology.world}, {size} B")
        check_limits(_collective(collective, topology, size, dtype, op, root, max_instructions),
                     topology, policy, cta_budget, max_instructions=max_instructions,
                     max_memory_nbytes=max_memory_nbytes)


def simulate_collective(collective: str, topology: Topology | str, size: int | str,
                        policy: Any = None, *, dtype: str = "fp32", op: str | None = None,
                        root: int | None = None,
                        calibration: Calibration | str | None = None, world: int | None = None,
                        cta_budget: int = 64, record: bool = True,
                        max_instructions: int | None = None,
                        max_memory_nbytes: int | None = None) -> SimResult:
    """Plan and simulate one library collective at one nccl-tests ``size``; the full
    :class:`SimResult` (timeline, trace, utilisation), e.g. for ``--trace``/``--gantt``.
    ``op`` applies to reducing collectives, ``root`` to rooted ones (see
    :func:`purlin.spec.library.from_size`).

    Examples
    --------
    >>> from purlin.topology import minimal
    >>> r = simulate_collective("all_reduce", minimal(4), "64K", calibration="synthetic")
    >>> r.size, r.row()["redop"]
    (65536, 'add')
    """
    from purlin.snac import plan  # the planner; imported here so `purlin.sim` loads fast

    topo = resolve_topology(topology, world)
    c = _collective(collective, topo, parse_size(size), dtype, op, root, max_instructions)
    return simulate(plan(c, topo, policy, cta_budget=cta_budget, max_instructions=max_instructions,
                         max_memory_nbytes=max_memory_nbytes), topo, calibration, record=record)


def predict(collective: str, topology: Topology | str, sizes: Iterable[int | str] | str,
            policy: Any = None, *, dtype: str = "fp32", op: str | None = None,
            root: int | None = None, calibration: Calibration | str | None = None,
            world: int | None = None, cta_budget: int = 64,
            max_instructions: int | None = None,
            max_memory_nbytes: int | None = None, executor: Any = None) -> list[dict[str, Any]]:
    """Plan (``purlin.snac.plan``) and simulate ``collective`` at every size.

    Every size is checked (spec, policy, calibration, plan limits) before the first is
    simulated, so a bad one fails at once rather than after the others ran.

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
    dtype, op, root : str, str, int
        Element type; reduction op (reducing collectives only, default add); root rank
        (rooted collectives only, default 0).
    calibration : Calibration or str, optional
        Default: the topology's ``gpu_kind`` file.
    max_instructions, max_memory_nbytes : int, optional
        Plan limits (:func:`purlin.snac.plan`; None: its defaults).
    executor : concurrent.futures.Executor, optional
        Where the sizes run (each is independent: a process pool runs them side by side,
        with the same answers); None: one after another, here.

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
    sizes = _size_list(sizes)
    cal = calibration if isinstance(calibration, Calibration) else \
        load_calibration(calibration or topo.gpu_kind)
    check_points(collective, topo, sizes, policy, dtype=dtype, op=op, root=root,
                 cta_budget=cta_budget, max_instructions=max_instructions,
                 max_memory_nbytes=max_memory_nbytes)
    kw = dict(dtype=dtype, op=op, root=root, calibration=cal, cta_budget=cta_budget,
              max_instructions=max_instructions, max_memory_nbytes=max_memory_nbytes)
    if executor is None:
        return [_row(collective, topo, size, policy, kw) for size in sizes]
    futures = {size: executor.submit(_row, collective, topo, size, policy, kw)
               for size in sorted(set(sizes), reverse=True)}   # the longest first
    return [futures[size].result() for size in sizes]


def _row(collective: str, topo: Topology, size: int, policy: Any, kw: dict) -> dict[str, Any]:
    """One size of :func:`predict` (a top-level function, so a process pool can run it)."""
    return simulate_collective(collective, topo, size, policy, record=False, **kw).row()


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
