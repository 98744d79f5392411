"""Sweeps over collectives x sizes x topologies x policies, and the codesign table.

Each point (one collective, topology, policy and size) is one task for any
``concurrent.futures.Executor``: a process pool by default, a thread pool, or a
dask.distributed client's ``get_executor()`` for a cluster. Only pickleable
arguments travel (names, dicts, Topology objects); a point whose plan is refused
(e.g. the ``switch`` Atom on a switch without in-switch reduction) becomes a row with
``error`` set instead of failing the sweep.

:func:`best_policy_table` turns rows into the JSON-able table the planner's codesign
hook takes: the fastest policy per size band for one (topology, collective).
"""
from __future__ import annotations

import json
import os
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Sequence

from purlin.check import check_int, check_output_path
from purlin.errors import PlanError, PurlinError, SpecError, UsageError
from purlin.sim.predict import _size_list, format_table
from purlin.topology import Topology, resolve_topology


def policy_dict(policy: Any) -> dict[str, Any] | None:
    """A policy as a plain dict (None stays None: the codesign table decides)."""
    if policy is None:
        return None
    if isinstance(policy, dict):
        return dict(policy)
    if hasattr(policy, "to_dict"):
        return policy.to_dict()
    raise PlanError(f"policy {policy!r:.60}: expected a Policy, a dict of its fields or None, "
                    f"got {type(policy).__name__}")


def policy_label(policy: dict[str, Any] | None) -> str:
    """Short label of a policy: its fields that differ from the planner's defaults."""
    if not policy:
        return "auto"
    try:
        from purlin.snac import Policy
        default = Policy().to_dict()
    except ImportError:  # pragma: no cover
        default = {}
    diff = [f"{k}={v}" for k, v in policy.items() if default.get(k, object()) != v]
    return ",".join(diff) or "auto"


@lru_cache(maxsize=32)
def _topology_of(ref: Topology | str) -> Topology:
    return resolve_topology(ref)


def run_point(collective: str, topology: Topology | str, policy: dict[str, Any] | None,
              size: int, dtype: str = "fp32", op: str | None = None,
              calibration: Any = None) -> dict[str, Any]:
    """Plan and simulate one sweep point; a refused plan gives a row with ``error``.

    Module-level so a process pool can pickle it.
    """
    from purlin.sim.engine import simulate
    from purlin.snac import plan
    from purlin.spec import library

    topo = _topology_of(topology)
    base = {"collective": library.canonical(collective), "topology": topo.name,
            "policy": policy, "policy_label": policy_label(policy), "size": size,
            "dtype": dtype}
    try:
        key = library.canonical(collective)
        c = library.from_size(key, topo.world, size, dtype, op if key in library.REDUCING else None)
        result = simulate(plan(c, topo, policy), topo, calibration, record=False)
    except PurlinError as e:
        return {**base, "error": f"{type(e).__name__}: {e}", "time_us": None,
                "algbw": None, "busbw": None}
    row = result.row()
    row.update(collective=base["collective"], policy_requested=policy,
               policy=policy, policy_label=base["policy_label"], requested_size=size,
               resolved_policy=result.schedule.policy, error=None)
    return row


@dataclass
class SweepResult:
    """Rows of a sweep (one per point, in input order) and where its plot went."""

    rows: list[dict[str, Any]]
    plot_path: Path | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def table(self) -> str:
        """One nccl-tests-style table per (collective, topology, policy)."""
        out = []
        for key, rows in _grouped(self.rows).items():
            out.append("# " + " | ".join(key))
            out.append(format_table(rows))
        return "\n".join(out)

    def plot(self, path: str | Path, metric: str = "busbw") -> Path:
        from purlin.sim.plots import plot_bandwidth
        self.plot_path = plot_bandwidth(self.rows, path, metric=metric)
        return self.plot_path

    def best_policy_table(self, topology: str, collective: str) -> dict[str, Any]:
        return best_policy_table(self.rows, topology, collective)

    def to_json(self, path: str | Path) -> Path:
        path = check_output_path("to_json path", path)
        path.write_text(json.dumps({"meta": self.meta, "rows": self.rows}, indent=1, default=str))
        return path


