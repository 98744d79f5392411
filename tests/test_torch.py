"""purlin.torch on the CPU: the collectives as torch custom ops, run by the reference
executor, under torch.compile(fullgraph=True), against the spec's oracle. Skips (saying
why) where torch is not installed."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="purlin.torch needs torch (an optional extra)")

import purlin.torch as pt  # noqa: E402
from purlin.errors import SpecError  # noqa: E402
from purlin.spec import evaluate, library  # noqa: E402


def _want(c, xs):
    return evaluate(c, [x.contiguous().view(torch.uint8).numpy() for x in xs])


def _bytes(y):
    return y.contiguous().reshape(-1).view(torch.uint8).numpy()


@pytest.mark.parametrize("dt", (torch.float32, torch.bfloat16, torch.int32, torch.float16))
@pytest.mark.parametrize("count", (1, 7, 4097))
def test_ops_match_the_oracle_at_any_count(dt, count):
    g = torch.Generator().manual_seed(count)
    xs = [(torch.randn(4 * count, generator=g) * 100).to(dt) for _ in range(4)]
    cases = [(pt.all_reduce(xs, "max"), library.all_reduce(4, 4 * count * xs[0].element_size(), pt._dtype(xs[0]), "max")),
             (pt.all_gather(xs), library.all_gather(4, 4 * count * xs[0].element_size(), pt._dtype(xs[0]))),
             (pt.reduce_scatter(xs), library.reduce_scatter(4, count * xs[0].element_size(), pt._dtype(xs[0]), "add")),
             (pt.all_to_all(xs), library.all_to_all(4, count * xs[0].element_size(), pt._dtype(xs[0])))]
    for got, c in cases:
        want = _want(c, xs)
        assert [g.dtype for g in got] == [dt] * 4
        for r in range(4):
            assert np.array_equal(_bytes(got[r]), want[r]), (c.name, r)


def test_compiled_fullgraph_function_calling_the_ops():
    """A function mixing torch ops and Purlin collectives compiles as one graph (no
    break: fullgraph=True raises on one), and computes what eager torch + the oracle do."""
    def step(xs):
        ys = pt.all_reduce([x * 2 for x in xs], "sum")
        zs = pt.reduce_scatter(ys, "max")
        return [z + 1 for z in zs], pt.all_gather(zs)

    xs = [torch.arange(12, dtype=torch.float32) * (r + 1) for r in range(3)]
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    got_z, got_g = compiled(xs)
    total = sum(x * 2 for x in xs)
    assert all(torch.equal(z, total[4 * r:4 * r + 4] + 1) for r, z in enumerate(got_z))
    assert all(torch.equal(g, total) for g in got_g)
    again = compiled([x + 1 for x in xs])   # same shapes: no recompilation needed, new values
    assert torch.equal(again[1][0], sum((x + 1) * 2 for x in xs))


def test_the_ops_pass_torch_opcheck():
    """Schema, fake (meta) implementation and autograd registration agree with the real one."""
    xs = [torch.randn(8) for _ in range(2)]
    torch.library.opcheck(torch.ops.purlin.all_reduce.default, (xs, "add", 0))
    torch.library.opcheck(torch.ops.purlin.all_gather.default, (xs, 0))


def test_bad_calls_name_the_rule():
    with pytest.raises(SpecError, match="do not split into 3 equal blocks"):
        pt.reduce_scatter([torch.zeros(4)] * 3)
    with pytest.raises(SpecError, match="op 'xor'"):
        pt.all_reduce([torch.zeros(4)] * 2, "xor")
    with pytest.raises(SpecError, match="one dtype, shape and device"):
        pt.all_reduce([torch.zeros(4), torch.zeros(5)])
    with pytest.raises(SpecError, match="torch.float64"):
        pt.all_gather([torch.zeros(4, dtype=torch.float64)] * 2)
    with pytest.raises(SpecError, match=r"xs is one Tensor of shape \(4,\); pass one tensor per rank"):
        pt.all_reduce(torch.zeros(4))            # would iterate as four 0-d tensors
    with pytest.raises(SpecError, match="CPU tensors run on the reference executor, which takes no world"):
        pt.all_gather([torch.zeros(4)] * 2, world=object())
    with pytest.raises(SpecError, match="CPU tensors run on the reference executor"):
        torch.ops.purlin.all_reduce([torch.zeros(4)] * 2, "add", 7)   # the op itself checks too
    with pytest.raises(SpecError, match=r"op \['sum'\]"):
        pt.reduce_scatter([torch.zeros(4)] * 2, ["sum"])
