// Host stand-ins for CUDA keywords and built-ins, so a host C++ compiler can parse the kernel
// source (test_cuda_parses.py; -fsyntax-only, so inline PTX is never assembled).
#define __global__
#define __device__
#define __host__
#define __shared__
#define __forceinline__ inline
#define __noinline__
#define __restrict__
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(a, b)
#define PURLIN_TMA 1
struct dim3_ { unsigned x, y, z; };
extern dim3_ threadIdx, blockIdx, blockDim, gridDim;
inline void __syncthreads() {}
inline void __threadfence() {}
template <class T> inline T __shfl_up_sync(unsigned, T v, unsigned) { return v; }
inline void __threadfence_system() {}
inline unsigned long long atomicAdd(unsigned long long*, unsigned long long) { return 0; }
inline unsigned long long atomicCAS(unsigned long long*, unsigned long long, unsigned long long) { return 0; }
inline unsigned long long atomicExch(unsigned long long*, unsigned long long) { return 0; }
inline int atomicMin(int*, int) { return 0; }
inline float __uint_as_float(unsigned) { return 0; }
inline unsigned __float_as_uint(float) { return 0; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float fmaxf(float a, float b) { return a > b ? a : b; }
inline float fminf(float a, float b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline int min(int a, int b) { return a < b ? a : b; }
inline unsigned long __cvta_generic_to_shared(const void*) { return 0; }
#define __grid_constant__
