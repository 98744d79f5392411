"""Several GPUs over NVLink: Purlin's collectives against NCCL, one process per GPU.

    torchrun --nproc_per_node=N benchmarks/multi_gpu.py [--max-size 1G] [--out DIR]

Each rank runs the library collectives through an IpcWorld (buffers shared by CUDA IPC,
bootstrapped over gloo) and the same operation through NCCL (torch.distributed, NVLS off),
both captured in CUDA graphs; the per-call time is the maximum over ranks. Outputs are
poisoned, inputs random, and every element is checked against the spec (recomputed on the
GPU in rank order). Rank 0 prints an nccl-tests-style table with both and their ratio and
writes h200x{N}-collectives.json. (Not yet run on several GPUs; NVLink calibration
microbenchmarks, per-CTA remote rates and a cross-GPU flag ping-pong, are still to add.)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")          # the lent machines forbid NVLS
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
NCCL_OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "all_gather_v",
            "reduce_scatter_v", "all_to_all_v", "broadcast", "reduce")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-size", default="1G")
    ap.add_argument("--out", default=os.environ.get("OUT", "benchmarks/results"))
    ap.add_argument("--collectives", default=",".join(NCCL_OPS))
    ap.add_argument("--policy", default=None, help="a Policy as JSON for every point (default: auto)")
    ap.add_argument("--sizes", default=None, help="comma-separated sizes (default: 1K, 4K, ... up to --max-size)")
    ap.add_argument("--tag", default="", help="results file h200x{N}-collectives{-TAG}.json")
    ap.add_argument("--merge", action="store_true",
                    help="keep the committed file's rows for collectives not run now")
    args = ap.parse_args()
    import cupy as cp
    import torch
    import torch.distributed as dist

    import numpy as np
    from gpu_common import time_graph
    from purlin.spec import evaluate
    from purlin.backends.gpu import IpcWorld
    from purlin.sim.predict import parse_size
    from purlin.spec import library
    from purlin.topology import load_topology

    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    cp.cuda.Device(local).use()
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank, n = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    max_size = parse_size(args.max_size)
    sizes = ([parse_size(x) for x in args.sizes.split(",")] if args.sizes else
             [KiB * 4 ** k for k in range(11) if KiB * 4 ** k <= max_size])
    policy = json.loads(args.policy) if args.policy else None
    fname = f"h200x{n}-collectives{'-' + args.tag if args.tag else ''}.json"
    topo = load_topology("hgx-h200-8", gpus=n)   # hgx-h200-8 with n of its GPUs in use
    # V splits put up to about twice the mean on one rank
    world = IpcWorld(gloo, device=local, max_nbytes=2 * max_size, staging_nbytes=256 * MiB,
                     packets_nbytes=64 * MiB, topology=topo)
    rows, t0 = [], time.time()
    names = args.collectives.split(",")
    kept, command = [], "torchrun --nproc_per_node=%d benchmarks/multi_gpu.py %s" % (n, " ".join(sys.argv[1:]))
    committed = Path(__file__).resolve().parent / "results" / fname
    if args.merge and committed.exists():
        old = json.loads(committed.read_text())
        kept = [r for r in old["rows"] if r["collective"] not in names]
        command = old.get("command", "") + "; " + command
    for name in names:
        for size in sizes:
            c = library.from_size(name, n, size, "fp32")
            s = world.plan(c, policy)
            gens = [cp.random.RandomState(1000 * r + size % 997) for r in range(n)]
            all_in = [g.standard_normal(c.input.nbytes(r) // 4, dtype=cp.float32).view(cp.uint8)
                      for r, g in enumerate(gens)]
            x = world.input(c.input.nbytes(rank))
            y = world.output(c.output.nbytes(rank))
            if x.size:
                x[:] = all_in[rank]
            y.fill(0xFF)
            cp.cuda.runtime.deviceSynchronize()
            dist.barrier(gloo)
            world.run(s, x if x.size else None, y if y.size else None)
            world.synchronize()
            want = evaluate(c, [cp.asnumpy(a) for a in all_in])[rank]   # the spec's oracle
            wrong = int(np.count_nonzero(cp.asnumpy(y) != want)) if y.size else 0
            ours = time_graph(lambda: world.run(s, x if x.size else None, y if y.size else None),
                              calls=_calls(size), replays=5, warmup=1)
            base = _nccl_time(torch, dist, name, c, rank, n, _calls(size))
            t_ours = _max_over_ranks(torch, dist, statistics.median(ours))
            t_nccl = _max_over_ranks(torch, dist, statistics.median(base)) if base else None
            wrong = int(_sum_over_ranks(torch, dist, wrong))
            rows.append({"collective": c.name, "size": size, "world": n, "policy": s.policy,
                         "ours_us": t_ours, "nccl_us": t_nccl, "ours_samples_us": ours,
                         "nccl_samples_us": base, "wrong": wrong,
                         "busbw_factor": library.BUSBW_FACTOR[c.name](n)})
            if rank == 0:
                r = rows[-1]
                ratio = f"{r['nccl_us'] / r['ours_us']:6.2f}" if r["nccl_us"] else "   n/a"
                print(f"{c.name:>16} {size:>11} {t_ours:10.2f} {t_nccl or 0:10.2f} {ratio}  #wrong {wrong}",
                      flush=True)
        if rank == 0:   # after each collective, so a run cut short keeps what it measured
            from gpu_common import header, write
            doc = {**header(command), "world": n, "elapsed_s": time.time() - t0, "rows": kept + rows,
                   "summary": _summary(kept + rows)}
            write(fname, doc, args.out)
    world.close()
    dist.destroy_process_group()


def _calls(size: int) -> int:
    return 64 if size <= 1 * MiB else 8 if size <= 64 * MiB else 2


def _max_over_ranks(torch, dist, v: float) -> float:
    t = torch.tensor([v], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def _sum_over_ranks(torch, dist, v: float) -> float:
    t = torch.tensor([v], device="cuda", dtype=torch.float64)
    dist.all_reduce(t)
    return float(t.item())


def _nccl_time(torch, dist, name, c, rank, n, calls):
    """NCCL doing the same operation on the same bytes, in a CUDA graph (None if NCCL
    cannot express it)."""
    try:
        return _nccl_time_or_raise(torch, dist, name, c, rank, n, calls)
    except Exception as e:  # e.g. uneven all_gather lists on an older torch
        if rank == 0:
            print(f"# {name}: no NCCL baseline ({type(e).__name__}: {str(e)[:80]})", flush=True)
        return None


def _nccl_time_or_raise(torch, dist, name, c, rank, n, calls):
    inp = torch.randn(max(1, c.input.nbytes(rank) // 4), device="cuda")[: c.input.nbytes(rank) // 4]
    out = torch.empty(c.output.nbytes(rank) // 4, device="cuda")
    if name in ("all_reduce",):
        fn = lambda: dist.all_reduce(inp)
    elif name == "broadcast":
        buf = torch.empty(c.output.nbytes(rank) // 4, device="cuda")
        fn = lambda: dist.broadcast(buf, 0)
    elif name == "reduce":
        buf = torch.empty(c.input.nbytes(rank) // 4, device="cuda")
        fn = lambda: dist.reduce(buf, 0)
    elif name == "all_gather":
        fn = lambda: dist.all_gather_into_tensor(out, inp)
    elif name == "reduce_scatter":
        fn = lambda: dist.reduce_scatter_tensor(out, inp)
    elif name in ("all_to_all", "all_to_all_v"):
        ins = [b.nbytes // 4 for b in c.input.ranks[rank]]
        outs = [b.nbytes // 4 for b in c.output.ranks[rank]]
        fn = lambda: dist.all_to_all_single(out, inp, outs, ins)
    elif name == "all_gather_v":   # NCCL has no AllGatherV: a list all_gather of uneven tensors
        parts = [torch.empty(b.nbytes // 4, device="cuda") for b in c.output.ranks[rank]]
        fn = lambda: dist.all_gather(parts, inp)
    elif name == "reduce_scatter_v":
        parts = [torch.empty(b.nbytes // 4, device="cuda") for b in c.input.ranks[rank]]
        fn = lambda: dist.reduce_scatter(out, parts)
    else:
        return None
    try:
        torch.cuda.synchronize()
        fn()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            with torch.cuda.graph(g, stream=s):
                for _ in range(calls):
                    fn()
        samples = []
        for _ in range(6):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            g.replay()
            b.record()
            b.synchronize()
            samples.append(a.elapsed_time(b) * 1e3 / calls)
        return samples[1:]
    except Exception as e:   # uneven lists can refuse capture: time it eagerly instead
        if rank == 0:
            print(f"# {name}: NCCL graph capture failed ({type(e).__name__}); timing eagerly", flush=True)
        samples = []
        for _ in range(5):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(calls):
                fn()
            b.record()
            b.synchronize()
            samples.append(a.elapsed_time(b) * 1e3 / calls)
        return samples


def _summary(rows) -> dict:
    small = [r for r in rows if r["collective"] == "all_reduce" and r["size"] <= 64 * KiB]
    large = [r for r in rows if r["size"] >= 256 * MiB and r["nccl_us"]]
    return {
        "all_correct": all(r["wrong"] == 0 for r in rows),
        "allreduce_small_max_us": max((r["ours_us"] for r in small), default=None),
        "allreduce_small_min_speedup_vs_nccl": min((r["nccl_us"] / r["ours_us"] for r in small if r["nccl_us"]), default=None),
        "large_min_busbw_ratio_vs_nccl": min((r["nccl_us"] / r["ours_us"] for r in large), default=None),
        "targets": {"allreduce_small_max_us": "<= 8", "allreduce_small_min_speedup_vs_nccl": ">= 1.5",
                    "large_min_busbw_ratio_vs_nccl": ">= 0.95"},
    }


def predict(argv=None) -> dict:
    """The simulator's prediction for every measured row (same collective, size and policy
    on hgx-h200-8 cut to the measured GPU count), written beside it as h200x{N}-prediction*.json.
    Runs on a CPU: ``python benchmarks/multi_gpu.py predict [--results FILE] [--calibration FILE]``.
    ``--calibration`` names a calibration file under benchmarks/results/ (the one of the kernel
    the run was made with, where the kernel has changed since); default: today's h200."""
    from common import header, save

    from purlin.sim import simulate
    from purlin.snac import Policy, plan
    from purlin.spec import library
    from purlin.topology import load_topology
    ap = argparse.ArgumentParser(prog="multi_gpu.py predict")
    ap.add_argument("--results", default="h200x2-collectives.json")
    ap.add_argument("--calibration", default=None, help="calibration file under benchmarks/results/")
    args = ap.parse_args(argv)
    results = Path(__file__).resolve().parent / "results"
    cal = "h200" if args.calibration is None else str(results / args.calibration)
    if args.calibration is not None and not Path(cal).is_file():
        raise SystemExit(f"--calibration {args.calibration}: no such file under {results}")
    measured = json.loads((results / args.results).read_text())
    n = measured["world"]
    topo = load_topology("hgx-h200-8", gpus=n)   # hgx-h200-8 with n of its GPUs in use
    rows = []
    for r in measured["rows"]:
        c = library.from_size(r["collective"], n, r["size"], "fp32")
        s = plan(c, topo, Policy.from_dict(r["policy"]), cta_budget=r["policy"]["put_ctas"] + r["policy"]["consumer_ctas"])
        t = simulate(s, topo, cal, record=False).time_us
        rows.append({"collective": r["collective"], "size": r["size"], "regime": r["policy"]["regime"],
                     "measured_us": r["ours_us"], "predicted_us": t, "error": t / r["ours_us"] - 1})
    errs = [abs(r["error"]) for r in rows]
    doc = {**header(), "command": "python benchmarks/multi_gpu.py predict " + " ".join(argv or sys.argv[2:]),
           "measured": args.results, "topology": topo.name, "calibration": "h200 (NVLink parameters: priors)",
           "calibration_file": args.calibration,
           "rows": rows,
           "summary": {"points": len(rows), "median_abs_err": statistics.median(errs), "max_abs_err": max(errs),
                       "within_15pct": sum(e <= 0.15 for e in errs),
                       "median_err_by_regime": {g: statistics.median(r["error"] for r in rows if r["regime"] == g)
                                                for g in sorted({r["regime"] for r in rows})},
                       "target_median": 0.05}}
    save(args.results.replace("collectives", "prediction"), doc)
    print(f"median |err| {doc['summary']['median_abs_err']:.3f}, max {doc['summary']['max_abs_err']:.3f} "
          f"over {len(rows)} points")
    return doc


if __name__ == "__main__":
    if sys.argv[1:2] == ["predict"]:
        predict(sys.argv[2:])
    else:
        main()
