"""Shared test helpers: random inputs per dtype and comparison with the semantic oracle."""
import json
from pathlib import Path

import numpy as np
import pytest

from purlin.spec import evaluate


def random_inputs(c, rng):
    dt = c.dtype
    out = []
    for r in range(c.world):
        n = c.input.nbytes(r) // dt.itemsize
        if dt.name == "int32":
            x = rng.integers(-(1 << 20), 1 << 20, n).astype(np.int32)
        else:   # every float dtype, fp8 too: finite values
            x = rng.standard_normal(n).astype(np.float32).astype(dt.numpy)
        out.append(x.view(np.uint8))
    return out


def assert_matches(c, schedule, got, inputs):
    """Bit-exact where the schedule reduces in rank order; otherwise (a ring) within rounding."""
    want = evaluate(c, inputs)
    ring = schedule.reduction == "any"
    for q in range(c.world):
        if ring and c.dtype.is_float:
            a = got[q].view(c.dtype.numpy).astype(np.float64)
            b = want[q].view(c.dtype.numpy).astype(np.float64)
            tol = 0.02 * c.world if c.dtype.itemsize == 2 else 1e-5
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=f"rank {q}")
        else:
            assert np.array_equal(got[q], want[q]), f"rank {q} differs from the spec"


RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"


def load_result(name: str) -> dict:
    """A committed file of benchmarks/results, parsed; the test skips if it is not committed."""
    path = RESULTS / name
    if not path.exists():
        pytest.skip(f"{name} is not committed")
    return json.loads(path.read_text())