def sweep(collectives: Iterable[str] | str, sizes: Iterable[int | str] | str,
          topologies: Iterable[Topology | str] | Topology | str,
          policies: Iterable[Any] | None = None, executor: Executor | None = None, *,
          dtype: str = "fp32", op: str | None = None, calibration: Any = None,
          progress: bool = True, plot: str | Path | None = None,
          max_workers: int | None = None) -> SweepResult:
    """Simulate every (collective, topology, policy, size) point, in parallel.

    Parameters
    ----------
    collectives, topologies : iterable (or one item)
        Library names; shipped topology names or Topology objects.
    sizes : iterable of int/str, or str
        nccl-tests sizes (``"1K:1G"`` accepted).
    policies : iterable of Policy/dict/None, optional
        Default ``[None]``: the planner's codesign table.
    executor : concurrent.futures.Executor, optional
        Runs the points; default a ProcessPoolExecutor of ``max_workers`` (all cores),
        shut down at the end. A given executor is left open.
    calibration : str or Calibration, optional
        Default: each topology's ``gpu_kind`` file.
    progress : bool
        Show a tqdm bar.
    plot : path, optional
        Also write a bandwidth-vs-size PNG there.

    Returns
    -------
    SweepResult
        ``rows`` in input order (errors as rows), ``plot_path``.

    Examples
    --------
    >>> from concurrent.futures import ThreadPoolExecutor
    >>> from purlin.topology import minimal
    >>> with ThreadPoolExecutor(1) as ex:
    ...     res = sweep("all_gather", [1024, 4096], [minimal(2)], executor=ex,
    ...                 calibration="synthetic", progress=False)
    >>> len(res.rows), res.rows[0]["error"]
    (2, None)
    """
    from tqdm import tqdm

    collectives, topologies, sizes, pols = _check_sweep(
        collectives, sizes, topologies, policies, executor, dtype, op, calibration, plot,
        max_workers)
    points = [(c, t, p, s) for c in collectives for t in topologies for p in pols for s in sizes]
    own = executor is None
    if own:
        executor = ProcessPoolExecutor(max_workers=max_workers or os.cpu_count() or 1)
    rows: list[dict[str, Any] | None] = [None] * len(points)
    try:
        futures = {executor.submit(run_point, c, t, p, s, dtype, op, calibration): i
                   for i, (c, t, p, s) in enumerate(points)}
        with tqdm(total=len(points), disable=not progress, desc="sweep", unit="pt") as bar:
            for fut in as_completed(futures):
                rows[futures[fut]] = fut.result()
                bar.update(1)
    finally:
        if own:
            executor.shutdown()
    result = SweepResult([r for r in rows if r is not None],
                         meta={"collectives": collectives, "sizes": sizes,
                               "topologies": [t if isinstance(t, str) else t.name
                                              for t in topologies],
                               "policies": pols, "dtype": dtype, "op": op})
    if plot is not None:
        result.plot(plot)
    return result


