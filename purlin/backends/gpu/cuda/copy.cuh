// Purlin Atoms, part 3: copies (vectors, 4-byte words, the narrow path, the bulk-copy
// engine). See atoms.cuh for how the sources are put together.
#include "packets.cuh"

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
template <int V, int SPLIT, int U, bool GUARD>
__device__ __forceinline__ void copy_step(const char* src, char* const* dsts, int ndst, i64 i, i64 nv) {
  typename VecT<V>::T v[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const i64 j = i + u * (i64)blockDim.x;
    if (GUARD && j >= nv) break;
    ldv_s<SPLIT>(v[u], src + j * V);
  }
  for (int d = 0; d < ndst; ++d) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const i64 j = i + u * (i64)blockDim.x;
      if (GUARD && j >= nv) break;
      stv_s<SPLIT>(dsts[d] + j * V, v[u]);
    }
  }
}

// UN: vectors in flight per thread (0: the default for V). SPLIT: see ldv_s.
template <int V, bool PKT, int UN = 0, int SPLIT = 0>
__device__ PURLIN_ATOM_FN bool cta_copy(const char* src, u32 tag, char* const* dsts, int ndst, i64 nbytes,
                         const Watch& w) {
  typedef typename VecT<V>::T Vec;
  const int U = UN ? UN : PKT ? 4 : (V == 32 ? PURLIN_COPY_UN / 2 : PURLIN_COPY_UN);   // vectors in flight per thread
  const i64 nv = nbytes / V;
  const i64 step = (i64)blockDim.x * U;
  bool ok = true;
  i64 i = threadIdx.x;
  for (; i + (U - 1) * (i64)blockDim.x < nv; i += step) {
    if (!PKT) {
      copy_step<V, SPLIT, U, false>(src, dsts, ndst, i, nv);
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
    copy_step<V, SPLIT, U, true>(src, dsts, ndst, i, nv);
    i += step;
  }
  for (; i < nv; i += blockDim.x) {
    Vec v;
    if (PKT) ok &= ld_packets<V>(v, src, i * V, tag, w);
    else ldv_s<SPLIT>(v, src + i * V);
    for (int d = 0; d < ndst; ++d) stv_s<SPLIT>(dsts[d] + i * V, v);
  }
  // tail: bytes past the last whole vector, 4 at a time, then the last 1 to 3 bytes
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
  if (done4 < nbytes && (i64)threadIdx.x < nbytes - done4) {
    const i64 b = done4 + threadIdx.x;
    const u32 x = PKT ? ld_g_pkt<1>(src, b, tag, w, ok) : ld_g<1>(src + b);
    for (int d = 0; d < ndst; ++d) st_g<1>(dsts[d] + b, x);
  }
  return ok;
}

// ---- the narrow path: a Ref only 1- or 2-byte aligned ----------------------------------
// (odd element offsets of 8- and 16-bit types) G-byte elements, PURLIN_NARROW_UN in
// flight per thread (one for packet sources, whose tag checks serialise anyway). Out of
// line: rare, and it keeps the interpreter's main paths as they are.
template <int G, bool PKT>
__device__ __noinline__ bool cta_copy_narrow(const char* src, u32 tag, char* const* dsts, int ndst, i64 nbytes,
                                             const Watch& w) {
  const int U = PKT ? 1 : PURLIN_NARROW_UN;
  const i64 ne = nbytes / G;
  bool ok = true;
  for (i64 i = threadIdx.x; i < ne; i += (i64)blockDim.x * U) {
    u32 x[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const i64 j = i + u * (i64)blockDim.x;
      if (j < ne) x[u] = PKT ? ld_g_pkt<G>(src, j * G, tag, w, ok) : ld_g<G>(src + j * G);
    }
    for (int d = 0; d < ndst; ++d) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const i64 j = i + u * (i64)blockDim.x;
        if (j < ne) st_g<G>(dsts[d] + j * G, x[u]);
      }
    }
  }
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
#else
struct Tma {};   // no bulk-copy engine before sm_90
#endif

