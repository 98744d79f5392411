"""Worlds: where the ranks of a collective live, and the collective calls on them.

A :class:`World` plans a collective (cached), encodes the Schedule once per digest, binds
it to the caller's buffers once per pointer set, and from then on a call is one launch
of pre-packed arguments on the caller's stream. Subclasses say where ranks are:

- :class:`LoopbackWorld`: W virtual ranks on one GPU, one launch split across ranks;
- :class:`PeerWorld`: one process, one GPU per rank (peer access), one launch per rank;
- :class:`purlin.backends.gpu.ipc.IpcWorld`: one process per rank under torchrun.

Every call is stream-ordered and captures into CUDA graphs: the epoch lives in device
memory and CTA 0 of a launch moves it on once every CTA has read it, so replays need no
host work and nothing is ever cleared. A Schedule the world did not plan is verified once per digest before
its first launch. A Wait that outlives ``timeout_s`` stops the launch and records where;
:meth:`World.synchronize` (or :meth:`World.check`) raises :class:`purlin.errors.Deadlock`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from purlin.backends.gpu import arrays, engines, kernels
from purlin.backends.gpu.calls import Collectives
from purlin.backends.gpu.encode import Encoded, encode
from purlin.backends.gpu.identity import ByIdentity
from purlin.backends.gpu.launch import (MAX_TABLES, Launcher, Scratch, buffer_key, current_stream,
                                        describe_watchdog)
from purlin.errors import Deadlock, PlanError, PurlinError, ScheduleError, SpecError
from purlin.snac.ir import Schedule
from purlin.snac.serialize import digest
from purlin.spec.collective import Collective

#: the kernels a plan may run on (all its CTAs co-resident on any of them)
INTERPRETERS = ("snac_run", "snac_run_pkt", "snac_run_any")


@dataclass
class Plan:
    """A Schedule encoded and uploaded to one or more devices."""

    id: int
    schedule: Schedule
    digest: str
    enc: Encoded
    device_arrays: dict      # device -> (code, refs, progs) cupy arrays
    lowered: engines.Lowered | None = None   # a copy-engine plan: its memcpys (no kernel)


@dataclass
class Bound:
    """A plan bound to one set of buffers: ``go(stream)`` launches it."""

    plan: Plan
    go: Callable[[int], None]
    torch: bool
    device: int


class World(Collectives):
    """Planning, binding, safety checks and the library calls, common to every world.

    Parameters
    ----------
    world : int
        Number of ranks.
    topology, policy
        Passed to :func:`purlin.snac.plan` (policy may be overridden per call).
    timeout_s : float
        Watchdog: a Wait or WaitPackets spinning longer than this stops the launch.
    """

    #: ranks whose buffers this process passes (all for loopback, one for IPC)
    local_ranks: tuple[int, ...] = ()
    #: every rank on one GPU: signals and packets need only GPU scope (cheaper than system)
    one_gpu: bool = False
    #: kernel flags for one_gpu worlds (bit 0 signals, bit 1 packet stores at GPU scope)
    gpu_scope_flags: int = 3
    #: streams a rank's copy-engine programs are dealt over (see :mod:`engines`)
    copy_lanes: int = 4

    def __init__(self, world: int, *, topology=None, policy=None, timeout_s: float = 2.0):
        from purlin.topology import resolve_topology, topology_digest
        self.cp = kernels.cupy()
        self.world = world
        self.topology = resolve_topology(topology, world)
        self._topology_digest = topology_digest(self.topology)
        self.policy = policy
        self.timeout_ns = int(timeout_s * 1e9)
        self.timeout_s = timeout_s
        self._schedules: dict[Any, Schedule] = {}
        self._by_id: dict[tuple, tuple] = {}      # (id(collective), policy) -> (collective, schedule)
        self._plans: dict[str, Plan] = {}       # schedule digest -> plan
        self._plan_list: list[Plan] = []
        self._verified: set[str] = set()        # digests planned here or verified once
        self._bound: dict[tuple, Bound] = {}    # (digest, buffer keys) -> bound call
        self._lib: dict[tuple, Bound] = {}      # (library call, buffer keys) -> bound call
        self._ids = ByIdentity(MAX_TABLES)      # the same, found by the buffer objects themselves
        self._last: Bound | None = None
        self._tracing: dict | None = None       # device -> trace buffer while trace() runs
        self.broken: str | None = None

    # ---- to implement -------------------------------------------------------------------
    @property
    def cta_budget(self) -> int:
        """CTAs per rank the planner may use so that every CTA of a call is co-resident."""
        raise NotImplementedError

    def _bind_launch(self, plan: Plan, ins: list, outs: list) -> Callable[[int], None]:
        """The launch of ``plan`` on these Buffers, as a function of the raw stream."""
        raise NotImplementedError

    def _devices(self) -> list[int]:
        raise NotImplementedError

    def _device_of(self, rank: int) -> int:
        raise NotImplementedError

    def _error_buffers(self) -> list:
        raise NotImplementedError

    def _ctas_per_device(self, p: Plan) -> dict[int, int]:
        raise NotImplementedError

    def _per_rank(self, xs, what) -> list:
        raise NotImplementedError

    def _unpack(self, objs: list):
        raise NotImplementedError

    def _alloc(self, rank: int, nbytes: int):
        raise NotImplementedError

    # ---- planning ---------------------------------------------------------------------------
    def plan(self, collective: Collective, policy=None) -> Schedule:
        """The Schedule this world runs for ``collective`` (planned once, then cached)."""
        from purlin.snac import Policy, plan as snac_plan
        pol = policy if policy is not None else self.policy
        if isinstance(pol, dict):
            pol = Policy.from_dict(pol)
        key = (collective, pol)
        s = self._schedules.get(key)
        if s is None:
            s = snac_plan(collective, topology=self.topology, policy=pol, cta_budget=self.cta_budget)
            self._schedules[key] = s
            self._verified.add(digest(s))   # the planner verified it
        return s

    def _schedule(self, what, policy) -> Schedule:
        if isinstance(what, Schedule):
            return what
        hit = self._by_id.get((id(what), id(policy)))
        if hit is not None and hit[0] is what and hit[1] is policy:
            return hit[2]
        s = self.plan(what, policy)
        self._by_id[(id(what), id(policy))] = (what, policy, s)   # holds both: ids stay theirs
        return s

    def prepare(self, schedule: Schedule, verify: bool = True) -> Plan:
        """Encode and upload ``schedule`` (once per digest); a Schedule this world did not
        plan is verified first (once per digest; ``verify=False`` skips it)."""
        if schedule.world != self.world:
            raise SpecError(f"schedule for {schedule.world} ranks given to a world of {self.world}")
        ref = schedule.topology
        if ref is not None and ref.digest != self._topology_digest:
            raise ScheduleError(
                f"the schedule was planned for topology {ref.name} (digest {ref.digest}), but this "
                f"world runs {self.topology.name} (digest {self._topology_digest}): plan it with "
                f"this world's plan(), or build the world with topology= the one it was planned for")
        d = digest(schedule)   # cached on the schedule
        if verify and d not in self._verified:
            from purlin.snac.verify import verify as verify_schedule
            verify_schedule(schedule)
            self._verified.add(d)
        p = self._plans.get(d)
        if p is None:
            self._no_capture("upload a new plan")
            enc = encode(schedule)
            arrays_by_dev = {}
            for dev in sorted(set(self._devices())):
                with self.cp.cuda.Device(dev):
                    arrays_by_dev[dev] = (self.cp.asarray(enc.code), self.cp.asarray(enc.refs),
                                          self.cp.asarray(enc.progs))
                    # uploaded on the current stream; a later call may use another stream
                    self.cp.cuda.get_current_stream().synchronize()
            low = (engines.lower(schedule, engines.lanes(schedule, self.copy_lanes))
                   if engines.uses_copy_engines(schedule) else None)
            p = Plan(len(self._plan_list), schedule, d, enc, arrays_by_dev, low)
            if low is None:   # a copy-engine plan launches no CTA
                self._check_resident(p)
            self._plans[d] = p
            self._plan_list.append(p)
        return p

    def _check_resident(self, p: Plan) -> None:
        for dev, n in self._ctas_per_device(p).items():
            k = kernels.for_device(dev)
            name = k.interpreter(p.enc.uses_packets, p.enc.uses_tma, p.enc.unaligned)
            if n > k.max_ctas(name):
                raise PlanError(f"plan needs {n} CTAs at once on GPU {dev} ({k.name}), which holds "
                                f"{k.max_ctas(name)} co-resident ({k.sm_count} SMs x "
                                f"{k.blocks_per_sm[name]}); plan with cta_budget <= {self.cta_budget}")

    # ---- running ----------------------------------------------------------------------------
    def run(self, what: Collective | Schedule, inputs, outputs=None, *, policy=None, stream=None,
            verify: bool = True):
        """Run a collective (planned here) or a Schedule on ``inputs``; returns ``outputs``
        (allocated as uint8 arrays when not given). Stream-ordered, asynchronous. The
        first call with a set of buffers checks them and binds the plan; later calls with
        the same buffers only launch. ``verify=False`` skips verifying a Schedule this
        world did not plan (it is verified once per digest otherwise)."""
        if self.broken:
            raise Deadlock(f"this world stopped after a deadlock and must be rebuilt: {self.broken}")
        schedule = self._schedule(what, policy)
        fresh = outputs is None   # allocated here: a binding of its own, not worth keeping
        if fresh:
            outputs = self._unpack(self._alloc_outputs(schedule.collective))
        d = digest(schedule)
        objs = None if fresh or self._tracing else self._objects(inputs, outputs)
        b = None if objs is None else self._ids.get(d, objs)
        if b is None:
            sig = self._signature(inputs, outputs)
            key = (d, sig)
            b = self._bound.get(key)
            new = b is None or bool(self._tracing)
            if new:
                b = self._bind(schedule, inputs, outputs, verify)
                if not (self._tracing or fresh):
                    self._bound[key] = b
            if objs is not None and (new or self._ids.again(d, objs)):
                self._ids.put(d, objs, b, sig)
        self._last = b
        b.go(current_stream(stream, b.torch, b.device))
        return outputs

    def _fast(self, key: tuple, x, out, stream) -> bool:
        """Launch the library call bound for ``key`` and these buffers, if there is one."""
        if self.broken or self._tracing:
            return False
        objs = self._objects(x, out)
        b = self._ids.get(key, objs)
        if b is None:
            sig = self._signature(x, out)
            b = self._lib.get((key, sig))
            if b is None:
                return False
            if self._ids.again(key, objs):   # not new objects every call: worth an entry
                self._ids.put(key, objs, b, sig)
        b.go(current_stream(stream, b.torch, b.device))
        return True

    def _remember(self, key: tuple, x, out) -> None:
        if self._last is not None and not self._tracing:
            sig = self._signature(x, out)
            self._lib[(key, sig)] = self._last
            self._ids.put(key, self._objects(x, out), self._last, sig)

    def _objects(self, inputs, outputs) -> list:
        """This process's buffer objects of a call, inputs then outputs."""
        return [*self._per_rank(inputs, "inputs"), *self._per_rank(outputs, "outputs")]

    def _signature(self, inputs, outputs) -> tuple:
        ins = self._per_rank(inputs, "inputs")
        outs = self._per_rank(outputs, "outputs")
        return tuple(map(buffer_key, ins)) + tuple(map(buffer_key, outs))

    def _alloc_outputs(self, c: Collective) -> list:
        return [self._alloc(r, c.output.nbytes(r)) if c.output.nbytes(r) else None for r in self.local_ranks]

    def _bind(self, schedule: Schedule, inputs, outputs, verify: bool) -> Bound:
        """Check the buffers against the layout and bind ``schedule`` to them."""
        plan = self.prepare(schedule, verify)
        c = schedule.collective
        ins: list = [None] * self.world
        outs: list = [None] * self.world
        in_list, out_list = self._per_rank(inputs, "inputs"), self._per_rank(outputs, "outputs")
        for i, r in enumerate(self.local_ranks):
            ins[r] = self._check(in_list[i], c.input.nbytes(r), f"input of rank {r}", c, r)
            outs[r] = self._check(out_list[i], c.output.nbytes(r), f"output of rank {r}", c, r)
        if len(self._bound) + len(self._lib) > MAX_TABLES:
            self.synchronize()
            self._forget_bindings()
        go = self._bind_engines(plan, ins, outs) if plan.lowered else self._bind_launch(plan, ins, outs)
        torch = any(b is not None and b.is_torch for b in ins + outs)
        return Bound(plan, go, torch, self._device_of(self.local_ranks[0]))

    def _bind_engines(self, plan: Plan, ins: list, outs: list) -> Callable[[int], None]:
        if len(self.local_ranks) != self.world:
            raise ScheduleError(f"{type(self).__name__}: a copy-engine schedule (atom 'ce') runs as one "
                                f"process's memcpys and this process holds {len(self.local_ranks)} of "
                                f"{self.world} ranks; use a LoopbackWorld or PeerWorld, or atom 'sm'")
        self._grow(self.scratch, plan.enc)
        return engines.bind(self.cp, plan.lowered, ins, outs, [s.staging for s in self.scratch],
                            self._device_of, self.copy_lanes)

    def _check(self, x, need: int, what: str, c: Collective, rank: int):
        """A Buffer for one rank's argument (None when the layout needs no bytes there),
        after the checks a bound call rests on: size, element type, device, alignment."""
        if x is None:
            if need:
                raise SpecError(f"{c.name}: {what} is missing ({need} B expected)")
            return None
        b = arrays.as_buffer(x, what)
        if b.nbytes != need:
            raise SpecError(f"{c.name}: {what} has {b.nbytes} B, the layout needs {need} B")
        if b.dtype is not None and b.dtype != c.dtype.name:
            raise SpecError(f"{c.name}: {what} holds {b.dtype}, the collective is over {c.dtype.name} "
                            f"(pass {c.dtype.name} buffers, or raw bytes)")
        dev = self._device_of(rank)
        if need and b.device != dev:
            raise SpecError(f"{c.name}: {what} is on GPU {b.device}; rank {rank} runs on GPU {dev}")
        if b.ptr % c.dtype.itemsize:
            raise SpecError(f"{c.name}: {what} starts at {b.ptr:#x}, not on a {c.dtype.name} element "
                            f"boundary ({c.dtype.itemsize} B)")
        return b if need else None

    def _forget_bindings(self) -> None:
        """Drop bound calls and pointer tables (scratch moved, or too many tables)."""
        self._bound.clear()
        self._lib.clear()
        self._ids.clear()
        for launcher in self._launchers():
            launcher.tables.clear()

    def _launchers(self) -> list[Launcher]:
        raise NotImplementedError

    def trace(self, what: Collective | Schedule, inputs, outputs=None, *, policy=None,
              verify: bool = True) -> list:
        """Run once with a timestamp (``%globaltimer``) at the start and end of every
        instruction; returns :class:`purlin.trace.OpRecord` tuples in microseconds from
        the first instruction's start, the same form as the simulator's timeline. The
        timer ticks in steps of about 1 us on some GPUs, so short instructions read 0 or 1.
        ``verify`` as :meth:`run` (False for a Schedule that is no collective, such as a
        calibration microbenchmark)."""
        from purlin.trace import OpRecord
        self._no_capture("trace a call")
        schedule = self._schedule(what, policy)
        plan = self.prepare(schedule, verify)
        if plan.lowered:
            raise ScheduleError("trace times the SM interpreter's instructions, and a copy-engine "
                                "schedule (atom 'ce') runs as memcpys: time it with CUDA events")
        self.synchronize()
        bufs = {}
        for dev, (code, _, _) in plan.device_arrays.items():
            with self.cp.cuda.Device(dev):
                bufs[dev] = self.cp.zeros(2 * max(1, len(code)), self.cp.uint64)
        self._tracing = bufs
        try:
            self.run(schedule, inputs, outputs, verify=verify)
            self.synchronize()
        finally:
            self._tracing = None
        progs = {(p.rank, p.cta): p for p in schedule.programs}
        raw = []
        for dev, buf in bufs.items():
            times = buf.get().reshape(-1, 2)
            table = plan.device_arrays[dev][2].get().reshape(-1, 8)
            for first, count, rank, cta in table[:, :4]:
                prog = progs[(int(rank), int(cta))]
                spans: dict[int, list[int]] = {}   # instruction -> [first start, last end]
                for pc in range(int(first), int(first) + int(count)):
                    t0, t1 = (int(x) for x in times[pc])
                    if t0:   # 0: not reached (a stop after a timeout)
                        i = int(plan.enc.instr_of[pc])
                        span = spans.setdefault(i, [t0, t1])
                        span[0], span[1] = min(span[0], t0), max(span[1], t1)
                for i, (t0, t1) in spans.items():
                    raw.append((int(rank), int(cta), i, prog.instrs[i], t0, t1))
        base = min((r[4] for r in raw), default=0)
        return [OpRecord(rank, cta, i, type(ins).__name__, (t0 - base) / 1e3, (t1 - base) / 1e3,
                         getattr(ins, "nbytes", 0))
                for rank, cta, i, ins, t0, t1 in sorted(raw, key=lambda r: (r[0], r[1], r[2]))]

    def synchronize(self) -> None:
        """Wait for every call so far, then raise Deadlock if a Wait timed out."""
        for dev in sorted(set(self._devices())):
            with self.cp.cuda.Device(dev):
                self.cp.cuda.runtime.deviceSynchronize()
        self.check()

    def check(self) -> None:
        """Raise :class:`Deadlock` if a launch recorded a watchdog timeout (synchronizes)."""
        for err in self._error_buffers():
            rec = err[:12].get()
            if rec[0]:
                self.broken = describe_watchdog(rec, self._plan_list, self.timeout_s)
                self.stuck_s = (int(rec[11]) - int(rec[10])) / 1e9
                raise Deadlock(self.broken)

    def _no_capture(self, what: str) -> None:
        s = self.cp.cuda.get_current_stream()
        if s.is_capturing():
            raise PurlinError(f"cannot {what} while a CUDA graph is being captured: run each "
                              f"collective once before capturing (plans and buffers are cached)")

    def _grow(self, scratch: list[Scratch], enc: Encoded) -> None:
        """Grow scratch for ``enc`` (after every call so far); bound calls are dropped."""
        if all(s.fits(enc) for s in scratch):
            return
        self._no_capture("grow scratch buffers")
        for d in sorted(set(self._devices())):
            with self.cp.cuda.Device(d):
                self.cp.cuda.runtime.deviceSynchronize()
        for s in scratch:
            s.grow(enc)
        self._forget_bindings()


