// sdfgsparse: what the CUDA leaf headers share (include/sdfgsparse_cuda_*.cuh).
//
// SS_HD marks the leaves' functions: host and device code under nvcc (called from kernels, and
// from the host code of the CPU tests), plain static inline functions under a host compiler
// (the generated host file includes the headers too; a GPU SDFG run with CPU schedules calls
// the leaves there: lower.with_cpu_schedules).
#ifndef SDFGSPARSE_CUDA_CUH
#define SDFGSPARSE_CUDA_CUH
#include <cstdint>

#if defined(__CUDACC__)
#define SS_HD __host__ __device__ __forceinline__
#else
#define SS_HD static inline
#endif

namespace sdfgsparse {
namespace cuda {

// A tasklet's operand as a pointer, whether DaCe passed the array (a pointer) or one element
// by value (an array of one element: its memlet has volume 1)
template <typename T> SS_HD const T* ss_cuda_in(const T* p) { return p; }
template <typename T> SS_HD const T* ss_cuda_in(const T& v) { return &v; }

}  // namespace cuda
}  // namespace sdfgsparse
#endif  // SDFGSPARSE_CUDA_CUH
