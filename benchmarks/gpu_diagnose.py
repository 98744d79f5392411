"""Diagnostics behind planner and kernel decisions on one GPU (loopback, W=8).

- ``crossover``: each of the seven at 8 KiB .. 512 KiB per rank in the latency regime and
  in the direct regime (one-shot and, for reductions, two-shot), per call in a graph: where
  the loopback default should leave the latency regime;
- ``agv``: AllGatherV against AllGather at 64 MiB per rank: time, and from one traced call
  the spread of CTA end times and each CTA's copy rate; variants isolate block sizes,
  alignment and chunking;
- ``ar8``: one traced 8 KiB AllReduce (per instruction), and an empty grid of the same
  size in a graph (the launch floor); ``ar8time``: just its time per call; ``ar8pol``: it
  over chunk sizes and CTA splits of the latency regime;
- ``interp``: per-instruction cost inside the interpreter, from hand-made chains of 1, 9
  and 33 instructions of one kind on one CTA (NOPs, 16 B and 1 KiB copies, Notify/Wait
  pairs, PutPackets runs, put/wait/copy triples), and the kernels' registers, local
  memory (spills) and machine-code size.

Kernel variants: run a part again with ``PURLIN_DEFINES`` set and ``--update``; its key
in ``raw`` names the defines (e.g. ``agv[PURLIN_DST_ALIGN=0]``).

Writes benchmarks/results/h200-diagnose.json (machine, date, command, raw samples).
Run (after `pip install -e .`): python3 benchmarks/gpu_diagnose.py [--only crossover,agv,ar8]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from gpu_common import cupy, header, least_traffic, median, memcpy_roofline, time_graph, write
from gpu_loopback import buffers, wrong

MiB, KiB = 1 << 20, 1 << 10
W = 8
WORLDS = (8, 4, 2)


def cta_summary(records) -> dict:
    """CTA end times and per-CTA copy rates from one traced call."""
    ends, busy, nbytes = {}, {}, {}
    for r in records:
        key = (r.rank, r.cta)
        ends[key] = max(ends.get(key, 0.0), r.end_us)
        if r.kind in ("Copy", "Reduce"):
            busy[key] = busy.get(key, 0.0) + (r.end_us - r.start_us)
            nbytes[key] = nbytes.get(key, 0) + r.nbytes
    e = sorted(ends.values())
    rates = sorted(nbytes[k] / busy[k] / 1e3 for k in busy if busy[k] > 0)   # GB/s
    q = lambda xs, f: xs[min(len(xs) - 1, int(f * len(xs)))] if xs else None
    return {"ctas": len(e), "end_min_us": e[0], "end_median_us": q(e, 0.5), "end_max_us": e[-1],
            "copy_gbps_min": q(rates, 0.0), "copy_gbps_median": q(rates, 0.5),
            "copy_gbps_max": rates[-1] if rates else None}


def timed(world, cp, c, pol, calls=8, replays=5, trace=False) -> dict:
    ins, outs = buffers(cp, c)
    sched = world.plan(c, pol)
    samples = time_graph(lambda: world.run(sched, ins, outs), calls=calls, replays=replays)
    world.check()
    for o in outs:
        if o is not None:
            o.fill(0xA5)
    world.run(sched, ins, outs)
    world.synchronize()
    out = {"samples_us": samples, "median_us": median(samples), "wrong": wrong(cp, c, ins, outs),
           "policy": sched.policy, "programs": len(sched.programs)}
    if trace:
        recs = world.trace(sched, ins, outs)
        out["trace"] = cta_summary(recs)
        out["records"] = [list(r) for r in recs] if trace == "full" else None
    return out


def crossover(world, cp, Policy, library) -> dict:
    from purlin.backends.gpu import LoopbackWorld
    res = {}
    for w in WORLDS:
        res.update(crossover_one(world if w == W else LoopbackWorld(w), w, cp, Policy, library))
    return res


def crossover_one(world, w, cp, Policy, library) -> dict:
    res = {}
    for name in library.PURLIN_SEVEN:
        for per_rank in (4 * KiB, 8 * KiB, 16 * KiB, 32 * KiB, 64 * KiB, 128 * KiB, 256 * KiB, 512 * KiB):
            if w != W and per_rank > 256 * KiB:
                continue
            size = per_rank * w if name.startswith("all_gather") else per_rank
            c = library.from_size(name, w, size, "fp32", seed=1)
            pols = {"latency": Policy(regime="latency"), "direct": Policy(regime="direct", algorithm="one_shot")}
            if c.is_reduce:
                pols["direct_two_shot"] = Policy(regime="direct", algorithm="two_shot")
            row = {}
            for key, pol in pols.items():
                try:
                    r = timed(world, cp, c, pol, calls=32, replays=5)
                    row[key] = {k: r[k] for k in ("samples_us", "median_us", "wrong", "programs")}
                except Exception as e:
                    row[key] = {"error": f"{type(e).__name__}: {e}"}
            res[f"{name}/W{w}/{per_rank}" if w != W else f"{name}/{per_rank}"] = row
            print(f"{name:18s} W={w} {per_rank:8d} " + "  ".join(
                f"{k} {v.get('median_us', float('nan')):7.2f}" for k, v in row.items()), flush=True)
    return res


def agv(world, cp, Policy, library) -> dict:
    per = 64 * MiB
    base = library.from_size("all_gather_v", W, per * W, "fp32", seed=1)
    sizes = [base.input.nbytes(r) for r in range(W)]
    rounded = [s // (64 * KiB) * (64 * KiB) for s in sizes]
    rounded[1] += sum(sizes) - sum(rounded)            # same total, 64 KiB-aligned blocks but one
    rounded = [s // 16 * 16 for s in rounded]
    no_zero = sorted(sizes)[::-1]
    variants = {
        "all_gather": (library.all_gather_v(W, [per] * W), None),
        "agv": (base, None),
        "agv_chunk_256K": (base, Policy(regime="direct", chunk_nbytes=256 * KiB)),
        "agv_chunk_4M": (base, Policy(regime="direct", chunk_nbytes=4 * MiB)),
        "agv_64K_aligned": (library.all_gather_v(W, rounded), None),
        "agv_sorted_desc": (library.all_gather_v(W, no_zero), None),
        "agv_two_sizes": (library.all_gather_v(W, [2 * per if r < 4 else 0 for r in range(W)]), None),
        "agv_512_aligned": (library.all_gather_v(W, [x // 512 * 512 for x in sizes]), None),
        "ag_off16": (library.all_gather_v(W, [per - 16] * W), None),
    }
    res = {"sizes": sizes, "memcpy_gbps": memcpy_roofline((1 << 30,), 10)[0]}
    for key, (c, pol) in variants.items():
        r = timed(world, cp, c, pol, trace=True)
        r["vs_roofline"] = least_traffic(c) / res["memcpy_gbps"] / 1e3 / r["median_us"]
        res[key] = r
        print(f"{key:18s} {r['median_us']:8.1f} us  {r['vs_roofline']:.3f} x roofline  wrong={r['wrong']}  "
              f"ends {r['trace']['end_min_us']:.0f}/{r['trace']['end_median_us']:.0f}/{r['trace']['end_max_us']:.0f} us  "
              f"CTA GB/s {r['trace']['copy_gbps_min']:.0f}/{r['trace']['copy_gbps_median']:.0f}/"
              f"{r['trace']['copy_gbps_max']:.0f}", flush=True)
    return res


def ar8time(world, cp, Policy, library) -> dict:
    """The 8 KiB AllReduce per call (kernel variants: run once per PURLIN_DEFINES)."""
    import os
    c = library.all_reduce(W, 8 * KiB, "fp32")
    r = timed(world, cp, c, None, calls=128, replays=8)
    r["defines"] = os.environ.get("PURLIN_DEFINES", "")
    print(f"ar8time [{r['defines']}] {r['median_us']:.2f} us/call wrong={r['wrong']}", flush=True)
    return r


def ar8(world, cp, Policy, library) -> dict:
    from purlin.backends.gpu import atomset, kernels
    c = library.all_reduce(W, 8 * KiB, "fp32")
    res = {"auto": timed(world, cp, c, None, calls=128, replays=8, trace="full")}
    recs = res["auto"]["records"]
    by_instr = {}
    for rank, cta, i, kind, t0, t1, n in recs:
        by_instr.setdefault(f"{i}:{kind}", []).append((t0, t1))
    res["by_instr"] = {k: {"start_median_us": statistics.median(a for a, _ in v),
                           "end_median_us": statistics.median(b for _, b in v),
                           "end_max_us": max(b for _, b in v), "n": len(v)} for k, v in sorted(by_instr.items())}
    for k, v in res["by_instr"].items():
        print(f"ar8 instr {k:18s} start {v['start_median_us']:6.2f} end {v['end_median_us']:6.2f} "
              f"max {v['end_max_us']:6.2f} us (n={v['n']})", flush=True)
    import gpu_kernels
    empty = gpu_kernels.for_device(0).fn("empty_kernel")
    for grid in (1, 64, 128):
        key = f"empty_grid_{grid}"
        res[key] = time_graph(lambda: empty((grid,), (atomset.THREADS,), ()), calls=128, replays=8)
        print(f"{key}: {median(res[key]):.2f} us per graph node", flush=True)
    print(f"ar8 auto: {res['auto']['median_us']:.2f} us/call, {res['auto']['programs']} CTAs", flush=True)
    return res


def ar8pol(world, cp, Policy, library) -> dict:
    """The 8 KiB AllReduce at W=8 in the latency regime over chunk sizes and CTA splits:
    whether the policy, not the kernel, sets its time."""
    c = library.all_reduce(W, 8 * KiB, "fp32")
    res = {}
    for chunk in (512, 1024, 2048, 8192):
        for put, cons in ((1, 1), (2, 2), (4, 4), (8, 8), (8, 16)):
            if put * chunk > 8 * KiB or cons * chunk > 8 * KiB:
                continue
            pol = Policy(regime="latency", chunk_nbytes=chunk, put_ctas=put, consumer_ctas=cons)
            try:
                r = timed(world, cp, c, pol, calls=128, replays=6)
            except Exception as e:  # a split the planner refuses: say which and go on
                res[f"{chunk}/{put}/{cons}"] = {"error": str(e)[:200]}
                continue
            res[f"{chunk}/{put}/{cons}"] = r
            print(f"ar8pol chunk={chunk:5d} put={put:2d} cons={cons:2d} {r['median_us']:6.2f} us "
                  f"({r['programs']} CTAs) wrong={r['wrong']}", flush=True)
    return res


def _chains(n: int, library):
    """Hand-made schedules on rank 0 of a 2-rank loopback world, one CTA, ``n`` repeats of
    one instruction kind: the slope over n is that kind's cost inside the interpreter."""
    from purlin.snac.ir import Copy, Notify, Program, PutPackets, Ref, Schedule, Wait, WaitPackets
    K = 1024
    c = library.all_gather(2, 64 * K, "fp32")
    i0, o0, p0 = Ref(0, "input", 0), Ref(0, "output", 0), Ref(0, "packets", 0)
    kinds = {
        "nop": (PutPackets(i0, p0, K, 1),) + (WaitPackets(p0, K, 1),) * n + (Copy(p0, (o0,), K),),
        "copy16": (Copy(i0, (o0,), 16),) * n,
        "copy1k": (Copy(i0, (o0,), K),) * n,
        "signal": tuple(x for k in range(n) for x in (Notify(0, 0, k + 1), Wait(0, k + 1))),
        "put1k": tuple(PutPackets(i0, p0 + K * k, K, 1) for k in range(n)),
        "putwait1k": tuple(x for k in range(n) for x in (PutPackets(i0, p0 + K * k, K, k + 1),
                                                         WaitPackets(p0 + K * k, K, k + 1),
                                                         Copy(p0 + K * k, (o0,), K))),
    }
    return c, {name: Schedule(c, (Program(0, 0, "probe", instrs), Program(1, 0, "idle", ())),
                              0, K * max(n, 1), 1, 4 * n + 8)
               for name, instrs in kinds.items()}


