// The SNAC interpreter and the standalone Atom kernels. See atoms.cuh for the Atoms and
// encode.py for the record layout (the two must agree; test_encode checks the constants).
#include "atoms.cuh"

// Record: 8 int64 per instruction.
//   [0] opcode  [1] nbytes  [2] a  [3] b  [4] c  [5] d  [6] e  [7] f
//   COPY        a=0          b=atom  c=src ref  d=1     e=dst ref  f=ndst
//   REDUCE      a=dtype|op<<8 b=atom c=src ref  d=nsrc  e=dst ref  f=ndst
//   NOTIFY      a=peer       b=signal c=value                    f=run
//   WAIT                     b=signal c=value                    f=run
//   PUT_PACKETS a=value               c=src ref         e=dst ref
//   WAIT_PACKETS a=value              c=src ref
// Ref: 4 int64 {rank, buffer, offset, packet value (0: plain read)}.
// Program table: 8 int32 per program {first record, count, rank, cta, first ref, refs, 0, 0}.
// flags: bit 0: every rank of the launch group is on this GPU, so signals need only GPU
// scope; bit 1: packet stores at GPU scope too.
// trace: null, or 2 u64 per record: globaltimer (ns) when the instruction started and
// ended (a run of Notifies, Waits or PutPackets executed together shares its times).
// A CTA first copies its records, its refs and the pointer table into shared memory (as
// much as fits), so that no instruction waits on a chain of global loads to start.
enum { OPC_NOP = 0, OPC_COPY = 1, OPC_REDUCE = 2, OPC_NOTIFY = 3, OPC_WAIT = 4,
       OPC_PUT_PACKETS = 5, OPC_WAIT_PACKETS = 6 };
enum { BUF_INPUT = 0, BUF_OUTPUT = 1, BUF_STAGING = 2, BUF_PACKETS = 3, BUF_SIGNALS = 4,
       NBUF = 8 };
enum { ATOM_SM = 0, ATOM_TMA = 1, ATOM_CE = 2, ATOM_SWITCH = 3 };
#define MAX_REFS 256
#define REC 8
#define PROG 8
#define CACHE_RECS 320
#define CACHE_REFS 160
#define CACHE_PTRS 128
#define SIGNAL_RUN 32   // Notifies (or Waits) in a row handled together, one per lane of warp 0

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

// All Refs of one instruction must be V-aligned for the V-byte path; else 16, else 4.
__device__ __forceinline__ bool aligned(const void* p, int v) { return ((u64)p & (v - 1)) == 0; }

#ifndef PURLIN_LEAN
#define PURLIN_LEAN 2   // vectors in flight of the packet kernel's plain copies and reduces
#endif
// WITH_PKT false: no packet paths are compiled in (smaller, spill-free interpreter).
template <int V, bool WITH_PKT>
__device__ __forceinline__ bool copy_or_reduce(int opc, i64 dtop, bool pkt, const char* const* s,
                                               const u32* tags, int ns, char* const* d, int nd, i64 n,
                                               const Watch& w) {
  // packets are the latency regime: small, so 16-byte accesses at most
  const int VP = V > 16 ? 16 : V;
  const int dt = (int)(dtop & 0xff), op = (int)((dtop >> 8) & 0xff);
  if (!WITH_PKT) {
    if (opc == OPC_COPY) return cta_copy<V, false>(s[0], 0, d, nd, n, w);
    switch (dt) {
      case DT_FP32: return cta_reduce<V, DT_FP32, false>(s, tags, ns, op, d, nd, n, w);
      case DT_FP16: return cta_reduce<V, DT_FP16, false>(s, tags, ns, op, d, nd, n, w);
      case DT_BF16: return cta_reduce<V, DT_BF16, false>(s, tags, ns, op, d, nd, n, w);
      default: return cta_reduce<V, DT_INT32, false>(s, tags, ns, op, d, nd, n, w);
    }
  }
  // The packet kernel runs small schedules: its plain copies and reduces keep fewer
  // vectors in flight (LN), so that no path of the kernel makes ptxas spill.
  const int LN = PURLIN_LEAN;
  if (opc == OPC_REDUCE && pkt && VP == 16 && spread_fits(ns, n))
    return reduce_spread(dt, s, tags, ns, op, d, nd, n / 16, w);
  if (opc == OPC_COPY)
    return pkt ? cta_copy<VP, true>(s[0], tags[0], d, nd, n, w)
               : cta_copy<V, false, 0, LN>(s[0], 0, d, nd, n, w);
  switch (dt) {
    case DT_FP32: return pkt ? cta_reduce<VP, DT_FP32, true>(s, tags, ns, op, d, nd, n, w)
                             : cta_reduce<V, DT_FP32, false, LN>(s, tags, ns, op, d, nd, n, w);
    case DT_FP16: return pkt ? cta_reduce<VP, DT_FP16, true>(s, tags, ns, op, d, nd, n, w)
                             : cta_reduce<V, DT_FP16, false, LN>(s, tags, ns, op, d, nd, n, w);
    case DT_BF16: return pkt ? cta_reduce<VP, DT_BF16, true>(s, tags, ns, op, d, nd, n, w)
                             : cta_reduce<V, DT_BF16, false, LN>(s, tags, ns, op, d, nd, n, w);
    default: return pkt ? cta_reduce<VP, DT_INT32, true>(s, tags, ns, op, d, nd, n, w)
                        : cta_reduce<V, DT_INT32, false, LN>(s, tags, ns, op, d, nd, n, w);
  }
}

