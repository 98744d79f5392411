"""Sync insertion: turn dataflow ops, given in a logical order, into CTA programs.

The dataflow builders only say *what* moves and on which (rank, cta); this pass finds
every cross-CTA dependency through shadow memory and inserts the Notify/Wait (or packet
tag) that enforces it. Because every CTA runs its ops in the one logical order and
waits only on earlier ops, any CTA assignment is deadlock-free when CTAs are
co-resident.

Dependencies found:
- read after write (a consumer waits for the producer's notify, or for packet tags);
- write after read and write after write (a producer reusing a staging slot waits for
  the drain notify of every reader);
- first remote touch of a peer's user buffer (the owner notifies at call start that the
  buffer is ready);
- fences at call end: the owner of memory another rank touched waits until that rank is
  done, when its user buffer was touched or when nothing else in the call orders the two
  (so the next-but-one call may reuse the staging half). With ``fence="rank"`` one CTA
  of the owner (CTA 0) waits for every touching CTA; with ``fence="cta"`` CTA c of the
  owner waits for the CTAs c of its peers only, so no CTA checks more than one signal per
  peer (the call ends when every CTA has, so the owner still outlasts every touch); with
  ``fence="gather"`` each CTA tells its own rank's CTA 0 when its touches are done, and that
  CTA tells each owner once, so an owner's CTA 0 checks one signal per peer rank.

A rank's start signal reaches every peer CTA that touches its buffers (``start="cta"``), or
(``start="gate"``) only the peers' CTA 0, which waits for all of them once and releases its
own rank's CTAs with one local signal. At W ranks of C CTAs the direct regime's handshakes
are about 4 W^2 C flags with ``cta``/``cta``, and about 4 W (W + C) with ``gate``/``gather``,
for one local hop more at each end.
"""
from __future__ import annotations

from array import array
from collections import defaultdict
from dataclasses import dataclass
from itertools import repeat
from typing import Iterator

import numpy as np

from purlin.errors import PlanError
from purlin.snac.intervals import IntervalMap
from purlin.snac.ir import (Copy, Fan, Instruction, Notify, Program, PutPackets, Reduce, Ref, Refs, Wait, WaitPackets,
                             quick_init, ref_buffer_set, ref_offsets, ref_ranks)

USER = ("input", "output")


@quick_init
@dataclass(frozen=True, slots=True)
class Op:
    """One datapath step before sync: ``kind`` is copy, reduce or put (PutPackets)."""

    rank: int
    cta: int
    role: str
    kind: str
    srcs: Refs
    dsts: Refs
    nbytes: int


@dataclass(frozen=True)
class Synced:
    """Programs with their Notify/Wait inserted, the signals they use and the epoch step."""
    programs: tuple[Program, ...]
    num_signals: int
    epoch_stride: int


FENCES = ("rank", "cta", "gather")
STARTS = ("cta", "gate")
"""Who waits for a rank's start signal: every touching CTA, or its rank's CTA 0 (the gate)."""
NOTIFY_ORDERS = ("rank", "rotated")
"""In which order a CTA signals the peers one op releases: ``rank`` (rank 0 first) or
``rotated`` (rank r starts with r+1, wrapping: no rank is last for every notifier)."""


