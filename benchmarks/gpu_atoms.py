"""Atom bandwidth on this GPU against cudaMemcpy in the same run.

Writes benchmarks/results/h200-atoms.json (name via --out). Summary:
- copy_vs_memcpy_64MiB: best Atom copy (sm, async, tma; ce: the executor's copy-engine
  Atom, one Copy through ``LoopbackWorld.run``) over cudaMemcpy D2D, worst size
  >= 64 MiB (bytes read + written / time for both). A sweep picks each size's best Atom
  copy configuration; then ``--rounds`` rounds each time cudaMemcpy and that configuration
  back to back, both ways (graph replay and event-timed calls, the faster counts), and the
  size's ratio is the median of the rounds' ratios: drift between the two timings cancels,
  and the pick's luck in the sweep does not count;
- reduce8_vs_roofline: 8-source reduce (bf16, fp32) over (bytes read + written) / best
  memcpy bandwidth, the lower of the two dtypes.

Run (after `pip install -e .`): python3 benchmarks/gpu_atoms.py
"""
from __future__ import annotations

import argparse

import numpy as np

from gpu_common import cupy, header, median, time_graph, time_launches, write

MiB = 1 << 20


def bind(fn, ctas: int, threads: int, args: tuple, **kw):
    """A launch of ``fn`` with its arguments fixed now (the rounds call it after the sweep)."""
    return lambda: fn((ctas,), (threads,), args, **kw)


