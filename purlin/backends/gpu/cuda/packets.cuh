// Purlin Atoms, part 2: packets (the latency regime), the watchdog, PutPackets and
// WaitPackets. See atoms.cuh for how the sources are put together.
#include "atoms.cuh"

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

// Records the first timeout: [claimed, rank, cta, pc, kind, where, want, seen, base, plan,
// when the spin began, when it gave up] (times: %globaltimer, ns).
__device__ void watchdog_fire(const Watch& w, int kind, i64 where, u64 want, u64 seen, u64 start) {
  if (atomicCAS((unsigned long long*)w.err, 0ull, 1ull) == 0ull) {
    w.err[1] = w.rank; w.err[2] = w.cta; w.err[3] = w.pc; w.err[4] = kind;
    w.err[5] = where; w.err[6] = (i64)want; w.err[7] = (i64)seen; w.err[8] = (i64)w.base;
    w.err[9] = w.plan_id; w.err[10] = (i64)start; w.err[11] = (i64)globaltimer();
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
        watchdog_fire(w, 2, where, tag, t0 == tag ? t1 : t0, start);
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
        watchdog_fire(w, 2, where, want, seen, start);
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


// A G-byte element (G = 1 or 2) at payload byte b of a packet window: its packet's tag
// checked (spinning out of line on a stale one), the element in the low bits.
template <int G>
__device__ __forceinline__ u32 ld_g_pkt(const char* window, i64 b, u32 tag, const Watch& w, bool& ok) {
  const Pkt k = wait_packet(window + 2 * (b & ~7ll), tag, w, b & ~7ll);
  ok &= k.ok;
  const u32 word = (b & 4) ? k.hi : k.lo;
  return (word >> (8 * (b & 3))) & (G == 1 ? 0xffu : 0xffffu);
}

// ---- PutPackets: stage and notify in one store ----------------------------------------
// Whole 16-byte vectors a PutPackets moves (none from a source that is not 16-byte
// aligned), and the packets left after them.
__device__ __forceinline__ i64 put_vectors(const char* src, i64 nbytes) { return aligned(src, 16) ? nbytes / 16 : 0; }
__device__ __forceinline__ i64 put_tail_packets(const char* src, i64 nbytes) {
  return (nbytes - 16 * put_vectors(src, nbytes) + 7) / 8;
}

// Which put of a run holds item t, given where each put's items end (vend[0..m-1],
// rising): the count of ends at or below t, from independent loads (no walk of the run).
__device__ __forceinline__ int put_of(const i64* end, int m, i64 t) {
  int k = 0;
#pragma unroll
  for (int j = 0; j < PURLIN_PUT_RUN - 1; ++j) k += (j < m - 1) & (t >= end[j]);
  return k;
}

// A run of up to PURLIN_PUT_RUN consecutive PutPackets executed together, their 16-byte
// vectors spread over all the CTA's threads (vector t of the run: instruction k, vector
// j), U per thread loaded before the first store. One thread per vector of every
// instruction, rather than one thread walking all of them: a thread holding eight vectors
// made ptxas spill, and the run cost grew with its length (benchmarks/results/
// experiments-2026-11-29/, interp put1k). vend/tend: where each instruction's vectors and
// tail packets end in the run (a scan the caller made once), so no thread walks the run.
// dsts[i] is the physical address of instruction i's first packet.
template <bool GPU>
__device__ void cta_put_packets_run(const char* const* srcs, char* const* dsts, const i64* nbytes,
                                    const u32* tags, const i64* vend, const i64* tend, int m) {
  const int U = PURLIN_PUT_UN;   // (2 was slower: experiments-2026-11-29/)
  const i64 total = vend[m - 1];   // vectors in the run
  for (i64 t0 = threadIdx.x; t0 < total; t0 += (i64)U * blockDim.x) {
    V16 v[U];
    char* dst[U];
    u32 tag[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      i64 t = t0 + (i64)u * blockDim.x;
      dst[u] = nullptr;
      if (t < total) {
        const int k = put_of(vend, m, t);
        if (k) t -= vend[k - 1];
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
  // what no vector moved (a tail, or all of a source that is not 16-byte aligned): one
  // packet per thread, its payload read as words, or bytewise where the source allows
  // no words; a last packet carries fewer than 8 payload bytes
  const i64 tails = tend[m - 1];
  for (i64 t = threadIdx.x; t < tails; t += blockDim.x) {
    const int k = put_of(tend, m, t);
    const i64 p = k ? t - tend[k - 1] : t;
    const i64 b = 16 * (vend[k] - (k ? vend[k - 1] : 0)) + 8 * p;
    const char* s = srcs[k] + b;
    u32 word[2] = {0u, 0u};
    if (nbytes[k] - b >= 8 && aligned(s, 4)) {
      word[0] = ((const volatile u32*)s)[0];
      word[1] = ((const volatile u32*)s)[1];
    } else {
      for (int q = 0; q < 8 && b + q < nbytes[k]; ++q) word[q >> 2] |= ld_g<1>(s + q) << (8 * (q & 3));
    }
    st_packet<GPU>(dsts[k] + 2 * b, word[0], word[1], tags[k]);
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

