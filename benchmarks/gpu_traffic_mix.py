"""How fast HBM moves a given mix of reads and writes, against cudaMemcpy (one read per write).

Issue 17 holds every loopback collective at W=8 and 64 MiB per rank to 0.92 of the HBM
roofline, the roofline being cudaMemcpy D2D (bytes read plus written per second). The
collectives do not all move memcpy's mix: an AllGather reads each input once and writes
it W times (1 read : 8 writes), a ReduceScatter reads W inputs per output (8 : 1), an
AllReduce, AllToAll and their V forms one read per write. This measures, in one run on one
GPU, plain kernels that move exactly such mixes as fast as a simple grid-stride loop can:

- ``bcast_k``: read a source once, write it to k destinations (k = 1, 2, 4, 8), plain
  stores and streaming (evict-first) stores;
- ``sum_k``: read k sources, write their fp32 sum once (k = 2, 4, 8);
- ``write``: stores only; ``read``: loads only (folded into one word per thread);

each at several grid sizes (the best kept), timed by CUDA events in interleaved rounds,
as bytes read plus written per second over cudaMemcpy's. Where a mix's best is below
memcpy, that mix's roofline is lower than the one issue 17 measures against, and a
collective of that mix is bounded by it, whatever its kernel does.

Writes benchmarks/results/<--out> (default h200-traffic-mix.json; name it after the GPU):
machine, date, command, raw samples per kernel and grid, and a ``summary``: memcpy GB/s,
each mix's best ratio to memcpy, and per collective of the seven at W=8 its mix (reads per
write, from its least traffic) and the ratio of the matching kernel.

Run (one device call, about a minute): ``python3 benchmarks/gpu_traffic_mix.py --out h100-traffic-mix.json``
"""
from __future__ import annotations

import argparse
import sys

from gpu_common import cupy, header, median, memcpy_roofline, traffic, write

MiB = 1 << 20
SOURCE = r"""
#define U 4
typedef unsigned long long u64;
template <bool CS> __device__ __forceinline__ void put(uint4* p, uint4 v) {
  if (CS) __stcs(p, v); else *p = v;
}
template <bool CS> __device__ void bcast(const uint4* __restrict__ src, uint4* const* dsts, int k, long long n) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = src[i + u * stride];
    for (int d = 0; d < k; ++d) {
      uint4* o = dsts[d];
#pragma unroll
      for (int u = 0; u < U; ++u) put<CS>(o + i + u * stride, v[u]);
    }
  }
  for (; i < n; i += stride) {
    uint4 v = src[i];
    for (int d = 0; d < k; ++d) put<CS>(dsts[d] + i, v);
  }
}
extern "C" __global__ void bcast_plain(const uint4* src, uint4* const* dsts, int k, long long n) { bcast<false>(src, dsts, k, n); }
extern "C" __global__ void bcast_cs(const uint4* src, uint4* const* dsts, int k, long long n) { bcast<true>(src, dsts, k, n); }

extern "C" __global__ void sum_k(const float4* const* srcs, int k, float4* __restrict__ dst, long long n) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
    float4 a = srcs[0][i];
    for (int s = 1; s < k; ++s) {
      float4 b = srcs[s][i];
      a.x += b.x; a.y += b.y; a.z += b.z; a.w += b.w;
    }
    dst[i] = a;
  }
}

extern "C" __global__ void write_only(uint4* __restrict__ dst, long long n) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  const uint4 v = make_uint4(threadIdx.x, 1u, 2u, 3u);
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) dst[i] = v;
}

extern "C" __global__ void read_only(const uint4* __restrict__ src, long long n, unsigned* sink) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  unsigned acc = 0;
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = src[i + u * stride];
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) acc ^= src[i].x ^ src[i].w;
  if (acc == 0x9E3779B9u) sink[0] = acc;   // never true for the data used: keeps the loads
}
"""


def _ptrs(cp, arrays):
    return cp.asarray([a.data.ptr for a in arrays], dtype=cp.uint64)


