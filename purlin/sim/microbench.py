"""The executor microbenchmarks the simulator is calibrated from: hand-made one-rank
Schedules, no collectives.

The Atom kernels alone miss what the SNAC interpreter adds: decoding an instruction, a
Wait/Notify hop between CTAs, packets. Each case measures one cost the simulator charges
per instruction; ``benchmarks/calibrate_executor.py`` runs them on a GPU and
:mod:`purlin.sim.fit` fits the calibration from its results.

- ``copy_ops``: one CTA runs k Copy instructions of n bytes (t = launch + k (start + n/r));
- ``reduce_ops``: one CTA runs k Reduce instructions of m fp32 sources;
- ``ctas``: c CTAs each copy n bytes once (rate against CTA count, HBM saturation);
- ``copy_dsts``: one CTA copies n bytes to d destinations (each extra store stream);
- ``loaded``: 32 CTAs at once copy (to d destinations) or reduce m sources of 2 MiB each:
  per-CTA rates under load (data in HBM, memory not saturated);
- ``chain``: N CTAs, each waits for its predecessor's Notify, then notifies the next;
- ``packets``: CTA 0 pushes k PutPackets of n bytes; CTA 1 waits for each and unpacks it;
- ``notify_ops`` / ``wait_ops``: one CTA issuing k Notifies (then k already-satisfied Waits),
  which the executor runs in batches of up to 32;
- ``pkt_reduce``: p pairs at once, one CTA pushing m packet windows, one reducing them with
  its own input (a latency-regime consumer, alone and crowded);
- ``copy_shifted``: copy_ops with destinations off a 512-byte boundary (V-block offsets);
- ``reduce_shifted``: reduce_ops with sources off a 128-byte line (V-block offsets);
- ``reduce_small``, ``reduce_dst_shifted``: reduce_ops of 4 and 16 KiB (a Reduce's start
  against its bytes), and with destinations off by 16 bytes;
- ``reduce_ctas``: c CTAs reducing 64 KiB each at once (an L2-resident reduce, crowded);
- ``put_pass``: p push/read pairs, the reader taking the first or the last put of a 3-pass
  run (when the last pass becomes readable, alone and crowded);
- ``put_ops``: one CTA issuing k PutPackets of n bytes that nobody reads (a put's cost
  inside a run);
- ``push_read``: n bytes pushed as PutPackets of p bytes spread over q CTAs, read back in
  c-byte chunks by one CTA each (a copy, or a reduce with its own input): the shape of a
  latency-regime consumer, against the push size and the pushing CTAs (held out: no fit
  reads them);
- ``fan_in``: m windows of n bytes, one PutPackets each, dealt over q push CTAs; n / c
  reader CTAs, each reducing its c-byte chunk of every window with its own input: the
  shape of a latency ReduceScatter consumer, against how many CTAs do the pushes (held
  out; the 2026-12-05 confirmation measured picks with one put CTA where the best had two
  0.3-0.8 us slower than the simulator ranks them, inside one call);
- ``put_wave``: one CTA pushes a run of m PutPackets of n bytes, one CTA waits for the
  first or the last window and copies it out: when a window of a run becomes readable,
  against the run's bytes across the executor's passes over its threads (512 threads, one
  16-byte vector each: 8 KiB of payload a pass) (held out).

Examples
--------
>>> name, params, schedule = CASES[0]
>>> name, params, schedule.world, len(schedule.programs[0].instrs)
('copy_ops', {'k': 1, 'n': 4096}, 1, 1)
>>> case_key(name, params)
('copy_ops', (('k', 1), ('n', 4096)))
"""
from __future__ import annotations

import statistics

from purlin.snac.ir import Copy, Notify, Program, PutPackets, Reduce, Ref, Schedule, Wait, WaitPackets
from purlin.spec import Collective, Layout

__all__ = ["CASES", "case_key", "measured", "chain", "copy_dsts", "copy_ops", "ctas", "fan_in", "loaded",
           "notify_ops", "packets", "pkt_reduce", "push_read", "put_ops", "put_pass", "put_wave", "reduce_ctas",
           "reduce_ops", "wait_ops"]

KiB, MiB = 1 << 10, 1 << 20


def spec(in_nbytes: int, out_nbytes: int) -> Collective:
    """A one-rank stand-in: the executor needs only the buffer sizes."""
    lay = lambda n: Layout.of([[("b", n)]] if n else [[]])  # noqa: E731
    return Collective("micro", lay(in_nbytes), lay(out_nbytes), "add", "fp32")


