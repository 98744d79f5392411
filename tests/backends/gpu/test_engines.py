"""Copy-engine schedules lowered to memcpys and events (the CPU half of
purlin/backends/gpu/engines.py): replayed on host buffers in every order the events
allow, the bytes are the oracle's; a missing edge shows; what cannot run is refused."""
import numpy as np
import pytest

from purlin.backends.gpu.engines import Lowered, Memcpy, lanes, lower, replay, uses_copy_engines
from purlin.errors import Deadlock, PlanError, ScheduleError
from purlin.snac import plan
from purlin.snac.ir import Copy, Notify, Program, Ref, Schedule, Wait
from purlin.spec import evaluate, library
from tests.helpers import random_inputs

TOPO = "h200-loopback"


def _run(s: Schedule, low: Lowered, inputs, seed):
    """Replay ``low`` on host buffers (staging: half 0 of each rank) -> outputs."""
    c = s.collective
    bufs = {}
    for r in range(c.world):
        bufs[(r, "input")] = np.frombuffer(inputs[r].tobytes(), np.uint8).copy()
        bufs[(r, "output")] = np.full(c.output.nbytes(r), 0xEE, np.uint8)
        bufs[(r, "staging")] = np.full(max(s.staging_nbytes, 1), 0xDD, np.uint8)

    def copy(op: Memcpy):
        src = bufs[(op.src.rank, op.src.buffer)][op.src.offset:op.src.offset + op.nbytes]
        bufs[(op.dst.rank, op.dst.buffer)][op.dst.offset:op.dst.offset + op.nbytes] = src
    replay(low, copy, seed)
    return [bufs[(r, "output")] for r in range(c.world)]


CASES = [("all_to_all", 4, 4096, {"regime": "direct"}),
         ("all_gather", 4, 4096, {"regime": "direct"}),
         ("all_to_all", 4, 8192, {"regime": "throughput", "chunk_nbytes": 512, "staging_nbytes": 2048}),
         ("all_gather", 3, 6144, {"regime": "throughput", "chunk_nbytes": 256, "staging_nbytes": 1024}),
         ("broadcast", 4, 4096, {"regime": "throughput", "chunk_nbytes": 256, "staging_nbytes": 1024}),
         ("all_gather_v", 4, 5000, {"regime": "throughput", "chunk_nbytes": 256, "staging_nbytes": 1024}),
         ("all_to_all_v", 4, 5000, {"regime": "direct"})]


@pytest.mark.parametrize("name,world,size,policy", CASES)
def test_every_order_the_events_allow_gives_the_oracles_bytes(name, world, size, policy):
    c = library.from_size(name, world, size, seed=3)
    s = plan(c, TOPO, {**policy, "atom": "ce"})
    assert uses_copy_engines(s)
    low = lower(s, lanes(s, 2))
    # one memcpy per (Copy, destination)
    assert len(low.ops) == sum(len(i.dsts) for p in s.programs for i in p.instrs if type(i) is Copy)
    inputs = random_inputs(c, np.random.default_rng(1))
    want = evaluate(c, inputs)
    for seed in [None, *range(12)]:
        got = _run(s, low, inputs, seed)
        for r in range(world):
            assert bytes(got[r]) == bytes(want[r]), (seed, r)


def test_a_missing_edge_shows_in_some_order():
    """The replay is a real check: drop the waits of every op that reads staging, and some
    order reads a relay slot before it is written (or after it is reused)."""
    c = library.from_size("all_to_all", 4, 8192, seed=3)
    s = plan(c, TOPO, {"regime": "throughput", "chunk_nbytes": 512, "staging_nbytes": 2048, "atom": "ce"})
    low = lower(s, lanes(s, 2))
    cut = Lowered(tuple(Memcpy(o.lane, o.src, o.dst, o.nbytes, () if o.src.buffer == "staging" else o.after)
                        for o in low.ops), low.lanes, low.recorded)
    assert cut.ops != low.ops
    inputs = random_inputs(c, np.random.default_rng(1))
    want = evaluate(c, inputs)
    wrong = sum(any(bytes(g) != bytes(w) for g, w in zip(_run(s, cut, inputs, seed), want)) for seed in range(12))
    assert wrong > 0


