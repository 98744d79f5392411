// Purlin Atoms: the device functions that move and reduce bytes for one CTA.
//
// Compiled by NVRTC once per GPU generation (see atomset.py), with no headers:
//   PURLIN_VEC      vector width in bytes: 16 (sm_80, sm_90) or 32 (sm_100)
//   PURLIN_THREADS  threads per CTA (launch bounds)
//   PURLIN_TMA      1 where the bulk-copy engine exists (sm_90 and later)
// Every function here works on one contiguous byte range for the whole CTA; the callers
// (standalone atom kernels, the SNAC interpreter) decide which CTA gets which range.
//
// Data written by other CTAs of the same launch is read with plain (coherent) loads,
// never the read-only path: only kernel parameters are marked __restrict__.

typedef unsigned long long u64;
typedef long long i64;
typedef unsigned int u32;

#ifndef PURLIN_VEC
#define PURLIN_VEC 16
#endif
#ifndef PURLIN_THREADS
#define PURLIN_THREADS 512
#endif
#ifndef PURLIN_MIN_BLOCKS
#define PURLIN_MIN_BLOCKS 1   // CTAs per SM the launch bounds keep room for
#endif
#ifndef PURLIN_TMA
#define PURLIN_TMA 0
#endif
// Packet sources a packet reduce loads and settles together (an experiment knob through
// $PURLIN_DEFINES: 2 and 8 were slower for the 8 KiB AllReduce on the H200).
#ifndef PURLIN_PKT_BATCH
#define PURLIN_PKT_BATCH 4
#endif
// Copies align their destination to this many bytes first (0: off; see snac.cu).
#ifndef PURLIN_DST_ALIGN
#define PURLIN_DST_ALIGN 512
#endif

// The big Atom loops are inlined into their callers: out of line, every call saved and
// restored registers through local memory, and the 8 KiB AllReduce went from 8.7 to
// 12.2 us on the H200 (benchmarks/results/experiments-2026-11-29/).
#define PURLIN_ATOM_FN __forceinline__

enum { DT_FP32 = 0, DT_FP16 = 1, DT_BF16 = 2, DT_INT32 = 3 };
enum { OP_ADD = 0, OP_MAX = 1, OP_MIN = 2, OP_MUL = 3 };

// ---- vectors -----------------------------------------------------------------------
struct __align__(4) V4 { u32 w[1]; };
struct __align__(16) V16 { u32 w[4]; };
struct __align__(32) V32 { u32 w[8]; };
template <int V> struct VecT;
template <> struct VecT<4> { typedef V4 T; };
template <> struct VecT<16> { typedef V16 T; };
template <> struct VecT<32> { typedef V32 T; };

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

// V4: the fallback for Refs that are not 16-byte aligned.
__device__ __forceinline__ void ldv(V4& r, const void* p) { r.w[0] = *(const volatile u32*)p; }
__device__ __forceinline__ void stv(void* p, const V4& r) { *(u32*)p = r.w[0]; }
PURLIN_LDV16(ldv, "")
PURLIN_STV16(stv, "")
#if __CUDA_ARCH__ >= 1000
// Blackwell: one 256-bit access per thread (ld/st .v8.b32, PTX 8.8).
__device__ __forceinline__ void ldv(V32& r, const void* p) {
  asm volatile("ld.global.v8.b32 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8];"
               : "=r"(r.w[0]), "=r"(r.w[1]), "=r"(r.w[2]), "=r"(r.w[3]),
                 "=r"(r.w[4]), "=r"(r.w[5]), "=r"(r.w[6]), "=r"(r.w[7]) : "l"(p));
}
__device__ __forceinline__ void stv(void* p, const V32& r) {
  asm volatile("st.global.v8.b32 [%0], {%1,%2,%3,%4,%5,%6,%7,%8};"
               :: "l"(p), "r"(r.w[0]), "r"(r.w[1]), "r"(r.w[2]), "r"(r.w[3]),
                  "r"(r.w[4]), "r"(r.w[5]), "r"(r.w[6]), "r"(r.w[7]) : "memory");
}
#else
__device__ __forceinline__ void ldv(V32& r, const void* p) {
  ldv(*reinterpret_cast<V16*>(&r.w[0]), p);
  ldv(*reinterpret_cast<V16*>(&r.w[4]), (const char*)p + 16);
}
__device__ __forceinline__ void stv(void* p, const V32& r) {
  stv(p, *reinterpret_cast<const V16*>(&r.w[0]));
  stv((char*)p + 16, *reinterpret_cast<const V16*>(&r.w[4]));
}
#endif

