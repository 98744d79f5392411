// Benchmark and calibration kernels over the production Atoms: compiled only by the
// benchmarks that use them (benchmarks/gpu_kernels.py appends this file to the source the
// GPU executor compiles), never into the executor's own cubin. Cache-hint and cp.async
// copy variants are experiments (benchmarks/results/experiments-2026-11-29/).

// ---- cache-qualified vector loads and stores -------------------------------------------
// 16-byte vector loads and stores, one function per PTX cache qualifier.
#define PURLIN_LDV16(name, qual)                                                            \
  __device__ __forceinline__ void name(V16& r, const void* p) {                              \
    asm volatile("ld.global" qual ".v4.u32 {%0,%1,%2,%3}, [%4];"                             \
                 : "=r"(r.w[0]), "=r"(r.w[1]), "=r"(r.w[2]), "=r"(r.w[3]) : "l"(p));         \
  }
#define PURLIN_STV16(name, qual)                                                            \
  __device__ __forceinline__ void name(void* p, const V16& r) {                              \
    asm volatile("st.global" qual ".v4.u32 [%0], {%1,%2,%3,%4};"                             \
                 :: "l"(p), "r"(r.w[0]), "r"(r.w[1]), "r"(r.w[2]), "r"(r.w[3]) : "memory");  \
  }
// Loads asking L2 to fetch the whole 256-byte block (streams of reads).
PURLIN_LDV16(ldv_l2, ".L2::256B")
template <class Vec> __device__ __forceinline__ void ldv_l2(Vec& r, const void* p) { ldv(r, p); }
// Streaming (evict-first) loads and stores: a copy's bytes are touched once.
PURLIN_LDV16(ldv_cs, ".cs.L2::256B")
PURLIN_STV16(stv_cs, ".cs")
template <class Vec> __device__ __forceinline__ void ldv_cs(Vec& r, const void* p) { ldv(r, p); }
template <class Vec> __device__ __forceinline__ void stv_cs(void* p, const Vec& r) { stv(p, r); }
// Loads and stores that skip L1 (a copy touches each byte once): on the H200, +0.6% and +0.3%
// over plain at 64 and 256 MiB, -0.1% at 1 GiB (benchmarks/results/h200-atoms.json, sm_na).
PURLIN_LDV16(ldv_na, ".L1::no_allocate")
PURLIN_STV16(stv_na, ".L1::no_allocate")
template <class Vec> __device__ __forceinline__ void ldv_na(Vec& r, const void* p) { ldv(r, p); }
template <class Vec> __device__ __forceinline__ void stv_na(void* p, const Vec& r) { stv(p, r); }


// ---- cp.async pipeline (LDGSTS, sm_80+): global -> shared -> registers -> global -------
// Each thread moves its own 16-byte slots, so no barrier between threads is needed.
template <int S>
__device__ void cta_copy_async(char* smem, const char* src, char* dst, i64 nbytes) {
  const i64 n16 = nbytes / 16;
  const i64 per = (i64)blockDim.x;
  const i64 nstep = (n16 + per - 1) / per;
  char* mine = smem + 16 * threadIdx.x;
  const i64 stage_bytes = 16 * per;
  for (i64 k = 0; k < S; ++k) {
    i64 i = k * per + threadIdx.x;
    if (k < nstep && i < n16)
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;"
                   :: "r"((u32)__cvta_generic_to_shared(mine + k * stage_bytes)), "l"(src + 16 * i) : "memory");
    asm volatile("cp.async.commit_group;" ::: "memory");
  }
  for (i64 k = 0; k < nstep; ++k) {
    asm volatile("cp.async.wait_group %0;" :: "n"(S - 1) : "memory");
    i64 i = k * per + threadIdx.x;
    char* slot = mine + (k % S) * stage_bytes;
    if (i < n16) {
      V16 v;
      asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];"
                   : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3])
                   : "r"((u32)__cvta_generic_to_shared(slot)) : "memory");
      stv(dst + 16 * i, v);
    }
    i64 kn = k + S, in = kn * per + threadIdx.x;
    if (kn < nstep && in < n16)
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;"
                   :: "r"((u32)__cvta_generic_to_shared(slot)), "l"(src + 16 * in) : "memory");
    asm volatile("cp.async.commit_group;" ::: "memory");
  }
  asm volatile("cp.async.wait_all;" ::: "memory");
  for (i64 b = n16 * 16 + threadIdx.x; b < nbytes; b += blockDim.x) dst[b] = src[b];
}