def test_events_name_other_lanes_only_and_the_latest_of_each():
    c = library.from_size("all_to_all", 4, 8192, seed=3)
    s = plan(c, TOPO, {"regime": "throughput", "chunk_nbytes": 512, "staging_nbytes": 2048, "atom": "ce"})
    low = lower(s, lanes(s, 2))
    assert low.lanes == 8
    for i, op in enumerate(low.ops):
        assert all(a < i and low.ops[a].lane != op.lane for a in op.after)
        assert len({low.ops[a].lane for a in op.after}) == len(op.after)   # one per lane
    assert low.recorded == {a for op in low.ops for a in op.after}


def test_lanes_deal_each_ranks_copying_programs_round_robin():
    c = library.from_size("all_gather", 2, 1024)
    progs = (Program(0, 0, "a", (Copy(Ref(0, "input", 0), (Ref(0, "output", 0),), 16, "ce"),)),
             Program(0, 1, "b", (Notify(1, 0, 1),)),
             Program(0, 2, "c", (Copy(Ref(0, "input", 0), (Ref(0, "output", 16),), 16, "ce"),)),
             Program(0, 3, "d", (Copy(Ref(0, "input", 0), (Ref(0, "output", 32),), 16, "ce"),)),
             Program(1, 0, "e", (Wait(0, 1), Copy(Ref(1, "input", 0), (Ref(1, "output", 0),), 16, "ce"))))
    s = Schedule(c, progs, 0, 0, 1, 2)
    assert lanes(s, 2) == [0, 0, 1, 0, 2]
    low = lower(s, lanes(s, 2))
    # the Notify carries nothing before it: rank 1's copy waits for no op
    assert [op.after for op in low.ops] == [(), (), (), ()]
    with pytest.raises(ValueError, match="at least one lane"):
        lanes(s, 0)


def test_a_wait_follows_the_copies_before_the_notify_that_meets_it():
    c = library.from_size("all_gather", 2, 1024)
    cp = lambda r, off: Copy(Ref(r, "input", 0), (Ref(r, "output", off),), 16, "ce")
    progs = (Program(0, 0, "a", (cp(0, 0), Notify(1, 0, 1), cp(0, 16), Notify(1, 0, 2))),
             Program(1, 0, "b", (Wait(0, 2), cp(1, 0))),
             Program(1, 1, "c", (Wait(0, 1), cp(1, 16))))
    low = lower(Schedule(c, progs, 0, 0, 1, 3), [0, 1, 2])
    by_dst = {(op.dst.rank, op.dst.offset): op for op in low.ops}
    first, second = by_dst[(0, 0)], by_dst[(0, 16)]
    assert by_dst[(1, 0)].after == (low.ops.index(second),)   # value 2: after both copies
    assert by_dst[(1, 16)].after == (low.ops.index(first),)   # value 1: after the first


def test_what_a_copy_engine_cannot_run_is_refused_by_name():
    c = library.from_size("all_gather", 2, 1024)
    progs = (Program(0, 0, "a", (Copy(Ref(0, "input", 0), (Ref(0, "output", 0),), 16, "ce"),)),
             Program(1, 0, "b", (Copy(Ref(1, "input", 0), (Ref(1, "output", 0),), 16, "sm"),)))
    s = Schedule(c, progs, 0, 0, 1, 2)
    with pytest.raises(ScheduleError, match=r"rank 1 CTA 0 instruction 0 is a Copy with atom 'sm'.*"
                                            r"use atom 'sm'"):
        lower(s, [0, 1])
    mixed = plan(library.from_size("all_gather", 4, 1 << 16), TOPO, {"regime": "latency", "atom": "ce"})
    with pytest.raises(ScheduleError, match="is a (PutPackets|WaitPackets)"):
        lower(mixed, lanes(mixed, 1))
    with pytest.raises(PlanError, match="policy.atom 'ce': all_reduce reduces, and a copy engine only copies"):
        plan(library.from_size("all_reduce", 4, 4096), TOPO, {"atom": "ce"})


