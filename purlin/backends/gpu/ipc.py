"""Several processes, one rank each (torchrun), buffers shared through CUDA IPC.

Each process allocates one symmetric block (input, output, staging halves, packet
halves, signals at the same offsets everywhere), exports its IPC handle, and opens the
others' through ``torch.distributed`` (gloo is enough: handles are a few bytes). Peers
read and write each other's symmetric input/output directly, so a call copies the
caller's tensors into the symmetric input first and the symmetric output out after
(stream-ordered; skipped when the caller passes the symmetric views themselves, from
:meth:`IpcWorld.input` / :meth:`IpcWorld.output`).

Processes on one GPU time-slice (no MPS): correct, slow; use it to test the path.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from purlin.backends.gpu import kernels
from purlin.backends.gpu.launch import Launcher
from purlin.backends.gpu.world import INTERPRETERS, Plan, World
from purlin.errors import PlanError, PurlinError, SpecError

ALIGN = 4096


class _SymScratch:
    """Offsets of the symmetric block, same on every rank."""

    def __init__(self, max_nbytes: int, staging_nbytes: int, packets_nbytes: int, num_signals: int):
        self.max_nbytes = max_nbytes
        self.staging_half = _up(staging_nbytes)
        self.packets_half = _up(2 * packets_nbytes)
        self.num_signals = num_signals
        self.off_input = 0
        self.off_output = _up(max_nbytes)
        self.off_staging = self.off_output + _up(max_nbytes)
        self.off_packets = self.off_staging + 2 * self.staging_half
        self.off_signals = self.off_packets + 2 * self.packets_half
        self.total = self.off_signals + _up(8 * num_signals)


def _up(n: int) -> int:
    return max(ALIGN, (n + ALIGN - 1) // ALIGN * ALIGN)


class IpcWorld(World):
    """This process is rank ``group.rank()`` of ``group.size()``; its GPU is ``device``
    (default: LOCAL_RANK modulo the GPUs seen).

    Parameters
    ----------
    group : torch.distributed ProcessGroup, optional
        The default group when None (initialise it first, e.g. backend "gloo").
    max_nbytes : int
        Capacity of the symmetric input and output (per rank, bytes).
    staging_nbytes, packets_nbytes, num_signals
        Scratch capacities; a plan needing more raises PlanError.
    """

    def __init__(self, group=None, *, device: int | None = None, max_nbytes: int = 64 << 20,
                 staging_nbytes: int = 64 << 20, packets_nbytes: int = 4 << 20,
                 num_signals: int = 4096, timeout_s: float = 30.0, **kw):
        import os

        import torch.distributed as dist
        self.dist, self.group = dist, group
        rank, world = dist.get_rank(group), dist.get_world_size(group)
        super().__init__(world, timeout_s=timeout_s, **kw)
        cp = self.cp
        if device is None:
            device = int(os.environ.get("LOCAL_RANK", rank)) % cp.cuda.runtime.getDeviceCount()
        self.rank, self.device = rank, device
        self.local_ranks = (rank,)
        self.layout = _SymScratch(max_nbytes, staging_nbytes, packets_nbytes, num_signals)
        with cp.cuda.Device(device):
            self.mem = cp.cuda.Memory(self.layout.total)   # one cudaMalloc: its own IPC handle
            cp.cuda.runtime.memset(self.mem.ptr, 0, self.layout.total)
            cp.cuda.runtime.deviceSynchronize()
            handle = cp.cuda.runtime.ipcGetMemHandle(self.mem.ptr)
        handles: list[Any] = [None] * world
        dist.all_gather_object(handles, (rank, device, bytes(handle)), group=group)
        self.bases = []
        self._opened = []
        with cp.cuda.Device(device):
            for r, (_, dev, h) in enumerate(handles):
                if r == rank:
                    self.bases.append(self.mem.ptr)
                else:
                    ptr = cp.cuda.runtime.ipcOpenMemHandle(h)
                    self._opened.append(ptr)
                    self.bases.append(ptr)
        L = self.layout
        ptrs = []
        for b in self.bases:
            ptrs += [b + L.off_input, b + L.off_output, b + L.off_staging, b + L.off_packets,
                     b + L.off_signals, 0, 0, 0]
        self.ptrs = tuple(ptrs)
        self.launcher = Launcher(cp, device)
        self.kernels = kernels.for_device(device)
        self.staging_half = L.staging_half
        self.packets_half = L.packets_half
        dist.barrier(group=group)

    # symmetric views for zero-copy calls
    def input(self, nbytes: int, dtype=None):
        """A cupy view of this rank's symmetric input (``nbytes`` long)."""
        return self._view(self.layout.off_input, nbytes, dtype)

    def output(self, nbytes: int, dtype=None):
        """A cupy view of this rank's symmetric output."""
        return self._view(self.layout.off_output, nbytes, dtype)

    def _view(self, off: int, nbytes: int, dtype):
        cp = self.cp
        if nbytes > self.layout.max_nbytes:
            raise SpecError(f"{nbytes} B exceeds the symmetric capacity {self.layout.max_nbytes} B")
        dt = np.dtype(dtype or np.uint8)
        mp = cp.cuda.MemoryPointer(self.mem, off)
        return cp.ndarray(nbytes // dt.itemsize, dt, mp)

    @property
    def cta_budget(self) -> int:
        """CTAs one call may use on this rank (all must be co-resident on its GPU)."""
        return min(self.kernels.max_ctas(k) for k in INTERPRETERS)

    def _devices(self) -> list[int]:
        return [self.device]

    def _device_of(self, rank: int) -> int:
        return self.device

    def _error_buffers(self) -> list:
        return [self.launcher.err]

    def _launchers(self) -> list:
        return [self.launcher]

    def _ctas_per_device(self, p: Plan) -> dict[int, int]:
        return {self.device: p.enc.rank_programs(self.rank)[1]}

    def _per_rank(self, xs, what) -> list:
        if isinstance(xs, (list, tuple)):
            raise SpecError(f"{what}: an IpcWorld call takes this rank's buffer, not a list")
        return [xs]

    def _unpack(self, objs: list):
        return objs[0]

    def _alloc(self, rank: int, nbytes: int):
        with self.cp.cuda.Device(self.device):
            return self.cp.empty(nbytes, self.cp.uint8)

    def _bind_launch(self, plan: Plan, ins, outs):
        cp, enc, L, r = self.cp, plan.enc, self.layout, self.rank
        if (enc.staging_nbytes > L.staging_half or 2 * enc.packets_nbytes > L.packets_half
                or enc.num_signals > L.num_signals):
            raise PlanError(f"plan needs staging {enc.staging_nbytes} B, packets {enc.packets_nbytes} B, "
                            f"{enc.num_signals} signals; this IpcWorld holds {L.staging_half} B, "
                            f"{L.packets_half // 2} B, {L.num_signals}: build it with larger capacities")
        c = plan.schedule.collective
        for what, b in (("input", ins[r]), ("output", outs[r])):
            if b is not None and b.nbytes > L.max_nbytes:
                raise SpecError(f"{c.name}: {what} of {b.nbytes} B exceeds max_nbytes {L.max_nbytes}")
        sym_in = self.mem.ptr + L.off_input
        sym_out = self.mem.ptr + L.off_output
        kind = cp.cuda.runtime.memcpyDeviceToDevice
        first, n = enc.rank_programs(r)
        trace = self._tracing[self.device] if self._tracing else None
        launch = self.launcher.launch(plan, self.ptrs, self, first, n, self,
                                      lambda: self._no_capture("upload a pointer table"), trace)
        copy_in = (ins[r].ptr, ins[r].nbytes) if ins[r] is not None and ins[r].ptr != sym_in else None
        copy_out = (outs[r].ptr, outs[r].nbytes) if outs[r] is not None and outs[r].ptr != sym_out else None
        memcpy = cp.cuda.runtime.memcpyAsync

        def go(stream: int) -> None:   # stream-ordered: copy in, run, copy out
            if copy_in:
                memcpy(sym_in, copy_in[0], copy_in[1], kind, stream)
            if launch is not None:
                launch(stream)
            if copy_out:
                memcpy(copy_out[0], sym_out, copy_out[1], kind, stream)
        return go

    def close(self) -> None:
        """Close the peers' IPC mappings (after a barrier, so nobody still uses ours)."""
        self.synchronize()
        self.dist.barrier(group=self.group)
        for ptr in self._opened:
            try:
                self.cp.cuda.runtime.ipcCloseMemHandle(ptr)
            except Exception as e:  # pragma: no cover - best effort at exit
                raise PurlinError(f"closing an IPC mapping failed: {e}") from e
        self._opened = []
