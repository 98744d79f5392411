"""Every invalid spec fails at the boundary with a message naming rank, block and rule."""
import pytest

from purlin.errors import PlanError, SpecError
from purlin.snac import Policy, plan
from purlin.spec import Collective, Layout, library

AG2 = Layout.of([[("0", 16), ("1", 16)]] * 2)


def col(inp, out, op="copy", dtype="fp32", name="c"):
    return Collective(name, Layout.of(inp), Layout.of(out), op, dtype)


BAD = [
    # (spec builder, fragments the message must contain)
    (lambda: col([[("x", 16)], [("x", 16)]], [[("x", 16)], [("x", 16)]]),
     ["output rank 0", "'x'", "2 sources", "exactly one source"]),
    (lambda: col([[("a", 16)], [("b", 16)]], [[("a", 16)], [("z", 16)]]),
     ["output rank 1", "'z'", "no input block named 'z'", "needs a source"]),
    (lambda: col([[("a", 32)], []], [[], [("a", 16)]]),
     ["output rank 1", "'a'", "16 B disagrees", "rank 0", "sizes match"]),
    (lambda: col([[("a", 16)], [("a", 32)]], [[("a", 16)], [("a", 16)]], op="add"),
     ["output rank 0", "'a'", "input rank 1", "32 B"]),
    (lambda: library.all_reduce(2, 32, "fp8_e4m3"),
     ["'add' is not supported for dtype fp8_e4m3", "copy-only"]),
    (lambda: library.reduce_scatter(2, 32, "fp8_e5m2", op="max"),
     ["'max' is not supported for dtype fp8_e5m2"]),
    (lambda: col([[("a", 16)], [("b", 16)]], [[("a", 16)]]),
     ["world size mismatch", "2 ranks", "1"]),
    (lambda: col([[("a", 6)], []], [[], [("a", 6)]], dtype="fp32"),
     ["input rank 0", "'a'", "not a whole number of fp32 elements"]),
    (lambda: col([[("a", 16), ("a", 16)], []], [[], [("a", 16)]]),
     ["input rank 0", "'a'", "named twice"]),
    (lambda: col([[("a", 16)], []], [[], [("a", 16), ("a", 16)]]),
     ["output rank 1", "named twice"]),
    (lambda: col([[("a", -16)], []], [[], [("a", -16)]]),
     ["input rank 0", "'a'", "size -16", "non-negative"]),
    (lambda: col([[("", 16)], []], [[], [("", 16)]]),
     ["input rank 0", "empty block name"]),
    (lambda: col([[("a", 16)], []], [[], [("a", 16)]], op="xor"),
     ["op 'xor' is unknown", "copy, add, max, min, mul"]),
    (lambda: col([[("a", 16)], []], [[], [("a", 16)]], dtype="fp64"),
     ["dtype 'fp64'", "unknown"]),
    (lambda: library.broadcast(4, 64, root=4), ["root 4", "world of 4"]),
    (lambda: library.all_gather_v(3, [16, 16]), ["2 sizes", "world of 3"]),
    (lambda: library.all_to_all_v(2, [[16, 16]]), ["2 x 2", "got 1 rows"]),
    (lambda: library.from_size("allfoo", 4, 64), ["'allfoo' is not in the library"]),
]


@pytest.mark.parametrize("build,fragments", BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_bad_spec_message(build, fragments):
    with pytest.raises(SpecError) as e:
        build().validate()
    for frag in fragments:
        assert frag in str(e.value), (frag, str(e.value))


def test_at_least_fifteen_distinct_rules():
    assert len(BAD) >= 15


def test_alignment_is_a_rule_only_when_asked():
    """Any whole number of elements is a valid spec; ``validate(align)`` adds the rule for
    an executor that moves only whole vectors, and names block, offset and size."""
    c = col([[("a", 48)], []], [[], [("a", 48)]])
    c.validate(16)
    with pytest.raises(SpecError, match="not aligned to 32 B"):
        c.validate(32)
    odd = col([[("a", 16), ("b", 8)], []], [[], [("b", 8)]], dtype="fp32")
    assert odd.validate() is odd
    with pytest.raises(SpecError, match=r"input rank 0, block 'b': offset 16 / size 8 B not aligned to 16 B"):
        odd.validate(16)
    with pytest.raises(SpecError, match="not aligned to 16 B"):
        col([[("a", 20)], []], [[], [("a", 20)]]).validate(16)


def test_the_policy_align_cuts_pieces_but_refuses_nothing():
    """Policy.align is where the planner cuts pieces (a 48 B block at align 32: 32 + 16),
    not a rule on the spec."""
    c = library.all_reduce(2, 48, "fp32")
    s = plan(c, policy=Policy(align=32, regime="direct", algorithm="two_shot", chunk_nbytes=32))
    sizes = sorted({i.nbytes for _, _, i in s.instructions() if hasattr(i, "nbytes")})
    assert sizes == [16, 32]


def test_topology_world_mismatch_names_both():
    with pytest.raises(SpecError, match="topology hgx-h200-8 has 8 ranks, the collective has 4"):
        plan(library.all_gather(4, 64), "hgx-h200-8")


def test_bad_policy_fields():
    with pytest.raises(PlanError, match="unknown field.*chunk"):
        Policy.from_dict({"chunk": 5})
    with pytest.raises(PlanError, match="regime 'fast'"):
        plan(library.all_gather(2, 64), policy=Policy(regime="fast"))
    with pytest.raises(PlanError, match="chunk_nbytes 24 is not a multiple of align 16"):
        plan(library.all_gather(2, 64), policy=Policy(chunk_nbytes=24))
    with pytest.raises(PlanError, match="cta_budget"):
        plan(library.all_gather(2, 64), cta_budget=0)


def test_ring_needed_when_ranks_cannot_reach():
    from purlin.topology import load_topology
    t = load_topology("mesh-2d-16")
    c = library.all_gather(16, 64)
    with pytest.raises(PlanError, match="cannot reach directly on mesh-2d-16; use algorithm='ring'"):
        plan(c, t, Policy(algorithm="one_shot"))
    s = plan(c, t)  # auto picks the ring
    assert s.policy["algorithm"] == "ring"