def test_a_wait_no_notify_meets_is_a_deadlock_before_anything_runs():
    c = library.from_size("all_gather", 2, 1024)
    progs = (Program(0, 0, "a", (Wait(0, 1), Copy(Ref(0, "input", 0), (Ref(0, "output", 0),), 16, "ce"))),)
    with pytest.raises(Deadlock, match="rank 0"):
        lower(Schedule(c, progs, 0, 0, 1, 2), [0])


def test_a_schedule_without_copy_engine_copies_is_not_lowered():
    s = plan(library.from_size("all_gather", 4, 4096), TOPO, {"regime": "direct"})
    assert not uses_copy_engines(s)


# ---- the host half (CopyEngineCall) against a model of streams and events -------------------

class _Gpu:
    """Enough of cupy for CopyEngineCall, over a model of CUDA streams and events: each
    stream a queue, eventRecord marks a point in one, streamWaitEvent waits for the latest
    record made before it was called; stream capture records calls into a graph that a
    launch replays onto the launching stream. ``run(seed)`` drains the queues in a random
    order they allow, memcpys moving bytes of one host heap (pointers are heap offsets)."""

    def __init__(self, heap_nbytes: int):
        self.heap = np.zeros(heap_nbytes, np.uint8)
        self.top = 256
        self.queues: dict[int, list] = {}
        self.latest: dict[int, object] = {}   # event -> its latest record (a token)
        self.done: set = set()
        self.capturing: dict[int, list] = {}  # stream -> the calls it captures
        self.captures = self.launches = 0
        self.ids = iter(range(1 << 20, 1 << 30, 8))
        gpu = self

        class Runtime:
            memcpyDefault = 4

            @staticmethod
            def getDevice():
                return 0

            @staticmethod
            def setDevice(d):
                assert d == 0

            @staticmethod
            def streamIsCapturing(s):
                return s in gpu.capturing

            @staticmethod
            def eventRecord(e, s):
                gpu._call(s, ("rec", e))

            @staticmethod
            def streamWaitEvent(s, e, flags):
                gpu._call(s, ("wait", e))

            @staticmethod
            def memcpyAsync(dst, src, n, kind, s):
                assert kind == 4
                gpu._call(s, ("copy", dst, src, n))

        class Stream:
            def __init__(self, non_blocking=False, ptr=None):
                self.ptr = next(gpu.ids) if ptr is None else ptr

            def begin_capture(self):
                gpu.capturing[self.ptr] = []
                gpu.captures += 1

            def end_capture(self):
                return Graph(self.ptr, gpu.capturing.pop(self.ptr))

        class Graph:
            def __init__(self, home, calls):
                self.home, self.calls = home, calls

            def launch(self, stream):
                gpu.launches += 1
                for s, item in self.calls:
                    gpu._apply(stream.ptr if s == self.home else s, item)

        class Event:
            def __init__(self, disable_timing=False):
                self.ptr = next(gpu.ids)

        class Device:
            def __init__(self, d=0):
                pass

            def __enter__(self):
                return self

            def __exit__(self, *a):
                return False

        class Cuda:
            runtime = Runtime
            ExternalStream = staticmethod(lambda p: Stream(ptr=p))
        Cuda.Stream, Cuda.Event, Cuda.Device = Stream, Event, Device

        class Cp:
            cuda = Cuda
        self.cp = Cp

    def alloc(self, nbytes: int):
        class Buf:
            pass
        b = Buf()
        b.ptr = self.top
        b.data = b
        self.top += (nbytes + 255) // 256 * 256 + 256
        return b

    def _call(self, s, item):
        for home, calls in self.capturing.items():
            # a capture takes the calls of its stream and of every stream that joined it by
            # waiting on an event recorded inside it
            joined = s == home or any(x == s for x, _ in calls)
            if joined or (item[0] == "wait" and any(c == ("rec", item[1]) for _, c in calls)):
                calls.append((s, item))
                return
        self._apply(s, item)

    def _apply(self, s, item):
        if item[0] == "rec":
            token = object()
            self.latest[item[1]] = token
            self.queues.setdefault(s, []).append(("rec", token))
        elif item[0] == "wait":
            self.queues.setdefault(s, []).append(("wait", self.latest.get(item[1])))
        else:
            self.queues.setdefault(s, []).append(item)

    def run(self, seed):
        rng = np.random.default_rng(seed)
        while any(self.queues.values()):
            ready = [s for s, q in self.queues.items() if q and (q[0][0] != "wait" or q[0][1] is None
                                                                or q[0][1] in self.done)]
            assert ready, "streams wait in a cycle"
            q = self.queues[ready[rng.integers(len(ready))]]
            item = q.pop(0)
            if item[0] == "rec":
                self.done.add(item[1])
            elif item[0] == "copy":
                _, dst, src, n = item
                self.heap[dst:dst + n] = self.heap[src:src + n]


