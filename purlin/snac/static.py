"""One quick pass over a Schedule for the verifier: are the static rules kept, and which
byte ranges (other than inputs) does each program touch.

:func:`scan` checks exactly the rules of :func:`purlin.snac.verify._static` (bounds,
buffers, signals and values in range, one rising writer per signal, atoms, dtype and
op, packet windows) but only answers yes or no; on no, the verifier runs the full check,
which names the first broken rule. Identical Wait objects (the planner shares them) are
checked once.
"""
from __future__ import annotations

from array import array
from numbers import Integral
from typing import NamedTuple

import numpy as np

from purlin.snac.ir import (ATOMS, REDUCTIONS, Copy, Fan, Notify, PutPackets, Reduce, Schedule, Wait, WaitPackets,
                            ref_buffer_set, ref_offsets, ref_ranks)

_BUF = {"output": 1, "staging": 2, "packets": 3}


class Accesses(NamedTuple):
    """Parallel arrays, one entry per access to a range outside the inputs (machine
    integers: a rack's broadcast Copy adds ~W accesses, and lists of int objects held
    about 130 bytes an access)."""

    group: array          # 4 * rank + buffer code
    start: array
    end: array
    program: array
    write: array          # 1 for a write


def scan(s: Schedule) -> tuple[bool, Accesses]:
    """(whether every static rule holds, the non-input accesses of every program)."""
    acc = Accesses(array("q"), array("q"), array("q"), array("q"), array("b"))
    ok = _scan(s, acc)
    return ok, acc


def _scan(s: Schedule, acc: Accesses) -> bool:
    c = s.collective
    if s.reduction not in REDUCTIONS:
        return False
    world = s.world
    size = {"input": [c.input.nbytes(r) for r in range(world)],
            "output": [c.output.nbytes(r) for r in range(world)],
            "staging": [s.staging_nbytes] * world, "packets": [s.packets_nbytes] * world}
    nsig, stride = s.num_signals, s.epoch_stride
    dtype, op = c.dtype.name, c.op
    seen: set[tuple[int, int]] = set()
    # per rank, by signal: its writer CTA and last value (a rack's Notify names ~70 flags:
    # a row per rank spares a tuple key per flag), as long as the signals named so far
    writer: list[list[tuple[tuple[int, int], int] | None]] = [[] for _ in range(world)]
    good_waits: set[int] = set()
    g_, s_, e_, k_, w_ = acc.group, acc.start, acc.end, acc.program, acc.write
    fans: dict = {}   # a Fan's ranks tuple -> its array (or False)
    sizes = {b: np.array(v, np.int64) for b, v in size.items()}

    def refs_ok(refs, n: int, k: int, write: bool, record: bool = True) -> bool:
        if len(refs) >= WIDE:
            got = _wide_ok(refs, n, k, write, record, sizes, world, acc, fans)
            if got is not None:
                return got
        for r in refs:
            sz = size.get(r.buffer)
            rk, off = r.rank, r.offset
            if sz is None or not 0 <= rk < world or off < 0 or off + n > sz[rk]:
                return False
            if (type(off) is not int or type(rk) is not int) and not (integral(off) and integral(rk)):
                return False
            b = _BUF.get(r.buffer)
            if b is not None and record:
                g_.append(4 * rk + b); s_.append(off); e_.append(off + n); k_.append(k); w_.append(write)
        return True

    for k, prog in enumerate(s.programs):
        me = (prog.rank, prog.cta)
        if not 0 <= prog.rank < world or me in seen:
            return False
        seen.add(me)
        for ins in prog.instrs:
            t = type(ins)
            if t is Wait:
                if id(ins) not in good_waits:
                    if not (_ints(ins.signals, 0, nsig) and _int(ins.value, 1, stride)):
                        return False
                    good_waits.add(id(ins))
            elif t is Notify:
                v = ins.value
                if not (_int(v, 1, stride) and _ints(ins.peers, 0, world)
                        and _ints(ins.signals, 0, nsig) and len(ins.peers) == len(ins.signals)):
                    return False
                mine = (me, v)
                for peer, sig in zip(ins.peers, ins.signals):
                    row = writer[peer]
                    if sig >= len(row):
                        row.extend([None] * (sig + 1 - len(row)))
                    prev = row[sig]
                    if prev is not None and (prev[0] != me or v < prev[1]):
                        return False
                    row[sig] = mine
            elif t is Copy or t is Reduce:
                n = ins.nbytes
                if n <= 0 or ins.atom not in ATOMS:
                    return False
                if t is Copy:
                    if not refs_ok((ins.src,), n, k, False):
                        return False
                else:
                    if ins.dtype != dtype or ins.op != op or not refs_ok(ins.srcs, n, k, False):
                        return False
                if not refs_ok(ins.dsts, n, k, True):
                    return False
            elif t is PutPackets:
                n = ins.nbytes
                if (n <= 0 or ins.dst.buffer != "packets" or not 1 <= ins.value < stride
                        or not refs_ok((ins.src,), n, k, False) or not refs_ok((ins.dst,), n, k, True)):
                    return False
            elif t is WaitPackets:
                n = ins.nbytes
                if (n <= 0 or ins.src.buffer != "packets" or ins.src.rank != prog.rank
                        or not 1 <= ins.value < stride or not refs_ok((ins.src,), n, k, False, False)):
                    return False
            else:
                return False
    return True


