"""Bound calls found again by the identity of their buffer objects: a call's fast path.

Why: reading the full buffer key of :func:`purlin.backends.gpu.launch.buffer_key`
(pointer, element count and type, contiguity) for the 16 buffers of an 8-rank loopback
call was most of a cached call's host time (``benchmarks/results/h200-eager-before.json``
holds the code before this table: 10.7 us an AllReduce of cupy arrays). Ids
answer the same question when:

- an entry is dropped as soon as any of its buffers is collected (a weakref callback),
  so an id is never matched to a new object that reuses it;
- nothing the checks rest on can change in place unnoticed: a cupy array's pointer,
  size, dtype and contiguity are fixed for its life, and every in-place change of a torch
  tensor's metadata (``set_``, ``resize_``, ``as_strided_``, ``t_``...) bumps its version
  counter, which an entry records and each call compares. In-place data writes bump it
  too (a loop that writes its inputs every step), so a moved version does not miss: the
  full key of just the tensors whose version moved is read again and compared with the
  one the entry was made with; equal keys mean the same bytes, and the entry takes the
  new versions;
- one change torch makes without a version bump: ``x.data = y`` replaces a tensor's
  storage and shape and keeps its version. So each call also checks every tensor's
  pointer (what matters most: memory that moved, or was freed), in one call into torch
  where torch offers it (``torch._C._tensors_data_ptrs_at_indices_equal``, which its CUDA
  graph trees use for the same check; else one ``data_ptr()`` a tensor); a tensor whose
  pointer moved has its full key read again as above. What this cannot see is ``x.data = y``
  with ``y`` at the very same pointer but another shape or dtype: rebind by passing
  new tensor objects (docs/gpu.md says so).

Where torch has dynamo's ``TensorGuards`` (one C++ call that checks many tensors' type,
dtype, device, sizes and strides), a torch call is matched without ids or versions at all:
a guard over its tensors (and the same aliasing among them) plus the one-call pointer check
is everything the bound call rests on, whoever the tensor objects are. So a loop that writes
its inputs every step, or hands new tensor objects over the same memory (an eager model's
fresh outputs), costs what an unchanged call costs, and ``x.data = y`` at the very same
pointer with another shape misses too. The version path above serves where torch lacks it.

Buffers of any other kind, or a None among them, never enter this table.
"""
from __future__ import annotations

import sys
import weakref
from operator import attrgetter, itemgetter, methodcaller
from typing import Any, Callable

from purlin.backends.gpu.launch import buffer_key

_version = attrgetter("_version")
_GUARDS_PER_KEY = 4   # buffer sets a call key alternates between (double buffering and the like)
_pointer = methodcaller("data_ptr")


def _same_pointers() -> Callable[[list, list, list], bool] | None:
    """torch's own check that tensors still sit at recorded pointers (one call for all),
    or None where this torch lacks it."""
    torch = sys.modules.get("torch")
    return getattr(getattr(torch, "_C", None), "_tensors_data_ptrs_at_indices_equal", None)


def _tensor_guards() -> Callable[..., Any] | None:
    """dynamo's TensorGuards (a C++ check of many tensors' metadata in one call), or None
    where this torch lacks it."""
    guards = getattr(getattr(getattr(sys.modules.get("torch"), "_C", None), "_dynamo", None), "guards", None)
    return getattr(guards, "TensorGuards", None)


class _Guard:
    """What a torch call's buffers must still be for its bound call: the distinct tensors'
    metadata (TensorGuards checks the types first, so a None or an array fails there), the
    same aliasing among them, and the same pointers."""

    __slots__ = ("check", "pick", "dups", "same", "ptrs", "idx")

    def __init__(self, check, pick, dups, same, ptrs: list, idx: list):
        self.check, self.pick, self.dups, self.same, self.ptrs, self.idx = check, pick, dups, same, ptrs, idx

    @classmethod
    def of(cls, objs: list, ptrs: list) -> "_Guard | None":
        make = _tensor_guards()
        if make is None or not objs:
            return None
        first: dict[int, int] = {}
        uniq, dups = [], []
        for i, o in enumerate(objs):
            j = first.setdefault(id(o), i)
            if j == i:
                uniq.append(i)
            else:
                dups.append((i, j))
        pick = itemgetter(*uniq) if len(uniq) > 1 else (lambda xs, u=uniq[0]: (xs[u],))
        try:
            check = make(*pick(objs), dynamic_dims_sizes=None, dynamic_dims_strides=None).check
        except (TypeError, RuntimeError):   # another torch's signature: the version path serves
            return None
        return cls(check, pick, tuple(dups), _same_pointers(), list(ptrs), list(range(len(objs))))

    def holds(self, objs: list) -> bool:
        if not self.check(*self.pick(objs)):
            return False
        for i, j in self.dups:
            if objs[i] is not objs[j]:
                return False
        if self.same is not None:
            return self.same(objs, self.ptrs, self.idx)
        return list(map(_pointer, objs)) == self.ptrs


