"""The discrete-event engine: one simpy process per (rank, cta) walking its program.

Data instructions become flows in a :class:`~purlin.sim.fluid.FluidModel`; the engine
owns the glue between simpy time and the fluid model:

- starting or ending a flow marks the rates dirty and schedules one *settle* at the
  current time, after every event already queued for that time, so a burst of flows
  that start or end together (symmetric ranks do) costs one recompute;
- a settle recomputes rates and schedules one timer at the next completion; a later
  settle makes that timer stale (a generation number), so no event is ever cancelled.

Signals are monotonic per (rank, signal): ``Notify`` costs the notifier the release
fence (``notify_issue_us``) and the flag lands ``signal_latency_us`` + path latency
later; ``Wait`` costs ``wait_check_us`` if the flag is already there. Up to
``signal_batch`` Notifies (Waits) in a row are one batch, as the executor runs them: one
fence (one poll) for all. Packets land with their
flag, so ``WaitPackets`` wakes when every byte of its window has arrived with its value;
one fused into the read after it (:func:`purlin.snac.ir.fused_read`) wakes on the first
packets, and that read ends no earlier than its last packet lands. A reader that had to
wait for its last packets has them ``packet_poll_us`` after they land.

What the executor adds to an Atom's start, from its microbenchmarks: each PutPackets of a
batch pays ``packet_put_us``; a CTA's first packet read pays ``packet_crowd_us`` per
doubling of the CTAs on its GPU that use packets (after any wait: its polls are slower,
so waiting does not hide them); a Copy whose destination the executor
aligns first (:func:`_aligns_first`) pays ``copy_head_us``.
If the event queue runs dry while a CTA still waits, the schedule deadlocked.
"""
from __future__ import annotations

import bisect
import math
import time
from collections import Counter, defaultdict
from typing import Any, Callable

from purlin.errors import BackendUnavailable, Deadlock, ScheduleError
from purlin.sim.calibration import Calibration, load_calibration
from purlin.sim.fabric import Fabric, FlowSpec
from purlin.sim.fluid import TIME_EPS_US, FluidModel
from purlin.sim.checks import check_args
from purlin.sim.result import SimResult
from purlin.snac.ir import (Copy, Notify, Program, PutPackets, Reduce, Schedule, Wait, WaitPackets, fused_read,
                            sources)
from purlin.snac.bind import bind_topology
from purlin.topology import Topology

try:
    import simpy
    from simpy.core import NORMAL
    from simpy.events import Event
except ImportError:  # pragma: no cover - simpy is a declared dependency
    simpy = None

_FLOW_KINDS = (Copy, Reduce, PutPackets)


def _reads_packets(ins) -> bool:
    return any(r.buffer == "packets" for r in sources(ins))


def _uses_packets(ins) -> bool:
    return isinstance(ins, (PutPackets, WaitPackets)) or _reads_packets(ins)


def _aligns_first(ins: Copy, cal: Calibration) -> bool:
    """Whether the executor copies the bytes up to an aligned destination first: a plain
    copy (16-byte aligned on both sides, not from packets) long enough, whose first
    destination is off the boundary."""
    align = int(cal.copy_align_bytes)
    refs = (ins.src,) + ins.dsts
    return (align > 0 and ins.nbytes >= cal.copy_align_min_bytes and ins.src.buffer != "packets"
            and ins.dsts[0].offset % align != 0 and all(r.offset % 16 == 0 for r in refs))


def simulate(schedule: Schedule, topology: Topology | str | None = None,
             calibration: Calibration | str | None = None, record: bool = True) -> SimResult:
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
    if simpy is None:
        raise BackendUnavailable("the simulator needs simpy: pip install simpy")
    check_args(schedule, calibration, record)   # types, before any work (purlin.sim.checks)
    topo = bind_topology(schedule, topology)
    cal = _calibration(topo, calibration)
    wall = time.perf_counter()
    run = _Run(schedule, topo, cal, record)
    run.go()
    return run.result(time.perf_counter() - wall)


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


