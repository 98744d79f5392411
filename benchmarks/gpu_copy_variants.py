"""Copy kernels outside the Atom set, against cudaMemcpy D2D in the same rounds.

An experiment, not a figure of the project: read-only-cache loads (``nc``), L1-bypassing
loads and stores (``l1na``, became ``atom_copy_na``), L2 evict-first policies (``ef``,
``efld``, ``efst``), warp-contiguous layouts (``warp``), 256 and 1024 threads, and the
plain copy with its destination 4 KiB, 1 MiB and 32 MiB (plus odd bytes) past the
source's alignment. Each configuration is timed in 5 rounds, each timing memcpy then the
kernel (events around 6-16 back-to-back calls); the ratio is the rounds' median.

    python3 benchmarks/gpu_copy_variants.py OUT.json      (GPU; about 1 minute)

Results of 2026-11-29: benchmarks/results/experiments-2026-11-29/copy-variants.json.
"""
import json
import statistics as st
import sys
import time

import cupy as cp
import numpy as np

SRC = r'''
typedef unsigned int u32; typedef long long i64; typedef unsigned long long u64;
struct __align__(16) V16 { u32 w[4]; };
template <int LD> __device__ __forceinline__ void ld(V16& r, const char* p, u64 pol) {
  if (LD == 0) asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.w[0]), "=r"(r.w[1]), "=r"(r.w[2]), "=r"(r.w[3]) : "l"(p));
  if (LD == 1) asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.w[0]), "=r"(r.w[1]), "=r"(r.w[2]), "=r"(r.w[3]) : "l"(p));
  if (LD == 2) asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.w[0]), "=r"(r.w[1]), "=r"(r.w[2]), "=r"(r.w[3]) : "l"(p));
  if (LD == 3) asm volatile("ld.global.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;" : "=r"(r.w[0]), "=r"(r.w[1]), "=r"(r.w[2]), "=r"(r.w[3]) : "l"(p), "l"(pol));
  if (LD == 4) asm volatile("ld.global.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.w[0]), "=r"(r.w[1]), "=r"(r.w[2]), "=r"(r.w[3]) : "l"(p));
}
template <int ST> __device__ __forceinline__ void st(char* p, const V16& r, u64 pol) {
  if (ST == 0) asm volatile("st.global.v4.u32 [%0], {%1,%2,%3,%4};" :: "l"(p), "r"(r.w[0]), "r"(r.w[1]), "r"(r.w[2]), "r"(r.w[3]) : "memory");
  if (ST == 1) asm volatile("st.global.L1::no_allocate.v4.u32 [%0], {%1,%2,%3,%4};" :: "l"(p), "r"(r.w[0]), "r"(r.w[1]), "r"(r.w[2]), "r"(r.w[3]) : "memory");
  if (ST == 3) asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1,%2,%3,%4}, %5;" :: "l"(p), "r"(r.w[0]), "r"(r.w[1]), "r"(r.w[2]), "r"(r.w[3]), "l"(pol) : "memory");
}
// LAYOUT 0: vector j = i + u*blockDim (thread-strided); 1: each warp owns 32*U consecutive vectors.
template <int LD, int ST, int LAYOUT, int U>
__device__ __forceinline__ void body(const char* src, char* dst, i64 nbytes, i64 chunk) {
  u64 pol = 0;
  if (LD == 3 || ST == 3) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (i64 off = (i64)blockIdx.x * chunk; off < nbytes; off += (i64)gridDim.x * chunk) {
    const i64 n = nbytes - off < chunk ? nbytes - off : chunk;
    const char* s = src + off; char* d = dst + off;
    const i64 nv = n / 16, stepv = (i64)blockDim.x * U;
    i64 base = 0;
    for (; base + stepv <= nv; base += stepv) {
      V16 v[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        i64 j = LAYOUT == 0 ? base + threadIdx.x + u * (i64)blockDim.x : base + (i64)warp * 32 * U + u * 32 + lane;
        ld<LD>(v[u], s + j * 16, pol);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        i64 j = LAYOUT == 0 ? base + threadIdx.x + u * (i64)blockDim.x : base + (i64)warp * 32 * U + u * 32 + lane;
        st<ST>(d + j * 16, v[u], pol);
      }
    }
    for (i64 j = base + threadIdx.x; j < nv; j += blockDim.x) { V16 v; ld<0>(v, s + j * 16, 0); st<0>(d + j * 16, v, 0); }
  }
}
#define K(name, LD, ST, L, U, T, B) extern "C" __global__ void __launch_bounds__(T, B) name(const char* s, char* d, i64 n, i64 c) { body<LD, ST, L, U>(s, d, n, c); }
'''
# name: (load kind LD, store kind ST, layout, vectors in flight U, threads, CTAs per SM);
# LD 0 plain, 1 .nc, 2 .nc + L2::256B, 3 evict-first policy, 4 L1::no_allocate;
# ST 0 plain, 1 L1::no_allocate, 3 evict-first policy; layout 1: warp-contiguous
VARIANTS = {"base": (0, 0, 0, 8, 512, 1), "nc": (1, 0, 0, 8, 512, 1), "ncl2": (2, 0, 0, 8, 512, 1),
            "l1na": (4, 1, 0, 8, 512, 1), "ef": (3, 3, 0, 8, 512, 1), "efst": (0, 3, 0, 8, 512, 1),
            "efld": (3, 0, 0, 8, 512, 1), "warp": (0, 0, 1, 8, 512, 1), "ncwarp": (2, 0, 1, 8, 512, 1),
            "u16t256": (0, 0, 0, 16, 256, 2), "nc_u16t256": (2, 0, 0, 16, 256, 2), "u4t1024": (0, 0, 0, 4, 1024, 1)}