def _kind(objs: list) -> str | None:
    """'torch' or 'cupy' when every object is a tensor (an array) of that library."""
    kinds = set()
    for o in objs:
        mod = type(o).__module__
        if mod == "torch" and hasattr(o, "_version"):
            kinds.add("torch")
        elif mod == "cupy" or mod.startswith("cupy."):
            kinds.add("cupy")
        else:
            return None
    return kinds.pop() if len(kinds) == 1 else None


class ByIdentity:
    """(call key, buffer objects) -> bound call, at most ``limit`` entries (the oldest go
    first). ``get`` costs one id per buffer, plus a version and a pointer read per
    torch tensor (and a full ``key`` read of each tensor where either moved); with
    TensorGuards, a torch call costs two calls into torch instead. ``key`` is what the
    world matches buffers by otherwise (:func:`purlin.backends.gpu.launch.buffer_key`)."""

    def __init__(self, limit: int = 1024, key: Callable[[Any], Any] = buffer_key):
        # entry: (bound, weakrefs, and for torch tensors (versions, pointers, keys) when put)
        self._table: dict[tuple, tuple[Any, tuple, tuple | None]] = {}
        self._limit = limit
        self._key = key
        self._seen: dict[tuple, None] = {}   # id sets met once, no weakrefs (see again)
        self._guarded: dict[Any, list[tuple[_Guard, Any]]] = {}   # key -> newest first

    def __len__(self) -> int:
        return len(self._table)

    def get(self, key: Any, objs: list) -> Any | None:
        """The bound call put under ``key`` for these very objects, with the same keys
        (or, with TensorGuards, for any tensors with the same pointers and metadata)."""
        for g, bound in self._guarded.get(key, ()):
            if g.holds(objs):
                return bound
        k = (key, tuple(map(id, objs)))
        e = self._table.get(k)
        if e is None:
            return None
        if e[2] is not None:
            then_v, then_p, keys, same, idx = e[2]
            versions = tuple(map(_version, objs))
            stayed = same is not None and same(objs, then_p, idx)
            if stayed and versions == then_v:
                return e[0]
            pointers = then_p if stayed else list(map(_pointer, objs))
            if versions != then_v or pointers != then_p:
                read = self._key
                for o, v, tv, p, tp, was in zip(objs, versions, then_v, pointers, then_p, keys):
                    if (v != tv or p != tp) and read(o) != was:
                        return None
                self._table[k] = (e[0], e[1], (versions, pointers, keys, same, idx))
                self._guard(key, objs, e[0], pointers)   # the same bytes, new metadata
        return e[0]

    def put(self, key: Any, objs: list, bound: Any, keys: tuple | None = None) -> bool:
        """Remember ``bound`` for ``key`` and these objects (``keys``: their keys, when
        the caller has read them already); False (nothing kept) for buffers this table
        cannot vouch for."""
        kind = _kind(objs)
        if kind is None or not objs:
            return False
        k = (key, tuple(map(id, objs)))
        state = None
        if kind == "torch":
            state = (tuple(map(_version, objs)), list(map(_pointer, objs)),
                     tuple(keys) if keys is not None else tuple(map(self._key, objs)),
                     _same_pointers(), list(range(len(objs))))
            self._guard(key, objs, bound, state[1])
        old = self._table.get(k)
        if old is not None:   # the same live objects, changed since: new state, same weakrefs
            self._table[k] = (bound, old[1], state)
            return True
        drop = self._dropper(k)
        try:
            refs = tuple(weakref.ref(o, drop) for o in objs)
        except TypeError:   # an array type without weak references
            return False
        if len(self._table) >= self._limit:
            self._table.pop(next(iter(self._table)))
        self._table[k] = (bound, refs, state)
        return True

    def again(self, key: Any, objs: list) -> bool:
        """Whether these object ids came with ``key`` before (among the last few sets).

        Why: an eager model hands a collective new tensor objects every step (fresh
        outputs of the caching allocator at the same pointers); weak references to
        objects that die before they are met again cost more than the entry saves. So
        a caller enters a set only when it comes again. An id here is a hint, never a
        match: what is entered is vouched for by the full keys first."""
        k = (key, tuple(map(id, objs)))
        if k in self._seen:
            del self._seen[k]
            return True
        if len(self._seen) >= 64:
            self._seen.pop(next(iter(self._seen)))
        self._seen[k] = None
        return False

    def clear(self) -> None:
        """Forget every entry (new bindings replace the old ones)."""
        self._table.clear()
        self._seen.clear()
        self._guarded.clear()

    def _guard(self, key: Any, objs: list, bound: Any, ptrs: list) -> None:
        """Enter a guard for these tensors (newest first, a few per key), where torch has
        TensorGuards."""
        g = _Guard.of(objs, ptrs)
        if g is None:
            return
        got = self._guarded.get(key)
        if got is None:
            if len(self._guarded) >= self._limit:
                self._guarded.pop(next(iter(self._guarded)))
            got = self._guarded[key] = []
        got.insert(0, (g, bound))
        del got[_GUARDS_PER_KEY:]

    def _dropper(self, k: tuple) -> Callable[[Any], None]:
        table = self._table

        def drop(_ref: Any) -> None:   # a buffer of entry k was collected
            table.pop(k, None)
        return drop
