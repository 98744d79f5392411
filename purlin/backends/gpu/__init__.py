"""The GPU executor: Purlin's Atoms (cupy + NVRTC) and the SNAC interpreter kernel.

Importing this package needs only numpy; cupy (and a GPU) load on first use, and their
absence raises :class:`purlin.errors.BackendUnavailable` saying why.

>>> from purlin.backends import gpu
>>> sorted(gpu.atomset.ATOM_SETS)
[80, 90, 100]

Worlds (see :mod:`purlin.backends.gpu.world`)::

    w = gpu.LoopbackWorld(8)                 # 8 virtual ranks on GPU 0
    outs = w.all_reduce([x0, ..., x7])       # cupy arrays or torch tensors
    w.run(spec, inputs, outputs)             # any Collective or Schedule
    w.synchronize()                          # raises Deadlock if a Wait timed out
"""
from __future__ import annotations

from purlin.backends.gpu import atomset, encode

__all__ = ["LoopbackWorld", "PeerWorld", "IpcWorld", "atomset", "encode", "is_available", "run"]


def __getattr__(name: str):
    if name in ("LoopbackWorld", "World"):
        from purlin.backends.gpu import world
        return getattr(world, name)
    if name == "PeerWorld":
        from purlin.backends.gpu.peer import PeerWorld
        return PeerWorld
    if name == "IpcWorld":
        from purlin.backends.gpu.ipc import IpcWorld
        return IpcWorld
    if name == "is_available":
        from purlin.backends.gpu.kernels import is_available
        return is_available
    raise AttributeError(name)


def run(schedule, inputs, outputs=None, *, device: int = 0):
    """Run ``schedule`` once in a loopback world on ``device`` and return host copies of
    the outputs (uint8 numpy arrays), like ``purlin.backends.reference.run``.

    ``inputs`` are host (numpy) or device arrays, one per rank.
    """
    from purlin.backends.gpu.kernels import cupy
    from purlin.backends.gpu.world import LoopbackWorld
    cp = cupy()
    w = LoopbackWorld(schedule.world, device=device)
    with cp.cuda.Device(device):
        import numpy as np
        dev_in = [None if x is None or getattr(x, "nbytes", 0) == 0 else
                  cp.asarray(np.ascontiguousarray(x).reshape(-1).view(np.uint8)) if isinstance(x, np.ndarray)
                  else x for x in inputs]
        c = schedule.collective
        for r in range(schedule.world):
            if c.input.nbytes(r) == 0:
                dev_in[r] = None
        outs = w.run(schedule, dev_in, outputs)
        w.synchronize()
        return [None if o is None else cp.asnumpy(o).view("uint8") for o in outs]
