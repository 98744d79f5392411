"""The verifier: proves a Schedule right without hardware, or names the first fault.

Checks, in order:
1. static: ranks, buffers and offsets in bounds; signals and values in range; one
   writing CTA per signal with rising values; Reduce dtype/op match the spec;
2. liveness: the walker runs every CTA to the end as if all were co-resident (a stuck
   run names the wait cycle or the Wait with no matching Notify);
3. ordering: every read is ordered after the write it reads, and every write after the
   previous write and all its readers (so no staging slot is reused early); nothing
   writes the inputs;
4. data: symbolic contents (which input bytes, reduced in which order) of every output
   byte equal the spec's naming, and every output byte is written exactly once;
5. call windows: a peer touches a rank's input or output only after that rank has
   started the call and before all its CTAs end (start and end handshakes).

Every rule is checked on every schedule; what makes it fast at rack scale is how
(:mod:`purlin.snac.clocks`, :mod:`purlin.snac.shadow`): ordering questions go to vector
clocks over only the programs that share bytes, the call windows to rank masks carried
forward and backward along the walk, contents to interned position-free terms, and
output writes are checked for overlap after the walk. Whenever that fast pass finds
anything wrong it is run again without the deferral (and, if it must, with every program
tracked), so the fault reported is the first one in walk order, as the rules above read.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from functools import reduce
from itertools import chain, repeat
from operator import getitem, is_, le, lt, or_, setitem

import numpy as np

from purlin.gcpause import paused
from purlin.errors import Deadlock, ScheduleError
from purlin.snac.clocks import Clocks, Untracked, tracked_programs
from purlin.snac.intervals import IntervalMap
from purlin.snac.ir import (ATOMS, BUFFERS, REDUCTIONS, Copy, Notify, PutPackets, Reduce, Ref, Schedule, Wait,
                            Refs, WaitPackets, ref_buffer_set, ref_offsets, ref_ranks, sources)
from purlin.snac.shadow import Overlap, Shadow
from purlin.snac.static import WIDE, integral, scan
from purlin.snac.walk import SIGNAL_KEY, bursts
from purlin.spec.collective import output_sources

USER = ("input", "output")
_INPUT = {"input"}


def _remote_users(refs: Refs, rank: int, world: int) -> int:
    """The ranks other than ``rank`` whose input or output ``refs`` name, as a bit mask
    (bit q for rank q); a long list through numpy, not a Python step per Ref."""
    if len(refs) >= WIDE:
        bufs = ref_buffer_set(refs)
        if bufs.isdisjoint(USER):
            return 0
        if len(bufs) == 1:
            bits = np.zeros(world, bool)
            bits[list(ref_ranks(refs))] = True
            bits[rank] = False
            return int.from_bytes(np.packbits(bits, bitorder="little").tobytes(), "little")
    mask = 0
    for r in refs:
        if r.rank != rank and (r.buffer == "input" or r.buffer == "output"):
            mask |= 1 << r.rank
    return mask


LONG_WAIT = 16
"""A Wait on this many signals or more has its notes kept for the next CTA of its rank."""


@paused()
def verify(s: Schedule) -> Schedule:
    """Raise ScheduleError (or Deadlock) for the first broken rule; return ``s`` if sound.

    Examples
    --------
    >>> from purlin.snac import plan
    >>> from purlin.spec import library
    >>> verify(plan(library.all_gather(2, 16), check=False)).world
    2
    """
    if not isinstance(s, Schedule):
        raise ScheduleError(f"verify: expected a Schedule, got {type(s).__name__}")
    ok, acc = scan(s)
    if not ok:
        _static(s)   # names the first broken rule (or finds none: then on to the walk)
    tracked = tracked_programs(*acc)
    del acc   # a rack's broadcast: ~W accesses a Copy, not needed by the walk
    try:
        _Dynamic(s, tracked, defer_outputs=True).run()
    except (ScheduleError, Deadlock, Overlap, Untracked):
        try:
            _Dynamic(s, tracked, defer_outputs=False).run()
        except Untracked:
            _Dynamic(s, set(range(len(s.programs))), defer_outputs=False).run()
    return s


def check_bounds(s: Schedule) -> Schedule:
    """Every program's rank and every address of every instruction in bounds (a linear
    pass): what an executor checks before it touches memory at a schedule's word. The
    protocol (signals, values, ordering) is :func:`verify`'s."""
    if not isinstance(s, Schedule):
        raise ScheduleError(f"schedule {s!r:.60}: expected a Schedule (from purlin.plan or "
                            f"purlin.snac.serialize.from_json), got {type(s).__name__}")
    for k, prog in enumerate(s.programs):
        if not 0 <= prog.rank < s.world:
            raise ScheduleError(f"program for rank {prog.rank} in a world of {s.world}")
        for i, ins in enumerate(prog.instrs):
            t = type(ins)
            if t in (Copy, Reduce, PutPackets, WaitPackets):
                refs = sources(ins) + (ins.dsts if t in (Copy, Reduce)
                                       else (ins.dst,) if t is PutPackets else ())
                at = _where(s, k, i)
                if isinstance(ins.nbytes, bool) or not isinstance(ins.nbytes, int) or ins.nbytes < 0:
                    raise ScheduleError(f"{at}: {t.__name__} nbytes {ins.nbytes!r}: must be an "
                                        f"integer >= 0")
                for r in refs:
                    if not isinstance(r, Ref) or not isinstance(r.offset, int) or \
                            not isinstance(r.rank, int):
                        raise ScheduleError(f"{at}: {t.__name__} address {r!r}: expected a Ref "
                                            f"of integer rank and offset")
                    _bounds(s, at, t.__name__, r, ins.nbytes)
    return s