def insert_sync(ops: list[Op], world: int, dtype: str, op_name: str, atom: str,
                fence: str = "rank", notify_order: str = "rank", start_at: str = "cta",
                rotate_waits: bool = False) -> Synced:
    """Build programs with signals from ``ops`` in logical order. Pure. ``fence``: which
    CTAs of an owner wait at call end for the peers that touched its memory, ``start_at``:
    who waits for a peer's start (see the module docstring); ``notify_order``: one of
    :data:`NOTIFY_ORDERS`; ``rotate_waits``: a CTA waits for its peers from rank+1 on
    (else in signal order)."""
    if fence not in FENCES:
        raise PlanError(f"policy.fence {fence!r}: choose one of {', '.join(FENCES)}")
    if start_at not in STARTS:
        raise PlanError(f"policy.start {start_at!r}: choose one of {', '.join(STARTS)}")
    if notify_order not in NOTIFY_ORDERS:
        raise PlanError(f"policy.notify_order {notify_order!r}: choose one of {', '.join(NOTIFY_ORDERS)}")
    n = len(ops)
    start = [n + r for r in range(world)]          # virtual op ids: call start per rank
    end = [n + world + r for r in range(world)]    # and call end per rank (on CTA 0)
    # (rank, cta) of every op, then of the virtual ones (fence="cta" adds ends later)
    where = [(o.rank, o.cta) for o in ops] + [(r, 0) for r in range(world)] * 2
    spread: dict[tuple[int, int], int] = {}        # fence="cta": (owner, cta) -> end op
    collect: dict[int, int] = {}                  # fence="gather": rank -> its CTA 0's report
    deps: defaultdict[int, set[int] | tuple[int, ...]] = defaultdict(set)   # producers of each op

    def end_of(owner: int, toucher: int, cta: int) -> int:
        """The op a touch of ``owner``'s memory by CTA ``cta`` of ``toucher`` precedes."""
        if fence == "gather":   # through the toucher's report, which the owner's end waits for
            g = collect.get(toucher)
            if g is None:
                g = collect[toucher] = len(where)
                where.append((toucher, 0))
            deps[end[owner]].add(g)
            return g
        if fence != "cta" or cta == 0:
            return end[owner]
        if (owner, cta) not in spread:
            spread[(owner, cta)] = len(where)
            where.append((owner, cta))
        return spread[(owner, cta)]
    pdeps: defaultdict[int, list[tuple[Ref, int, int]]] = defaultdict(list)  # packet waits
    writers: dict[tuple[int, str], IntervalMap] = {}
    readers: dict[tuple[int, str], IntervalMap] = {}
    gens: dict[int, int] = {}
    touches = _Touches(world)   # the last op of each CTA to touch each peer's memory
    orders = np.zeros((world, world), bool)   # [from rank, to rank]: a dependency
    rank_of = [w[0] for w in where]
    # inputs nobody writes hold themselves: a read of one only needs the owner's start
    # when remote (no writer, and no later write to order after it)
    inputs_read_only = not any("input" in ref_buffer_set(o.dsts) for o in ops)
    # outputs nobody reads, each byte written once (direct plans): a write there only
    # needs the owner's start when remote, so no shadow map is kept for them
    outputs_write_once = _write_once(ops, "output")

    remote_fill: dict[tuple[int, int, int], int] = {}  # (writer rank, reader rank, cta) -> op
    peers_of: dict = {}   # (a Fan's ranks, rank) -> the peers' start ops and ranks
    for i, op in enumerate(ops):
        me = where[i]
        last, mark = touches.row(op.rank, op.cta)
        dep: set[int] = set()   # kept in deps only when not empty (most ops have none)
        srcs, dsts = op.srcs, op.dsts
        # a rack's reduction reads every rank's input, its broadcast stores to every
        # rank's output: user buffers that need only their owners' starts, done in bulk
        if inputs_read_only and len(srcs) > 1 and ref_buffer_set(srcs) == _INPUT:
            _touch_users(srcs, op.rank, i, dep, start, last, mark, peers_of)
            srcs = ()
        if outputs_write_once and len(dsts) > 1 and ref_buffer_set(dsts) == _OUTPUT:
            _touch_users(dsts, op.rank, i, dep, start, last, mark, peers_of)
            dsts = ()
        for ref in srcs:
            if ref.buffer == "input" and inputs_read_only:
                if ref.rank != op.rank:
                    dep.add(start[ref.rank])
                    last[ref.rank] = i
                    mark[ref.rank] = _USER
                continue
            key = (ref.rank, ref.buffer)
            w_map = writers.get(key)
            if w_map is None:
                w_map = writers[key] = IntervalMap()
            lo, hi = ref.offset, ref.offset + op.nbytes
            pos = lo
            for s, e, w in w_map.query(lo, hi):
                if s > pos:  # bytes nobody wrote in this call
                    _unwritten(op, ref, pos, s, dep, start)
                pos = e
                if ref.buffer not in USER and ops[w].rank != ref.rank:
                    remote_fill[(ops[w].rank, op.rank, op.cta)] = i
                if where[w] != me:
                    if ref.buffer == "packets" and ops[w].kind == "put":
                        pdeps[i].append((ref if s == lo else Ref(ref.rank, "packets", s), e - s, gens[w]))
                        orders[ops[w].rank, op.rank] = True
                    else:
                        dep.add(w)
            if hi > pos:
                _unwritten(op, ref, pos, hi, dep, start)
            r_map = readers.get(key)
            if r_map is None:
                r_map = readers[key] = IntervalMap()
            r_map.append_to(lo, hi, i)
            if ref.rank != op.rank:
                last[ref.rank] = i
                mark[ref.rank] |= _USER if ref.buffer in USER else _TOUCHED
        for ref in dsts:
            if outputs_write_once and ref.buffer == "output":
                if ref.rank != op.rank:
                    dep.add(start[ref.rank])
                    last[ref.rank] = i
                    mark[ref.rank] = _USER
                continue
            key = (ref.rank, ref.buffer)
            lo, hi = ref.offset, ref.offset + op.nbytes
            w_map = writers.get(key)
            if w_map is None:
                w_map = writers[key] = IntervalMap()
            r_map = readers.get(key)
            if r_map is None:
                r_map = readers[key] = IntervalMap()
            fresh_r = r_map.is_empty(lo, hi)
            written = [] if w_map.is_empty(lo, hi) else list(w_map.query(lo, hi))
            if not fresh_r:
                for s, e, rs in r_map.query(lo, hi):
                    dep.update(r for r in rs if where[r] != me)
            for s, e, w in written:  # write after write: only where nobody read in between
                if where[w] != me and (fresh_r or not any(rs for _, _, rs in r_map.query(s, e))):
                    dep.add(w)
            if not written and ref.buffer in USER and ref.rank != op.rank:
                dep.add(start[ref.rank])
            if op.kind == "put":
                gens[i] = 1 + max((gens.get(w, 0) for _, _, w in written), default=0)
            w_map.assign(lo, hi, i)
            if not fresh_r:
                r_map.assign(lo, hi, ())
            if ref.rank != op.rank and ref.buffer in USER:
                last[ref.rank] = i
                mark[ref.rank] = _USER
        if dep:
            deps[i] = tuple(dep)   # a rack's op waits on ~W starts: a tuple is far smaller than a set
            to = op.rank
            orders[list(map(rank_of.__getitem__, dep)), to] = True
    gates = _gate_starts(ops, deps, start, where) if start_at == "gate" else []
    # Fences, so the next-but-one call may reuse scratch and callers may reuse buffers.
    # Collected as lists (a repeat is harmless: _emit keeps the highest value per signal
    # and the ranks it releases) and stored as tuples, like the ops' own dependencies.
    fenced: defaultdict[int, list[int]] = defaultdict(list)
    if fence == "gather":
        _gather_fences(touches, orders, world, collect, where, deps, end, fenced)
    for rank, cta, owner, i, by_user in (() if fence == "gather" else touches.items()):
        if by_user or not orders[rank, owner]:   # owner must outlast this rank's touches
            fenced[end_of(owner, rank, cta)].append(i)
    for (writer, reader, cta), i in remote_fill.items():
        if not orders[reader, writer]:        # writer must outlast the owner's reads
            fenced[end_of(writer, reader, cta)].append(i)
    for k, got in fenced.items():
        deps[k] = tuple(set(deps.get(k, ())).union(got))
    # a rank's report goes out before its CTA 0 waits for the peers' reports
    ends = [collect[r] for r in sorted(collect)] + end + [spread[k] for k in sorted(spread)]
    return _emit(ops, world, deps, pdeps, gens, start + gates, ends, dtype, op_name, atom, where,
                 notify_order == "rotated", rotate_waits)