def interp(world, cp, Policy, library) -> dict:
    """Per-instruction cost inside the interpreter (graph-timed, untraced): the slope from
    chains of 1 to 33 instructions of one kind on one CTA; and the kernels' registers and
    local memory (spills show as local bytes)."""
    from purlin.backends.gpu import LoopbackWorld, kernels
    from purlin.errors import BackendUnavailable
    k = kernels.for_device(0)
    res = {"attributes": {}}
    for name in ("snac_run", "snac_run_pkt", "snac_run_tma"):
        try:
            f = k.fn(name)
        except BackendUnavailable:   # snac_run_tma exists from sm_90 on
            continue
        at = {}
        for key, code in (("num_regs", 4), ("local_size_bytes", 3), ("shared_size_bytes", 1)):
            at[key] = cp.cuda.driver.funcGetAttribute(code, f.ptr)
        res["attributes"][name] = at
    try:   # machine-code size per kernel (instructions), where cuobjdump is present
        from purlin.backends.gpu import atomset
        code = atomset.sass(atomset.compile_cubin(k.atoms))
        for name in res["attributes"]:
            res["attributes"][name]["sass_instructions"] = sum(
                1 for line in code.get(name, "").splitlines() if line.strip().startswith("/*") and "*/" in line
                and len(line.split("*/", 1)[1].strip()) > 1)
    except BackendUnavailable as e:
        res["attributes"]["sass_error"] = str(e)[:200]
    for name, at in res["attributes"].items():
        print(f"interp {name}: {at}", flush=True)
    w2 = LoopbackWorld(2)
    for n in (1, 9, 33):
        c, scheds = _chains(n, library)
        ins, outs = buffers(cp, c)
        for kind, s in scheds.items():
            t = time_graph(lambda: w2.run(s, ins, outs), calls=64, replays=6)
            w2.check()
            res.setdefault(kind, {})[str(n)] = t
    for kind in [x for x in res if x != "attributes"]:
        t1, t33 = median(res[kind]["1"]), median(res[kind]["33"])
        res[kind]["slope_us"] = (t33 - t1) / 32
        print(f"interp {kind:10s} n=1 {t1:6.2f} us  n=33 {t33:7.2f} us  per instr {(t33 - t1) / 32:6.3f} us",
              flush=True)
    return res


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="h200-diagnose.json")
    ap.add_argument("--only", default="ar8,agv,crossover")
    ap.add_argument("--worlds", default="8,4,2", help="crossover worlds")
    ap.add_argument("--update", action="store_true", help="add to the results file, keep its parts")
    args = ap.parse_args(argv)
    global WORLDS
    WORLDS = tuple(int(x) for x in args.worlds.split(","))
    cp = cupy()
    import gpu_kernels
    defines = gpu_kernels.interpreter_variant()   # $PURLIN_DEFINES: a kernel variant
    from purlin.backends.gpu import LoopbackWorld
    from purlin.snac import Policy
    from purlin.spec import library
    world = LoopbackWorld(W)
    import json
    from common import RESULTS
    doc = header((f"PURLIN_DEFINES='{defines}' " if defines else "")
                 + "python3 benchmarks/gpu_diagnose.py " + " ".join(argv or sys.argv[1:]))
    doc["raw"] = {}
    if args.update and (RESULTS / args.out).exists():   # add parts to an earlier run's file
        old = json.loads((RESULTS / args.out).read_text())
        doc["raw"], doc["command"] = old["raw"], old["command"] + "; " + doc["command"]
    for part in args.only.split(","):
        t0 = time.time()
        key = f"{part}[{defines}]" if defines else part
        doc["raw"][key] = globals()[part](world, cp, Policy, library)
        print(f"# {part}: {time.time() - t0:.0f} s", flush=True)
        write(args.out, doc)
    return doc


if __name__ == "__main__":
    main()