def copy_ops(k: int, n: int, shift: int = 0) -> Schedule:
    """k Copy instructions of n bytes; ``shift`` moves every destination that many bytes
    past a 512-byte boundary (copy_shifted: a V block's offset, which the executor first
    copies up to the boundary, PURLIN_DST_ALIGN)."""
    ins = tuple(Copy(Ref(0, "input", i * n), (Ref(0, "output", i * n + shift),), n) for i in range(k))
    return Schedule(spec(k * n, k * n + shift), (Program(0, 0, "micro", ins),), 0, 0, 1, 2)


def reduce_ops(k: int, n: int, m: int, shift: int = 0, dst_shift: int = 0) -> Schedule:
    """k Reduce instructions of m fp32 sources; ``shift`` moves every source that many
    bytes past a 128-byte line (reduce_shifted: each warp's loads touch one more line),
    ``dst_shift`` every destination (reduce_dst_shifted: a V block's output offset)."""
    ins = tuple(Reduce(tuple(Ref(0, "input", (j * k + i) * n + shift) for j in range(m)),
                       (Ref(0, "output", i * n + dst_shift),), n, "fp32", "add") for i in range(k))
    return Schedule(spec(m * k * n + shift, k * n + dst_shift), (Program(0, 0, "micro", ins),), 0, 0, 1, 2)


def reduce_ctas(c: int, n: int, m: int) -> Schedule:
    """c CTAs at once, each one Reduce of m fp32 sources of n bytes (buffers in the L2 when
    small): how a reducing CTA's rate holds up beside others, as in a collective."""
    progs = tuple(Program(0, b, "micro", (Reduce(tuple(Ref(0, "input", (b * m + j) * n) for j in range(m)),
                                                 (Ref(0, "output", b * n),), n, "fp32", "add"),))
                  for b in range(c))
    return Schedule(spec(c * m * n, c * n), progs, 0, 0, 1, 2)


def ctas(c: int, n: int) -> Schedule:
    """c CTAs at once, each copying n bytes: launch cost per CTA, and the rate against
    the CTA count up to a saturated memory."""
    progs = tuple(Program(0, b, "micro", (Copy(Ref(0, "input", b * n), (Ref(0, "output", b * n),), n),))
                  for b in range(c))
    return Schedule(spec(c * n, c * n), progs, 0, 0, 1, 2)


def copy_dsts(d: int, n: int) -> Schedule:
    """One CTA copying n bytes to d destinations (a broadcast store): the cost of each
    extra destination."""
    ins = (Copy(Ref(0, "input", 0), tuple(Ref(0, "output", j * n) for j in range(d)), n),)
    return Schedule(spec(n, d * n), (Program(0, 0, "micro", ins),), 0, 0, 1, 2)


def loaded(c: int, n: int, m: int = 1, d: int = 1) -> Schedule:
    """c CTAs at once, each reducing m sources (m = 1: copying) of n bytes into d
    destinations: per-CTA rates at the concurrency collectives run at, data in HBM."""
    progs = []
    for b in range(c):
        srcs = tuple(Ref(0, "input", (b * m + j) * n) for j in range(m))
        dsts = tuple(Ref(0, "output", (b * d + j) * n) for j in range(d))
        ins = Copy(srcs[0], dsts, n) if m == 1 else Reduce(srcs, dsts, n, "fp32", "add")
        progs.append(Program(0, b, "micro", (ins,)))
    return Schedule(spec(c * m * n, c * d * n), tuple(progs), 0, 0, 1, 2)


def chain(n_ctas: int) -> Schedule:
    """n CTAs, each waiting for its predecessor's Notify, then notifying the next: one
    Wait/Notify hop per CTA."""
    progs = [Program(0, 0, "micro", (Notify(0, 0, 1),))]
    for b in range(1, n_ctas):
        progs.append(Program(0, b, "micro", (Wait(b - 1, 1), Notify(0, b, 1))))
    return Schedule(spec(0, 0), tuple(progs), 0, 0, n_ctas, 2)


def notify_ops(k: int) -> Schedule:
    """One CTA issuing k release-store Notifies (the cost a producer pays per peer)."""
    return Schedule(spec(0, 0), (Program(0, 0, "micro", tuple(Notify(0, i, 1) for i in range(k))),),
                    0, 0, k, 2)