@pytest.mark.parametrize("name,world,size,policy", CASES[2:5])
def test_the_host_half_orders_a_call_as_the_lowering_says(name, world, size, policy):
    """CopyEngineCall on a model of streams and events: three eager calls (the first
    builds one graph, every call launches it) and one into a caller's capture, each
    drained in random orders, give the oracle's bytes; the caller's stream waits for all."""
    from purlin.backends.gpu.engines import bind
    c = library.from_size(name, world, size, seed=3)
    s = plan(c, TOPO, {**policy, "atom": "ce"})
    low = lower(s, lanes(s, 2))
    gpu = _Gpu(1 << 20)
    snap = gpu.alloc(c.output.nbytes(0))   # the caller's next work copies rank 0's output here
    ins = [gpu.alloc(c.input.nbytes(r)) for r in range(world)]
    outs = [gpu.alloc(c.output.nbytes(r)) for r in range(world)]
    staging = [gpu.alloc(s.staging_nbytes) for r in range(world)]
    call = bind(gpu.cp, low, ins, outs, staging, lambda r: 0, 2)
    caller = gpu.cp.cuda.Stream()
    inputs = random_inputs(c, np.random.default_rng(5))
    want = evaluate(c, inputs)
    fresh = [gpu.alloc(c.input.nbytes(r)) for r in range(world)]   # the caller writes inputs from here
    for r in range(world):
        gpu.heap[fresh[r].ptr:fresh[r].ptr + c.input.nbytes(r)] = np.frombuffer(inputs[r].tobytes(), np.uint8)
    for k in range(4):
        for r in range(world):   # stale inputs, then the caller's stream writes the real ones
            gpu.heap[ins[r].ptr:ins[r].ptr + c.input.nbytes(r)] = 0x11
            gpu.heap[outs[r].ptr:outs[r].ptr + c.output.nbytes(r)] = 0xEE
            gpu.cp.cuda.runtime.memcpyAsync(ins[r].ptr, fresh[r].ptr, c.input.nbytes(r), 4, caller.ptr)
        if k < 3:
            call(caller.ptr)
        else:   # the caller captures: the call's ops join its graph, run when it launches
            gpu.run(seed=k)   # the input writes are not part of the capture
            caller.begin_capture()
            call(caller.ptr)
            graph = caller.end_capture()
            assert all(not q for q in gpu.queues.values())
            graph.launch(caller)
        gpu.heap[snap.ptr:snap.ptr + c.output.nbytes(0)] = 0
        gpu.cp.cuda.runtime.memcpyAsync(snap.ptr, outs[0].ptr, c.output.nbytes(0), 4, caller.ptr)
        gpu.run(seed=k)
        for r in range(world):
            got = gpu.heap[outs[r].ptr:outs[r].ptr + c.output.nbytes(r)]
            assert bytes(got) == bytes(want[r]), (k, r)
        assert bytes(gpu.heap[snap.ptr:snap.ptr + c.output.nbytes(0)]) == bytes(want[0])   # it waited
    assert gpu.captures == 2 and gpu.launches == 4   # one graph of the call's own, one the caller's
