"""Predict a step's communication: simulate each distinct collective once, add up the layers.

A step issues the same collective many times (every layer's all-reduce is the same spec;
every tensor-parallel group runs it on an identical piece of the fabric), so predictions
are cached under (spec digest, topology digest, policy, calibration, CTA budget) in a
:class:`SimCache`: a distinct collective is planned and simulated once, however many
layers, groups, topologies or calls share it. Groups run at the same time, so a layer's
call costs the slowest group's time; the step's communication time is the sum over its
calls (no overlap with compute, none between calls).
"""
from __future__ import annotations

import hashlib
import json
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from purlin.check import check_bool, check_instance, check_int
from purlin.errors import PlanError, PurlinError, SpecError
from purlin.snac.policy import Policy
from purlin.snac.serialize import collective_to_dict
from purlin.spec import library
from purlin.spec.collective import Collective
from purlin.topology import Topology, resolve_topology, topology_digest
from purlin.workload.bound import port_bound_us
from purlin.workload.config import StepConfig
from purlin.workload.expand import KINDS, Call, Step, expand
from purlin.workload.groups import check_disjoint, group_topology
from purlin.workload.routing import Routing

RING = Policy(algorithm="ring", regime="throughput")
"""The planner's ring (hop by hop along a cycle, staged): the ring baseline's reductions
and gathers."""
POINT_TO_POINT = Policy(algorithm="one_shot", regime="throughput", chunk_nbytes=128 << 10,
                        put_ctas=32, consumer_ctas=32)
"""Staged sends straight to each peer: the baseline's AllToAllV. NCCL runs all-to-all as
grouped point-to-point sends, not around a ring. The chunk (128 KiB) and CTAs (32 a role,
for NCCL's channels) are fixed, so the baseline does not move when the default policy's
rules or tables change."""
NCCL_LIKE: dict[str, Policy] = {
    "all_reduce": RING, "reduce_scatter": RING, "reduce_scatter_v": RING,
    "all_gather": RING, "all_gather_v": RING,
    "all_to_all": POINT_TO_POINT, "all_to_all_v": POINT_TO_POINT,
}
"""The NCCL-like baseline, per library collective. It models the structure of NCCL's
algorithms with the planner's ring, not NCCL itself."""

PolicyLike = Policy | Mapping[str, Any] | None