def _touch_users(refs: Refs, rank: int, i: int, dep: set[int], start: list[int], last: array,
                 mark: bytearray, peers_of: dict) -> None:
    """Op ``i`` of ``rank`` touches the user buffers ``refs`` that no op of the call writes
    (an input) or reads (an output): each remote one needs only its owner's start, and
    is the CTA's latest touch of that peer (what the per-Ref loop records, in bulk: a
    Fan's peers are found once per rank, and the marks set through numpy)."""
    key = (refs.ranks, rank) if type(refs) is Fan else None
    got = peers_of.get(key) if key is not None else None
    if got is None:
        peers = [q for q in ref_ranks(refs) if q != rank]
        got = (list(map(start.__getitem__, peers)), np.array(peers, np.int64))
        if key is not None:
            peers_of[key] = got
    dep.update(got[0])
    np.frombuffer(last, np.int64)[got[1]] = i
    np.frombuffer(mark, np.uint8)[got[1]] = _USER


_INPUT, _OUTPUT = {"input"}, {"output"}


def _gather_fences(touches: "_Touches", ordered: np.ndarray, world: int, collect: dict[int, int],
                   where: list, deps, end: list[int], fenced) -> None:
    """``fence="gather"``: each touch that must be fenced (of a user buffer, or of a peer
    nothing else orders after this rank) is fenced by its rank's report, created on first
    use, which each touched owner's end waits for once: row by row, at C speed (a rack's
    CTA touches every peer), the same reports in the same order as touch by touch."""
    told = np.zeros((world, world), bool)   # owner's end already waits for rank's report
    for (rank, _), (last, mark) in touches.rows.items():
        m = np.frombuffer(mark, np.uint8)
        peers = np.flatnonzero(m)
        peers = peers[(m.take(peers) == _USER) | ~ordered[rank].take(peers)]
        if not len(peers):
            continue
        g = collect.get(rank)
        if g is None:
            g = collect[rank] = len(where)
            where.append((rank, 0))
        fenced[g].extend(np.frombuffer(last, np.int64).take(peers).tolist())
        new = peers[~told[rank].take(peers)]
        told[rank, new] = True
        for owner in new.tolist():
            deps[end[owner]].add(g)


