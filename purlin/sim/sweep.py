"""Sweeps over collectives x sizes x topologies x policies, and the codesign table.

Each point (one collective, topology, policy and size) is one task for any
``concurrent.futures.Executor`` (a process pool by default, or a thread pool) or for a
Dask ``distributed.Client`` when a sweep outgrows one machine (``scheduler=ADDRESS``
connects one; Dask is the optional ``dask`` extra). Only pickleable
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

from purlin.check import check_int, check_output_path, fail
from purlin.errors import BackendUnavailable, PlanError, PurlinError, SpecError, UsageError
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
        """Write a bandwidth-vs-size PNG of the rows to ``path``; returns the path."""
        from purlin.sim.plots import plot_bandwidth
        self.plot_path = plot_bandwidth(self.rows, path, metric=metric)
        return self.plot_path

    def best_policy_table(self, topology: str, collective: str) -> dict[str, Any]:
        """The fastest policy per size band for one topology and collective
        (:func:`best_policy_table`)."""
        return best_policy_table(self.rows, topology, collective)

    def to_json(self, path: str | Path) -> Path:
        """Write the sweep's meta and rows as JSON to ``path``; returns the path."""
        path = check_output_path("to_json path", path)
        path.write_text(json.dumps({"meta": self.meta, "rows": self.rows}, indent=1, default=str))
        return path


