// sdfgsparse: the storage checks of sparse arguments (targets/cpu/storage_check.py exports one
// instance per index type from every kernel library that takes a sparse structure; the warm
// call path calls them, runtime/fastcheck.py). 0: valid storage; 1: not; 2: not checked.
//
// check_compressed(pos, parent, crd, n, extent, ordered, unique): pos (parent + 1 entries, or
// NULL for one segment [0, n)) starts at 0, ends at n and never decreases; each of the n
// entries of crd lies in [0, extent); within a segment the entries increase (ordered;
// strictly when unique). check_range(crd, n, extent): the entries lie in [0, extent).
// check_runs(crd, n, extent, run): in range, and each run of `run` entries increasing strictly.
// Large checks run in parallel on the threads the machine can give now (sdfgsparse_load.h).
#ifndef SDFGSPARSE_STORAGE_CHECK_H
#define SDFGSPARSE_STORAGE_CHECK_H
#include <omp.h>
#include <cstdint>

#include "sdfgsparse_load.h"

namespace sdfgsparse {

// entries above which a check runs in parallel (below, one thread is faster): PARALLEL of
// storage_check.py
constexpr long long STORAGE_CHECK_PARALLEL = 1LL << 16;

// the unsigned type of an index, and the clamp of an extent: read as unsigned, a negative
// index is at least 2^(bits-1), above any valid one
template <typename T> struct index_traits;
template <> struct index_traits<int32_t> {
    using unsigned_type = uint32_t;
    static constexpr long long half = 1LL << 31;
};
template <> struct index_traits<int64_t> {
    using unsigned_type = uint64_t;
    static constexpr long long half = (long long)(~0ULL >> 1);
};

// Part t of nt of check_compressed: a block of entries and a block of segments. Entries:
// out-of-range ones, and "descents" (an entry not above its predecessor); the order holds
// iff every descent starts a segment. Sets bad; adds to diff the descents of the entries
// minus those at segment starts.
struct CheckPart {
    int bad;
    long long diff;
};

template <typename T>
static inline __attribute__((always_inline)) CheckPart check_compressed_part(
    const T* __restrict__ pos, long long parent, const T* __restrict__ crd, long long n,
    typename index_traits<T>::unsigned_type ext, int ordered, int unique, long long t, long long nt) {
    using U = typename index_traits<T>::unsigned_type;
    const long long pb = n * t / nt, pe = n * (t + 1) / nt;
    int b = 0;
    unsigned d = 0;
    if (ordered && unique) {
        #pragma omp simd reduction(|:b) reduction(+:d)
        for (long long p = pb > 0 ? pb : 1; p < pe; ++p) {
            b |= (U)crd[p] >= ext;
            d += crd[p] <= crd[p - 1];
        }
    } else if (ordered) {
        #pragma omp simd reduction(|:b) reduction(+:d)
        for (long long p = pb > 0 ? pb : 1; p < pe; ++p) {
            b |= (U)crd[p] >= ext;
            d += crd[p] < crd[p - 1];
        }
    } else {
        #pragma omp simd reduction(|:b)
        for (long long p = pb > 0 ? pb : 1; p < pe; ++p) b |= (U)crd[p] >= ext;
    }
    if (pb == 0 && pe > 0) b |= (U)crd[0] >= ext;
    long long dd = d;
    // Segments: positions never decrease and stay in [0, n] (the block's ends in range, no
    // decrease inside); then count the descents at segment starts (each start of a
    // non-empty segment once).
    if (pos) {
        const long long sb = parent * t / nt, se = parent * (t + 1) / nt;
        int m = pos[sb] < 0 || (long long)pos[se] > n;
        #pragma omp simd reduction(|:m)
        for (long long s = sb; s < se; ++s) m |= pos[s + 1] < pos[s];
        if (m) b = 1;
        else if (ordered) {
            for (long long s = sb; s < se; ++s) {
                const long long lo = pos[s];
                if (lo > 0 && lo < (long long)pos[s + 1])
                    dd -= unique ? crd[lo] <= crd[lo - 1] : crd[lo] < crd[lo - 1];
            }
        }
    }
    return CheckPart{b, dd};
}

template <typename T>
static inline int check_compressed(const T* pos, long long parent, const T* crd, long long n, long long extent,
                                   int ordered, int unique) {
    using U = typename index_traits<T>::unsigned_type;
    constexpr long long HALF = index_traits<T>::half;
    // per-thread counts are 32-bit (twice as fast in SIMD); larger levels answer "not checked"
    if (parent < 0 || n < 0 || extent < 0 || n >= (1LL << 32)) return 2;
    if (pos && (pos[0] != 0 || (long long)pos[parent] != n)) return 1;
    // read as unsigned, a negative index is at least 2^(bits-1), above any valid one
    const U ext = (U)(extent < HALF ? extent : HALF);
    int bad = 0;
    long long diff = 0;
    if (n + parent <= STORAGE_CHECK_PARALLEL) {
        // no parallel region: starting one (even of one thread) costs twice this check of
        // 500 entries
        const CheckPart c = check_compressed_part(pos, parent, crd, n, ext, ordered, unique, 0, 1);
        bad = c.bad;
        diff = c.diff;
    } else {
        #pragma omp parallel reduction(|:bad) reduction(+:diff) num_threads(machine_threads(omp_get_max_threads()))
        {
            const CheckPart c = check_compressed_part(pos, parent, crd, n, ext, ordered, unique, omp_get_thread_num(),
                                                      omp_get_num_threads());
            bad |= c.bad;
            diff += c.diff;
        }
    }
    return bad || diff != 0;
}

template <typename T>
static inline int check_range(const T* crd, long long n, long long extent) {
    using U = typename index_traits<T>::unsigned_type;
    constexpr long long HALF = index_traits<T>::half;
    if (n < 0 || extent < 0) return 1;
    const U ext = (U)(extent < HALF ? extent : HALF);
    int bad = 0;
    if (n <= STORAGE_CHECK_PARALLEL) {  // (no parallel region: see check_compressed)
        #pragma omp simd reduction(|:bad)
        for (long long p = 0; p < n; ++p) bad |= (U)crd[p] >= ext;
    } else {
        #pragma omp parallel for simd reduction(|:bad) schedule(static) \
            num_threads(machine_threads(omp_get_max_threads()))
        for (long long p = 0; p < n; ++p) bad |= (U)crd[p] >= ext;
    }
    return bad;
}

// check_runs(crd, n, extent, run): the entries lie in [0, extent) and each run of `run`
// consecutive entries increases strictly (the slots of an n:m group, a V:N:M table row)
template <typename T>
static inline int check_runs(const T* crd, long long n, long long extent, long long run) {
    using U = typename index_traits<T>::unsigned_type;
    constexpr long long HALF = index_traits<T>::half;
    if (n < 0 || extent < 0 || run < 1 || n % run) return 1;
    const U ext = (U)(extent < HALF ? extent : HALF);
    const long long groups = n / run;
    int bad = 0;
    #pragma omp parallel for reduction(|:bad) schedule(static) if (n > STORAGE_CHECK_PARALLEL) \
        num_threads(machine_threads(omp_get_max_threads()))
    for (long long g = 0; g < groups; ++g) {
        const T* c = crd + g * run;
        int b = (U)c[0] >= ext;
        for (long long s = 1; s < run; ++s) b |= ((U)c[s] >= ext) | (c[s] <= c[s - 1]);
        bad |= b;
    }
    return bad;
}

}  // namespace sdfgsparse

// The library's exports of the checks for index type T (targets/cpu/storage_check.py puts one
// use per index type in a program's global code): C functions the warm call finds by name.
#define SDFGSPARSE_STORAGE_CHECK_EXPORTS(SUFFIX, T)                                                           \
    DACE_EXPORTED int __ss_check_compressed_##SUFFIX(const T* pos, long long parent, const T* crd, long long n, \
                                                     long long extent, int ordered, int unique) {              \
        return sdfgsparse::check_compressed<T>(pos, parent, crd, n, extent, ordered, unique);                  \
    }                                                                                                          \
    DACE_EXPORTED int __ss_check_range_##SUFFIX(const T* crd, long long n, long long extent) {                  \
        return sdfgsparse::check_range<T>(crd, n, extent);                                                     \
    }                                                                                                          \
    DACE_EXPORTED int __ss_check_runs_##SUFFIX(const T* crd, long long n, long long extent, long long run) {    \
        return sdfgsparse::check_runs<T>(crd, n, extent, run);                                                 \
    }
#endif  // SDFGSPARSE_STORAGE_CHECK_H