def _where(s: Schedule, k: int, i: int) -> str:
    p = s.programs[k]
    return f"rank {p.rank}, cta {p.cta}, instr {i}"


def _static(s: Schedule) -> None:
    c = s.collective
    if s.reduction not in REDUCTIONS:
        raise ScheduleError(f"reduction {s.reduction!r}: must be one of {', '.join(REDUCTIONS)}")
    seen_ctas: set[tuple[int, int]] = set()
    writer: dict[tuple[int, int], tuple[int, int, int]] = {}
    for k, prog in enumerate(s.programs):
        if not 0 <= prog.rank < s.world:
            raise ScheduleError(f"program for rank {prog.rank} in a world of {s.world}")
        if (prog.rank, prog.cta) in seen_ctas:
            raise ScheduleError(f"rank {prog.rank}, cta {prog.cta}: two programs for one CTA")
        seen_ctas.add((prog.rank, prog.cta))
        for i, ins in enumerate(prog.instrs):
            at = _where(s, k, i)
            t = type(ins)
            if t in (Copy, Reduce, PutPackets, WaitPackets):
                refs = sources(ins) + (ins.dsts if t in (Copy, Reduce)
                                       else (ins.dst,) if t is PutPackets else ())
                if ins.nbytes <= 0:
                    raise ScheduleError(f"{at}: {t.__name__} of {ins.nbytes} B (rule: nbytes > 0)")
                for r in refs:
                    _bounds(s, at, t.__name__, r, ins.nbytes)
            if t in (Copy, Reduce) and ins.atom not in ATOMS:
                raise ScheduleError(f"{at}: unknown atom {ins.atom!r}; known: {', '.join(ATOMS)}")
            if t is Reduce and (ins.dtype != c.dtype.name or ins.op != c.op):
                raise ScheduleError(f"{at}: Reduce {ins.dtype}/{ins.op} but the spec is "
                                    f"{c.dtype.name}/{c.op}")
            if t is PutPackets and ins.dst.buffer != "packets":
                raise ScheduleError(f"{at}: PutPackets must target a packets window, not {ins.dst.buffer}")
            if t is WaitPackets and (ins.src.buffer != "packets" or ins.src.rank != prog.rank):
                raise ScheduleError(f"{at}: WaitPackets must name a local packets window, got {ins.src}")
            if t in (Notify, Wait) and type(ins.value) is not int:
                raise ScheduleError(f"{at}: value {ins.value!r:.40} must be an integer")
            if t in (Notify, Wait, PutPackets, WaitPackets) and not 1 <= ins.value < s.epoch_stride:
                raise ScheduleError(f"{at}: value {ins.value} outside 1..{s.epoch_stride - 1} "
                                    f"(rule: values are relative to the epoch and below its stride)")
            if t in (Notify, Wait):
                _signal_fields(s, at, ins)
            if t is Notify:
                for peer, sig in zip(ins.peers, ins.signals):
                    key = (peer, sig)
                    prev = writer.get(key)
                    if prev and prev[:2] != (prog.rank, prog.cta):
                        raise ScheduleError(f"{at}: Notify to rank {peer} signal {sig}, which "
                                            f"rank {prev[0]} cta {prev[1]} also writes (rule: one "
                                            f"writer per signal)")
                    if prev and ins.value < prev[2]:
                        raise ScheduleError(f"{at}: Notify value {ins.value} after {prev[2]} on rank "
                                            f"{peer} signal {sig} (rule: values rise)")
                    writer[key] = (prog.rank, prog.cta, ins.value)