// ---- flags, time, ordering ----------------------------------------------------------
__device__ __forceinline__ u64 ld_acquire_sys(const u64* p) {
  u64 v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_sys(u64* p, u64 v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}
// GPU scope: enough where every rank is on this GPU (loopback), and cheaper than .sys.
__device__ __forceinline__ u64 ld_acquire_gpu(const u64* p) {
  u64 v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_gpu(u64* p, u64 v) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ u64 ld_volatile_u64(const u64* p) {
  u64 v;
  asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ u64 globaltimer() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// ---- packets (latency regime) --------------------------------------------------------
// A packet is 16 bytes written by ONE 128-bit store: {data lo32, tag, data hi32, tag}.
// It carries 8 payload bytes and an 8-byte flag (the call's tag, low 32 bits, twice), one
// copy in each 8-byte half, so a reader accepts it only when both halves are current even
// if a 16-byte store were ever split in two. Payload offset o lives at physical 2*o.
template <bool GPU = false>
__device__ __forceinline__ void st_packet(void* p, u32 lo, u32 hi, u32 tag) {
  if (GPU)   // every reader on this GPU: a relaxed GPU-scope store is enough
    asm volatile("st.relaxed.gpu.global.v4.u32 [%0], {%1,%2,%3,%4};"
                 :: "l"(p), "r"(lo), "r"(tag), "r"(hi), "r"(tag) : "memory");
  else
    asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};"
                 :: "l"(p), "r"(lo), "r"(tag), "r"(hi), "r"(tag) : "memory");
}
__device__ __forceinline__ void ld_packet(const void* p, u32& lo, u32& t0, u32& hi, u32& t1) {
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(lo), "=r"(t0), "=r"(hi), "=r"(t1) : "l"(p) : "memory");
}

// Watchdog state of a CTA, kept in shared memory (so it costs no registers in the loops).
struct Watch {
  u64* abort_flag;   // global: set by the first CTA that times out; all spins give up
  i64* err;          // global error record (see snac.cu)
  u64 timeout_ns;
  int rank, cta, pc;
  u64 base;
  i64 plan_id;       // which plan the launch ran (the host's index), for the error message
};

// Records the first timeout: [claimed, rank, cta, pc, kind, where, want, seen, base, plan].
__device__ void watchdog_fire(const Watch& w, int kind, i64 where, u64 want, u64 seen) {
  if (atomicCAS((unsigned long long*)w.err, 0ull, 1ull) == 0ull) {
    w.err[1] = w.rank; w.err[2] = w.cta; w.err[3] = w.pc; w.err[4] = kind;
    w.err[5] = where; w.err[6] = (i64)want; w.err[7] = (i64)seen; w.err[8] = (i64)w.base;
    w.err[9] = w.plan_id;
    __threadfence_system();
  }
  atomicExch((unsigned long long*)w.abort_flag, 1ull);
}

// Spin until the packet at physical address p carries ``tag``. Returns its payload words;
// ok is false on abort. The first look is inline; the spin is out of line (small loops).
struct Pkt { u32 lo, hi; bool ok; };
__device__ __noinline__ Pkt wait_packet_slow(const char* p, u32 tag, const Watch& w, i64 where) {
  u32 lo, t0, hi, t1;
  u64 start = globaltimer();
  for (u32 spins = 1;; ++spins) {
    ld_packet(p, lo, t0, hi, t1);
    if (t0 == tag && t1 == tag) return Pkt{lo, hi, true};
    if ((spins & 1023u) == 0u) {
      if (ld_volatile_u64(w.abort_flag)) return Pkt{0u, 0u, false};
      u64 now = globaltimer();
      if (now - start > w.timeout_ns) {
        watchdog_fire(w, 2, where, tag, t0 == tag ? t1 : t0);
        return Pkt{0u, 0u, false};
      }
    }
  }
}
__device__ __forceinline__ Pkt wait_packet(const char* p, u32 tag, const Watch& w, i64 where) {
  u32 lo, t0, hi, t1;
  ld_packet(p, lo, t0, hi, t1);
  if (t0 == tag && t1 == tag) return Pkt{lo, hi, true};
  return wait_packet_slow(p, tag, w, where);
}

// Packet loads in two phases, so that every load of a batch is in flight before the first
// tag is checked (a check right after each load would serialise the round trips):
// issue: raw 16-byte packets into registers; finish: check tags (spinning out of line on
// a stale one) and extract the payload.
template <int V> struct PktRaw { V16 p[V / 8 > 0 ? V / 8 : 1]; };

template <int V>
__device__ __forceinline__ void pkt_issue(PktRaw<V>& raw, const char* window, i64 off) {
  if (V == 4) {
    ld_packet(window + 2 * (off & ~7ll), raw.p[0].w[0], raw.p[0].w[1], raw.p[0].w[2], raw.p[0].w[3]);
    return;
  }
  const char* p = window + 2 * off;
#pragma unroll
  for (int k = 0; k < V / 8; ++k)
    ld_packet(p + 16 * k, raw.p[k].w[0], raw.p[k].w[1], raw.p[k].w[2], raw.p[k].w[3]);
}

