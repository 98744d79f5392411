// Purlin Atoms, part 4: reduces (sources in the given order, fp32 or int32
// accumulation, one rounding). See atoms.cuh for how the sources are put together.
#include "copy.cuh"

// ---- reduce: sources in the given order, fp32 (int32) accumulation, one rounding -------
// tags[s] != 0 marks source s as a packet window.
// The op: the plain reduce loops and the spread sum take it as a template argument,
// picked once per instruction by with_op. A run-time switch per element compiled to a
// branch chain around every add: 974 instructions per iteration of the fp32 8-source
// loop (2233 for bf16), where the loads and adds need about 90. The packet-source loops
// and the narrow path keep the run-time switch (OP_RT): one copy of them, not four.
#define OP_RT (-1)
template <int N> struct OpC { enum { value = N }; };
template <class F>
__device__ __forceinline__ bool with_op(int op, F f) {
  switch (op) {
    case OP_ADD: return f(OpC<OP_ADD>());
    case OP_MAX: return f(OpC<OP_MAX>());
    case OP_MIN: return f(OpC<OP_MIN>());
    default: return f(OpC<OP_MUL>());
  }
}
template <typename A>
__device__ __forceinline__ A apply(int op, A x, A y) {
  switch (op) {
    case OP_ADD: return fop<OP_ADD>(x, y);
    case OP_MAX: return fop<OP_MAX>(x, y);
    case OP_MIN: return fop<OP_MIN>(x, y);
    default: return fop<OP_MUL>(x, y);
  }
}
// x op y, with the op fixed at compile time (OP >= 0) or read at run time (OP_RT)
template <int OP, typename A>
__device__ __forceinline__ A combine(int op, A x, A y) {
  if constexpr (OP == OP_RT) return apply(op, x, y);
  else return fop<OP>(x, y);
}

// The slots of a spread packet reduce: one 16-byte vector per thread, one allocation per
// kernel whatever the dtype.
__device__ __forceinline__ V16* spread_slots() {
  __shared__ V16 slots[PURLIN_THREADS];
  return slots;
}

// Thread i < nv sums vector i over nsrc sources held in the slots (source s at s * nv),
// in source order: the reduce loop's order and rounding.
template <int DT, int OP>
__device__ __forceinline__ bool spread_sum(const V16* slot, int nsrc, int op, char* const* dsts, int ndst, i64 nv) {
  typedef DTr<DT> T;
  typedef typename T::A A;
  const i64 t = threadIdx.x;
  if (t >= nv) return true;
  A acc[4 * T::EPW];
  for (int s = 0; s < nsrc; ++s) {
    const V16 v = slot[s * nv + t];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      A x[T::EPW];
      T::get(v.w[k], x);
#pragma unroll
      for (int e = 0; e < T::EPW; ++e)
        acc[k * T::EPW + e] = s == 0 ? x[e] : combine<OP>(op, acc[k * T::EPW + e], x[e]);
    }
  }
  V16 out;
#pragma unroll
  for (int k = 0; k < 4; ++k) out.w[k] = T::put(&acc[k * T::EPW]);
  for (int d = 0; d < ndst; ++d) stv(dsts[d] + 16 * t, out);
  return true;
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
  with_op(op, [&](auto o) {   // a short loop: four copies cost little code
    constexpr int OP = decltype(o)::value;
    switch (dt) {
      case DT_FP32: return spread_sum<DT_FP32, OP>(slot, nsrc, op, dsts, ndst, nv);
      case DT_FP16: return spread_sum<DT_FP16, OP>(slot, nsrc, op, dsts, ndst, nv);
      case DT_BF16: return spread_sum<DT_BF16, OP>(slot, nsrc, op, dsts, ndst, nv);
      default: return spread_sum<DT_INT32, OP>(slot, nsrc, op, dsts, ndst, nv);
    }
  });
  return ok;
}

