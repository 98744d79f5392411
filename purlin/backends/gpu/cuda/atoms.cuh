// Purlin Atoms, part 1: types, vectors, flags, time, element types and ops.
//
// Compiled by NVRTC once per GPU generation (see atomset.py), with no headers: the
// source NVRTC gets is a generated block of #defines (the encoding from encode.py, the
// kernel constants from purlin/snac/kernel_constants.py, the Atom set's PURLIN_VEC,
// PURLIN_THREADS, PURLIN_TMA, PURLIN_MIN_BLOCKS), then atoms.cuh, packets.cuh,
// copy.cuh, reduce.cuh and snac.cu, in that order. No number those Python modules state
// is repeated here.
// Every function works on one contiguous byte range for the whole CTA; the callers (the
// SNAC interpreter, benchmark kernels) decide which CTA gets which range.
//
// Data written by other CTAs of the same launch is read with plain (coherent) loads,
// never the read-only path: only kernel parameters are marked __restrict__.

typedef unsigned long long u64;
typedef long long i64;
typedef unsigned int u32;

// The big Atom loops are inlined into their callers: out of line, every call saved and
// restored registers through local memory, and the 8 KiB AllReduce went from 8.7 to
// 12.2 us on the H200 (benchmarks/results/experiments-2026-11-29/).
#define PURLIN_ATOM_FN __forceinline__

// ---- vectors -----------------------------------------------------------------------
struct __align__(4) V4 { u32 w[1]; };
struct __align__(16) V16 { u32 w[4]; };
struct __align__(32) V32 { u32 w[8]; };
template <int V> struct VecT;
template <> struct VecT<4> { typedef V4 T; };
template <> struct VecT<16> { typedef V16 T; };
template <> struct VecT<32> { typedef V32 T; };

// V4: the path for Refs that are 4- but not 16-byte aligned.
__device__ __forceinline__ void ldv(V4& r, const void* p) { r.w[0] = *(const volatile u32*)p; }
__device__ __forceinline__ void stv(void* p, const V4& r) { *(u32*)p = r.w[0]; }
__device__ __forceinline__ void ldv(V16& r, const void* p) {
  asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(r.w[0]), "=r"(r.w[1]), "=r"(r.w[2]), "=r"(r.w[3]) : "l"(p));
}
__device__ __forceinline__ void stv(void* p, const V16& r) {
  asm volatile("st.global.v4.u32 [%0], {%1,%2,%3,%4};"
               :: "l"(p), "r"(r.w[0]), "r"(r.w[1]), "r"(r.w[2]), "r"(r.w[3]) : "memory");
}
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

// The widest access a pointer allows: PURLIN_VEC, 16, 4, 2 or 1 bytes.
__device__ __forceinline__ bool aligned(const void* p, int v) { return ((u64)p & (v - 1)) == 0; }
__device__ __forceinline__ int align_class(const void* p) {
  return aligned(p, PURLIN_VEC) ? PURLIN_VEC : aligned(p, 16) ? 16 : aligned(p, 4) ? 4 : aligned(p, 2) ? 2 : 1;
}
// G-byte elements (G = 1 or 2) of the narrow path, in the low bits of a word.
template <int G> __device__ __forceinline__ u32 ld_g(const char* p) {
  return G == 1 ? (u32)*(const volatile unsigned char*)p : (u32)*(const volatile unsigned short*)p;
}
template <int G> __device__ __forceinline__ void st_g(char* p, u32 x) {
  if (G == 1) *(unsigned char*)p = (unsigned char)x;
  else *(unsigned short*)p = (unsigned short)x;
}

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