template <int V>
__device__ __forceinline__ bool pkt_finish(typename VecT<V>::T& r, PktRaw<V>& raw, const char* window,
                                           i64 off, u32 tag, const Watch& w) {
  bool ok = true;
  const int K = V / 8 > 0 ? V / 8 : 1;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (raw.p[k].w[1] != tag || raw.p[k].w[3] != tag) {
      const i64 o = V == 4 ? (off & ~7ll) : off + 8 * k;
      Pkt x = wait_packet_slow(window + 2 * o, tag, w, o);
      raw.p[k].w[0] = x.lo; raw.p[k].w[2] = x.hi;
      ok &= x.ok;
    }
  }
  if (V == 4) {
    r.w[0] = (off & 4) ? raw.p[0].w[2] : raw.p[0].w[0];
  } else {
#pragma unroll
    for (int k = 0; k < K; ++k) { r.w[2 * k] = raw.p[k].w[0]; r.w[2 * k + 1] = raw.p[k].w[2]; }
  }
  return ok;
}

// Wait until every used packet of a batch carries its tag, re-polling all stale ones
// together: one round trip per poll for the whole batch, not one per packet.
// addr[i] == nullptr marks an unused slot. ``where`` names the batch in a timeout record.
template <int N>
__device__ __forceinline__ bool pkt_settle(V16 (&pk)[N], const char* const (&addr)[N], const u32 (&tag)[N],
                                           const Watch& w, i64 where) {
  u32 spins = 0;
  u64 start = 0;
  while (true) {
    bool stale = false;
#pragma unroll
    for (int i = 0; i < N; ++i)
      if (addr[i] && (pk[i].w[1] != tag[i] || pk[i].w[3] != tag[i])) stale = true;
    if (!stale) return true;
    if (spins == 0) start = globaltimer();
    if ((++spins & 63u) == 0u) {
      if (ld_volatile_u64(w.abort_flag)) return false;
      if (globaltimer() - start > w.timeout_ns) {
        u32 want = 0, seen = 0;
#pragma unroll
        for (int i = 0; i < N; ++i)
          if (addr[i] && (pk[i].w[1] != tag[i] || pk[i].w[3] != tag[i])) { want = tag[i]; seen = pk[i].w[1]; }
        watchdog_fire(w, 2, where, want, seen);
        return false;
      }
    }
#pragma unroll
    for (int i = 0; i < N; ++i)
      if (addr[i] && (pk[i].w[1] != tag[i] || pk[i].w[3] != tag[i]))
        ld_packet(addr[i], pk[i].w[0], pk[i].w[1], pk[i].w[2], pk[i].w[3]);
  }
}

// Load V payload bytes at payload offset ``off`` (V-aligned) of a packet window.
template <int V>
__device__ __forceinline__ bool ld_packets(typename VecT<V>::T& r, const char* window, i64 off,
                                           u32 tag, const Watch& w) {
  PktRaw<V> raw;
  pkt_issue<V>(raw, window, off);
  return pkt_finish<V>(r, raw, window, off, tag, w);
}

