import numpy as np
import pytest

from purlin.spec import evaluate, library, packed, scattered, transposed


def ints(c, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(-1000, 1000, c.input.nbytes(r) // 4).astype(np.int32) for r in range(c.world)]


def test_all_gather_naming():
    c = library.all_gather(3, 16, "int32").validate()
    assert [b.name for b in c.input.ranks[2]] == ["2"]
    assert [b.name for b in c.output.ranks[0]] == ["0", "1", "2"]
    x = ints(c)
    out = evaluate(c, x)
    for q in range(3):
        assert np.array_equal(out[q].view(np.int32), np.concatenate(x))


def test_reduce_scatter_sums_block_q_on_rank_q():
    c = library.reduce_scatter(4, 32, "int32").validate()
    x = ints(c)
    out = evaluate(c, x)
    total = sum(x)
    for q in range(4):
        assert np.array_equal(out[q].view(np.int32), total[q * 8:(q + 1) * 8])


def test_all_to_all_v_transposes_with_zeros():
    m = [[16, 0, 32], [48, 16, 0], [0, 0, 16]]
    c = library.all_to_all_v(3, m).validate()
    assert [b.nbytes for b in c.output.ranks[0]] == [16, 48, 0]
    x = [np.arange(c.input.nbytes(r), dtype=np.uint8) + 10 * r for r in range(3)]
    out = evaluate(c, x)
    assert np.array_equal(out[0][16:64], x[1][:48])       # 1->0 is rank 1's first slice


@pytest.mark.parametrize("op,fn", [("max", np.maximum), ("min", np.minimum), ("mul", np.multiply)])
def test_reduce_ops(op, fn):
    c = library.all_reduce(3, 16, "int32", op)
    x = ints(c)
    want = fn(fn(x[0], x[1]), x[2])
    assert np.array_equal(evaluate(c, x)[2].view(np.int32), want)


def test_bf16_accumulates_in_fp32_and_rounds_once():
    import ml_dtypes
    c = library.all_reduce(3, 16, "bf16")
    vals = [np.full(8, v, ml_dtypes.bfloat16) for v in (128.0, 0.5, 0.5)]
    out = evaluate(c, vals)[0].view(ml_dtypes.bfloat16)
    assert float(out[0]) == 129.0  # bf16 step by step would stay at 128


def test_rooted_collectives():
    b = library.broadcast(3, 16, root=2).validate()
    assert b.input.ranks[0] == () and b.input.ranks[2][0].nbytes == 16
    r = library.reduce(3, 16, root=1).validate()
    assert r.output.ranks[0] == () and r.output.ranks[1][0].name == "x"
    g = library.gather(3, 16, root=0).validate()
    assert [b.name for b in g.output.ranks[0]] == ["0", "1", "2"] and g.output.ranks[1] == ()
    s = library.scatter(3, 16, root=1).validate()
    assert [b.name for b in s.input.ranks[1]] == ["0", "1", "2"]


def test_from_size_follows_nccl_tests():
    assert library.from_size("allreduce", 8, 1024).input.nbytes(0) == 1024
    assert library.from_size("allgather", 8, 1024).output.nbytes(0) == 1024
    assert library.from_size("reducescatter", 8, 1024).input.nbytes(0) == 1024
    assert library.from_size("alltoall", 8, 1024).input.nbytes(3) == 1024
    v = library.from_size("allgatherv", 8, 1 << 20)
    sizes = [v.input.nbytes(r) for r in range(8)]
    assert 0 in sizes and all(s % 16 == 0 for s in sizes) and sum(sizes) <= 1 << 20


def test_vocabulary_constructors():
    assert [b.name for b in transposed(2, 16).ranks[0]] == ["0->0", "1->0"]
    assert [b.nbytes for b in scattered(2, [[16, 32], [0, 16]]).ranks[1]] == [0, 16]
    assert packed(3, [16, 0, 32]).nbytes(2) == 32
