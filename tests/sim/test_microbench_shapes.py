"""The executor microbenchmarks are the shapes their docstrings name (CPU only)."""
from purlin.sim import microbench as mb
from purlin.snac.ir import PutPackets, Reduce, WaitPackets


def test_fan_in_deals_the_puts_over_the_push_ctas_and_every_reader_reduces_every_window():
    s = mb.fan_in(m=7, n=2048, q=2, c=512)
    push = [p for p in s.programs if p.role == "push"]
    read = [p for p in s.programs if p.role == "read"]
    assert [len(p.instrs) for p in push] == [4, 3]                    # puts 0, 2, 4, 6 and 1, 3, 5
    assert all(type(i) is PutPackets and i.nbytes == 2048 for p in push for i in p.instrs)
    assert sorted(i.dst.offset for p in push for i in p.instrs) == [j * 2048 for j in range(7)]
    assert len(read) == 4                                             # 2048 / 512 chunks
    for k, p in enumerate(read):
        *waits, red = p.instrs
        assert [type(w) for w in waits] == [WaitPackets] * 7 and type(red) is Reduce
        assert [w.src.offset for w in waits] == [j * 2048 + k * 512 for j in range(7)]
        assert [r.buffer for r in red.srcs] == ["packets"] * 7 + ["input"]
        assert red.srcs[-1].offset == 7 * 2048 + k * 512 and red.dsts[0].offset == k * 512
    assert s.packets_nbytes == 7 * 2048 and s.collective.input.nbytes(0) == 8 * 2048


def test_fan_in_cases_are_measured_with_the_others_and_held_out_of_every_fit():
    names = [(n, p) for n, p, _ in mb.CASES if n == "fan_in"]
    assert [p["q"] for _, p in names] == [1, 2, 7, 1, 2, 7, 1, 3]
    from purlin.sim.validation import held_out
    errs = {mb.case_key(n, p): 0.0 for n, p, _ in mb.CASES}
    errs.update({mb.case_key(n, p): 1.0 + k for k, (n, p) in enumerate(names)})
    assert sorted(e for e in held_out(errs) if e) == [1.0 + k for k in range(len(names))]
