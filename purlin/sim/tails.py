"""What an instruction off the 16-byte grid costs: the executor's tails and narrow paths.

The GPU executor moves 16-byte vectors. An instruction whose Refs all sit on 16-byte
boundaries and whose size is a whole number of vectors costs what the engine charged
before any count was accepted, and :func:`charge` leaves it untouched (so every aligned
prediction is unchanged). For the others it charges what the kernel does
(``purlin/backends/gpu/cuda``):

- a size that is not a whole number of vectors ends with a tail of 4-byte words (and up
  to 3 bytes): one more memory round trip after the bulk, the cost the executor's head
  copy was measured at (``copy_head_us``);
- a Ref only 4-byte aligned moves 4-byte words (a copy with the other side on the grid
  keeps 16-byte vectors there, split into words on this side, at the vector rate);
  a Ref only 1- or 2-byte aligned takes the narrow path, one element per access. A
  CTA's rate is latency-bound (bytes in flight over the round trip), so its rate bound
  scales by :func:`purlin.snac.kernel_constants.bytes_in_flight` of that width over a
  vector's;
- a PutPackets from a source off the grid builds each packet from words (or bytes): one
  8-byte packet in flight per thread where the vector path keeps 16 bytes; its last
  packet, or one of fewer than 8 bytes, costs the round trip too. (Whole 8-byte packets
  from a source on the grid are what the executor always ran: unchanged.)

No rate here is fitted: the widths and counts are the kernel's (one module states them),
the round trip is a calibration file's measured ``copy_head_us``.

>>> from purlin.snac.ir import Copy, Ref
>>> from purlin.sim.calibration import load_calibration
>>> cal = load_calibration("h200")
>>> width(Copy(Ref(0, "input", 0), (Ref(1, "output", 28),), 28))
(16, 4)
>>> factor, extra = cost(Copy(Ref(0, "input", 4), (Ref(1, "output", 28),), 28), cal)
>>> factor, extra == cal.copy_head_us
(0.25, True)
"""
from __future__ import annotations

from dataclasses import replace

from purlin.sim.calibration import Calibration
from purlin.sim.fabric import FlowSpec
from purlin.snac.ir import Copy, Fan, PutPackets, Ref, sources
from purlin.snac.kernel_constants import bytes_in_flight

VECTOR = 16


def grid(r: Ref) -> int:
    """The widest access a Ref allows (16, 4, 2 or 1 bytes); a packet source's payload
    offset o sits at physical 2 * o."""
    off = 2 * r.offset if r.buffer == "packets" else r.offset
    return 16 if off % 16 == 0 else 4 if off % 4 == 0 else 2 if off % 2 == 0 else 1


def _on_grid(refs) -> bool:
    """Whether every Ref of ``refs`` allows 16-byte vectors (``grid(r) == 16``; asked of
    :func:`grid` only for packet Refs, not once per Ref: a rack's Reduce has a source per
    rank; a Fan's Refs share one offset, so its first answers for all)."""
    if type(refs) is Fan:
        refs = refs[:1]
    for r in refs:
        if (grid(r) != VECTOR) if r.buffer == "packets" else r.offset % VECTOR:
            return False
    return True


def width(ins) -> tuple[int, int]:
    """(sources' width, destinations' width) of a Copy or Reduce."""
    return _min_grid(sources(ins)), _min_grid(ins.dsts)


def _min_grid(refs) -> int:
    """The narrowest :func:`grid` among ``refs`` (a Fan's first Ref stands for all)."""
    return min(grid(r) for r in (refs[:1] if type(refs) is Fan and len(refs) else refs))


def cost(ins, cal: Calibration) -> tuple[float, float]:
    """(rate factor, extra start-up us) of a data instruction; (1.0, 0.0) on the grid."""
    if isinstance(ins, PutPackets):
        off_grid = ins.src.offset % VECTOR != 0
        return (8 / VECTOR if off_grid else 1.0), (cal.copy_head_us if off_grid or ins.nbytes % 8 else 0.0)
    src, dst = width(ins)
    w = min(src, dst)
    if w >= VECTOR:
        return 1.0, cal.copy_head_us if ins.nbytes % VECTOR else 0.0
    if isinstance(ins, Copy) and max(src, dst) == VECTOR and w == 4:
        factor = 1.0                                   # vectors, split into words on one side
    else:
        g = 2 if w == 2 and ins.nbytes % 2 == 0 else w if w >= 4 else 1
        factor = bytes_in_flight(g) / bytes_in_flight(VECTOR)
    tail = cal.copy_head_us if w >= 4 and ins.nbytes % VECTOR else 0.0
    return factor, tail


def aligns_first(ins: Copy, cal: Calibration) -> bool:
    """Whether the executor copies the bytes up to an aligned destination first: a plain
    copy (16-byte aligned on both sides, not from packets) long enough, whose first
    destination is off the boundary."""
    align = int(cal.copy_align_bytes)
    dsts = ins.dsts[:1] if type(ins.dsts) is Fan else ins.dsts   # a Fan's Refs share one offset
    return (align > 0 and ins.nbytes >= cal.copy_align_min_bytes and ins.src.buffer != "packets"
            and ins.dsts[0].offset % align != 0 and ins.src.offset % 16 == 0
            and all(r.offset % 16 == 0 for r in dsts))


def charge(ins, spec: FlowSpec, pre_us: float, cal: Calibration) -> tuple[FlowSpec, float]:
    """``spec`` and start-up ``pre_us`` with the tail's cost added (both unchanged, the
    same objects, for an instruction on the grid)."""
    if isinstance(ins, PutPackets):   # whole packets from a source on the grid: as ever
        if ins.nbytes % 8 == 0 and grid(ins.src) == VECTOR:
            return spec, pre_us
    elif ins.nbytes % VECTOR == 0 and _on_grid(sources(ins)) and _on_grid(ins.dsts):
        return spec, pre_us
    factor, extra = cost(ins, cal)
    if factor != 1.0:
        spec = replace(spec, cap_Bpus=spec.cap_Bpus * factor)
    return spec, pre_us + extra
