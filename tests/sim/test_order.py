"""lex_order gives np.lexsort's permutation exactly: the sweeps and water levels that use it
add their terms in that order, so any other order could move a prediction's last bits."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from purlin.sim.order import lex_order

# few distinct values, so most entries tie in one key or in all of them
_FLOATS = st.sampled_from([0.0, -0.0, 1.5, 1.5 + 2 ** -52, 3.0, -2.0, np.inf, 1e300])
_INTS = st.integers(-3, 5)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 60).flatmap(lambda n: st.tuples(
    st.lists(_FLOATS, min_size=n, max_size=n), st.lists(_INTS, min_size=n, max_size=n),
    st.lists(st.booleans(), min_size=n, max_size=n))))
def test_the_order_of_ties_and_values_is_lexsorts(cols):
    t, r, up = np.array(cols[0], float), np.array(cols[1], np.int64), np.array(cols[2], bool)
    for keys in ((up, t, r), (t, r), (r, t), (t,), (up, r)):
        assert lex_order(keys).tolist() == np.lexsort(keys).tolist()


def test_wide_integers_nans_and_too_many_bits_fall_back_to_lexsort():
    rng = np.random.default_rng(7)
    wide = rng.integers(-(1 << 62), 1 << 62, 500)                   # ranked by a sort
    t = rng.choice([0.5, np.nan, 2.0], 500)                          # NaNs: lexsort decides
    many = [rng.integers(0, 1 << 20, 500) for _ in range(4)]         # past 62 packed bits
    for keys in ((t, wide), (wide, wide % 3), tuple(many), (rng.random(500), wide)):
        assert lex_order(keys).tolist() == np.lexsort(keys).tolist()


def test_a_sweep_sized_input_orders_resource_then_time_then_ends_first():
    rng = np.random.default_rng(3)
    n = 40_000
    rr = rng.integers(0, 3000, n)
    tt = rng.choice(np.linspace(0.0, 50.0, 900), n)
    up = rng.random(n) < 0.5
    order = lex_order((up, tt, rr))
    assert order.tolist() == np.lexsort((up, tt, rr)).tolist()
    key = list(zip(rr[order], tt[order], up[order]))
    assert key == sorted(key) and sorted(order.tolist()) == list(range(n))
