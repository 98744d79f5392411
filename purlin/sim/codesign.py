"""Codesign tables from the simulator: ``purlin codesign TOPOLOGY``.

For each world, collective and size of a grid, a staged search over the planner's
policies, simulated with the system's own calibration and exact settles (rivals can sit a
fraction of a percent apart, less than a rack call's coalesced settles move a prediction:
:mod:`purlin.sim.engine`):

1. structures: every (regime, algorithm, Atom, fence) the planner offers there, with the
   generic rules' CTAs and chunk. Families (regime, algorithm) within ``prune`` of the
   best go on; a family that lost by 2x at two sizes in a row is not planned at larger
   sizes (where it would be the slowest to plan);
2. grid: for the best families, each role's CTAs from half to four times the rule's (and
   the whole budget on either role), then the chunk from a quarter to four times (and, in
   the latency regime, pushes of 2, 4 and 8 chunks);
3. refine: coordinate descent from the best few and the best of each leading family
   (each role's CTAs, the chunk and the push doubled and halved, the fence, the Atom and,
   for copies on ranks with GPUs of their own, the notify order toggled), plus the winners
   of the neighbouring sizes, until a round gains nothing.

With a budget (``Search.budget_s``, CPU seconds of one core summed over the points, 480
by default) the search fits the system: stage 1 runs in full (each size's structures,
with the stricter pruning below once half the budget is gone), stage 2 and each round of
stage 3 get a share of what is left and run their candidates in order of promise, round
robin over the cases (each size's first variants before anyone's later ones), and stop
when the share is spent; the midpoints get a reserve. Rack-scale worlds search a coarser
size grid (:func:`Search.for_topology`). The table records the budget, what each stage
spent and what it left out.

Sizes whose winners agree (one policy within ``merge`` of the best at each) become one
band; of the policies that agree, the band takes the one whose busiest CTA stores the
fewest bytes (:func:`~purlin.sim.codesign_bands.preferred`: ties the simulator cannot
resolve go to the schedule least exposed to per-CTA costs). Between two grid sizes, the
geometric midpoint is simulated with both neighbours' picks and their best rivals; the band boundary goes where the midpoint says. The table
(:mod:`purlin.snac.tables` describes the format) records every point's pick, best and
top rivals, each band's probe (its pick's programs digest and time at one size: the
planner fingerprint), the calibration file's digest, the command and the search's cost.
"""
from __future__ import annotations

import datetime
import hashlib
import math
import os
import sys
import time
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from purlin.errors import PurlinError
from purlin.snac.policy import Policy, traits
from purlin.sim.codesign_bands import (busiest_nbytes, compact, default_path, family, fingerprint,
                                      make_bands, nbytes_of, policy_key, ranked, summary_lines,
                                      write_table)
from purlin.snac.tables import SCHEMA_VERSION
from purlin.spec import library
from purlin.topology import Topology, resolve_topology, shipped_name, topology_digest

__all__ = ["QUICK", "Search", "default_path", "sizes_for", "evaluate", "fingerprint", "search",
           "summary_lines", "write_table"]

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
DEFAULT_SIZES = tuple(KiB * 4 ** k for k in range(10))      # 1 KiB .. 256 MiB, x4
RACK_SIZES = tuple(KiB * 16 ** k for k in range(5))        # 1 KiB .. 64 MiB, x16 (world <= 144)
WIDE_SIZES = tuple(KiB * 32 ** k for k in range(4))        # 1 KiB .. 32 MiB, x32 (larger worlds)
LOOPBACK_WORLDS = (2, 4, 8)
BUDGET_S = 480.0           # default search budget: CPU seconds of one core
MIDPOINT_RESERVE = 0.15    # share of the budget kept for the midpoints


def sizes_for(world: int) -> tuple[int, ...]:
    """The size grid searched at ``world`` ranks: x4 up to 256 MiB for a box, coarser for a
    rack, where one point costs seconds (the midpoints still check each boundary)."""
    return DEFAULT_SIZES if world <= 16 else RACK_SIZES if world <= 144 else WIDE_SIZES