def _signal_fields(s: Schedule, at: str, ins: Notify | Wait) -> None:
    """A Notify's peers and signals (a Wait's signals): non-empty tuples of integers in
    range, one signal per peer."""
    what = type(ins).__name__
    fields = (("peers", s.world, "rank"), ("signals", s.num_signals, "signal")) if what == "Notify" \
        else (("signals", s.num_signals, "signal"),)
    for name, hi, unit in fields:
        vs = getattr(ins, name)
        if type(vs) is not tuple or not vs or any(type(v) is not int for v in vs):
            raise ScheduleError(f"{at}: {what} {name} {vs!r:.60}: must be a non-empty tuple of "
                                f"integers (one {unit} each)")
        bad = next((v for v in vs if not 0 <= v < hi), None)
        if bad is not None:
            raise ScheduleError(f"{at}: {what} to rank {bad} in a world of {s.world}" if unit == "rank"
                                else f"{at}: signal {bad} outside 0..{s.num_signals - 1}")
    if what == "Notify" and len(ins.peers) != len(ins.signals):
        raise ScheduleError(f"{at}: Notify names {len(ins.peers)} peers and {len(ins.signals)} "
                            f"signals (rule: one signal per peer)")


def _bounds(s: Schedule, at: str, what: str, r: Ref, n: int) -> None:
    if not (integral(r.rank) and integral(r.offset)):
        raise ScheduleError(f"{at}: {what} address {r!r}: rank and offset must be integers "
                            f"(got {type(r.rank).__name__} and {type(r.offset).__name__})")
    if r.buffer not in BUFFERS:
        raise ScheduleError(f"{at}: {what} names buffer {r.buffer!r}; known: {', '.join(BUFFERS)}")
    if not 0 <= r.rank < s.world:
        raise ScheduleError(f"{at}: {what} addresses rank {r.rank} in a world of {s.world}")
    size = s.buffer_nbytes(r.rank, r.buffer)
    if r.offset < 0 or r.offset + n > size:
        raise ScheduleError(f"{at}: {what} {r} ({n} B) runs outside {r.buffer} of rank {r.rank} "
                            f"({size} B)")


