"""The identity table of bound calls (CPU only): what it finds, and when it must not."""
import gc
import sys
import types

import pytest

from purlin.backends.gpu.identity import ByIdentity


class FakeCupy:
    """Stands for a cupy array: the table reads only its type's module and its id."""
    __module__ = "cupy._core.core"


class FakeTensor:
    """Stands for a torch tensor: module torch, a version counter, and ``meta`` standing
    for what its full key reads (pointer, count, dtype, contiguity)."""
    __module__ = "torch"

    def __init__(self, meta=("ptr", 4)):
        self._version = 0
        self.meta = meta

    def data_ptr(self):
        return self.meta[0]


def fake_key(x):
    return x.meta


def test_the_same_objects_find_their_bound_call():
    t = ByIdentity()
    xs = [FakeCupy() for _ in range(4)]
    assert t.put("k", xs, "bound")
    assert t.get("k", xs) == "bound"
    assert t.get("other", xs) is None
    assert t.get("k", xs[::-1]) is None          # order is part of the key
    assert t.get("k", [FakeCupy() for _ in range(4)]) is None


def test_an_entry_goes_when_any_of_its_buffers_is_collected():
    t = ByIdentity()
    xs = [FakeCupy() for _ in range(3)]
    t.put("k", xs, "bound")
    assert len(t) == 1
    del xs[1]
    gc.collect()
    assert len(t) == 0                           # so a new object reusing the id never matches


def _fake_torch_check(calls):
    """A stand-in for torch._C._tensors_data_ptrs_at_indices_equal (same contract)."""
    def same(tensors, ptrs, idx):
        calls.append(len(idx))
        return all(tensors[i].data_ptr() == ptrs[i] for i in idx)
    return types.SimpleNamespace(_C=types.SimpleNamespace(_tensors_data_ptrs_at_indices_equal=same))


def test_a_torch_tensor_whose_metadata_changed_misses():
    t = ByIdentity(key=fake_key)
    xs = [FakeTensor(), FakeTensor()]
    t.put("k", xs, "bound")
    assert t.get("k", xs) == "bound"
    xs[0]._version += 1
    xs[0].meta = ("other ptr", 4)                # resize_, set_, t_ ...: the key moved
    assert t.get("k", xs) is None
    t.put("k", xs, "bound2")                     # the full check ran again and vouched for it
    assert t.get("k", xs) == "bound2"


@pytest.mark.parametrize("one_call", [False, True], ids=["data_ptr each", "torch's one-call check"])
def test_a_torch_tensor_written_in_place_still_hits_and_rereads_only_what_moved(one_call, monkeypatch):
    calls, reads = [], []
    monkeypatch.setitem(sys.modules, "torch", _fake_torch_check(calls) if one_call else types.ModuleType("torch"))

    def counting_key(x):
        reads.append(x)
        return x.meta
    t = ByIdentity(key=counting_key)
    xs = [FakeTensor(("a", 4)), FakeTensor(("b", 4)), FakeTensor(("c", 4))]
    t.put("k", xs, "bound", keys=[x.meta for x in xs])
    assert reads == []                           # keys the caller read are not read again
    xs[1]._version += 1                          # a data write: same bytes, new version
    assert t.get("k", xs) == "bound"
    assert reads == [xs[1]]                      # only the tensor whose version moved
    assert t.get("k", xs) == "bound" and reads == [xs[1]]   # the entry took the new version
    assert calls == ([3, 3] if one_call else [])  # pointers checked in one call each time


@pytest.mark.parametrize("objs", [[FakeCupy(), None], [FakeCupy(), FakeTensor()], [object()], []])
def test_what_it_cannot_vouch_for_never_enters(objs):
    t = ByIdentity()
    assert not t.put("k", objs, "bound")
    assert len(t) == 0


def test_the_oldest_entry_goes_first_past_the_limit():
    t = ByIdentity(limit=2)
    a, b, c = [FakeCupy()], [FakeCupy()], [FakeCupy()]
    for i, x in enumerate((a, b, c)):
        t.put("k", x, i)
    assert (t.get("k", a), t.get("k", b), t.get("k", c)) == (None, 1, 2)


def test_real_torch_metadata_changes_miss_and_data_writes_hit():
    """What the table rests on for torch: every in-place metadata change bumps _version,
    and the key read again tells a metadata change from a data write."""
    torch = pytest.importorskip("torch", reason="torch is an optional extra")
    x = torch.empty(4, 4)
    t = ByIdentity()
    t.put("k", [x], "bound")
    for change in (lambda: x.t_(), lambda: x.resize_(2, 2), lambda: x.as_strided_((2,), (1,)),
                   lambda: x.set_(torch.empty(3))):
        change()
        assert t.get("k", [x]) is None
        t.put("k", [x], "bound")
    before = x._version
    x.add_(1)                                    # a data write
    x.unsqueeze_(0)                              # a new shape over the very same bytes
    assert x._version > before
    assert t.get("k", [x]) == "bound"
    x.data = torch.empty(5)                      # no version bump, a new pointer
    assert x._version == before + 2 and t.get("k", [x]) is None