def _gate_starts(ops: list[Op], deps, start: list[int], where: list) -> list[int]:
    """Route every op's waits for peers' starts through one gate per rank on its CTA 0:
    the gate waits for those starts, the op for the gate. Returns the gates' op ids (in
    rank order; each runs before any op of its CTA)."""
    starts = set(start)
    full = len(starts) - 1
    gate: dict[int, int] = {}
    for i in range(len(ops)):
        ds = deps.get(i)
        if not ds:
            continue
        got = starts.intersection(ds)
        if not got:
            continue
        k = ops[i].rank
        g = gate.get(k)
        if g is None:
            g = gate[k] = len(where)
            where.append((k, 0))
        deps[i] = (g,) if len(got) == len(ds) else tuple(d for d in ds if d not in got) + (g,)
        waits = deps[g]
        if len(waits) < full:   # (a gate waits for at most every other rank's start)
            waits |= got
    return [gate[k] for k in sorted(gate)]


def _write_once(ops: list[Op], buffer: str) -> bool:
    """Whether no op reads ``buffer`` and no two op writes (nor two stores of one op)
    overlap there; puts (packet stores) do not count as writes of it."""
    if any(buffer in ref_buffer_set(o.srcs) for o in ops) or any(
            o.kind == "put" and buffer in ref_buffer_set(o.dsts) for o in ops):
        return False
    # three arrays, not a tuple per store: a rack's broadcast AllGather stores to ~W
    # destinations per Copy, and the tuples were the peak of planning it; a broadcast's
    # stores are listed at C speed, and Fans of one rank set as one rank's
    rank, lo, size = _fan_stores(ops, buffer) or _stores(ops, buffer)
    if not rank:
        return True
    rk, a, n = (np.frombuffer(x, np.int64) for x in (rank, lo, size))
    b = a + n
    if a.min() >= 0 and n.min() > 0 and b.max() < _SPAN and rk.min() >= 0 and rk.max() < _RANKS:
        # Within a rank, intervals are disjoint exactly when the k-th smallest end is at
        # most the (k+1)-th smallest start: two plain sorts of (rank, bound) keys, not
        # a sort of the pairs (several times slower at a rack's 10 million stores)
        starts, ends = np.sort((rk << 40) | a), np.sort((rk << 40) | b)
        same = (starts[1:] >> 40) == (starts[:-1] >> 40)
        return bool(not (same & (starts[1:] < ends[:-1])).any())
    order = np.lexsort((a, rk))
    rk, a, b = rk[order], a[order], b[order]
    return bool(not ((rk[1:] == rk[:-1]) & (a[1:] < b[:-1])).any())


