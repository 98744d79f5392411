"""Worlds: where the ranks of a collective live, and the collective calls on them.

A :class:`World` plans a collective (cached), encodes the Schedule once per digest, and
launches the SNAC interpreter on the caller's stream. Subclasses say where ranks are:

- :class:`LoopbackWorld`: W virtual ranks on one GPU, one launch split across ranks;
- :class:`PeerWorld`: one process, one GPU per rank (peer access), one launch per rank;
- :class:`purlin.backends.gpu.ipc.IpcWorld`: one process per rank under torchrun.

Every call is stream-ordered and captures into CUDA graphs: the epoch lives in device
memory and the last CTA of a call moves it on, so replays need no host work and nothing
is ever cleared. A Wait that outlives ``timeout_s`` stops the launch and records where;
:meth:`World.synchronize` (or :meth:`World.check`) raises :class:`purlin.errors.Deadlock`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from purlin.backends.gpu import arrays, atomset, kernels
from purlin.backends.gpu.encode import BUF, NBUF, Encoded, encode
from purlin.errors import Deadlock, PlanError, PurlinError, ScheduleError, SpecError
from purlin.snac.ir import Schedule
from purlin.spec import library
from purlin.spec.collective import Collective
from purlin.spec.dtypes import dtype as _dtype

KIND = {1: "Wait", 2: "WaitPackets"}


@dataclass
class Plan:
    """A Schedule encoded and uploaded to one or more devices."""

    id: int
    schedule: Schedule
    digest: str
    enc: Encoded
    device_arrays: dict      # device -> (code, refs, progs) cupy arrays


class World:
    """Planning, the library calls and error checks, common to every world.

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
    #: device -> trace buffer while :meth:`trace` runs (None otherwise)
    _tracing: dict | None = None

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
        self._plans: dict[str, Plan] = {}       # schedule digest -> plan
        self._plan_list: list[Plan] = []
        self.broken: str | None = None

    # ---- to implement -------------------------------------------------------------------
    @property
    def cta_budget(self) -> int:
        """CTAs per rank the planner may use so that every CTA of a call is co-resident."""
        raise NotImplementedError

    def _launch(self, plan: Plan, ins: list, outs: list, stream) -> None:
        raise NotImplementedError

    def _devices(self) -> list[int]:
        raise NotImplementedError

    def _error_buffers(self) -> list:
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
        return s

    def prepare(self, schedule: Schedule) -> Plan:
        """Encode and upload ``schedule`` (once per digest)."""
        from purlin.snac.serialize import digest
        if schedule.world != self.world:
            raise SpecError(f"schedule for {schedule.world} ranks given to a world of {self.world}")
        ref = schedule.topology
        if ref is not None and ref.digest != self._topology_digest:
            raise ScheduleError(
                f"the schedule was planned for topology {ref.name} (digest {ref.digest}), but this "
                f"world runs {self.topology.name} (digest {self._topology_digest}): plan it with "
                f"this world's plan(), or build the world with topology= the one it was planned for")
        d = digest(schedule)   # cached on the schedule
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
            p = Plan(len(self._plan_list), schedule, d, enc, arrays_by_dev)
            self._check_resident(p)
            self._plans[d] = p
            self._plan_list.append(p)
        return p

    def _check_resident(self, p: Plan) -> None:
        for dev, n in self._ctas_per_device(p).items():
            k = kernels.for_device(dev)
            name = k.interpreter(p.enc.uses_packets, p.enc.uses_tma)
            if n > k.max_ctas(name):
                raise PlanError(f"plan needs {n} CTAs at once on GPU {dev} ({k.name}), which holds "
                                f"{k.max_ctas(name)} co-resident ({k.sm_count} SMs x "
                                f"{k.blocks_per_sm[name]}); plan with cta_budget <= {self.cta_budget}")

    def _ctas_per_device(self, p: Plan) -> dict[int, int]:
        raise NotImplementedError

    # ---- running ----------------------------------------------------------------------------
    def run(self, what: Collective | Schedule, inputs, outputs=None, *, policy=None, stream=None):
        """Run a collective (planned here) or a Schedule on ``inputs``; returns ``outputs``
        (allocated as uint8 cupy arrays when not given). Stream-ordered, asynchronous."""
        if self.broken:
            raise Deadlock(f"this world stopped after a deadlock and must be rebuilt: {self.broken}")
        schedule = what if isinstance(what, Schedule) else self.plan(what, policy)
        c = schedule.collective
        plan = self.prepare(schedule)
        ins, outs, out_objs = self._bind(c, inputs, outputs)
        self._launch(plan, ins, outs, self._stream(stream, ins + outs))
        return out_objs

    def trace(self, what: Collective | Schedule, inputs, outputs=None, *, policy=None) -> list:
        """Run once with a timestamp (``%globaltimer``) at the start and end of every
        instruction; returns :class:`purlin.trace.OpRecord` tuples in microseconds from
        the first instruction's start, the same form as the simulator's timeline. The
        timer ticks in steps of about 1 us on some GPUs, so short instructions read 0 or 1."""
        from purlin.trace import OpRecord
        self._no_capture("trace a call")
        schedule = what if isinstance(what, Schedule) else self.plan(what, policy)
        plan = self.prepare(schedule)
        self.synchronize()
        bufs = {}
        for dev, (code, _, _) in plan.device_arrays.items():
            with self.cp.cuda.Device(dev):
                bufs[dev] = self.cp.zeros(2 * max(1, len(code)), self.cp.uint64)
        self._tracing = bufs
        try:
            self.run(schedule, inputs, outputs)
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
                for i in range(int(count)):
                    t0, t1 = (int(x) for x in times[int(first) + i])
                    if t0:   # 0: not reached (a stop after a timeout)
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
            rec = err[:10].get()
            if rec[0]:
                self.broken = self._describe(rec)
                raise Deadlock(self.broken)

    def _describe(self, rec) -> str:
        _, rank, cta, pc, kind, where, want, seen, base, pid = (int(x) for x in rec)
        plan = self._plan_list[pid] if 0 <= pid < len(self._plan_list) else None
        name = plan.schedule.collective.name if plan else "?"
        what = KIND.get(kind, "spin")
        role = instr = ""
        if plan:
            for p in plan.schedule.programs:
                if p.rank == rank and p.cta == cta:
                    role = f" ({p.role})"
                    if 0 <= pc < len(p.instrs):
                        instr = f": {p.instrs[pc]}"
        if kind == 1:
            detail = (f"signal {where} is {seen}, waited for >= {want} (call base {base} + "
                      f"{want - base})")
        else:
            detail = (f"packet at payload offset {where} has tag {seen}, waited for {want} "
                      f"(low 32 bits of base {base} + {want - (base & 0xffffffff)})")
        return (f"{name}: rank {rank}, cta {cta}{role}, instr {pc}: {what} timed out after "
                f"{self.timeout_s:g} s: {detail}{instr}")

    # ---- buffers ------------------------------------------------------------------------
    def _bind(self, c: Collective, inputs, outputs):
        """Per rank (None where not local or empty): input and output Buffers."""
        ins: list = [None] * self.world
        outs: list = [None] * self.world
        in_list = self._per_rank(inputs, "inputs")
        out_list = self._per_rank(outputs, "outputs") if outputs is not None else None
        out_objs = []
        for i, r in enumerate(self.local_ranks):
            ins[r] = _bind_one(in_list[i], c.input.nbytes(r), f"input of rank {r}", c)
            need = c.output.nbytes(r)
            if out_list is None:
                y = self._alloc(r, need) if need else None
            else:
                y = out_list[i]
            outs[r] = _bind_one(y, need, f"output of rank {r}", c)
            out_objs.append(y)
        return ins, outs, self._unpack(out_objs)

    def _per_rank(self, xs, what) -> list:
        raise NotImplementedError

    def _unpack(self, objs: list):
        raise NotImplementedError

    def _alloc(self, rank: int, nbytes: int):
        raise NotImplementedError

    def _stream(self, stream, bufs):
        cp = self.cp
        if stream is None:
            if any(b is not None and b.is_torch for b in bufs):
                import torch
                return cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
            return cp.cuda.get_current_stream()
        if isinstance(stream, int):
            return cp.cuda.ExternalStream(stream)
        if hasattr(stream, "cuda_stream") and not hasattr(stream, "ptr"):   # torch.cuda.Stream
            return cp.cuda.ExternalStream(stream.cuda_stream)
        return stream

    def _no_capture(self, what: str) -> None:
        s = self.cp.cuda.get_current_stream()
        if s.is_capturing():
            raise PurlinError(f"cannot {what} while a CUDA graph is being captured: run each "
                              f"collective once before capturing (plans and buffers are cached)")

    # ---- the library collectives ------------------------------------------------------
    def _spec_dtype(self, bufs, dtype) -> str:
        if dtype is not None:
            return _dtype(dtype).name
        for b in bufs:
            if b is not None:
                bb = arrays.as_buffer(b)
                if bb.dtype is None:
                    raise SpecError(f"cannot tell the element type of {type(b).__name__}; pass dtype=")
                return bb.dtype
        raise SpecError("no buffer given to tell the element type; pass dtype=")

    def _first_nbytes(self, bufs) -> int:
        for b in bufs:
            if b is not None:
                return arrays.as_buffer(b).nbytes
        raise SpecError("no buffer given to tell the size")

    def _items(self, xs) -> list:
        return [x for x in self._per_rank(xs, "buffers")] if xs is not None else []

    def all_reduce(self, x, out=None, *, op: str = "add", dtype=None, **kw):
        """Every rank's ``out`` = op over every rank's ``x`` (rank order)."""
        xs = self._items(x)
        c = library.all_reduce(self.world, self._first_nbytes(xs), self._spec_dtype(xs, dtype), op)
        return self.run(c, x, out, **kw)

    def all_gather(self, x, out=None, *, dtype=None, **kw):
        """``out`` of every rank = every rank's ``x``, in rank order."""
        xs = self._items(x)
        c = library.all_gather(self.world, self._first_nbytes(xs), self._spec_dtype(xs, dtype))
        return self.run(c, x, out, **kw)

    def reduce_scatter(self, x, out=None, *, op: str = "add", dtype=None, **kw):
        """Rank q's ``out`` = op over block q of every rank's ``x`` (W equal blocks)."""
        xs = self._items(x)
        n = self._first_nbytes(xs)
        c = library.reduce_scatter(self.world, n // self.world, self._spec_dtype(xs, dtype), op)
        return self.run(c, x, out, **kw)

    def all_to_all(self, x, out=None, *, dtype=None, **kw):
        """Block d of rank s's ``x`` lands as block s of rank d's ``out``."""
        xs = self._items(x)
        n = self._first_nbytes(xs)
        c = library.all_to_all(self.world, n // self.world, self._spec_dtype(xs, dtype))
        return self.run(c, x, out, **kw)

    def all_gather_v(self, x, out=None, *, counts: Sequence[int], dtype=None, **kw):
        """All-gather with ``counts[r]`` elements from rank r."""
        xs = self._items(x)
        dt = _dtype(self._spec_dtype(xs, dtype))
        c = library.all_gather_v(self.world, [n * dt.itemsize for n in counts], dt.name)
        return self.run(c, x, out, **kw)

    def reduce_scatter_v(self, x, out=None, *, counts: Sequence[int], op: str = "add", dtype=None, **kw):
        """Reduce-scatter where rank q gets ``counts[q]`` elements."""
        xs = self._items(x)
        dt = _dtype(self._spec_dtype(xs, dtype))
        c = library.reduce_scatter_v(self.world, [n * dt.itemsize for n in counts], dt.name, op)
        return self.run(c, x, out, **kw)

    def all_to_all_v(self, x, out=None, *, counts: Sequence[Sequence[int]], dtype=None, **kw):
        """All-to-all where ``counts[s][d]`` elements go from rank s to rank d."""
        xs = self._items(x)
        dt = _dtype(self._spec_dtype(xs, dtype))
        c = library.all_to_all_v(self.world, [[n * dt.itemsize for n in row] for row in counts], dt.name)
        return self.run(c, x, out, **kw)

    def broadcast(self, x, out=None, *, root: int = 0, dtype=None, **kw):
        """Every rank's ``out`` = root's ``x``."""
        bufs = self._items(x) + self._items(out)
        c = library.broadcast(self.world, self._first_nbytes(bufs), self._spec_dtype(bufs, dtype), root)
        return self.run(c, x, out, **kw)

    def reduce(self, x, out=None, *, root: int = 0, op: str = "add", dtype=None, **kw):
        """Root's ``out`` = op over every rank's ``x``."""
        xs = self._items(x)
        c = library.reduce(self.world, self._first_nbytes(xs), self._spec_dtype(xs, dtype), op, root)
        return self.run(c, x, out, **kw)

    def gather(self, x, out=None, *, root: int = 0, dtype=None, **kw):
        """Root's ``out`` = every rank's ``x`` in rank order."""
        xs = self._items(x)
        c = library.gather(self.world, self._first_nbytes(xs), self._spec_dtype(xs, dtype), root)
        return self.run(c, x, out, **kw)

    def scatter(self, x, out=None, *, root: int = 0, dtype=None, **kw):
        """Rank r's ``out`` = block r of root's ``x``."""
        bufs = self._items(out) + self._items(x)
        n = self._first_nbytes(self._items(out)) if out is not None else \
            self._first_nbytes(self._items(x)) // self.world
        c = library.scatter(self.world, n, self._spec_dtype(bufs, dtype), root)
        return self.run(c, x, out, **kw)


def _bind_one(x, need: int, what: str, c: Collective):
    """A Buffer for one rank's argument (None when the layout needs no bytes there)."""
    if x is None:
        if need:
            raise SpecError(f"{c.name}: {what} is missing ({need} B expected)")
        return None
    b = arrays.as_buffer(x, what)
    _check_size(b, need, what, c)
    return b if need else None


def _check_size(b: arrays.Buffer, need: int, what: str, c: Collective) -> None:
    if b.nbytes != need:
        raise SpecError(f"{c.name}: {what} has {b.nbytes} B, the layout needs {need} B")


# ---- per-rank scratch shared by the single-process worlds ------------------------------------
class _Scratch:
    """Staging (two halves), packet windows (two halves, twice the payload) and signals
    of one rank, on its device; grown (never shrunk) when a plan needs more."""

    def __init__(self, cp, device: int):
        self.cp, self.device = cp, device
        self.staging_half = self.packets_half = self.num_signals = 0
        self.staging = self.packets = self.signals = None

    def fits(self, enc: Encoded) -> bool:
        return (enc.staging_nbytes <= self.staging_half and 2 * enc.packets_nbytes <= self.packets_half
                and enc.num_signals <= self.num_signals)

    def grow(self, enc: Encoded) -> None:
        cp = self.cp
        with cp.cuda.Device(self.device):
            if enc.staging_nbytes > self.staging_half or self.staging is None:
                self.staging_half = _round_up(max(enc.staging_nbytes, self.staging_half, 256))
                self.staging = cp.zeros(2 * self.staging_half, cp.uint8)
            if 2 * enc.packets_nbytes > self.packets_half or self.packets is None:
                self.packets_half = _round_up(max(2 * enc.packets_nbytes, self.packets_half, 256))
                self.packets = cp.zeros(2 * self.packets_half, cp.uint8)
            if enc.num_signals > self.num_signals or self.signals is None:
                self.num_signals = max(64, 2 * enc.num_signals, self.num_signals)
                self.signals = cp.zeros(self.num_signals, cp.uint64)   # zeros < any base + value


def _round_up(n: int) -> int:
    """Next multiple of 1 MiB above 1 MiB, else next power of two (fewer regrowths)."""
    if n > 1 << 20:
        return (n + (1 << 20) - 1) >> 20 << 20
    p = 256
    while p < n:
        p *= 2
    return p


class _Launcher:
    """Epoch state, error record and pointer tables of one launch group on one device."""

    def __init__(self, cp, device: int):
        self.cp, self.device = cp, device
        with cp.cuda.Device(device):
            self.state = cp.zeros(4, cp.uint64)    # call index, base, CTAs done, abort
            self.err = cp.zeros(16, cp.int64)
        self.tables: dict[tuple, Any] = {}

    def table(self, world: World, ptrs: tuple) -> Any:
        t = self.tables.get(ptrs)
        if t is None:
            world._no_capture("upload a pointer table for new buffers")
            if len(self.tables) > 4096:
                world.synchronize()
                self.tables.clear()
            with self.cp.cuda.Device(self.device):
                t = self.cp.asarray(np.asarray(ptrs, np.uint64))
                self.cp.cuda.get_current_stream().synchronize()   # later calls may use other streams
            self.tables[ptrs] = t
        return t

    def launch(self, world: World, plan: Plan, ptrs: tuple, scratch: _Scratch, first: int, n: int,
               stream) -> None:
        if n == 0:
            return
        k = kernels.for_device(self.device)
        code, refs, progs = plan.device_arrays[self.device]
        name = k.interpreter(plan.enc.uses_packets, plan.enc.uses_tma)
        use_tma = name == "snac_run_tma"
        fn = k.fn(name)
        table = self.table(world, ptrs)
        args = (code, refs, progs, np.int32(first), table, np.int32(len(ptrs)), np.int64(scratch.staging_half),
                np.int64(scratch.packets_half), self.state, np.uint64(plan.enc.epoch_stride),
                self.err, np.uint64(world.timeout_ns), np.int64(plan.id), np.int32(world.gpu_scope_flags if world.one_gpu else 0),
                world._tracing[self.device] if world._tracing else np.uint64(0))
        with self.cp.cuda.Device(self.device):
            fn((n,), (atomset.THREADS,), args, shared_mem=kernels.TMA_SMEM if use_tma else 0,
               stream=stream)


def _ptr_row(b: arrays.Buffer | None) -> int:
    return 0 if b is None else b.ptr


class LoopbackWorld(World):
    """W virtual ranks on one GPU: separate buffers per rank, one launch whose grid holds
    every rank's CTAs (all co-resident). Inputs and outputs are sequences of W arrays
    (None where a rank has no such buffer).

    Examples
    --------
    >>> w = LoopbackWorld(8)                                        # doctest: +SKIP
    >>> xs = [cupy.full(1024, r, cupy.float32) for r in range(8)]   # doctest: +SKIP
    >>> outs = w.all_reduce(xs)                                     # doctest: +SKIP
    """

    one_gpu = True

    def __init__(self, world: int, *, device: int = 0, **kw):
        if kw.get("topology") is None:   # plan for W ranks sharing one GPU, not W GPUs
            from purlin.topology import minimal
            kw["topology"] = minimal(world, loopback=True)
        super().__init__(world, **kw)
        self.device = device
        self.local_ranks = tuple(range(world))
        self.scratch = [_Scratch(self.cp, device) for _ in range(world)]
        self.launcher = _Launcher(self.cp, device)
        self.kernels = kernels.for_device(device)

    @property
    def cta_budget(self) -> int:
        """CTAs per rank in one call: every rank's CTAs share one GPU and must be co-resident."""
        return max(1, min(self.kernels.max_ctas("snac_run"), self.kernels.max_ctas("snac_run_pkt")) // self.world)

    def _devices(self) -> list[int]:
        return [self.device]

    def _error_buffers(self) -> list:
        return [self.launcher.err]

    def _ctas_per_device(self, p: Plan) -> dict[int, int]:
        return {self.device: len(p.enc.progs)}

    def _per_rank(self, xs, what) -> list:
        xs = list(xs)
        if len(xs) != self.world:
            raise SpecError(f"{what}: {len(xs)} given for a loopback world of {self.world} ranks "
                            f"(pass one per rank, None where a rank has none)")
        return xs

    def _unpack(self, objs: list):
        return objs

    def _alloc(self, rank: int, nbytes: int):
        with self.cp.cuda.Device(self.device):
            return self.cp.empty(nbytes, self.cp.uint8)

    def _launch(self, plan: Plan, ins, outs, stream) -> None:
        enc = plan.enc
        if not all(s.fits(enc) for s in self.scratch):
            self._no_capture("grow scratch buffers")
            self.cp.cuda.runtime.deviceSynchronize()
            for s in self.scratch:
                s.grow(enc)
            self.launcher.tables.clear()
        ptrs = []
        for r in range(self.world):
            s = self.scratch[r]
            ptrs += [_ptr_row(ins[r]), _ptr_row(outs[r]), s.staging.data.ptr, s.packets.data.ptr,
                     s.signals.data.ptr, 0, 0, 0]
        assert len(ptrs) == self.world * NBUF and BUF["signals"] == 4
        self.launcher.launch(self, plan, tuple(ptrs), self.scratch[0], 0, len(enc.progs), stream)


class PeerWorld(World):
    """One process driving one GPU per rank (``devices[r]``), peer access enabled, one
    launch per rank on a stream of its own joined to the caller's stream by events.
    ``devices`` may repeat a GPU (two ranks on one GPU: a single-GPU smoke test of this
    path). Inputs/outputs: one array per rank, each on its rank's device."""

    def __init__(self, devices: Sequence[int], **kw):
        super().__init__(len(devices), **kw)
        cp = self.cp
        self.devices = list(devices)
        self.local_ranks = tuple(range(self.world))
        for a in set(self.devices):
            for b in set(self.devices):
                if a != b:
                    if not cp.cuda.runtime.deviceCanAccessPeer(a, b):
                        raise PurlinError(f"GPU {a} cannot access GPU {b} (no peer access)")
                    with cp.cuda.Device(a):
                        try:
                            cp.cuda.runtime.deviceEnablePeerAccess(b)
                        except cp.cuda.runtime.CUDARuntimeError as e:
                            if "AlreadyEnabled" not in str(e):
                                raise
        self.scratch = [_Scratch(cp, d) for d in self.devices]
        self.launchers = [_Launcher(cp, d) for d in self.devices]
        self.streams = []
        for d in self.devices:
            with cp.cuda.Device(d):
                self.streams.append(cp.cuda.Stream(non_blocking=True))

    @property
    def cta_budget(self) -> int:
        """CTAs per rank in one call: the smallest GPU's co-resident CTAs over the ranks it holds."""
        per_dev = max(self.devices.count(d) for d in self.devices)
        return max(1, min(kernels.for_device(d).max_ctas("snac_run") for d in self.devices) // per_dev)

    def _devices(self) -> list[int]:
        return self.devices

    def _error_buffers(self) -> list:
        return [l.err for l in self.launchers]

    def _ctas_per_device(self, p: Plan) -> dict[int, int]:
        out: dict[int, int] = {}
        for r, d in enumerate(self.devices):
            out[d] = out.get(d, 0) + p.enc.rank_programs(r)[1]
        return out

    def _per_rank(self, xs, what) -> list:
        xs = list(xs)
        if len(xs) != self.world:
            raise SpecError(f"{what}: {len(xs)} given for a world of {self.world} GPUs")
        return xs

    def _unpack(self, objs: list):
        return objs

    def _alloc(self, rank: int, nbytes: int):
        with self.cp.cuda.Device(self.devices[rank]):
            return self.cp.empty(nbytes, self.cp.uint8)

    def _launch(self, plan: Plan, ins, outs, stream) -> None:
        cp, enc = self.cp, plan.enc
        if not all(s.fits(enc) for s in self.scratch):
            self._no_capture("grow scratch buffers")
            for d in set(self.devices):
                with cp.cuda.Device(d):
                    cp.cuda.runtime.deviceSynchronize()
            for s in self.scratch:
                s.grow(enc)
            for l in self.launchers:
                l.tables.clear()
        ptrs = []
        for r in range(self.world):
            s = self.scratch[r]
            ptrs += [_ptr_row(ins[r]), _ptr_row(outs[r]), s.staging.data.ptr, s.packets.data.ptr,
                     s.signals.data.ptr, 0, 0, 0]
        ptrs = tuple(ptrs)
        start = stream.record()
        ends = []
        for r in range(self.world):
            first, n = enc.rank_programs(r)
            with cp.cuda.Device(self.devices[r]):
                st = self.streams[r]
                st.wait_event(start)
                self.launchers[r].launch(self, plan, ptrs, self.scratch[r], first, n, st)
                ends.append(st.record())
        for e in ends:
            stream.wait_event(e)
