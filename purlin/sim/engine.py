"""The discrete-event engine: one process per (rank, cta) walking its program.

Each CTA is a generator that yields how long it sleeps (or ``None`` while it waits for a
flow, a flag or packets); :class:`~purlin.sim.clock.Clock` runs them. Data instructions
become flows in a :class:`~purlin.sim.fluid.FluidModel`; the engine owns the glue:

- starting or ending a flow marks the rates dirty and schedules one *settle* at the
  current time, after every event already queued for that time, so a burst of flows
  that start or end together (symmetric ranks do) costs one recompute;
- a settle recomputes rates and schedules one timer at the next completion; a later
  settle makes that timer stale (a generation number), so no event is ever cancelled.

Signals are monotonic per (rank, signal): ``Notify`` costs the notifier the release
fence (``notify_issue_us``) and the flag lands ``signal_latency_us`` + path latency
later; ``Wait`` costs ``wait_check_us`` if the flag is already there. Up to
``signal_batch`` flags of a run of Notifies (Waits) are one batch, as the executor runs
them: one fence (one poll) for all, whether one instruction names them or several. A flag is not an event: its landing (time, seq) is filed when
it is issued, a Wait compares it with the time it looks (a flag landing at that very
time counts if its seq is the smaller, as its landing event would have run first), and
only a CTA that must wait for it gets an entry, filed under the flag's seq. Packets land
with their flag, so ``WaitPackets`` wakes when every byte of its window has arrived with
its value; one fused into the read after it (:func:`purlin.snac.ir.fused_read`) over
a whole put's window wakes on the first packets, and that read ends no earlier than its
last packet lands. A fused read of part of a put (a consumer splitting a push into
chunks) has its packets only when the whole put has landed, as a standalone wait does
(the ``push_read`` microbenchmarks: such reads ran 0.3-0.6 us later than streaming
behind the put). A reader that had to wait for its last packets has them
``packet_poll_us`` after they land.

What the executor adds to an Atom's start, from its microbenchmarks: each PutPackets of a
batch pays ``packet_put_us``; a CTA's first packet read pays ``packet_crowd_us`` per
doubling of the CTAs on its GPU that use packets (after any wait: its polls are slower,
so waiting does not hide them); a Copy whose destination the executor aligns first
(:func:`purlin.sim.tails.aligns_first`) pays ``copy_head_us``; an instruction off the
16-byte grid pays what :mod:`purlin.sim.tails` charges (nothing changes for the others).
If the event queue runs dry while a CTA still waits, the schedule deadlocked.

Where at least :data:`COALESCE_CTAS` CTAs run (a rack's call without rank symmetry, never
an 8-GPU box's), one settle serves every change within :data:`COALESCE_REL` of the
elapsed time after the first: a flow that ended leaves its capacity unshared, and one that
started waits at rate 0, until then. There each settle re-solves thousands of flows, and
an uneven call (an AllToAllV, a V split, blocks off the 512-byte grid) ends them one by
one, so exact settles cost seconds a point; the windows move a prediction by a fraction of
a percent, mostly to a later time (measured against ``exact=True``:
``benchmarks/results/sim_coalesce.json``).

Where settles would be coalesced and no resource saturates softly, a call is first run
*quiet* (:mod:`purlin.sim.quiet`): a data instruction sleeps through its start-up and
``nbytes / cap`` with no fluid model, no timer and no wake-up, while
:class:`~purlin.sim.quiet.QuietLoad` checks that no resource ever fills (max-min fairness
then keeps every flow at its cap: the fluid model's timing). Where one would, the call
runs again with the fluid model from the start.

Without a timeline, a rank-periodic call (:mod:`purlin.sim.symmetry`) runs only its
representative ranks: their flows load orbit resources for all, and each flag or put a
representative sends stands for the one its rotated writer lands on a representative.
"""
from __future__ import annotations

import math
import time
from collections import Counter, defaultdict
from typing import Any