def spec_digest(c: Collective) -> str:
    """A stable hash of what a collective is (name, op, dtype, both layouts)."""
    text = json.dumps(collective_to_dict(c), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def policy_for(policy: PolicyLike, c: Collective) -> Policy | None:
    """The policy ``c`` runs under: one policy for all, or a mapping by library name."""
    if isinstance(policy, Mapping) and policy and set(policy) <= set(library.ALL):
        return policy_for(policy.get(library.canonical(c.name)), c)
    if isinstance(policy, Mapping):
        return Policy.from_dict(policy)
    return policy


@dataclass
class SimCache:
    """Simulated calls by (spec digest, topology digest, policy, calibration, CTA budget).

    ``simulations`` counts the calls actually planned and simulated; ``hits`` the ones
    answered from the cache. Share one cache between predictions (topologies, policies,
    configs) to simulate each distinct collective once.
    """

    entries: dict[tuple, dict[str, Any]] = field(default_factory=dict)
    simulations: int = 0
    hits: int = 0

    @staticmethod
    def key(c_digest: str, topology: Topology, policy: Policy | None, calibration: Any,
            cta_budget: int) -> tuple:
        """The cache key of one simulation: what decides its answer."""
        pol = "auto" if policy is None else json.dumps(policy.to_dict(), sort_keys=True)
        cal = calibration if calibration is None or isinstance(calibration, str) else repr(calibration)
        return (c_digest, topology_digest(topology), pol, cal, cta_budget)


def simulate_call(c: Collective, topology: Topology, policy: Policy | None, calibration: Any,
                  cta_budget: int) -> dict[str, Any]:
    """Plan and simulate one collective; its time and the policy the planner resolved.

    Module-level so a process pool can run it.
    """
    from purlin.sim import simulate
    from purlin.snac import plan
    schedule = plan(c, topology, policy, cta_budget=cta_budget)
    result = simulate(schedule, topology, calibration, record=False)
    return {"time_us": result.time_us, "policy": dict(schedule.policy)}


@dataclass(frozen=True)
class CallPrediction:
    """One call of the step, predicted on its group's part of the fabric."""

    call: Call
    topology: str
    time_us: float
    policy: dict[str, Any]
    bound_us: float | None

    @property
    def nbytes(self) -> int:
        """nccl-tests size: the largest per-rank buffer."""
        return library.nccl_size(self.call.collective)


@dataclass(frozen=True)
class KindRow:
    """One kind of collective over a step: calls per group, bytes and time.

    ``nbytes`` sums the calls' nccl-tests sizes; ``time_us`` the calls' times (each the
    slowest group's); ``bound_us`` the calls' max-per-port bounds (copy kinds only).
    """

    kind: str
    calls: int
    nbytes: int
    time_us: float
    bound_us: float | None

    @property
    def time_per_call_us(self) -> float:
        """Predicted time of one call of this kind."""
        return self.time_us / self.calls if self.calls else 0.0


@dataclass(frozen=True)
class StepPrediction:
    """A step's predicted communication on one topology under one policy.

    Attributes
    ----------
    config : StepConfig
    topology : str
        The topology's name.
    world : int
    label : str
        Which policy (``"default"``, ``"nccl-like ring"``, ...).
    calls : tuple of CallPrediction
        Every call of :attr:`step`, with its time.
    rows : tuple of KindRow
        One per kind present, in :data:`~purlin.workload.expand.KINDS` order.
    total_us : float
        Communication time per step (sum of the rows).
    step : Step
        What was predicted (calls and routings).
    """

    config: StepConfig
    topology: str
    world: int
    label: str
    calls: tuple[CallPrediction, ...]
    rows: tuple[KindRow, ...]
    total_us: float
    step: Step = field(repr=False, compare=False)

    def row(self, kind: str) -> KindRow:
        """The row of ``kind``; PurlinError naming the kinds present if absent."""
        for r in self.rows:
            if r.kind == kind:
                return r
        raise PurlinError(f"{self.config.name} on {self.topology}: no {kind} calls; present: "
                          f"{', '.join(r.kind for r in self.rows) or 'none'}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: config, totals, rows, and each distinct call's prediction."""
        return {"config": self.config.to_dict(), "topology": self.topology, "world": self.world,
                "label": self.label, "total_us": self.total_us,
                "rows": [{"kind": r.kind, "calls": r.calls, "nbytes": r.nbytes,
                          "time_us": r.time_us, "time_per_call_us": r.time_per_call_us,
                          "bound_us": r.bound_us} for r in self.rows],
                "calls": [{"kind": p.call.kind, "block": p.call.block, "group": p.call.group,
                           "ranks": [p.call.ranks[0], p.call.ranks[-1]], "count": p.call.count,
                           "collective": p.call.collective.name, "nbytes": p.nbytes,
                           "topology": p.topology, "time_us": p.time_us,
                           "bound_us": p.bound_us, "policy": p.policy} for p in self.calls]}


def predict_step(config: StepConfig, topology: Topology | str, policy: PolicyLike = None, *,
                 label: str | None = None, routing: Routing | Sequence[Routing] | None = None,
                 cache: SimCache | None = None, calibration: Any = None, cta_budget: int = 64,
                 world: int | None = None, executor: Executor | None = None,
                 progress: bool = False) -> StepPrediction:
    """Predict the communication of one step of ``config`` on ``topology``.

    Parameters
    ----------
    config : StepConfig
        E.g. ``preset("deepseek-v3", "decode")``.
    topology : Topology or str
        Tensor- and expert-parallel groups tile its ranks (``world`` for a loopback one).
    policy : Policy, dict, mapping or None
        None: the planner's default (codesign) policy. A mapping from library collective
        names to policies picks per collective (:data:`NCCL_LIKE` is the baseline).
    label : str, optional
        Name of the policy in tables (default ``"default"`` for None, else ``"custom"``).
    routing : Routing or sequence of Routing, optional
        The MoE routing (see :func:`~purlin.workload.expand.expand`); default drawn.
    cache : SimCache, optional
        Reuse predictions across calls; default a fresh cache for this call.
    calibration, cta_budget
        As for :func:`purlin.sim.simulate` and :func:`purlin.snac.plan`.
    executor : concurrent.futures.Executor, optional
        Simulate the distinct collectives in parallel (e.g. a ProcessPoolExecutor).
    progress : bool
        A tqdm bar over the distinct collectives to simulate.

    Returns
    -------
    StepPrediction

    Raises
    ------
    SpecError, TopologyError, PlanError
        A config that does not fit the topology, groups that would share a link, or a
        collective the planner refuses under ``policy`` (the message names the call).

    Examples
    --------
    >>> from purlin.topology import minimal
    >>> c = StepConfig("toy", hidden=256, layers=2, heads=4, tp=4, tokens=8)
    >>> p = predict_step(c, minimal(4), calibration="synthetic")
    >>> p.row("all_reduce").calls, p.row("all_reduce").nbytes, p.total_us > 0
    (4, 16384, True)
    """
    calibration = _check_args(config, policy, label, cache, calibration, cta_budget, world,
                              executor, progress)
    topo = resolve_topology(topology, world)
    cache = SimCache() if cache is None else cache
    step = expand(config, topo.world, routing)
    groups = _group_topologies(topo, step)
    digests: dict[int, str] = {}
    todo: dict[tuple, tuple] = {}
    keys = []
    for call in step.calls:
        c = call.collective
        d = digests.setdefault(id(c), spec_digest(c))
        gt = groups[call.ranks]
        pol = policy_for(policy, c)
        k = cache.key(d, gt, pol, calibration, cta_budget)
        keys.append(k)
        if k not in cache.entries and k not in todo:
            todo[k] = (c, gt, pol, calibration, cta_budget, call)
    _run(todo, cache, executor, progress, config.name)
    cache.hits += len(keys) - len(todo)
    bounds: dict[tuple, float | None] = {}
    preds = []
    for call, k in zip(step.calls, keys):
        if call.kind in ("dispatch", "combine") and not groups[call.ranks].loopback:
            b = bounds.setdefault(k, port_bound_us(call.collective, groups[call.ranks]))
        else:
            b = None
        entry = cache.entries[k]
        preds.append(CallPrediction(call, groups[call.ranks].name, entry["time_us"],
                                    entry["policy"], b))
    rows = _rows(preds)
    return StepPrediction(config, topo.name, topo.world,
                          label or ("default" if policy is None else "custom"), tuple(preds),
                          rows, sum(r.time_us for r in rows), step)


def predict_steps(config: StepConfig, topologies: Sequence[Topology | str] | Topology | str,
                  policies: Mapping[str, PolicyLike] | None = None, *,
                  cache: SimCache | None = None, **kwargs: Any) -> list[StepPrediction]:
    """:func:`predict_step` for every topology (one, or a list) and policy (default: the
    default policy and the NCCL-like ring baseline), sharing one cache; topology-major
    order. Every topology and policy is checked before the first prediction runs."""
    if isinstance(topologies, (str, Topology)):
        topologies = [topologies]
    topologies = list(check_instance("predict_steps: topologies", topologies, (list, tuple),
                                     "a topology or a list of them", error=SpecError))
    if not topologies:
        raise SpecError("predict_steps: topologies: the list is empty; give at least one")
    policies = {"default": None, "nccl-like ring": NCCL_LIKE} if policies is None else policies
    if not isinstance(policies, Mapping) or not policies:
        raise PlanError(f"predict_steps: policies {policies!r:.60}: expected a non-empty mapping "
                        f"of label -> policy (or None for the default and the ring baseline)")
    for name, pol in policies.items():
        check_instance("predict_steps: policy label", name, str, "a string", error=PlanError)
        _check_policy(pol)
    topologies = [resolve_topology(t, kwargs.get("world")) for t in topologies]
    cache = SimCache() if cache is None else cache
    return [predict_step(config, t, pol, label=name, cache=cache, **kwargs)
            for t in topologies for name, pol in policies.items()]


def _check_policy(policy: Any) -> None:
    """A policy, a mapping of its fields, or a mapping by library collective name."""
    from purlin.snac.planner import _policy_arg
    if isinstance(policy, Mapping) and policy and set(policy) <= set(library.ALL):
        for p in policy.values():
            _policy_arg(p)
    else:
        _policy_arg(policy)


def _check_args(config: Any, policy: Any, label: Any, cache: Any, calibration: Any,
                cta_budget: Any, world: Any, executor: Any, progress: Any) -> Any:
    """Every argument of :func:`predict_step` but the topology and routing, checked before
    anything is expanded or simulated; returns the calibration (a file loaded once)."""
    from purlin.sim.calibration import Calibration, CalibrationError, load_calibration
    check_instance("predict_step: config", config, StepConfig, "a StepConfig",
                   fix="build one with purlin.workload.preset(name) or StepConfig(...)",
                   error=SpecError)
    _check_policy(policy)
    if label is not None:
        check_instance("predict_step: label", label, str, "a string or None", error=SpecError)
    if cache is not None:
        check_instance("predict_step: cache", cache, SimCache, "a SimCache or None", error=SpecError)
    if calibration is not None and not isinstance(calibration, Calibration):
        if not isinstance(calibration, (str, Path)):
            raise CalibrationError(f"predict_step: calibration {calibration!r:.60}: expected a "
                                   f"Calibration, a GPU kind or a JSON path, got "
                                   f"{type(calibration).__name__}")
        load_calibration(calibration)   # an unknown kind or a bad file fails here, once
    check_int("predict_step: cta_budget", cta_budget, lo=1, hi=1 << 16, error=PlanError,
              fix="it is the CTAs per rank")
    if world is not None:
        check_int("predict_step: world", world, lo=1, error=SpecError,
                  fix="it is the rank count of a loopback topology")
    if executor is not None:
        check_instance("predict_step: executor", executor, Executor,
                       "a concurrent.futures.Executor or None", error=SpecError)
    check_bool("predict_step: progress", progress, error=SpecError)
    return calibration


def _group_topologies(topo: Topology, step: Step) -> dict[tuple[int, ...], Topology]:
    """Each group's part of the fabric, after checking that groups of a size share no link."""
    by_size: dict[int, set[tuple[int, ...]]] = {}
    for call in step.calls:
        by_size.setdefault(len(call.ranks), set()).add(call.ranks)
    out = {}
    for size, ranks in by_size.items():
        ordered = sorted(ranks)
        what = "tensor-parallel" if size == step.config.tp else "expert-parallel"
        check_disjoint(topo, ordered, what)
        for r in ordered:
            out[r] = group_topology(topo, r)
    return out


def _run(todo: dict[tuple, tuple], cache: SimCache, executor: Executor | None, progress: bool,
         name: str) -> None:
    from tqdm import tqdm
    with tqdm(total=len(todo), disable=not progress, desc=f"{name}: collectives",
              unit="sim") as bar:
        if executor is None:
            for k, args in todo.items():
                cache.entries[k] = _guarded(args)
                bar.update(1)
        else:
            futures = {k: executor.submit(simulate_call, *args[:5]) for k, args in todo.items()}
            for k, fut in futures.items():
                cache.entries[k] = _guarded(todo[k], fut)
                bar.update(1)
    cache.simulations += len(todo)


def _guarded(args: tuple, future=None) -> dict[str, Any]:
    """Run (or collect) one simulation; a refusal names the call it belongs to."""
    c, topo, pol, _, _, call = args
    try:
        return future.result() if future is not None else simulate_call(*args[:5])
    except PurlinError as e:
        policy = "the default policy" if pol is None else f"policy {pol.to_dict()}"
        raise type(e)(f"{call.kind} ({c.name}, {call.block}, layer {call.layers[0]}) on "
                      f"{topo.name} under {policy}: {e}") from None


def _rows(preds: list[CallPrediction]) -> tuple[KindRow, ...]:
    """Per kind: each (block, layer) costs its slowest group; sum over them."""
    worst: dict[tuple[str, str, int], list] = {}
    for p in preds:
        for layer in p.call.layers:
            cur = worst.setdefault((p.call.kind, p.call.block, layer), [0.0, 0, None])
            cur[0] = max(cur[0], p.time_us)
            cur[1] = max(cur[1], p.nbytes)
            if p.bound_us is not None:
                cur[2] = max(cur[2] or 0.0, p.bound_us)
    rows = []
    for kind in KINDS:
        items = [v for (k, _, _), v in worst.items() if k == kind]
        if not items:
            continue
        bounds = [v[2] for v in items if v[2] is not None]
        rows.append(KindRow(kind, len(items), sum(v[1] for v in items),
                            sum(v[0] for v in items), sum(bounds) if bounds else None))
    return tuple(rows)
