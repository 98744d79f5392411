"""One process, one GPU per rank: peer access, one launch per rank on its own stream."""
from __future__ import annotations

from typing import Callable, Sequence

from purlin.backends.gpu import kernels
from purlin.backends.gpu.launch import Launcher, Scratch
from purlin.backends.gpu.world import INTERPRETERS, Plan, World, _ptr
from purlin.errors import PurlinError, SpecError


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
        self.scratch = [Scratch(cp, d) for d in self.devices]
        self.launchers = [Launcher(cp, d) for d in self.devices]
        self.streams = []
        for d in self.devices:
            with cp.cuda.Device(d):
                self.streams.append(cp.cuda.Stream(non_blocking=True))

    @property
    def cta_budget(self) -> int:
        """CTAs per rank in one call: the smallest GPU's co-resident CTAs over the ranks it holds."""
        per_dev = max(self.devices.count(d) for d in self.devices)
        return max(1, min(kernels.for_device(d).max_ctas(k) for d in self.devices for k in INTERPRETERS) // per_dev)

    def _devices(self) -> list[int]:
        return self.devices

    def _device_of(self, rank: int) -> int:
        return self.devices[rank]

    def _error_buffers(self) -> list:
        return [l.err for l in self.launchers]

    def _launchers(self) -> list[Launcher]:
        return self.launchers

    def _ctas_per_device(self, p: Plan) -> dict[int, int]:
        out: dict[int, int] = {}
        for r, d in enumerate(self.devices):
            out[d] = out.get(d, 0) + p.enc.rank_programs(r)[1]
        return out

    def _per_rank(self, xs, what) -> list:
        if len(xs) != self.world:
            raise SpecError(f"{what}: {len(xs)} given for a world of {self.world} GPUs")
        return xs

    def _unpack(self, objs: list):
        return objs

    def _alloc(self, rank: int, nbytes: int):
        with self.cp.cuda.Device(self.devices[rank]):
            return self.cp.empty(nbytes, self.cp.uint8)

    def _bind_launch(self, plan: Plan, ins, outs) -> Callable[[int], None]:
        cp, enc = self.cp, plan.enc
        self._grow(self.scratch, enc)
        ptrs = []
        for r in range(self.world):
            ptrs += self.scratch[r].row(_ptr(ins[r]), _ptr(outs[r]))
        launches = []
        for r in range(self.world):
            first, n = enc.rank_programs(r)
            trace = self._tracing[self.devices[r]] if self._tracing else None
            launches.append(self.launchers[r].launch(
                plan, tuple(ptrs), self.scratch[r], first, n, self,
                lambda: self._no_capture("upload a pointer table for new buffers"), trace))

        def go(stream_ptr: int) -> None:
            stream = cp.cuda.ExternalStream(stream_ptr)
            start = stream.record()
            ends = []
            for r, launch in enumerate(launches):
                with cp.cuda.Device(self.devices[r]):
                    st = self.streams[r]
                    st.wait_event(start)
                    if launch is not None:
                        launch(st.ptr)
                    ends.append(st.record())
            for e in ends:
                stream.wait_event(e)
        return go
