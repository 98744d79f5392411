"""The GPU executor's CPU-testable half: encoding, the kernel-protocol model, constants."""
import re
from pathlib import Path

import numpy as np
import pytest

from purlin.backends.gpu import atomset
from purlin.backends.gpu.emulate import Emulator
from purlin.backends.gpu.encode import ATOM, BUF, DTYPE, MAX_REFS, NBUF, OP, OPC, PROG, REC, SIGNAL_RUN, encode
from purlin.errors import ScheduleError
from purlin.snac import Policy, plan
from purlin.snac.ir import INSTRUCTIONS, Copy, Program, PutPackets, Ref, Schedule, WaitPackets
from purlin.spec import evaluate, library
from tests.helpers import random_inputs

SOURCES = {name: (Path(atomset.CUDA_DIR) / name).read_text() for name in atomset.SOURCES}


def _defined(text, name):
    m = re.search(rf"\b{name}\s*=\s*(\d+)", text) or re.search(rf"#define {name} (\d+)", text)
    return int(m.group(1)) if m else None


def test_the_encoding_and_constants_are_stated_once():
    """The CUDA source gets the encoding and the kernel constants from the generated header
    (encode.py and purlin/snac/kernel_constants.py), holds no copy of them, and handles
    every opcode: a number restated in a .cu file, or an opcode the kernel never names,
    fails here."""
    from purlin.snac import kernel_constants as kc
    header = atomset.header()
    tables = [("OPC_", OPC), ("BUF_", BUF), ("ATOM_", ATOM), ("DT_", DTYPE), ("OP_", OP)]
    names = {"NBUF": NBUF, "REC": REC, "PROG": PROG, "MAX_REFS": MAX_REFS, **kc.cuda_defines()}
    for prefix, table in tables:
        names.update({f"{prefix}{k.upper()}": v for k, v in table.items()})
    for name, value in names.items():
        assert _defined(header, name) == value, name
        for fname, text in SOURCES.items():
            assert _defined(text, name) is None, f"{fname} restates {name}"
    snac_cu = SOURCES["snac.cu"]
    for k in OPC:
        assert f"OPC_{k}" in snac_cu, f"the interpreter never handles OPC_{k}"
    assert SIGNAL_RUN == kc.SIGNAL_BATCH
    from purlin.backends.gpu.kernels import TMA_SMEM
    assert TMA_SMEM == kc.TMA_STAGES * kc.TMA_STAGE_BYTES


def test_every_purlin_macro_the_source_reads_is_defined():
    used = set(re.findall(r"\bPURLIN_[A-Z0-9_]+\b", "".join(SOURCES.values())))
    from purlin.snac import kernel_constants as kc
    given = set(kc.cuda_defines()) | {d[2:].split("=")[0] for d in atomset.ATOM_SETS[90].defines}
    given |= {"PURLIN_ATOM_FN"}   # defined in atoms.cuh itself
    assert used <= given, sorted(used - given)


def test_signal_runs_are_marked_and_capped():
    from purlin.snac.ir import Notify, Program, Schedule, Wait
    c = library.all_gather(2, 16, "fp32")
    ins = tuple(Notify(1, k, 1) for k in range(40)) + (Wait(0, 1), Wait(1, 1)) + (Notify(1, 0, 2),)
    enc = encode(Schedule(c, (Program(0, 0, "x", ins), Program(1, 0, "y", (Wait(0, 1),))), 0, 0, 40, 3))
    runs = enc.code[:, 7].tolist()
    assert runs[:40] == [32] * 9 + list(range(31, 0, -1))   # a run of 40: 32 together, then 8
    assert runs[40:] == [2, 1, 1, 1]                          # Waits, a lone Notify, rank 1's Wait


def test_put_runs_are_marked_and_capped():
    """Field b of a PUT_PACKETS record is how many PutPackets in a row start there, at most
    the kernel's batch: the kernel runs that many together without walking the records
    (the walk was one dependent load per put, 0.2 to 0.3 us a put in a run of seven:
    benchmarks/results/h200-put-runs.json)."""
    from purlin.backends.gpu.encode import PUT_RUN
    from purlin.snac.kernel_constants import PACKET_BATCH
    c = library.all_gather(2, 2048, "fp32")
    put = lambda j: PutPackets(Ref(0, "input", 0), Ref(1, "packets", 64 * j), 64, 1)  # noqa: E731
    ins = tuple(put(j) for j in range(11)) + (Copy(Ref(0, "input", 0), (Ref(0, "output", 0),), 64),) \
        + tuple(put(j) for j in range(11, 14))
    enc = encode(Schedule(c, (Program(0, 0, "x", ins), Program(1, 0, "y", ())), 0, 14 * 64, 1, 2))
    assert PUT_RUN == PACKET_BATCH == 8
    assert enc.code[enc.code[:, 0] == OPC["PUT_PACKETS"], 3].tolist() == [8] * 4 + list(range(7, 0, -1)) + [3, 2, 1]
    assert enc.code[enc.code[:, 0] == OPC["COPY"], 3].tolist() == [0]   # the Copy's atom field is untouched