// ---- standalone Atom kernels ---------------------------------------------------------
// CTA b moves chunks b, b + grid, ... of ``chunk`` bytes each; nothing waits (no watchdog).
__device__ __forceinline__ void no_watch(Watch& w) {
  if (threadIdx.x == 0) w = Watch{nullptr, nullptr, ~0ull, 0, 0, 0, 0, 0};
  __syncthreads();
}

// A copy with cache qualifiers (HINT 1: loads ask L2 for 256-byte blocks, 2: streaming
// loads and stores, 3: loads and stores skip L1), UN vectors in flight per thread.
template <int HINT, int UN>
__device__ __forceinline__ void copy_hinted(const char* src, char* dst, i64 nbytes) {
  const int U = UN ? UN : PURLIN_COPY_UN;
  const i64 nv = nbytes / 16;
  i64 i = threadIdx.x;
  for (; i + (U - 1) * (i64)blockDim.x < nv; i += (i64)blockDim.x * U) {
    V16 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const char* p = src + (i + u * (i64)blockDim.x) * 16;
      if (HINT == 1) ldv_l2(v[u], p); else if (HINT == 2) ldv_cs(v[u], p); else ldv_na(v[u], p);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      char* p = dst + (i + u * (i64)blockDim.x) * 16;
      if (HINT == 2) stv_cs(p, v[u]); else if (HINT == 3) stv_na(p, v[u]); else stv(p, v[u]);
    }
  }
  for (; i < nv; i += blockDim.x) { V16 v; ldv(v, src + 16 * i); stv(dst + 16 * i, v); }
  for (i64 b = nv * 16 + threadIdx.x; b < nbytes; b += blockDim.x) dst[b] = src[b];
}

// The copy Atom and its variants alone: CTA b copies chunks b, b + grid, ...
template <int HINT, int UN>
__device__ __forceinline__ void atom_copy_chunks(const char* src, char* dst, i64 nbytes, i64 chunk) {
  __shared__ Watch w;
  __shared__ char* dd[1];
  no_watch(w);
  for (i64 off = (i64)blockIdx.x * chunk; off < nbytes; off += (i64)gridDim.x * chunk) {
    i64 n = nbytes - off < chunk ? nbytes - off : chunk;
    __syncthreads();
    if (threadIdx.x == 0) dd[0] = dst + off;
    __syncthreads();
    if (HINT == 0) cta_copy<PURLIN_VEC, false, UN>(src + off, 0, dd, 1, n, w);
    else copy_hinted<HINT, UN>(src + off, dst + off, n);
  }
}

#define ATOM_COPY_KERNEL(name, hint, un, blocks)                                          \
  extern "C" __global__ void __launch_bounds__(PURLIN_THREADS, blocks)                    \
  name(const char* src, char* dst, i64 nbytes, i64 chunk) {                               \
    atom_copy_chunks<hint, un>(src, dst, nbytes, chunk);                                  \
  }
ATOM_COPY_KERNEL(atom_copy, 0, 0, PURLIN_MIN_BLOCKS)                                // plain vector loads/stores
ATOM_COPY_KERNEL(atom_copy_l2, 1, 0, PURLIN_MIN_BLOCKS)                             // loads ask L2 for 256-byte blocks
ATOM_COPY_KERNEL(atom_copy_cs, 2, 0, PURLIN_MIN_BLOCKS)                             // streaming loads and stores
ATOM_COPY_KERNEL(atom_copy_na, 3, 0, PURLIN_MIN_BLOCKS)                             // loads and stores skip L1
ATOM_COPY_KERNEL(atom_copy_wide, 0, (PURLIN_VEC == 32 ? 8 : 16), PURLIN_MIN_BLOCKS) // twice the vectors in flight
// Two CTAs per SM (registers capped at 64; the kernels above hold 68, so one CTA of 512
// threads fits an SM): twice the warps to hide the memory latency.
ATOM_COPY_KERNEL(atom_copy_occ2, 0, 0, 2)
ATOM_COPY_KERNEL(atom_copy_occ2_u4, 0, (PURLIN_VEC == 32 ? 2 : 4), 2)

// Flat grid-stride copy: thread t of T moves vectors t, t + T, t + 2T, ..., U loads in
// flight before their stores; no chunks, no shared memory, no barriers (the shape of a
// driver memcpy kernel, to see what the chunked CTA loop costs).
template <int U>
__device__ __forceinline__ void atom_copy_flat_body(const char* src, char* dst, i64 nbytes) {
  typedef typename VecT<PURLIN_VEC>::T Vec;
  const i64 nv = nbytes / PURLIN_VEC, T = (i64)gridDim.x * blockDim.x;
  i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + (U - 1) * T < nv; i += U * T) {
    Vec v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) ldv(v[u], src + (i + u * T) * PURLIN_VEC);
