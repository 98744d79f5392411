"""The reference executor equals the spec's semantics for every collective and policy."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from purlin.backends.reference import Reference
from purlin.snac import Policy, plan
from purlin.spec import Collective, Layout, library
from purlin.spec.dtypes import all_dtypes
from tests.helpers import assert_matches, random_inputs

POLICIES = [Policy(regime=r, algorithm=a) for r in ("latency", "throughput", "direct")
            for a in ("one_shot", "two_shot")] + [Policy(regime="throughput", algorithm="ring")]


def collectives(w, n, dtype="fp32", seed=0):
    yield library.all_reduce(w, n * w, dtype)
    yield library.all_gather(w, n, dtype)
    yield library.reduce_scatter(w, n, dtype)
    yield library.all_to_all(w, n, dtype)
    yield library.all_gather_v(w, library.v_splits(w, n * w, seed=seed), dtype)
    yield library.reduce_scatter_v(w, library.v_splits(w, n * w, seed=seed + 1), dtype)
    yield library.all_to_all_v(w, [library.v_splits(w, n * w, seed=seed + r) for r in range(w)], dtype)
    yield library.broadcast(w, n, dtype, root=w - 1)
    yield library.reduce(w, n, dtype, root=w // 2)
    yield library.gather(w, n, dtype, root=0)
    yield library.scatter(w, n, dtype, root=w - 1)


def check(c, pol, rng, calls=1, chunk=64, staging=256):
    s = plan(c, policy=pol.with_(chunk_nbytes=chunk, staging_nbytes=staging))
    ref = Reference(s)
    outs = [np.full(c.output.nbytes(r), 0xCD, np.uint8) for r in range(c.world)]  # poisoned
    for _ in range(calls):
        x = random_inputs(c, rng)
        assert_matches(c, s, ref(x, outs), x)
    return s


@pytest.mark.parametrize("pol", POLICIES, ids=lambda p: f"{p.regime}-{p.algorithm}")
@pytest.mark.parametrize("w", [1, 2, 3, 5, 8])
def test_every_collective_every_policy(w, pol):
    rng = np.random.default_rng(w)
    for c in collectives(w, 96):
        check(c, pol, rng)


@pytest.mark.parametrize("w", [13, 16])
def test_larger_worlds(w):
    rng = np.random.default_rng(w)
    for pol in POLICIES[2:5]:
        for c in collectives(w, 32):
            check(c, pol, rng)


def test_world_72():
    rng = np.random.default_rng(72)
    for c in (library.all_reduce(72, 72 * 16), library.all_to_all_v(72, [library.v_splits(72, 72 * 32, seed=r) for r in range(72)]),
              library.all_gather(72, 16)):
        check(c, Policy(regime="throughput"), rng, chunk=256, staging=4096)


@pytest.mark.parametrize("dt", [d.name for d in all_dtypes()])
def test_every_dtype(dt):
    rng = np.random.default_rng(3)
    for c in collectives(4, 64, dt):
        if c.is_reduce and c.dtype.accumulator is None:
            continue
        for pol in (POLICIES[0], POLICIES[3], POLICIES[-1]):
            check(c, pol, rng)


def test_repeated_calls_without_clearing_stay_correct():
    """Epochs: flags and packet tags are never cleared; staging halves alternate."""
    rng = np.random.default_rng(5)
    for pol in POLICIES:
        for c in (library.all_reduce(4, 512), library.all_to_all(3, 96), library.broadcast(3, 128, root=1)):
            check(c, pol, rng, calls=5, chunk=32, staging=64)  # slots cycle within a call too


def test_stale_flags_would_be_caught():
    """With no epoch advance, call 2's waits pass on call 1's flags and read stale data."""
    from dataclasses import replace
    c = library.all_gather(3, 64)
    s = plan(c, policy=Policy(regime="throughput", chunk_nbytes=32))
    ref = Reference(replace(s, epoch_stride=0))
    rng = np.random.default_rng(0)
    ref(random_inputs(c, rng))
    x = random_inputs(c, rng)
    with pytest.raises(AssertionError):
        assert_matches(c, s, ref(x), x)


def test_user_defined_permuted_all_gather_end_to_end():
    """A collective the library lacks, in a few lines: AllGather in a permuted order."""
    perm = [2, 0, 3, 1]
    c = Collective("all_gather_perm", Layout.of([[(str(r), 32)] for r in range(4)]),
                   Layout.of([[(str(p), 32) for p in perm]] * 4), "copy", "fp16")
    rng = np.random.default_rng(1)
    for pol in POLICIES:
        s = check(c, pol, rng)
    x = random_inputs(c, rng)
    out = Reference(s)(x)
    assert np.array_equal(out[1][:32], x[2]) and np.array_equal(out[1][96:], x[1])


@settings(max_examples=40, deadline=None)
@given(w=st.integers(1, 7), units=st.lists(st.integers(0, 6), min_size=49, max_size=49),
       which=st.integers(0, 10), pol=st.sampled_from(POLICIES), chunk=st.sampled_from([16, 48, 128]),
       dt=st.sampled_from(["fp32", "bf16", "int32", "fp16"]))
def test_property_reference_equals_semantics(w, units, which, pol, chunk, dt):
    sizes = [[16 * units[(r * 7 + q) % 49] for q in range(w)] for r in range(w)]
    c = [library.all_to_all_v(w, sizes, dt), library.all_gather_v(w, sizes[0], dt),
         library.reduce_scatter_v(w, sizes[0], dt), library.all_reduce(w, 16 * (1 + units[0]) * w, dt)][which % 4]
    check(c, pol, np.random.default_rng(which), calls=2, chunk=chunk, staging=max(2 * chunk, 256))
