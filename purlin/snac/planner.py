"""plan(spec, topology, policy) -> Schedule: a pure function.

Same inputs give a byte-identical Schedule (so plans cache under a hash). With no policy
the default comes from the topology's codesign table (:mod:`purlin.snac.tables`); the
``auto`` fields of a policy, and every case no table covers, are filled by the generic
rules of :mod:`purlin.snac.policy`. :func:`resolve` also says which it was.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from purlin.gcpause import paused
from purlin.check import check_bool, check_int
from purlin.errors import PlanError, SpecError
from purlin.snac import dataflow as df
from purlin.snac import limits
from purlin.snac.bind import topology_ref
from purlin.snac.ir import Ref, Schedule, ref_buffer_set
from purlin.snac.policy import ALGORITHMS, MIN_CHUNK, REGIMES, Policy, codesign, traits
from purlin.snac.tables import lookup, shipped_lookup
from purlin.snac.sync import insert_sync
from purlin.spec.collective import Collective
from purlin.topology import Topology, is_direct, is_fully_connected, resolve_topology, ring_order


def resolve(c: Collective, topology: Topology, policy: Policy | dict | None,
            cta_budget: int, table=None, max_instructions: int = limits.DEFAULT_MAX_INSTRUCTIONS,
            groups: list[df.Group] | None = None, *, sizes: dict | None = None) -> tuple[Policy, dict]:
    """The policy ``plan`` runs and where it came from.

    No policy (or one with every field ``auto``): a given ``table`` (a codesign or sweep
    table) if it covers the case, else the topology's shipped codesign table when the
    topology is that shipped file unchanged, else the generic rules. A policy with some
    fields set keeps them; the generic rules fill the rest. A default in the direct regime
    whose per-CTA handshakes would pass ``max_instructions`` gates its start and gathers
    its fence instead, when that fits (:func:`_fit_handshakes`). ``groups``: ``df.groups(c)``
    if at hand (at rack scale finding them costs seconds); ``sizes``: a dict in which the
    plan-size estimates made here are kept for the caller (each is a pass over the groups).

    Returns
    -------
    (Policy, dict)
        The resolved policy and its source: ``{"source": "table", "table": file,
        "world": W, "band": [lo, hi], ...}``, ``{"source": "generic", "why": ...}`` or
        ``{"source": "policy", "auto_filled": [fields]}``.
    """
    policy = _policy_arg(policy)
    if table is not None:
        check_table(table)
    policy = (policy or Policy()).check()
    nbytes = max(max(c.input.nbytes(r), c.output.nbytes(r)) for r in range(c.world))
    if policy.is_auto():
        hit = lookup(table, c.name, topology.name, c.world, nbytes) if table is not None else None
        if hit is not None:
            source = {**hit[1], "table": "given: " + str(hit[1].get("table"))}
        else:
            hit = shipped_lookup(topology, c.name, nbytes)
            if isinstance(hit, dict):
                source, hit = {"source": "generic", "why": hit["why"]}, None
            else:
                source = hit[1]
        if hit is not None:
            policy = hit[0]
    else:
        auto = [k for k in ("regime", "algorithm") if getattr(policy, k) == "auto"]
        auto += [k for k in ("chunk_nbytes", "put_ctas", "consumer_ctas") if getattr(policy, k) is None]
        source = {"source": "policy", "auto_filled": auto}
    pol = generic(c, topology, cta_budget, policy)
    if source["source"] == "table" and (pol.put_ctas, pol.consumer_ctas) != (policy.put_ctas, policy.consumer_ctas):
        source["shrunk_to_budget"] = cta_budget
    if source["source"] != "policy":
        pol, source = _fit_handshakes(c, topology, pol, source, cta_budget, max_instructions, groups,
                                      {} if sizes is None else sizes)
    return pol, source


def _fit_handshakes(c: Collective, topology: Topology, pol: Policy, source: dict, cta_budget: int,
                    max_instructions: int, groups: list[df.Group] | None, sizes: dict) -> tuple[Policy, dict]:
    """At rack scale the direct regime's per-CTA handshakes (about 4 W^2 C flags for W
    ranks of C working CTAs) outgrow the instruction limit long before its data does: a
    576-rank AllReduce of 64 MiB holds about 8 million. A default past the limit gates its
    start and gathers its fence (about 4 W (W + C) flags, one local hop more at each end)
    when that fits; otherwise it stays, and the limit check says how far over it is."""
    if pol.regime != "direct" or (pol.start, pol.fence) == ("gate", "gather"):
        return pol, source
    groups = df.groups(c) if groups is None else groups
    est = _estimate(c, pol, cta_budget, topology.loopback, groups, sizes).instructions
    if est <= max_instructions:
        return pol, source
    gated = replace(pol, start="gate", fence="gather").check()
    if _estimate(c, gated, cta_budget, topology.loopback, groups, sizes).instructions > max_instructions:
        return pol, source
    return gated, {**source, "handshakes": f"start 'gate', fence 'gather': per-CTA handshakes would be "
                                           f"about {est:,} instructions, over the limit of {max_instructions:,}"}


def generic(c: Collective, topology: Topology, cta_budget: int, base: Policy | None = None) -> Policy:
    """The generic rules' policy for ``c`` on ``topology``, the ``auto`` fields of ``base``
    filled (no table consulted): sized by the largest buffer of any rank, a direct copy
    split by the most input bytes a rank holds; its fanout is all output bytes over all
    input bytes (a copy stores each input byte that many times on average); it is even
    where all inputs, and all outputs, are one size."""
    ins = [c.input.nbytes(r) for r in range(c.world)]
    outs = [c.output.nbytes(r) for r in range(c.world)]
    nbytes = max(max(ins), max(outs))
    return codesign(c.name, c.world, nbytes, traits(topology), cta_budget, c.is_reduce, base or Policy(), max(ins),
                    sum(outs) / max(1, sum(ins)), len(set(ins)) == 1 and len(set(outs)) == 1)


def resolve_policy(c: Collective, topology: Topology, policy: Policy | dict | None,
                   cta_budget: int, table=None, max_instructions: int = limits.DEFAULT_MAX_INSTRUCTIONS,
                   groups: list[df.Group] | None = None, *, sizes: dict | None = None) -> Policy:
    """The policy ``plan`` runs (:func:`resolve` without its source)."""
    return resolve(c, topology, policy, cta_budget, table, max_instructions, groups, sizes=sizes)[0]


def _estimate(c: Collective, pol: Policy, cta_budget: int, spread: bool, groups: list[df.Group],
              sizes: dict) -> limits.PlanEstimate:
    """:func:`limits.estimate`, kept in ``sizes`` by policy: resolving a default and
    checking the plan it gives against the limits ask for the same one (at 576 ranks a
    third of a million groups to walk)."""
    key = (pol, cta_budget, spread)
    got = sizes.get(key)
    if got is None:
        got = sizes[key] = limits.estimate(c, pol, cta_budget, spread=spread, groups=groups)
    return got


@paused()
def plan(collective: Collective, topology: Topology | str | None = None,
         policy: Policy | dict | None = None, cta_budget: int = 64,
         check: bool = True, table=None, *,
         max_instructions: int | None = limits.DEFAULT_MAX_INSTRUCTIONS,
         max_memory_nbytes: int | None = limits.DEFAULT_MAX_MEMORY_NBYTES) -> Schedule:
    """Plan ``collective`` on ``topology`` with ``policy`` and at most ``cta_budget`` CTAs
    per rank. The schedule is verified before it is returned (``check=False`` skips it).
    ``table``: a codesign table (:func:`purlin.sim.codesign.search`) or a sweep's
    best-policy table (:func:`purlin.sim.best_policy_table`), used when no ``policy`` is
    given, before the topology's shipped table (see :func:`resolve`).

    A plan estimated (:mod:`purlin.snac.limits`) past ``max_instructions`` instructions
    or ``max_memory_nbytes`` bytes is refused before it is built (LimitError); None means
    the default limit.

    Examples
    --------
    >>> from purlin.spec import library
    >>> s = plan(library.all_gather(4, 64), policy=Policy(regime="throughput"))
    >>> s.world, sorted({p.role for p in s.programs})[:2]
    (4, ['consume', 'put'])
    >>> plan(library.all_reduce(4, 1 << 50))
    Traceback (most recent call last):
    ...
    purlin.errors.LimitError: all_reduce at world 4, 1125899906842624 B: about 8,390,920 instructions (~6.5 GiB to build), over the limit of 2,097,152; raise it with max_instructions= (on the command line --max-instructions) if you mean it
    """
    check_bool("check", check, error=PlanError)
    cta_budget = check_int("cta_budget", cta_budget, lo=1, hi=1 << 16, error=PlanError,
                           fix="it is the CTAs per rank, at least 1")
    topo, pol, gs = _check_limits(collective, topology, policy, cta_budget, table,
                                  max_instructions, max_memory_nbytes)
    c = collective   # validated by check_limits; any count: pol.align is where pieces are cut
    order: tuple[int, ...] = ()
    if pol.algorithm == "ring":
        if pol.regime == "latency":
            raise PlanError("policy: algorithm 'ring' relays through staging; it runs in the "
                            "throughput regime, not 'latency'")
        order = ring_order(topo)
    else:
        _check_reach(c, topo, gs)
    if pol.atom == "ce" and c.is_reduce:
        raise PlanError(f"policy.atom 'ce': {c.name} reduces, and a copy engine only copies; use "
                        f"atom 'sm' or 'tma'")
    if pol.atom == "switch":
        if not (c.is_reduce and pol.regime == "direct"):
            raise PlanError("policy.atom 'switch' (in-switch reduce) needs a reduction in the "
                            "'direct' regime")
        if not any(sw.in_switch_reduce for sw in topo.switches):
            raise PlanError(f"policy.atom 'switch': topology {topo.name} has no switch with "
                            f"in_switch_reduce (NVLS)")
    has_tail = (c.is_reduce and pol.algorithm == "two_shot" and pol.regime != "direct"
                and any(len(g.holders) > 1 for g in gs))   # direct reductions store to all holders
    ctas = df.Ctas(c.world, pol.put_ctas, pol.consumer_ctas,
                   min(cta_budget, pol.put_ctas + pol.consumer_ctas), split_tail=has_tail)
    staging = packets = 0
    chunk = pol.chunk_nbytes
    # rotated, on GPUs of their own, every rank's program is its peers' rotation (what the
    # simulator's rank symmetry finds); ranks sharing one GPU keep rank order, as measured
    symmetric = pol.notify_order == "rotated" and not topo.loopback
    if pol.algorithm == "ring":
        ops, staging = df.ring(c, gs, chunk, pol.staging_nbytes, ctas, order, pol.align)
    elif pol.regime == "throughput":
        ops, staging = df.throughput(c, gs, chunk, pol.staging_nbytes, ctas, pol.algorithm, pol.align)
    elif pol.regime == "direct":
        ops = df.direct(c, gs, chunk, ctas, pol.algorithm, pol.align, spread=topo.loopback,
                        least=min(chunk, MIN_CHUNK), rotated=symmetric)
    else:
        ops, packets = df.latency(c, gs, chunk, ctas, pol.algorithm, pol.align, pol.push_nbytes,
                                  rotated=symmetric)
    ops, staging = _compact_staging(ops)
    synced = insert_sync(ops, c.world, c.dtype.name, c.op, pol.atom, pol.fence, pol.notify_order,
                         pol.start, rotate_waits=symmetric)
    sched = Schedule(c, synced.programs, staging, packets, synced.num_signals,
                     synced.epoch_stride, topology=topology_ref(topo),
                     reduction="any" if pol.algorithm == "ring" and c.is_reduce else "rank",
                     policy=pol.to_dict())
    if check:
        from purlin.snac.verify import verify
        verify(sched)
    return sched


def check_limits(collective: Collective, topology: Topology | str | None = None,
                 policy: Policy | dict | None = None, cta_budget: int = 64, table=None, *,
                 max_instructions: int | None = limits.DEFAULT_MAX_INSTRUCTIONS,
                 max_memory_nbytes: int | None = limits.DEFAULT_MAX_MEMORY_NBYTES) -> tuple[Topology, Policy]:
    """Everything :func:`plan` checks before it builds: the spec, the topology, the policy
    and the estimated size of the plan against the limits (LimitError past them). Returns
    the topology and the resolved policy. Cheap, so a sweep or ``purlin sim`` can check
    every point before running the first.

    Examples
    --------
    >>> from purlin.spec import library
    >>> topo, pol = check_limits(library.all_reduce(4, 1 << 20))
    >>> topo.world, pol.regime
    (4, 'direct')
    """
    return _check_limits(collective, topology, policy, cta_budget, table, max_instructions,
                         max_memory_nbytes)[:2]


def _check_limits(collective: Any, topology: Any, policy: Any, cta_budget: Any, table: Any,
                  max_instructions: Any, max_memory_nbytes: Any
                  ) -> tuple[Topology, Policy, list[df.Group]]:
    """:func:`check_limits`, also returning the spec's dataflow groups (found once, for the
    estimates and the builders alike: at rack scale each pass costs seconds)."""
    if not isinstance(collective, Collective):
        hint = (" (build one: purlin.library.from_size(name, world, nbytes))"
                if isinstance(collective, str) else "")
        raise PlanError(f"collective {collective!r:.60}: expected a Collective{hint}, got "
                        f"{type(collective).__name__}")
    cta_budget = check_int("cta_budget", cta_budget, lo=1, hi=1 << 16, error=PlanError,
                           fix="it is the CTAs per rank, at least 1")
    max_instructions = limits.DEFAULT_MAX_INSTRUCTIONS if max_instructions is None else \
        check_int("max_instructions", max_instructions, lo=1, error=PlanError)
    max_memory_nbytes = limits.DEFAULT_MAX_MEMORY_NBYTES if max_memory_nbytes is None else \
        check_int("max_memory_nbytes", max_memory_nbytes, lo=1, error=PlanError)
    policy = _policy_arg(policy)
    collective.validate()   # the shape first: worlds, names, sizes (any element count)
    what = f"{collective.name} at world {collective.world}, {_nbytes(collective)} B"
    gs = df.groups(collective)
    limits.check_plan_size(limits.lower_bound(collective, groups=gs), max_instructions,
                           max_memory_nbytes, what)
    topo = _topology_for(topology, collective.world)
    sizes: dict = {}
    pol = resolve_policy(collective, topo, policy, cta_budget, table, max_instructions, gs, sizes=sizes)
    limits.check_plan_size(_estimate(collective, pol, cta_budget, topo.loopback, gs, sizes),
                           max_instructions, max_memory_nbytes, what)
    return topo, pol, gs


def _nbytes(c: Collective) -> int:
    return max((max(c.input.nbytes(r), c.output.nbytes(r)) for r in range(c.world)), default=0)


def _policy_arg(policy: Any) -> Policy | None:
    """A Policy from what the caller passed (a Policy, a dict of fields, or None)."""
    if policy is None or isinstance(policy, Policy):
        return policy
    if isinstance(policy, Mapping):
        return Policy.from_dict(policy)
    hint = ""
    if isinstance(policy, str):
        field = "regime" if policy in REGIMES else "algorithm" if policy in ALGORITHMS else None
        hint = f"; did you mean Policy({field}={policy!r})?" if field else ""
    raise PlanError(f"policy {policy!r:.60}: expected a Policy, a dict of its fields or None, "
                    f"got {type(policy).__name__}{hint}")


def check_table(table: Any, where: str = "policy table") -> None:
    """Raise PlanError unless ``table`` is a best-policy table (or a list of them) as
    :func:`purlin.sim.best_policy_table` writes: ``{"topology", "collective", "bands":
    [{"max_nbytes": int, "policy": {...}}, ...]}``; every band's policy must be valid."""
    if isinstance(table, Mapping) and "worlds" in table and "planner" in table:
        return   # a codesign table (topologies/codesign/*.json): purlin.snac.tables reads it
    tables = [table] if isinstance(table, Mapping) else table
    if isinstance(tables, (str, bytes)) or not isinstance(tables, (list, tuple)):
        raise PlanError(f"{where}: expected a table (a mapping) or a list of them, got "
                        f"{type(table).__name__}")
    for i, t in enumerate(tables):
        at = where if isinstance(table, Mapping) else f"{where}[{i}]"
        if not isinstance(t, Mapping):
            raise PlanError(f"{at}: expected a mapping with collective, topology and bands, "
                            f"got {type(t).__name__}")
        for key in ("collective", "bands"):
            if key not in t:
                raise PlanError(f"{at}: missing field {key!r} (a table has collective, "
                                f"topology and bands; write it with best_policy_table)")
        if not isinstance(t["collective"], str):
            raise PlanError(f"{at}.collective: must be a string, got {t['collective']!r:.40}")
        if t.get("topology") is not None and not isinstance(t["topology"], str):
            raise PlanError(f"{at}.topology: must be a string or null, got {t['topology']!r:.40}")
        if not isinstance(t["bands"], list):
            raise PlanError(f"{at}.bands: must be a list, got {type(t['bands']).__name__}")
        for j, band in enumerate(t["bands"]):
            b = f"{at}.bands[{j}]"
            if not isinstance(band, Mapping) or "max_nbytes" not in band or "policy" not in band:
                raise PlanError(f"{b}: expected {{max_nbytes, policy}}, got {band!r:.60}")
            check_int(f"{b}.max_nbytes", band["max_nbytes"], lo=0, error=PlanError)
            try:
                Policy.from_dict(band["policy"])
            except PlanError as e:
                raise PlanError(f"{b}.policy: {e}") from None