// ---- element types -----------------------------------------------------------------
__device__ __forceinline__ float h2f(u32 h) {
  float f;
  unsigned short s = (unsigned short)h;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(s));
  return f;
}
__device__ __forceinline__ u32 pack_f16(float lo, float hi) {
  u32 r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ u32 pack_bf16(float lo, float hi) {
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

template <int DT> struct DTr;   // EPW: elements per 32-bit word; A: accumulator
template <> struct DTr<DT_FP32> {
  typedef float A; enum { EPW = 1 };
  static __device__ __forceinline__ void get(u32 w, A* a) { a[0] = __uint_as_float(w); }
  static __device__ __forceinline__ u32 put(const A* a) { return __float_as_uint(a[0]); }
};
template <> struct DTr<DT_INT32> {
  typedef int A; enum { EPW = 1 };
  static __device__ __forceinline__ void get(u32 w, A* a) { a[0] = (int)w; }
  static __device__ __forceinline__ u32 put(const A* a) { return (u32)a[0]; }
};
template <> struct DTr<DT_BF16> {
  typedef float A; enum { EPW = 2 };
  static __device__ __forceinline__ void get(u32 w, A* a) {
    a[0] = __uint_as_float(w << 16); a[1] = __uint_as_float(w & 0xffff0000u);
  }
  static __device__ __forceinline__ u32 put(const A* a) { return pack_bf16(a[0], a[1]); }
};
template <> struct DTr<DT_FP16> {
  typedef float A; enum { EPW = 2 };
  static __device__ __forceinline__ void get(u32 w, A* a) { a[0] = h2f(w & 0xffffu); a[1] = h2f(w >> 16); }
  static __device__ __forceinline__ u32 put(const A* a) { return pack_f16(a[0], a[1]); }
};

// Reduction ops; floats follow numpy (a NaN operand gives NaN), ints wrap.
template <int OP> __device__ __forceinline__ float fop(float x, float y) {
  if (OP == OP_ADD) return __fadd_rn(x, y);
  if (OP == OP_MUL) return __fmul_rn(x, y);
  if (x != x) return x;
  if (y != y) return y;
  return OP == OP_MAX ? fmaxf(x, y) : fminf(x, y);
}
template <int OP> __device__ __forceinline__ int fop(int x, int y) {
  if (OP == OP_ADD) return (int)((u32)x + (u32)y);
  if (OP == OP_MUL) return (int)((u32)x * (u32)y);
  return OP == OP_MAX ? max(x, y) : min(x, y);
}

// ---- copy: one read, every dst written -----------------------------------------------
// srcs/dsts point at shared memory arrays set up by the caller. ``tag`` != 0 means the
// source is a packet window (payload addressing, spin until tagged).
// A 16-byte vector moved as four 4-byte words on the side that is only 4-byte aligned
// (SPLIT 1: loads, 2: stores), so a copy between buffers whose offsets differ mod 16
// (V-form blocks) still keeps 16 bytes in flight per vector.
template <int SPLIT, class Vec> __device__ __forceinline__ void ldv_s(Vec& r, const char* p) {
  if (SPLIT == 1) {
    const volatile u32* q = (const volatile u32*)p;
#pragma unroll
    for (int k = 0; k < (int)(sizeof(Vec) / 4); ++k) r.w[k] = q[k];
  } else {
    ldv(r, p);
  }
}
template <int SPLIT, class Vec> __device__ __forceinline__ void stv_s(char* p, const Vec& r) {
  if (SPLIT == 2) {
#pragma unroll
    for (int k = 0; k < (int)(sizeof(Vec) / 4); ++k) ((u32*)p)[k] = r.w[k];
  } else {
    stv(p, r);
  }
}

// One step of a plain copy: U vectors per thread (j = i, i + blockDim.x, ...) loaded, then
// stored to every dst. GUARD: the last, partial step (vectors past nv skipped), its loads
// still in flight together.
template <int V, int HINT, int SPLIT, int U, bool GUARD>
__device__ __forceinline__ void copy_step(const char* src, char* const* dsts, int ndst, i64 i, i64 nv) {
  typename VecT<V>::T v[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const i64 j = i + u * (i64)blockDim.x;
    if (GUARD && j >= nv) break;
    if (HINT == 1) ldv_l2(v[u], src + j * V);
    else if (HINT == 2) ldv_cs(v[u], src + j * V);
    else if (HINT == 3) ldv_na(v[u], src + j * V);
    else ldv_s<SPLIT>(v[u], src + j * V);
  }
  for (int d = 0; d < ndst; ++d) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const i64 j = i + u * (i64)blockDim.x;
      if (GUARD && j >= nv) break;
      if (HINT == 2) stv_cs(dsts[d] + j * V, v[u]);
      else if (HINT == 3) stv_na(dsts[d] + j * V, v[u]);
      else stv_s<SPLIT>(dsts[d] + j * V, v[u]);
    }
  }
}