def test_fused_waits_become_one_nop_run():
    """The W=8 latency AllReduce's consumers wait on 7 peers' windows, then reduce them all:
    the 7 WaitPackets become NOPs marked as one run (the kernel skips them in one step)."""
    from purlin.backends.gpu.encode import OPC
    s = plan(library.all_reduce(8, 8192, "fp32"), policy=Policy(regime="latency"))
    enc = encode(s)
    nop_rows = enc.code[enc.code[:, 0] == OPC["NOP"]]
    assert enc.fused_waits == len(nop_rows) == 7 * 8 * 8   # 7 peers x 8 consumers x 8 ranks
    starts = [int(r[7]) for r in nop_rows[::7]]
    assert starts == [7] * 64 and nop_rows[:7, 7].tolist() == [7, 6, 5, 4, 3, 2, 1]


def test_every_instruction_has_a_handler():
    """One instruction of every IR kind encodes to its opcode (a new kind without a
    handler fails here)."""
    from purlin.snac.ir import Notify, Reduce, Wait
    c = library.all_gather(2, 16, "fp32")
    one = {Copy: Copy(Ref(0, "input", 0), (Ref(0, "output", 0),), 16),
           Reduce: Reduce((Ref(0, "input", 0), Ref(1, "input", 0)), (Ref(0, "output", 0),), 16, "fp32", "add"),
           Notify: Notify(1, 0, 1), Wait: Wait(0, 1),
           PutPackets: PutPackets(Ref(0, "input", 0), Ref(1, "packets", 0), 16, 1),
           WaitPackets: WaitPackets(Ref(0, "packets", 0), 16, 1)}
    assert set(one) == set(INSTRUCTIONS)
    progs = (Program(0, 0, "x", tuple(one.values())), Program(1, 0, "y", ()))
    enc = encode(Schedule(c, progs, 0, 64, 1, 4))
    want = {Copy: "COPY", Reduce: "REDUCE", Notify: "NOTIFY", Wait: "WAIT", PutPackets: "PUT_PACKETS",
            WaitPackets: "WAIT_PACKETS"}
    assert enc.code[:, 0].tolist() == [OPC[want[k]] for k in one]


CASES = [(name, regime, w) for name in library.ALL for regime in ("latency", "throughput", "direct")
         for w in (2, 4)]


@pytest.mark.parametrize("name,regime,world", CASES)
def test_emulated_kernel_matches_the_reference(name, regime, world):
    from purlin.backends.reference import Reference
    c = library.from_size(name, world, 4096, "bf16" if "reduce" in name else "fp32",
                          op="add", seed=world)
    s = plan(c, policy=Policy(regime=regime))
    enc = encode(s)
    emu, ref = Emulator(enc, s), Reference(s)
    rng = np.random.default_rng(0)
    for call in range(3):                      # parity flips, epochs advance
        ins = random_inputs(c, rng)
        got = emu(ins)
        want = ref(ins)
        for r in range(world):
            assert np.array_equal(got[r], want[r]), f"call {call}, rank {r}"
        if not c.is_reduce:
            exp = evaluate(c, ins)
            for r in range(world):
                assert np.array_equal(got[r], exp[r])


def test_fused_waits_become_nops():
    s = plan(library.all_reduce(4, 1024, "fp32"), policy=Policy(regime="latency"))
    enc = encode(s)
    n_wait = sum(isinstance(i, WaitPackets) for _, _, i in s.instructions())
    assert enc.fused_waits == n_wait
    assert (enc.code[:, 0] == OPC["WAIT_PACKETS"]).sum() == 0
    # every packet source carries the tag value of the wait that covered it
    for rec in enc.code[enc.code[:, 0] == OPC["REDUCE"]]:
        srcs = enc.refs[rec[4]:rec[4] + rec[5]]
        pk = srcs[srcs[:, 1] == BUF["packets"]]
        assert len(pk) and (pk[:, 3] >= 1).all()


