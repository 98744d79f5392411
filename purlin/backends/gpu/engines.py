"""Copy-engine Atoms on the GPU: a Schedule whose data instructions are all ``ce`` Copies
runs as ``cudaMemcpyAsync`` calls (the copy engines), ordered by its Notify -> Wait pairs.

Why not flags, as the SM interpreter orders its CTAs: a copy engine takes its work from a
stream, and a stream that polls a flag (a stream memory operation) holds its hardware
queue, so a kernel queued behind it may never start to set that flag. A Schedule states
its order without flags: every signal has one writing CTA per call whose values rise in
program order, so each Wait is met by one known Notify. :func:`lower` turns those pairs
into stream order and events, on the walk order the verifier checks the schedule under
(:func:`purlin.snac.walk.bursts`). A call forks from the caller's stream and joins back
before the next call starts, so it needs neither epochs nor the second staging half.

The lowering is pure (no GPU): :func:`replay` runs it on host buffers in any order its
events allow, which is how the tests show that no edge is missing.

Examples
--------
>>> from purlin.snac import plan
>>> from purlin.spec import library
>>> s = plan(library.all_to_all(2, 64), "h200-loopback", {"atom": "ce", "regime": "direct"})
>>> low = lower(s, lanes(s, 1))
>>> len(low.ops), low.lanes   # one memcpy per block, one lane per rank
(4, 2)
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Sequence

from purlin.errors import ScheduleError
from purlin.snac.ir import Copy, Notify, Ref, Schedule, Wait
from purlin.snac.walk import SIGNAL_KEY, bursts

COPY_ENGINE = "ce"


@dataclass(frozen=True)
class Memcpy:
    """One copy on lane ``lane``, started once every op in ``after`` (earlier ops on other
    lanes) has finished and every earlier op of its own lane has."""

    lane: int
    src: Ref
    dst: Ref
    nbytes: int
    after: tuple[int, ...]


@dataclass(frozen=True)
class Lowered:
    """A Schedule as memcpys in one enqueue order (a topological order), on ``lanes``
    streams; ``recorded``: the ops some other lane waits for (an event each)."""

    ops: tuple[Memcpy, ...]
    lanes: int
    recorded: frozenset[int]


def uses_copy_engines(s: Schedule) -> bool:
    """Whether any Copy of ``s`` names the copy engine Atom."""
    return any(type(ins) is Copy and ins.atom == COPY_ENGINE for p in s.programs for ins in p.instrs)


def lanes(s: Schedule, per_rank: int) -> list[int]:
    """A lane for each program: its rank's copying programs dealt round-robin over
    ``per_rank`` lanes of that rank (a program with no Copy gets its rank's first)."""
    if per_rank < 1:
        raise ValueError(f"per_rank {per_rank}: at least one lane a rank")
    seen: dict[int, int] = {}
    out = []
    for p in s.programs:
        if any(type(ins) is Copy for ins in p.instrs):
            i = seen.get(p.rank, 0)
            seen[p.rank] = i + 1
            out.append(p.rank * per_rank + i % per_rank)
        else:
            out.append(p.rank * per_rank)
    return out


def lower(s: Schedule, lane_of: Sequence[int]) -> Lowered:
    """The memcpys of ``s`` with the order its Waits impose, program ``k`` on lane
    ``lane_of[k]``. ScheduleError names the first instruction a copy engine cannot run;
    Deadlock (from the walk) a Wait no Notify meets."""
    if len(lane_of) != len(s.programs):
        raise ValueError(f"lane_of has {len(lane_of)} entries for {len(s.programs)} programs")
    progs = s.programs
    ops: list[Memcpy] = []
    front: list[tuple[int, ...]] = [()] * len(progs)   # ops a program's next op must follow
    notes: dict[int, tuple[list[int], list[tuple[int, ...]]]] = {}   # flag -> values, fronts
    for k, i0, i1 in bursts(s):
        p = progs[k]
        lane = lane_of[k]
        for i in range(i0, i1):
            ins = p.instrs[i]
            t = type(ins)
            if t is Copy and ins.atom == COPY_ENGINE:
                after = tuple(sorted(o for o in front[k] if ops[o].lane != lane))
                for d in ins.dsts:
                    ops.append(Memcpy(lane, ins.src, d, ins.nbytes, after))
                    after = ()   # the lane orders the later ones
                front[k] = (len(ops) - 1,)
            elif t is Wait:
                met = set(front[k])
                for sig in ins.signals:
                    values, fronts = notes[p.rank * SIGNAL_KEY + sig]   # the walk met it
                    met.update(fronts[_first_at_least(values, ins.value)])
                front[k] = _latest_per_lane(met, ops)
            elif t is Notify:
                for peer, sig in zip(ins.peers, ins.signals):
                    values, fronts = notes.setdefault(peer * SIGNAL_KEY + sig, ([], []))
                    values.append(ins.value)
                    fronts.append(front[k])
            else:
                what = f"a Copy with atom {ins.atom!r}" if t is Copy else f"a {t.__name__}"
                raise ScheduleError(
                    f"rank {p.rank} CTA {p.cta} instruction {i} is {what}: a schedule with copy-engine "
                    f"(atom 'ce') Copies runs on the copy engines as a whole, and they only copy; "
                    f"plan every Copy with atom 'ce' and no Reduce or packets, or use atom 'sm'")
    recorded = frozenset(o for op in ops for o in op.after)
    return Lowered(tuple(ops), max(lane_of, default=-1) + 1, recorded)


def _first_at_least(values: list[int], v: int) -> int:
    """Index of the first Notify whose value reaches ``v`` (values rise per writer)."""
    for j, x in enumerate(values):
        if x >= v:
            return j
    raise AssertionError("the walk met a Wait that no Notify reaches")


def _latest_per_lane(ops_ids: set[int], ops: list[Memcpy]) -> tuple[int, ...]:
    """The same wait set, smaller: a lane runs its ops in order, so its latest covers the rest."""
    last: dict[int, int] = {}
    for o in ops_ids:
        lane = ops[o].lane
        if last.get(lane, -1) < o:
            last[lane] = o
    return tuple(sorted(last.values()))


def replay(low: Lowered, copy: Callable[[Memcpy], None], seed: int | None = None) -> list[int]:
    """Run ``low`` as the GPU may: each step runs the head op of some lane whose waits have
    finished (a random one under ``seed``, else the enqueue order). ``copy`` does the
    bytes. Returns the order run (op indices)."""
    rng = random.Random(seed) if seed is not None else None
    queues: list[list[int]] = [[] for _ in range(low.lanes)]
    for o, op in enumerate(low.ops):
        queues[op.lane].append(o)
    heads = [0] * low.lanes
    done = [False] * len(low.ops)
    order: list[int] = []
    while len(order) < len(low.ops):
        ready = [q for q in range(low.lanes) if heads[q] < len(queues[q])
                 and all(done[a] for a in low.ops[queues[q][heads[q]]].after)]
        if not ready:
            raise AssertionError("lowered ops wait in a cycle")
        q = rng.choice(ready) if rng else min(ready, key=lambda q: queues[q][heads[q]])
        o = queues[q][heads[q]]
        heads[q] += 1
        copy(low.ops[o])
        done[o] = True
        order.append(o)
    return order


class CopyEngineCall:
    """A lowered schedule bound to buffer pointers, as a function of the caller's raw
    stream: fork into the lanes, each memcpy after its events, join back. Outside a
    capture the whole call is one CUDA graph, built at the first such call (one launch,
    not a memcpy and its events each); inside one, the ops are captured as they are
    enqueued. ``ptr(ref)`` is a Ref's device address; ``lane_device[l]`` lane l's GPU;
    ``home`` the GPU of the caller's stream (an event is recorded on its own GPU's streams)."""

    def __init__(self, cp, low: Lowered, ptr: Callable[[Ref], int], lane_device: Sequence[int], home: int):
        rt = cp.cuda.runtime
        self.cp, self.rt = cp, rt
        self.devices = list(lane_device)
        used = sorted({op.lane for op in low.ops})
        self.streams: dict[int, object] = {}
        self.events: dict[int, object] = {}
        for lane in used:
            with cp.cuda.Device(self.devices[lane]):
                self.streams[lane] = cp.cuda.Stream(non_blocking=True)
        with cp.cuda.Device(home):
            self.fork = cp.cuda.Event(disable_timing=True)
        for o in sorted(low.recorded):
            with cp.cuda.Device(self.devices[low.ops[o].lane]):
                self.events[o] = cp.cuda.Event(disable_timing=True)
        self.joins = []
        for lane in used:
            with cp.cuda.Device(self.devices[lane]):
                self.joins.append((self.devices[lane], self.streams[lane].ptr, cp.cuda.Event(disable_timing=True)))
        kind = rt.memcpyDefault
        self.steps = [(self.devices[op.lane], self.streams[op.lane].ptr, ptr(op.dst), ptr(op.src), op.nbytes, kind,
                       tuple(self.events[a].ptr for a in op.after),
                       self.events[o].ptr if o in self.events else 0)
                      for o, op in enumerate(low.ops)]
        self.graph = None

    def enqueue(self, stream: int) -> None:
        """Enqueue the call's ops on ``stream`` (captured if it is capturing)."""
        rt = self.rt
        home = rt.getDevice()
        rt.eventRecord(self.fork.ptr, stream)
        dev = home
        for d, s, _ in self.joins:
            if d != dev:
                rt.setDevice(d)
                dev = d
            rt.streamWaitEvent(s, self.fork.ptr, 0)
        memcpy, wait, record = rt.memcpyAsync, rt.streamWaitEvent, rt.eventRecord
        for d, s, dst, src, n, kind, after, ev in self.steps:
            if d != dev:
                rt.setDevice(d)
                dev = d
            for e in after:
                wait(s, e, 0)
            memcpy(dst, src, n, kind, s)
            if ev:
                record(ev, s)
        for d, s, e in self.joins:
            if d != dev:
                rt.setDevice(d)
                dev = d
            record(e.ptr, s)
        if dev != home:
            rt.setDevice(home)
        for _, _, e in self.joins:
            wait(stream, e.ptr, 0)

    def __call__(self, stream: int) -> None:
        rt = self.rt
        if rt.streamIsCapturing(stream):
            self.enqueue(stream)
            return
        if self.graph is None:
            private = self.cp.cuda.Stream(non_blocking=True)
            private.begin_capture()
            try:
                self.enqueue(private.ptr)
            finally:
                graph = private.end_capture()
            self.graph, self._private, self._callers = graph, private, {}
        caller = self._callers.get(stream)
        if caller is None:   # cupy launches (and, in newer versions, instantiates) on a Stream
            if len(self._callers) >= 64:
                self._callers.clear()
            caller = self._callers[stream] = self.cp.cuda.ExternalStream(stream)
        self.graph.launch(caller)


def bind(cp, low: Lowered, ins: Sequence, outs: Sequence, staging: Sequence, device_of: Callable[[int], int],
         per_rank: int) -> CopyEngineCall:
    """``low`` over these per-rank Buffers (``.ptr``) and staging arrays (half 0: calls
    never overlap), lane ``l`` on the GPU of rank ``l // per_rank``, the caller's stream on
    rank 0's."""
    def ptr(ref: Ref) -> int:
        if ref.buffer == "staging":
            return staging[ref.rank].data.ptr + ref.offset
        if ref.buffer not in ("input", "output"):
            raise ScheduleError(f"{ref}: a copy-engine Copy moves input, output and staging bytes, "
                                f"not {ref.buffer}")
        return (ins if ref.buffer == "input" else outs)[ref.rank].ptr + ref.offset
    return CopyEngineCall(cp, low, ptr, [device_of(lane // per_rank) for lane in range(low.lanes)], device_of(0))