def _check_sweep(collectives, sizes, topologies, policies, executor, dtype, op, calibration,
                 plot, max_workers) -> tuple[list, list, list[int], list]:
    """Every argument of :func:`sweep`, checked before any point runs: non-empty lists,
    known names, valid policies, an op only where something reduces, a writable plot."""
    from purlin.sim.calibration import Calibration, load_calibration
    from purlin.snac import Policy
    from purlin.spec import library
    from purlin.spec.dtypes import dtype as lookup_dtype

    def items(what: str, x, single: tuple) -> list:
        out = [x] if isinstance(x, single) else list(x) if hasattr(x, "__iter__") else None
        if out is None:
            raise UsageError(f"sweep: {what} {x!r:.40}: expected one or a list, got {type(x).__name__}")
        if not out:
            raise UsageError(f"sweep: {what}: the list is empty, so there is nothing to run; "
                             f"give at least one")
        return out

    collectives = [library.canonical(c) for c in items("collectives", collectives, (str,))]
    topologies = items("topologies", topologies, (str, Path, Topology))
    for t in topologies:
        _topology_of(t)   # an unknown name or a bad file fails here, not in every point
    sizes = _size_list(sizes)
    pols = [policy_dict(p) for p in (policies if policies is not None else [None])]
    if not pols:
        raise UsageError("sweep: policies: the list is empty; leave it out for the codesign "
                         "default, or give at least one")
    for p in pols:
        if p is not None:
            Policy.from_dict(p)
    lookup_dtype(dtype)
    if op is not None and not any(c in library.REDUCING for c in collectives):
        raise SpecError(f"sweep: op {op!r} applies to reducing collectives, and none of "
                        f"{', '.join(collectives)} reduces; leave op out")
    if calibration is not None and not isinstance(calibration, Calibration):
        load_calibration(calibration)
    if plot is not None:
        check_output_path("sweep: plot", plot)
    if max_workers is not None:
        check_int("sweep: max_workers", max_workers, lo=1)
    if executor is not None and not isinstance(executor, Executor):
        raise UsageError(f"sweep: executor {executor!r:.40}: expected a concurrent.futures."
                         f"Executor (or None for a process pool), got {type(executor).__name__}")
    return collectives, topologies, sizes, pols


def best_policy_table(rows: Sequence[dict[str, Any]], topology: str,
                      collective: str) -> dict[str, Any]:
    """The fastest policy per size band, for the planner's codesign hook.

    For every swept size of (``topology``, ``collective``) the policy with the least
    time wins (ties: the first in sweep order); neighbouring sizes with the same winner
    merge into one band. A band covers sizes up to and including ``max_nbytes``; a size
    between two bands takes the upper band; the last band's ``max_nbytes`` is the
    largest size swept (beyond it the planner decides).

    Returns
    -------
    dict
        ``{"topology": name, "collective": name, "bands": [{"max_nbytes": int,
        "policy": {...}, "time_us": float}, ...]}``; a winning policy of ``None`` (the
        default codesign) is given as ``{}``.

    Raises
    ------
    PurlinError
        If no successful row matches.

    Examples
    --------
    >>> rows = [{"topology": "t", "collective": "all_gather", "size": s, "policy": p,
    ...          "time_us": t, "error": None}
    ...         for s, p, t in [(1, {"regime": "latency"}, 1.0), (1, {"regime": "throughput"}, 2.0),
    ...                         (2, {"regime": "latency"}, 3.0), (2, {"regime": "throughput"}, 2.5)]]
    >>> [b["max_nbytes"] for b in best_policy_table(rows, "t", "all_gather")["bands"]]
    [1, 2]
    """
    from purlin.spec import library

    key = library.canonical(collective)
    best: dict[int, dict[str, Any]] = {}
    for r in rows:
        if (r.get("error") or r.get("time_us") is None or r.get("topology") != topology
                or library.canonical(r.get("collective", "")) != key):
            continue
        size = int(r.get("requested_size", r["size"]))
        if size not in best or r["time_us"] < best[size]["time_us"]:
            best[size] = r
    if not best:
        raise PurlinError(f"best_policy_table: no successful rows for {collective} on {topology}")
    bands: list[dict[str, Any]] = []
    for size in sorted(best):
        pol = best[size]["policy"] or {}
        if bands and bands[-1]["policy"] == pol:
            bands[-1]["max_nbytes"] = size
            bands[-1]["time_us"] = best[size]["time_us"]
        else:
            bands.append({"max_nbytes": size, "policy": pol, "time_us": best[size]["time_us"]})
    return {"topology": topology, "collective": key, "bands": bands}


def _grouped(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, ...], list[dict[str, Any]]]:
    out: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for r in rows:
        k = (r["collective"], r["topology"], r.get("policy_label", "auto"))
        out.setdefault(k, []).append(r)
    return out
