"""What a call costs on the host: per-rank scratch, epoch state, pointer tables, and
kernel launches with their arguments packed once.

A bound call (see :mod:`purlin.backends.gpu.world`) is built once per plan and buffer
pointers; each later call with the same pointers, sizes, dtypes and layouts is one
``cuLaunchKernel`` of a pre-packed argument block on the caller's stream. Up to
``PARAM_PTRS`` buffer pointers (8 ranks) travel in the launch's arguments, so binding new
buffers copies nothing to the device (and works inside a graph capture); larger worlds
upload a pointer table once per pointer set. The checks that
make a call safe (sizes, dtypes, devices, contiguity) run when it is bound; a call is
matched to its bound form by its buffer objects (:mod:`purlin.backends.gpu.identity`),
else by :func:`buffer_key`, so they hold for it too.
"""
from __future__ import annotations

import sys
from typing import Any, Callable

import numpy as np

from purlin.backends.gpu import atomset, kernels
from purlin.snac.kernel_constants import PARAM_PTRS

MAX_TABLES = 4096   # pointer tables kept per launch group before they are dropped
KIND = {1: "Wait", 2: "WaitPackets", 3: "unaligned Ref"}   # the watchdog record's kinds


def _cupy_key(x) -> tuple:
    # cupy's ndarray keeps these as plain C fields (no tuple or object built per read)
    return (x.data.ptr, x.size, x.dtype.num, x._c_contiguous)


def _cupy_key_public(x) -> tuple:
    return (x.data.ptr, x.size, x.dtype.num, x.flags.c_contiguous)


def _torch_key(x) -> tuple:
    return (x.data_ptr(), x.numel(), x.dtype, x.is_contiguous())


def _other_key(x) -> tuple:
    from purlin.backends.gpu.arrays import as_buffer
    b = as_buffer(x)
    return (b.ptr, b.nbytes, b.dtype, id(type(x)))


_KEYS: dict[type, Callable[[Any], tuple]] = {}


def buffer_key(x: Any) -> tuple | None:
    """What identifies a buffer for the checks a bound call rests on: pointer, element
    count and type, contiguity (a pointer names its device under unified addressing).
    Type-specific and cheap: this runs for every buffer of every call."""
    if x is None:
        return None
    t = type(x)
    key = _KEYS.get(t)
    if key is None:
        mod = t.__module__
        if mod == "cupy" or mod.startswith("cupy."):
            key = _cupy_key if hasattr(x, "_c_contiguous") else _cupy_key_public
        elif mod == "torch":
            key = _torch_key
        else:
            key = _other_key
        _KEYS[t] = key
    return key(x)


_CURRENT: dict[str, Callable] = {}


def current_stream(stream: Any, torch_buffers: bool, device: int) -> int:
    """The raw CUDA stream a call goes on: ``stream`` (a cupy or torch stream, or a raw
    handle), else the current torch stream when the buffers are torch tensors, else
    cupy's current stream."""
    if stream is None:
        if torch_buffers:
            raw = _CURRENT.get("torch")
            if raw is None:
                torch = sys.modules["torch"]
                raw = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
                    lambda d: torch.cuda.current_stream(d).cuda_stream)
                _CURRENT["torch"] = raw
            return raw(device)
        get = _CURRENT.get("cupy")
        if get is None:
            import cupy
            get = _CURRENT["cupy"] = cupy.cuda.get_current_stream
        return get().ptr
    if isinstance(stream, int):
        return stream
    ptr = getattr(stream, "ptr", None)
    return ptr if ptr is not None else stream.cuda_stream


class KernelLaunch:
    """One kernel launch with its arguments packed into a parameter block once; calling
    it launches on a raw stream (``cuLaunchKernel``, nothing rebuilt). ``inline``: a
    last, by-value argument of that many 8-byte words (the pointer table)."""

    def __init__(self, cp, fn, grid: int, shared_mem: int, args: list[int], inline: list[int] | None = None):
        self.fn, self.grid, self.shared_mem = fn, grid, shared_mem
        self.block = np.zeros(len(args), np.uint64)     # one 8-byte slot per argument
        for i, a in enumerate(args):
            self.block[i] = a % (1 << 64)   # an int32 argument reads the slot's low 4 bytes
        slots = [self.block.ctypes.data + 8 * i for i in range(len(args))]
        if inline is not None:
            self.inline = np.zeros(PARAM_PTRS, np.uint64)
            self.inline[:len(inline)] = inline
            slots.append(self.inline.ctypes.data)
        self.params = np.array(slots, np.uint64)
        self._params = self.params.ctypes.data
        self._fn = fn.ptr
        self._launch = cp.cuda.driver.launchKernel

    def __call__(self, stream_ptr: int) -> None:
        self._launch(self._fn, self.grid, 1, 1, atomset.THREADS, 1, 1, self.shared_mem, stream_ptr,
                     self._params, 0)