@pytest.mark.parametrize("one_call", [False, True], ids=["data_ptr each", "torch's one-call check"])
def test_a_torch_tensor_whose_pointer_moved_without_a_version_bump_misses(one_call, monkeypatch):
    """``x.data = y`` keeps x's version (torch 2.11, seen on the GPU machine): the
    pointer check on every call catches the storage that moved, whether torch checks
    every pointer in one call or the table reads them one by one."""
    calls = []
    monkeypatch.setitem(sys.modules, "torch", _fake_torch_check(calls) if one_call else types.ModuleType("torch"))
    t = ByIdentity(key=fake_key)
    xs = [FakeTensor(("a", 4)), FakeTensor(("b", 4))]
    t.put("k", xs, "bound")
    xs[1].meta = ("elsewhere", 4)                # no version bump
    assert t.get("k", xs) is None
    xs[1].meta = ("b", 4)                        # back where it was bound: the same bytes
    assert t.get("k", xs) == "bound"
    assert calls == ([2, 2] if one_call else [])  # one check of both pointers a call


def test_a_set_of_objects_is_worth_an_entry_only_when_it_comes_again():
    t = ByIdentity()
    xs, ys = [FakeCupy(), FakeCupy()], [FakeCupy(), FakeCupy()]
    assert (t.again("k", xs), t.again("k", ys), t.again("other", xs)) == (False, False, False)
    assert t.again("k", xs) and not t.again("k", xs[::-1])
    assert not t.again("k", xs)                  # met again once: it goes in, the hint is spent
    others = [[FakeCupy()] for _ in range(64)]
    for o in others:                             # only the last 64 sets are remembered
        t.again("k", o)
    assert not t.again("k", ys)


class FakeGuards:
    """Stands for dynamo's TensorGuards: records the tensors' types and ``meta`` (what
    the real one reads: dtype, device, sizes, strides), ``check`` compares them."""

    def __init__(self, *ts, dynamic_dims_sizes=None, dynamic_dims_strides=None):
        assert dynamic_dims_sizes is None and dynamic_dims_strides is None
        self.want = [(type(t), t.meta[1:]) for t in ts]

    def check(self, *ts):
        return len(ts) == len(self.want) and len({id(t) for t in ts}) == len(ts) and all(
            type(t) is k and t.meta[1:] == m for t, (k, m) in zip(ts, self.want))


def _fake_torch_guards(calls):
    torch = _fake_torch_check(calls)
    torch._C._dynamo = types.SimpleNamespace(guards=types.SimpleNamespace(TensorGuards=FakeGuards))
    return torch


def test_with_tensor_guards_new_tensor_objects_over_the_same_memory_hit(monkeypatch):
    """An eager model hands fresh tensor objects at the same pointers every step, and
    writes its inputs: with TensorGuards neither costs an id, a version or a key read."""
    calls, reads = [], []
    monkeypatch.setitem(sys.modules, "torch", _fake_torch_guards(calls))

    def counting_key(x):
        reads.append(x)
        return x.meta
    t = ByIdentity(key=counting_key)
    xs = [FakeTensor(("a", 4)), FakeTensor(("b", 4))]
    t.put("k", xs, "bound", keys=[x.meta for x in xs])
    fresh = [FakeTensor(("a", 4)), FakeTensor(("b", 4))]
    fresh[0]._version = 7                        # written: no matter
    assert t.get("k", fresh) == "bound" and reads == []
    assert t.get("k", [FakeTensor(("a", 4)), FakeTensor(("c", 4))]) is None    # moved
    assert t.get("k", [FakeTensor(("a", 8)), FakeTensor(("b", 4))]) is None    # same pointer, resized
    assert t.get("other", fresh) is None
    assert calls == [2, 2]                       # pointers read only where the metadata held


def test_with_tensor_guards_the_aliasing_must_hold_too(monkeypatch):
    """An in-place call (the output is the input) is guarded over its distinct tensors,
    and the same positions must alias again."""
    monkeypatch.setitem(sys.modules, "torch", _fake_torch_guards([]))
    t = ByIdentity(key=fake_key)
    x, y = FakeTensor(("a", 4)), FakeTensor(("b", 4))
    t.put("k", [x, y, x], "in place")
    assert t.get("k", [x, y, x]) == "in place"
    x2 = FakeTensor(("a", 4))
    assert t.get("k", [x2, y, x2]) == "in place"
    assert t.get("k", [x, y, FakeTensor(("a", 4))]) is None   # the same memory, but no longer aliased
    assert t.get("k", [x, y, None]) is None


def test_real_torch_guards_follow_the_memory_not_the_objects():
    """With a torch that has TensorGuards: fresh views of the same memory hit, a view
    of other memory or shape misses, and ``x.data = y`` at the very same pointer with
    another shape misses (which the version path could not see)."""
    torch = pytest.importorskip("torch", reason="torch is an optional extra")
    from purlin.backends.gpu import identity
    if identity._tensor_guards() is None:
        pytest.skip(f"torch {torch.__version__} has no dynamo TensorGuards")
    base = torch.zeros(16)
    x, out = base[:8], base[8:]
    t = ByIdentity()
    t.put("k", [x, out], "bound")
    assert t.get("k", [base[:8], base[8:]]) == "bound"
    x.add_(1)
    assert t.get("k", [x, out]) == "bound"
    assert t.get("k", [base[:8], base[7:15]]) is None
    assert t.get("k", [base[:8].view(2, 4), out]) is None     # another shape, read again: 8 elements
    assert t.get("k", [base[:8].view(2, 4), out]) is None     # ... which the full key sees alike
    same_ptr = base[:4]
    y = base[:8].clone()
    y.data = same_ptr                            # the same pointer as x, 4 elements
    assert t.get("k", [y, out]) is None
    assert t.get("k", [x, out, x]) is None                    # another arity
