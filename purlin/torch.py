"""PyTorch-native Purlin: the collectives as torch custom ops, and a communicator over a
``torch.distributed`` process group.

The ops (``torch.ops.purlin.*``, registered with :mod:`torch.library`) are functional:
they take tensors and return new ones, so they run under ``torch.compile(fullgraph=True)``
(their fake implementations give the output shapes) and inside CUDA graphs that torch
captures (a call binds its buffers without copying anything to the device, once the
collective has run before the capture). CUDA tensors run on a Purlin world; CPU tensors
run on the reference executor (``purlin.backends.reference``), so the same program
compiles and runs on a machine without a GPU.

- :func:`all_reduce`, :func:`all_gather`, :func:`reduce_scatter`, :func:`all_to_all`:
  one tensor per rank of a loopback world (``world``: a
  :class:`purlin.backends.gpu.LoopbackWorld` for CUDA tensors; none for CPU tensors);
- :class:`Communicator`: this process's rank of a process group, on Purlin's IPC world
  (the way vLLM's and SGLang's custom all-reduce sit beside NCCL), falling back to
  ``torch.distributed`` (NCCL, or the group's backend) for what the IPC world cannot do.

Examples
--------
>>> import torch, purlin.torch as pt
>>> xs = [torch.full((3,), float(r)) for r in range(4)]
>>> [y.tolist() for y in pt.all_reduce(xs)][0]
[6.0, 6.0, 6.0]
>>> torch.compile(lambda xs: pt.all_gather(xs)[1] * 2, fullgraph=True, backend="eager")(xs).tolist()
[0.0, 0.0, 0.0, 2.0, 2.0, 2.0, 4.0, 4.0, 4.0, 6.0, 6.0, 6.0]
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Sequence

import numpy as np
import torch

from purlin.errors import SpecError
from purlin.torchargs import check_max_nbytes, check_op, check_tensors, check_world
from purlin.torchargs import out_numel as _out_numel

__all__ = ["Communicator", "all_gather", "all_reduce", "all_to_all", "reduce_scatter", "register"]

_DTYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.int32: "int32"}
for _name, _purlin in (("float8_e4m3fn", "fp8_e4m3"), ("float8_e5m2", "fp8_e5m2")):
    if hasattr(torch, _name):
        _DTYPES[getattr(torch, _name)] = _purlin
# Custom ops see tensors, ints and strings only: a world is named by a handle into this
# table (0: none, the reference executor for CPU tensors). It is the one piece of module
# state, and holds only what register() was given.
_HANDLES: dict[int, Any] = {}


def register(world_or_comm) -> int:
    """The handle the ops name ``world_or_comm`` by (the same one each time). Register a
    world before compiling a function that uses it: a traced function's changes to the
    handle table take effect only after its graph has run."""
    for h, w in _HANDLES.items():
        if w is world_or_comm:
            return h
    h = len(_HANDLES) + 1
    _HANDLES[h] = world_or_comm
    return h


def _dtype(x: torch.Tensor) -> str:
    try:
        return _DTYPES[x.dtype]
    except KeyError:
        raise SpecError(f"a tensor of {x.dtype}: Purlin runs {', '.join(map(str, _DTYPES))}") from None


# ---- the loopback ops ------------------------------------------------------------------
def _collective(name: str, w: int, x: torch.Tensor, op: str):
    from purlin.spec import library
    nbytes = x.numel() * x.element_size()
    dt = _dtype(x)
    if name == "all_reduce":
        return library.all_reduce(w, nbytes, dt, op)
    if name == "all_gather":
        return library.all_gather(w, nbytes, dt)
    block = _out_numel(name, x.numel(), w) * x.element_size() if name == "reduce_scatter" else nbytes // w
    if name == "reduce_scatter":
        return library.reduce_scatter(w, block, dt, op)
    _out_numel(name, x.numel(), w)
    return library.all_to_all(w, block, dt)


@lru_cache(maxsize=256)
def _cpu_schedule(c):
    from purlin.snac import plan
    from purlin.topology import minimal
    return plan(c, minimal(c.world, loopback=True))


def _run_cpu(name: str, xs: Sequence[torch.Tensor], op: str) -> list[torch.Tensor]:
    """The reference executor: bytes in, bytes out (every dtype, bf16 and fp8 too)."""
    from purlin.backends.reference import run
    x0 = xs[0]
    s = _cpu_schedule(_collective(name, len(xs), x0, op))
    raw = [x.detach().contiguous().reshape(-1).view(torch.uint8).numpy() for x in xs]
    n = _out_numel(name, x0.numel(), len(xs))
    shape = x0.shape if name in ("all_reduce", "all_to_all") else (n,)
    return [torch.from_numpy(np.ascontiguousarray(o)).view(x0.dtype).reshape(shape) for o in run(s, raw)]


def _run(name: str, xs: Sequence[torch.Tensor], op: str, world: int) -> list[torch.Tensor]:
    xs = check_tensors(name, xs)
    w = _HANDLES.get(world)
    check_world(name, xs[0].is_cuda, world, w is not None)
    if not xs[0].is_cuda:
        _dtype(xs[0])
        return _run_cpu(name, xs, op)
    n = _out_numel(name, xs[0].numel(), len(xs))
    shape = xs[0].shape if name in ("all_reduce", "all_to_all") else (n,)
    outs = [torch.empty(shape, dtype=xs[0].dtype, device=xs[0].device) for _ in xs]
    ins = [x.contiguous() for x in xs]
    kw = {"op": op} if name in ("all_reduce", "reduce_scatter") else {}
    getattr(w, name)(ins, outs, **kw)
    return outs


def _fake(name: str, xs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    n = _out_numel(name, xs[0].numel(), len(xs))
    shape = xs[0].shape if name in ("all_reduce", "all_to_all") else (n,)
    return [xs[0].new_empty(shape) for _ in xs]


@torch.library.custom_op("purlin::all_reduce", mutates_args=())
def _all_reduce(xs: list[torch.Tensor], op: str, world: int) -> list[torch.Tensor]:
    return _run("all_reduce", xs, op, world)


@torch.library.custom_op("purlin::all_gather", mutates_args=())
def _all_gather(xs: list[torch.Tensor], world: int) -> list[torch.Tensor]:
    return _run("all_gather", xs, "add", world)


@torch.library.custom_op("purlin::reduce_scatter", mutates_args=())
def _reduce_scatter(xs: list[torch.Tensor], op: str, world: int) -> list[torch.Tensor]:
    return _run("reduce_scatter", xs, op, world)


@torch.library.custom_op("purlin::all_to_all", mutates_args=())
def _all_to_all(xs: list[torch.Tensor], world: int) -> list[torch.Tensor]:
    return _run("all_to_all", xs, "add", world)


_all_reduce.register_fake(lambda xs, op, world: _fake("all_reduce", xs))
_all_gather.register_fake(lambda xs, world: _fake("all_gather", xs))
_reduce_scatter.register_fake(lambda xs, op, world: _fake("reduce_scatter", xs))
_all_to_all.register_fake(lambda xs, world: _fake("all_to_all", xs))


def _handle(world) -> int:
    return 0 if world is None else register(world)


def _args(name: str, xs: Sequence[torch.Tensor], world) -> list[torch.Tensor]:
    """``xs`` checked (one tensor per rank, alike, a dtype Purlin runs, a world where one is
    needed) before the op is dispatched, so a mistake is a SpecError naming it."""
    xs = check_tensors(name, xs)
    _dtype(xs[0])
    check_world(name, xs[0].is_cuda, world, world is not None)
    _out_numel(name, xs[0].numel(), len(xs))
    return xs


def all_reduce(xs: Sequence[torch.Tensor], op: str = "sum", world=None) -> list[torch.Tensor]:
    """Every rank's result = ``op`` over every rank's tensor, in rank order (one tensor per
    rank; any count, any supported dtype)."""
    op = check_op("all_reduce", op)
    return torch.ops.purlin.all_reduce(_args("all_reduce", xs, world), op, _handle(world))


def all_gather(xs: Sequence[torch.Tensor], world=None) -> list[torch.Tensor]:
    """Every rank's result = all ranks' tensors, flattened, in rank order."""
    return torch.ops.purlin.all_gather(_args("all_gather", xs, world), _handle(world))


def reduce_scatter(xs: Sequence[torch.Tensor], op: str = "sum", world=None) -> list[torch.Tensor]:
    """Rank q's result = ``op`` over block q (of W equal blocks) of every rank's tensor."""
    op = check_op("reduce_scatter", op)
    return torch.ops.purlin.reduce_scatter(_args("reduce_scatter", xs, world), op, _handle(world))


def all_to_all(xs: Sequence[torch.Tensor], world=None) -> list[torch.Tensor]:
    """Block d of rank s's tensor lands as block s of rank d's result."""
    return torch.ops.purlin.all_to_all(_args("all_to_all", xs, world), _handle(world))


# ---- the communicator over a process group ---------------------------------------------
class Communicator:
    """This process's rank of ``group``: CUDA tensors of a dtype Purlin runs, up to
    ``max_nbytes``, go through Purlin's IPC world (buffers shared by CUDA IPC between the
    group's processes); anything else falls back to ``torch.distributed`` on
    ``fallback_group`` (default: ``group``; pass an NCCL group for large messages).

    Parameters
    ----------
    group : ProcessGroup, optional
        Bootstraps the IPC world (gloo is enough); the default group when None.
    fallback_group : ProcessGroup, optional
        Where the calls the IPC world cannot take go.
    max_nbytes : int
        The IPC world's symmetric buffer size per rank.
    """

    def __init__(self, group=None, *, fallback_group=None, max_nbytes: int = 64 << 20, **world_kw):
        import torch.distributed as dist
        from purlin.backends.gpu import IpcWorld
        max_nbytes = check_max_nbytes(max_nbytes)
        self.dist, self.group = dist, group
        self.fallback_group = fallback_group if fallback_group is not None else group
        self.world = IpcWorld(group, max_nbytes=max_nbytes, **world_kw)
        self.rank, self.size = self.world.rank, self.world.world
        self.max_nbytes = max_nbytes
        self.handle = register(self)
        self.fallbacks = 0   # calls that went to torch.distributed

    def can(self, x: torch.Tensor, out_numel: int) -> bool:
        """Whether the IPC world takes a call on ``x`` with an output of ``out_numel``."""
        return (x.is_cuda and x.device.index == self.world.device and x.dtype in _DTYPES
                and max(x.numel(), out_numel) * x.element_size() <= self.max_nbytes)

    def all_reduce(self, x: torch.Tensor, op: str = "sum") -> torch.Tensor:
        """``op`` over every rank's ``x`` (a new tensor)."""
        return torch.ops.purlin.comm_all_reduce(x, check_op("Communicator.all_reduce", op), self.handle)

    def all_gather(self, x: torch.Tensor) -> torch.Tensor:
        """Every rank's ``x``, flattened, in rank order."""
        return torch.ops.purlin.comm_all_gather(x, self.handle)

    def reduce_scatter(self, x: torch.Tensor, op: str = "sum") -> torch.Tensor:
        """``op`` over block ``rank`` (of ``size`` equal blocks) of every rank's ``x``."""
        return torch.ops.purlin.comm_reduce_scatter(x, check_op("Communicator.reduce_scatter", op),
                                                    self.handle)

    def _call(self, name: str, x: torch.Tensor, op: str) -> torch.Tensor:
        n = {"all_reduce": x.numel(), "all_gather": x.numel() * self.size}.get(name)
        if n is None:
            n = _out_numel(name, x.numel(), self.size)
        out = torch.empty(x.shape if name == "all_reduce" else (n,), dtype=x.dtype, device=x.device)
        if self.can(x, n):
            kw = {"op": op} if name != "all_gather" else {}
            getattr(self.world, name)(x.contiguous(), out, **kw)
            return out
        self.fallbacks += 1
        return self._fallback(name, x.contiguous(), out, op)

    def _fallback(self, name: str, x: torch.Tensor, out: torch.Tensor, op: str) -> torch.Tensor:
        d = self.dist
        red = {"add": d.ReduceOp.SUM, "mul": d.ReduceOp.PRODUCT, "max": d.ReduceOp.MAX, "min": d.ReduceOp.MIN}[op]
        if name == "all_reduce":
            out.copy_(x)
            d.all_reduce(out, op=red, group=self.fallback_group)
        elif name == "all_gather":
            parts = [torch.empty_like(x.reshape(-1)) for _ in range(self.size)]
            d.all_gather(parts, x.reshape(-1), group=self.fallback_group)
            out.copy_(torch.cat(parts))
        else:   # reduce_scatter as an all-reduce and a slice: what every backend has
            full = x.reshape(-1).clone()
            d.all_reduce(full, op=red, group=self.fallback_group)
            out.copy_(full[self.rank * out.numel():(self.rank + 1) * out.numel()])
        return out

    def close(self) -> None:
        """Close the IPC world (a barrier first)."""
        self.world.close()


def _comm(handle: int) -> Communicator:
    c = _HANDLES.get(handle)
    if not isinstance(c, Communicator):
        raise SpecError(f"no Communicator registered as handle {handle}")
    return c


@torch.library.custom_op("purlin::comm_all_reduce", mutates_args=())
def _comm_all_reduce(x: torch.Tensor, op: str, comm: int) -> torch.Tensor:
    return _comm(comm)._call("all_reduce", x, op)


@torch.library.custom_op("purlin::comm_all_gather", mutates_args=())
def _comm_all_gather(x: torch.Tensor, comm: int) -> torch.Tensor:
    return _comm(comm)._call("all_gather", x, "add")


@torch.library.custom_op("purlin::comm_reduce_scatter", mutates_args=())
def _comm_reduce_scatter(x: torch.Tensor, op: str, comm: int) -> torch.Tensor:
    return _comm(comm)._call("reduce_scatter", x, op)


_comm_all_reduce.register_fake(lambda x, op, comm: x.new_empty(x.shape))
_comm_all_gather.register_fake(lambda x, comm: x.new_empty((x.numel() * _comm(comm).size,)))
_comm_reduce_scatter.register_fake(lambda x, op, comm: x.new_empty((x.numel() // _comm(comm).size,)))
