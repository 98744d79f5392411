"""Dataflow builders: what moves where, on which (rank, cta), in one logical order.

One builder per regime. Each reads the spec only through its namings (copy moves and
reduce groups), so a new collective needs no planner code. Sync is added afterwards by
:mod:`purlin.snac.sync`.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from typing import Iterator

from purlin.errors import PlanError
from purlin.snac.ir import Fan, Ref, Refs
from purlin.snac.sync import Op
from purlin.spec.collective import Collective
from purlin.spec.layout import Placed


@dataclass(frozen=True)
class Group:
    """One block name: where it comes from and where it must end up."""

    name: str
    nbytes: int
    sources: tuple[Placed, ...]   # in rank order
    holders: tuple[Placed, ...]   # output placements, in rank order


def groups(c: Collective) -> list[Group]:
    """Every block name that some output needs, in the order of the first holder."""
    sources = c.sources()
    holders: dict[str, list[Placed]] = {}
    for q in range(c.world):
        for p in c.output.placed(q):
            if p.nbytes:
                holders.setdefault(p.name, []).append(p)
    return [Group(name, hs[0].nbytes, sources[name], tuple(hs)) for name, hs in holders.items()]


def split(nbytes: int, parts: int, align: int) -> list[tuple[int, int]]:
    """Cut [0, nbytes) into at most ``parts`` aligned pieces of near-equal size."""
    units = nbytes // align
    tail = nbytes - units * align
    out, pos = [], 0
    for k in range(parts):
        take = units // parts + (1 if k < units % parts else 0)
        size = take * align + (tail if k == parts - 1 else 0)
        if size:
            out.append((pos, size))
        pos += size
    return out


def chunks(offset: int, nbytes: int, chunk: int) -> Iterator[tuple[int, int]]:
    """(offset, nbytes) of each chunk of ``chunk`` bytes covering ``nbytes`` from ``offset``;
    the last may be short."""
    for pos in range(0, nbytes, chunk):
        yield offset + pos, min(chunk, nbytes - pos)


class Slots:
    """A staging region cut into chunk-sized slots, used round-robin. Reuse is safe
    because sync inserts drain waits for the readers of the slot's previous content."""

    def __init__(self, rank: int, base: int, nbytes: int, chunk: int, buffer: str = "staging"):
        self.rank, self.base, self.chunk, self.buffer = rank, base, chunk, buffer
        self.count = nbytes // chunk
        if self.count < 1:
            raise PlanError(f"rank {rank}: staging region of {nbytes} B holds no {chunk} B slot")
        self.next = 0

    def take(self) -> Ref:
        """The next staging slot, round-robin over ``count`` slots of ``chunk`` bytes."""
        ref = Ref(self.rank, self.buffer, self.base + (self.next % self.count) * self.chunk)
        self.next += 1
        return ref


