// sdfgsparse: the leaves of the cpu kernels of sparse tensors (ops/einsum.py,
// targets/cpu/expansions/einsum.py). Conventions as sdfgsparse_rows.h: values T, indices I
// (int32_t or int64_t), "ld*" elements between rows of a dense operand, restrict-qualified
// pointers (the kernels never alias them).
#ifndef SDFGSPARSE_TENSOR_H
#define SDFGSPARSE_TENSOR_H
#include <cstdint>

#include "sdfgsparse_rows.h"

namespace sdfgsparse {

// Columns of the rank dimension one pass over a slice accumulates (a stack buffer); a wider
// rank walks the slice once per block of columns.
constexpr long long MTTKRP_BLOCK = 128;

// MTTKRP of one root slice of a CSF tensor of rank 3 (levels i, j, k), the slice at root
// position p0: out[q] += sum over the slice's fibers (j) of B[j, q] * sum over the fiber's
// entries (k, v) of v * C[k, q], for q < r, with out the slice's row of the result (i =
// crd0[p0]). SPLATT's factorisation: B's row is multiplied once per fiber, not per entry, so a
// fiber of n entries costs n + 1 row operations instead of 2n; the columns run in a vector loop.
template <typename T, typename I>
SS_ROW_INLINE void mttkrp_csf3_slice(long long p0, const I* __restrict__ pos1, const I* __restrict__ crd1,
                                     const I* __restrict__ pos2, const I* __restrict__ crd2,
                                     const T* __restrict__ vals, const T* __restrict__ b, long long ldb,
                                     const T* __restrict__ c, long long ldc, T* __restrict__ out, long long r) {
    T acc[MTTKRP_BLOCK];
    for (long long q0 = 0; q0 < r; q0 += MTTKRP_BLOCK) {
        const long long w = r - q0 < MTTKRP_BLOCK ? r - q0 : MTTKRP_BLOCK;
        const long long f1 = (long long)pos1[p0 + 1];
        for (long long p1 = (long long)pos1[p0]; p1 < f1; ++p1) {
            for (long long q = 0; q < w; ++q) acc[q] = 0;
            const long long f2 = (long long)pos2[p1 + 1];
            for (long long p2 = (long long)pos2[p1]; p2 < f2; ++p2) {
                const T v = vals[p2];
                const T* __restrict__ ck = c + (long long)crd2[p2] * ldc + q0;
                for (long long q = 0; q < w; ++q) acc[q] += v * ck[q];
            }
            const T* __restrict__ bj = b + (long long)crd1[p1] * ldb + q0;
            for (long long q = 0; q < w; ++q) out[q0 + q] += acc[q] * bj[q];
        }
    }
}

}  // namespace sdfgsparse

#endif  // SDFGSPARSE_TENSOR_H
