/* sdfgsparse: names DaCe 1.0.2's CUDA runtime headers use that CUDA 13 removed.
 *
 * Force-included in every CUDA source of a DaCe program by cuda13_rules.cmake
 * (see sdfgsparse/targets/cuda/compat.py). Inert below CUDA 13 and outside nvcc.
 *
 *  - dace/reduction.h (stridedIterator) uses cub::CountingInputIterator and
 *    cub::TransformInputIterator, removed in CUB 3 (CUDA 13); Thrust's
 *    counting_iterator / transform_iterator are their documented replacements
 *    (upstream DaCe PR 2255).
 *  - dace/cuda/multidim_gbar.cuh calls CTA_SYNC(), a CUB utility macro removed in
 *    CUB 3; it was __syncthreads() (upstream DaCe PR 2142).
 */
#ifndef SDFGSPARSE_CUDA_COMPAT_H
#define SDFGSPARSE_CUDA_COMPAT_H

#if defined(__CUDACC__) && defined(__CUDACC_VER_MAJOR__) && __CUDACC_VER_MAJOR__ >= 13
#include <cstddef>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

namespace cub {
/* cub::CountingInputIterator<ValueType, OffsetT>: *(it + i) == start + i */
template <typename ValueType, typename OffsetT = std::ptrdiff_t>
using CountingInputIterator = thrust::counting_iterator<ValueType>;

/* cub::TransformInputIterator<ValueType, ConversionOp, InputIteratorT, OffsetT>:
   *(it + i) == op(in[i]) as a ValueType (returned by value, like CUB's) */
template <typename ValueType, typename ConversionOp, typename InputIteratorT, typename OffsetT = std::ptrdiff_t>
using TransformInputIterator = thrust::transform_iterator<ConversionOp, InputIteratorT, ValueType, ValueType>;
}  // namespace cub

#ifndef CTA_SYNC
#define CTA_SYNC() __syncthreads()
#endif
#endif  /* CUDA >= 13 */

#endif  /* SDFGSPARSE_CUDA_COMPAT_H */