def sweep(collectives: Iterable[str] | str, sizes: Iterable[int | str] | str,
          topologies: Iterable[Topology | str] | Topology | str,
          policies: Iterable[Any] | None = None, executor: Any = None, *,
          scheduler: str | None = None, dtype: str = "fp32", op: str = "add",
          calibration: Any = None, progress: bool = True, plot: str | Path | None = None,
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
    executor : concurrent.futures.Executor or distributed.Client, optional
        Runs the points; default a ProcessPoolExecutor of ``max_workers`` (all cores),
        shut down at the end. A Dask client sends each point to its cluster as a task.
        A given executor or client is left open.
    scheduler : str, optional
        Address of a Dask scheduler (``"tcp://host:8786"``) to run on instead: a client
        is connected for this sweep and closed after it. Needs ``pip install -e '.[dask]'``.
    calibration : str or Calibration, optional
        Default: each topology's ``gpu_kind`` file.
    progress : bool
        Show a tqdm bar (whichever runs the points).
    plot : path, optional
        Also write a bandwidth-vs-size PNG there.

    Returns
    -------
    SweepResult
        ``rows`` in input order (errors as rows), ``plot_path``.

    Raises
    ------
    BackendUnavailable
        If ``scheduler`` is given and Dask is not installed or the scheduler cannot be
        reached.
    PurlinError
        If ``executor`` is neither an Executor nor a Dask client, or both it and
        ``scheduler`` are given.

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
    collectives, topologies, sizes, pols = _check_sweep(
        collectives, sizes, topologies, policies, executor, scheduler, dtype, op, calibration,
        plot, max_workers)
    tasks = [(c, t, p, s, dtype, op, calibration)
             for c in collectives for t in topologies for p in pols for s in sizes]
    if scheduler is not None:
        client = connect(scheduler)
        try:
            rows = _run_on_dask(client, tasks, progress)
        finally:
            client.close()
    elif executor is not None and not isinstance(executor, Executor):
        rows = _run_on_dask(_dask_client(executor), tasks, progress)
    else:
        rows = _run_on_executor(executor, tasks, progress, max_workers)
    result = SweepResult(rows, meta={"collectives": collectives, "sizes": sizes,
                                     "topologies": [t if isinstance(t, str) else t.name
                                                    for t in topologies],
                                     "policies": pols, "dtype": dtype, "op": op})
    if plot is not None:
        result.plot(plot)
    return result


#: How long :func:`connect` waits for a scheduler: short, since a sweep's points run for
#: far longer and a wrong address should fail before the user walks away.
CONNECT_TIMEOUT_S = 5.0
_SCHEMES = ("tcp", "tls", "ws", "wss", "inproc", "ucx")


def check_scheduler_address(address: Any, name: str = "sweep: scheduler") -> str:
    """``address`` if it reads as a Dask scheduler address (``[scheme://]host:port``, a
    known scheme, a port in 1..65535); a UsageError naming what is wrong otherwise, so a
    typo fails at once rather than after a connect timeout.

    Examples
    --------
    >>> check_scheduler_address("tcp://10.0.0.5:8786")
    'tcp://10.0.0.5:8786'
    """
    fix = "give it as tcp://HOST:PORT (the address `dask scheduler` prints)"
    if not isinstance(address, str) or not address.strip():
        raise fail(name, address, "must be a scheduler address", fix)
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    if scheme not in _SCHEMES:
        raise fail(name, address, f"unknown scheme {scheme!r} (known: "
                   f"{', '.join(_SCHEMES)})", fix)
    if scheme == "inproc":
        return address
    host, colon, port = rest.rpartition(":")
    if not colon or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise fail(name, address, "needs a host and a port in 1..65535", fix)
    return address


def connect(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> Any:
    """A ``distributed.Client`` on the Dask scheduler at ``address``.

    Raises
    ------
    UsageError
        If ``address`` does not read as a scheduler address.
    BackendUnavailable
        If Dask ``distributed`` is not installed, or no scheduler answers at
        ``address`` within ``timeout_s``.
    """
    check_scheduler_address(address)
    try:
        from distributed import Client
    except ImportError as e:
        raise BackendUnavailable(f"sweep: scheduler {address!r}: a sweep on a Dask scheduler "
                                 f"needs Dask distributed: pip install -e '.[dask]' ({e})") from None
    try:
        return Client(address, timeout=timeout_s)
    except Exception as e:   # refused, unresolvable, timed out, or not a Dask scheduler
        first = str(e).splitlines()[0][:160] if str(e) else ""
        raise BackendUnavailable(f"sweep: scheduler {address!r}: no Dask scheduler answered "
                                 f"within {timeout_s:g} s ({type(e).__name__}: {first}); start "
                                 f"one with `dask scheduler` and workers with `dask worker "
                                 f"ADDRESS`, or leave --scheduler out to run here") from None


def _dask_client(obj: Any) -> Any:
    """``obj`` if it is a Dask client; a clear error for anything else."""
    try:
        from distributed import Client
    except ImportError:
        Client = None
    if Client is None or not isinstance(obj, Client):
        raise UsageError(f"sweep: executor {obj!r:.40}: expected a concurrent.futures.Executor, "
                         f"a distributed.Client or None (a process pool), got "
                         f"{type(obj).__name__}")
    return obj


def _run_on_executor(executor: Executor | None, tasks: list[tuple], progress: bool,
                     max_workers: int | None) -> list[dict[str, Any]]:
    from tqdm import tqdm
    own = executor is None
    if own:
        executor = ProcessPoolExecutor(max_workers=max_workers or os.cpu_count() or 1)
    rows: list[dict[str, Any]] = [{}] * len(tasks)
    try:
        futures = {executor.submit(run_point, *t): i for i, t in enumerate(tasks)}
        with tqdm(total=len(tasks), disable=not progress, desc="sweep", unit="pt") as bar:
            for fut in as_completed(futures):
                rows[futures[fut]] = fut.result()
                bar.update(1)
    finally:
        if own:
            executor.shutdown()
    return rows


def _run_on_dask(client: Any, tasks: list[tuple], progress: bool) -> list[dict[str, Any]]:
    """One Dask task per point (``pure=False``: two equal points are still two rows)."""
    from distributed import as_completed as dask_completed
    from tqdm import tqdm
    futures = [client.submit(run_point, *t, pure=False) for t in tasks]
    where = {f.key: i for i, f in enumerate(futures)}
    rows: list[dict[str, Any]] = [{}] * len(tasks)
    try:
        with tqdm(total=len(tasks), disable=not progress, desc="sweep (dask)", unit="pt") as bar:
            for fut in dask_completed(futures):
                rows[where[fut.key]] = fut.result()
                bar.update(1)
    finally:
        client.cancel(futures)   # nothing is left on the cluster if a point fails
    return rows


def _check_sweep(collectives, sizes, topologies, policies, executor, scheduler, dtype, op,
                 calibration, plot, max_workers) -> tuple[list, list, list[int], list]:
    """Every argument of :func:`sweep`, checked before any point runs (and before a
    scheduler is dialled): non-empty lists, known names, valid policies, an op only where
    something reduces (``"add"``, the default, is accepted for any), a writable plot."""
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
    if op not in (None, "add") and not any(c in library.REDUCING for c in collectives):
        raise SpecError(f"sweep: op {op!r} applies to reducing collectives, and none of "
                        f"{', '.join(collectives)} reduces; leave op out")
    if calibration is not None and not isinstance(calibration, Calibration):
        load_calibration(calibration)
    if plot is not None:
        check_output_path("sweep: plot", plot)
    if max_workers is not None:
        check_int("sweep: max_workers", max_workers, lo=1)
    if executor is not None and scheduler is not None:
        raise UsageError("sweep: give an executor or a scheduler address, not both")
    if executor is not None and not isinstance(executor, Executor):
        _dask_client(executor)
    if scheduler is not None:
        check_scheduler_address(scheduler)
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