def wait_ops(k: int) -> Schedule:
    """One CTA notifying k flags, then waiting on each (already set: the check itself)."""
    ins = tuple(Notify(0, i, 1) for i in range(k)) + tuple(Wait(i, 1) for i in range(k))
    return Schedule(spec(0, 0), (Program(0, 0, "micro", ins),), 0, 0, k, 2)


def packets(k: int, n: int) -> Schedule:
    """CTA 0 pushes k PutPackets of n bytes; CTA 1 waits for each and copies it out: the
    packet rate (push-bound when large) and the unpack cost (when small)."""
    push = tuple(PutPackets(Ref(0, "input", i * n), Ref(0, "packets", i * n), n, 1) for i in range(k))
    pull = tuple(x for i in range(k) for x in (WaitPackets(Ref(0, "packets", i * n), n, 1),
                                               Copy(Ref(0, "packets", i * n), (Ref(0, "output", i * n),), n)))
    return Schedule(spec(k * n, k * n), (Program(0, 0, "push", push), Program(0, 1, "pull", pull)),
                    0, k * n, 1, 2)


def put_ops(k: int, n: int) -> Schedule:
    """One CTA issuing k PutPackets of n bytes into k windows, nobody reading them: the cost
    of a put inside a run (the executor runs up to 8 in a row together)."""
    push = tuple(PutPackets(Ref(0, "input", 0), Ref(0, "packets", i * n), n, 1) for i in range(k))
    return Schedule(spec(n, 0), (Program(0, 0, "push", push),), 0, k * n, 1, 2)


def put_pass(last: bool, p: int) -> Schedule:
    """p pairs at once: CTA 2b pushes 6 PutPackets of 4 KiB (one run, 3 passes over the
    threads), CTA 2b + 1 waits for the first or the last of them and copies it out: how
    much later the last pass of a run is readable (alone, and crowded)."""
    n, m = 4 * KiB, 6
    progs = []
    for b in range(p):
        win = lambda j: Ref(0, "packets", (b * m + j) * n)  # noqa: E731
        push = tuple(PutPackets(Ref(0, "input", b * n), win(j), n, 1) for j in range(m))
        j = m - 1 if last else 0
        read = (WaitPackets(win(j), n, 1), Copy(win(j), (Ref(0, "output", b * n),), n))
        progs += [Program(0, 2 * b, "push", push), Program(0, 2 * b + 1, "read", read)]
    return Schedule(spec(p * n, p * n), tuple(progs), 0, p * m * n, 1, 2)


def put_wave(m: int, n: int, last: bool) -> Schedule:
    """CTA 0 pushes its input as one run of m PutPackets of n bytes; CTA 1 waits for the
    first or the last window (a standalone WaitPackets) and copies it out."""
    win = lambda j: Ref(0, "packets", j * n)  # noqa: E731
    push = tuple(PutPackets(Ref(0, "input", j * n), win(j), n, 1) for j in range(m))
    j = m - 1 if last else 0
    read = (WaitPackets(win(j), n, 1), Copy(win(j), (Ref(0, "output", 0),), n))
    return Schedule(spec(m * n, n), (Program(0, 0, "push", push), Program(0, 1, "read", read)), 0, m * n, 1, 2)


def pkt_reduce(m: int, n: int, p: int) -> Schedule:
    """p push/reduce pairs at once: CTA 2b pushes its n input bytes into m packet windows
    (one PutPackets run), CTA 2b + 1 reduces the m windows and its own n input bytes (the
    shape of a latency-regime AllReduce consumer, alone and crowded)."""
    progs = []
    for b in range(p):
        win = lambda j: Ref(0, "packets", (b * m + j) * n)  # noqa: E731
        push = tuple(PutPackets(Ref(0, "input", b * n), win(j), n, 1) for j in range(m))
        red = tuple(WaitPackets(win(j), n, 1) for j in range(m)) + (
            Reduce(tuple(win(j) for j in range(m)) + (Ref(0, "input", (p + b) * n),),
                   (Ref(0, "output", b * n),), n, "fp32", "add"),)
        progs += [Program(0, 2 * b, "push", push), Program(0, 2 * b + 1, "reduce", red)]
    return Schedule(spec(2 * p * n, p * n), tuple(progs), 0, p * m * n, 1, 2)