from purlin.gcpause import paused
from purlin.errors import Deadlock, ScheduleError
from purlin.sim import tails
from purlin.sim.calibration import Calibration, load_calibration
from purlin.sim.clock import Clock
from purlin.sim.fabric import Fabric, FlowSpec
from purlin.sim.flagbook import FlagBook
from purlin.sim.fluid import TIME_EPS_US, FluidModel
from purlin.sim.checks import check_args
from purlin.sim.packets import (Overlapping, PacketEvents, PacketTimes, fused_positions, put_windows,
                                uses_packets)
from purlin.sim.quiet import Contended, QuietLoad
from purlin.sim.result import SimResult
from purlin.sim.symmetry import Quotient, quotient
from purlin.snac.bind import bind_topology
from purlin.snac.ir import (Copy, Notify, Program, PutPackets, Reduce, Schedule, Wait, WaitPackets, ref_buffer_set,
                            sources)
from purlin.topology import Topology

_FLOW_KINDS = (Copy, Reduce, PutPackets)
COALESCE_CTAS = 2560
"""CTAs simulated from which settles are coalesced: more than any shipped system of 16
GPUs or fewer can run (an MI300X box's 8 x 304 are the most), so every prediction the
GPUs were measured against stays exact."""
COALESCE_REL = 1e-3
"""A coalesced settle runs this fraction of the elapsed time after the change that asked
for it."""
_KEY = 1 << 32   # a blocked CTA waits under rank * _KEY + signal