class Packets:
    """The packet window of each rank, carved sequentially (each byte written once)."""

    def __init__(self, world: int):
        self.used = [0] * world

    def take(self, rank: int, nbytes: int) -> Ref:
        """A window of ``nbytes``; the next starts 16-byte aligned (a packet carries 8
        payload bytes, and whole vectors move the rest), whatever the element count."""
        ref = Ref(rank, "packets", self.used[rank])
        self.used[rank] += -(-nbytes // 16) * 16
        return ref


class Ctas:
    """CTA choice per rank. ``put`` work cycles over the first ``put`` CTAs. Consumer work
    cycles over the consumer CTAs; pulls name their source ``peer`` and get a group of CTAs
    of their own (Purlin's per-peer split), so no source's link is crowded while another
    idles. With ``split_tail``, all-gather tails get the upper half of the consumer CTAs,
    so a tail waiting on another rank never delays this rank's own reductions. Roles then
    fold into the CTA budget."""

    def __init__(self, world: int, put: int, consumer: int, budget: int, split_tail: bool = False):
        self.world, self.put, self.consumer, self.budget = world, put, consumer, budget
        self.split_tail = split_tail and consumer > 1
        self.turn: dict[tuple, int] = {}

    def pick(self, rank: int, pool: str, peer: int | None = None) -> int:
        """The CTA of ``rank`` that runs the next op of ``pool`` (put, consume or tail),
        round-robin, per peer where given."""
        key = (rank, pool, peer)
        k = self.turn.get(key, 0)
        self.turn[key] = k + 1
        if pool == "put":
            return (k % self.put) % self.budget
        base, size = 0, self.consumer
        if self.split_tail:
            half = self.consumer // 2
            base, size = (half, self.consumer - half) if pool == "tail" else (0, half)
        if peer is not None and self.world > 1:
            slot = (peer - rank - 1) % self.world      # 0..W-2 for the other ranks
            group = max(1, size // (self.world - 1))
            idx = (slot * group + k % group) % size
        else:
            idx = k % size
        return (self.put + base + idx) % self.budget


@dataclass
class Built:
    """The data ops of a plan, before sync, and the staging and packet bytes they use."""
    ops: list[Op]
    staging_nbytes: int
    packets_nbytes: int


def _pieces(g: Group, algorithm: str, align: int) -> list[tuple[Placed, int, int]]:
    """(owner placement, offset, nbytes) within the block: two-shot splits the block
    among its holders (the reduce-scatter head); one-shot gives each holder all of it."""
    if algorithm == "two_shot" and len(g.holders) > 1:
        return [(g.holders[k], off, n)
                for k, (off, n) in enumerate(split(g.nbytes, len(g.holders), align))]
    return [(h, 0, g.nbytes) for h in g.holders]


def _rounds(streams: list[list]) -> Iterator:
    """Interleave per-stream work round by round, so every rank pipelines its chunks."""
    for k in range(max((len(s) for s in streams), default=0)):
        for s in streams:
            if k < len(s):
                yield s[k]


# ---- builders ------------------------------------------------------------------------

def _out(h: Placed, off: int) -> Ref:
    return Ref(h.rank, "output", h.offset + off)


def _in(s: Placed, off: int) -> Ref:
    return Ref(s.rank, "input", s.offset + off)


def _copy_items(gs: list[Group], chunk: int, world: int) -> Iterator[tuple[Group, int, int]]:
    """Copy work, chunked, interleaved across source ranks and, within a source, across
    its blocks with destinations rotated from rank+1, so that at every step the ranks
    send to different peers instead of all converging on one (incast)."""
    for step in _copy_steps(gs, chunk, world):
        yield from step


def _copy_steps(gs: list[Group], chunk: int, world: int) -> Iterator[list[tuple[Group, int, int]]]:
    """:func:`_copy_items` step by step: each source's next item."""
    by_src: dict[int, list[list]] = {}
    for g in gs:
        src = g.sources[0].rank
        by_src.setdefault(src, []).append([(g, off, n) for off, n in chunks(0, g.nbytes, chunk)])
    streams = []
    for src in sorted(by_src):
        blocks = sorted(by_src[src], key=lambda items: (items[0][0].holders[0].rank - src - 1) % world)
        streams.append(list(_rounds(blocks)))
    for k in range(max((len(s) for s in streams), default=0)):
        yield [s[k] for s in streams if k < len(s)]


def _reduce_items(gs: list[Group], chunk: int, algorithm: str, align: int):
    """Reduce work (group, owner, offset, nbytes), chunked, interleaved across owners."""
    streams = []
    for g in gs:
        for owner, off, n in _pieces(g, algorithm, align):
            streams.append([(g, owner, o, m) for o, m in chunks(off, n, chunk)])
    return _rounds(streams)


class _Stager:
    """Stage a source chunk once into a slot and remember where, until the slot is reused."""

    def __init__(self, slots: list[Slots], ctas: Ctas, ops: list[Op]):
        self.slots, self.ctas, self.ops = slots, ctas, ops
        self.where: dict[tuple, Ref] = {}
        self.holder: dict[Ref, tuple] = {}

    def stage(self, src: Ref, n: int, also: tuple[Ref, ...] = (), role: str = "put") -> Ref:
        key = (src, n)
        if key in self.where and not also:
            return self.where[key]
        slot = self.slots[src.rank].take()
        old = self.holder.pop(slot, None)
        if old is not None:
            self.where.pop(old, None)
        self.where[key], self.holder[slot] = slot, key
        self.ops.append(Op(src.rank, self.ctas.pick(src.rank, "put"), role, "copy", (src,),
                           (slot,) + also, n))
        return slot


def throughput(c: Collective, gs: list[Group], chunk: int, staging: int, ctas: Ctas,
               algorithm: str, align: int) -> tuple[list[Op], int]:
    """Stage locally, notify, consumers pull (the reduce-scatter head writes reduced
    shards to staging, where the all-gather tail pulls them: the seam)."""
    ops: list[Op] = []
    world = c.world
    two = c.is_reduce and algorithm == "two_shot" and any(len(g.holders) > 1 for g in gs)
    region = staging // 2 if two else staging
    stager = _Stager([Slots(r, 0, region, chunk) for r in range(world)], ctas, ops)
    reduced = [Slots(r, region, region, chunk) for r in range(world)] if two else []
    if not c.is_reduce:
        for g, off, n in _copy_items(gs, chunk, c.world):
            src = g.sources[0]
            local = tuple(_out(h, off) for h in g.holders if h.rank == src.rank)
            remote = [h for h in g.holders if h.rank != src.rank]
            if not remote:
                ops.append(Op(src.rank, ctas.pick(src.rank, "put"), "local", "copy",
                              (_in(src, off),), local, n))
                continue
            slot = stager.stage(_in(src, off), n, also=local)
            for h in remote:
                ops.append(Op(h.rank, ctas.pick(h.rank, "consumer", src.rank), "consume", "copy", (slot,),
                              (_out(h, off),), n))
        return ops, staging
    for g, owner, off, n in _reduce_items(gs, chunk, algorithm, align):
        srcs = tuple(_in(s, off) if s.rank == owner.rank else stager.stage(_in(s, off), n)
                     for s in g.sources)
        others = [h for h in g.holders if h.rank != owner.rank] if two and len(g.holders) > 1 else []
        dsts = (_out(owner, off),) + ((reduced[owner.rank].take(),) if others else ())
        cta = ctas.pick(owner.rank, "consumer")
        ops.append(Op(owner.rank, cta, "reduce", "reduce", srcs, dsts, n))
        for h in others:
            ops.append(Op(h.rank, ctas.pick(h.rank, "tail", owner.rank), "tail", "copy", (dsts[1],),
                          (_out(h, off),), n))
    return ops, staging


def direct(c: Collective, gs: list[Group], chunk: int, ctas: Ctas, algorithm: str,
           align: int, spread: bool = False, least: int = 1, rotated: bool = False) -> list[Op]:
    """Zero-copy over registered buffers: one read of each input byte, stores to every
    holder (reductions: reduce once, broadcast-store the result).

    Across GPUs the links set the pace, so a rank's chunks go round-robin to its CTAs of
    the role, keeping the rotated order of destinations. With ``spread`` (all ranks share
    one GPU, so who issues a copy costs no link, and memory bandwidth is what is shared)
    the work is cut into equal shares dealt over every CTA of every rank: a chunk count
    that does not divide by the CTAs would leave one CTA a whole chunk behind the rest,
    and the rank with the largest V block would set the pace. No share is cut below
    ``least`` bytes (not worth an instruction). ``rotated``: a broadcast store writes its
    own rank first, then r+1 on (wrapping), as every other rank does its own."""
    items: list[tuple[int, str, tuple[Ref, ...], tuple[Ref, ...], int]] = []
    world = c.world
    if not c.is_reduce:
        # a rack's broadcast names ~W holders per chunk: their ranks and offsets (in the
        # order the source serves them) are found once per block, and each chunk's Refs
        # are made by a C-level map over them
        served: dict[int, tuple[tuple[int, ...], list[int]]] = {}
        for g, off, n in _copy_items(gs, chunk, world):
            src = g.sources[0]
            got = served.get(id(g))
            if got is None:
                hs = _holders(g, world, rotated)
                got = served[id(g)] = (tuple(h.rank for h in hs), [h.offset for h in hs])
            items.append((src.rank, "copy", (_in(src, off),), _refs(*got, "output", off), n))
    else:
        placed: dict[int, tuple[tuple[int, ...], list[int], tuple[int, ...], list[int]]] = {}
        for g, owner, off, n in _reduce_items(gs, chunk, algorithm, align):
            got = placed.get(id(g))
            if got is None:   # as for copies: each block's ranks and offsets found once
                got = placed[id(g)] = (tuple(s.rank for s in g.sources), [s.offset for s in g.sources],
                                       tuple(h.rank for h in g.holders), [h.offset for h in g.holders])
            sr, so, hr, ho = got
            srcs = _refs(sr, so, "input", off)
            if algorithm == "two_shot":
                dsts = _refs(hr, ho, "output", off)
            else:
                dsts = (_out(owner, off),)
            items.append((owner.rank, "reduce", srcs, dsts, n))
    role = "reduce" if c.is_reduce else "push"
    if not spread:
        pool = "consumer" if c.is_reduce else "put"
        return [Op(home, ctas.pick(home, pool), role, kind, srcs, dsts, n)
                for home, kind, srcs, dsts, n in items]
    workers = [(r, k) for k in range(ctas.budget) for r in range(c.world)]
    return [Op(*workers[w], role, kind, _shift(srcs, at), _shift(dsts, at), n)
            for w, (_, kind, srcs, dsts, n), at in _deal(items, len(workers), align, chunk, least)]


def _refs(ranks: tuple[int, ...], bases: list[int], buffer: str, off: int) -> Refs:
    """``off`` bytes past each rank's base: a Fan where every base is the same (a
    symmetric layout: no Ref per rank to build, check and hold), else the Refs."""
    if len(ranks) > 1 and bases.count(bases[0]) == len(bases):
        return Fan(ranks, buffer, bases[0] + off)
    return tuple(map(Ref, ranks, repeat(buffer), [b + off for b in bases]))


def _shift(refs: tuple[Ref, ...], by: int) -> tuple[Ref, ...]:
    return tuple(Ref(r.rank, r.buffer, r.offset + by) for r in refs) if by else refs


def _deal(items: list, workers: int, align: int, chunk: int, least: int) -> Iterator[tuple[int, tuple, int]]:
    """Cut the items (last field: bytes), in order, into runs of equal bytes, at most a
    chunk each and a multiple of ``workers`` in number (fewer only where a run would be
    under ``least`` bytes), and deal run j to worker j mod ``workers``: every worker gets
    the same bytes, and at any moment the workers are on neighbouring stretches of the
    order (which rotates destinations). An item is split where a run ends, at an
    ``align`` multiple of its start. Yields (worker, item with its bytes replaced by the
    piece's, offset in it)."""
    total = sum(it[-1] for it in items)
    runs = max(1, -(-total // chunk), min(workers, total // max(1, least)))
    if runs > workers:
        runs = -(-runs // workers) * workers
    per = max(align, -(-(-(-total // runs)) // align) * align)
    j, room = 0, per
    for it in items:
        n, pos = it[-1], 0
        while pos < n:
            rest = n - pos
            take = rest if rest <= room or j == runs - 1 else room // align * align
            if take:
                yield j % workers, it[:-1] + (take,), pos
                pos += take
                room -= take
            if (room < align or not take) and j < runs - 1:
                j, room = j + 1, per


def latency(c: Collective, gs: list[Group], chunk: int, ctas: Ctas, algorithm: str,
            align: int, push: int | None = None, rotated: bool = False) -> tuple[list[Op], int]:
    """Push packets that carry their own flag; consumers unpack (or reduce) locally.

    ``push``: bytes per PutPackets, a multiple of ``chunk`` (None: one chunk). Larger
    pushes pay the per-instruction packet start less often and keep fewer CTAs pushing
    (the pushers' polls crowd the readers less), while the consumers still split each
    push into ``chunk`` pieces; a piece is readable once its whole push has landed.
    ``rotated`` (copies): a source pushes to its holders from itself on, and at each step
    a rank unpacks what its peers pushed from rank+1 on, so every rank's programs are its
    peers' rotation."""
    ops: list[Op] = []
    win = Packets(c.world)
    step = push or chunk

    def put(src: Ref, dst_rank: int, n: int, cta: int | None = None) -> Ref:
        w = win.take(dst_rank, n)
        ops.append(Op(src.rank, ctas.pick(src.rank, "put") if cta is None else cta, "push",
                      "put", (src,), (w,), n))
        return w

    def pieces(n: int) -> list[tuple[int, int]]:
        return [(o, min(chunk, n - o)) for o in range(0, n, chunk)] if push else [(0, n)]

    if not c.is_reduce:
        world = c.world
        for items in _copy_steps(gs, step, world):
            unpack = []   # (holder, source, window, offset, bytes)
            for g, off, n in items:
                src = g.sources[0]
                for h in _holders(g, world, rotated):
                    if h.rank == src.rank:
                        ops.append(Op(src.rank, ctas.pick(src.rank, "put"), "local", "copy",
                                      (_in(src, off),), (_out(h, off),), n))
                        continue
                    u = (h, src, put(_in(src, off), h.rank, n), off, n)
                    if rotated:   # unpacked once the step's pushes are all out
                        unpack.append(u)
                    else:
                        _unpack(ops, ctas, u, pieces)
            for u in sorted(unpack, key=lambda u: (u[0].rank, (u[1].rank - u[0].rank) % world)):
                _unpack(ops, ctas, u, pieces)
        return ops, max(win.used)
    for g, owner, off, n in _reduce_items(gs, step, algorithm, align):
        wins = {s.rank: put(_in(s, off), owner.rank, n) for s in g.sources if s.rank != owner.rank}
        for o, m in pieces(n):
            srcs = tuple(_in(s, off + o) if s.rank == owner.rank else wins[s.rank] + o
                         for s in g.sources)
            cta = ctas.pick(owner.rank, "consumer")
            ops.append(Op(owner.rank, cta, "reduce", "reduce", srcs, (_out(owner, off + o),), m))
            if algorithm == "two_shot":
                for h in g.holders:
                    if h.rank != owner.rank:
                        w = put(_out(owner, off + o), h.rank, m, cta=cta)
                        ops.append(Op(h.rank, ctas.pick(h.rank, "tail", owner.rank), "tail", "copy",
                                      (w,), (_out(h, off + o),), m))
    return ops, max(win.used)


def _holders(g: Group, world: int, rotated: bool) -> tuple[Placed, ...]:
    """The holders of a copy block in the order its source serves them: rank order, or
    (``rotated``) from the source itself on, wrapping."""
    src = g.sources[0].rank
    return tuple(sorted(g.holders, key=lambda h: (h.rank - src) % world)) if rotated else g.holders


def _unpack(ops: list[Op], ctas: Ctas, u: tuple, pieces) -> None:
    """The consumer's copies of one push out of its packet window, chunk by chunk."""
    h, src, w, off, n = u
    for o, m in pieces(n):
        ops.append(Op(h.rank, ctas.pick(h.rank, "consumer", src.rank), "consume", "copy",
                      (w + o,), (_out(h, off + o),), m))


def ring(c: Collective, gs: list[Group], chunk: int, staging: int, ctas: Ctas,
         order: tuple[int, ...], align: int) -> tuple[list[Op], int]:
    """Hop by hop along a cycle of direct neighbours: each hop pulls the previous rank's
    staged chunk, relaying (copy) or adding its own contribution (reduce)."""
    ops: list[Op] = []
    world = c.world
    nxt = {order[k]: order[(k + 1) % world] for k in range(world)}
    region = staging // 2 if c.is_reduce else staging
    slots = [Slots(r, 0, region, chunk) for r in range(world)]
    reduced = [Slots(r, region, region, chunk) for r in range(world)] if c.is_reduce else []

    def spread(start: int, slot: Ref, targets: dict[int, Placed], off: int, n: int) -> None:
        remaining, x, prev = set(targets) - {start}, start, slot
        while remaining:
            x = nxt[x]
            remaining.discard(x)
            dsts = ((slots[x].take(),) if remaining else ()) + \
                   ((_out(targets[x], off),) if x in targets else ())
            ops.append(Op(x, ctas.pick(x, "relay"), "relay", "copy", (prev,), dsts, n))
            prev = dsts[0]

    if not c.is_reduce:
        for g, off, n in _copy_items(gs, chunk, c.world):
            src = g.sources[0]
            targets = {h.rank: h for h in g.holders}
            local = (_out(targets[src.rank], off),) if src.rank in targets else ()
            if set(targets) == {src.rank}:
                ops.append(Op(src.rank, ctas.pick(src.rank, "put"), "local", "copy",
                              (_in(src, off),), local, n))
                continue
            slot = slots[src.rank].take()
            ops.append(Op(src.rank, ctas.pick(src.rank, "put"), "put", "copy", (_in(src, off),),
                          (slot,) + local, n))
            spread(src.rank, slot, targets, off, n)
        return ops, staging
    for g, owner, off, n in _reduce_items(gs, chunk, "two_shot", align):
        contrib = {s.rank: s for s in g.sources}
        targets = {h.rank: h for h in g.holders}
        chain, x = [], owner.rank
        for _ in range(world):
            x = nxt[x]
            chain.append(x)          # ends at the owner
        partial = None
        for x in chain:
            last = x == owner.rank
            own = _in(contrib[x], off) if x in contrib else None
            if partial is None and own is None:
                continue
            if last:
                dsts = (_out(owner, off),) + ((reduced[x].take(),) if len(targets) > 1 else ())
            else:
                dsts = (slots[x].take(),)
            if partial is None:
                ops.append(Op(x, ctas.pick(x, "put"), "put", "copy", (own,), dsts, n))
            elif own is None:
                ops.append(Op(x, ctas.pick(x, "consumer"), "relay", "copy", (partial,), dsts, n))
            else:
                ops.append(Op(x, ctas.pick(x, "consumer"), "reduce", "reduce", (partial, own), dsts, n))
            partial = dsts[-1]
        if len(targets) > 1:
            spread(owner.rank, partial, targets, off, n)
    return ops, staging
