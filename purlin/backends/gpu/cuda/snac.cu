// The SNAC interpreter and the standalone Atom kernels. See atoms.cuh for the Atoms and
// encode.py for the record layout (the two must agree; test_encode checks the constants).
#include "atoms.cuh"

// Record: 8 int64 per instruction.
//   [0] opcode  [1] nbytes  [2] a  [3] b  [4] c  [5] d  [6] e  [7] f
//   COPY        a=0          b=atom  c=src ref  d=1     e=dst ref  f=ndst
//   REDUCE      a=dtype|op<<8 b=atom c=src ref  d=nsrc  e=dst ref  f=ndst
//   NOTIFY      a=peer       b=signal c=value
//   WAIT                     b=signal c=value
//   PUT_PACKETS a=value               c=src ref         e=dst ref
//   WAIT_PACKETS a=value              c=src ref
// Ref: 4 int64 {rank, buffer, offset, packet value (0: plain read)}.
// Program table: 4 int32 per program {first record, count, rank, cta}.
enum { OPC_NOP = 0, OPC_COPY = 1, OPC_REDUCE = 2, OPC_NOTIFY = 3, OPC_WAIT = 4,
       OPC_PUT_PACKETS = 5, OPC_WAIT_PACKETS = 6 };
enum { BUF_INPUT = 0, BUF_OUTPUT = 1, BUF_STAGING = 2, BUF_PACKETS = 3, BUF_SIGNALS = 4,
       NBUF = 8 };
enum { ATOM_SM = 0, ATOM_TMA = 1, ATOM_CE = 2, ATOM_SWITCH = 3 };
#define MAX_REFS 256
#define REC 8

// Epoch state, one per launch group (a process's ranks): [0] call index k, [1] base,
// [2] CTAs finished in this call, [3] abort flag.
struct Env {
  char* const* ptrs;      // [rank * NBUF + buffer]: base of half 0
  i64 staging_half;       // bytes between the two staging halves
  i64 packets_half;       // bytes between the two packet halves (physical)
  u64 base;
  int parity;
};

__device__ __forceinline__ char* resolve(const Env& env, const i64* ref) {
  int rank = (int)ref[0], buf = (int)ref[1];
  char* p = env.ptrs[rank * NBUF + buf];
  if (buf == BUF_STAGING) return p + env.parity * env.staging_half + ref[2];
  if (buf == BUF_PACKETS) return p + env.parity * env.packets_half;   // window; offset separate
  return p + ref[2];
}

template <int V, int DT>
__device__ __forceinline__ bool reduce_pkt(bool pkt, const char* const* s, const u32* tags, int ns, int op,
                                           char* const* d, int nd, i64 n, const Watch& w) {
  return pkt ? cta_reduce<V, DT, true>(s, tags, ns, op, d, nd, n, w)
             : cta_reduce<V, DT, false>(s, tags, ns, op, d, nd, n, w);
}
template <int V>
__device__ bool reduce_dispatch(int dt, int op, bool pkt, const char* const* s, const u32* tags, int ns,
                                char* const* d, int nd, i64 n, const Watch& w) {
  switch (dt) {
    case DT_FP32: return reduce_pkt<V, DT_FP32>(pkt, s, tags, ns, op, d, nd, n, w);
    case DT_FP16: return reduce_pkt<V, DT_FP16>(pkt, s, tags, ns, op, d, nd, n, w);
    case DT_BF16: return reduce_pkt<V, DT_BF16>(pkt, s, tags, ns, op, d, nd, n, w);
    default: return reduce_pkt<V, DT_INT32>(pkt, s, tags, ns, op, d, nd, n, w);
  }
}

// All Refs of one instruction must be V-aligned for the V-byte path; else 16, else 4.
__device__ __forceinline__ bool aligned(const void* p, int v) { return ((u64)p & (v - 1)) == 0; }

template <int V>
__device__ bool copy_or_reduce(int opc, i64 dtop, bool pkt, const char* const* s, const u32* tags,
                               int ns, char* const* d, int nd, i64 n, const Watch& w) {
  if (opc == OPC_COPY)
    return pkt ? cta_copy<V, true>(s[0], tags[0], d, nd, n, w)
               : cta_copy<V, false>(s[0], 0, d, nd, n, w);
  return reduce_dispatch<V>((int)(dtop & 0xff), (int)((dtop >> 8) & 0xff), pkt, s, tags, ns, d, nd, n, w);
}