// HINT: 0 plain, 1 loads ask L2 for 256-byte blocks, 2 streaming loads and stores, 3 no L1.
// UN: vectors in flight per thread (0: the default for V). SPLIT: see ldv_s.
template <int V, bool PKT, int HINT = 0, int UN = 0, int SPLIT = 0>
__device__ PURLIN_ATOM_FN bool cta_copy(const char* src, u32 tag, char* const* dsts, int ndst, i64 nbytes,
                         const Watch& w) {
  typedef typename VecT<V>::T Vec;
  const int U = UN ? UN : PKT ? 4 : (V == 32 ? 4 : 8);   // vectors in flight per thread
  const i64 nv = nbytes / V;
  const i64 step = (i64)blockDim.x * U;
  bool ok = true;
  i64 i = threadIdx.x;
  for (; i + (U - 1) * (i64)blockDim.x < nv; i += step) {
    if (!PKT) {
      copy_step<V, HINT, SPLIT, U, false>(src, dsts, ndst, i, nv);
      continue;
    }
    Vec v[U];
    if (PKT && V == 16) {   // U vectors x 2 packets, issued together, settled together
      V16 pk[2 * U];
      const char* addr[2 * U];
      u32 tg[2 * U];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int k = 0; k < 2; ++k) {
          addr[2 * u + k] = src + 2 * (i + u * (i64)blockDim.x) * V + 16 * k;
          tg[2 * u + k] = tag;
          ld_packet(addr[2 * u + k], pk[2 * u + k].w[0], pk[2 * u + k].w[1], pk[2 * u + k].w[2], pk[2 * u + k].w[3]);
        }
      ok &= pkt_settle<2 * U>(pk, addr, tg, w, i * V);
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int k = 0; k < 2; ++k) {
          v[u].w[(2 * k) % (V / 4)] = pk[2 * u + k].w[0];
          v[u].w[(2 * k + 1) % (V / 4)] = pk[2 * u + k].w[2];
        }
    } else {
      PktRaw<V> raw[U];
#pragma unroll
      for (int u = 0; u < U; ++u) pkt_issue<V>(raw[u], src, (i + u * (i64)blockDim.x) * V);
#pragma unroll
      for (int u = 0; u < U; ++u) ok &= pkt_finish<V>(v[u], raw[u], src, (i + u * (i64)blockDim.x) * V, tag, w);
    }
    for (int d = 0; d < ndst; ++d) {
#pragma unroll
      for (int u = 0; u < U; ++u) stv_s<SPLIT>(dsts[d] + (i + u * (i64)blockDim.x) * V, v[u]);
    }
  }
  // A plain copy's last, partial step keeps its vectors in flight together: one at a time,
  // its up to U - 1 vectors per thread cost as many memory round trips, which made copies
  // of V-block sizes slow (benchmarks/results/h200-validation.json, all_to_all_v W=8).
  // Packet copies, and lean ones (U <= 2: at most one more round trip), finish one vector
  // at a time below.
  if (!PKT && U > 2 && i < nv) {
    copy_step<V, HINT, SPLIT, U, true>(src, dsts, ndst, i, nv);
    i += step;
  }
  for (; i < nv; i += blockDim.x) {
    Vec v;
    if (PKT) ok &= ld_packets<V>(v, src, i * V, tag, w);
    else ldv_s<SPLIT>(v, src + i * V);
    for (int d = 0; d < ndst; ++d) stv_s<SPLIT>(dsts[d] + i * V, v);
  }
  // tail: bytes past the last whole vector, 4 at a time (sizes are multiples of 4 except
  // for fp8, where the byte loop finishes)
  const i64 done = nv * V;
  for (i64 b = done + 4 * (i64)threadIdx.x; b + 4 <= nbytes; b += 4 * (i64)blockDim.x) {
    u32 x;
    if (PKT) {
      Pkt k = wait_packet(src + 2 * (b & ~7ll), tag, w, b & ~7ll);
      ok &= k.ok;
      x = (b & 4) ? k.hi : k.lo;
    } else {
      x = *(const volatile u32*)(src + b);
    }
    for (int d = 0; d < ndst; ++d) *(u32*)(dsts[d] + b) = x;
  }
  const i64 done4 = nbytes & ~3ll;
  if (!PKT && done4 < nbytes && (i64)threadIdx.x < nbytes - done4) {
    i64 b = done4 + threadIdx.x;
    char x = src[b];
    for (int d = 0; d < ndst; ++d) dsts[d][b] = x;
  }
  return ok;
}

// ---- reduce: sources in the given order, fp32 (int32) accumulation, one rounding -------
// tags[s] != 0 marks source s as a packet window. The op is a run-time switch (uniform,
// cheap next to the loads) so that each dtype needs one function, not four.
template <typename A>
__device__ __forceinline__ A apply(int op, A x, A y) {
  switch (op) {
    case OP_ADD: return fop<OP_ADD>(x, y);
    case OP_MAX: return fop<OP_MAX>(x, y);
    case OP_MIN: return fop<OP_MIN>(x, y);
    default: return fop<OP_MUL>(x, y);
  }
}

// The slots of a spread packet reduce: one 16-byte vector per thread, one allocation per
// kernel whatever the dtype.
__device__ __forceinline__ V16* spread_slots() {
  __shared__ V16 slots[PURLIN_THREADS];
  return slots;
}

// Thread i < nv sums vector i over nsrc sources held in the slots (source s at s * nv),
// in source order: the reduce loop's order and rounding.
template <int DT>
__device__ __forceinline__ void spread_sum(const V16* slot, int nsrc, int op, char* const* dsts, int ndst, i64 nv) {
  typedef DTr<DT> T;
  typedef typename T::A A;
  const i64 t = threadIdx.x;
  if (t >= nv) return;
  A acc[4 * T::EPW];
  for (int s = 0; s < nsrc; ++s) {
    const V16 v = slot[s * nv + t];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      A x[T::EPW];
      T::get(v.w[k], x);
#pragma unroll
      for (int e = 0; e < T::EPW; ++e)
        acc[k * T::EPW + e] = s == 0 ? x[e] : apply(op, acc[k * T::EPW + e], x[e]);
    }
  }
  V16 out;
#pragma unroll
  for (int k = 0; k < 4; ++k) out.w[k] = T::put(&acc[k * T::EPW]);
  for (int d = 0; d < ndst; ++d) stv(dsts[d] + 16 * t, out);
}

