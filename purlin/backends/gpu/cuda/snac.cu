// The SNAC interpreter: one CTA walks one program of an encoded Schedule. The record
// layout is encode.py's (its OPC_, BUF_, ATOM_, DT_, OP_ names and REC, PROG, MAX_REFS
// come first in the source NVRTC gets); see atoms.cuh for how the sources are put together.
//
// Record: 8 int64 per instruction, [opcode, nbytes, a, b, c, d, e, f] (encode.py's table).
// Ref: 4 int64 {rank, buffer, offset, packet value (0: plain read)}.
// Program table: 8 int32 per program {first record, count, rank, cta, first ref, refs, 0, 0}.
// flags: bit 0: every rank of the launch group is on this GPU, so signals need only GPU
// scope; bit 1: packet stores at GPU scope too.
// trace: null, or 2 u64 per record: globaltimer (ns) when the instruction started and
// ended (a run of Notifies, Waits or PutPackets executed together shares its times).
#include "reduce.cuh"

#define CACHE_RECS 320
#define CACHE_REFS 160
#define CACHE_PTRS 128
static_assert(PURLIN_SIGNAL_RUN <= 32, "a signal run is one lane of warp 0 per instruction");
static_assert(PURLIN_PUT_RUN <= 32, "a PutPackets run is set up by one thread per instruction");
static_assert(PURLIN_PARAM_PTRS <= CACHE_PTRS, "pointers passed by value fit the shared copy");

// A pointer table passed by value (ptrs == null and nptrs <= PURLIN_PARAM_PTRS): a call
// with new buffers needs no table uploaded first.
struct PtrArgs {
  char* p[PURLIN_PARAM_PTRS];
};

