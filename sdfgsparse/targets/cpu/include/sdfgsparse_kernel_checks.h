// sdfgsparse: the failure counter of the storage checks done inside kernels
// (targets/cpu/kernel_checks.py). A kernel that finds broken storage as it reads it counts
// here; the call plan reads the count through the export before and after the call and
// sends a call whose count moved down the full path, which raises the precise error.
#ifndef SDFGSPARSE_KERNEL_CHECKS_H
#define SDFGSPARSE_KERNEL_CHECKS_H
static unsigned long long __ss_kernel_check_failures = 0;
static inline void __ss_kernel_check_failed() {
    __atomic_fetch_add(&__ss_kernel_check_failures, 1ULL, __ATOMIC_RELAXED);
}
DACE_EXPORTED unsigned long long __ss_kernel_check_failure_count() {
    return __atomic_load_n(&__ss_kernel_check_failures, __ATOMIC_SEQ_CST);
}
#include <type_traits>

namespace sdfgsparse {

// The check of one row segment [lo, hi) of a compressed level, woven into the walk over its
// entries (targets/cpu/kernel_checks.py: RowCheck): the segment within [0, nnz], each index
// below extent and, with ORDER, increasing (1: never decreasing, 2: strictly). Whatever it
// finds, it reads only in range (a broken segment is walked as empty, a bad index as column
// 0) and reports a problem through __ss_kernel_check_failed. body(p, c) runs per entry with
// its position and its index (clamped). Read as unsigned, a negative index is at least
// 2^(bits-1), above any valid one, so one compare checks both ends.
template <int ORDER, typename I, typename F>
static inline __attribute__((always_inline)) void checked_row(const I* __restrict__ crd, long long lo,
                                                               long long hi, long long nnz, long long extent,
                                                               F&& body) {
    typedef typename std::make_unsigned<I>::type U;
    constexpr long long HALF = sizeof(I) == 4 ? (1LL << 31) : (long long)(~0ULL >> 1);
    const U ext = (U)(extent < HALF ? extent : HALF);
    int bad = lo < 0 || hi < lo || hi > nnz;
    if (bad) lo = hi = 0;
    if (ext == 0 && hi > lo) {
        bad = 1;
        hi = lo;
    }
    if (lo < hi) {
        int b = 0;
        {
            const U k = (U)crd[lo];
            b |= k >= ext;
            body(lo, k < ext ? k : 0);
        }
        for (long long p = lo + 1; p < hi; ++p) {
            const U k = (U)crd[p];
            b |= (k >= ext) | (ORDER == 2 ? crd[p] <= crd[p - 1] : ORDER == 1 ? crd[p] < crd[p - 1] : false);
            body(p, k < ext ? k : 0);
        }
        bad |= b;
    }
    if (bad) __ss_kernel_check_failed();
}

// The SpMV row sum over [lo, hi) (sdfgsparse_rows.h: spmv_row) with the row's check; V: the
// sum's type (a float32 matrix times a float64 vector sums in float64, as NumPy does).
template <typename V, int ORDER, typename I, typename TV, typename TX>
static inline __attribute__((always_inline)) V spmv_row_checked(const I* __restrict__ crd,
                                                                 const TV* __restrict__ vals,
                                                                 const TX* __restrict__ x, long long lo,
                                                                 long long hi, long long nnz, long long extent) {
    V acc = 0;
    checked_row<ORDER>(crd, lo, hi, nnz, extent, [&](long long p, typename std::make_unsigned<I>::type c) { acc += (V)vals[p] * (V)x[c]; });
    return acc;
}

}  // namespace sdfgsparse

#endif  // SDFGSPARSE_KERNEL_CHECKS_H