SRC += "".join(f"K({name}, {', '.join(map(str, v))})\n" for name, v in VARIANTS.items())
NAMES = list(VARIANTS)
MiB = 1 << 20


def main():
    mod = cp.RawModule(code=SRC, options=("-arch=sm_90", "-std=c++17"))
    fns = {n: mod.get_function(n) for n in NAMES}
    sms = cp.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    big = 1024 * MiB
    srcbuf = cp.random.randint(0, 255, big + 64 * MiB, dtype=cp.uint8)
    dstbuf = cp.empty(big + 64 * MiB, cp.uint8)
    s0 = cp.cuda.get_current_stream()
    ev0, ev1 = cp.cuda.Event(), cp.cuda.Event()
    def tm(f, k):
        f(); ev0.record(); [f() for _ in range(k)]; ev1.record(); ev1.synchronize()
        return cp.cuda.get_elapsed_time(ev0, ev1) * 1e3 / k
    out = {"gpu": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "date": time.strftime("%F %T"),
           "command": "python3 " + " ".join(sys.argv), "rows": []}
    for n in (64 * MiB, 256 * MiB, 1024 * MiB):
        k = 16 if n <= 256 * MiB else 6
        for doff in (0, 4096 + 256, MiB + 12800, 32 * MiB + 8192):
            src, dst = srcbuf.data.ptr, dstbuf.data.ptr + doff
            mc = lambda: cp.cuda.runtime.memcpyAsync(dst, src, n, cp.cuda.runtime.memcpyDeviceToDevice, s0.ptr)
            cfgs = []
            for name in NAMES if doff == 0 else ["base"]:
                U, T = VARIANTS[name][3:5]
                per = 16 * T * U   # bytes of one step of the CTA
                for ctas, chunk in ((4 * sms, -1), (8 * sms, -1), (sms, 64 * 1024), (2 * sms, 64 * 1024), (4 * sms, 256 * 1024)):
                    if chunk < 0:
                        chunk = -(-n // ctas); chunk = -(-chunk // per) * per
                    cfgs.append((name, ctas, chunk, T))
            for name, ctas, chunk, T in cfgs:
                f = fns[name]
                launch = lambda: f((ctas,), (T,), (src, dst, np.int64(n), np.int64(chunk)))
                dstbuf[doff:doff + n].fill(0); launch(); s0.synchronize()
                ok = bool(cp.array_equal(srcbuf[:n], dstbuf[doff:doff + n]))
                tk, tm_ = [], []
                for r in range(5):
                    tm_.append(tm(mc, k)); tk.append(tm(launch, k))
                ratio = st.median([a / b for a, b in zip(tm_, tk)])
                row = dict(n=n, doff=doff, kernel=name, ctas=ctas, chunk=chunk, threads=T, ok=ok,
                           memcpy_us=tm_, kernel_us=tk, ratio=ratio, gbps=2 * n / st.median(tk) / 1e3,
                           memcpy_gbps=2 * n / st.median(tm_) / 1e3)
                out["rows"].append(row)
                print(f"{n//MiB:5d}MiB off={doff:9d} {name:11s} ctas={ctas:5d} chunk={chunk:8d} ok={ok} "
                      f"{row['gbps']:6.0f} GB/s memcpy {row['memcpy_gbps']:6.0f} ratio {ratio:.3f}", flush=True)
    json.dump(out, open(sys.argv[1], "w"), indent=1)
    best = {}
    for r in out["rows"]:
        if r["doff"] == 0 and r["ok"]:
            key = (r["n"], r["kernel"]); best[key] = max(best.get(key, 0), r["ratio"])
    for key in sorted(best): print(key, round(best[key], 4))
if __name__ == "__main__":
    main()
