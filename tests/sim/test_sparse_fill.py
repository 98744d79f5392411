"""Wide paths kept once each (purlin.sim.paths) and solved over them (purlin.sim.sparse_fill):
the same rates, levels and books as the dense flow x position form, to rounding (a pattern's
flows are summed before its weights are applied, the dense form sums flow by flow)."""
import contextlib
import math

import numpy as np
from hypothesis import given, settings, strategies as st

from purlin.sim import paths
from purlin.sim.fluid import FluidModel
from purlin.sim.maxmin import _water_levels, fill, kept_below, progressive
from purlin.sim.paths import Rows
from purlin.sim.sparse_fill import _water_levels as water_levels_rows
from purlin.sim.sparse_fill import fill_rows, kept_below_rows


@contextlib.contextmanager
def _chunk(n):
    """Expand n entries at a time (small: every sum crosses chunks, every level run too)."""
    old, paths.CHUNK = paths.CHUNK, n
    try:
        yield
    finally:
        paths.CHUNK = old


@st.composite
def _wide(draw):
    """A random instance wider than the column form's 8 positions: paths of 1 to k
    resources at any positions (the dummy pads the rest), some flows repeating another's
    path (as flows of one FlowSpec do), weights that are not all dyadic (a link's 1/0.9),
    caps from a few values or none, capacities from a few values and one far above any
    demand (a dead resource)."""
    k = draw(st.sampled_from([9, 12, 20]))
    n_res = k * draw(st.integers(1, 3))
    capacity = np.array(draw(st.lists(st.sampled_from([40.0, 60.0, 90.0, 150.0, 1e6]),
                                      min_size=n_res, max_size=n_res)) + [np.inf])
    weights = draw(st.sampled_from([(1.0,), (1.0, 2.0), (0.5, 1.0, 3.0), (1.0, 1 / 3), (1 / 0.9, 1.0)]))
    n = draw(st.integers(1, 50))
    idx, w = np.full((n, k), n_res), np.zeros((n, k))
    for f in range(n):
        if f and draw(st.integers(0, 2)) == 0:   # another flow's path
            g = draw(st.integers(0, f - 1))
            idx[f], w[f] = idx[g], w[g]
            continue
        res = draw(st.lists(st.integers(0, n_res - 1), min_size=1, max_size=k, unique=True))
        for j, r in zip(draw(st.permutations(range(k))), res):
            idx[f, j], w[f, j] = r, draw(st.sampled_from(weights))
    cap = np.array(draw(st.lists(st.sampled_from([math.inf, 10.0, 20.0, 40.0, 100 / 3, 45.5]),
                                 min_size=n, max_size=n)))
    return idx, w, cap, capacity, n_res


def _rows(idx, w, dummy, shared):
    """The flows as Rows: each its own pattern, or equal paths sharing one."""
    if not shared:
        return Rows.of_dense(idx, w, dummy)
    key = {}
    pid = np.array([key.setdefault((idx[f].tobytes(), w[f].tobytes()), len(key)) for f in range(len(idx))])
    first = [int(np.flatnonzero(pid == p)[0]) for p in range(len(key))]
    r = Rows.of_dense(idx[first], w[first], dummy)
    return Rows(r.ptr, r.res, r.w, pid)