class _Run:
    """State of one simulated call."""

    def __init__(self, schedule: Schedule, topology: Topology, cal: Calibration,
                 record: bool) -> None:
        self.schedule, self.topology, self.cal, self.record = schedule, topology, cal, record
        self.env = simpy.Environment()
        self.fabric = Fabric(topology, cal, _footprint(schedule, topology))
        # CTAs on each rank's GPU that push or read packets: their polling crowds a packet
        # read (a cost per doubling, from CTAs sharing one GPU)
        per_gpu = Counter(self.fabric.gpu_of(p.rank) for p in schedule.programs
                          if any(_uses_packets(i) for i in p.instrs))
        self.packet_crowd_us = {g: cal.packet_crowd_us * math.log2(max(1.0, n / 2))
                                for g, n in per_gpu.items()}
        self.model = FluidModel(self.fabric.capacities_Bpus, self.fabric.knees)
        self.signals: list[dict[int, int]] = [defaultdict(int) for _ in range(schedule.world)]
        self.waiters: dict[tuple[int, int], list] = defaultdict(list)
        self.packets: dict[tuple[int, int], list[list[int]]] = defaultdict(list)
        self.begun: dict[tuple[int, int], list[list[int]]] = defaultdict(list)   # first bytes visible
        self.packet_waiters: dict[int, list] = defaultdict(list)
        self.meta: dict[int, tuple] = {}
        self.records: list[tuple] = []
        self.pc: dict[tuple[int, int], int] = {}
        self.end_us = 0.0
        self.last_store_us = 0.0
        self.flows = 0
        self._settle_pending = False
        self._gen = 0

    # ---- scheduling helpers ------------------------------------------------------------
    def _at(self, delay_us: float, fn: Callable, *args: Any) -> None:
        """Call ``fn(*args)`` ``delay_us`` from now (an event with a callback, no process)."""
        ev = Event(self.env)
        ev._ok, ev._value = True, None
        ev.callbacks.append(lambda _e: fn(*args))
        self.env.schedule(ev, NORMAL, delay_us)

    def _done(self, ev: Event) -> None:
        ev._ok, ev._value = True, None
        self.env.schedule(ev, NORMAL, 0.0)

    # ---- the fluid glue -----------------------------------------------------------------
    def _begin_flow(self, spec: FlowSpec, nbytes: int, ev: Event, pkt: tuple | None) -> None:
        if nbytes <= 0:
            self._end_flow(spec, ev, pkt)
            return
        self.model.advance(self.env.now)
        slot = self.model.add(spec.resources, spec.weights, spec.cap_Bpus, nbytes)
        self.meta[slot] = (spec, ev, pkt)
        if pkt is not None:   # a fused reader may start on the first packets
            self._at(spec.post_us, self._land_packets, *pkt, False)
        self.flows += 1
        self._dirty()

    def _end_flow(self, spec: FlowSpec, ev: Event, pkt: tuple | None) -> None:
        now = self.env.now
        if pkt is not None:
            self._at(spec.post_us, self._land_packets, *pkt)
        elif now + spec.post_us > self.last_store_us:
            self.last_store_us = now + spec.post_us
        self._done(ev)

    def _dirty(self) -> None:
        if not self._settle_pending:
            self._settle_pending = True
            self._at(0.0, self._settle)

    def _settle(self) -> None:
        self._settle_pending = False
        self.model.advance(self.env.now)
        self.model.recompute()
        t = self.model.next_finish_us()
        if t != float("inf"):
            self._gen += 1
            self._at(max(t - self.env.now, 0.0), self._timer, self._gen)

    def _timer(self, gen: int) -> None:
        if gen != self._gen:
            return  # a later settle replaced this timer
        now = self.env.now
        self.model.advance(now)
        for slot in self.model.pop_finished(TIME_EPS_US + abs(now) * 1e-12):
            self._end_flow(*self.meta.pop(slot))
        self._dirty()

    # ---- signals and packets -------------------------------------------------------------
    def _land_signal(self, rank: int, signal: int, value: int) -> None:
        flags = self.signals[rank]
        if value <= flags[signal]:
            return
        flags[signal] = value
        waiting = self.waiters.get((rank, signal))
        if waiting:
            keep = []
            for want, ev in waiting:
                if want <= value:
                    self._done(ev)
                else:
                    keep.append((want, ev))
            self.waiters[(rank, signal)] = keep

    def _land_packets(self, rank: int, offset: int, nbytes: int, value: int,
                      whole: bool = True) -> None:
        """Packets of a window land (``whole`` False: only their first bytes are visible)."""
        _merge(self.begun[(rank, value)], offset, offset + nbytes)
        if whole:
            _merge(self.packets[(rank, value)], offset, offset + nbytes)
        waiting = self.packet_waiters.get(rank)
        if waiting:
            keep = []
            for lo, hi, want, ev, book in waiting:
                if want == value and _covers(book[(rank, value)], lo, hi):
                    self._done(ev)
                else:
                    keep.append((lo, hi, want, ev, book))
            self.packet_waiters[rank] = keep

    def _packets(self, rank: int, lo: int, hi: int, value: int, book: dict):
        """An event for when [lo, hi) of rank's window ``value`` is in ``book`` (None: now)."""
        if _covers(book[(rank, value)], lo, hi):
            return None
        ev = Event(self.env)
        self.packet_waiters[rank].append((lo, hi, value, ev, book))
        return ev

    # ---- the CTA process ------------------------------------------------------------------
    def _cta(self, prog: Program, start_us: float):
        env, fabric, cal = self.env, self.fabric, self.cal
        rank, cta = prog.rank, prog.cta
        key = (rank, cta)
        rec = self.records.append if self.record else None
        self.pc[key] = 0
        yield env.timeout(start_us)
        run = 0   # consecutive PutPackets so far: a batch of them pays one start
        sig_run, prev = 0, None   # consecutive Notifies (or Waits): a batch pays one fence (poll)
        sig_batch = max(1, int(cal.signal_batch))
        fused: list[tuple] = []   # windows of fused WaitPackets the next read must outlast
        crowded = False           # the crowd's cost is paid (on the CTA's first packet read)
        fused_since = 0.0
        for i, ins in enumerate(prog.instrs):
            self.pc[key] = i
            t0 = env.now
            kind = type(ins)
            nbytes = 0
            run = run + 1 if kind is PutPackets else 0
            sig_run = sig_run + 1 if kind is prev else 1
            prev = kind
            batch_head = (sig_run - 1) % sig_batch == 0
            if kind in _FLOW_KINDS:
                spec = fabric.flow(ins, rank, f"rank {rank}, cta {cta}, instr {i}")
                ev = Event(env)
                pkt = ((ins.dst.rank, ins.dst.offset, ins.nbytes, ins.value)
                       if kind is PutPackets else None)
                pre, crowd = spec.pre_us, 0.0
                if run > 1 and (run - 1) % max(1, int(cal.packet_batch)):
                    pre = max(0.0, pre - cal.sm.op_start_us)
                if kind is PutPackets:
                    pre += cal.packet_put_us
                elif not crowded and _reads_packets(ins):
                    crowd = self.packet_crowd_us[self.fabric.gpu_of(rank)]   # once: its first packet read
                    crowded = True
                elif kind is Copy and _aligns_first(ins, cal):
                    pre += cal.copy_head_us
                if fused:   # its start-up (and first packet loads) ran while it waited
                    pre = max(0.0, pre - (env.now - fused_since))
                pre += crowd   # crowded polls are slower: waiting does not hide them
                self._at(pre, self._begin_flow, spec, ins.nbytes, ev, pkt)
                yield ev
                for w in fused:   # a read checking tags cannot end before its last packet lands
                    ev = self._packets(*w, self.packets)
                    if ev is not None:
                        yield ev
                        yield env.timeout(cal.packet_poll_us)
                fused = []
                nbytes = ins.nbytes
            elif kind is Notify:
                if cal.notify_issue_us and batch_head:
                    yield env.timeout(cal.notify_issue_us)
                self._at(fabric.signal_us(rank, ins.peer), self._land_signal,
                         ins.peer, ins.signal, ins.value)
            elif kind is Wait:
                if self.signals[rank][ins.signal] < ins.value:
                    ev = Event(env)
                    self.waiters[(rank, ins.signal)].append((ins.value, ev))
                    yield ev
                elif cal.wait_check_us and batch_head:
                    yield env.timeout(cal.wait_check_us)
            elif kind is WaitPackets:
                # (no check cost: the read that follows checks the tags). Fused into that
                # read (ir.fused_read), it waits only for the first packets, and the read
                # streams behind the rest.
                w = (ins.src.rank, ins.src.offset, ins.src.offset + ins.nbytes, ins.value)
                if fused_read(prog.instrs, i):
                    if not fused:
                        fused_since = env.now
                    fused.append(w)
                    ev = self._packets(*w, self.begun)
                else:
                    ev = self._packets(*w, self.packets)
                if ev is not None:
                    yield ev
                    if not fused_read(prog.instrs, i):
                        yield env.timeout(cal.packet_poll_us)
                nbytes = ins.nbytes
            else:
                raise ScheduleError(f"rank {rank}, cta {cta}, instr {i}: the simulator has no "
                                    f"handler for {kind.__name__}")
            if rec is not None:
                rec((rank, cta, i, kind.__name__, t0, env.now, nbytes))
        self.pc[key] = -1
        if env.now > self.end_us:
            self.end_us = env.now

    def go(self) -> None:
        # one launch per GPU; its CTAs start one after another (in (rank, cta) order, as
        # the executor's grid lists them), launch_per_cta_us apart
        launches: dict[str, list[Program]] = defaultdict(list)
        for prog in sorted(self.schedule.programs, key=lambda p: (p.rank, p.cta)):
            launches[self.topology.gpu_of(prog.rank).name].append(prog)
        for grid in launches.values():
            first = self.cal.launch_us + (self.cal.launch_grid_us if len(grid) > 1 else 0.0)
            for k, prog in enumerate(grid):
                self.env.process(self._cta(prog, first + k * self.cal.launch_per_cta_us))
        self.env.run()
        stuck = sorted(k for k, v in self.pc.items() if v >= 0)
        if stuck:
            raise Deadlock(self._explain(stuck))

    def _explain(self, stuck: list[tuple[int, int]]) -> str:
        progs = {(p.rank, p.cta): p for p in self.schedule.programs}
        rank, cta = stuck[0]
        i = self.pc[(rank, cta)]
        ins = progs[(rank, cta)].instrs[i]
        where = f"rank {rank}, cta {cta}, instr {i}"
        tail = f" ({len(stuck)} of {len(progs)} CTAs stuck at t={self.env.now:.3f} us)"
        if isinstance(ins, Wait):
            have = self.signals[rank][ins.signal]
            writers = [f"rank {p.rank} cta {p.cta} instr {j}"
                       + (" (stuck)" if self.pc.get((p.rank, p.cta), -1) >= 0 else "")
                       for p in self.schedule.programs for j, x in enumerate(p.instrs)
                       if isinstance(x, Notify) and x.peer == rank and x.signal == ins.signal]
            who = (f"; notified by {', '.join(writers[:3])}" if writers
                   else "; no CTA notifies it")
            return (f"{where}: Wait on signal {ins.signal} for value {ins.value} never "
                    f"satisfied (signal reached {have}){who}{tail}")
        if isinstance(ins, WaitPackets):
            return (f"{where}: WaitPackets on packets[{ins.src.rank}]+{ins.src.offset} "
                    f"({ins.nbytes} B, value {ins.value}) never arrived{tail}")
        return f"{where}: {type(ins).__name__} never finished{tail}"

    def result(self, wall_s: float) -> SimResult:
        total = max(self.end_us, self.last_store_us, self.cal.launch_us)
        try:
            events = next(self.env._eid)  # simpy's count of scheduled events
        except (AttributeError, TypeError):  # pragma: no cover
            events = -1
        util = {}
        T = total * 1e-6  # seconds
        for i, name in enumerate(self.fabric.names):
            b = float(self.model.bytes_on[i])
            cap_gbps = float(self.fabric.capacities_Bpus[i]) / 1e3
            util[name] = {"bytes": b, "capacity_gbps": cap_gbps,
                          "busy_fraction": b / (cap_gbps * 1e9 * T) if T > 0 else 0.0}
        stats = {"wall_s": wall_s, "events": events, "flows": self.flows,
                 "recomputes": self.model.recomputes,
                 "instructions": sum(len(p.instrs) for p in self.schedule.programs),
                 "events_per_s": events / wall_s if wall_s > 0 else 0.0}
        return SimResult(schedule=self.schedule, topology=self.topology.name,
                         gpu_kind=self.cal.gpu_kind, calibration=self.cal.path,
                         time_us=total, records=self.records, utilisation=util, stats=stats)


def _merge(intervals: list[list[int]], lo: int, hi: int) -> None:
    """Insert [lo, hi) into a sorted list of disjoint intervals, merging neighbours."""
    i = bisect.bisect_left(intervals, [lo, lo])
    if i > 0 and intervals[i - 1][1] >= lo:
        i -= 1
    j = i
    while j < len(intervals) and intervals[j][0] <= hi:
        lo, hi = min(lo, intervals[j][0]), max(hi, intervals[j][1])
        j += 1
    intervals[i:j] = [[lo, hi]]


def _covers(intervals: list[list[int]], lo: int, hi: int) -> bool:
    """True if [lo, hi) lies inside one interval of the sorted disjoint list."""
    if hi <= lo:
        return True
    i = bisect.bisect_right(intervals, [lo, float("inf")]) - 1
    return i >= 0 and intervals[i][0] <= lo and intervals[i][1] >= hi
