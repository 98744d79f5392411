"""A CPU model of the SNAC interpreter kernel, reading the *encoded* arrays exactly as
``cuda/snac.cu`` does: pointer halves by call parity, packets at twice their payload
offset as ``{lo, tag, hi, tag}``, fused WaitPackets (tags checked by the read), the
epoch moved on after each call. CTAs run as coroutines, round-robin, so waits block.

It exists to test the encoder and the kernel's protocol on machines without a GPU; it is
slow and not an executor anyone should use for data.

>>> import numpy as np
>>> from purlin.snac import plan
>>> from purlin.spec import library
>>> s = plan(library.all_reduce(2, 16, "int32"))
>>> emu = Emulator(encode(s), s)
>>> outs = emu([np.arange(4, dtype=np.int32), np.ones(4, np.int32)])
>>> outs[1].view(np.int32).tolist()
[1, 2, 3, 4]
"""
from __future__ import annotations

import numpy as np

from purlin.backends.gpu.encode import BUF, DTYPE, OP, OPC, Encoded, encode
from purlin.errors import Deadlock
from purlin.snac.ir import Schedule
from purlin.spec.dtypes import dtype as _dtype
from purlin.spec.semantics import reduce_arrays

_DT = {v: k for k, v in DTYPE.items()}
_OP = {v: k for k, v in OP.items()}
__all__ = ["Emulator", "encode"]


class Emulator:
    """Persistent buffers (scratch, signals, epoch) for repeated calls of one encoding."""

    def __init__(self, enc: Encoded, schedule: Schedule):
        self.enc, self.schedule = enc, schedule
        w = enc.world
        self.staging_half = max(enc.staging_nbytes, 16)
        self.packets_half = max(2 * enc.packets_nbytes, 16)
        self.staging = [np.zeros(2 * self.staging_half, np.uint8) for _ in range(w)]
        self.packets = [np.zeros(2 * self.packets_half, np.uint8) for _ in range(w)]
        self.signals = [np.zeros(max(enc.num_signals, 1), np.uint64) for _ in range(w)]
        self.calls = 0
        self.base = 0

    def __call__(self, inputs, outputs=None):
        c = self.schedule.collective
        ins = [np.ascontiguousarray(x).reshape(-1).view(np.uint8) if c.input.nbytes(r) else
               np.zeros(0, np.uint8) for r, x in enumerate(inputs)]
        outs = [np.full(c.output.nbytes(r), 0xA5, np.uint8) for r in range(c.world)] \
            if outputs is None else outputs
        self.parity = self.calls & 1
        tasks = [self._cta(p, ins, outs) for p in range(len(self.enc.progs))]
        live = list(range(len(tasks)))
        stalls = 0
        while live:
            progressed = False
            for t in list(live):
                try:
                    if next(tasks[t]):
                        progressed = True
                except StopIteration:
                    live.remove(t)
                    progressed = True
            stalls = 0 if progressed else stalls + 1
            if stalls > 2:
                stuck = ", ".join(f"rank {self.enc.progs[t][2]} cta {self.enc.progs[t][3]}" for t in live)
                raise Deadlock(f"emulated call {self.calls}: no CTA can move ({stuck})")
        self.calls += 1
        self.base += self.enc.epoch_stride
        return outs

    # -- addressing as in snac.cu resolve() --------------------------------------------------
    def _buf(self, rank, buf, ins, outs):
        if buf == BUF["input"]:
            return ins[rank], 0
        if buf == BUF["output"]:
            return outs[rank], 0
        if buf == BUF["staging"]:
            return self.staging[rank], self.parity * self.staging_half
        return self.packets[rank], self.parity * self.packets_half

    def _read(self, ref, n, ins, outs):
        rank, buf, off, value = (int(v) for v in ref)
        arr, base = self._buf(rank, buf, ins, outs)
        if buf != BUF["packets"]:
            return arr[base + off: base + off + n].copy()
        whole = -(-n // 8) * 8   # the last packet may carry fewer than 8 payload bytes
        words = arr[base + 2 * off: base + 2 * off + 2 * whole].view(np.uint32).reshape(-1, 4)
        tag = (self.base + value) & 0xFFFFFFFF
        if not (np.all(words[:, 1] == tag) and np.all(words[:, 3] == tag)):
            return None
        return words[:, [0, 2]].reshape(-1).copy().view(np.uint8)[:n]

    def _cta(self, p, ins, outs):
        enc = self.enc
        first, count, rank, _ = (int(v) for v in enc.progs[p][:4])
        for rec in enc.code[first:first + count]:
            opc, nbytes = int(rec[0]), int(rec[1])
            if opc in (OPC["COPY"], OPC["REDUCE"]):
                srcs = enc.refs[rec[4]:rec[4] + rec[5]]
                dsts = enc.refs[rec[6]:rec[6] + rec[7]]
                while True:
                    parts = [self._read(r, nbytes, ins, outs) for r in srcs]
                    if all(x is not None for x in parts):
                        break
                    yield False                  # a fused WaitPackets: spin on the tags
                if opc == OPC["COPY"]:
                    data = parts[0]
                else:
                    dt = _dtype(_DT[int(rec[2]) & 0xFF])
                    data = reduce_arrays([x.view(dt.numpy) for x in parts], dt,
                                         _OP[(int(rec[2]) >> 8) & 0xFF]).view(np.uint8)
                for d in dsts:
                    arr, base = self._buf(int(d[0]), int(d[1]), ins, outs)
                    arr[base + int(d[2]): base + int(d[2]) + nbytes] = data
            elif opc == OPC["NOTIFY"]:
                self.signals[int(rec[2])][int(rec[3])] = np.uint64(self.base + int(rec[4]))
            elif opc == OPC["WAIT"]:
                while int(self.signals[rank][int(rec[3])]) < self.base + int(rec[4]):
                    yield False
            elif opc == OPC["PUT_PACKETS"]:
                src, dst = enc.refs[rec[4]], enc.refs[rec[6]]
                data = self._read(src, nbytes, ins, outs)
                arr, base = self._buf(int(dst[0]), int(dst[1]), ins, outs)
                whole = -(-nbytes // 8) * 8
                padded = np.zeros(whole, np.uint8)
                padded[:nbytes] = data
                words = np.zeros((whole // 8, 4), np.uint32)
                words[:, [0, 2]] = padded.view(np.uint32).reshape(-1, 2)
                words[:, [1, 3]] = (self.base + int(rec[2])) & 0xFFFFFFFF
                off = base + 2 * int(dst[2])
                arr[off: off + 2 * whole] = words.reshape(-1).view(np.uint8)
            elif opc == OPC["WAIT_PACKETS"]:
                src = enc.refs[rec[4]].copy()
                src[3] = rec[2]
                while self._read(src, nbytes, ins, outs) is None:
                    yield False
            yield True
