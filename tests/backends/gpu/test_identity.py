"""The identity table of bound calls (CPU only): what it finds, and when it must not."""
import gc

import pytest

from purlin.backends.gpu.identity import ByIdentity


class FakeCupy:
    """Stands for a cupy array: the table reads only its type's module and its id."""
    __module__ = "cupy._core.core"


class FakeTensor:
    """Stands for a torch tensor: module torch and a version counter."""
    __module__ = "torch"

    def __init__(self):
        self._version = 0


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


def test_a_torch_tensor_changed_in_place_misses():
    t = ByIdentity()
    xs = [FakeTensor(), FakeTensor()]
    t.put("k", xs, "bound")
    assert t.get("k", xs) == "bound"
    xs[0]._version += 1                          # resize_, set_, t_ ... or a write
    assert t.get("k", xs) is None
    t.put("k", xs, "bound2")                     # the full check ran again and vouched for it
    assert t.get("k", xs) == "bound2"


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


def test_real_torch_metadata_changes_bump_the_version():
    """What the table rests on for torch: every in-place metadata change bumps _version."""
    torch = pytest.importorskip("torch", reason="torch is an optional extra")
    x = torch.empty(4, 4)
    t = ByIdentity()
    t.put("k", [x], "bound")
    for change in (lambda: x.t_(), lambda: x.resize_(2, 2), lambda: x.as_strided_((2,), (1,)),
                   lambda: x.set_(torch.empty(3)), lambda: x.unsqueeze_(0)):
        change()
        assert t.get("k", [x]) is None
        t.put("k", [x], "bound")