def ce_copy(world, n: int):
    """A call of ``world`` (one rank) running one Copy of ``n`` bytes with the copy-engine
    Atom: what a plan's ``ce`` Copy costs through the executor (a bound call, then graph)."""
    from purlin.snac.ir import Copy, Program, Ref, Schedule
    from purlin.spec import library
    c = library.from_size("all_gather", 1, n)
    s = Schedule(c, (Program(0, 0, "copy", (Copy(Ref(0, "input", 0), (Ref(0, "output", 0),), n, "ce"),)),),
                 0, 0, 1, 2)
    return lambda x, y: world.run(s, [x], [y])


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="h200-atoms.json")
    ap.add_argument("--sizes-mib", default="64,256,1024")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args(argv)
    cp = cupy()
    from purlin.backends.gpu import LoopbackWorld, atomset, kernels
    import gpu_kernels
    k = gpu_kernels.for_device(0)
    sms = k.sm_count
    sizes = [int(s) * MiB for s in args.sizes_mib.split(",")]
    doc = header()
    doc["atom_set"] = k.atoms.name
    doc["threads_per_cta"] = atomset.THREADS
    raw = doc["raw"] = {"memcpy": {}, "copy": {}, "reduce": {}}
    kind = cp.cuda.runtime.memcpyDeviceToDevice
    biggest = max(sizes)
    src = cp.random.randint(0, 255, biggest, dtype=cp.uint8)
    dst = cp.empty(biggest, cp.uint8)
    best_memcpy = 0.0
    print(f"# {k.name}, {k.atoms.name}, {sms} SMs; GB/s count bytes read + written")
    def timed(fn, n):
        """Per-launch us from graph replays (no host launch cost in the numbers)."""
        return time_graph(fn, calls=10 if n <= 256 * MiB else 4, replays=args.reps // 4, warmup=1)

    raw["memcpy_graph"], raw["memcpy_events"] = {}, {}
    for n in sizes:
        # the baseline is the faster of two timings: graph replay and plain event-timed calls
        mc = lambda: cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, n, kind,
                                                 cp.cuda.get_current_stream().ptr)
        raw["memcpy_graph"][str(n)] = timed(mc, n)
        raw["memcpy_events"][str(n)] = time_launches(mc, args.reps)
        t = min((raw["memcpy_graph"][str(n)], raw["memcpy_events"][str(n)]), key=median)
        raw["memcpy"][str(n)] = t
        bw = 2 * n / median(t) / 1e3
        best_memcpy = max(best_memcpy, bw)
        print(f"memcpy D2D {n // MiB:6d} MiB  {median(t):9.1f} us  {bw:7.0f} GB/s")

    fcopy, fasync, fl2 = k.fn("atom_copy"), k.fn("atom_copy_async"), k.fn("atom_copy_l2")
    fcs, fwide, fna = k.fn("atom_copy_cs"), k.fn("atom_copy_wide"), k.fn("atom_copy_na")
    configs = []
    for ctas in (sms, 2 * sms, 4 * sms, 8 * sms):
        configs.append(("sm", ctas, 0, 0))
        configs.append(("sm_l2", ctas, 0, 0))
        configs.append(("sm_cs", ctas, 0, 0))
        configs.append(("sm_na", ctas, 0, 0))
        configs.append(("sm_wide", ctas, 0, 0))
        configs.append(("async", ctas, 0, 0))
    for ctas in (sms, 2 * sms, 4 * sms):           # grid-stride: small chunks, interleaved
        for gchunk in (64 << 10, 256 << 10):
            configs.append(("sm_l2", ctas, -gchunk, 0))
            configs.append(("sm_cs", ctas, -gchunk, 0))
            configs.append(("sm_na", ctas, -gchunk, 0))
            configs.append(("sm_wide", ctas, -gchunk, 0))
            configs.append(("sm256_wide", 2 * ctas, -gchunk // 2, 0))
            configs.append(("sm", ctas, -gchunk, 0))
    occ = {"occ2": k.fn("atom_copy_occ2"), "occ2u4": k.fn("atom_copy_occ2_u4")}   # 2 CTAs per SM
    for ctas in (2 * sms, 4 * sms, 8 * sms):
        for name in occ:
            configs.append((name, ctas, 0, 0))
            for gchunk in (64 << 10, 256 << 10):
                configs.append((name, ctas, -gchunk, 0))
    for ctas in (4 * sms, 8 * sms, 16 * sms):      # 256 threads per CTA (blockDim is free)
        for gchunk in (32 << 10, 128 << 10):
            configs.append(("sm256", ctas, -gchunk, 0))
            configs.append(("sm256_l2", ctas, -gchunk, 0))
            configs.append(("sm256_cs", ctas, -gchunk, 0))
    flat = {"flat4": k.fn("atom_copy_flat4")}
    for ctas in (2 * sms, 4 * sms, 8 * sms, 16 * sms):   # flat grid-stride over vectors
        for name in flat:
            configs.append((name, ctas, 0, 0))
    if k.atoms.tma:
        ftma = k.fn("atom_copy_tma")
        for stages, sb in ((4, 16384), (8, 16384), (4, 32768), (8, 24576)):
            smem = stages * sb
            cp.cuda.driver.funcSetAttribute(
                ftma.ptr, cp.cuda.driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem)
            for ctas in (sms, 2 * sms):
                if smem * (ctas // sms) <= 227 * 1024:
                    configs.append(("tma", ctas, stages, sb))
    copy_best: dict[int, tuple[float, str]] = {}
    launches = {}                     # (size, config) -> its launch, for the rounds
    ce_world = LoopbackWorld(1)       # the executor's copy-engine Atom: one Copy(atom='ce')
    for n in sizes:
        ce = ce_copy(ce_world, n)
        dst.fill(0)
        ce(src[:n], dst[:n])
        cp.cuda.runtime.deviceSynchronize()
        assert bool(cp.array_equal(src[:n], dst[:n])), "ce Atom copy wrong"
        launch = launches[n, "ce/executor"] = (lambda ce=ce, n=n: ce(src[:n], dst[:n]))
        t = raw["copy"].setdefault("ce/executor", {})[str(n)] = timed(launch, n)
        copy_best[n] = (2 * n / median(t) / 1e3, "ce/executor")
        for kind_name, ctas, stages, sb in configs:
            chunk = ((n + ctas - 1) // ctas + 15) // 16 * 16     # one contiguous piece per CTA
            if stages < 0:                                        # grid-stride chunks
                chunk, stages = -stages, 0

            args_ = (src, dst, np.int64(n), np.int64(chunk))
            if kind_name in flat:
                chunk = 0
                launch = bind(flat[kind_name], ctas, atomset.THREADS, (src, dst, np.int64(n)))
            elif kind_name in occ:
                launch = bind(occ[kind_name], ctas, atomset.THREADS, args_)
            elif kind_name.startswith("sm"):
                suffix = kind_name.rsplit("_", 1)[1] if "_" in kind_name else ""
                fn = {"l2": fl2, "cs": fcs, "na": fna, "wide": fwide}.get(suffix, fcopy)
                launch = bind(fn, ctas, 256 if kind_name.startswith("sm256") else atomset.THREADS, args_)
            elif kind_name == "async":
                launch = bind(fasync, ctas, atomset.THREADS, args_, shared_mem=4 * 16 * atomset.THREADS)
            else:
                launch = bind(ftma, ctas, atomset.THREADS, args_ + (np.int32(stages), np.int32(sb)),
                              shared_mem=stages * sb)
            t = timed(launch, n)
            key = f"{kind_name}/ctas={ctas}/chunk={chunk}/stages={stages}x{sb}"
            launches[n, key] = launch
            raw["copy"].setdefault(key, {})[str(n)] = t
            bw = 2 * n / median(t) / 1e3
            if bw > copy_best.get(n, (0, ""))[0]:
                copy_best[n] = (bw, key)
        # correctness of the last config of each kind at this size
        dst.fill(0)
        fcopy((2 * sms,), (atomset.THREADS,), (src, dst, np.int64(n), np.int64(((n + 2 * sms - 1) // (2 * sms) + 15) // 16 * 16)))
        assert bool(cp.array_equal(src[:n], dst[:n])), "atom_copy wrong"
        for name, fn in occ.items():    # an odd size: a partial last step and the byte tail
            dst.fill(0)
            fn((2 * sms,), (atomset.THREADS,), (src, dst, np.int64(n - 13), np.int64(100016)))
            assert bool(cp.array_equal(src[:n - 13], dst[:n - 13])) and int(dst[n - 13]) == 0, f"{name} wrong"
        for name, fn in flat.items():   # an odd size: the vector loop and the byte tail
            dst.fill(0)
            fn((2 * sms,), (atomset.THREADS,), (src, dst, np.int64(n - 13)))
            assert bool(cp.array_equal(src[:n - 13], dst[:n - 13])) and int(dst[n - 13]) == 0, f"{name} wrong"
        memcpy_bw = 2 * n / median(raw["memcpy"][str(n)]) / 1e3
        print(f"copy best {n // MiB:6d} MiB  {copy_best[n][0]:7.0f} GB/s = {copy_best[n][0] / memcpy_bw:.3f} "
              f"x memcpy  ({copy_best[n][1]})")
    per_kind = {}
    for key, by_size in raw["copy"].items():
        kname = key.split("/")[0]
        for n_s, t in by_size.items():
            bw = 2 * int(n_s) / median(t) / 1e3
            cur = per_kind.setdefault(kname, {}).get(n_s)
            if cur is None or bw > cur[0]:
                per_kind[kname][n_s] = (bw, key)
    doc["copy_best_by_kind"] = {kn: {n: {"gbps": v[0], "config": v[1]} for n, v in d.items()}
                                for kn, d in per_kind.items()}

    # ---- reduce: 8 sources -> 1, bf16 and fp32 ----
    fred = k.fn("atom_reduce")
    red_best = {}
    for dtn, dtc in (("bf16", 2), ("fp32", 0)):
        for n in [x for x in sizes if x <= 256 * MiB]:
            srcs = [cp.random.standard_normal(n // 4, dtype=cp.float32).view(cp.uint8) for _ in range(8)]
            ptrs = cp.asarray(np.array([x.data.ptr for x in srcs], np.uint64))
            out = cp.empty(n, cp.uint8)
            for ctas in (sms, 2 * sms, 4 * sms, 8 * sms):
                chunk = ((n + ctas - 1) // ctas + 15) // 16 * 16
                launch = lambda: fred((ctas,), (atomset.THREADS,),
                                      (ptrs, np.int32(8), out, np.int64(n), np.int64(chunk), np.int32(dtc), np.int32(0)))
                t = timed(launch, n)
                key = f"{dtn}/ctas={ctas}"
                raw["reduce"].setdefault(key, {})[str(n)] = t
                bw = 9 * n / median(t) / 1e3
                if bw > red_best.get((dtn, n), (0, ""))[0]:
                    red_best[(dtn, n)] = (bw, key)
            if dtn == "fp32":   # exact check: fp32 sums in source order
                acc = srcs[0].view(cp.float32).copy()
                for x in srcs[1:]:
                    acc = acc + x.view(cp.float32)
                assert bool(cp.array_equal(acc, out.view(cp.float32))), "atom_reduce fp32 wrong"
            print(f"reduce8 {dtn} {n // MiB:4d} MiB out  {red_best[(dtn, n)][0]:7.0f} GB/s = "
                  f"{red_best[(dtn, n)][0] / best_memcpy:.3f} x roofline ({red_best[(dtn, n)][1]})")
            del srcs
    # ---- rounds: memcpy and each size's pick, back to back, both timed both ways ----
    ratios, raw["rounds"] = {}, {}
    for n in [x for x in sizes if x >= 64 * MiB]:
        mc = lambda: cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, n, kind,
                                                 cp.cuda.get_current_stream().ptr)
        pick = launches[n, copy_best[n][1]]
        rounds = []
        for _ in range(args.rounds):
            r = {"memcpy_graph": median(timed(mc, n)), "memcpy_events": median(time_launches(mc, 8)),
                 "copy_graph": median(timed(pick, n)), "copy_events": median(time_launches(pick, 8))}
            r["ratio"] = min(r["memcpy_graph"], r["memcpy_events"]) / min(r["copy_graph"], r["copy_events"])
            rounds.append(r)
        raw["rounds"][str(n)] = {"config": copy_best[n][1], "rounds": rounds}
        ratios[str(n)] = median([r["ratio"] for r in rounds])
        print(f"rounds   {n // MiB:6d} MiB  copy / memcpy {ratios[str(n)]:.3f} (median of {len(rounds)}: "
              f"{min(r['ratio'] for r in rounds):.3f} .. {max(r['ratio'] for r in rounds):.3f}), {copy_best[n][1]}")
    red = {}
    for dtn in ("bf16", "fp32"):
        red[dtn] = max(v[0] for (d, n), v in red_best.items() if d == dtn and n >= 64 * MiB) / best_memcpy
    doc["summary"] = {
        "copy_vs_memcpy_64MiB": min(ratios.values()),
        "copy_vs_memcpy_by_size": ratios,
        "copy_vs_memcpy_rule": f"median over {args.rounds} interleaved rounds of memcpy time / copy time, "
                               "each the faster of graph replay and event-timed calls",
        "copy_best_config": {str(n): v[1] for n, v in copy_best.items()},
        "reduce8_vs_roofline": min(red.values()),
        "reduce8_vs_roofline_by_dtype": red,
        "reduce8_best_config": {f"{d}/{n}": v[1] for (d, n), v in red_best.items()},
        "memcpy_best_gbps": best_memcpy,
        "targets": {"copy_vs_memcpy_64MiB": ">= 0.97 (issue 17)", "reduce8_vs_roofline": ">= 0.90"},
    }
    path = write(args.out, doc)
    print(f"summary {doc['summary']['copy_vs_memcpy_64MiB']:.3f} copy/memcpy, "
          f"{doc['summary']['reduce8_vs_roofline']:.3f} reduce8/roofline -> {path}")
    return doc


if __name__ == "__main__":
    main()
