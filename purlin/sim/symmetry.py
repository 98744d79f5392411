"""Rank symmetry: simulate one class of alike ranks and let it stand for the rest.

A call is *d-periodic* when rotating every rank by ``d`` (rank r to r + d mod W) maps the
topology onto itself and each program of rank r + d onto the program of rank r: the same
instructions, peers shifted by d, offsets alike wherever the engine charges for alignment,
and each Wait (WaitPackets) satisfied by the flags (puts) of the rotated writers. The
simulation of such a call is itself d-periodic (max-min fair rates are unique, so alike
flows get alike rates, and alike CTAs reach each point at the same time), so ranks
0..d-1, the *representatives*, carry everything:

- a resource stands for its orbit under the rotations; the representatives' flows load
  it ``g / |orbit|`` times (g = W / d): once for a GPU's link or memory, g times for a
  switch-to-switch link that every rotation maps onto itself;
- a flag a representative sends to peer q stands for the flag that the rotated writer,
  rank ``p + r - q`` for r = q mod d, sends to representative r: it is filed there, under
  that writer's signal, at the representative's own time plus the latency to q (equal to
  the writer's latency to r); packets likewise, at the writer's offset.

:func:`quotient` checks every one of these conditions on the whole schedule (a linear
pass) and returns None where any fails, so the engine then runs every rank. Nothing
here changes an answer; ``tests/sim/test_symmetry.py`` holds the two runs equal.
"""
from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass, field
from itertools import repeat

from purlin.sim import tails
from purlin.sim.calibration import Calibration
from purlin.sim.fabric import Fabric, FlowSpec
from purlin.snac.ir import (Copy, Notify, PutPackets, Reduce, Schedule, Wait, WaitPackets, ref_buffer_set, ref_offsets,
                            ref_ranks)
from purlin.sim.packets import fused_positions
from purlin.topology import Topology, route

_GPU = re.compile(r"gpu([0-9]+)$")


@dataclass
class Quotient:
    """How representatives ``0..period-1`` stand for every rank of a periodic call."""

    period: int
    world: int
    programs: tuple            # the representatives' programs, in schedule order
    flags: dict                # (rank, cta, instr) of a Notify -> ((rank, signal) landed) per flag
    puts: dict                 # (rank, cta, instr) of a PutPackets -> (rank, offset) landed
    res_class: list[int]       # resource index -> index of its orbit's representative
    weight: list[float]        # resource index -> load factor on that representative
    _specs: dict = field(default_factory=dict)

    def spec(self, s: FlowSpec) -> FlowSpec:
        """``s`` over orbit representatives, weights times their load factor."""
        got = self._specs.get(s)
        if got is None:
            load: dict[int, float] = {}
            for r, w in zip(s.resources, s.weights):
                c = self.res_class[r]
                load[c] = load.get(c, 0.0) + w * self.weight[c]
            got = self._specs[s] = FlowSpec(tuple(load), tuple(load.values()), s.cap_Bpus, s.pre_us,
                                            s.post_us)
        return got


def quotient(s: Schedule, topology: Topology, cal: Calibration, fabric: Fabric,
             footprint: dict[str, int]) -> Quotient | None:
    """The smallest period the call has (below its world), as a :class:`Quotient`; None
    if it has none (then every rank is simulated)."""
    w = s.world
    if w < 2 or topology.loopback:
        return None
    index = {(p.rank, p.cta): k for k, p in enumerate(s.programs)}
    if len(index) != len(s.programs):
        return None
    ctx = None
    for d in (d for d in range(1, w) if w % d == 0):
        if not _topology_periodic(topology, d, footprint):
            continue
        if ctx is None:
            ctx = _Context(s, cal)
        if not _programs_periodic(s, index, d, ctx):
            continue
        reps = tuple(p for p in s.programs if p.rank < d)
        if not _routes_periodic(topology, reps, d):
            continue
        return _build(s, index, d, reps, fabric)
    return None