template <bool WITH_TMA>
__device__ void snac_body(const i64* __restrict__ code, const i64* __restrict__ refs,
                          const int* __restrict__ progs, int prog_first,
                          char* const* __restrict__ ptrs, i64 staging_half, i64 packets_half,
                          u64* state, u64 stride, i64* err, u64 timeout_ns) {
  __shared__ const char* s_src[MAX_REFS];
  __shared__ char* s_dst[MAX_REFS];
  __shared__ u32 s_tag[MAX_REFS];
  __shared__ u64 s_base;
  __shared__ int s_parity, s_stop, s_align, s_pkt;
  __shared__ Watch w;
  __shared__ Env env;
#if PURLIN_TMA
  __shared__ u64 s_bars[8];
  extern __shared__ __align__(128) char s_dyn[];
  Tma tma;
  if (WITH_TMA) {
    tma.smem = s_dyn; tma.bars = s_bars; tma.stages = 4; tma.chunk = 8192;
    tma_init(tma);
  }
#endif
  const int* pr = progs + 4 * (prog_first + blockIdx.x);
  const int first = pr[0], count = pr[1];
  if (threadIdx.x == 0) {
    s_base = ld_volatile_u64(&state[1]);
    s_parity = (int)(ld_volatile_u64(&state[0]) & 1ull);
    s_stop = ld_volatile_u64(&state[3]) != 0ull;   // an earlier call deadlocked: do nothing
    env = Env{ptrs, staging_half, packets_half, s_base, s_parity};
    w = Watch{&state[3], err, timeout_ns, pr[2], pr[3], 0, s_base};
  }
  __syncthreads();
  const u32 tag_base = (u32)s_base;

  for (int pc = 0; pc < count && !s_stop; ++pc) {
    const i64* r = code + REC * (i64)(first + pc);
    const int opc = (int)r[0];
    const i64 nbytes = r[1];
    if (threadIdx.x == 0) w.pc = pc;   // read only by a watchdog firing seconds later
    bool ok = true;
    if (opc == OPC_COPY || opc == OPC_REDUCE) {
      const int nsrc = (int)r[5], ndst = (int)r[7];
      const i64* sref = refs + 4 * r[4];
      const i64* dref = refs + 4 * r[6];
      if (threadIdx.x == 0) { s_align = PURLIN_VEC; s_pkt = 0; }
      __syncthreads();
      for (int k = threadIdx.x; k < nsrc + ndst; k += blockDim.x) {
        char* p;
        if (k < nsrc) {
          const i64* f = sref + 4 * k;
          p = resolve(env, f);
          u32 tag = 0;
          if (f[1] == BUF_PACKETS) {   // payload at 2 x offset, tagged (encode sets f[3])
            p += 2 * f[2];
            tag = tag_base + (u32)f[3];
            s_pkt = 1;
          }
          s_tag[k] = tag;
          s_src[k] = p;
        } else {
          p = resolve(env, dref + 4 * (k - nsrc));
          s_dst[k - nsrc] = p;
        }
        if (!aligned(p, PURLIN_VEC)) atomicMin(&s_align, aligned(p, 16) ? 16 : 4);
      }
      __syncthreads();
      const bool pkt = s_pkt != 0;
      const int atom = (int)r[3];
      const int align = s_align;
#if PURLIN_TMA
      if (WITH_TMA && opc == OPC_COPY && atom == ATOM_TMA && !pkt && align >= 16 && (nbytes & 15) == 0) {
        cta_copy_tma(tma, s_src[0], s_dst, ndst, nbytes);
      } else
#endif
      if (align == PURLIN_VEC) {
        ok = copy_or_reduce<PURLIN_VEC>(opc, r[2], pkt, s_src, s_tag, nsrc, s_dst, ndst, nbytes, w);
      } else if (align >= 16) {
        ok = copy_or_reduce<16>(opc, r[2], pkt, s_src, s_tag, nsrc, s_dst, ndst, nbytes, w);
      } else {
        ok = copy_or_reduce<4>(opc, r[2], pkt, s_src, s_tag, nsrc, s_dst, ndst, nbytes, w);
      }
      (void)atom;
      if (!ok) s_stop = 1;
      __syncthreads();
    } else if (opc == OPC_NOTIFY) {
      __syncthreads();   // every thread's stores of earlier instructions are done
      if (threadIdx.x == 0) {
        u64* flag = (u64*)env.ptrs[(int)r[2] * NBUF + BUF_SIGNALS] + r[3];
        __threadfence_system();
        st_release_sys(flag, s_base + (u64)r[4]);
      }
    } else if (opc == OPC_WAIT) {
      if (threadIdx.x == 0) {
        const u64* flag = (const u64*)env.ptrs[w.rank * NBUF + BUF_SIGNALS] + r[3];
        const u64 want = s_base + (u64)r[4];
        u64 seen = ld_acquire_sys(flag);
        if (seen < want) {
          u64 start = globaltimer();
          for (u32 spins = 1;; ++spins) {
            seen = ld_acquire_sys(flag);
            if (seen >= want) break;
            if ((spins & 255u) == 0u) {
              if (ld_volatile_u64(&state[3])) { s_stop = 1; break; }
              if (globaltimer() - start > timeout_ns) {
                watchdog_fire(w, 1, r[3], want, seen);
                s_stop = 1;
                break;
              }
            }
          }
        }
      }
      __syncthreads();
    } else if (opc == OPC_PUT_PACKETS) {
      const i64* sref = refs + 4 * r[4];
      const i64* dref = refs + 4 * r[6];
      cta_put_packets(resolve(env, sref), (char*)resolve(env, dref), dref[2], nbytes,
                      tag_base + (u32)r[2]);
      __syncthreads();
    } else if (opc == OPC_WAIT_PACKETS) {
      const i64* sref = refs + 4 * r[4];
      ok = cta_wait_packets(resolve(env, sref), sref[2], nbytes, tag_base + (u32)r[2], w);
      if (!ok) s_stop = 1;
      __syncthreads();
    }
  }
  // the last CTA of the launch to finish moves the epoch on (nothing is ever cleared)
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    u64 n = atomicAdd((unsigned long long*)&state[2], 1ull);
    if (n == (u64)gridDim.x - 1) {
      state[2] = 0;
      state[1] = s_base + stride;
      state[0] = state[0] + 1;
      __threadfence_system();
    }
  }
}