@dataclass(frozen=True)
class Search:
    """What to search and how hard (the defaults are what shipped tables use)."""

    sizes: tuple[int, ...] | None = None       # None: sizes_for(world)
    collectives: tuple[str, ...] = library.PURLIN_SEVEN
    worlds: tuple[int, ...] | None = None      # None: the topology's (loopback: 2, 4, 8)
    atoms: tuple[str, ...] = ("sm", "switch")  # switch only where the switches reduce
    cta_budget: int | None = None              # None: 64, or SMs / world on one GPU
    prune: float = 1.3        # stage 1 keeps structures within this factor of the best
    structures: int = 3       # ... at most this many
    refine_from: int = 3      # stage 3 starts from this many best candidates
    rounds: int = 6           # ... for at most this many rounds
    merge: float = 0.02       # a band's pick is within this of each size's best
    top: int = 6              # rivals recorded per point
    strikes: int = 2          # under a budget, a family that lost by 2x at this many sizes in a row stops
    budget_s: float | None = BUDGET_S   # CPU seconds of one core; None: no limit
    beyond: str = "last-band"  # past the largest size: the last band, or "generic" rules

    def for_topology(self, topo: Topology) -> "Search":
        """This search with the size grid of ``topo``'s largest world filled in."""
        if self.sizes is not None:
            return self
        world = max(self.worlds or (LOOPBACK_WORLDS if topo.loopback else (topo.world,)))
        return replace(self, sizes=sizes_for(world))

    def budget(self, topo: Topology) -> int:
        """The CTA budget per rank searched on ``topo``."""
        if self.cta_budget is not None:
            return self.cta_budget
        if topo.loopback:
            return max(1, topo.gpu_of(0).sms // topo.world)
        return 64


QUICK = Search(structures=2, refine_from=2, rounds=1)


class InProcess(Executor):
    """Runs points in this process, one after the other (one worker: no pool to feed)."""

    def submit(self, fn, /, *args, **kwargs):
        """Run ``fn`` now; its result (or exception) in a done Future."""
        f: Future = Future()
        try:
            f.set_result(fn(*args, **kwargs))
        except BaseException as e:   # noqa: BLE001 - handed to the caller through the future
            f.set_exception(e)
        return f

    def map(self, fn, *iterables, timeout=None, chunksize=1):
        """``map(fn, *iterables)``, lazily, in this process."""
        return map(fn, *iterables)


def calibration_digest(calibration: Any, topo: Topology) -> tuple[str, str]:
    """(gpu kind or path, sha256 of the calibration file's content, 16 hex digits)."""
    from purlin.sim.calibration import Calibration, load_calibration
    cal = calibration if isinstance(calibration, Calibration) else load_calibration(calibration or topo.gpu_kind)
    return cal.gpu_kind, hashlib.sha256(Path(cal.path).read_bytes()).hexdigest()[:16]


# ---- one point: plan and simulate (runs in a worker process) -------------------------

@lru_cache(maxsize=16)
def _topo(ref, world: int) -> Topology:
    return resolve_topology(ref, world)


_SIMULATED: dict[tuple, dict] = {}   # per worker process: candidates that plan alike run once


def evaluate(ref, world: int, name: str, size: int, policy: dict, calibration, budget: int) -> dict:
    """Plan ``name`` at nccl ``size`` with ``policy`` and simulate it: time, digest."""
    from purlin.sim.engine import simulate
    from purlin.snac import plan
    from purlin.snac.serialize import programs_digest
    t0 = time.process_time()
    topo = _topo(ref, world)
    c = library.from_size(name, world, size, "fp32")
    try:
        s = plan(c, topo, policy, cta_budget=budget, check=False)
    except PurlinError as e:
        return {"error": f"{type(e).__name__}: {e}", "cpu_s": time.process_time() - t0}
    d = programs_digest(s)
    key = (d, size, name, topology_digest(topo), str(calibration))
    if key not in _SIMULATED:   # exact settles: rivals can sit a fraction of a percent apart
        r = simulate(s, topo, calibration, record=False, exact=True)
        _SIMULATED[key] = {"time_us": r.time_us, "programs_digest": d,
                           "instructions": sum(len(p.instrs) for p in s.programs),
                           "busiest_nbytes": busiest_nbytes(s)}
    return {**_SIMULATED[key], "policy": compact(s.policy), "cpu_s": time.process_time() - t0}


def _evaluate(args):
    return evaluate(*args)


# ---- candidates ----------------------------------------------------------------------

def structures(name: str, topo: Topology, atoms: Sequence[str]) -> list[dict]:
    """Every (regime, algorithm, Atom, fence) the planner offers for ``name`` on ``topo``."""
    c = library.from_size(name, topo.world, 1 << 16)
    t = traits(topo)
    algos = ("one_shot", "two_shot") if c.is_reduce else ("one_shot",)
    nvls = any(sw.in_switch_reduce for sw in topo.switches)
    out = [{"regime": "throughput", "algorithm": "ring", "atom": "sm", "fence": f}
           for f in ("rank", "cta")]
    if not t.fully_connected:
        return out
    for regime in ("latency", "direct", "throughput"):
        for a in algos:
            for atom in atoms:
                if atom == "switch" and not (nvls and c.is_reduce and regime == "direct"):
                    continue
                if atom == "ce" and (c.is_reduce or regime == "latency"):
                    continue
                for f in (("rank",) if regime == "latency" else ("rank", "cta")):
                    out.append({"regime": regime, "algorithm": a, "atom": atom, "fence": f})
    return out


def _reduces(name: str, topo: Topology) -> bool:
    return library.from_size(name, topo.world, 1 << 16).is_reduce


def _nvls(topo: Topology, name: str) -> bool:
    return _reduces(name, topo) and any(sw.in_switch_reduce for sw in topo.switches)


def filled(name: str, topo: Topology, size: int, budget: int, **knobs) -> dict:
    """The generic rules' policy with ``knobs`` fixed: what ``plan`` fills for them (a
    direct copy split by the input a rank holds, not its W times larger output), and their
    notify order where it matters (:func:`orders`)."""
    from purlin.snac.planner import generic
    c = library.from_size(name, topo.world, size, "fp32")
    if orders(name, topo):
        knobs.setdefault("notify_order", "rotated")
    return compact(generic(c, topo, budget, Policy(**knobs)).to_dict())


def orders(name: str, topo: Topology) -> bool:
    """Whether the notify order is a knob here: a copy on ranks with GPUs of their own (a
    loopback world plans in rank order whatever the policy says, and reductions keep it:
    docs/policy.md). The generic rules take ``rotated`` there; the search tries both."""
    return not topo.loopback and not _reduces(name, topo)


def role_variants(p: dict, budget: int) -> list[dict]:
    """CTA splits around ``p``: each role's CTAs from half to four times the rule's,
    and the whole budget on either role or split evenly."""
    out, put, cons = [], p["put_ctas"], p["consumer_ctas"]
    for a in {max(1, put // 2), put, 2 * put, 4 * put}:
        for b in {max(1, cons // 2), cons, 2 * cons}:
            if a + b <= budget:
                out.append({**p, "put_ctas": a, "consumer_ctas": b})
    for a, b in ((1, budget - 1), (budget - 1, 1), (budget // 2, budget - budget // 2)):
        if a >= 1 and b >= 1:
            out.append({**p, "put_ctas": a, "consumer_ctas": b})
    return out


def chunk_variants(p: dict, nbytes: int, factors=(0.25, 0.5, 2, 4)) -> list[dict]:
    """The chunk scaled by ``factors`` (a packet push keeps its size when it still
    holds whole chunks)."""
    out = []
    for k in factors:
        ch = int(p["chunk_nbytes"] * k) // 16 * 16
        if 16 <= ch <= max(16, nbytes) and nbytes // ch <= 4096:
            push = p.get("push_nbytes")
            out.append({**p, "chunk_nbytes": ch,
                        "push_nbytes": push if push and push > ch and push % ch == 0 else None})
    return out


def neighbours(p: dict, nbytes: int, budget: int, switch: bool = False, order: bool = False) -> list[dict]:
    """One knob at a time: each role's CTAs doubled and halved, the chunk doubled and
    halved, the fence toggled, (``switch``: the switches reduce) the Atom, and (``order``:
    :func:`orders`) the notify order."""
    out = chunk_variants(p, nbytes, (0.5, 2))
    for role in ("put_ctas", "consumer_ctas"):
        for v in (p[role] * 2, p[role] // 2):
            other = p["consumer_ctas" if role == "put_ctas" else "put_ctas"]
            if 1 <= v and v + other <= budget:
                out.append({**p, role: v})
    if p["regime"] != "latency":
        out.append({**p, "fence": "cta" if p.get("fence", "rank") == "rank" else "rank"})
    if p["regime"] == "latency":
        push = p.get("push_nbytes") or p["chunk_nbytes"]
        for v in (2 * push, push // 2):
            if p["chunk_nbytes"] <= v <= max(nbytes, p["chunk_nbytes"]) and v % p["chunk_nbytes"] == 0:
                out.append({**p, "push_nbytes": None if v == p["chunk_nbytes"] else v})
    if p["regime"] == "direct" and switch:
        out.append({**p, "atom": "sm" if p["atom"] == "switch" else "switch"})
    if order:
        out.append({**p, "notify_order": "rank" if p.get("notify_order") == "rotated" else "rotated"})
    return out


# ---- the search ------------------------------------------------------------------------

@dataclass
class _Case:
    """The search state of one (world, collective)."""

    name: str
    world: int
    results: dict[int, dict[tuple, dict]] = field(default_factory=dict)   # size -> key -> row


class _Runner:
    """Runs batches of points on an executor, counting them (and their CPU seconds) per
    stage; a stage given a limit stops when it has spent it."""

    def __init__(self, ref, calibration, budget_of, executor: Executor, progress: bool,
                 batch: int = 16, lines: bool = True):
        self.ref, self.calibration, self.budget_of = ref, calibration, budget_of
        self.executor, self.progress, self.batch, self.lines = executor, progress, batch, lines
        self.stages: dict[str, dict] = {}
        self.spent = 0.0          # CPU seconds of all points so far

    def run(self, stage: str, tasks: list[tuple[_Case, int, dict]],
            limit_s: float | None = None) -> int:
        """Evaluate (case, size, policy) tasks not seen yet, in order, storing rows in the
        cases, until ``limit_s`` CPU seconds are spent; returns how many were left out."""
        from tqdm import tqdm
        todo, seen = [], set()
        for case, size, pol in tasks:
            key = (case.name, case.world, size, policy_key(pol))
            if key in seen or policy_key(pol) in case.results.setdefault(size, {}):
                continue
            seen.add(key)
            todo.append((case, size, pol))
        t0, cpu0, done = time.perf_counter(), self.spent, 0
        with tqdm(total=len(todo), desc=stage, unit="pt", disable=not self.progress,
                  file=sys.stderr, leave=False) as bar:
            while done < len(todo) and (limit_s is None or self.spent - cpu0 < limit_s):
                part = todo[done:done + self.batch]
                args = [(self.ref, case.world, case.name, size, pol, self.calibration,
                         self.budget_of(case.world)) for case, size, pol in part]
                for (case, size, pol), row in zip(part, self.executor.map(_evaluate, args, chunksize=1)):
                    self.spent += row.pop("cpu_s", 0.0)
                    case.results[size][policy_key(pol)] = row
                    if "error" not in row:   # the policy as planned (a budget may shrink it)
                        case.results[size].setdefault(policy_key(row["policy"]), row)
                    bar.update(1)
                done += len(part)
        st = self.stages.setdefault(stage, {"points": 0, "wall_s": 0.0, "cpu_s": 0.0, "left_out": 0})
        st["points"] += done
        st["wall_s"] = round(st["wall_s"] + time.perf_counter() - t0, 2)
        st["cpu_s"] = round(st["cpu_s"] + self.spent - cpu0, 2)
        st["left_out"] += len(todo) - done
        if self.lines and todo:
            left = f", {len(todo) - done} left out (budget)" if done < len(todo) else ""
            print(f"# {stage}: {done} points in {time.perf_counter() - t0:.1f} s "
                  f"({self.spent - cpu0:.1f} CPU s){left}", file=sys.stderr, flush=True)
        return len(todo) - done


def _interleave(groups: list[list]) -> list:
    """Round robin over ``groups``: every group's first item, then every second one..."""
    out, k = [], 0
    while any(k < len(g) for g in groups):
        out += [g[k] for g in groups if k < len(g)]
        k += 1
    return out


class _Budget:
    """What each stage may spend of ``Search.budget_s`` (None: no limit)."""

    def __init__(self, total: float | None, runner: _Runner):
        self.total, self.runner = total, runner

    def left(self, share: float = 1.0) -> float | None:
        """``share`` of what is left after the midpoints' reserve."""
        if self.total is None:
            return None
        return max(0.0, share * (self.total * (1 - MIDPOINT_RESERVE) - self.runner.spent))

    def rest(self) -> float:
        """What is left of the whole budget (the midpoints' reserve included)."""
        return max(0.0, (self.total or 0.0) - self.runner.spent)

    def tight(self) -> bool:
        """Half the budget gone: stage 1 prunes harder."""
        return self.total is not None and self.runner.spent > 0.5 * self.total


def search(topology: Topology | str, spec: Search = Search(), *, calibration: Any = None,
           executor: Executor | None = None, workers: int | None = None,
           progress: bool = True, command: str | None = None, lines: bool = True) -> dict:
    """Search the planner's policies on the simulator and return a codesign table.

    Parameters
    ----------
    topology : Topology or str
        A shipped name, a YAML path or a Topology (a loopback one is searched at
        ``spec.worlds``, default 2, 4 and 8).
    spec : Search
        Grid and effort (:data:`QUICK` for a cheaper one).
    calibration : str or Calibration, optional
        Default: the topology's ``gpu_kind`` file.
    executor : concurrent.futures.Executor, optional
        Runs the points; default a process pool of ``workers`` (all cores; 1: in this
        process).
    progress, lines : bool
        tqdm bars per stage; one line per stage (points, seconds, what the budget left out).

    Returns
    -------
    dict
        The table (see :mod:`purlin.snac.tables`); write it with :func:`write_table`.
    """
    t_start = time.perf_counter()
    base = resolve_topology(topology)
    spec = spec.for_topology(base)
    worlds = spec.worlds or (LOOPBACK_WORLDS if base.loopback else (base.world,))
    ref = base.name if shipped_name(base) == base.name else base
    topos = {w: resolve_topology(ref if isinstance(ref, str) else base, w if base.loopback else None)
             for w in worlds}
    kind, cal_digest = calibration_digest(calibration, base)
    own = executor is None
    n_workers = workers or os.cpu_count() or 1
    if own:
        executor = InProcess() if n_workers == 1 else ProcessPoolExecutor(max_workers=n_workers)
    runner = _Runner(ref, calibration, lambda w: spec.budget(topos[w]), executor, progress,
                     batch=4 * n_workers, lines=lines)
    budget = _Budget(spec.budget_s, runner)
    cases = [_Case(library.canonical(n), w) for w in worlds for n in spec.collectives]
    try:
        _stage_structures(runner, cases, topos, spec, budget)
        _stage_grid(runner, cases, topos, spec, budget)
        _stage_refine(runner, cases, topos, spec, budget)
        out_worlds = {}
        for w in worlds:
            out_worlds[str(w)] = {"topology_digest": topology_digest(topos[w]),
                                  "cta_budget": spec.budget(topos[w]), "collectives": {}}
        for k, case in enumerate(cases):
            def run(stage, tasks, limited=False, case=case, left=len(cases) - k):
                limit = budget.rest() / left if limited and budget.total is not None else None
                return runner.run(stage, [(case, s, p) for s, p in tasks], limit)
            out_worlds[str(case.world)]["collectives"][case.name] = make_bands(
                case.name, case.world, case.results, spec.sizes, spec.merge, spec.top, run)
    finally:
        if own:
            executor.shutdown()
    table = {"schema_version": SCHEMA_VERSION, "topology": base.name, "gpu_kind": base.gpu_kind,
             "command": command or f"purlin codesign {base.name}",
             "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
             "calibration": {"gpu_kind": kind, "digest": cal_digest}, "beyond": spec.beyond,
             "search": {"sizes": list(spec.sizes), "dtype": "fp32",
                        "worlds": list(worlds), "atoms": list(spec.atoms),
                        "prune": spec.prune, "structures": spec.structures,
                        "refine_from": spec.refine_from, "rounds": spec.rounds, "merge": spec.merge,
                        "tie": "busiest_nbytes",
                        "strikes": spec.strikes, "budget_s": spec.budget_s,
                        "cpu_s": round(runner.spent, 1), "stages": runner.stages,
                        "points": sum(s["points"] for s in runner.stages.values()),
                        "left_out": sum(s["left_out"] for s in runner.stages.values()),
                        "wall_s": round(time.perf_counter() - t_start, 1),
                        "cpus": os.cpu_count()},
             "worlds": out_worlds}
    table["planner"] = {"fingerprint": fingerprint(table)}
    return table


def _stage_structures(runner: _Runner, cases: list[_Case], topos, spec: Search,
                      budget: _Budget) -> None:
    """Stage 1, size by size upward so that, under a budget, a structure that lost by 2x at
    ``strikes`` sizes in a row is not planned at the larger ones (where it would be slowest
    to plan; an unbudgeted search tries every structure at every size, since how many sizes
    make a row depends on the grid, and a family can lose by 2x up to a crossover);
    once half the budget is gone (at rack scale with a budget: from the second size on),
    only the families within ``prune`` of the best at the previous size go on. At rack
    scale only the rank fence is tried here (stage 3 toggles it)."""
    strikes: dict[tuple, int] = {}
    ratio: dict[tuple, float] = {}      # family -> its best / the best, at the last size
    for i, size in enumerate(spec.sizes):
        tasks = []
        for case in cases:
            topo = topos[case.world]
            tight = i > 0 and (budget.tight() or (spec.budget_s is not None and case.world > 16))
            for s in structures(case.name, topo, spec.atoms):
                k = (case.name, case.world, family(s))
                struck = spec.budget_s is not None and strikes.get(k, 0) >= spec.strikes
                if struck or (tight and ratio.get(k, math.inf) > spec.prune):
                    continue
                if spec.budget_s is not None and case.world > 16 and s["fence"] != "rank":
                    continue
                try:
                    pol = filled(case.name, topo, size, spec.budget(topo), **s)
                except PurlinError:
                    continue
                tasks.append((case, size, pol))
        runner.run(f"structures {_size(size)}", tasks)
        for case in cases:
            rk = ranked(case.results.get(size, {}))
            if not rk:
                continue
            best = rk[0]["time_us"]
            by_structure: dict[tuple, float] = {}
            for r in rk:
                by_structure.setdefault(family(r["policy"]), r["time_us"])
            for k in [k for k in ratio if k[:2] == (case.name, case.world)]:
                ratio[k] = math.inf          # not simulated at this size: not a leader
            for s, t in by_structure.items():
                k = (case.name, case.world, s)
                strikes[k] = strikes.get(k, 0) + 1 if t > 2 * best else 0
                ratio[k] = t / best


def _stage_grid(runner: _Runner, cases: list[_Case], topos, spec: Search,
                budget: _Budget) -> None:
    """Stage 2: role splits for the best structures, then chunks for the best split
    (each with a share of the budget, round robin over the cases and sizes)."""
    for part, share in (("roles", 0.35), ("chunks", 0.4)):
        groups = []
        for case in cases:
            topo, ctas = topos[case.world], spec.budget(topos[case.world])
            for size, rows in case.results.items():
                rk = ranked(rows)
                if not rk:
                    continue
                best, picked = rk[0]["time_us"], {}
                for r in rk:
                    s = family(r["policy"])
                    if r["time_us"] <= spec.prune * best and s not in picked and len(picked) < spec.structures:
                        picked[s] = r["policy"]
                nbytes = nbytes_of(case.name, case.world, size)
                tasks = []
                for p in picked.values():
                    vs = role_variants(p, ctas) if part == "roles" else chunk_variants(p, nbytes)
                    if part == "chunks" and p["regime"] == "latency":   # and larger pushes
                        vs += [{**v, "push_nbytes": k * v["chunk_nbytes"]} for v in vs + [p]
                               for k in (2, 4, 8) if k * v["chunk_nbytes"] <= nbytes]
                    tasks.append([(case, size, v) for v in vs])
                groups.append(_interleave(tasks))
        runner.run(f"grid {part}", _interleave(groups), budget.left(share))


def _starts(rk: list[dict], spec: Search) -> list[dict]:
    """Where refinement starts: the best few, and the best of each leading structure."""
    out, seen = list(rk[:spec.refine_from]), set()
    for r in rk:
        s = family(r["policy"])
        if s not in seen and len(seen) < spec.structures:
            seen.add(s)
            out.append(r)
    return [r["policy"] for r in out]


def _stage_refine(runner: _Runner, cases: list[_Case], topos, spec: Search,
                  budget: _Budget) -> None:
    """Stage 3: coordinate descent from the best few (and the best of each leading
    structure), and each size's winner tried at its neighbouring sizes, until a round
    finds nothing faster (or the budget is spent: each round gets half of what is left,
    the last all of it; the neighbours' winners go first)."""
    for k in range(spec.rounds):
        groups, before = [], {}
        for case in cases:
            ctas = spec.budget(topos[case.world])
            sizes = sorted(case.results)
            for i, size in enumerate(sizes):
                rk = ranked(case.results[size])
                if not rk:
                    continue
                before[(case.name, case.world, size)] = rk[0]["time_us"]
                switch = "switch" in spec.atoms and _nvls(topos[case.world], case.name)
                order = orders(case.name, topos[case.world])
                tasks = [(case, size, ranked(case.results[sizes[j]])[0]["policy"])
                         for j in (i - 1, i + 1) if 0 <= j < len(sizes) and ranked(case.results[sizes[j]])]
                for p in _starts(rk, spec):
                    tasks += [(case, size, v)
                              for v in neighbours(p, nbytes_of(case.name, case.world, size), ctas, switch, order)]
                groups.append(tasks)
        if budget.left() == 0.0:
            break
        runner.run(f"refine {k + 1}", _interleave(groups),
                   budget.left(1.0 if k == spec.rounds - 1 else 0.5))
        gained = sum(1 for case in cases for size in case.results
                     if ranked(case.results[size])
                     and ranked(case.results[size])[0]["time_us"] < before.get((case.name, case.world, size), 0) * (1 - 1e-9))
        if not gained:
            break


def _size(n: int) -> str:
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)