def _tiny(instrs, num_signals=1, packets=64):
    c = library.all_gather(2, 16, "fp32")
    progs = (Program(0, 0, "x", tuple(instrs)), Program(1, 0, "y", ()))
    return Schedule(c, progs, 0, packets, num_signals, 4)


def test_rejects_unfenced_packet_reads():
    s = _tiny([Copy(Ref(0, "packets", 0), (Ref(0, "output", 0),), 16)])
    with pytest.raises(ScheduleError, match="no WaitPackets before it"):
        encode(s)


def test_rejects_stores_into_packets_and_odd_packet_windows():
    with pytest.raises(ScheduleError, match="only PutPackets"):
        encode(_tiny([Copy(Ref(0, "input", 0), (Ref(1, "packets", 0),), 16)]))
    assert encode(_tiny([PutPackets(Ref(0, "input", 4), Ref(1, "packets", 0), 12, 1)])).unaligned is False
    with pytest.raises(ScheduleError, match="window starts at a multiple of 8"):
        encode(_tiny([PutPackets(Ref(0, "input", 0), Ref(1, "packets", 4), 12, 1)]))
    with pytest.raises(ScheduleError, match="value 9"):
        encode(_tiny([PutPackets(Ref(0, "input", 0), Ref(1, "packets", 0), 16, 9)]))


def test_rank_programs_and_peer_use():
    s = plan(library.all_gather(4, 256, "fp32"), policy=Policy(regime="direct"))
    enc = encode(s)
    firsts = [enc.rank_programs(r) for r in range(4)]
    assert sum(n for _, n in firsts) == len(s.programs)
    assert [f for f, _ in firsts] == sorted(f for f, _ in firsts)
    assert any(enc.touches_peers(r) for r in range(4))
    # each program's refs are one contiguous range (the kernel caches it in shared memory)
    for first, count, rank, cta, rfirst, rcount, _, _ in enc.progs:
        recs = enc.code[first:first + count]
        used = [k for rec in recs if rec[0] in (OPC["COPY"], OPC["REDUCE"])
                for k in list(range(rec[4], rec[4] + rec[5])) + list(range(rec[6], rec[6] + rec[7]))]
        assert all(rfirst <= k < rfirst + rcount for k in used)


def test_atom_sets_by_capability():
    assert atomset.for_capability(80).name == "sm_80"
    assert atomset.for_capability(89).name == "sm_80"
    assert atomset.for_capability(90).tma
    assert atomset.for_capability(103).vec_nbytes == 32
    from purlin.errors import BackendUnavailable
    with pytest.raises(BackendUnavailable, match="sm_80 or newer"):
        atomset.for_capability(75)


def test_gpu_package_imports_without_cupy():
    import purlin.backends.gpu as gpu
    assert "LoopbackWorld" in gpu.__all__


ODD = [(name, dt, n) for name in library.ALL for dt in ("fp32", "bf16", "fp8_e4m3") for n in (1, 7, 13)
       if not ("reduce" in name and dt.startswith("fp8"))]


@pytest.mark.parametrize("name,dt,count", ODD)
def test_emulated_kernel_at_odd_counts_matches_the_oracle(name, dt, count):
    """Any element count: the planner's windows and slots stay 16-byte aligned, PutPackets
    carry a partial last packet, and the encoded arrays (read as the kernel reads them)
    give the spec's answer in every regime."""
    from purlin.spec.dtypes import dtype
    from purlin.topology import minimal
    size = count * dtype(dt).itemsize
    # a split collective cuts its size into 4 blocks: 4x the count keeps each block odd
    # (at 1x, count 1 would cut into blocks of 0 B, which from_size refuses)
    split = name not in ("all_reduce", "broadcast", "reduce")
    c = library.from_size(name, 4, size * (4 if split else 1), dt,
                          align=dtype(dt).itemsize, seed=count)
    for regime in ("latency", "throughput", "direct"):
        s = plan(c, minimal(4, loopback=True), Policy(regime=regime))
        enc = encode(s)
        emu = Emulator(enc, s)
        for call in range(2):
            ins = random_inputs(c, np.random.default_rng(call))
            got, want = emu(ins), evaluate(c, ins)
            assert all(np.array_equal(got[r], want[r]) for r in range(4)), (regime, call)