# ---- the topology ------------------------------------------------------------------------
def _shift(node: str, m: int, w: int) -> str:
    g = _GPU.match(node)
    return f"gpu{(int(g.group(1)) + m) % w}" if g else node


def _topology_periodic(t: Topology, d: int, footprint: dict[str, int]) -> bool:
    """Rotating GPUs by d (switches stay) maps every GPU and link onto an equal one, and
    every GPU's footprint (what decides whether its buffers sit in L2) onto an equal one."""
    w = t.world
    gpus = {g.name: g for g in t.gpus}
    if len(gpus) != w:
        return False
    for g in t.gpus:
        h = gpus.get(_shift(g.name, d, w))
        if h is None or (g.hbm_bandwidth_gbps, g.sms, g.copy_engines, g.nvlink_per_sm_gbps, g.memory_gib) != \
                (h.hbm_bandwidth_gbps, h.sms, h.copy_engines, h.nvlink_per_sm_gbps, h.memory_gib):
            return False
        if footprint.get(g.name, 0) != footprint.get(h.name, 0):
            return False
    graph = t.graph
    for link in t.links:
        u, v = _shift(link.src, d, w), _shift(link.dst, d, w)
        if not graph.has_edge(u, v):
            return False
        other = graph.edges[u, v]["link"]
        if (other.bandwidth_gbps, other.latency_us, other.link_class) != \
                (link.bandwidth_gbps, link.latency_us, link.link_class):
            return False
    return True


def _routes_periodic(t: Topology, reps: tuple, d: int) -> bool:
    """Every route a representative's flows may take is the rotation of the route its
    rotated pair takes. A star (one switch, every link between it and a GPU) has one path
    per pair, so only other topologies are checked, pair by pair."""
    if len(t.switches) == 1 and all((_GPU.match(k.src) is None) != (_GPU.match(k.dst) is None)
                                    for k in t.links):
        return True
    w = t.world
    pairs = set()
    for p in reps:
        for ins in p.instrs:
            ty = type(ins)
            if ty is Copy or ty is Reduce or ty is PutPackets:
                ranks = set(ref_ranks(ins.srcs if ty is Reduce else (ins.src,)))
                ranks.update(ref_ranks(ins.dsts if ty is not PutPackets else (ins.dst,)))
                ranks.add(p.rank)
                pairs.update((a, b) for a in ranks for b in ranks if a != b)
    for a, b in pairs:
        base = route(t, a, b)
        for m in range(d, w, d):
            if route(t, (a + m) % w, (b + m) % w) != tuple(_shift_link(x, m, w) for x in base):
                return False
    return True


def _shift_link(link_id: str, m: int, w: int) -> str:
    u, _, v = link_id.partition("->")
    return f"{_shift(u, m, w)}->{_shift(v, m, w)}"