def _same(a, b):
    """Equal to rounding: a few units in the last place of the values compared (inf
    where both are), nothing more."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    return a.shape == b.shape and np.allclose(a, b, rtol=1e-12, atol=1e-9)


@settings(max_examples=300, deadline=None)
@given(_wide(), st.booleans(), st.integers(1, 40), st.data())
def test_patterns_give_the_dense_rates(inst, shared, chunk, data):
    """fill over patterns is the dense fill (its row-by-row form) to rounding, alone
    and with flows held at their rates; both are progressive filling."""
    idx, w, cap, capacity, dummy = inst
    rows = _rows(idx, w, dummy, shared)
    with _chunk(chunk):
        try:
            rate, rem = fill(idx, w, cap, capacity, dummy)
        except ValueError as e:
            got = None
            try:
                fill_rows(rows, cap, capacity, dummy, idx.shape[1])
            except ValueError as e2:
                got = str(e2)
            assert got == str(e)
            return
        r2, m2 = fill_rows(rows, cap, capacity, dummy, idx.shape[1])
        assert _same(rate, r2) and _same(rem, m2)
        want, _ = progressive(idx, w, cap, capacity, dummy)
        assert np.allclose(r2, want, rtol=1e-9, atol=1e-9)
        keep = np.array(data.draw(st.lists(st.booleans(), min_size=len(idx), max_size=len(idx))))
        kr = np.where(keep, rate, np.nan)
        a = fill(idx, w, cap, capacity, dummy, keep, kr)
        b = fill_rows(rows, cap, capacity, dummy, idx.shape[1], keep, kr)
        assert _same(a[0], b[0]) and _same(a[1], b[1])


@settings(max_examples=300, deadline=None)
@given(_wide(), st.booleans(), st.integers(1, 40), st.data())
def test_kept_below_over_patterns_is_the_dense_one(inst, shared, chunk, data):
    """Which flows keep their rates after a change, and every resource's water level (the
    cumulative sums that cross resources included), as the dense form gives them."""
    idx, w, cap, capacity, dummy = inst
    n = len(idx)
    rows = _rows(idx, w, dummy, shared)
    rate = progressive(idx, w, np.where(np.isinf(cap), 50.0, cap), capacity, dummy)[0]
    new = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    scale = np.array(data.draw(st.lists(st.sampled_from([1.0, 0.5, 1.1]), min_size=n, max_size=n)))
    old = np.where(new, 0.0, rate * scale)    # ties among old rates, and rates off the optimum
    left = data.draw(st.lists(st.floats(1.0, 50.0), max_size=2))
    with _chunk(chunk):
        assert (kept_below(idx, w, cap, capacity, dummy, old, new, left)
                == kept_below_rows(rows, cap, capacity, dummy, old, new, left)).all()
        mark = np.zeros(len(capacity), bool)
        mark[idx[new]] = True
        mark[dummy] = False
        touched = mark.nonzero()[0]
        if len(touched):
            with np.errstate(divide="ignore", invalid="ignore"):
                assert _same(_water_levels(idx, w, capacity, old, new, touched),
                             water_levels_rows(rows, capacity, old, new, touched))


_POOL = [tuple(range(i, i + k)) for i, k in ((0, 10), (3, 12), (6, 9), (1, 14), (0, 2), (5, 1), (2, 3))]
_POOL_W = {p: tuple([1.0, 1 / 0.9, 2.0][j % 3] for j in range(len(p))) for p in _POOL}


def _books(batches, knee, paths_on):
    """Start each batch of flows at once and run every flow to completion; everything the
    model keeps, step by step."""
    m = FluidModel([100.0, 60.0, 150.0, 40.0, 90.0, 120.0, 80.0, 70.0] * 2, [knee] * 16, shared_paths=paths_on)
    seen = []
    for batch in batches:
        for path, fresh, cap, nbytes in batch:
            res = list(path) if fresh else path     # a fresh list is a new path each time
            cap = cap if knee == 0 or cap < math.inf else 1e4    # soft: every flow has a demand
            m.add(res, list(_POOL_W[path]) if fresh else _POOL_W[path], cap, nbytes)
        m.recompute()
        m.advance(m.next_finish_us())
        m.pop_finished()
        m.recompute()
        seen.append((m.now_us, m.rate.tolist(), m.speed.tolist(), m.finish.tolist(), list(m._rem),
                     m.bytes_on.tolist()))
    while m.active_count:
        m.advance(m.next_finish_us())
        m.pop_finished()
        m.recompute()
        seen.append((m.now_us, m.rate.tolist(), m.finish.tolist(), list(m._rem), m.bytes_on.tolist()))
    return seen, m


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.sampled_from(_POOL), st.booleans(), st.sampled_from([5.0, 20.0, math.inf]),
                                   st.sampled_from([50.0, 400.0])),
                         min_size=1, max_size=40), min_size=1, max_size=4),
       st.sampled_from([0.0, 4.0]))
def test_a_model_with_wide_paths_keeps_the_dense_books(batches, knee):
    """The model switches to patterns at its first wide path (flows already running move
    over) and then keeps the same rates, speeds (soft knees too), finish times, unused
    capacity and bytes, to rounding, as with the dense arrays: step for step, the same
    flows finish together."""
    sparse, m = _books(batches, knee, True)
    dense, d = _books(batches, knee, False)
    assert len(sparse) == len(dense)
    for a, b in zip(sparse, dense):
        assert len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    assert (m._paths is not None) == (d._fanout > 8) and d._paths is None


def test_the_store_keeps_each_path_once_and_drops_those_that_ended():
    """Two thousand flows of five 400-wide paths are five patterns, no dense arrays; paths
    given as fresh lists, each once, are dropped (and the live ones renumbered) once they
    fill the store half, and the rates stay those of the dense model."""
    caps = [1000.0] * 2000
    shared = [tuple(range(i, i + 400)) for i in range(0, 500, 100)]
    wts = {p: (1.0,) * 400 for p in shared}

    def run(paths_on):
        m = FluidModel(caps, shared_paths=paths_on)
        for f in range(2000):
            m.add(shared[f % 5], wts[shared[f % 5]], 3.0 + f % 7, 100.0 + f)
        m.recompute()
        counts = [m._paths.count if m._paths else 0]
        for f in range(300):    # each a path of its own, one after another
            m.add(list(range(1000 + f, 1030 + f)), [2.0] * 30, 7.0, 10.0)
            m.recompute()
            m.advance(m.next_finish_us())
            m.pop_finished()
            counts.append(m._paths.count if m._paths else 0)
        m.recompute()
        return m, counts, m.rate.tolist(), m.bytes_on.tolist()

    m, counts, rate, bytes_on = run(True)
    d, _, rate_d, bytes_d = run(False)
    assert counts[0] == 5 and m.idx is None and d.idx.shape[1] >= 400
    assert max(counts) < 300 and min(counts[1:]) >= 5          # ended paths were dropped
    assert _same(rate, rate_d) and _same(bytes_on, bytes_d)