#pragma unroll
    for (int u = 0; u < U; ++u) stv(dst + (i + u * T) * PURLIN_VEC, v[u]);
  }
  for (; i < nv; i += T) {
    Vec v;
    ldv(v, src + i * PURLIN_VEC);
    stv(dst + i * PURLIN_VEC, v);
  }
  for (i64 b = nv * PURLIN_VEC + (i64)blockIdx.x * blockDim.x + threadIdx.x; b < nbytes; b += T) dst[b] = src[b];
}
#define ATOM_COPY_FLAT_KERNEL(name, un)                                                   \
  extern "C" __global__ void __launch_bounds__(PURLIN_THREADS, PURLIN_MIN_BLOCKS)         \
  name(const char* src, char* dst, i64 nbytes) { atom_copy_flat_body<un>(src, dst, nbytes); }
ATOM_COPY_FLAT_KERNEL(atom_copy_flat4, 4)

extern "C" __global__ void __launch_bounds__(PURLIN_THREADS, PURLIN_MIN_BLOCKS)
atom_reduce(const char* const* srcs_in, int nsrc, char* dst, i64 nbytes, i64 chunk, int dt, int op) {
  __shared__ const char* s[MAX_REFS];
  __shared__ char* d[1];
  __shared__ u32 tags[MAX_REFS];
  __shared__ Watch w;
  no_watch(w);
  for (i64 off = (i64)blockIdx.x * chunk; off < nbytes; off += (i64)gridDim.x * chunk) {
    __syncthreads();
    for (int k = threadIdx.x; k < nsrc; k += blockDim.x) { s[k] = srcs_in[k] + off; tags[k] = 0; }
    if (threadIdx.x == 0) d[0] = dst + off;
    __syncthreads();
    i64 n = nbytes - off < chunk ? nbytes - off : chunk;
    copy_or_reduce<PURLIN_VEC, false, false>(OPC_REDUCE, dt | (op << 8), false, s, tags, nsrc, d, 1, n, w);
  }
}

extern "C" __global__ void __launch_bounds__(PURLIN_THREADS, PURLIN_MIN_BLOCKS)
atom_copy_async(const char* src, char* dst, i64 nbytes, i64 chunk) {
  extern __shared__ __align__(128) char smem[];   // 4 stages x 16 B x threads
  for (i64 off = (i64)blockIdx.x * chunk; off < nbytes; off += (i64)gridDim.x * chunk) {
    i64 n = nbytes - off < chunk ? nbytes - off : chunk;
    cta_copy_async<4>(smem, src + off, dst + off, n);
  }
}

#if PURLIN_TMA
extern "C" __global__ void __launch_bounds__(PURLIN_THREADS, PURLIN_MIN_BLOCKS)
atom_copy_tma(const char* src, char* dst, i64 nbytes, i64 chunk, int stages, int stage_bytes) {
  extern __shared__ __align__(128) char smem[];
  __shared__ u64 bars[16];
  __shared__ char* d[1];
  Tma t;
  t.smem = smem; t.bars = bars; t.stages = stages; t.chunk = (u32)stage_bytes;
  tma_init(t);
  for (i64 off = (i64)blockIdx.x * chunk; off < nbytes; off += (i64)gridDim.x * chunk) {
    i64 n = nbytes - off < chunk ? nbytes - off : chunk;
    if (threadIdx.x == 0) d[0] = dst + off;
    cta_copy_tma(t, src + off, d, 1, n);
  }
}
#endif

// ---- calibration helpers -----------------------------------------------------------
extern "C" __global__ void empty_kernel() {}

// CTA i waits until flags[i-1] >= value, then release-sets flags[i] = value: a chain of
// one-way signal hops. Launch with grid = hops + 1 (all co-resident).
extern "C" __global__ void flag_chain(u64* flags, u64 value) {
  if (threadIdx.x != 0) return;
  if (blockIdx.x > 0) {
    const u64* prev = flags + blockIdx.x - 1;
    while (ld_acquire_sys(prev) < value) {}
  }
  st_release_sys(flags + blockIdx.x, value);
}

// Bump a counter (device-side epochs for calibration kernels).
extern "C" __global__ void bump(u64* counter, u64 by) { counter[0] += by; }
