"""What a schedule does, in numbers a person reads: per role CTAs, ops, bytes, signals."""
from __future__ import annotations

from collections import defaultdict

from purlin.snac.ir import Copy, Notify, PutPackets, Reduce, Schedule, Wait, WaitPackets, ref_ranks
from purlin.topology import Topology, link_class


def summarize(s: Schedule, topology: Topology) -> dict:
    """Per role: CTAs, data ops, bytes each link class carries, Notify and Wait counts.

    A byte "crosses" class X when the issuing CTA reads or writes it on another GPU
    reached over X; local reads and writes count under ``hbm``.
    """
    roles: dict[str, dict] = {}
    for prog in s.programs:
        r = roles.setdefault(prog.role, {"ctas": 0, "ops": 0, "notifies": 0, "waits": 0,
                                         "bytes": defaultdict(int)})
        r["ctas"] += 1
        for ins in prog.instrs:
            t = type(ins)
            if t in (Copy, Reduce, PutPackets):
                r["ops"] += 1
                srcs = ins.srcs if t is Reduce else (ins.src,)
                dsts = ins.dsts if t is not PutPackets else (ins.dst,)
                wire = 2 if t is PutPackets else 1   # packets carry 8 B of flag per 8 B
                for q in ref_ranks(srcs):
                    r["bytes"][link_class(topology, prog.rank, q) + " read"] += ins.nbytes
                for q in ref_ranks(dsts):
                    r["bytes"][link_class(topology, prog.rank, q) + " write"] += ins.nbytes * wire
            elif t is Notify:   # flags stored and checked, however many instructions
                r["notifies"] += len(ins.peers)
            elif t is Wait:
                r["waits"] += len(ins.signals)
            elif t is WaitPackets:
                r["waits"] += 1
    for r in roles.values():
        r["bytes"] = dict(sorted(r["bytes"].items()))
    return {
        "collective": s.collective.name, "world": s.world, "dtype": s.collective.dtype.name,
        "op": s.collective.op, "topology": s.topology.name if s.topology else None,
        "topology_digest": s.topology.digest if s.topology else None,
        "reduction": s.reduction, "policy": s.policy,
        "programs": len(s.programs), "instructions": sum(len(p.instrs) for p in s.programs),
        "staging_nbytes": s.staging_nbytes, "packets_nbytes": s.packets_nbytes,
        "num_signals": s.num_signals, "epoch_stride": s.epoch_stride, "roles": roles,
    }


def format_summary(d: dict) -> str:
    """A plain-text table of :func:`summarize`'s result."""
    pol = d["policy"]
    lines = [f"# {d['collective']}  world {d['world']}  {d['dtype']} {d['op']}  on {d['topology']}",
             f"# regime {pol['regime']}  algorithm {pol['algorithm']}  chunk {pol['chunk_nbytes']} B"
             f"  atom {pol['atom']}  reduction order {d['reduction']}",
             f"# {d['programs']} programs, {d['instructions']} instructions, staging "
             f"{d['staging_nbytes']} B/half, packets {d['packets_nbytes']} B/half, "
             f"{d['num_signals']} signals/rank, epoch stride {d['epoch_stride']}",
             f"#{'role':>16} {'ctas':>6} {'ops':>8} {'notify':>8} {'wait':>8}  bytes by link class"]
    for name, r in sorted(d["roles"].items()):
        by = ", ".join(f"{k} {_size(v)}" for k, v in r["bytes"].items()) or "-"
        lines.append(f" {name:>16} {r['ctas']:>6} {r['ops']:>8} {r['notifies']:>8} {r['waits']:>8}  {by}")
    return "\n".join(lines)


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.4g} {unit}"
    return f"{n} B"
