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


def test_put_wave_is_one_run_of_puts_and_one_reader_of_its_first_or_last_window():
    s = mb.put_wave(m=7, n=2048, last=True)
    push, read = s.programs
    assert [type(i) for i in push.instrs] == [PutPackets] * 7
    assert [(i.dst.offset, i.nbytes) for i in push.instrs] == [(j * 2048, 2048) for j in range(7)]
    wait, copy = read.instrs
    assert type(wait) is WaitPackets and (wait.src.offset, wait.nbytes) == (6 * 2048, 2048)
    assert copy.src == wait.src and copy.nbytes == 2048
    assert mb.put_wave(m=7, n=2048, last=False).programs[1].instrs[0].src.offset == 0
    assert s.packets_nbytes == 7 * 2048 and s.collective.input.nbytes(0) == 7 * 2048
    # runs straddle the executor's 8 KiB passes: 7 and 8 KiB fit one, 10 to 16 KiB need two
    assert sorted({d["m"] * d["n"] for d in mb.PUT_WAVE}) == [k * 1024 for k in (1, 4, 8, 10, 12, 14, 16)]


def test_put_wave_cases_are_held_out_of_every_fit():
    from purlin.sim.validation import held_out
    names = [(n, p) for n, p, _ in mb.CASES if n == "put_wave"]
    assert len(names) == len(mb.PUT_WAVE) == 16
    errs = {mb.case_key(n, p): 0.0 for n, p, _ in mb.CASES}
    errs.update({mb.case_key(n, p): 1.0 + k for k, (n, p) in enumerate(names)})
    assert sorted(e for e in held_out(errs) if e) == [1.0 + k for k in range(len(names))]
