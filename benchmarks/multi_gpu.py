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
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")          # the lent machines forbid NVLS
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
NCCL_OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "all_gather_v",
            "reduce_scatter_v", "all_to_all_v", "broadcast", "reduce")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-size", default="1G")
    ap.add_argument("--out", default=os.environ.get("OUT", "benchmarks/results"))
    args = ap.parse_args()
    import cupy as cp
    import torch
    import torch.distributed as dist

    from gpu_common import gpu_expected, time_graph
    from purlin.backends.gpu import IpcWorld
    from purlin.sim.predict import parse_size
    from purlin.spec import library

    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    cp.cuda.Device(local).use()
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank, n = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    max_size = parse_size(args.max_size)
    sizes = [KiB * 4 ** k for k in range(11) if KiB * 4 ** k <= max_size]
    topo = h200_box(n)
    world = IpcWorld(gloo, device=local, max_nbytes=max_size, staging_nbytes=256 * MiB,
                     packets_nbytes=64 * MiB, topology=topo)
    rows, t0 = [], time.time()
    for name in NCCL_OPS:
        for size in sizes:
            c = library.from_size(name, n, size, "fp32")
            s = world.plan(c)
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
            want = gpu_expected(c, all_in)[rank]   # the spec, on the GPU, in rank order
            wrong = int(cp.count_nonzero(y != want)) if y.size else 0
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
    if rank == 0:
        from gpu_common import header, write
        doc = {**header(), "world": n, "elapsed_s": time.time() - t0, "rows": rows,
               "summary": _summary(rows)}
        write(f"h200x{n}-collectives.json", doc, args.out)
    world.close()
    dist.destroy_process_group()


def h200_box(n: int):
    """hgx-h200-8 with only ``n`` of its GPUs in use (each keeps its own NVLink bandwidth)."""
    import yaml

    from purlin.topology import data_root, load_topology, parse_topology
    if n == 8:
        return load_topology("hgx-h200-8")
    data = yaml.safe_load(data_root().joinpath("hgx-h200-8.yaml").read_text())
    data["gpus"], data["name"] = n, f"hgx-h200-{n}of8"
    return parse_topology(data, where=f"hgx-h200-8.yaml with {n} GPUs")


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


if __name__ == "__main__":
    main()
