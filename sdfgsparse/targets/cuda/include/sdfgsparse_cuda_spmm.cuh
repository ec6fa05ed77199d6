// sdfgsparse: the CUDA leaf of SpMM over a CSR walk, Y = A @ B (B and Y dense, rows contiguous).
//
// One thread per element of Y: thread (r, c) sums vals[p] * B[crd[p], c] over row r's entries.
// The kernel's map puts the columns on threadIdx.x (targets/cuda/spmm.py), so the threads of a
// warp hold one row and 32 consecutive columns: each step loads one entry (the same address for
// the whole warp: one transaction, broadcast) and 32 consecutive elements of a row of B (one
// coalesced transaction), where the generic walk's thread per row read B's rows 32 apart.
// Host/device code: lower.with_cpu_schedules runs the same SDFG on the CPU in tests.
#ifndef SDFGSPARSE_CUDA_SPMM_CUH
#define SDFGSPARSE_CUDA_SPMM_CUH
#include <cstdint>

#include "sdfgsparse_cuda.cuh"

namespace sdfgsparse {
namespace cuda {

// Y[r, c] = sum over row r's entries p of vals[p] * B[crd[p], c]; ldb, ldy: elements between rows
template <typename T, typename I>
SS_HD void spmm_row_col(long long r, long long c, const I* pos, const I* crd, const T* vals, const T* b,
                        long long ldb, T* y, long long ldy) {
    T s = 0;
    const long long hi = (long long)pos[r + 1];
    for (long long p = (long long)pos[r]; p < hi; ++p) s += vals[p] * b[(long long)crd[p] * ldb + c];
    y[r * ldy + c] = s;
}

}  // namespace cuda
}  // namespace sdfgsparse

#endif  // SDFGSPARSE_CUDA_SPMM_CUH