// A small packet reduce, spread (the caller checks spread_fits): thread t loads vector
// t % nv of source t / nv, so that every source's packets are in flight at once; a thread
// walking the sources waits ceil(nsrc / PURLIN_PKT_BATCH) round trips while most threads
// idle (8 sources of 1 KiB: the 8 KiB AllReduce at W=8). Whole 16-byte vectors only.
__device__ __forceinline__ bool spread_fits(int nsrc, i64 nbytes) {
  return (nbytes & 15) == 0 && nsrc > PURLIN_PKT_BATCH && (nbytes / 16) * nsrc <= (i64)blockDim.x;
}
__device__ __forceinline__ bool reduce_spread(int dt, const char* const* srcs, const u32* tags, int nsrc, int op,
                                              char* const* dsts, int ndst, i64 nv, const Watch& w) {
  V16* slot = spread_slots();
  bool ok = true;
  const i64 t = threadIdx.x;
  if (t < nv * nsrc) {
    const int s = (int)(t / nv);
    const i64 i = t - s * nv;
    V16 v;
    if (tags[s]) {
      V16 pk[2];
      const char* addr[2] = {srcs[s] + 32 * i, srcs[s] + 32 * i + 16};
      const u32 tg[2] = {tags[s], tags[s]};
#pragma unroll
      for (int k = 0; k < 2; ++k) ld_packet(addr[k], pk[k].w[0], pk[k].w[1], pk[k].w[2], pk[k].w[3]);
      ok = pkt_settle<2>(pk, addr, tg, w, 16 * i);
      v.w[0] = pk[0].w[0]; v.w[1] = pk[0].w[2]; v.w[2] = pk[1].w[0]; v.w[3] = pk[1].w[2];
    } else {
      ldv(v, srcs[s] + 16 * i);
    }
    slot[t] = v;
  }
  __syncthreads();
  switch (dt) {
    case DT_FP32: spread_sum<DT_FP32>(slot, nsrc, op, dsts, ndst, nv); break;
    case DT_FP16: spread_sum<DT_FP16>(slot, nsrc, op, dsts, ndst, nv); break;
    case DT_BF16: spread_sum<DT_BF16>(slot, nsrc, op, dsts, ndst, nv); break;
    default: spread_sum<DT_INT32>(slot, nsrc, op, dsts, ndst, nv);
  }
  return ok;
}