# ---- the programs ------------------------------------------------------------------------
class _Context:
    """What the programs' comparison looks up: who writes each flag, which puts land
    where, and the calibration's alignment rule."""

    def __init__(self, s: Schedule, cal: Calibration):
        self.s = s
        self.w = s.world
        self.cal = cal
        self._writers: list[dict[int, tuple]] | None = None
        self._puts: dict | None = None
        self.shapes: dict[tuple[int, bool], tuple] = {}   # (program index, light) -> its interned shape
        self.interned: dict[tuple, tuple] = {}

    def _index(self) -> None:
        """Who writes each flag and which puts land where: built on the first Wait or
        WaitPackets compared, so a call whose light shapes already differ never pays it."""
        w = self.w
        # per waiting rank q: signal -> its writers, ranks relative to q (in schedule order)
        self._writers = writers = [{} for _ in range(w)]
        puts: dict[tuple[int, int], list[tuple]] = {}
        for p in self.s.programs:
            rank, cta = p.rank, p.cta
            for i, ins in enumerate(p.instrs):
                t = type(ins)
                if t is Notify:
                    v = ins.value
                    for j, (q, sig) in enumerate(zip(ins.peers, ins.signals)):
                        if not 0 <= q < w:   # no rank waits there (the engine names it)
                            continue
                        at = writers[q]
                        item = ((rank - q) % w, cta, i, j, v)
                        got = at.get(sig)
                        at[sig] = (item,) if got is None else got + (item,)
                elif t is PutPackets:
                    puts.setdefault((ins.dst.rank, ins.value), []).append(
                        (ins.dst.offset, ins.dst.offset + ins.nbytes, p.rank, p.cta, i))
        self._puts = {}
        for k, v in puts.items():
            v.sort()
            self._puts[k] = (v, [x[0] for x in v])

    def shape_of(self, k: int, prog, light: bool = False) -> tuple:
        """Program ``k``'s shape relative to its rank (each computed once, equal shapes
        one object, so programs compare by identity). A ``light`` shape leaves out who
        satisfies each Wait (the index that takes): equal full shapes have equal light
        ones, so a light mismatch rejects a period at a fraction of the cost."""
        got = self.shapes.get((k, light))
        if got is None:
            rank = prog.rank
            shape = self._shapes(prog.instrs, rank, light)
            if any(type(x) is WaitPackets for x in prog.instrs):   # which reads start on first packets
                shape += (tuple(sorted(fused_positions(prog.instrs))),)
            got = self.shapes[(k, light)] = self.interned.setdefault(shape, shape)
        return got

    def _shapes(self, instrs: tuple, rank: int, light: bool) -> tuple:
        """What the engine's timing of each of ``instrs`` on rank ``rank`` depends on: ranks
        relative to it, and of offsets only what the engine charges for
        (:mod:`purlin.sim.tails`). One loop with every kind written out, not a call or two
        per instruction (a 576-rank AllToAll has 1.3 M of them)."""
        w = self.w
        if light:
            get = None
        else:
            if self._writers is None:
                self._index()
            get = self._writers[rank].get
        cal = self.cal
        out = []
        add = out.append
        for ins in instrs:
            t = type(ins)
            if t is Wait:   # who sets each flag: its writers, relative to the waiter
                sigs = ins.signals
                if get is None:
                    add((4, ins.value, len(sigs)))
                else:
                    add((4, ins.value, (get(sigs[0], ()),) if len(sigs) == 1 else tuple(map(get, sigs, repeat(())))))
            elif t is Notify:   # which signal it sets is the waiter's affair (above)
                add((3, tuple([(q - rank) % w for q in ins.peers]), ins.value))
            elif t is Copy:
                dsts = ins.dsts
                add((0, _ref(ins.src, rank, w),
                     tuple([((r.rank - rank) % w, r.buffer, tails.grid(r)) for r in dsts])
                     if len(dsts) <= _WIDE else _refs(dsts, rank, w),
                     ins.nbytes, ins.atom, tails.aligns_first(ins, cal)))
            elif t is Reduce:
                add((1, _refs(ins.srcs, rank, w), _refs(ins.dsts, rank, w), ins.nbytes, ins.atom))
            elif t is PutPackets:   # where the put lands is the reader's affair: window_puts
                add((2, _ref(ins.src, rank, w), (ins.dst.rank - rank) % w, ins.nbytes, ins.value))
            elif t is WaitPackets:
                if ins.src.rank != rank:   # a remote window gets no mirrored puts: never periodic
                    add((7, object()))
                elif light:
                    add((5, ins.nbytes, ins.value))
                else:
                    lo = ins.src.offset
                    add((5, ins.nbytes, ins.value, self.window_puts(rank, lo, lo + ins.nbytes, ins.value)))
            else:
                add((6, repr(ins)))
        return tuple(out)

    def window_puts(self, rank: int, lo: int, hi: int, tag: int) -> tuple:
        if self._puts is None:
            self._index()
        got = self._puts.get((rank, tag))
        if got is None:
            return ()
        pieces, starts = got
        j = max(0, bisect_left(starts, lo) - 1)
        out = []
        w = self.w
        n = len(pieces)
        while j < n:
            a, b, r, c, i = pieces[j]
            if a >= hi:
                break
            if b > lo:
                out.append((a - lo, b - lo, (r - rank) % w, c, i))
            j += 1
        return tuple(out)