// WIDE4: 4-byte words load PURLIN_REDUCE_B sources together, as vectors do (the unaligned
// kernel only: elsewhere one at a time, which keeps the other kernels from spilling).
// OP: the op at compile time, or OP_RT (read from op at run time).
template <int V, int DT, int OP, bool PKT, int BN = 0, bool WIDE4 = false>
__device__ PURLIN_ATOM_FN bool cta_reduce(const char* const* srcs, const u32* tags, int nsrc, int op,
                                        char* const* dsts, int ndst, i64 nbytes, const Watch& w) {
  typedef typename VecT<V>::T Vec;
  typedef DTr<DT> T;
  typedef typename T::A A;
  const int WORDS = V / 4;
  const int E = WORDS * T::EPW;              // elements per vector
  // sources loaded together, and vectors per thread (packet loads hold more registers)
  const int B = V == 4 && !WIDE4 ? 1 : BN ? BN : PKT ? PURLIN_PKT_BATCH : (V == 32 ? PURLIN_REDUCE_B / 2 : PURLIN_REDUCE_B);
  const int U = 1;   // 2 spills at 128 registers
  const i64 nv = nbytes / V;
  bool ok = true;
  for (i64 i = threadIdx.x; i < nv; i += (i64)blockDim.x * U) {
    A acc[U][E] = {};   // (read, and dropped, by the select that starts the sums)
    // One batch: sources s0 .. s0 + B - 1 loaded together, then combined into acc (the
    // first batch's source 0 starts it, by a select). On the plain paths the first batch
    // is a copy of its own (first a constant in each), so that no branch sits between a
    // batch's loads and its adds: with one, ptxas issued one or two loads, waited for
    // them, then issued the others (two memory round trips an iteration, not one).
    auto batch = [&](const int s0, const bool first) {
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
          if (b == 0 || s0 + b < nsrc) {   // source s0 exists: no guard, no branch
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
        if (b == 0 || s0 + b < nsrc) {
#pragma unroll
          for (int u = 0; u < U; ++u) {
#pragma unroll
            for (int k = 0; k < WORDS; ++k) {
              A x[T::EPW];
              T::get(v[b][u].w[k], x);
#pragma unroll
              for (int e = 0; e < T::EPW; ++e) {
                const A y = combine<OP>(op, acc[u][k * T::EPW + e], x[e]);
                acc[u][k * T::EPW + e] = (first && b == 0) ? x[e] : y;
              }
            }
          }
        }
      }
    };
    if (PKT) {
      for (int s0 = 0; s0 < nsrc; s0 += B) batch(s0, s0 == 0);
    } else {
      batch(0, true);
      for (int s0 = B; s0 < nsrc; s0 += B) batch(s0, false);
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
      for (int e = 0; e < T::EPW; ++e) acc[e] = s == 0 ? x[e] : combine<OP>(op, acc[e], x[e]);
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
        acc[0] = s == 0 ? x[0] : combine<OP>(op, acc[0], x[0]);
      }
      acc[1] = acc[0];
      u32 r = T::put(acc);
      for (int d = 0; d < ndst; ++d) *(unsigned short*)(dsts[d] + b) = (unsigned short)r;
    }
  }
  return ok;
}


// The narrow path of a reduce: 16-bit elements at odd element offsets (only fp16 and bf16
// get there: 32-bit elements are always 4-byte aligned), PURLIN_NARROW_UN elements in
// flight per thread and source (one for packet sources), sources in order. Out of line.
template <int DT, bool PKT>
__device__ __noinline__ bool cta_reduce_narrow(const char* const* srcs, const u32* tags, int nsrc, int op,
                                               char* const* dsts, int ndst, i64 nbytes, const Watch& w) {
  typedef DTr<DT> T;
  typedef typename T::A A;
  const int U = PKT ? 1 : PURLIN_NARROW_UN;
  const i64 ne = nbytes / 2;
  bool ok = true;
  for (i64 i = threadIdx.x; i < ne; i += (i64)blockDim.x * U) {
    A acc[U];
    for (int s = 0; s < nsrc; ++s) {
      u32 x[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const i64 j = i + u * (i64)blockDim.x;
        if (j < ne) x[u] = PKT && tags[s] ? ld_g_pkt<2>(srcs[s], 2 * j, tags[s], w, ok) : ld_g<2>(srcs[s] + 2 * j);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        A y[2];
        T::get(x[u], y);
        acc[u] = s == 0 ? y[0] : apply(op, acc[u], y[0]);
      }
    }
    for (int d = 0; d < ndst; ++d) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const i64 j = i + u * (i64)blockDim.x;
        A pair[2] = {acc[u], acc[u]};
        if (j < ne) st_g<2>(dsts[d] + 2 * j, T::put(pair));
      }
    }
  }
  return ok;
}