extern "C" __global__ void __launch_bounds__(PURLIN_THREADS, PURLIN_MIN_BLOCKS)
snac_run(const i64* __restrict__ code, const i64* __restrict__ refs, const int* __restrict__ progs,
         int prog_first, char* const* __restrict__ ptrs, i64 staging_half, i64 packets_half,
         u64* state, u64 stride, i64* err, u64 timeout_ns) {
  snac_body<false>(code, refs, progs, prog_first, ptrs, staging_half, packets_half, state, stride,
                   err, timeout_ns);
}

#if PURLIN_TMA
// Same, with 4 x 8 KiB of dynamic shared memory for bulk copies (atom "tma").
extern "C" __global__ void __launch_bounds__(PURLIN_THREADS, PURLIN_MIN_BLOCKS)
snac_run_tma(const i64* __restrict__ code, const i64* __restrict__ refs, const int* __restrict__ progs,
             int prog_first, char* const* __restrict__ ptrs, i64 staging_half, i64 packets_half,
             u64* state, u64 stride, i64* err, u64 timeout_ns) {
  snac_body<true>(code, refs, progs, prog_first, ptrs, staging_half, packets_half, state, stride,
                  err, timeout_ns);
}
#endif

// ---- standalone Atom kernels (benchmarks, calibration) --------------------------------
// CTA b moves chunks b, b + grid, ... of ``chunk`` bytes each.
__device__ __forceinline__ void no_watch(Watch& w) {
  if (threadIdx.x == 0) w = Watch{nullptr, nullptr, ~0ull, 0, 0, 0, 0};
  __syncthreads();
}

extern "C" __global__ void __launch_bounds__(PURLIN_THREADS, PURLIN_MIN_BLOCKS)
atom_copy(const char* src, char* dst, i64 nbytes, i64 chunk) {
  __shared__ Watch w;
  __shared__ char* dd[1];
  no_watch(w);
  for (i64 off = (i64)blockIdx.x * chunk; off < nbytes; off += (i64)gridDim.x * chunk) {
    i64 n = nbytes - off < chunk ? nbytes - off : chunk;
    __syncthreads();
    if (threadIdx.x == 0) dd[0] = dst + off;
    __syncthreads();
    cta_copy<PURLIN_VEC, false>(src + off, 0, dd, 1, n, w);
  }
}

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
    reduce_dispatch<PURLIN_VEC>(dt, op, false, s, tags, nsrc, d, 1, n, w);
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