__device__ __forceinline__ int tid_now() {
  int t;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
  return t;
}

template <bool WITH_TMA, bool WITH_PKT>
__device__ void snac_body(const i64* __restrict__ code, const i64* __restrict__ refs,
                          const int* __restrict__ progs, int prog_first,
                          char* const* __restrict__ ptrs, int nptrs, i64 staging_half, i64 packets_half,
                          u64* state, u64 stride, i64* err, u64 timeout_ns, i64 plan_id,
                          int flags, u64* __restrict__ trace) {
  __shared__ const char* s_src[MAX_REFS];
  __shared__ char* s_dst[MAX_REFS];
  __shared__ u32 s_tag[MAX_REFS];
  __shared__ u64 s_base;
  __shared__ int s_parity, s_stop, s_align, s_pkt, s_src_al, s_dst_al;
  __shared__ Watch w;
  __shared__ Env env;
  __shared__ i64 s_code[CACHE_RECS * REC];
  __shared__ i64 s_refs[CACHE_REFS * 4];
  __shared__ char* s_ptrs[CACHE_PTRS];
#if PURLIN_TMA
  __shared__ u64 s_bars[8];
  extern __shared__ __align__(128) char s_dyn[];
  Tma tma;
  if (WITH_TMA) {
    tma.smem = s_dyn; tma.bars = s_bars; tma.stages = 4; tma.chunk = 8192;
    tma_init(tma);
  }
#endif
  // program bounds live in shared memory: registers are for the Atom loops
  __shared__ int s_first, s_count, s_rfirst, s_ncode, s_nref;
  {
    const int* pr = progs + PROG * (prog_first + blockIdx.x);
    const int first = pr[0], count = pr[1], rfirst = pr[4], rcount = pr[5];
    const int ncode = count < CACHE_RECS ? count : CACHE_RECS;
    const int nref = rcount < CACHE_REFS ? rcount : CACHE_REFS;
    const bool ptrs_cached = nptrs <= CACHE_PTRS;
    for (int k = threadIdx.x; k < ncode * REC; k += blockDim.x) s_code[k] = code[(i64)first * REC + k];
    for (int k = threadIdx.x; k < nref * 4; k += blockDim.x) s_refs[k] = refs[(i64)rfirst * 4 + k];
    if (ptrs_cached)
      for (int k = threadIdx.x; k < nptrs; k += blockDim.x) s_ptrs[k] = ptrs[k];
    if (threadIdx.x == 0) {
      s_first = first; s_count = count; s_rfirst = rfirst; s_ncode = ncode; s_nref = nref;
      s_base = ld_volatile_u64(&state[1]);
      s_parity = (int)(ld_volatile_u64(&state[0]) & 1ull);
      s_stop = ld_volatile_u64(&state[3]) != 0ull;   // an earlier call deadlocked: do nothing
      env = Env{ptrs_cached ? (char* const*)s_ptrs : ptrs, staging_half, packets_half, s_base, s_parity};
      w = Watch{&state[3], err, timeout_ns, pr[2], pr[3], 0, s_base, plan_id};
    }
  }
  __syncthreads();
  // record pc / ref k: from shared memory when cached
#define RECORD(pc) ((pc) < s_ncode ? s_code + REC * (pc) : code + REC * (i64)(s_first + (pc)))
#define REF(k) ((u64)((k) - s_rfirst) < (u64)s_nref ? s_refs + 4 * ((k) - s_rfirst) : refs + 4 * (i64)(k))
#define TAG_BASE ((u32)s_base)
#define GPU_SCOPE ((flags & 1) != 0)
  // The loop's state lives in shared memory, not registers: with every Atom inlined the
  // allocator spills what lives across the loop, and a local store followed by its load
  // costs an L2 round trip (0.3 us per NOP while the record index was spilled:
  // benchmarks/results/experiments-2026-11-29/). Each thread keeps its own next record
  // index, so stepping needs no barrier; thread 0 keeps the trace stamps.
  __shared__ int s_next[PURLIN_THREADS];
  __shared__ int s_pc0;
  __shared__ u64 s_t_in;
  // the thread index read afresh at each use (asm volatile), so no register holds it
  // (or a pointer made from it) across the loop
#define NEXT (((volatile int*)s_next)[tid_now()])
  NEXT = 0;
  while (true) {
    const int pc = NEXT;
    if (pc >= s_count || s_stop) break;
    const i64* r = RECORD(pc);
    const int opc = (int)r[0];
    const i64 nbytes = r[1];
    NEXT = pc + 1;   // a run (signals, PutPackets, NOPs) moves it further below
    if (trace && threadIdx.x == 0) { s_t_in = globaltimer(); s_pc0 = pc; }
    if (threadIdx.x == 0) w.pc = pc;   // read only by a watchdog firing seconds later
    bool ok = true;
    if (opc == OPC_COPY || opc == OPC_REDUCE) {
      const int nsrc = (int)r[5], ndst = (int)r[7];
      const i64 sfirst = r[4], dfirst = r[6];
      if (threadIdx.x == 0) { s_align = PURLIN_VEC; s_pkt = 0; s_src_al = s_dst_al = 16; }
      __syncthreads();
      for (int k = threadIdx.x; k < nsrc + ndst; k += blockDim.x) {
        char* p;
        if (k < nsrc) {
          const i64* f = REF(sfirst + k);
          p = resolve(env, f);
          u32 tag = 0;
          if (f[1] == BUF_PACKETS) {   // payload at 2 x offset, tagged (encode sets f[3])
            p += 2 * f[2];
            tag = TAG_BASE + (u32)f[3];
            s_pkt = 1;
          }
          s_tag[k] = tag;
          s_src[k] = p;
        } else {
          p = resolve(env, REF(dfirst + k - nsrc));
          s_dst[k - nsrc] = p;
        }
        if (!aligned(p, PURLIN_VEC)) atomicMin(&s_align, aligned(p, 16) ? 16 : 4);
        if (!aligned(p, 16)) atomicMin(k < nsrc ? &s_src_al : &s_dst_al, 4);
      }
      __syncthreads();
      // one side 16-byte aligned, the other only 4 (V-form offsets): 16-byte vectors,
      // moved as 4-byte words on the unaligned side (1: loads, 2: stores)
      const int split = s_src_al == 16 && s_dst_al < 16 ? 2 : s_dst_al == 16 && s_src_al < 16 ? 1 : 0;
      const bool pkt = WITH_PKT && s_pkt != 0;
      const int atom = (int)r[3];
      const int align = s_align;
      i64 n = nbytes;
#if PURLIN_DST_ALIGN
      // A copy whose destination starts off a PURLIN_DST_ALIGN boundary (a V block's
      // offset): the bytes up to the boundary go first, so the bulk stores land on whole
      // lines (benchmarks/results/experiments-2026-11-29/h200-diagnose-agv-align.json: an
      // AllGather with 16-byte-shifted blocks, 0.60 of the memory roofline without this;
      // 128 recovered less than 512). The simulator charges it as copy_head_us.
      const u64 AB = PURLIN_DST_ALIGN;
      if (opc == OPC_COPY && !pkt && !split && align >= 16 && n >= 4096 && ((u64)s_dst[0] & (AB - 1))) {
        const i64 head = (i64)((AB - ((u64)s_dst[0] & (AB - 1))) & (AB - 1));
        for (i64 b = 4 * (i64)threadIdx.x; b < head; b += 4 * (i64)blockDim.x) {
          const u32 x = *(const u32*)(s_src[0] + b);
          for (int d = 0; d < ndst; ++d) *(u32*)(s_dst[d] + b) = x;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
          s_src[0] += head;
          for (int d = 0; d < ndst; ++d) s_dst[d] += head;
        }
        __syncthreads();
        n -= head;
      }
#endif
#if PURLIN_TMA
      if (WITH_TMA && opc == OPC_COPY && atom == ATOM_TMA && !pkt && align >= 16 && (n & 15) == 0) {
        cta_copy_tma(tma, s_src[0], s_dst, ndst, n);
      } else
#endif
      if (opc == OPC_COPY && !pkt && split) {
        ok = split == 2 ? cta_copy<16, false, 0, 0, 2>(s_src[0], 0, s_dst, ndst, n, w)
                        : cta_copy<16, false, 0, 0, 1>(s_src[0], 0, s_dst, ndst, n, w);
      } else if (align == PURLIN_VEC) {
        ok = copy_or_reduce<PURLIN_VEC, WITH_PKT>(opc, r[2], pkt, s_src, s_tag, nsrc, s_dst, ndst, n, w);
      } else if (align >= 16) {
        ok = copy_or_reduce<16, WITH_PKT>(opc, r[2], pkt, s_src, s_tag, nsrc, s_dst, ndst, n, w);
      } else {
        ok = copy_or_reduce<4, WITH_PKT>(opc, r[2], pkt, s_src, s_tag, nsrc, s_dst, ndst, n, w);
      }
      (void)atom;
      if (!ok) s_stop = 1;
      __syncthreads();
    } else if (opc == OPC_NOTIFY || opc == OPC_WAIT) {
      // this signal instruction and the ones of the same kind right after it (up to
      // SIGNAL_RUN): lane k of warp 0 handles the k-th, so a run costs one release (or
      // one poll round trip), not one per instruction
      const int m = (int)r[7];   // the run starting here (encode.py marks it)
      if (opc == OPC_NOTIFY) __syncthreads();   // every thread's earlier stores are done
      if ((int)threadIdx.x < m) {
        const i64* rr = RECORD(pc + (int)threadIdx.x);
        if (opc == OPC_NOTIFY) {
          u64* flag = (u64*)env.ptrs[(int)rr[2] * NBUF + BUF_SIGNALS] + rr[3];
          if (GPU_SCOPE) st_release_gpu(flag, s_base + (u64)rr[4]);
          else st_release_sys(flag, s_base + (u64)rr[4]);
        } else {
          const u64* flag = (const u64*)env.ptrs[w.rank * NBUF + BUF_SIGNALS] + rr[3];
          const u64 want = s_base + (u64)rr[4];
          u64 seen = GPU_SCOPE ? ld_acquire_gpu(flag) : ld_acquire_sys(flag);
          if (seen < want) {
            u64 start = globaltimer();
            for (u32 spins = 1;; ++spins) {
              seen = GPU_SCOPE ? ld_acquire_gpu(flag) : ld_acquire_sys(flag);
              if (seen >= want) break;
              if ((spins & 255u) == 0u) {
                if (ld_volatile_u64(&state[3])) { s_stop = 1; break; }
                if (globaltimer() - start > timeout_ns) {
                  Watch mine = w;
                  mine.pc = pc + (int)threadIdx.x;   // the Wait of the run that timed out
                  watchdog_fire(mine, 1, rr[3], want, seen);
                  s_stop = 1;
                  break;
                }
              }
            }
          }
        }
      }
      NEXT = pc + m;
      if (opc == OPC_WAIT) __syncthreads();
    } else if (WITH_PKT && opc == OPC_PUT_PACKETS) {
      // this PutPackets and up to 7 more right after it, run together over all threads
      __shared__ i64 s_pn[8];
      __shared__ int s_m;
      if (threadIdx.x == 0) {
        int m = 1;
        while (m < 8 && pc + m < s_count && RECORD(pc + m)[0] == OPC_PUT_PACKETS) ++m;
        s_m = m;
      }
      __syncthreads();
      const int m = s_m;
      if ((int)threadIdx.x < m) {
        const i64* rr = RECORD(pc + (int)threadIdx.x);
        const i64* dref = REF(rr[6]);
        s_src[threadIdx.x] = resolve(env, REF(rr[4]));
        s_dst[threadIdx.x] = resolve(env, dref) + 2 * dref[2];
        s_pn[threadIdx.x] = rr[1];
        s_tag[threadIdx.x] = TAG_BASE + (u32)rr[2];
      }
      __syncthreads();
      if (flags & 2) cta_put_packets_run<true>(s_src, s_dst, s_pn, s_tag, m);
      else cta_put_packets_run<false>(s_src, s_dst, s_pn, s_tag, m);
      NEXT = pc + m;
      __syncthreads();
    } else if (WITH_PKT && opc == OPC_WAIT_PACKETS) {
      const i64* sref = REF(r[4]);
      ok = cta_wait_packets(resolve(env, sref), sref[2], nbytes, TAG_BASE + (u32)r[2], w);
      if (!ok) s_stop = 1;
      __syncthreads();
    } else if (opc == OPC_NOP) {   // a run of fused WaitPackets: one step (encode marks it)
      NEXT = pc + (r[7] > 1 ? (int)r[7] : 1);
    }
    if (trace && threadIdx.x == 0) {   // every record of a run gets the run's times
      const u64 t_out = globaltimer();
      for (int k = s_pc0; k < NEXT; ++k) {
        trace[2 * ((i64)s_first + k)] = s_t_in;
        trace[2 * ((i64)s_first + k) + 1] = t_out;
      }
    }
  }
#undef TAG_BASE
#undef GPU_SCOPE
#undef NEXT
  // the last CTA of the launch to finish moves the epoch on (nothing is ever cleared)
  __syncthreads();
  // No fences: the counter only finds the last CTA, and the next call reads the new
  // epoch after this kernel ends, which orders every write (fences here added their
  // round trips to every call's critical path).
  if (threadIdx.x == 0) {
    u64 n = atomicAdd((unsigned long long*)&state[2], 1ull);
    if (n == (u64)gridDim.x - 1) {
      state[2] = 0;
      state[1] = s_base + stride;
      state[0] = state[0] + 1;
    }
  }
}