class _Dynamic:
    """One pass over the walk: liveness, ordering, contents, and the start of the call
    windows forward; the end of the call windows backward; then the outputs."""

    def __init__(self, s: Schedule, tracked: set[int], defer_outputs: bool):
        self.s = s
        progs = s.programs
        self.ranks = [p.rank for p in progs]
        self.clocks = Clocks(len(progs), tracked) if tracked else None
        self.sh = Shadow(self.clocks, lambda k, i: _where(s, k, i), defer_outputs)
        self.S = [1 << r for r in self.ranks]    # ranks with a CTA ordered before
        self.note_S: list[int] = []              # per Notify/PutPackets: S when issued
        self.note_E: list[int] = []              # ... and ranks whose end follows it
        self.note_snap: list[tuple | None] = []
        self.note_v: list[int] = []              # ... and its value (Notify; 0 for puts)
        # per rank, by signal: its first note (a row per rank keeps a Wait's lookups
        # together; as long as the signals noted so far); by signal key, for a flag noted
        # more than once, also every note's value and id in walk order (values rise: one
        # writer per signal)
        self.sig_first: list[list[int | None]] = [[] for _ in range(s.world)]
        self.sig_hist: dict[int, tuple[list[int], list[int]]] = {}
        # (rank, id of a long Wait) -> its notes, the ranks they are ordered after, and its
        # events: the notes a Wait waited for never change once walked, and the planner
        # shares a Wait between the CTAs of a rank
        self.waited: dict[tuple[int, int], tuple[list[int], int, list[int]]] = {}
        self.pk_notes: dict[int, IntervalMap] = {}
        # per program, in program order: 2*note+1 for a Wait (WaitPackets: one per note
        # joined), 2*note for a Notify/PutPackets, -(j+1) for remote user access j
        self.events: list[list[int]] = [[] for _ in progs]
        self.remote: list[tuple[int, int, int]] = []   # (program, instr, rank mask)
        self.runs: list[tuple[int, int, int]] = []     # (program, first event, end event)

    def run(self) -> None:
        for k, i0, i1 in bursts(self.s):
            e0 = len(self.events[k])
            self._burst(k, i0, i1)
            self.runs.append((k, e0, len(self.events[k])))
        self._ends()
        self._outputs()

    # ---- forward ------------------------------------------------------------------
    def _burst(self, k: int, i0: int, i1: int) -> None:
        instrs = self.s.programs[k].instrs
        rank = self.ranks[k]
        first = self.sig_first[rank]
        ev = self.events[k]
        append = ev.append
        clocks = self.clocks
        note_S, note_E, note_snap, note_v = self.note_S, self.note_E, self.note_snap, self.note_v
        S = self.S[k]
        for i in range(i0, i1):
            ins = instrs[i]
            t = type(ins)
            if t is Wait:
                if len(ins.signals) < LONG_WAIT:
                    want = ins.value
                    for sig in ins.signals:
                        nid = first[sig]
                        if note_v[nid] < want:
                            nid = self._later(rank, sig, want)
                        S |= note_S[nid]
                        if clocks is not None:
                            clocks.join_later(k, note_snap[nid])
                        append(2 * nid + 1)
                    continue
                nids, S_of, evs = self._wait(rank, ins)
                S |= S_of
                if clocks is not None:
                    clocks.join_all_later(k, map(note_snap.__getitem__, nids))
                ev.extend(evs)
            elif t is Notify:
                # one note for all its flags: they are released by the same fence
                nid = len(note_S)
                note_S.append(S)
                note_E.append(0)
                note_snap.append(clocks.snapshot(k, i) if clocks is not None else None)
                note_v.append(ins.value)
                self._noted(ins.peers, ins.signals, ins.value, nid)
                append(2 * nid)
            elif t is Copy or t is Reduce:
                self.S[k] = S
                self._window(k, i, ins)
                if t is Copy:
                    self._copy(k, i, ins.src, ins.dsts, ins.nbytes)
                else:
                    self._reduce(k, i, ins)
            elif t is PutPackets:
                self._copy(k, i, ins.src, (ins.dst,), ins.nbytes)
                nid = len(note_S)
                note_S.append(S)
                note_E.append(0)
                note_snap.append(clocks.snapshot(k, i) if clocks is not None else None)
                note_v.append(0)
                m = self.pk_notes.get(ins.dst.rank)
                if m is None:
                    m = self.pk_notes[ins.dst.rank] = IntervalMap()
                m.assign(ins.dst.offset, ins.dst.offset + ins.nbytes, nid)
                append(2 * nid)
            elif t is WaitPackets:
                for _, _, nid in self.pk_notes[self.ranks[k]].query(ins.src.offset, ins.src.offset + ins.nbytes):
                    S |= note_S[nid]
                    if clocks is not None:
                        clocks.join_later(k, note_snap[nid])
                    append(2 * nid + 1)
        self.S[k] = S

    def _noted(self, peers: tuple[int, ...], sigs: tuple[int, ...], v: int, nid: int) -> None:
        """File note ``nid`` (value ``v``) under each flag of a Notify; only a flag noted
        before gets a history. A rack's Notify names ~70 flags: when all are new, they
        are filed at C speed."""
        first = self.sig_first
        if len(peers) >= LONG_WAIT:
            rows = list(map(first.__getitem__, peers))
            if all(map(lt, sigs, map(len, rows))) and list(map(getitem, rows, sigs)).count(None) == len(rows):
                any(map(setitem, rows, sigs, repeat(nid)))   # setitem gives None: runs them all
                return
        hist, note_v = self.sig_hist, self.note_v
        for peer, sig in zip(peers, sigs):
            row = first[peer]
            if sig >= len(row):
                row.extend([None] * (sig + 1 - len(row)))
            p = row[sig]
            if p is None:
                row[sig] = nid
            elif p != nid:   # (a flag named twice by one Notify has one note)
                key = peer * SIGNAL_KEY + sig
                h = hist.get(key)
                if h is None:
                    hist[key] = ([note_v[p], v], [p, nid])
                else:
                    h[0].append(v)
                    h[1].append(nid)

    def _wait(self, rank: int, ins: Wait) -> tuple[list[int], int, list[int]]:
        """(the notes a long Wait of ``rank`` waited for, the ranks ordered before them, its
        events), kept: the notes a Wait waited for never change once walked, and the
        planner shares a Wait between the CTAs of a rank."""
        key = (rank, id(ins))
        got = self.waited.get(key)
        if got is None:
            nids = self._waited(rank, ins.signals, ins.value)
            got = self.waited[key] = (nids, reduce(or_, map(self.note_S.__getitem__, nids), 0),
                                      [2 * n + 1 for n in nids])
        return got

    def _waited(self, rank: int, sigs: tuple[int, ...], want: int) -> list[int]:
        """Per signal of a Wait, the first note of its flag whose value is >= ``want``: the
        Notify it waited for (the walk has run one by now, and later ones only follow).
        Mostly a flag's first note: that is checked for all ~70 flags at C speed."""
        nids = list(map(self.sig_first[rank].__getitem__, sigs))
        note_v = self.note_v
        if min(map(note_v.__getitem__, nids)) >= want:
            return nids
        for j, sig in enumerate(sigs):
            if note_v[nids[j]] < want:
                nids[j] = self._later(rank, sig, want)
        return nids

    def _later(self, rank: int, sig: int, want: int) -> int:
        """The first note >= ``want`` of a flag whose first note is below it (so it has
        a history)."""
        vals, nids = self.sig_hist[rank * SIGNAL_KEY + sig]
        return nids[bisect_left(vals, want)]

    def _copy(self, k: int, i: int, src: Ref, dsts: tuple[Ref, ...], n: int) -> None:
        sh = self.sh
        sh.copy_out(k, i, src.offset, dsts, sh.read(k, i, src, n))

    def _window(self, k: int, i: int, ins: Copy | Reduce) -> None:
        """The start of the call window: every peer whose input or output this touches
        has a CTA ordered before it. Records the access for :meth:`_ends`."""
        rank = self.ranks[k]
        mask = _remote_users(ins.srcs if type(ins) is Reduce else (ins.src,), rank, self.s.world)
        mask |= _remote_users(ins.dsts, rank, self.s.world)
        if not mask:
            return
        if mask & ~self.S[k]:
            for r, what in self._user_refs(k, ins):
                if not self.S[k] >> r.rank & 1:
                    raise ScheduleError(
                        f"{_where(self.s, k, i)}: {what} {r.buffer}[{r.rank}] before any CTA of "
                        f"rank {r.rank} has started this call (missing start handshake: rank "
                        f"{r.rank}'s caller may still be using that buffer)")
        self.events[k].append(-len(self.remote) - 1)
        self.remote.append((k, i, mask))

    def _user_refs(self, k: int, ins):
        rank = self.ranks[k]
        for r in sources(ins):
            if r.rank != rank and r.buffer in USER:
                yield r, "reads"
        for r in ins.dsts:
            if r.rank != rank and r.buffer in USER:
                yield r, "writes"

    def _reduce(self, k: int, i: int, ins: Reduce) -> None:
        sh = self.sh
        if ref_buffer_set(ins.srcs) <= _INPUT:   # inputs hold themselves
            o = ins.dsts[0].offset   # the sum as seen at the first destination, shifted to each
            terms = sh.intern(tuple(zip(ref_ranks(ins.srcs), map((-o).__add__, ref_offsets(ins.srcs)))))
            sh.copy_out(k, i, o, ins.dsts, [(o, o + ins.nbytes, terms)])
            return
        reads = [sh.read(k, i, r, ins.nbytes) for r in ins.srcs]
        if all(len(g) == 1 for g in reads):
            cuts = [0, ins.nbytes]
            at = [[g[0][2]] for g in reads]
        else:
            cuts = sorted({a - r.offset for r, got in zip(ins.srcs, reads) for a, _, _ in got} | {ins.nbytes})
            at = []
            for r, got in zip(ins.srcs, reads):
                col, j = [], 0
                for x in cuts[:-1]:
                    while got[j][1] <= r.offset + x:
                        j += 1
                    col.append(got[j][2])
                at.append(col)
        done: dict[int, list] = {}
        for d in ins.dsts:
            pieces = done.get(d.offset)
            if pieces is None:
                pieces = []
                for p, (a, b) in enumerate(zip(cuts, cuts[1:])):
                    terms = sh.intern(tuple(chain.from_iterable(
                        sh.shift(col[p], d.offset - r.offset) for r, col in zip(ins.srcs, at))))
                    pieces.append((d.offset + a, d.offset + b, terms))
                done[d.offset] = pieces
            sh.write(k, i, d, pieces)

    # ---- backward -----------------------------------------------------------------
    def _ends(self) -> None:
        """The end of the call window: every access to a peer's input or output is
        ordered before the end of some CTA of that peer. Ranks whose end an event
        precedes flow backward along the walk: from a Wait to the Notify it waited for."""
        E = [1 << r for r in self.ranks]
        note_E, remote, events = self.note_E, self.remote, self.events
        bad: list[tuple[int, int]] = []
        for k, e0, e1 in reversed(self.runs):
            e = E[k]
            ev = events[k]
            for x in range(e1 - 1, e0 - 1, -1):
                v = ev[x]
                if v >= 0:
                    if v & 1:
                        note_E[v >> 1] |= e
                    else:
                        e |= note_E[v >> 1]
                elif remote[-v - 1][2] & ~e:
                    bad.append((-v - 1, e))
            E[k] = e
        if bad:
            j, e = min(bad)
            k, i, _ = remote[j]
            ins = self.s.programs[k].instrs[i]
            for r, what in self._user_refs(k, ins):
                if not e >> r.rank & 1:
                    raise ScheduleError(f"{_where(self.s, k, i)}: {what} {r.buffer}[{r.rank}] with no order "
                                        f"before rank {r.rank}'s CTAs all end (missing end handshake: rank "
                                        f"{r.rank}'s call can return while this is in flight)")

    # ---- outputs --------------------------------------------------------------------
    def _outputs(self) -> None:
        c = self.s.collective
        sh = self.sh
        ordered = c.is_reduce and self.s.reduction == "rank"
        rank, got = None, None   # blocks come rank by rank: one rank's pieces held at a time
        for p, srcs in output_sources(c):
            if not p.nbytes:
                continue
            if p.rank != rank:
                rank, got = p.rank, None   # the last rank's pieces go before the next's are made
                got = sh.output(rank)
            want = sh.intern(tuple([(x.rank, x.offset - p.offset) for x in srcs]))
            _check_block(p, got, want, ordered)