def _stores(ops: list[Op], buffer: str) -> tuple[array, array, array]:
    """(rank, offset, size) of every store to ``buffer``, in op order."""
    rank, lo, size = array("q"), array("q"), array("q")
    only = {buffer}
    for o in ops:
        ds = o.dsts
        if len(ds) > 1 and ref_buffer_set(ds) == only:
            rank.extend(ref_ranks(ds))
            lo.extend(ref_offsets(ds))
            size.extend(repeat(o.nbytes, len(ds)))
            continue
        for r in ds:
            if r.buffer == buffer:
                rank.append(r.rank)
                lo.append(r.offset)
                size.append(o.nbytes)
    return rank, lo, size


def _fan_stores(ops: list[Op], buffer: str) -> tuple[array, array, array] | None:
    """:func:`_stores` where every store to ``buffer`` is a Fan's and all the Fans name one
    set of distinct ranks (a rack's broadcast or switch AllReduce): every rank then holds
    the same intervals, so one rank's (listed as rank 0) decide. None otherwise."""
    lo, size, ranks, seen = array("q"), array("q"), None, set()
    for o in ops:
        ds = o.dsts
        if type(ds) is not Fan:
            if buffer in ref_buffer_set(ds):
                return None
            continue
        if ds.buffer != buffer or not ds.ranks:
            continue
        if id(ds.ranks) not in seen:   # a block's chunks share one tuple
            got = frozenset(ds.ranks)
            if len(got) != len(ds.ranks) or (ranks is not None and got != ranks):
                return None
            ranks = got
            seen.add(id(ds.ranks))
        lo.append(ds.offset)
        size.append(o.nbytes)
    return (array("q", bytes(8 * len(lo))), lo, size) if lo else None


_SPAN, _RANKS = 1 << 40, 1 << 22
"""Bounds under which a (rank, byte offset) pair packs into one int64 key."""


def _unwritten(op: Op, ref: Ref, a: int, b: int, dep: set[int], start: list[int]) -> None:
    """Bytes a..b that ``op`` reads and nobody wrote in this call: a user buffer's (then a
    remote one needs its owner's start), else a planner bug."""
    if ref.buffer not in USER:
        raise PlanError(f"planner bug: rank {op.rank} cta {op.cta} ({op.role}) reads "
                        f"{ref.buffer}[{ref.rank}] bytes {a}..{b} before any write")
    if ref.rank != op.rank:
        dep.add(start[ref.rank])


_TOUCHED, _USER = 1, 3
"""A CTA's mark for a peer: touched its memory; touched a user buffer of it (both bits)."""


class _Touches:
    """Per CTA, the last op that touched each peer's memory and a mark of how (a row of W
    slots per CTA: a dict keyed by (rank, CTA, peer) held an entry per touch, W^2 C of them
    in a rack's direct plan, each a tuple key and a tuple value). A slot's op is read
    only where its mark is set."""

    def __init__(self, world: int):
        self.world = world
        self.rows: dict[tuple[int, int], tuple[array, bytearray]] = {}

    def row(self, rank: int, cta: int) -> tuple[array, bytearray]:
        got = self.rows.get((rank, cta))
        if got is None:
            got = self.rows[(rank, cta)] = (array("q", bytes(8 * self.world)), bytearray(self.world))
        return got

    def items(self) -> Iterator[tuple[int, int, int, int, bool]]:
        """(rank, cta, peer, last op, touched a user buffer) of every touch; the touched
        peers of a row found at C speed (a ring's CTA touches one peer of W)."""
        for (rank, cta), (last, mark) in self.rows.items():
            for peer in np.flatnonzero(np.frombuffer(mark, np.uint8)).tolist():
                yield rank, cta, peer, last[peer], mark[peer] == _USER


