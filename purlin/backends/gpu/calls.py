"""The library collectives as calls on a world: ``w.all_reduce(x, out)`` and the rest.

A call with ``out`` given is matched to its bound form by the buffers' keys alone (no
spec is built, no plan looked up); the first call with those buffers builds the spec
from them, plans it and binds it. Element counts are any whole number: the spec takes
them as they come.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from purlin.backends.gpu import arrays
from purlin.errors import SpecError
from purlin.spec import library
from purlin.spec.dtypes import dtype as _dtype


class Collectives:
    """Mixin of :class:`purlin.backends.gpu.world.World`: the library calls. Every call
    takes ``policy=`` (a :class:`purlin.snac.Policy` or dict) and ``stream=``."""

    world: int

    # provided by World
    def run(self, what, inputs, outputs=None, **kw):  # pragma: no cover
        """Run a collective or Schedule (the world implements it)."""
        raise NotImplementedError
    def _per_rank(self, xs, what: str) -> list: raise NotImplementedError  # pragma: no cover
    def _fast(self, key, x, out, stream) -> bool: raise NotImplementedError  # pragma: no cover
    def _remember(self, key, x, out) -> None: raise NotImplementedError  # pragma: no cover

    def _call(self, key: tuple, make: Callable[[list], Any], x, out, policy, stream, bufs=None):
        """Launch the bound call for ``key`` and these buffers, or build its spec
        (``make(buffers)``), run it and bind it for next time."""
        pkey = tuple(sorted(policy.items())) if isinstance(policy, dict) else policy
        key = key + (pkey,)
        if out is not None and self._fast(key, x, out, stream):
            return out
        c = make(self._items(x) if bufs is None else bufs)
        result = self.run(c, x, out, policy=policy, stream=stream)
        if out is not None:
            self._remember(key, x, out)
        return result

    def _items(self, xs) -> list:
        return self._per_rank(xs, "buffers") if xs is not None else []

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

    def _block(self, xs, dtype, what: str) -> int:
        """Bytes of one of W equal blocks of the first buffer (whole elements each)."""
        n, size = self._first_nbytes(xs), _dtype(self._spec_dtype(xs, dtype)).itemsize
        if (n // size) % self.world:
            raise SpecError(f"{what}: {n // size} elements do not split into {self.world} equal blocks; "
                            f"pass a multiple of {self.world} elements, or use the _v form with counts=")
        return n // self.world

    def all_reduce(self, x, out=None, *, op: str = "add", dtype=None, policy=None, stream=None):
        """Every rank's ``out`` = op over every rank's ``x`` (rank order)."""
        return self._call(("all_reduce", op, dtype), lambda xs: library.all_reduce(
            self.world, self._first_nbytes(xs), self._spec_dtype(xs, dtype), op), x, out, policy, stream)

    def all_gather(self, x, out=None, *, dtype=None, policy=None, stream=None):
        """``out`` of every rank = every rank's ``x``, in rank order."""
        return self._call(("all_gather", dtype), lambda xs: library.all_gather(
            self.world, self._first_nbytes(xs), self._spec_dtype(xs, dtype)), x, out, policy, stream)

    def reduce_scatter(self, x, out=None, *, op: str = "add", dtype=None, policy=None, stream=None):
        """Rank q's ``out`` = op over block q of every rank's ``x`` (W equal blocks)."""
        return self._call(("reduce_scatter", op, dtype), lambda xs: library.reduce_scatter(
            self.world, self._block(xs, dtype, "reduce_scatter"), self._spec_dtype(xs, dtype), op),
            x, out, policy, stream)

    def all_to_all(self, x, out=None, *, dtype=None, policy=None, stream=None):
        """Block d of rank s's ``x`` lands as block s of rank d's ``out``."""
        return self._call(("all_to_all", dtype), lambda xs: library.all_to_all(
            self.world, self._block(xs, dtype, "all_to_all"), self._spec_dtype(xs, dtype)),
            x, out, policy, stream)

    def all_gather_v(self, x, out=None, *, counts: Sequence[int], dtype=None, policy=None, stream=None):
        """All-gather with ``counts[r]`` elements from rank r (any counts, zeros too)."""
        def make(xs):
            dt = _dtype(self._spec_dtype(xs, dtype))
            return library.all_gather_v(self.world, [n * dt.itemsize for n in counts], dt.name)
        return self._call(("all_gather_v", tuple(counts), dtype), make, x, out, policy, stream)

    def reduce_scatter_v(self, x, out=None, *, counts: Sequence[int], op: str = "add", dtype=None,
                         policy=None, stream=None):
        """Reduce-scatter where rank q gets ``counts[q]`` elements."""
        def make(xs):
            dt = _dtype(self._spec_dtype(xs, dtype))
            return library.reduce_scatter_v(self.world, [n * dt.itemsize for n in counts], dt.name, op)
        return self._call(("reduce_scatter_v", tuple(counts), op, dtype), make, x, out, policy, stream)

    def all_to_all_v(self, x, out=None, *, counts: Sequence[Sequence[int]], dtype=None, policy=None,
                     stream=None):
        """All-to-all where ``counts[s][d]`` elements go from rank s to rank d."""
        def make(xs):
            dt = _dtype(self._spec_dtype(xs, dtype))
            return library.all_to_all_v(self.world, [[n * dt.itemsize for n in row] for row in counts], dt.name)
        return self._call(("all_to_all_v", tuple(map(tuple, counts)), dtype), make, x, out, policy, stream)

    def broadcast(self, x, out=None, *, root: int = 0, dtype=None, policy=None, stream=None):
        """Every rank's ``out`` = root's ``x``."""
        bufs = self._items(x) + self._items(out)
        return self._call(("broadcast", root, dtype), lambda xs: library.broadcast(
            self.world, self._first_nbytes(xs), self._spec_dtype(xs, dtype), root), x, out, policy, stream,
            bufs)

    def reduce(self, x, out=None, *, root: int = 0, op: str = "add", dtype=None, policy=None, stream=None):
        """Root's ``out`` = op over every rank's ``x``."""
        return self._call(("reduce", root, op, dtype), lambda xs: library.reduce(
            self.world, self._first_nbytes(xs), self._spec_dtype(xs, dtype), op, root), x, out, policy, stream)

    def gather(self, x, out=None, *, root: int = 0, dtype=None, policy=None, stream=None):
        """Root's ``out`` = every rank's ``x`` in rank order."""
        return self._call(("gather", root, dtype), lambda xs: library.gather(
            self.world, self._first_nbytes(xs), self._spec_dtype(xs, dtype), root), x, out, policy, stream)

    def scatter(self, x, out=None, *, root: int = 0, dtype=None, policy=None, stream=None):
        """Rank r's ``out`` = block r of root's ``x``."""
        def make(_):
            n = (self._first_nbytes(self._items(out)) if out is not None else
                 self._block(self._items(x), dtype, "scatter"))
            return library.scatter(self.world, n, self._spec_dtype(self._items(out) + self._items(x), dtype), root)
        return self._call(("scatter", root, dtype), make, x, out, policy, stream, [])