def _notify_records(rec, rank: int, cta: int, instrs: tuple, first: int, end: int,
                    starts: list[float], batch: int) -> None:
    """Timeline records of the Notifies ``instrs[first:end]``: each from the start of the
    batch holding its first flag to the end of the batch holding its last."""
    m = 0
    for k in range(first, end):
        n = len(instrs[k].peers)
        rec((rank, cta, k, "Notify", starts[m // batch], starts[(m + n - 1) // batch + 1], 0))
        m += n


def _reads_packets(ins) -> bool:
    return "packets" in ref_buffer_set(sources(ins))


@paused()
def simulate(schedule: Schedule, topology: Topology | str | None = None,
             calibration: Calibration | str | None = None, record: bool = True,
             symmetry: bool = True, exact: bool = False) -> SimResult:
    """Run one call of ``schedule`` on ``topology`` and return what it costs.

    Parameters
    ----------
    schedule : Schedule
        From :func:`purlin.snac.plan` or built by hand; executed unchanged.
    topology : Topology or str, optional
        Default: the topology the schedule was planned for (the Schedule names it).
        One given must be that same topology (same content digest).
    calibration : Calibration or str, optional
        A Calibration, a GPU kind or a JSON path; default: ``topology.gpu_kind``.
    record : bool
        Keep the per-op timeline (turn off for large sweeps).
    symmetry : bool
        Without a timeline, simulate one class of alike ranks where the call is
        rank-periodic (:mod:`purlin.sim.symmetry`; the same answer, ``stats["period"]``
        says which); False runs every rank.
    exact : bool
        Settle the rates at every change, also in a call of thousands of CTAs, and never
        run it quiet (slower at rack scale; ``stats["coalesced"]`` counts the settles that
        waited for a window, ``stats["quiet"]`` says whether the call ran quiet).

    Returns
    -------
    SimResult
        Time (max over ranks, launch included), algbw/busbw, timeline, utilisation.

    Raises
    ------
    Deadlock
        If every remaining CTA waits on something that never comes; names a stuck
        (rank, cta, instruction) and its signal.
    ScheduleError
        If ``topology`` is not the one the schedule was planned for, or an instruction
        cannot run on it (e.g. Atom ``switch`` without an in-switch-reduce switch),
        naming rank, cta and instruction.

    Examples
    --------
    >>> from purlin.spec import library
    >>> from purlin.snac import plan
    >>> from purlin.topology import minimal
    >>> s = plan(library.all_gather(2, 1 << 16), minimal(2))
    >>> r = simulate(s, calibration="synthetic")
    >>> r.time_us > 0 and r.busbw_gbps <= 100.0
    True
    """
    check_args(schedule, calibration, record, symmetry, exact)   # types, before any work (purlin.sim.checks)
    topo = bind_topology(schedule, topology)
    cal = _calibration(topo, calibration)
    wall = time.perf_counter()
    footprint = _footprint(schedule, topo)
    fabric = Fabric(topo, cal, footprint)
    q = None if record or not symmetry else quotient(schedule, topo, cal, fabric, footprint)
    try:
        run = _go(schedule, topo, cal, record, fabric, q, exact)
    except Deadlock:
        if q is None:
            raise
        run = _go(schedule, topo, cal, record, fabric, None, exact)   # every rank: names every stuck one
    return run.result(time.perf_counter() - wall)


def _go(schedule: Schedule, topo: Topology, cal: Calibration, record: bool, fabric: Fabric,
        q: Quotient | None, exact: bool = False) -> "_Run":
    packets, quiet = PacketTimes, True
    while True:
        try:
            run = _Run(schedule, topo, cal, record, packets, fabric, q, exact, quiet)
            run.go()
            return run
        except Overlapping:   # puts of one tag overlap: land packets event by event
            packets = PacketEvents
        except Contended:     # a resource filled: the fluid model decides the rates
            quiet = False


def _calibration(topo: Topology, calibration: Calibration | str | None) -> Calibration:
    if isinstance(calibration, Calibration):
        return calibration
    return load_calibration(calibration or topo.gpu_kind)


def _footprint(s: Schedule, topology: Topology) -> dict[str, int]:
    """Bytes a call touches on each GPU across repeated calls: inputs, outputs, both
    staging halves and both packet-window halves (16 bytes per 8 of payload)."""
    out: dict[str, int] = defaultdict(int)
    c = s.collective
    for r in range(s.world):
        out[topology.gpu_of(r).name] += (c.input.nbytes(r) + c.output.nbytes(r)
                                         + 2 * s.staging_nbytes + 4 * s.packets_nbytes)
    return out


class _Cta:
    """One CTA: its program, its generator, where it is, and when (which seq) it got
    to the present time."""

    __slots__ = ("prog", "gen", "pc", "arr")

    def __init__(self, prog: Program):
        self.prog, self.gen, self.pc, self.arr = prog, None, 0, 0


class _Run:
    """State of one simulated call."""

    def __init__(self, schedule: Schedule, topology: Topology, cal: Calibration,
                 record: bool, packets: type = PacketTimes, fabric: Fabric | None = None,
                 q: Quotient | None = None, exact: bool = False, quiet: bool = False) -> None:
        self.schedule, self.topology, self.cal, self.record = schedule, topology, cal, record
        self.coalesced = 0   # settles that waited for their window
        self.clock = Clock()
        self.fabric = fabric or Fabric(topology, cal, _footprint(schedule, topology))
        self.q = q   # where set, only its representatives run and stand for their rotations
        self.programs = schedule.programs if q is None else q.programs
        # a rank-periodic call runs only its representatives: few CTAs, settled exactly
        self.coalesce = not exact and len(self.programs) >= COALESCE_CTAS
        # CTAs on each rank's GPU that push or read packets: their polling crowds a packet
        # read (a cost per doubling, from CTAs sharing one GPU)
        per_gpu = Counter(self.fabric.gpu_of(p.rank) for p in self.programs if uses_packets(p.instrs))
        self.packet_crowd_us = {g: cal.packet_crowd_us * math.log2(max(1.0, n / 2))
                                for g, n in per_gpu.items()}
        self.model = FluidModel(self.fabric.capacities_Bpus, self.fabric.knees)
        self.flags = FlagBook(topology.world)   # when each (rank, signal) landed
        self.waiters: dict[int, list[tuple[int, _Cta]]] = {}
        self._signal_row: dict[int, list[float]] = {}   # rank -> signal_us to each peer
        self.packets = packets(self.clock, self._wake)
        self.meta: dict[int, tuple] = {}
        self.records: list[tuple] = []
        self.ctas: list[_Cta] = []
        self.end_us = 0.0
        self.last_store_us = 0.0
        self.flows = 0
        self._puts: set | None = None
        self._settle_pending = False
        self._gen = 0
        self._timer_at = float("inf")
        # where settles would be coalesced and no resource is soft, first try the call
        # with every flow at its cap (purlin.sim.quiet: checked as it runs)
        self.quiet = (QuietLoad(self.fabric.capacities_Bpus)
                      if quiet and self.coalesce and not (self.fabric.knees > 0).any() else None)

    # ---- driving the CTAs -------------------------------------------------------------
    def _resume(self, c: _Cta) -> None:
        c.arr = self.clock.cur
        try:
            dt = c.gen.send(None)
        except StopIteration:
            return
        if dt is not None:
            self.clock.at(dt, self._resume, c)

    def _wake(self, c: _Cta) -> None:
        """A CTA waited for something that has now happened: it goes on after whatever
        is already due at this time (as a simpy process triggered here would)."""
        self.clock.at(0.0, self._resume, c)

    # ---- the fluid glue -----------------------------------------------------------------
    def _begin_flow(self, arg: tuple) -> None:
        spec, nbytes, c, pkt = arg
        if nbytes <= 0:
            self._end_flow(spec, c, pkt)
            return
        self.model.advance(self.clock.now)
        slot = self.model.add(spec.resources, spec.weights, spec.cap_Bpus, nbytes)
        self.meta[slot] = (spec, c, pkt)
        if pkt is not None:   # a fused reader may start on the first packets
            self.packets.begin(pkt, self.clock.now + spec.post_us, self.clock.draw())
        self.flows += 1
        self._changed()

    def _end_flow(self, spec: FlowSpec, c: _Cta, pkt: tuple | None) -> None:
        now = self.clock.now
        if pkt is not None:
            self.packets.end(pkt, now + spec.post_us, self.clock.draw())
        elif now + spec.post_us > self.last_store_us:
            self.last_store_us = now + spec.post_us
        self._wake(c)

    def _changed(self) -> None:
        """Flows started or ended now. Where the exact shortcut applies (no bottleneck
        changed) the rates are settled at once; otherwise one settle runs after
        everything else due now (in a call of thousands of CTAs, at the end of its
        window), so flows starting together cost one recompute."""
        if self._settle_pending:
            return
        if self.model.try_shortcut():
            self._arm()
        else:
            self._settle_pending = True
            delay = COALESCE_REL * self.clock.now if self.coalesce else 0.0
            self.coalesced += delay > 0.0
            self.clock.at(delay, self._settle)

    def _settle(self, _: Any = None) -> None:
        self._settle_pending = False
        self.model.advance(self.clock.now)
        self.model.recompute()
        self._timer_at = float("inf")   # rates changed: the next finish is re-armed
        self._arm()

    def _arm(self) -> None:
        """Keep one timer at the next completion (a later one makes it stale)."""
        t = self.model.next_finish_us()
        if t < self._timer_at:
            self._timer_at = t
            self._gen += 1
            self.clock.at(max(t - self.clock.now, 0.0), self._timer, self._gen)

    def _timer(self, gen: int) -> None:
        if gen != self._gen:
            return  # a later settle replaced this timer
        now = self.clock.now
        self._timer_at = float("inf")
        self.model.advance(now)
        for slot in self.model.pop_finished(TIME_EPS_US + abs(now) * 1e-12):
            self._end_flow(*self.meta.pop(slot))
        self._changed()

    # ---- signals ------------------------------------------------------------------------
    def _notify_run(self, rank: int, flags: list, i: int, j: int) -> None:
        """Issue the flags ``flags[i:j]`` (one batch of (peer, signal, value)) now, in
        order: each flag's landing (time, seq) is filed, and CTAs waiting for it get an
        entry at that landing."""
        row = self._signal_row.get(rank)
        if row is None:
            row = self._signal_row[rank] = self.fabric.signal_row(rank)
        clock, add, waiters = self.clock, self.flags.add, self.waiters
        now = clock.now
        seq = clock.seq   # drawn here one per flag (nothing below draws one)
        for k in range(i, j):
            peer, r, sig, value = flags[k]
            land = now + row[peer]
            seq += 1
            add(r, sig, value, land, seq)
            key = r * _KEY + sig
            waiting = waiters.get(key)
            if waiting:
                keep = []
                for want, c in waiting:
                    if want <= value:
                        clock.at_seq(land, seq, self._wake, c)
                    else:
                        keep.append((want, c))
                waiters[key] = keep
        clock.seq = seq

    def _flag_ready(self, c: _Cta, rank: int, sig: int, want: int) -> bool:
        """Whether flag (``rank``, ``sig``) is at least ``want`` for CTA ``c`` now; if
        not, arrange for ``c`` to be woken when it is (the caller then yields None)."""
        got = self.flags.landing(rank, sig, want)
        if got is not None:
            t, seq = got
            now = self.clock.now
            if t < now or (t == now and seq < c.arr):
                return True
            self.clock.at_seq(t, seq, self._wake, c)
            return False
        self.waiters.setdefault(rank * _KEY + sig, []).append((want, c))
        return False

    def _put_windows(self) -> set[tuple[int, int, int, int]]:
        """Every put's window (rank, lo, hi, tag), over all ranks (a quotient run's
        representatives receive the same windows as in the full run)."""
        if self._puts is None:
            self._puts = put_windows(self.schedule.programs)
        return self._puts

    # ---- the CTA process ------------------------------------------------------------------
    def _cta(self, c: _Cta, start_us: float):
        prog = c.prog
        clock, fabric, cal = self.clock, self.fabric, self.cal
        rank, cta = prog.rank, prog.cta
        instrs = prog.instrs
        rec = self.records.append if self.record else None
        fused_at = fused_positions(instrs)
        q = self.q
        quiet = self.quiet
        yield start_us
        run = 0   # consecutive PutPackets so far: a batch of them pays one start
        sig_batch = max(1, int(cal.signal_batch))
        pkt_batch = max(1, int(cal.packet_batch))
        issue_us, check_us = cal.notify_issue_us, cal.wait_check_us
        book = self.flags
        fval, ftime, fseq = book.value[rank], book.time[rank], book.seq[rank]   # grown in place
        fused: list[tuple] = []   # windows of fused WaitPackets the next read must outlast
        crowded = False           # the crowd's cost is paid (on the CTA's first packet read)
        fused_since = 0.0
        n, i = len(instrs), 0
        while i < n:
            ins = instrs[i]
            kind = type(ins)
            if kind is Wait:
                # a run of Waits: each batch of signal_batch flags pays one poll
                m = 0   # flags of the run checked so far
                while i < n and type(instrs[i]) is Wait:
                    ins = instrs[i]
                    c.pc = i
                    t0 = clock.now
                    want = ins.value
                    for sig in ins.signals:
                        # the common case inline (the flag's first value already landed
                        # before this CTA looked); :meth:`_flag_ready` decides the rest
                        if sig < len(fval) and fval[sig] >= want and (
                                ftime[sig] < clock.now or (ftime[sig] == clock.now and fseq[sig] < c.arr)):
                            if check_us and m % sig_batch == 0:
                                yield check_us
                        elif not self._flag_ready(c, rank, sig, want):
                            yield None
                        elif check_us and m % sig_batch == 0:
                            yield check_us
                        m += 1
                    if rec is not None:
                        rec((rank, cta, i, "Wait", t0, clock.now, 0))
                    i += 1
                run = 0
                continue
            if kind is Notify:
                # a run of Notifies: each batch of signal_batch flags pays one release fence,
                # and its flags are filed at one time (their landings differ by path latency)
                first = i
                while i < n and type(instrs[i]) is Notify:
                    i += 1
                c.pc = first
                if q is None:
                    flags = [(peer, peer, sig, ins.value) for ins in instrs[first:i]
                             for peer, sig in zip(ins.peers, ins.signals)]
                else:   # each flag stands for the one a rotated writer lands on a representative
                    flags = [(peer, r, sig, ins.value) for x in range(first, i)
                             for peer, (r, sig) in zip(instrs[x].peers, q.flags[(rank, cta, x)])]
                starts = [] if rec is None else [clock.now]
                for b in range(0, len(flags), sig_batch):
                    if issue_us:
                        yield issue_us
                    self._notify_run(rank, flags, b, min(len(flags), b + sig_batch))
                    if rec is not None:
                        starts.append(clock.now)
                if rec is not None:
                    _notify_records(rec, rank, cta, instrs, first, i, starts, sig_batch)
                run = 0
                continue
            c.pc = i
            t0 = clock.now
            nbytes = 0
            run = run + 1 if kind is PutPackets else 0
            if kind in _FLOW_KINDS:
                spec = fabric.flow(ins, rank, (rank, cta, i))
                pkt = ((ins.dst.rank, ins.dst.offset, ins.nbytes, ins.value)
                       if kind is PutPackets else None)
                if q is not None:
                    spec = q.spec(spec)
                    if pkt is not None:
                        pkt = q.puts[(rank, cta, i)] + pkt[2:]
                pre, crowd = spec.pre_us, 0.0
                spec, pre = tails.charge(ins, spec, pre, cal)   # off the 16-byte grid only
                if run > 1 and (run - 1) % pkt_batch:
                    pre = max(0.0, pre - cal.sm.op_start_us)
                if kind is PutPackets:
                    pre += cal.packet_put_us
                elif not crowded and _reads_packets(ins):
                    crowd = self.packet_crowd_us[fabric.gpu_of(rank)]   # once: its first packet read
                    crowded = True
                elif kind is Copy and tails.aligns_first(ins, cal):
                    pre += cal.copy_head_us
                if fused:   # its start-up (and first packet loads) ran while it waited
                    pre = max(0.0, pre - (clock.now - fused_since))
                pre += crowd   # crowded polls are slower: waiting does not hide them
                if quiet is None:
                    clock.at(pre, self._begin_flow, (spec, ins.nbytes, c, pkt))
                    yield None
                else:   # a quiet run: at its cap from its start on (QuietLoad checks it)
                    yield self._quiet_begin(spec, pre, ins.nbytes, pkt) - clock.now
                    self._quiet_end(spec, pkt)
                for w in fused:   # a read checking tags cannot end before its last packet lands
                    if not self.packets.ready(c, w, whole=True):
                        yield None
                        yield cal.packet_poll_us
                fused = []
                nbytes = ins.nbytes
            elif kind is WaitPackets:
                # (no check cost: the read that follows checks the tags). Fused into that
                # read (ir.fused_read), it waits only for the first packets, and the read
                # streams behind the rest.
                w = (ins.src.rank, ins.src.offset, ins.src.offset + ins.nbytes, ins.value)
                is_fused = i in fused_at
                if is_fused:
                    if not fused:
                        fused_since = clock.now
                    fused.append(w)
                # a fused read of part of a put has its packets with the whole put, as
                # a standalone wait does; only a read of a whole put streams behind it
                whole = not is_fused or w not in self._put_windows()
                if not self.packets.ready(c, w, whole=whole):
                    yield None
                    if whole:
                        yield cal.packet_poll_us
                nbytes = ins.nbytes
            else:
                raise ScheduleError(f"rank {rank}, cta {cta}, instr {i}: the simulator has no "
                                    f"handler for {kind.__name__}")
            if rec is not None:
                rec((rank, cta, i, kind.__name__, t0, clock.now, nbytes))
            i += 1
        c.pc = -1
        if clock.now > self.end_us:
            self.end_us = clock.now

    def _quiet_begin(self, spec: FlowSpec, pre: float, nbytes: int, pkt: tuple | None) -> float:
        """A data instruction of a quiet run starts ``pre`` from now, as :meth:`_begin_flow`
        would start it where every flow keeps its cap; returns when it ends (the CTA
        sleeps until then, then :meth:`_quiet_end`)."""
        start = self.clock.now + pre
        if nbytes <= 0:
            return start
        end = start + nbytes / spec.cap_Bpus
        self.quiet.begin(spec, nbytes, start, end)
        self.quiet.maybe_check(self.clock.now)   # Contended where flows shared a resource
        if pkt is not None:   # a fused reader may start on the first packets
            self.packets.begin(pkt, start + spec.post_us, self.clock.draw())
        self.flows += 1
        return end

    def _quiet_end(self, spec: FlowSpec, pkt: tuple | None) -> None:
        """:meth:`_end_flow` of a quiet run (the CTA goes on by itself)."""
        now = self.clock.now
        if pkt is not None:
            self.packets.end(pkt, now + spec.post_us, self.clock.draw())
        elif now + spec.post_us > self.last_store_us:
            self.last_store_us = now + spec.post_us

    def go(self) -> None:
        # one launch per GPU; its CTAs start one after another (in (rank, cta) order, as
        # the executor's grid lists them), launch_per_cta_us apart
        launches: dict[str, list[Program]] = defaultdict(list)
        for prog in sorted(self.programs, key=lambda p: (p.rank, p.cta)):
            launches[self.topology.gpu_of(prog.rank).name].append(prog)
        for grid in launches.values():
            first = self.cal.launch_us + (self.cal.launch_grid_us if len(grid) > 1 else 0.0)
            for k, prog in enumerate(grid):
                c = _Cta(prog)
                c.gen = self._cta(c, first + k * self.cal.launch_per_cta_us)
                self.ctas.append(c)
                self.clock.at(0.0, self._resume, c)
        self.clock.run()
        if self.quiet is not None:
            self.quiet.check(float("inf"))   # Contended where flows shared a resource
            self.model.bytes_on += self.quiet.bytes_on
        stuck = sorted((c.prog.rank, c.prog.cta) for c in self.ctas if c.pc >= 0)
        if stuck:
            raise Deadlock(self._explain(stuck))

    def _explain(self, stuck: list[tuple[int, int]]) -> str:
        progs = {(p.rank, p.cta): p for p in self.schedule.programs}
        pcs = {(c.prog.rank, c.prog.cta): c.pc for c in self.ctas}
        rank, cta = stuck[0]
        i = pcs[(rank, cta)]
        ins = progs[(rank, cta)].instrs[i]
        where = f"rank {rank}, cta {cta}, instr {i}"
        tail = f" ({len(stuck)} of {len(progs)} CTAs stuck at t={self.clock.now:.3f} us)"
        if isinstance(ins, Wait):
            def reached(sig: int) -> int:
                return self.flags.reached(rank, sig)
            sig = next((x for x in ins.signals if reached(x) < ins.value), ins.signals[0])
            writers = [f"rank {p.rank} cta {p.cta} instr {j}"
                       + (" (stuck)" if pcs.get((p.rank, p.cta), -1) >= 0 else "")
                       for p in self.schedule.programs for j, x in enumerate(p.instrs)
                       if isinstance(x, Notify) and (rank, sig) in zip(x.peers, x.signals)]
            who = (f"; notified by {', '.join(writers[:3])}" if writers
                   else "; no CTA notifies it")
            return (f"{where}: Wait on signal {sig} for value {ins.value} never "
                    f"satisfied (signal reached {reached(sig)}){who}{tail}")
        if isinstance(ins, WaitPackets):
            return (f"{where}: WaitPackets on packets[{ins.src.rank}]+{ins.src.offset} "
                    f"({ins.nbytes} B, value {ins.value}) never arrived{tail}")
        return f"{where}: {type(ins).__name__} never finished{tail}"

    def result(self, wall_s: float) -> SimResult:
        total = max(self.end_us, self.last_store_us, self.cal.launch_us)
        events = self.clock.events
        util = {}
        T = total * 1e-6  # seconds
        cls = self.q.res_class if self.q is not None else range(len(self.fabric.names))
        for i, name in enumerate(self.fabric.names):
            b = float(self.model.bytes_on[cls[i]])   # a rotation's load is its representative's
            cap_gbps = float(self.fabric.capacities_Bpus[i]) / 1e3
            util[name] = {"bytes": b, "capacity_gbps": cap_gbps,
                          "busy_fraction": b / (cap_gbps * 1e9 * T) if T > 0 else 0.0}
        stats = {"wall_s": wall_s, "events": events, "flows": self.flows,
                 "recomputes": self.model.recomputes, "coalesced": self.coalesced,
                 "instructions": sum(len(p.instrs) for p in self.schedule.programs),
                 "period": self.q.period if self.q is not None else self.schedule.world,
                 "quiet": self.quiet is not None,
                 "events_per_s": events / wall_s if wall_s > 0 else 0.0}
        return SimResult(schedule=self.schedule, topology=self.topology.name,
                         gpu_kind=self.cal.gpu_kind, calibration=self.cal.path,
                         time_us=total, records=self.records, utilisation=util, stats=stats)