def _emit(ops, world, deps, pdeps, gens, start, end, dtype, op_name, atom, where,
          rotated: bool, rotate_waits: bool) -> Synced:
    n = len(ops)
    released = _released(deps, where, world)
    ranks_of: dict[int, tuple[int, ...]] = {0: ()}   # a mask of ranks, decoded once
    progs: dict[tuple[int, int], list[Instruction]] = {}
    roles: dict[tuple[int, int], set[str]] = {}
    counter: dict[tuple[int, int], int] = {}
    value: dict[int, int] = {}
    signals: list[dict[tuple[int, int], int]] = [{} for _ in range(world)]
    # rank -> per signal, where a rotated rank waits for it: writers from rank+1 on,
    # wrapping, and by CTA within a rank (so every rank's waits are its peers' rotation)
    rot_keys: list[list[tuple[int, int]]] = [[] for _ in range(world)]
    waited: dict[tuple[int, int], dict] = {}
    waits: dict[tuple[tuple[int, ...], int], Wait] = {}
    max_value = 1
    for i in list(start) + list(range(n)) + list(end):
        me = where[i]
        prog = progs.get(me)
        if prog is None:
            prog = progs[me] = []
            seen = waited[me] = {}
        else:
            seen = waited[me]
        ds = deps.get(i)
        if ds:
            best: dict[int, int] = {}
            mine = signals[me[0]]
            for d in ds:
                w = where[d]
                if w != me:
                    sig = mine[w]
                    v = value[d]
                    if best.get(sig, 0) < v:
                        best[sig] = v
            run: list[int] = []   # signals in order; a run of one value is one Wait
            run_v = 0
            for sig in (sorted(best, key=rot_keys[me[0]].__getitem__) if rotate_waits else sorted(best)):
                v = best[sig]
                if seen.get(sig, 0) < v:
                    if run and v != run_v:
                        prog.append(_wait(waits, run, run_v))
                        run = []
                    run.append(sig)
                    run_v = v
                    seen[sig] = v
            if run:
                prog.append(_wait(waits, run, run_v))
        if i < n:
            for ref, nbytes, gen in pdeps.get(i, ()):
                key = ("p", ref.offset, nbytes)
                if seen.get(key, 0) < gen:
                    prog.append(WaitPackets(ref, nbytes, gen))
                    seen[key] = gen
            op = ops[i]
            r = roles.get(me)
            if r is None:
                roles[me] = {op.role}
            else:
                r.add(op.role)
            if op.kind == "copy":
                prog.append(Copy(op.srcs[0], op.dsts, op.nbytes, atom))
            elif op.kind == "reduce":
                prog.append(Reduce(op.srcs, op.dsts, op.nbytes, dtype, op_name, atom))
            else:
                prog.append(PutPackets(op.srcs[0], op.dsts[0], op.nbytes, gens[i]))
                max_value = max(max_value, gens[i])
        mask = released.get(i, 0)
        if mask:
            targets = ranks_of.get(mask)
            if targets is None:
                targets = ranks_of[mask] = tuple(r for r in range(world) if mask >> r & 1)
            targets = list(targets)
            if rotated and len(targets) > 1:
                targets.sort(key=lambda t, r=me[0]: (t - r) % world)
            if targets:
                counter[me] = v = counter.get(me, 0) + 1
                value[i] = v
                max_value = max(max_value, v)
                sigs = []
                for t in targets:
                    st = signals[t]
                    sig = st.get(me)
                    if sig is None:
                        sig = st[me] = len(st)
                        rot_keys[t].append(((me[0] - t) % world, me[1]))
                    sigs.append(sig)
                prog.append(Notify(tuple(targets), tuple(sigs), v))
    programs = tuple(
        Program(r, c, "+".join(sorted(roles.get((r, c), {"sync"}))), tuple(ins))
        for (r, c), ins in sorted(progs.items()) if ins)
    num_signals = max((len(s) for s in signals), default=0)
    return Synced(programs, max(num_signals, 1), max_value + 1)


def _released(deps, where: list, world: int) -> dict[int, int]:
    """Per producer op, the ranks of the CTAs (other than its own) that wait for it, as a
    bit mask: at W ranks an op may release ~W CTAs on every rank, and a set of those op
    ids per producer held gigabytes at 576 ranks, where the mask is ~W/8 bytes."""
    bit = [1 << r for r in range(world)]
    out: dict[int, int] = {}
    get = out.get
    for i, ds in deps.items():
        me = where[i]
        b = bit[me[0]]
        for d in ds:
            if where[d] != me:
                out[d] = get(d, 0) | b
    return out


def _wait(waits: dict, sigs: list[int], v: int) -> Wait:
    """The Wait on ``sigs`` for ``v``; equal Waits are one object (the verifier's scan
    checks each once)."""
    key = (tuple(sigs), v)
    wt = waits.get(key)
    if wt is None:
        wt = waits[key] = Wait(key[0], v)
    return wt