WIDE = 16
"""A Ref list at least this long (a rack's broadcast or reduction names ~W) is read at C
speed: checked and recorded by :func:`_wide_ok`, and so in the verifier's walk."""


def _wide_ok(refs, n: int, k: int, write: bool, record: bool, sizes: dict, world: int,
             acc: Accesses, fans: dict) -> bool | None:
    """``refs_ok`` of a long list of plain-int Refs into one buffer, at C speed: the same
    verdict and the same accesses in the same order as Ref by Ref (an AllGather over 576
    ranks records 9.6 M of them). None where the list is not of that kind (mixed buffers,
    numpy integers, integers past 64 bits): then the Ref-by-Ref loop decides. A Fan's
    ranks (one tuple shared by a block's chunks) are read once, into ``fans``."""
    bufs = ref_buffer_set(refs)
    if len(bufs) != 1:
        return None
    (buf,) = bufs
    if type(refs) is Fan:
        rk = fans.get(refs.ranks)
        if rk is None:
            rk = fans[refs.ranks] = _ints_array(refs.ranks)
        off = refs.offset
        if rk is False or type(off) is not int or off.bit_length() > 62:
            return None
        lo = np.full(len(rk), off, np.int64)
    else:
        rk, lo = _ints_array(list(ref_ranks(refs))), _ints_array(list(ref_offsets(refs)))
        if rk is False or lo is False:
            return None
    sz = sizes.get(buf)
    if sz is None:
        return False
    if type(n) is not int or n >> 62:
        return None
    hi = lo + n
    if rk.min() < 0 or rk.max() >= world or lo.min() < 0 or (hi > sz.take(rk)).any():
        return False
    b = _BUF.get(buf)
    if b is not None and record:
        m = len(rk)
        acc.group.frombytes((rk * 4 + b).tobytes())
        acc.start.frombytes(lo.tobytes())
        acc.end.frombytes(hi.tobytes())
        acc.program.frombytes(np.full(m, k, np.int64).tobytes())
        acc.write.frombytes(np.full(m, write, np.int8).tobytes())
    return True


def _ints_array(vs) -> np.ndarray | bool:
    """``vs`` as an int64 array if every one is a plain int within 62 bits, else False."""
    if set(map(type, vs)) != _INT or max(vs) >> 62 or min(vs) < -(1 << 62):
        return False
    return np.array(vs, np.int64)


def integral(v) -> bool:
    """Whether ``v`` may be an address: an integer (numpy's too), not a bool or a float."""
    return isinstance(v, Integral) and not isinstance(v, bool)


def _int(v, lo: int, hi: int) -> bool:
    return type(v) is int and lo <= v < hi


def _ints(vs, lo: int, hi: int) -> bool:
    """A non-empty tuple of integers in lo..hi-1."""
    # the types in one C-level pass, then the range by min and max (a rack's Notify names
    # 71 peers: a generator over them cost more than the rest of its check)
    return (type(vs) is tuple and len(vs) > 0 and set(map(type, vs)) == _INT
            and min(vs) >= lo and max(vs) < hi)


_INT = {int}
