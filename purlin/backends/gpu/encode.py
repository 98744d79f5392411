"""Schedule -> flat integer arrays the SNAC interpreter kernel reads. Pure numpy, no GPU.

This module defines the encoding; the CUDA source gets it from :func:`cuda_encoding`
(generated into the ``#define`` block NVRTC sees first), so the two cannot drift.

Layout:

- ``code``: int64 ``[n, 8]``, one record per instruction:
  ``[opcode, nbytes, a, b, c, d, e, f]`` with, per opcode,

  ========== ================== ====== ========= ==== ========= ====
  opcode     a                  b      c         d    e         f
  ========== ================== ====== ========= ==== ========= ====
  COPY       0                  atom   src ref   1    dst ref   ndst
  REDUCE     dtype | op << 8    atom   src ref   nsrc dst ref   ndst
  NOTIFY     peer               signal value               run
  WAIT                          signal value               run
  PUT_PKTS   value              run    src ref        dst ref
  WAIT_PKTS  value                     src ref
  NOP        (a fused WaitPackets: its read checks the tags)               run
  ========== ================== ====== ========= ==== ========= ====

  "ref" columns index the first of consecutive rows of ``refs``. ``run``: how many
  records of the same opcode start here in a row (signals: at most ``SIGNAL_RUN``;
  PutPackets: at most ``PUT_RUN``); the kernel runs them together (signals one per lane,
  PutPackets over all threads, NOPs skipped in one step) without scanning for the run's
  end (a scan is one dependent load per record, on the critical path of every run).
- ``refs``: int64 ``[m, 4]``: ``rank, buffer, offset, packet value``. A source in the
  ``packets`` buffer carries the value of the WaitPackets that covers it, so the read
  itself checks each packet's tag (that is how WaitPackets fuses with the next read).
- ``progs``: int32 ``[p, 8]``: ``first record, count, rank, cta, first ref, refs, 0, 0``,
  sorted by (rank, cta); CTA ``b`` of a launch runs program ``prog_first + b`` (and copies
  its records and refs into shared memory first).

Examples
--------
>>> from purlin.snac.ir import Copy, Program, Ref, Schedule
>>> from purlin.spec import library
>>> c = library.all_gather(2, 16, "fp32")
>>> progs = tuple(Program(r, 0, "local", (Copy(Ref(r, "input", 0), (Ref(q, "output", 16 * r),
...               Ref(r, "output", 16 * r)) if q != r else (Ref(r, "output", 16 * r),), 16),))
...               for r, q in ((0, 1), (1, 0)))
>>> enc = encode(Schedule(c, progs, 0, 0, 0, 2))
>>> enc.code.shape, enc.refs.shape, enc.rank_programs(1)
((2, 8), (6, 4), (1, 1))
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from purlin.errors import ScheduleError
from purlin.snac.kernel_constants import PACKET_BATCH, SIGNAL_BATCH
from purlin.snac.ir import Copy, Notify, PutPackets, Reduce, Ref, Schedule, Wait, WaitPackets, fused_read, sources

REC = 8
PROG = 8
SIGNAL_RUN = SIGNAL_BATCH   # Notifies (Waits) in a row the kernel runs together, one per lane of warp 0
PUT_RUN = PACKET_BATCH      # PutPackets in a row the kernel runs together, over all its threads
MAX_REFS = 256      # srcs + dsts of one instruction (shared-memory arrays in the kernel)
OPC = {"NOP": 0, "COPY": 1, "REDUCE": 2, "NOTIFY": 3, "WAIT": 4, "PUT_PACKETS": 5,
       "WAIT_PACKETS": 6}
BUF = {"input": 0, "output": 1, "staging": 2, "packets": 3, "signals": 4}
NBUF = 8            # pointer-table stride per rank
ATOM = {"sm": 0, "tma": 1, "ce": 2, "switch": 3}
DTYPE = {"fp32": 0, "fp16": 1, "bf16": 2, "int32": 3}
OP = {"add": 0, "max": 1, "min": 2, "mul": 3}


def cuda_encoding() -> str:
    """The tables above as the CUDA source's enums and #defines (``OPC_COPY``, ``BUF_INPUT``,
    ``NBUF``, ``ATOM_TMA``, ``DT_BF16``, ``OP_MAX``, ``REC``, ``PROG``, ``MAX_REFS``)."""
    def enum(prefix: str, table: dict, *extra: str) -> str:
        items = [f"{prefix}{k.upper()} = {v}" for k, v in table.items()] + list(extra)
        return "enum { " + ", ".join(items) + " };"
    return "\n".join([enum("OPC_", OPC), enum("BUF_", BUF, f"NBUF = {NBUF}"), enum("ATOM_", ATOM),
                      enum("DT_", DTYPE), enum("OP_", OP),
                      f"#define REC {REC}", f"#define PROG {PROG}", f"#define MAX_REFS {MAX_REFS}"])


@dataclass(frozen=True)
class Encoded:
    """A schedule as arrays, plus what a world must provide to run it."""

    code: np.ndarray
    refs: np.ndarray
    progs: np.ndarray
    world: int
    staging_nbytes: int       # per half
    packets_nbytes: int       # payload per half (physical: twice)
    num_signals: int
    epoch_stride: int
    uses_tma: bool
    uses_packets: bool
    fused_waits: int          # WaitPackets turned into NOPs (their read checks the tags)
    unaligned: bool = False   # a Copy/Reduce Ref off 16 bytes: the unaligned kernel runs it
    instr_of: np.ndarray | None = None   # per code record: its instruction's index in its program

    def rank_programs(self, rank: int) -> tuple[int, int]:
        """(first program index, number of programs) of ``rank``."""
        idx = np.nonzero(self.progs[:, 2] == rank)[0]
        if len(idx) == 0:
            return (0, 0)
        return (int(idx[0]), int(len(idx)))

    def touches_peers(self, rank: int) -> bool:
        """Whether ``rank``'s programs read or write another rank's input or output."""
        first, n = self.rank_programs(rank)
        for p in range(first, first + n):
            f, cnt = int(self.progs[p, 0]), int(self.progs[p, 1])
            for rec in self.code[f:f + cnt]:
                if rec[0] in (OPC["COPY"], OPC["REDUCE"]):
                    for k in list(range(rec[4], rec[4] + rec[5])) + list(range(rec[6], rec[6] + rec[7])):
                        if self.refs[k, 0] != rank and self.refs[k, 1] in (0, 1):
                            return True
        return False


def _where(prog, i) -> str:
    return f"rank {prog.rank}, cta {prog.cta}, instr {i}"


def _covering_wait(waits: list[WaitPackets], ref: Ref, nbytes: int) -> WaitPackets | None:
    for w in reversed(waits):
        if w.src.rank == ref.rank and w.src.offset <= ref.offset and \
                ref.offset + nbytes <= w.src.offset + w.nbytes:
            return w
    return None


class _Builder:
    """The arrays of an encoding as they grow, and what the schedule turned out to use."""

    def __init__(self, s: Schedule):
        self.s, self.w = s, s.world
        self.code: list[list[int]] = []
        self.refs: list[list[int]] = []
        self.uses_tma = self.uses_packets = self.unaligned = False
        self.fused = 0

    def ref(self, r: Ref, where: str, value: int = 0) -> int:
        if not 0 <= r.rank < self.w:
            raise ScheduleError(f"{where}: Ref {r} names rank {r.rank} of a world of {self.w}")
        if r.buffer not in BUF or r.buffer == "signals":
            raise ScheduleError(f"{where}: Ref {r}: unknown buffer {r.buffer!r}")
        self.refs.append([r.rank, BUF[r.buffer], r.offset, value])
        return len(self.refs) - 1

    def data(self, ins: Copy | Reduce, where: str, waits: list[WaitPackets]) -> None:
        srcs = sources(ins)
        if not srcs or not ins.dsts:
            raise ScheduleError(f"{where}: {type(ins).__name__} needs a source and a destination")
        if len(srcs) + len(ins.dsts) > MAX_REFS:
            raise ScheduleError(f"{where}: {len(srcs)} sources + {len(ins.dsts)} destinations "
                                f"exceed the interpreter's {MAX_REFS} per instruction")
        if ins.atom not in ATOM:
            raise ScheduleError(f"{where}: unknown atom {ins.atom!r}")
        self.uses_tma |= ins.atom == "tma"
        first_src = len(self.refs)
        for r in srcs:
            value = 0
            if r.buffer == "packets":
                self.uses_packets = True
                if r.offset % 8:
                    raise ScheduleError(f"{where}: packet source {r} is not 8-byte aligned")
                cover = _covering_wait(waits, r, ins.nbytes)
                if cover is None:
                    raise ScheduleError(f"{where}: reads packets {r} ({ins.nbytes} B) with no "
                                        f"WaitPackets before it that covers them")
                value = cover.value
            self.ref(r, where, value)
        first_dst = len(self.refs)
        for r in ins.dsts:
            if r.buffer == "packets":
                raise ScheduleError(f"{where}: {type(ins).__name__} stores into packets {r}; "
                                    f"only PutPackets writes packet windows")
            self.ref(r, where)
        # packet payload offset o sits at physical 2 * o
        self.unaligned |= any((2 * r.offset if r.buffer == "packets" else r.offset) % 16
                              for r in srcs + ins.dsts)
        if isinstance(ins, Copy):
            self.code.append([OPC["COPY"], ins.nbytes, 0, ATOM[ins.atom], first_src, 1, first_dst, len(ins.dsts)])
            return
        if ins.dtype not in DTYPE:
            raise ScheduleError(f"{where}: Reduce over {ins.dtype!r}: the GPU Atoms reduce "
                                f"{', '.join(DTYPE)} only")
        if ins.op not in OP:
            raise ScheduleError(f"{where}: Reduce op {ins.op!r}: choose {', '.join(OP)}")
        self.code.append([OPC["REDUCE"], ins.nbytes, DTYPE[ins.dtype] | OP[ins.op] << 8,
                          ATOM[ins.atom], first_src, len(srcs), first_dst, len(ins.dsts)])

    def put(self, ins: PutPackets, where: str) -> None:
        self.uses_packets = True
        if ins.dst.buffer != "packets" or ins.src.buffer == "packets":
            raise ScheduleError(f"{where}: PutPackets moves from a plain buffer into packets, "
                                f"not {ins.src} -> {ins.dst}")
        _check_words(ins, ins.dst, where)
        _check_value(self.s, ins.value, where)
        src = self.ref(ins.src, where)
        dst = self.ref(ins.dst, where)
        self.code.append([OPC["PUT_PACKETS"], ins.nbytes, ins.value, 0, src, 1, dst, 1])

    def wait_packets(self, ins: WaitPackets, where: str, rank: int, fused: bool) -> None:
        self.uses_packets = True
        if ins.src.buffer != "packets" or ins.src.rank != rank:
            raise ScheduleError(f"{where}: WaitPackets must wait on its own rank's packets, not {ins.src}")
        _check_words(ins, ins.src, where)
        _check_value(self.s, ins.value, where)
        if fused:   # the read after it checks the tags
            self.fused += 1
            self.code.append([OPC["NOP"], 0, 0, 0, 0, 0, 0, 0])
        else:
            src = self.ref(ins.src, where)
            self.code.append([OPC["WAIT_PACKETS"], ins.nbytes, ins.value, 0, src, 1, 0, 0])


def encode(s: Schedule) -> Encoded:
    """Encode ``s`` for the SNAC interpreter; raise ScheduleError for what it cannot run."""
    b = _Builder(s)
    progs: list[list[int]] = []
    instr_of: list[int] = []   # a Notify (Wait) of k flags is k records
    for prog in sorted(s.programs, key=lambda p: (p.rank, p.cta)):
        first, rfirst = len(b.code), len(b.refs)
        waits: list[WaitPackets] = []
        for i, ins in enumerate(prog.instrs):
            instr_of.extend([i - 1] * (len(b.code) - len(instr_of)))
            where = _where(prog, i)
            if isinstance(ins, (Copy, Reduce)):
                b.data(ins, where, waits)
            elif isinstance(ins, Notify):   # a record a flag: the kernel runs them in lanes
                for peer, sig in zip(ins.peers, ins.signals):
                    if not 0 <= peer < s.world:
                        raise ScheduleError(f"{where}: Notify to rank {peer} of a world of {s.world}")
                    _check_signal(s, sig, ins.value, where)
                    b.code.append([OPC["NOTIFY"], 0, peer, sig, ins.value, 0, 0, 0])
            elif isinstance(ins, Wait):
                for sig in ins.signals:
                    _check_signal(s, sig, ins.value, where)
                    b.code.append([OPC["WAIT"], 0, 0, sig, ins.value, 0, 0, 0])
            elif isinstance(ins, PutPackets):
                b.put(ins, where)
            elif isinstance(ins, WaitPackets):
                waits.append(ins)
                b.wait_packets(ins, where, prog.rank, fused_read(prog.instrs, i))
            else:
                raise ScheduleError(f"{where}: the GPU executor has no handler for {type(ins).__name__}")
        instr_of.extend([len(prog.instrs) - 1] * (len(b.code) - len(instr_of)))
        _mark_runs(b.code, first)
        progs.append([first, len(b.code) - first, prog.rank, prog.cta, rfirst, len(b.refs) - rfirst, 0, 0])
    return Encoded(
        code=np.asarray(b.code, np.int64).reshape(-1, REC),
        refs=np.asarray(b.refs, np.int64).reshape(-1, 4),
        progs=np.asarray(progs, np.int32).reshape(-1, PROG),
        world=s.world, staging_nbytes=s.staging_nbytes, packets_nbytes=s.packets_nbytes,
        num_signals=s.num_signals, epoch_stride=s.epoch_stride, uses_tma=b.uses_tma,
        uses_packets=b.uses_packets, fused_waits=b.fused, unaligned=b.unaligned,
        instr_of=np.asarray(instr_of, np.int32))


def _mark_runs(code: list[list[int]], first: int) -> None:
    """The run of each NOTIFY/WAIT/NOP record (field f) and PUT_PACKETS record (field b):
    how many records of that opcode start there (records from ``first`` on, one program).
    Signal runs are capped at SIGNAL_RUN (one lane each) and PutPackets runs at PUT_RUN
    (the kernel's batch); NOP runs are not (the kernel skips a whole run in one step)."""
    run = 0
    for k in range(len(code) - 1, first - 1, -1):
        opc = code[k][0]
        if opc in (OPC["NOTIFY"], OPC["WAIT"], OPC["NOP"], OPC["PUT_PACKETS"]):
            run = run + 1 if k + 1 < len(code) and code[k + 1][0] == opc else 1
            if opc == OPC["PUT_PACKETS"]:
                code[k][3] = min(run, PUT_RUN)
            else:
                code[k][7] = run if opc == OPC["NOP"] else min(run, SIGNAL_RUN)
        else:
            run = 0


def _check_words(ins: PutPackets | WaitPackets, window: Ref, where: str) -> None:
    if window.offset % 8:
        raise ScheduleError(f"{where}: {type(ins).__name__} of {ins.nbytes} B at {window}: a packet "
                            f"carries 8 payload bytes, so a window starts at a multiple of 8")


def _check_signal(s: Schedule, signal: int, value: int, where: str) -> None:
    if not 0 <= signal < s.num_signals:
        raise ScheduleError(f"{where}: signal {signal} is outside 0..{s.num_signals - 1}")
    _check_value(s, value, where)


def _check_value(s: Schedule, value: int, where: str) -> None:
    if not 1 <= value < s.epoch_stride:
        raise ScheduleError(f"{where}: value {value} is outside 1..{s.epoch_stride - 1} "
                            f"(epoch_stride {s.epoch_stride})")