// Where one launch group's buffers are: [rank * NBUF + buffer] is the base of half 0.
struct Env {
  char* const* ptrs;
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

// What a CTA keeps across instructions, in shared memory: registers are for the Atom
// loops. With every Atom inlined, the allocator spills what lives across the loop, and a
// local store followed by its load costs an L2 round trip (0.3 us per NOP while the record
// index was spilled: benchmarks/results/experiments-2026-11-29/). The CTA's records, refs
// and the pointer table are copied here first (as much as fits), so that no instruction
// waits on a chain of global loads to start. Each thread keeps its own next record index
// (next[]), so stepping needs no barrier; thread 0 keeps the trace stamps.
struct Cta {
  i64 code[CACHE_RECS * REC];
  i64 refs[CACHE_REFS * 4];
  i64 pn[PURLIN_PUT_RUN];
  i64 vend[PURLIN_PUT_RUN], tend[PURLIN_PUT_RUN];   // a PutPackets run: where each put's vectors (tail packets) end
  const char* src[MAX_REFS];
  char* dst[MAX_REFS];
  char* ptrs[CACHE_PTRS];
  u32 tag[MAX_REFS];
  int next[PURLIN_THREADS];
  Watch w;
  Env env;
  u64 base, call, t_in;
  int stop, align, pkt, src_al, dst_al, pc0;
  int first, count, rfirst, ncode, nref;
};

__device__ __forceinline__ int tid_now() {
  int t;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
  return t;
}
// the thread index read afresh at each use (asm volatile), so no register holds it (or a
// pointer made from it) across the loop
__device__ __forceinline__ volatile int& next_pc(Cta& c) { return ((volatile int*)c.next)[tid_now()]; }
__device__ __forceinline__ const i64* record(const Cta& c, const i64* code, int pc) {
  return pc < c.ncode ? c.code + REC * pc : code + REC * (i64)(c.first + pc);
}
__device__ __forceinline__ const i64* ref_at(const Cta& c, const i64* refs, i64 k) {
  return (u64)(k - c.rfirst) < (u64)c.nref ? c.refs + 4 * (k - c.rfirst) : refs + 4 * k;
}

// ---- decode: the program's records, refs and pointers into shared memory -------------
// Two round trips to memory before the first instruction: the program's header together
// with the epoch state, then its records, refs and pointers, each thread issuing all of
// its loads before it stores any (one loop per array cost a round trip each).
__device__ __forceinline__ void load_program(Cta& c, const i64* code, const i64* refs, const int* progs,
                                             int prog_first, char* const* ptrs, const PtrArgs& inl, int nptrs,
                                             i64 staging_half,
                                             i64 packets_half, u64* state, i64* err, u64 timeout_ns,
                                             i64 plan_id) {
  const int* pr = progs + PROG * (prog_first + blockIdx.x);
  const int first = pr[0], count = pr[1], rfirst = pr[4], rcount = pr[5];
  u64 call = 0, base = 0, stop = 0;
  if (threadIdx.x == 0) {
    base = ld_volatile_u64(&state[1]);
    call = ld_volatile_u64(&state[0]);
    stop = ld_volatile_u64(&state[3]);   // an earlier call deadlocked: do nothing
  }
  const int ncode = count < CACHE_RECS ? count : CACHE_RECS;
  const int nref = rcount < CACHE_REFS ? rcount : CACHE_REFS;
  const bool ptrs_cached = ptrs == nullptr || nptrs <= CACHE_PTRS;
  const int nc = ncode * REC, nr = nref * 4, np = ptrs_cached ? nptrs : 0;
  const int most = nc > nr ? (nc > np ? nc : np) : (nr > np ? nr : np);
#pragma unroll 2
  for (int k = threadIdx.x; k < most; k += blockDim.x) {
    const i64 a = k < nc ? code[(i64)first * REC + k] : 0;
    const i64 b = k < nr ? refs[(i64)rfirst * 4 + k] : 0;
    char* p = k < np ? (ptrs == nullptr ? inl.p[k] : ptrs[k]) : nullptr;
    if (k < nc) c.code[k] = a;
    if (k < nr) c.refs[k] = b;
    if (k < np) c.ptrs[k] = p;
  }
  if (threadIdx.x == 0) {
    c.first = first; c.count = count; c.rfirst = rfirst; c.ncode = ncode; c.nref = nref;
    c.base = base;
    c.call = call;
    c.stop = stop != 0ull;
    c.env = Env{ptrs_cached ? (char* const*)c.ptrs : ptrs, staging_half, packets_half, base, (int)(call & 1ull)};
    c.w = Watch{&state[3], err, timeout_ns, pr[2], pr[3], 0, base, plan_id};
  }
}

// ---- data: Copy and Reduce ------------------------------------------------------------
// The instruction's Refs into c.src / c.dst (packet sources at their payload, tagged), and
// the widest access all of them allow (c.align), per side (c.src_al, c.dst_al).
__device__ __forceinline__ void resolve_refs(Cta& c, const i64* r, const i64* refs, int nsrc, int ndst) {
  if (threadIdx.x == 0) { c.align = PURLIN_VEC; c.pkt = 0; c.src_al = c.dst_al = 16; }
  __syncthreads();
  for (int k = threadIdx.x; k < nsrc + ndst; k += blockDim.x) {
    char* p;
    if (k < nsrc) {
      const i64* f = ref_at(c, refs, r[4] + k);
      p = resolve(c.env, f);
      u32 tag = 0;
      if (f[1] == BUF_PACKETS) {   // payload at 2 x offset, tagged (encode sets f[3])
        p += 2 * f[2];
        tag = (u32)c.base + (u32)f[3];
        c.pkt = 1;
      }
      c.tag[k] = tag;
      c.src[k] = p;
    } else {
      p = resolve(c.env, ref_at(c, refs, r[6] + k - nsrc));
      c.dst[k - nsrc] = p;
    }
    const int a = align_class(p);
    if (a < PURLIN_VEC) atomicMin(&c.align, a);
    if (a < 16) atomicMin(k < nsrc ? &c.src_al : &c.dst_al, a);
  }
  __syncthreads();
}

// A copy whose destination starts off a PURLIN_DST_ALIGN boundary (a V block's offset):
// the bytes up to the boundary go first, so the bulk stores land on whole lines
// (benchmarks/results/experiments-2026-11-29/h200-diagnose-agv-align.json: an AllGather
// with 16-byte-shifted blocks, 0.60 of the memory roofline without this; 128 recovered
// less than 512). The simulator charges it as copy_head_us. Returns the bytes left.
__device__ __forceinline__ i64 copy_head(Cta& c, int ndst, i64 n) {
#if PURLIN_DST_ALIGN
  const u64 AB = PURLIN_DST_ALIGN;
  if (!((u64)c.dst[0] & (AB - 1))) return n;
  const i64 head = (i64)((AB - ((u64)c.dst[0] & (AB - 1))) & (AB - 1));
  for (i64 b = 4 * (i64)threadIdx.x; b < head; b += 4 * (i64)blockDim.x) {
    const u32 x = *(const u32*)(c.src[0] + b);
    for (int d = 0; d < ndst; ++d) *(u32*)(c.dst[d] + b) = x;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    c.src[0] += head;
    for (int d = 0; d < ndst; ++d) c.dst[d] += head;
  }
  __syncthreads();
  return n - head;
#else
  return n;
#endif
}

// WITH_PKT false: no packet paths are compiled in (smaller interpreter). ANY: the
// unaligned kernel (full-width plain paths, 4-byte-word reduces as wide as vectors).
template <int V, bool WITH_PKT, bool ANY = false>
__device__ __forceinline__ bool copy_or_reduce(int opc, i64 dtop, bool pkt, const char* const* s,
                                               const u32* tags, int ns, char* const* d, int nd, i64 n,
                                               const Watch& w) {
  // packets are the latency regime: small, so 16-byte accesses at most
  const int VP = V > 16 ? 16 : V;
  const int dt = (int)(dtop & 0xff), op = (int)((dtop >> 8) & 0xff);
  if (!WITH_PKT) {
    if (opc == OPC_COPY) return cta_copy<V, false>(s[0], 0, d, nd, n, w);
    return with_op(op, [&](auto o) {
      constexpr int OP = decltype(o)::value;
      switch (dt) {
        case DT_FP32: return cta_reduce<V, DT_FP32, OP, false>(s, tags, ns, op, d, nd, n, w);
        case DT_FP16: return cta_reduce<V, DT_FP16, OP, false>(s, tags, ns, op, d, nd, n, w);
        case DT_BF16: return cta_reduce<V, DT_BF16, OP, false>(s, tags, ns, op, d, nd, n, w);
        default: return cta_reduce<V, DT_INT32, OP, false>(s, tags, ns, op, d, nd, n, w);
      }
    });
  }
  // The packet kernel runs small schedules: its plain copies and reduces keep fewer
  // vectors in flight (LN), so that its paths spill less. The unaligned kernel runs any
  // schedule with a Ref off 16 bytes: full width (LN 0), and its spills are the price.
  const int LN = ANY ? 0 : PURLIN_LEAN;
  if (opc == OPC_REDUCE && pkt && VP == 16 && spread_fits(ns, n))
    return reduce_spread(dt, s, tags, ns, op, d, nd, n / 16, w);
  if (opc == OPC_COPY)
    return pkt ? cta_copy<VP, true>(s[0], tags[0], d, nd, n, w)
               : cta_copy<V, false, LN>(s[0], 0, d, nd, n, w);
  if (pkt) {   // packet sources: the op at run time (see reduce.cuh)
    switch (dt) {
      case DT_FP32: return cta_reduce<VP, DT_FP32, OP_RT, true>(s, tags, ns, op, d, nd, n, w);
      case DT_FP16: return cta_reduce<VP, DT_FP16, OP_RT, true>(s, tags, ns, op, d, nd, n, w);
      case DT_BF16: return cta_reduce<VP, DT_BF16, OP_RT, true>(s, tags, ns, op, d, nd, n, w);
      default: return cta_reduce<VP, DT_INT32, OP_RT, true>(s, tags, ns, op, d, nd, n, w);
    }
  }
  return with_op(op, [&](auto o) {
    constexpr int OP = decltype(o)::value;
    switch (dt) {
      case DT_FP32: return cta_reduce<V, DT_FP32, OP, false, LN, ANY>(s, tags, ns, op, d, nd, n, w);
      case DT_FP16: return cta_reduce<V, DT_FP16, OP, false, LN, ANY>(s, tags, ns, op, d, nd, n, w);
      case DT_BF16: return cta_reduce<V, DT_BF16, OP, false, LN, ANY>(s, tags, ns, op, d, nd, n, w);
      default: return cta_reduce<V, DT_INT32, OP, false, LN, ANY>(s, tags, ns, op, d, nd, n, w);
    }
  });
}

// A Ref only 1- or 2-byte aligned: G-byte elements (2 where the size allows). Only fp16
// and bf16 reduce here: 32-bit elements are 4-byte aligned (the host checks buffers).
// A Ref under 4-byte alignment reached a kernel without the narrow path (the host picks
// the unaligned kernel for such schedules and buffers): record it and stop, never fault.
__device__ __noinline__ bool refuse_unaligned(const Watch& w, int align) {
  watchdog_fire(w, 3, align, 4, (u64)align, globaltimer());
  return false;
}

template <bool WITH_PKT>
__device__ __forceinline__ bool narrow(const Cta& c, int opc, i64 dtop, bool pkt, int align, int ns, int nd, i64 n) {
  const bool two = align == 2 && (n & 1) == 0;
  if (opc == OPC_COPY) {
    if constexpr (WITH_PKT) {
      if (pkt) return two ? cta_copy_narrow<2, true>(c.src[0], c.tag[0], c.dst, nd, n, c.w)
                          : cta_copy_narrow<1, true>(c.src[0], c.tag[0], c.dst, nd, n, c.w);
    }
    return two ? cta_copy_narrow<2, false>(c.src[0], 0, c.dst, nd, n, c.w)
               : cta_copy_narrow<1, false>(c.src[0], 0, c.dst, nd, n, c.w);
  }
  const int dt = (int)(dtop & 0xff), op = (int)((dtop >> 8) & 0xff);
  if constexpr (WITH_PKT) {
    if (pkt) return dt == DT_FP16 ? cta_reduce_narrow<DT_FP16, true>(c.src, c.tag, ns, op, c.dst, nd, n, c.w)
                                  : cta_reduce_narrow<DT_BF16, true>(c.src, c.tag, ns, op, c.dst, nd, n, c.w);
  }
  return dt == DT_FP16 ? cta_reduce_narrow<DT_FP16, false>(c.src, c.tag, ns, op, c.dst, nd, n, c.w)
                       : cta_reduce_narrow<DT_BF16, false>(c.src, c.tag, ns, op, c.dst, nd, n, c.w);
}

template <bool WITH_TMA, bool WITH_PKT, bool ANY>
__device__ __forceinline__ void step_data(Cta& c, Tma& tma, const i64* r, const i64* refs) {
  const int opc = (int)r[0], nsrc = (int)r[5], ndst = (int)r[7];
  resolve_refs(c, r, refs, nsrc, ndst);
  // one side 16-byte aligned, the other only 4 (V-form offsets): 16-byte vectors, moved
  // as 4-byte words on the unaligned side (1: loads, 2: stores)
  const int split = c.src_al == 16 && c.dst_al == 4 ? 2 : c.dst_al == 16 && c.src_al == 4 ? 1 : 0;
  const bool pkt = WITH_PKT && c.pkt != 0;
  const int align = c.align;
  i64 n = r[1];
  bool ok = true;
  if (opc == OPC_COPY && !pkt && !split && align >= 16 && n >= PURLIN_DST_ALIGN_MIN) n = copy_head(c, ndst, n);
  if (align < 4) {   // the narrow path lives in the unaligned kernel only (the host picks it)
    if constexpr (ANY) ok = narrow<WITH_PKT>(c, opc, r[2], pkt, align, nsrc, ndst, n);
    else ok = refuse_unaligned(c.w, align);
  } else
#if PURLIN_TMA
  if (WITH_TMA && opc == OPC_COPY && (int)r[3] == ATOM_TMA && !pkt && align >= 16 && (n & 15) == 0) {
    cta_copy_tma(tma, c.src[0], c.dst, ndst, n);
  } else
#endif
  if (opc == OPC_COPY && !pkt && split) {
    ok = split == 2 ? cta_copy<16, false, 0, 2>(c.src[0], 0, c.dst, ndst, n, c.w)
                    : cta_copy<16, false, 0, 1>(c.src[0], 0, c.dst, ndst, n, c.w);
  } else if (align == PURLIN_VEC) {
    ok = copy_or_reduce<PURLIN_VEC, WITH_PKT, ANY>(opc, r[2], pkt, c.src, c.tag, nsrc, c.dst, ndst, n, c.w);
  } else if (align >= 16) {
    ok = copy_or_reduce<16, WITH_PKT, ANY>(opc, r[2], pkt, c.src, c.tag, nsrc, c.dst, ndst, n, c.w);
  } else {
    ok = copy_or_reduce<4, WITH_PKT, ANY>(opc, r[2], pkt, c.src, c.tag, nsrc, c.dst, ndst, n, c.w);
  }
  if (!ok) c.stop = 1;
  __syncthreads();
}

// ---- signals: a run of Notifies or Waits ----------------------------------------------
// This signal instruction and the ones of the same kind right after it (up to
// PURLIN_SIGNAL_RUN; encode.py marks the run in field f): lane k of warp 0 handles the
// k-th, so a run costs one release (or one poll round trip), not one per instruction.
__device__ __forceinline__ void step_signal(Cta& c, const i64* r, int pc, const i64* code, int flags) {
  const int opc = (int)r[0];
  const int m = (int)r[7];
  const bool gpu_scope = (flags & 1) != 0;
  if (opc == OPC_NOTIFY) __syncthreads();   // every thread's earlier stores are done
  if ((int)threadIdx.x < m) {
    const i64* rr = record(c, code, pc + (int)threadIdx.x);
    if (opc == OPC_NOTIFY) {
      u64* flag = (u64*)c.env.ptrs[(int)rr[2] * NBUF + BUF_SIGNALS] + rr[3];
      if (gpu_scope) st_release_gpu(flag, c.base + (u64)rr[4]);
      else st_release_sys(flag, c.base + (u64)rr[4]);
    } else {
      const u64* flag = (const u64*)c.env.ptrs[c.w.rank * NBUF + BUF_SIGNALS] + rr[3];
      const u64 want = c.base + (u64)rr[4];
      u64 seen = gpu_scope ? ld_acquire_gpu(flag) : ld_acquire_sys(flag);
      if (seen < want) {
        const u64 start = globaltimer();
        for (u32 spins = 1;; ++spins) {
          seen = gpu_scope ? ld_acquire_gpu(flag) : ld_acquire_sys(flag);
          if (seen >= want) break;
          if ((spins & 255u) == 0u) {
            if (ld_volatile_u64(c.w.abort_flag)) { c.stop = 1; break; }
            if (globaltimer() - start > c.w.timeout_ns) {
              Watch mine = c.w;
              mine.pc = pc + (int)threadIdx.x;   // the Wait of the run that timed out
              watchdog_fire(mine, 1, rr[3], want, seen, start);
              c.stop = 1;
              break;
            }
          }
        }
      }
    }
  }
  next_pc(c) = pc + m;
  if (opc == OPC_WAIT) __syncthreads();
}

// ---- packets: a run of PutPackets, a standalone WaitPackets -------------------------
// This PutPackets and the ones right after it (up to PURLIN_PUT_RUN; encode.py marks the
// run in field b), run together over all the CTA's threads.
__device__ __forceinline__ void step_put(Cta& c, const i64* r, int pc, const i64* code, const i64* refs, int flags) {
  const int m = (int)r[3];
  if (threadIdx.x < 32) {   // warp 0: lane i sets up put i, then a scan of their sizes
    const int i = (int)threadIdx.x;
    i64 nv = 0, nt = 0;
    if (i < m) {
      const i64* rr = record(c, code, pc + i);
      const i64* dref = ref_at(c, refs, rr[6]);
      const char* src = resolve(c.env, ref_at(c, refs, rr[4]));
      c.src[i] = src;
      c.dst[i] = resolve(c.env, dref) + 2 * dref[2];
      c.pn[i] = rr[1];
      c.tag[i] = (u32)c.base + (u32)rr[2];
      nv = put_vectors(src, rr[1]);
      nt = put_tail_packets(src, rr[1]);
    }
#pragma unroll
    for (int d = 1; d < PURLIN_PUT_RUN; d <<= 1) {
      const i64 a = __shfl_up_sync(0xffffffffu, nv, d), b = __shfl_up_sync(0xffffffffu, nt, d);
      if (i >= d) { nv += a; nt += b; }
    }
    if (i < m) { c.vend[i] = nv; c.tend[i] = nt; }
  }
  __syncthreads();
  if (flags & 2) cta_put_packets_run<true>(c.src, c.dst, c.pn, c.tag, c.vend, c.tend, m);
  else cta_put_packets_run<false>(c.src, c.dst, c.pn, c.tag, c.vend, c.tend, m);
  next_pc(c) = pc + m;
  __syncthreads();
}

__device__ __forceinline__ void step_wait_packets(Cta& c, const i64* r, const i64* refs) {
  const i64* sref = ref_at(c, refs, r[4]);
  if (!cta_wait_packets(resolve(c.env, sref), sref[2], r[1], (u32)c.base + (u32)r[2], c.w)) c.stop = 1;
  __syncthreads();
}

// ---- the loop -----------------------------------------------------------------------
template <bool WITH_TMA, bool WITH_PKT, bool ANY>
__device__ void snac_body(const i64* __restrict__ code, const i64* __restrict__ refs,
                          const int* __restrict__ progs, int prog_first,
                          char* const* __restrict__ ptrs, const PtrArgs& inl, int nptrs, i64 staging_half,
                          i64 packets_half, u64* state, u64 stride, i64* err, u64 timeout_ns, i64 plan_id,
                          int flags, u64* __restrict__ trace) {
  __shared__ Cta c;
  Tma tma;
#if PURLIN_TMA
  static_assert(PURLIN_TMA_STAGES <= 8, "s_bars holds 8 stages");
  __shared__ u64 s_bars[8];
  extern __shared__ __align__(128) char s_dyn[];
  if (WITH_TMA) {
    tma.smem = s_dyn; tma.bars = s_bars; tma.stages = PURLIN_TMA_STAGES; tma.chunk = PURLIN_TMA_STAGE_BYTES;
    tma_init(tma);
  }
#endif
  load_program(c, code, refs, progs, prog_first, ptrs, inl, nptrs, staging_half, packets_half, state, err,
               timeout_ns, plan_id);
  __syncthreads();
  if (threadIdx.x == 0 && blockIdx.x != 0) atomicAdd((unsigned long long*)&state[2], 1ull);   // read it
  next_pc(c) = 0;
  while (true) {
    const int pc = next_pc(c);
    if (pc >= c.count || c.stop) break;
    const i64* r = record(c, code, pc);
    const int opc = (int)r[0];
    next_pc(c) = pc + 1;   // a run (signals, PutPackets, NOPs) moves it further below
    if (trace && threadIdx.x == 0) { c.t_in = globaltimer(); c.pc0 = pc; }
    if (threadIdx.x == 0) c.w.pc = pc;   // read only by a watchdog firing seconds later
    if (opc == OPC_COPY || opc == OPC_REDUCE) step_data<WITH_TMA, WITH_PKT, ANY>(c, tma, r, refs);
    else if (opc == OPC_NOTIFY || opc == OPC_WAIT) step_signal(c, r, pc, code, flags);
    else if (WITH_PKT && opc == OPC_PUT_PACKETS) step_put(c, r, pc, code, refs, flags);
    else if (WITH_PKT && opc == OPC_WAIT_PACKETS) step_wait_packets(c, r, refs);
    else if (opc == OPC_NOP) next_pc(c) = pc + (r[7] > 1 ? (int)r[7] : 1);   // a run of fused WaitPackets
    if (trace && threadIdx.x == 0) {   // every record of a run gets the run's times
      const u64 t_out = globaltimer();
      for (int k = c.pc0; k < next_pc(c); ++k) {
        trace[2 * ((i64)c.first + k)] = c.t_in;
        trace[2 * ((i64)c.first + k) + 1] = t_out;
      }
    }
  }
  // CTA 0 moves the epoch on, once every other CTA of the launch has read it: each counts
  // itself in (a reduction, no round trip) right after it read the state, so no CTA waits
  // at its end (an atomic whose old value decided the last CTA cost every CTA a round
  // trip). Nothing is ever cleared, and no fences: the next call reads the new epoch after
  // this kernel ends, which orders every write.
  __syncthreads();
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    const u64 others = (u64)gridDim.x - 1;
    if (others) {
      const u64 start = globaltimer();
      while (ld_volatile_u64(&state[2]) < others && globaltimer() - start < timeout_ns) {
      }
    }
    state[2] = 0;
    state[1] = c.base + stride;
    state[0] = c.call + 1;
  }
}

