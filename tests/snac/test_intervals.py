"""IntervalMap against a byte-by-byte model: every operation, including the fast paths
(a write past everything stored, a write of exactly one stored piece)."""
from hypothesis import given, strategies as st

from purlin.snac.intervals import IntervalMap

N = 48
_OPS = st.lists(st.tuples(st.sampled_from(["assign", "append", "again", "update", "empty"]),
                          st.integers(0, N), st.integers(0, N), st.integers(0, 3)),
                min_size=1, max_size=30)


def _bytes(m: IntervalMap) -> list:
    out = [None] * N
    for s, e, v in m.items():
        out[s:e] = [v] * (e - s)
    return out


@given(_OPS)
def test_interval_map_matches_a_byte_model(ops):
    m, ref = IntervalMap(), [None] * N
    for kind, a, b, v in ops:
        a, b = min(a, b), max(a, b)
        if kind == "append" and len(m):          # in order, after everything stored
            a = list(m.items())[-1][1]
            b = max(a, b)
        elif kind == "again" and len(m):         # exactly a stored piece
            a, b, _ = list(m.items())[(a + b) % len(m)]
        if kind == "update":
            m.update(a, b, lambda x: (x or 0) + 1)
            ref[a:b] = [(x or 0) + 1 for x in ref[a:b]]
        elif kind == "empty":
            if a < b:
                assert m.is_empty(a, b) == all(x is None for x in ref[a:b])
        else:
            m.assign(a, b, v)
            ref[a:b] = [v] * (b - a)
        assert _bytes(m) == ref
        pieces = list(m.items())
        assert all(s < e for s, e, _ in pieces)
        assert all(e <= s for (_, e, _), (s, _, _) in zip(pieces, pieces[1:]))
        assert [(s, e) for s, e, _ in m.query(a, b)] == [
            (max(s, a), min(e, b)) for s, e, _ in pieces if s < b and e > a]


@given(_OPS)
def test_append_to_is_update_with_a_tuple_append(ops):
    """append_to (sync insertion's reader lists) leaves the very pieces update leaves."""
    fast, slow = IntervalMap(), IntervalMap()
    for kind, a, b, v in ops:
        a, b = min(a, b), max(a, b)
        if kind == "assign":
            fast.assign(a, b, (v,))
            slow.assign(a, b, (v,))
        else:
            fast.append_to(a, b, v)
            slow.update(a, b, lambda x, v=v: (x or ()) + (v,))
        assert list(fast.items()) == list(slow.items())