def _check_block(p, pieces: tuple[list[int], list[int], list], want: tuple, ordered: bool) -> None:
    """Output block ``p`` is written in full by the pieces (starts, ends, terms) of its
    rank's output, each holding ``want`` (in any order unless ``ordered``)."""
    starts, ends, terms = pieces
    lo, hi = p.offset, p.offset + p.nbytes
    x = bisect_right(starts, lo) - 1
    if x < 0 or ends[x] <= lo:
        x += 1
    if _block_whole(starts, ends, terms, x, lo, hi, want):
        return
    pos, n = lo, len(starts)
    while x < n and starts[x] < hi:
        a = starts[x] if starts[x] > lo else lo
        if a > pos:
            raise ScheduleError(f"output rank {p.rank}, block {p.name!r}: bytes {pos - lo}.."
                                f"{a - lo} are never written")
        b = ends[x] if ends[x] < hi else hi
        got = terms[x]
        if got is not want and (ordered or sorted(got) != sorted(want)):
            raise ScheduleError(f"output rank {p.rank}, block {p.name!r}, bytes {a - lo}.."
                                f"{b - lo}: holds {_describe(got, a)} but the spec needs "
                                f"{_describe(want, a)}")
        pos = b
        x += 1
    if hi > pos:
        raise ScheduleError(f"output rank {p.rank}, block {p.name!r}: bytes {pos - lo}.."
                            f"{hi - lo} are never written")


def _block_whole(starts: list[int], ends: list[int], terms: list, x: int, lo: int, hi: int,
                 want: tuple) -> bool:
    """Whether the pieces from ``x`` on cover lo..hi without a gap, each holding ``want``
    itself: the usual answer, found at C speed (a rack's block is ~60 pieces); on False
    :func:`_check_block` walks them to name the fault (or finds none)."""
    y = bisect_left(starts, hi, x)
    if y <= x or starts[x] > lo or ends[y - 1] < hi:
        return False
    # pieces never overlap, so a gap is a start past the previous end
    return (all(map(le, starts[x + 1:y], ends[x:y - 1]))
            and all(map(is_, terms[x:y], repeat(want))))


def _describe(terms: tuple[tuple[int, int], ...], at: int) -> str:
    if not terms:
        return "nothing"
    parts = [f"input[{r}]+{at + e}" for r, e in terms]
    return parts[0] if len(parts) == 1 else "reduce(" + ", ".join(parts) + ")"
