"""Any element count on the GPU: counts 1 to 67, primes, 4097, V splits with odd and zero
counts, every dtype and op, buffers off the 16-byte grid; every byte against the spec's
oracle (``purlin.spec.evaluate``). Marked ``gpu``; skipped (saying why) without a GPU."""
import numpy as np
import pytest

from purlin.snac import Policy
from purlin.spec import evaluate, library
from purlin.spec.dtypes import all_dtypes, dtype
from tests.backends.gpu.test_gpu_loopback import cp, run_and_check, world  # noqa: F401 (fixture)
from tests.helpers import random_inputs

pytestmark = pytest.mark.gpu

DTYPES = [d.name for d in all_dtypes()]
REDUCING = [d.name for d in all_dtypes() if d.accumulator is not None]
FIXED = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


def spec(name, w, count, dt, op="add", root=1):
    """The library collective of ``count`` elements per block (per rank for AllReduce)."""
    n = count * dtype(dt).itemsize
    f = getattr(library, name)
    if name in ("all_reduce", "reduce_scatter"):
        return f(w, n, dt, op)
    if name == "reduce":
        return f(w, n, dt, op, root)
    if name in ("broadcast", "gather", "scatter"):
        return f(w, n, dt, root)
    if name.endswith("_v"):
        raise ValueError(name)
    return f(w, n, dt)


@pytest.mark.parametrize("name", FIXED)
def test_counts_1_to_67(cp, name):
    """Every count from 1 to 67 elements, the dtype cycling through every one that the
    collective takes (so each dtype meets odd and even counts)."""
    dts = REDUCING if "reduce" in name else DTYPES
    for count in range(1, 68):
        run_and_check(cp, world(4), spec(name, 4, count, dts[count % len(dts)]), calls=1)


@pytest.mark.parametrize("name", [n for n in library.ALL if not n.endswith("_v")])
@pytest.mark.parametrize("count", (7, 13, 1001, 4097))
def test_primes_and_4097_every_dtype(cp, name, count):
    dts = REDUCING if "reduce" in name else DTYPES
    for dt in dts:
        run_and_check(cp, world(8), spec(name, 8, count, dt), calls=1)


@pytest.mark.parametrize("op", ("add", "max", "min", "mul"))
@pytest.mark.parametrize("dt", REDUCING)
def test_every_op_at_odd_counts(cp, op, dt):
    for name in ("all_reduce", "reduce_scatter", "reduce"):
        for count in (1, 3, 1001):
            run_and_check(cp, world(8), spec(name, 8, count, dt, op), calls=1)


@pytest.mark.parametrize("regime", ("latency", "throughput", "direct"))
@pytest.mark.parametrize("name", library.PURLIN_SEVEN)
def test_each_regime_at_odd_counts(cp, name, regime):
    for dt, count in (("bf16", 4097), ("fp8_e4m3", 13), ("fp32", 1001)):
        if "reduce" in name and dt.startswith("fp8"):
            continue
        c = _v(name, 8, dt, count) if name.endswith("_v") else spec(name, 8, count, dt)
        run_and_check(cp, world(8), c, Policy(regime=regime), calls=2)


def _v(name, w, dt, count, seed=0):
    """A V form with odd and zero element counts."""
    size = dtype(dt).itemsize
    rng = np.random.default_rng(seed + count)
    counts = [int(x) for x in rng.integers(0, count, w)]
    counts[1] = 0
    counts[2] = 1 + 2 * (count // 2)   # odd
    if name == "all_to_all_v":
        rows = [[int(x) * size for x in rng.integers(0, count, w)] for _ in range(w)]
        rows[0][3] = 0
        rows[1][1] = 7 * size
        return library.all_to_all_v(w, rows, dt)
    if name == "all_gather_v":
        return library.all_gather_v(w, [n * size for n in counts], dt)
    return library.reduce_scatter_v(w, [n * size for n in counts], dt, "add")


@pytest.mark.parametrize("name", ("all_gather_v", "reduce_scatter_v", "all_to_all_v"))
@pytest.mark.parametrize("dt", ("fp32", "bf16", "fp8_e5m2", "int32"))
def test_v_splits_with_odd_and_zero_counts(cp, name, dt):
    if "reduce" in name and dt.startswith("fp8"):
        pytest.skip("fp8 is copy-only (the spec refuses a reduction over it)")
    for seed, count in ((0, 5), (1, 67), (2, 4097)):
        run_and_check(cp, world(8), _v(name, 8, dt, count, seed), calls=2)


def test_buffers_off_the_grid_and_library_calls_of_odd_counts(cp):
    """Inputs and outputs that start 2 bytes past an allocation (bf16 views): the world
    runs them on the unaligned kernel; library calls take the odd counts as they come."""
    w = world(4)
    rng = np.random.default_rng(3)
    for count in (1, 7, 4097):
        c = library.all_gather(4, 2 * count, "bf16")
        ins = random_inputs(c, rng)
        want = evaluate(c, ins)
        base_in = [cp.zeros(2 * count + 2, cp.uint8) for _ in range(4)]
        base_out = [cp.zeros(8 * count + 2, cp.uint8) for _ in range(4)]
        xs, outs = [], []
        for r in range(4):
            base_in[r][2:] = cp.asarray(ins[r])
            xs.append(base_in[r][2:])
            outs.append(base_out[r][2:])
        w.all_gather(xs, outs, dtype="bf16")
        w.synchronize()
        for r in range(4):
            assert bool(cp.array_equal(outs[r], cp.asarray(want[r]))), (count, r)
    xs = [cp.arange(1001, dtype=cp.float32) * (r + 1) for r in range(4)]
    outs = [cp.empty(1001, cp.float32) for _ in range(4)]
    w.all_reduce(xs, outs)
    w.synchronize()
    assert all(bool(cp.array_equal(o, cp.arange(1001, dtype=cp.float32) * 10)) for o in outs)