// The interpreter's entry points: one per (bulk-copy engine, packet paths) it compiles in.
#define SNAC_KERNEL(name, with_tma, with_pkt)                                                        \
  extern "C" __global__ void __launch_bounds__(PURLIN_THREADS, PURLIN_MIN_BLOCKS)                   \
  name(const i64* __restrict__ code, const i64* __restrict__ refs, const int* __restrict__ progs,    \
       int prog_first, char* const* __restrict__ ptrs, int nptrs, i64 staging_half, i64 packets_half, \
       u64* state, u64 stride, i64* err, u64 timeout_ns, i64 plan_id, int flags, u64* trace) {       \
    snac_body<with_tma, with_pkt>(code, refs, progs, prog_first, ptrs, nptrs, staging_half,         \
                                  packets_half, state, stride, err, timeout_ns, plan_id, flags, trace); \
  }
SNAC_KERNEL(snac_run, false, false)
// With the packet (latency-regime) paths: for schedules that use PutPackets/WaitPackets.
SNAC_KERNEL(snac_run_pkt, false, true)
#if PURLIN_TMA
// With 4 x 8 KiB of dynamic shared memory for bulk copies (atom "tma"), no packet paths.
SNAC_KERNEL(snac_run_tma, true, false)
#endif

// ---- standalone Atom kernels (benchmarks, calibration) --------------------------------
// CTA b moves chunks b, b + grid, ... of ``chunk`` bytes each; nothing waits (no watchdog).
__device__ __forceinline__ void no_watch(Watch& w) {
  if (threadIdx.x == 0) w = Watch{nullptr, nullptr, ~0ull, 0, 0, 0, 0, 0};
  __syncthreads();
}

// The copy Atom variants alone (cta_copy's HINT and UN): CTA b copies chunks b, b + grid, ...
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
    cta_copy<PURLIN_VEC, false, HINT, UN>(src + off, 0, dd, 1, n, w);
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
    copy_or_reduce<PURLIN_VEC, false>(OPC_REDUCE, dt | (op << 8), false, s, tags, nsrc, d, 1, n, w);
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
