// sdfgsparse: the CUDA leaf of SDDMM over a CSR walk, out[p] = S[p] * (X[r, :] . Y[:, c]) for each
// stored entry p = (r, c) of S (X dense M x K with unit column stride, Y dense with element (k, c)
// at y[k * syk + c * syc]: syc == 1 for a K x N right operand, syk == 1 for its N x K transpose).
//
// A warp per row: the kernel's map is (row, lane) with the 32 lanes on threadIdx.x
// (targets/cuda/sddmm.py), so the lanes of a warp share a row. For each of the row's entries
// lane l sums k = l, l + 32, ... (X's row read coalesced, and Y's row too where syk == 1), the
// 32 partial sums are reduced with shuffles and lane 0 writes the entry: the same tiling as
// SpMM's (dense columns across the warp), with K the reduced dimension.
// Host/device code: on the host (a GPU SDFG run with CPU schedules, lower.with_cpu_schedules)
// lane 0 computes the 32 lanes' partial sums and adds them in the shuffles' order, the other
// lanes return, so the CPU tests check the device's order of additions.
#ifndef SDFGSPARSE_CUDA_SDDMM_CUH
#define SDFGSPARSE_CUDA_SDDMM_CUH
#include <cstdint>

#include "sdfgsparse_cuda.cuh"

namespace sdfgsparse {
namespace cuda {

// lanes that share a row (the kernel's block is SDDMM_LANES x rows per block)
constexpr int SDDMM_LANES = 32;

// lane `lane`'s partial dot product of X's row (xr) and Y's column c: k = lane, lane + 32, ...
template <typename T>
SS_HD T sddmm_lane_dot(int lane, const T* xr, const T* yc, long long syk, long long k) {
    T s = 0;
    for (long long j = lane; j < k; j += SDDMM_LANES) s += xr[j] * yc[j * syk];
    return s;
}

// One lane of row r's warp (see the header's comment): out[p] for every entry p of row r.
template <typename T, typename I>
SS_HD void sddmm_row_lane(long long r, long long lane, const I* pos, const I* crd, const T* svals, const T* x,
                          long long ldx, const T* y, long long syk, long long syc, long long k, T* out) {
    const long long lo = (long long)pos[r], hi = (long long)pos[r + 1];
    const T* xr = x + r * ldx;
#if defined(__CUDA_ARCH__)
    for (long long p = lo; p < hi; ++p) {  // the same bounds for every lane: no divergence at the shuffles
        T s = sddmm_lane_dot(int(lane), xr, y + (long long)crd[p] * syc, syk, k);
        for (int off = SDDMM_LANES / 2; off > 0; off /= 2) s += __shfl_down_sync(0xffffffffu, s, off);
        if (lane == 0) out[p] = svals[p] * s;
    }
#else
    if (lane != 0) return;
    for (long long p = lo; p < hi; ++p) {
        T part[SDDMM_LANES];
        for (int l = 0; l < SDDMM_LANES; ++l) part[l] = sddmm_lane_dot(l, xr, y + (long long)crd[p] * syc, syk, k);
        for (int off = SDDMM_LANES / 2; off > 0; off /= 2)
            for (int l = 0; l < off; ++l) part[l] += part[l + off];
        out[p] = svals[p] * part[0];
    }
#endif
}

}  // namespace cuda
}  // namespace sdfgsparse

#endif  // SDFGSPARSE_CUDA_SDDMM_CUH