template <int V, int DT, bool PKT, int BN = 0>
__device__ PURLIN_ATOM_FN bool cta_reduce(const char* const* srcs, const u32* tags, int nsrc, int op,
                                        char* const* dsts, int ndst, i64 nbytes, const Watch& w) {
  typedef typename VecT<V>::T Vec;
  typedef DTr<DT> T;
  typedef typename T::A A;
  const int WORDS = V / 4;
  const int E = WORDS * T::EPW;              // elements per vector
  // sources loaded together, and vectors per thread (packet loads hold more registers)
  const int B = V == 4 ? 1 : BN ? BN : PKT ? PURLIN_PKT_BATCH : (V == 32 ? 4 : 8);
  const int U = 1;   // 2 spills at 128 registers
  const i64 nv = nbytes / V;
  bool ok = true;
  for (i64 i = threadIdx.x; i < nv; i += (i64)blockDim.x * U) {
    A acc[U][E];
    for (int s0 = 0; s0 < nsrc; s0 += B) {
      Vec v[B][U];
      if (PKT && V == 16) {   // U == 1: every source's 2 packets issued, then settled together
        V16 pk[2 * B];
        const char* addr[2 * B];
        u32 tg[2 * B];
#pragma unroll
        for (int b = 0; b < B; ++b) {
          const bool is_pkt = s0 + b < nsrc && tags[s0 + b];
#pragma unroll
          for (int k = 0; k < 2; ++k) {
            addr[2 * b + k] = is_pkt ? srcs[s0 + b] + 2 * i * V + 16 * k : nullptr;
            tg[2 * b + k] = is_pkt ? tags[s0 + b] : 0u;
            if (is_pkt) ld_packet(addr[2 * b + k], pk[2 * b + k].w[0], pk[2 * b + k].w[1],
                                  pk[2 * b + k].w[2], pk[2 * b + k].w[3]);
          }
          if (s0 + b < nsrc && !tags[s0 + b]) ldv(v[b][0], srcs[s0 + b] + i * V);
        }
        ok &= pkt_settle<2 * B>(pk, addr, tg, w, i * V);
#pragma unroll
        for (int b = 0; b < B; ++b)
          if (addr[2 * b])
#pragma unroll
            for (int k = 0; k < 2; ++k) {
              v[b][0].w[(2 * k) % (V / 4)] = pk[2 * b + k].w[0];
              v[b][0].w[(2 * k + 1) % (V / 4)] = pk[2 * b + k].w[2];
            }
      } else if (PKT) {   // U == 1: issue every source's packets, then check them
        PktRaw<V> raw[B];
#pragma unroll
        for (int b = 0; b < B; ++b)
          if (s0 + b < nsrc) {
            if (tags[s0 + b]) pkt_issue<V>(raw[b], srcs[s0 + b], i * V);
            else ldv(v[b][0], srcs[s0 + b] + i * V);
          }
#pragma unroll
        for (int b = 0; b < B; ++b)
          if (s0 + b < nsrc && tags[s0 + b])
            ok &= pkt_finish<V>(v[b][0], raw[b], srcs[s0 + b], i * V, tags[s0 + b], w);
      } else {
#pragma unroll
        for (int b = 0; b < B; ++b) {
          if (s0 + b < nsrc) {
#pragma unroll
            for (int u = 0; u < U; ++u) {
              const i64 j = i + u * (i64)blockDim.x;
              if (j < nv) ldv(v[b][u], srcs[s0 + b] + j * V);
            }
          }
        }
      }
#pragma unroll
      for (int b = 0; b < B; ++b) {
        if (s0 + b < nsrc) {
#pragma unroll
          for (int u = 0; u < U; ++u) {
#pragma unroll
            for (int k = 0; k < WORDS; ++k) {
              A x[T::EPW];
              T::get(v[b][u].w[k], x);
#pragma unroll
              for (int e = 0; e < T::EPW; ++e)
                acc[u][k * T::EPW + e] = (s0 + b == 0) ? x[e] : apply(op, acc[u][k * T::EPW + e], x[e]);
            }
          }
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const i64 j = i + u * (i64)blockDim.x;
      if (j < nv) {
        Vec out;
#pragma unroll
        for (int k = 0; k < WORDS; ++k) out.w[k] = T::put(&acc[u][k * T::EPW]);
        for (int d = 0; d < ndst; ++d) stv(dsts[d] + j * V, out);
      }
    }
  }
  // tail: one 32-bit word (one or two elements) per thread
  for (i64 b = nv * V + 4 * (i64)threadIdx.x; b + 4 <= nbytes; b += 4 * (i64)blockDim.x) {
    A acc[T::EPW];
    for (int s = 0; s < nsrc; ++s) {
      u32 word;
      if (PKT && tags[s]) {
        Pkt k = wait_packet(srcs[s] + 2 * (b & ~7ll), tags[s], w, b & ~7ll);
        ok &= k.ok;
        word = (b & 4) ? k.hi : k.lo;
      } else {
        word = *(const volatile u32*)(srcs[s] + b);
      }
      A x[T::EPW];
      T::get(word, x);
      for (int e = 0; e < T::EPW; ++e) acc[e] = s == 0 ? x[e] : apply(op, acc[e], x[e]);
    }
    u32 r = T::put(acc);
    for (int d = 0; d < ndst; ++d) *(u32*)(dsts[d] + b) = r;
  }
  if (DT == DT_FP16 || DT == DT_BF16) {   // a last lone 16-bit element
    i64 b = nbytes & ~3ll;
    if (b < nbytes && threadIdx.x == 0) {
      A acc[2];
      for (int s = 0; s < nsrc; ++s) {
        u32 word;
        if (PKT && tags[s]) {
          Pkt k = wait_packet(srcs[s] + 2 * (b & ~7ll), tags[s], w, b & ~7ll);
          ok &= k.ok;
          word = ((b & 4) ? k.hi : k.lo) & 0xffffu;
        } else {
          word = *(const volatile unsigned short*)(srcs[s] + b);
        }
        A x[2];
        T::get(word, x);
        acc[0] = s == 0 ? x[0] : apply(op, acc[0], x[0]);
      }
      acc[1] = acc[0];
      u32 r = T::put(acc);
      for (int d = 0; d < ndst; ++d) *(unsigned short*)(dsts[d] + b) = (unsigned short)r;
    }
  }
  return ok;
}

// ---- PutPackets: stage and notify in one store ----------------------------------------
__device__ void cta_put_packets(const char* src, char* window, i64 off, i64 nbytes, u32 tag) {
  char* p = window + 2 * off;
  const i64 n16 = nbytes / 16;
  for (i64 i = threadIdx.x; i < n16; i += blockDim.x) {
    V16 v;
    ldv(v, src + 16 * i);
    st_packet(p + 32 * i, v.w[0], v.w[1], tag);
    st_packet(p + 32 * i + 16, v.w[2], v.w[3], tag);
  }
  if ((nbytes & 15) && threadIdx.x == 0) {   // sizes are multiples of 8 (encode checks)
    i64 b = n16 * 16;
    const volatile u32* s = (const volatile u32*)(src + b);
    st_packet(p + 2 * b, s[0], s[1], tag);
  }
}

// A run of up to 8 consecutive PutPackets executed together, their 16-byte vectors spread
// over all the CTA's threads (vector t of the run: instruction k, vector j), U per thread
// loaded before the first store. One thread per vector of every instruction, rather than
// one thread walking all of them: a thread holding eight vectors made ptxas spill, and the
// run cost grew with its length (benchmarks/results/experiments-2026-11-29/, interp put1k).
// dsts[i] is the physical address of instruction i's first packet.
#ifndef PURLIN_PUT_UN
#define PURLIN_PUT_UN 1   // vectors per thread in flight (2 was slower: experiments-2026-11-29/)
#endif
template <bool GPU>
__device__ void cta_put_packets_run(const char* const* srcs, char* const* dsts, const i64* nbytes,
                                    const u32* tags, int m) {
  const int U = PURLIN_PUT_UN;
  i64 total = 0;   // vectors in the run
  for (int i = 0; i < m; ++i) total += nbytes[i] / 16;
  for (i64 t0 = threadIdx.x; t0 < total; t0 += (i64)U * blockDim.x) {
    V16 v[U];
    char* dst[U];
    u32 tag[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      i64 t = t0 + (i64)u * blockDim.x;
      dst[u] = nullptr;
      if (t < total) {
        int k = 0;
        while (t >= nbytes[k] / 16) t -= nbytes[k++] / 16;   // at most m - 1 steps
        ldv(v[u], srcs[k] + 16 * t);
        dst[u] = dsts[k] + 32 * t;
        tag[u] = tags[k];
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (dst[u]) {
        st_packet<GPU>(dst[u], v[u].w[0], v[u].w[1], tag[u]);
        st_packet<GPU>(dst[u] + 16, v[u].w[2], v[u].w[3], tag[u]);
      }
  }
  if ((int)threadIdx.x < m && (nbytes[threadIdx.x] & 15)) {   // an 8-byte tail
    const int k = threadIdx.x;
    const i64 b = nbytes[k] / 16 * 16;
    const volatile u32* sp = (const volatile u32*)(srcs[k] + b);
    st_packet<GPU>(dsts[k] + 2 * b, sp[0], sp[1], tags[k]);
  }
}

// Standalone WaitPackets (when the next instruction cannot fuse it): every thread spins on
// its share of the window's packets.
__device__ bool cta_wait_packets(const char* window, i64 off, i64 nbytes, u32 tag, const Watch& w) {
  bool ok = true;
  for (i64 b = 8 * (i64)threadIdx.x; b < nbytes; b += 8 * (i64)blockDim.x)
    ok &= wait_packet(window + 2 * (off + b), tag, w, off + b).ok;
  return ok;
}

// ---- bulk-copy engine (TMA, sm_90+) ----------------------------------------------------
#if PURLIN_TMA
__device__ __forceinline__ u32 smem_addr(const void* p) {
  return (u32)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void mbar_init(u64* bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem_addr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(u64* bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
               :: "r"(smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(u64* bar, u32 parity) {
  asm volatile(
      "{\n .reg .pred p;\n"
      "WAIT_%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra WAIT_%=;\n}\n" :: "r"(smem_addr(bar)), "r"(parity) : "memory");
}
__device__ __forceinline__ void bulk_g2s(void* sdst, const void* gsrc, u32 bytes, u64* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(smem_addr(sdst)), "l"(gsrc), "r"(bytes), "r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void bulk_s2g(void* gdst, const void* ssrc, u32 bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
               :: "l"(gdst), "r"(smem_addr(ssrc)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_read1() { asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

// The pipeline state of one CTA's bulk copies: S stages of CH bytes in shared memory,
// one mbarrier per stage, phase bits persisting across instructions.
struct Tma {
  char* smem;
  u64* bars;
  int stages;
  u32 chunk;
  u32 phases;   // bit s: parity to wait for next on stage s
};

__device__ void tma_init(Tma& t) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < t.stages; ++s) mbar_init(&t.bars[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  t.phases = 0;
  __syncthreads();
}

// Thread 0 alone drives the copy engine: loads run up to S chunks ahead of the stores.
// nbytes must be a multiple of 16 and the addresses 16-byte aligned (the caller checks).
__device__ void cta_copy_tma(Tma& t, const char* src, char* const* dsts, int ndst, i64 nbytes) {
  if (threadIdx.x != 0) return;
  const i64 nch = (nbytes + t.chunk - 1) / t.chunk;
  auto len = [&](i64 c) -> u32 { i64 r = nbytes - c * t.chunk; return (u32)(r < t.chunk ? r : t.chunk); };
  for (i64 c = 0; c < nch && c < t.stages; ++c) {
    mbar_expect_tx(&t.bars[c], len(c));
    bulk_g2s(t.smem + c * t.chunk, src + c * t.chunk, len(c), &t.bars[c]);
  }
  for (i64 c = 0; c < nch; ++c) {
    int s = (int)(c % t.stages);
    mbar_wait(&t.bars[s], (t.phases >> s) & 1u);
    t.phases ^= 1u << s;
    for (int d = 0; d < ndst; ++d) bulk_s2g(dsts[d] + c * t.chunk, t.smem + s * t.chunk, len(c));
    bulk_commit();
    // the stores of chunk c-1 have read their stage: refill it with chunk c-1+S
    i64 n = c - 1 + t.stages;
    if (c >= 1 && n < nch) {
      bulk_wait_read1();
      int sp = (int)((c - 1) % t.stages);
      mbar_expect_tx(&t.bars[sp], len(n));
      bulk_g2s(t.smem + sp * t.chunk, src + n * t.chunk, len(n), &t.bars[sp]);
    }
  }
  // the first S chunks' stages that were never refilled: nothing pending but stores
  bulk_wait_all();
  asm volatile("fence.proxy.async.global;" ::: "memory");
}
#endif

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