def _ref(r, p: int, w: int) -> tuple:
    return ((r.rank - p) % w, r.buffer, tails.grid(r))


def _refs(refs: tuple, p: int, w: int) -> tuple:
    """What :func:`_ref` gives for each of ``refs``; many Refs into one buffer (a rack's
    broadcast or reduction: W of them) as one (ranks, widths) pair, built by C-level maps
    (the same facts, so shapes are equal exactly when they were)."""
    if len(refs) > _WIDE:
        bufs = ref_buffer_set(refs)
        if len(bufs) == 1 and "packets" not in bufs:
            rel = tuple([(q - p) % w for q in ref_ranks(refs)])
            grids = tuple(map(_GRID.__getitem__, [o & 15 for o in ref_offsets(refs)]))
            return (_WIDE_TAG, bufs.pop(), rel, grids)
    return tuple([_ref(r, p, w) for r in refs])


_WIDE = 8
_WIDE_TAG = "wide"
_GRID = [16 if m == 0 else 4 if m % 4 == 0 else 2 if m % 2 == 0 else 1 for m in range(16)]
"""tails.grid of an offset by its value mod 16 (outside the packets buffer)."""


def _shape(ins, p: int, ctx: _Context, light: bool = False) -> tuple:
    """The shape of one instruction on rank ``p`` (:meth:`_Context._shapes`)."""
    return ctx._shapes((ins,), p, light)[0]


def _programs_periodic(s: Schedule, index: dict, d: int, ctx: _Context) -> bool:
    progs = s.programs
    # first the second class alone, in light shapes: where ranks differ, they mostly
    # differ there already (by rank parity, or in notify order), and it costs a fraction
    for light, last in ((True, 2 * d), (False, s.world)):
        for k, p in enumerate(progs):
            if not d <= p.rank < last:
                continue
            rk = index.get((p.rank % d, p.cta))
            if rk is None or ctx.shape_of(rk, progs[rk], light) is not ctx.shape_of(k, p, light):
                return False
    # every representative CTA has its rotations (no rank lacks a CTA the others have)
    return all((r, p.cta) in index for p in progs if p.rank < d for r in range(p.rank, s.world, d))


# ---- the quotient ------------------------------------------------------------------------
def _build(s: Schedule, index: dict, d: int, reps: tuple, fabric: Fabric) -> Quotient:
    w = s.world
    progs = s.programs
    flags, puts = {}, {}
    for p in reps:
        for i, ins in enumerate(p.instrs):
            t = type(ins)
            if t is Notify:
                got = []
                for j, q in enumerate(ins.peers):
                    r = q % d
                    writer = progs[index[((p.rank + r - q) % w, p.cta)]].instrs[i]
                    got.append((r, writer.signals[j]))
                flags[(p.rank, p.cta, i)] = tuple(got)
            elif t is PutPackets:
                q = ins.dst.rank
                r = q % d
                writer = progs[index[((p.rank + r - q) % w, p.cta)]].instrs[i]
                puts[(p.rank, p.cta, i)] = (r, writer.dst.offset)
    g = w // d
    res_class = [0] * len(fabric.names)
    weight = [0.0] * len(fabric.names)
    for k, name in enumerate(fabric.names):
        rep, factor = _orbit(name, d, w, g)
        res_class[k] = c = fabric.index[rep]
        weight[c] = factor
    return Quotient(d, w, reps, flags, puts, res_class, weight)


def _orbit(name: str, d: int, w: int, g: int) -> tuple[str, float]:
    """The representative of a resource's orbit (the member whose first GPU is below
    ``d``) and the load factor there (1 for a GPU's resource, g for a switch link)."""
    if name.endswith(".hbm"):
        r = int(_GPU.match(name[:-4]).group(1))
        return f"gpu{r % d}.hbm", 1.0
    u, _, v = name.partition("->")
    first = _GPU.match(u) or _GPU.match(v)
    if first is None:
        return name, float(g)
    r = int(first.group(1))
    m = (r % d) - r
    return _shift_link(name, m, w), 1.0