def measure(cp, per: int, rounds: int, reps: int) -> dict:
    """Each kernel at each grid, ``rounds`` interleaved rounds of ``reps`` launches: raw
    microseconds per launch, and the bytes each launch reads plus writes."""
    mod = cp.RawModule(code=SOURCE, options=("-std=c++17",))
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    n16 = per // 16
    src = cp.arange(per // 4, dtype=cp.float32)
    dsts = [cp.empty(per, cp.uint8) for _ in range(8)]
    dptr = _ptrs(cp, dsts)
    sptr = _ptrs(cp, [src] + [d.view(cp.float32) for d in dsts[:7]])
    sink = cp.zeros(1, cp.uint32)
    grids = [(sms * m, t) for m in (2, 4, 8, 16) for t in (256, 512)]
    cases = {}   # name -> (bytes moved, launcher taking (blocks, threads))
    for k in (1, 2, 4, 8):
        for kind in ("plain", "cs"):
            fn = mod.get_function(f"bcast_{kind}")
            cases[f"bcast_{k}_{kind}"] = ((1 + k) * per, lambda b, t, fn=fn, k=k: fn(
                (b,), (t,), (src, dptr, cp.int32(k), cp.int64(n16))))
    fsum = mod.get_function("sum_k")
    for k in (2, 4, 8):
        cases[f"sum_{k}"] = ((1 + k) * per, lambda b, t, k=k: fsum(
            (b,), (t,), (sptr, cp.int32(k), dsts[7].view(cp.float32), cp.int64(n16))))
    fw, fr = mod.get_function("write_only"), mod.get_function("read_only")
    cases["write"] = (per, lambda b, t: fw((b,), (t,), (dsts[0], cp.int64(n16))))
    cases["read"] = (per, lambda b, t: fr((b,), (t,), (src, cp.int64(n16), sink)))
    raw = {name: {f"{b}x{t}": [] for b, t in grids} for name in cases}
    stream = cp.cuda.get_current_stream()
    for _ in range(rounds):
        for name, (_, launch) in cases.items():
            for b, t in grids:
                launch(b, t)   # warm
                e0, e1 = cp.cuda.Event(), cp.cuda.Event()
                e0.record(stream)
                for _ in range(reps):
                    launch(b, t)
                e1.record(stream)
                e1.synchronize()
                raw[name][f"{b}x{t}"].append(cp.cuda.get_elapsed_time(e0, e1) * 1e3 / reps)
    return {"raw_us": raw, "bytes": {name: nbytes for name, (nbytes, _) in cases.items()},
            "grids": [f"{b}x{t}" for b, t in grids]}


def collective_mixes(per: int) -> dict:
    """Per collective of the seven at W=8 and ``per`` bytes of input a rank: HBM bytes read
    and written at least (every output byte written once, every needed input byte read once)."""
    from purlin.spec import library
    out = {}
    for name in library.PURLIN_SEVEN:
        size = per * 8 if name in ("all_gather", "all_gather_v") else per
        read, written = traffic(library.from_size(name, 8, size, "fp32", seed=1))
        out[name] = {"read_bytes": read, "written_bytes": written, "reads_per_write": read / written}
    return out


def matching_kernel(reads_per_write: float) -> str:
    """The measured mix nearest a collective's: k writes per read (bcast) or k reads per write (sum)."""
    if reads_per_write < 0.75:
        k = min((1, 2, 4, 8), key=lambda k: abs(1 / k - reads_per_write))
        return f"bcast_{k}"
    if reads_per_write > 1.5:
        return f"sum_{min((2, 4, 8), key=lambda k: abs(k - reads_per_write))}"
    return "bcast_1"


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="h200-traffic-mix.json")
    ap.add_argument("--mib", type=int, default=256, help="bytes per buffer (MiB)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    cp = cupy()
    doc = header("python3 benchmarks/gpu_traffic_mix.py " + " ".join(argv or sys.argv[1:]))
    per = args.mib * MiB
    memcpy_gbps, raw_memcpy = memcpy_roofline()
    got = measure(cp, per, args.rounds, args.reps)
    best = {}
    for name, by_grid in got["raw_us"].items():
        grid, t = min(((g, median(v)) for g, v in by_grid.items()), key=lambda gt: gt[1])
        gbps = got["bytes"][name] / t / 1e3
        best[name] = {"gbps": gbps, "vs_memcpy": gbps / memcpy_gbps, "grid": grid, "time_us": t}
    mixes = {}
    for coll, m in collective_mixes(64 * MiB).items():
        kern = matching_kernel(m["reads_per_write"])
        cands = [k for k in best if k == kern or k.startswith(kern + "_")]
        top = max(cands, key=lambda k: best[k]["vs_memcpy"])
        mixes[coll] = {**m, "kernel": top, "kernel_vs_memcpy": best[top]["vs_memcpy"]}
    doc["raw"] = {"memcpy_us": raw_memcpy, **got}
    doc["summary"] = {
        "memcpy_gbps": memcpy_gbps, "buffer_bytes": per,
        "vs_memcpy": {k: round(v["vs_memcpy"], 4) for k, v in best.items()},
        "best": best, "collectives_w8_64MiB": mixes,
        "rule": "bytes read plus written per second over cudaMemcpy D2D's; each kernel's best grid, "
                "median over interleaved rounds"}
    path = write(args.out, doc)
    for k, v in best.items():
        print(f"{k:16s} {v['gbps']:8.0f} GB/s  {v['vs_memcpy']:.3f} x memcpy  (grid {v['grid']})")
    for coll, m in mixes.items():
        print(f"{coll:18s} reads/write {m['reads_per_write']:.3f}: {m['kernel']} {m['kernel_vs_memcpy']:.3f} x memcpy")
    print("wrote", path)
    return doc


if __name__ == "__main__":
    main()
