"""The verifier's race pre-check (clocks.tracked_programs) against its definition, pair by
pair: a program is tracked when one of its accesses overlaps another access of the same
group (rank and buffer), one of the two a write."""
from array import array

from hypothesis import given, settings
from hypothesis import strategies as st

from purlin.snac.clocks import tracked_programs


def _pairwise(group, start, end, program, write) -> set[int]:
    out = set()
    n = len(group)
    for x in range(n):
        for y in range(n):
            if x != y and group[x] == group[y] and start[x] < end[y] and start[y] < end[x] \
                    and (write[x] or write[y]):
                out.add(program[x])
    return out


_access = st.tuples(st.integers(0, 3), st.integers(0, 40), st.integers(1, 12), st.integers(0, 5), st.booleans())


@settings(max_examples=300, deadline=None)
@given(st.lists(_access, max_size=30))
def test_tracked_programs_is_the_pairwise_definition(accesses):
    group = [a[0] for a in accesses]
    start = [a[1] for a in accesses]
    end = [a[1] + a[2] for a in accesses]
    program = [a[3] for a in accesses]
    write = [a[4] for a in accesses]
    want = _pairwise(group, start, end, program, write)
    assert tracked_programs(group, start, end, program, write) == want
    # the static scan hands over machine-integer arrays; they must not be changed
    arrays = (array("q", group), array("q", start), array("q", end), array("q", program), array("b", write))
    assert tracked_programs(*arrays) == want
    assert list(arrays[0]) == group and list(arrays[1]) == start and list(arrays[2]) == end