class Scratch:
    """Staging (two halves), packet windows (two halves, twice the payload) and signals
    of one rank, on its device; grown (never shrunk) when a plan needs more."""

    def __init__(self, cp, device: int):
        self.cp, self.device = cp, device
        self.staging_half = self.packets_half = self.num_signals = 0
        self.staging = self.packets = self.signals = None

    def fits(self, enc) -> bool:
        """Whether this scratch already holds what plan ``enc`` needs."""
        return (self.staging is not None and enc.staging_nbytes <= self.staging_half
                and 2 * enc.packets_nbytes <= self.packets_half and enc.num_signals <= self.num_signals)

    def grow(self, enc) -> None:
        """Reallocate (never shrink) so plan ``enc`` fits."""
        cp = self.cp
        with cp.cuda.Device(self.device):
            if enc.staging_nbytes > self.staging_half or self.staging is None:
                self.staging_half = round_up(max(enc.staging_nbytes, self.staging_half, 256))
                self.staging = cp.zeros(2 * self.staging_half, cp.uint8)
            if 2 * enc.packets_nbytes > self.packets_half or self.packets is None:
                self.packets_half = round_up(max(2 * enc.packets_nbytes, self.packets_half, 256))
                self.packets = cp.zeros(2 * self.packets_half, cp.uint8)
            if enc.num_signals > self.num_signals or self.signals is None:
                self.num_signals = max(64, 2 * enc.num_signals, self.num_signals)
                self.signals = cp.zeros(self.num_signals, cp.uint64)   # zeros < any base + value

    def row(self, inp: int, out: int) -> list[int]:
        """This rank's row of a pointer table (``encode.BUF`` order, ``NBUF`` wide)."""
        return [inp, out, self.staging.data.ptr, self.packets.data.ptr, self.signals.data.ptr, 0, 0, 0]


def round_up(n: int) -> int:
    """Next multiple of 1 MiB above 1 MiB, else next power of two (fewer regrowths)."""
    if n > 1 << 20:
        return (n + (1 << 20) - 1) >> 20 << 20
    p = 256
    while p < n:
        p *= 2
    return p


class Launcher:
    """Epoch state, error record and pointer tables of one launch group on one device."""

    def __init__(self, cp, device: int):
        self.cp, self.device = cp, device
        with cp.cuda.Device(device):
            self.state = cp.zeros(4, cp.uint64)    # call index, base, CTAs done, abort
            self.err = cp.zeros(16, cp.int64)
        self.tables: dict[tuple, Any] = {}

    def table(self, ptrs: tuple, before_new: Callable[[], None]) -> Any:
        """The device copy of a pointer table (uploaded once; ``before_new`` runs first,
        e.g. a check that no graph is being captured)."""
        t = self.tables.get(ptrs)
        if t is None:
            before_new()
            with self.cp.cuda.Device(self.device):
                t = self.cp.asarray(np.asarray(ptrs, np.uint64))
                self.cp.cuda.get_current_stream().synchronize()   # later calls may use other streams
            self.tables[ptrs] = t
        return t

    def launch(self, plan, ptrs: tuple, scratch: Scratch, first: int, n: int, world, before_new,
               trace=None) -> KernelLaunch | None:
        """The packed launch of ``n`` programs from ``first`` of ``plan`` over ``ptrs``."""
        if n == 0:
            return None
        k = kernels.for_device(self.device)
        name = k.interpreter(plan.enc.uses_packets, plan.enc.uses_tma,
                             plan.enc.unaligned or any(p % 16 for p in ptrs))
        code, refs, progs = plan.device_arrays[self.device]
        table = None if len(ptrs) <= PARAM_PTRS else self.table(ptrs, before_new)   # else by value
        args = [code.data.ptr, refs.data.ptr, progs.data.ptr, first, 0 if table is None else table.data.ptr, len(ptrs),
                scratch.staging_half, scratch.packets_half, self.state.data.ptr, plan.enc.epoch_stride,
                self.err.data.ptr, world.timeout_ns, plan.id, world.gpu_scope_flags if world.one_gpu else 0,
                0 if trace is None else trace.data.ptr]
        # keep what the block points at alive as long as the launch
        launch = KernelLaunch(self.cp, k.fn(name), n, k.smem(name), args,
                              list(ptrs) if table is None else [0] * PARAM_PTRS)
        launch.keep = (code, refs, progs, table, trace)
        return launch


def describe_watchdog(rec, plans: list, timeout_s: float) -> str:
    """The Deadlock message for a launch's watchdog record ``rec`` (its first 10 words):
    who timed out, on what, and the instruction, from the plan the record names."""
    _, rank, cta, pc, kind, where, want, seen, base, pid = (int(x) for x in rec[:10])
    plan = plans[pid] if 0 <= pid < len(plans) else None
    name = plan.schedule.collective.name if plan else "?"
    what = KIND.get(kind, "spin")
    role = instr = ""
    if plan:
        for k, p in enumerate(sorted(plan.schedule.programs, key=lambda q: (q.rank, q.cta))):
            if p.rank == rank and p.cta == cta:
                role = f" ({p.role})"
                rec_at = int(plan.enc.progs[k][0]) + pc   # the record's index in the code
                if 0 <= pc < int(plan.enc.progs[k][1]):
                    pc = int(plan.enc.instr_of[rec_at])
                    instr = f": {p.instrs[pc]}"
    if kind == 3:
        return (f"{name}: rank {rank}, cta {cta}{role}, instr {pc}: a Ref only {where}-byte aligned "
                f"reached a kernel without the narrow path{instr}")
    if kind == 1:
        detail = (f"signal {where} is {seen}, waited for >= {want} (call base {base} + "
                  f"{want - base})")
    else:
        detail = (f"packet at payload offset {where} has tag {seen}, waited for {want} "
                  f"(low 32 bits of base {base} + {want - (base & 0xffffffff)})")
    return (f"{name}: rank {rank}, cta {cta}{role}, instr {pc}: {what} timed out after "
            f"{timeout_s:g} s: {detail}{instr}")