// The interpreter's entry points: one per (bulk-copy engine, packet paths) it compiles in.
// The pointer table is the last argument (by value, PURLIN_PARAM_PTRS entries), after the
// device table ``ptrs`` (null when the values are passed).
#define SNAC_KERNEL(name, with_tma, with_pkt, any)                                                   \
  extern "C" __global__ void __launch_bounds__(PURLIN_THREADS, PURLIN_MIN_BLOCKS)                   \
  name(const i64* __restrict__ code, const i64* __restrict__ refs, const int* __restrict__ progs,    \
       int prog_first, char* const* __restrict__ ptrs, int nptrs, i64 staging_half, i64 packets_half, \
       u64* state, u64 stride, i64* err, u64 timeout_ns, i64 plan_id, int flags, u64* trace,         \
       const __grid_constant__ PtrArgs inl) {                                                       \
    snac_body<with_tma, with_pkt, any>(code, refs, progs, prog_first, ptrs, inl, nptrs, staging_half, \
                                       packets_half, state, stride, err, timeout_ns, plan_id, flags, trace); \
  }
SNAC_KERNEL(snac_run, false, false, false)
// With the packet (latency-regime) paths: for schedules that use PutPackets/WaitPackets.
SNAC_KERNEL(snac_run_pkt, false, true, false)
// Any schedule with a Ref off 16 bytes (or buffers that are): packet paths, the narrow
// path (1- and 2-byte elements), 4-byte-word reduces as wide as vector ones.
SNAC_KERNEL(snac_run_any, false, true, true)
#if PURLIN_TMA
// With PURLIN_TMA_STAGES x PURLIN_TMA_STAGE_BYTES of dynamic shared memory for bulk
// copies (atom "tma"), no packet paths.
SNAC_KERNEL(snac_run_tma, true, false, false)
#endif