def push_read(n: int, p: int, q: int, c: int, red: bool) -> Schedule:
    """n input bytes pushed as n / p PutPackets of p bytes, dealt round-robin over q CTAs;
    n / c reader CTAs, each waiting for its c-byte chunk and copying it out (``red``:
    reducing it with c bytes of its own input), the WaitPackets fused into the read as
    the planner's latency consumers are."""
    progs = _dealt([PutPackets(Ref(0, "input", j * p), Ref(0, "packets", j * p), p, 1) for j in range(n // p)], q)
    for i in range(n // c):
        win = Ref(0, "packets", i * c)
        read = (Reduce((win, Ref(0, "input", n + i * c)), (Ref(0, "output", i * c),), c, "fp32", "add")
                if red else Copy(win, (Ref(0, "output", i * c),), c))
        progs.append(Program(0, q + i, "read", (WaitPackets(win, c, 1), read)))
    return Schedule(spec(2 * n, n), tuple(progs), 0, n, 1, 2)


def _dealt(puts: list, q: int) -> list[Program]:
    """Push programs 0..q-1 of rank 0, put j going to CTA j mod q (one run each)."""
    return [Program(0, b, "push", tuple(puts[b::q])) for b in range(q)]


def fan_in(m: int, n: int, q: int, c: int) -> Schedule:
    """m windows of n bytes, each filled by one PutPackets (of its own n input bytes), the m
    puts dealt round-robin over q push CTAs (one run each); n / c reader CTAs, each
    reducing its c-byte chunk of every window with c bytes of its own input, the
    WaitPackets fused into the Reduce (m packet sources and one plain, as a latency
    ReduceScatter consumer reads its peers' pushes)."""
    progs = _dealt([PutPackets(Ref(0, "input", j * n), Ref(0, "packets", j * n), n, 1) for j in range(m)], q)
    for i in range(n // c):
        wins = tuple(Ref(0, "packets", j * n + i * c) for j in range(m))
        red = Reduce(wins + (Ref(0, "input", m * n + i * c),), (Ref(0, "output", i * c),), c, "fp32", "add")
        progs.append(Program(0, q + i, "read", tuple(WaitPackets(w, c, 1) for w in wins) + (red,)))
    return Schedule(spec((m + 1) * n, n), tuple(progs), 0, m * n, 1, 2)


FAN_IN = ([dict(m=7, n=n, q=q, c=512) for n in (1024, 2048) for q in (1, 2, 7)]
          + [dict(m=3, n=8192, q=q, c=1024) for q in (1, 3)])

PUSH_READ = ([dict(n=64 * KiB, p=p, q=64 * KiB // p, c=2 * KiB, red=red)
              for p in (2 * KiB, 8 * KiB, 16 * KiB, 32 * KiB) for red in (True, False)]
             + [dict(n=16 * KiB, p=p, q=q, c=KiB, red=True) for p in (KiB, 4 * KiB, 16 * KiB) for q in (1, 2)
                if q <= 16 * KiB // p]
             + [dict(n=12 * KiB, p=p, q=q, c=KiB, red=False) for p in (2 * KiB, 4 * KiB) for q in (1, 2)]
             # whole-put readers: one reader a put, the puts' size and count (the copies of
             # a latency AllGather or AllToAll), and fewer pushing CTAs
             + [dict(n=64 * KiB, p=p, q=64 * KiB // p, c=p, red=red) for p in (4 * KiB, 8 * KiB, 16 * KiB)
                for red in (True, False)]
             + [dict(n=n, p=p, q=n // p, c=p, red=False) for n, p in ((128 * KiB, 4 * KiB), (128 * KiB, 8 * KiB),
                                                                     (32 * KiB, 2 * KiB), (32 * KiB, 4 * KiB),
                                                                     (32 * KiB, 8 * KiB))]
             + [dict(n=64 * KiB, p=4 * KiB, q=q, c=4 * KiB, red=False) for q in (4, 8)])

PUT_WAVE = ([dict(m=m, n=n, last=True) for m, n in ((1, KiB), (1, 4 * KiB), (1, 8 * KiB), (1, 12 * KiB),
                                                 (1, 16 * KiB), (2, 4 * KiB), (3, 4 * KiB), (4, 4 * KiB),
                                                 (8, KiB), (5, 2 * KiB), (6, 2 * KiB), (7, 2 * KiB),
                                                 (8, 2 * KiB))]
            + [dict(m=m, n=n, last=False) for m, n in ((4, 4 * KiB), (7, 2 * KiB), (8, 2 * KiB))])

CASES = (
    [("copy_ops", dict(k=k, n=n), copy_ops(k, n)) for k in (1, 4, 16, 64) for n in (4 * KiB, 64 * KiB, 1 * MiB)]
    + [("reduce_ops", dict(k=k, n=n, m=m), reduce_ops(k, n, m)) for k in (1, 16) for n in (64 * KiB, 1 * MiB)
       for m in (2, 4, 8)]
    + [("ctas", dict(c=c, n=n), ctas(c, n)) for c in (1, 8, 32, 64, 128) for n in (256 * KiB, 4 * MiB)]
    + [("copy_dsts", dict(d=d, n=n), copy_dsts(d, n)) for d in (1, 2, 4, 8) for n in (256 * KiB, 1 * MiB)]
    + [("loaded", dict(c=32, n=2 * MiB, m=m, d=d), loaded(32, 2 * MiB, m, d))
       for m, d in ((1, 1), (1, 2), (1, 4), (2, 1), (4, 1), (8, 1))]
    + [("chain", dict(ctas=c), chain(c)) for c in (1, 2, 8, 32, 64, 128)]
    + [("packets", dict(k=k, n=n), packets(k, n)) for k in (1, 16) for n in (1 * KiB, 16 * KiB, 256 * KiB)]
    + [("notify_ops", dict(k=k), notify_ops(k)) for k in (1, 8, 32, 64, 128, 256)]
    + [("wait_ops", dict(k=k), wait_ops(k)) for k in (1, 8, 32, 64, 128, 256)]
    + [("ctas", dict(c=c, n=n), ctas(c, n)) for c in (2, 16, 128) for n in (4 * KiB,)]
    + [("pkt_reduce", dict(m=m, n=n, p=p), pkt_reduce(m, n, p))
       for m, n, p in ((1, KiB, 1), (3, KiB, 1), (4, KiB, 1), (7, KiB, 1), (3, 4 * KiB, 1), (7, 8 * KiB, 1),
                       (7, KiB, 8), (7, KiB, 64), (1, KiB, 8), (1, KiB, 64), (7, 256, 64), (7, 4 * KiB, 8))]
    + [("put_ops", dict(k=k, n=n), put_ops(k, n)) for k in (1, 8, 32) for n in (KiB, 8 * KiB)]
    + [("put_pass", dict(last=last, p=p), put_pass(last, p)) for last in (False, True) for p in (1, 48)]
    + [("copy_shifted", dict(k=k, n=n), copy_ops(k, n, shift=16)) for k in (1, 4, 16) for n in (4 * KiB, 64 * KiB)]
    + [("reduce_shifted", dict(k=k, n=n, m=m), reduce_ops(k, n, m, shift=16)) for k in (1, 16)
       for n in (64 * KiB, 1 * MiB) for m in (2, 8)]
    + [("reduce_small", dict(k=k, n=n, m=m), reduce_ops(k, n, m)) for k in (1, 16) for n in (4 * KiB, 16 * KiB)
       for m in (2, 8)]
    + [("reduce_dst_shifted", dict(k=k, n=n, m=m), reduce_ops(k, n, m, dst_shift=16)) for k in (1, 16)
       for n in (64 * KiB,) for m in (2, 8)]
    + [("reduce_ctas", dict(c=c, n=n, m=m), reduce_ctas(c, n, m)) for c in (8, 64) for n in (64 * KiB,)
       for m in (2, 8)]
    + [("push_read", d, push_read(**d)) for d in PUSH_READ]
    + [("fan_in", d, fan_in(**d)) for d in FAN_IN]
    + [("put_wave", d, put_wave(**d)) for d in PUT_WAVE]
)


def case_key(name: str, params: dict) -> tuple:
    """How a case is named in the results: its name and sorted parameters."""
    return (name, tuple(sorted(params.items())))


def measured(raw: dict) -> dict[tuple, float]:
    """case_key -> median us per call, from a results file of this script."""
    return {case_key(r["case"], {k: v for k, v in r.items() if k not in ("case", "us_per_call")}):
            statistics.median(r["us_per_call"]) for r in raw["raw"]}
