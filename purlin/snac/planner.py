"""plan(spec, topology, policy) -> Schedule: a pure function.

Same inputs give a byte-identical Schedule (so plans cache under a hash). With no policy
the default comes from the topology's codesign table (:mod:`purlin.snac.tables`); the
``auto`` fields of a policy, and every case no table covers, are filled by the generic
rules of :mod:`purlin.snac.policy`. :func:`resolve` also says which it was.
"""
from __future__ import annotations

from purlin.errors import PlanError, SpecError
from purlin.snac import dataflow as df
from purlin.snac.bind import topology_ref
from purlin.snac.ir import Ref, Schedule
from purlin.snac.policy import MIN_CHUNK, Policy, codesign, traits
from purlin.snac.tables import lookup, shipped_lookup
from purlin.snac.sync import insert_sync
from purlin.spec.collective import Collective
from purlin.topology import Topology, is_direct, resolve_topology, ring_order


def resolve(c: Collective, topology: Topology, policy: Policy | dict | None,
            cta_budget: int, table=None) -> tuple[Policy, dict]:
    """The policy ``plan`` runs and where it came from.

    No policy (or one with every field ``auto``): a given ``table`` (a codesign or sweep
    table) if it covers the case, else the topology's shipped codesign table when the
    topology is that shipped file unchanged, else the generic rules. A policy with some
    fields set keeps them; the generic rules fill the rest.

    Returns
    -------
    (Policy, dict)
        The resolved policy and its source: ``{"source": "table", "table": file,
        "world": W, "band": [lo, hi], ...}``, ``{"source": "generic", "why": ...}`` or
        ``{"source": "policy", "auto_filled": [fields]}``.
    """
    if isinstance(policy, dict):
        policy = Policy.from_dict(policy)
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
    pol = codesign(c.name, c.world, nbytes, traits(topology), cta_budget, c.is_reduce, policy)
    if source["source"] == "table" and (pol.put_ctas, pol.consumer_ctas) != (policy.put_ctas, policy.consumer_ctas):
        source["shrunk_to_budget"] = cta_budget
    return pol, source


def resolve_policy(c: Collective, topology: Topology, policy: Policy | dict | None,
                   cta_budget: int, table=None) -> Policy:
    """The policy ``plan`` runs (:func:`resolve` without its source)."""
    return resolve(c, topology, policy, cta_budget, table)[0]


def plan(collective: Collective, topology: Topology | str | None = None,
         policy: Policy | dict | None = None, cta_budget: int = 64,
         check: bool = True, table=None) -> Schedule:
    """Plan ``collective`` on ``topology`` with ``policy`` and at most ``cta_budget`` CTAs
    per rank. The schedule is verified before it is returned (``check=False`` skips it).
    ``table``: a codesign table (:func:`purlin.sim.codesign.search`) or a sweep's
    best-policy table (:func:`purlin.sim.best_policy_table`), used when no ``policy`` is
    given, before the topology's shipped table (see :func:`resolve`).

    Examples
    --------
    >>> from purlin.spec import library
    >>> s = plan(library.all_gather(4, 64), policy=Policy(regime="throughput"))
    >>> s.world, sorted({p.role for p in s.programs})[:2]
    (4, ['consume', 'put'])
    """
    if cta_budget < 1:
        raise PlanError(f"cta_budget must be at least 1 CTA per rank, got {cta_budget}")
    topo = _topology_for(topology, collective.world)
    pol = resolve_policy(collective, topo, policy, cta_budget, table)
    c = collective.validate()   # any count: pol.align is where pieces are cut, not a rule
    order: tuple[int, ...] = ()
    if pol.algorithm == "ring":
        if pol.regime == "latency":
            raise PlanError("policy: algorithm 'ring' relays through staging; it runs in the "
                            "throughput regime, not 'latency'")
        order = ring_order(topo)
    else:
        _check_reach(c, topo)
    if pol.atom == "switch":
        if not (c.is_reduce and pol.regime == "direct"):
            raise PlanError("policy.atom 'switch' (in-switch reduce) needs a reduction in the "
                            "'direct' regime")
        if not any(sw.in_switch_reduce for sw in topo.switches):
            raise PlanError(f"policy.atom 'switch': topology {topo.name} has no switch with "
                            f"in_switch_reduce (NVLS)")
    gs = df.groups(c)
    has_tail = (c.is_reduce and pol.algorithm == "two_shot" and pol.regime != "direct"
                and any(len(g.holders) > 1 for g in gs))   # direct reductions store to all holders
    ctas = df.Ctas(c.world, pol.put_ctas, pol.consumer_ctas,
                   min(cta_budget, pol.put_ctas + pol.consumer_ctas), split_tail=has_tail)
    staging = packets = 0
    chunk = pol.chunk_nbytes
    if pol.algorithm == "ring":
        ops, staging = df.ring(c, gs, chunk, pol.staging_nbytes, ctas, order, pol.align)
    elif pol.regime == "throughput":
        ops, staging = df.throughput(c, gs, chunk, pol.staging_nbytes, ctas, pol.algorithm, pol.align)
    elif pol.regime == "direct":
        ops = df.direct(c, gs, chunk, ctas, pol.algorithm, pol.align, spread=topo.loopback,
                        least=min(chunk, MIN_CHUNK))
    else:
        ops, packets = df.latency(c, gs, chunk, ctas, pol.algorithm, pol.align, pol.push_nbytes)
    ops, staging = _compact_staging(ops)
    synced = insert_sync(ops, c.world, c.dtype.name, c.op, pol.atom, pol.fence)
    sched = Schedule(c, synced.programs, staging, packets, synced.num_signals,
                     synced.epoch_stride, topology=topology_ref(topo),
                     reduction="any" if pol.algorithm == "ring" and c.is_reduce else "rank",
                     policy=pol.to_dict())
    if check:
        from purlin.snac.verify import verify
        verify(sched)
    return sched


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
        for r in o.srcs + o.dsts:
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
        return tuple(Ref(r.rank, "staging", remap[(r.rank, r.offset)]) if r.buffer == "staging"
                     else r for r in refs)
    out = [df.Op(o.rank, o.cta, o.role, o.kind, fix(o.srcs), fix(o.dsts), o.nbytes)
           for o in ops]
    return out, max(size.values())


def _check_reach(c: Collective, topo: Topology) -> None:
    """One-hop algorithms need every pair that exchanges data to reach each other."""
    for g in df.groups(c):
        for s in g.sources:
            for h in g.holders:
                if s.rank != h.rank and not is_direct(topo, s.rank, h.rank):
                    raise PlanError(f"rank {h.rank} needs block {g.name!r} from rank {s.rank}, "
                                    f"which it cannot reach directly on {topo.name}; "
                                    f"use algorithm='ring'")