def _ptr(b: arrays.Buffer | None) -> int:
    return 0 if b is None else b.ptr


class LoopbackWorld(World):
    """W virtual ranks on one GPU: separate buffers per rank, one launch whose grid holds
    every rank's CTAs (all co-resident). Inputs and outputs are sequences of W arrays
    (None where a rank has no such buffer).

    Examples
    --------
    >>> w = LoopbackWorld(8)                                        # doctest: +SKIP
    >>> xs = [cupy.full(1024, r, cupy.float32) for r in range(8)]   # doctest: +SKIP
    >>> outs = [cupy.empty(1024, cupy.float32) for r in range(8)]   # doctest: +SKIP
    >>> w.all_reduce(xs, outs)                                      # doctest: +SKIP
    """

    one_gpu = True

    def __init__(self, world: int, *, device: int = 0, **kw):
        if kw.get("topology") is None:   # plan for W ranks sharing this GPU, not W GPUs
            from purlin.topology import loopback_for
            name = kernels.cupy().cuda.runtime.getDeviceProperties(device)["name"]
            kw["topology"] = loopback_for(name.decode() if isinstance(name, bytes) else name, world)
        super().__init__(world, **kw)
        self.device = device
        self.local_ranks = tuple(range(world))
        self.scratch = [Scratch(self.cp, device) for _ in range(world)]
        self.launcher = Launcher(self.cp, device)
        self.kernels = kernels.for_device(device)

    @property
    def cta_budget(self) -> int:
        """CTAs per rank in one call: every rank's CTAs share one GPU and must be co-resident."""
        return max(1, min(self.kernels.max_ctas(k) for k in INTERPRETERS) // self.world)

    def _devices(self) -> list[int]:
        return [self.device]

    def _device_of(self, rank: int) -> int:
        return self.device

    def _error_buffers(self) -> list:
        return [self.launcher.err]

    def _launchers(self) -> list[Launcher]:
        return [self.launcher]

    def _ctas_per_device(self, p: Plan) -> dict[int, int]:
        return {self.device: len(p.enc.progs)}

    def _per_rank(self, xs, what) -> list:
        if len(xs) != self.world:
            raise SpecError(f"{what}: {len(xs)} given for a loopback world of {self.world} ranks "
                            f"(pass one per rank, None where a rank has none)")
        return xs

    def _unpack(self, objs: list):
        return objs

    def _alloc(self, rank: int, nbytes: int):
        with self.cp.cuda.Device(self.device):
            return self.cp.empty(nbytes, self.cp.uint8)

    def _bind_launch(self, plan: Plan, ins, outs) -> Callable[[int], None]:
        self._grow(self.scratch, plan.enc)
        ptrs = []
        for r in range(self.world):
            ptrs += self.scratch[r].row(_ptr(ins[r]), _ptr(outs[r]))
        trace = self._tracing[self.device] if self._tracing else None
        launch = self.launcher.launch(plan, tuple(ptrs), self.scratch[0], 0, len(plan.enc.progs), self,
                                      lambda: self._no_capture("upload a pointer table for new buffers"), trace)
        cp, dev, get_device = self.cp, self.device, self.cp.cuda.runtime.getDevice

        def go(stream: int) -> None:
            if get_device() == dev:
                launch(stream)
            else:
                with cp.cuda.Device(dev):
                    launch(stream)
        return go