def _topology_for(topology: Topology | str | None, world: int) -> Topology:
    """The topology to plan on: a loopback file named by the user takes the collective's
    world; a Topology object keeps its own, which must then match."""
    topo = resolve_topology(topology, world if topology is None else None)
    if topo.loopback and topo.world != world and not isinstance(topology, Topology):
        topo = resolve_topology(topology, world)
    if topo.world != world:
        raise SpecError(f"world size mismatch: topology {topo.name} has {topo.world} ranks, "
                        f"the collective has {world}")
    return topo


def _compact_staging(ops: list[df.Op]) -> tuple[list[df.Op], int]:
    """Renumber the staging slots each rank uses densely, so a small call asks for a small
    staging buffer; order (and so slot reuse) is kept."""
    used: dict[int, set[tuple[int, int]]] = {}
    for o in ops:
        for refs in (o.srcs, o.dsts):
            if "staging" in ref_buffer_set(refs):
                for r in refs:
                    if r.buffer == "staging":
                        used.setdefault(r.rank, set()).add(r.offset)
    if not used:
        return ops, 0
    size = {}
    remap: dict[tuple[int, int], int] = {}
    slot = -(-max(o.nbytes for o in ops) // 16) * 16   # slots stay 16-byte aligned at any count
    for rank, offs in used.items():
        for k, off in enumerate(sorted(offs)):
            remap[(rank, off)] = k * slot
        size[rank] = len(offs) * slot

    def fix(refs):
        if "staging" not in ref_buffer_set(refs):   # kept as it is (a Fan stays one)
            return refs
        return tuple(Ref(r.rank, "staging", remap[(r.rank, r.offset)]) if r.buffer == "staging"
                     else r for r in refs)
    out = [df.Op(o.rank, o.cta, o.role, o.kind, fix(o.srcs), fix(o.dsts), o.nbytes)
           for o in ops]
    return out, max(size.values())


def _check_reach(c: Collective, topo: Topology, gs: list[df.Group]) -> None:
    """One-hop algorithms need every pair that exchanges data to reach each other."""
    if is_fully_connected(topo):   # every pair does (W^2 pairs checked once, not per block)
        return
    for g in gs:
        for s in g.sources:
            for h in g.holders:
                if s.rank != h.rank and not is_direct(topo, s.rank, h.rank):
                    raise PlanError(f"rank {h.rank} needs block {g.name!r} from rank {s.rank}, "
                                    f"which it cannot reach directly on {topo.name}; "
                                    f"use algorithm='ring'")
