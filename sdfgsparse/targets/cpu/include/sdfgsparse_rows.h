// sdfgsparse: the row leaves of the cpu kernels. Each function is one row (or one entry, one
// block of rows) of a sparse or dense product; the kernels' loop nests, built in Python
// (targets/cpu/), call them from one-line C++ tasklets (targets/cpu/dense_loops.py), so that
// the C++ lives here, readable and compiled on its own (tests/targets/test_cpu_headers.py).
//
// Conventions: values T, indices I (int32_t or int64_t); "lo, hi" bound the stored entries of
// one row; "ld*" are elements between rows of a dense operand; pointers are restrict-qualified
// (the kernels never alias them). Every function is forced inline: a call per row or per entry
// must cost what the tasklet's own loop cost. C++14 (DaCe's flags): no if constexpr.
#ifndef SDFGSPARSE_ROWS_H
#define SDFGSPARSE_ROWS_H
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "sdfgsparse_cpu.h"

#define SS_ROW_INLINE static inline __attribute__((always_inline))

namespace sdfgsparse {

// A GCC/Clang vector of N bytes of T, aligned like one T (any address can be read).
template <typename T, int N> struct vec_of {
    typedef T type __attribute__((vector_size(N), aligned(sizeof(T))));
};
// The integer lanes of a mask as wide as T (the value types have 4 or 8 bytes).
template <typename T> struct mask_lane {
    typedef typename std::conditional<sizeof(T) == 8, long long, int>::type type;
};

// An address carried in an int64 scalar (transposed_rows) as a pointer to T.
template <typename T> SS_ROW_INLINE const T* address(long long a) { return (const T*)(uintptr_t)a; }

// y[0:k] += a * b[j * ldb + 0:k]
template <typename T, typename A>
SS_ROW_INLINE void axpy_row(T* __restrict__ y, const T* __restrict__ b, long long j, long long ldb, A a, long k) {
    const T* __restrict__ br = b + j * ldb;
    _Pragma("omp simd") for (long c = 0; c < k; ++c) y[c] += a * br[c];
}

// y[i * ldy + c0:c1] += a * b[j * ldb + c0:c1], i data-dependent (a scatter): concurrent callers
// must touch disjoint columns
template <typename T, typename A>
SS_ROW_INLINE void axpy_tile(T* __restrict__ y, long long i, long long ldy, const T* __restrict__ b, long long j,
                             long long ldb, A a, long c0, long c1) {
    T* __restrict__ yr = y + i * ldy;
    const T* __restrict__ br = b + j * ldb;
    _Pragma("omp simd") for (long c = c0; c < c1; ++c) yr[c] += a * br[c];
}

// dot(x[i * ldx + 0:k], y[j * ldy + 0:k]) as one SIMD reduction
template <typename T>
SS_ROW_INLINE T dot_rows(const T* __restrict__ x, long long i, long long ldx, const T* __restrict__ y, long long j,
                         long long ldy, long k) {
    const T* __restrict__ xr = x + i * ldx;
    const T* __restrict__ yr = y + j * ldy;
    T s = 0;
    _Pragma("omp simd reduction(+:s)") for (long c = 0; c < k; ++c) s += xr[c] * yr[c];
    return s;
}

// src.T (src: rows x cols, ld elements between rows) stored by contiguous rows in a buffer of
// the calling thread, returned as an address for dot_rows / sddmm_row. The buffer only grows
// (to the largest rows * cols seen): a fresh allocation of that size per call costs a page
// fault per 4 KiB once above malloc's mmap threshold. The copy runs in parallel over the rows
// of src.T; one such row reads a column of src, whose cache lines the next rows reuse.
// One buffer per thread and element type serves every call site of a program: the address is
// valid until that thread's next call (each SDDMM transposes and then walks before the next
// node's code runs on the thread), never across two live transposes.
template <typename T> SS_ROW_INLINE long long transposed_rows(const T* __restrict__ src, long long rows,
                                                              long long cols, long long ld) {
    static thread_local std::vector<T> buf;
    if ((long long)buf.size() < rows * cols) buf.resize(rows * cols);
    T* __restrict__ out = buf.data();
    _Pragma("omp parallel for schedule(static) if(rows * cols > 65536)")
    for (long long c = 0; c < cols; ++c)
        for (long long r = 0; r < rows; ++r) out[c * rows + r] = src[r * ld + c];
    return (long long)(uintptr_t)out;
}

// y[0:k] = sum over the entries p in [lo, hi) of vals[p] * b[crd[p] * ldb + 0:k], written once
// (no zero fill, no load and store of y per entry). A panel of NV vectors of the row's columns
// stays in registers over all of its entries: PANEL vectors at a time, then two, one, and the
// columns short of a vector in one scalar pass over the entries. Panels of at most two vectors
// keep two sets of accumulators (even and odd entries) so that consecutive entries' FMAs do not
// wait on each other. The vectors are as wide as the target's registers (SS_VECTOR_BYTES): a
// wider vector is split by GCC, which then keeps the accumulators on the stack; arrays in omp
// simd loops were spilled by GCC 12 as well. (The panel is a lambda over the row's locals, as
// the tasklet had it: the same machine code.)
template <int PANEL, typename T, typename I>
SS_ROW_INLINE void spmm_row(T* __restrict__ y, const T* __restrict__ b, long long ldb, const I* __restrict__ crd,
                            const T* __restrict__ vals, long long lo, long long hi, long k) {
    typedef typename vec_of<T, SS_VECTOR_BYTES>::type V;
    constexpr long L = SS_VECTOR_BYTES / sizeof(T);
    auto panel = [&](long c0, auto vectors) {
        constexpr int NV = decltype(vectors)::value;
        constexpr int S = NV <= 2 ? 2 : 1;
        V acc[S][NV];
        for (int h = 0; h < S; ++h)
            for (int u = 0; u < NV; ++u) acc[h][u] = V{};
        long long p = lo;
        for (; p + S <= hi; p += S)
            for (int h = 0; h < S; ++h) {
                const T a = vals[p + h];
                const V* br = (const V*)(b + (long long)crd[p + h] * ldb + c0);
                for (int u = 0; u < NV; ++u) acc[h][u] += a * br[u];
            }
        for (; p < hi; ++p) {
            const T a = vals[p];
            const V* br = (const V*)(b + (long long)crd[p] * ldb + c0);
            for (int u = 0; u < NV; ++u) acc[0][u] += a * br[u];
        }
        V* yv = (V*)(y + c0);
        for (int u = 0; u < NV; ++u) yv[u] = S == 2 ? acc[0][u] + acc[S - 1][u] : acc[0][u];
    };
    long c0 = 0;
    for (; c0 + PANEL * L <= k; c0 += PANEL * L) panel(c0, std::integral_constant<int, PANEL>());
    if (c0 + 2 * L <= k) {
        panel(c0, std::integral_constant<int, 2>());
        c0 += 2 * L;
    }
    for (; c0 + L <= k; c0 += L) panel(c0, std::integral_constant<int, 1>());
    if (c0 < k) {  // fewer columns than a vector: one pass over the entries for all of them
        const long r = k - c0;
        T acc[L] = {};
        for (long long p = lo; p < hi; ++p) {
            const T a = vals[p];
            const T* br = b + (long long)crd[p] * ldb + c0;
            for (long j = 0; j < r; ++j) acc[j] += a * br[j];
        }
        for (long j = 0; j < r; ++j) y[c0 + j] = acc[j];
    }
}

// sum over the entries p in [lo, hi) of vals[p] * x[crd[p]], one entry per step
template <typename T, typename I>
SS_ROW_INLINE T spmv_row(const I* __restrict__ crd, const T* __restrict__ vals, const T* __restrict__ x,
                         long long lo, long long hi) {
    T acc = 0;
    for (long long p = lo; p < hi; ++p) acc += vals[p] * x[crd[p]];
    return acc;
}

template <int W, typename T, typename I>
SS_ROW_INLINE T spmv_row_chunks(const I* __restrict__ crd, const T* __restrict__ vals, const T* __restrict__ x,
                                long long lo, long long hi, long long end, std::false_type /* registers too narrow */) {
    return spmv_row(crd, vals, x, lo, hi);
}

// The vector {x[crd[0]], ..., x[crd[W - 1]]} and {0, 1, ..., W - 1}, written as one initializer
// each (lanes assigned one by one in a loop went through the stack with AVX2: SpMV 30 % slower)
template <typename V, typename T, typename I, std::size_t... K>
SS_ROW_INLINE V gather(const T* __restrict__ x, const I* __restrict__ crd, std::index_sequence<K...>) {
    return V{x[crd[K]]...};
}
template <typename Mv, typename M, std::size_t... K> SS_ROW_INLINE Mv iota(std::index_sequence<K...>) {
    return Mv{(M)K...};
}

template <int W, typename T, typename I>
SS_ROW_INLINE T spmv_row_chunks(const I* __restrict__ crd, const T* __restrict__ vals, const T* __restrict__ x,
                                long long lo, long long hi, long long end, std::true_type) {
    typedef typename vec_of<T, W * sizeof(T)>::type V;
    typedef typename mask_lane<T>::type M;
    typedef M Mv __attribute__((vector_size(W * sizeof(T))));
    const Mv lanes = iota<Mv, M>(std::make_index_sequence<W>());
    V a = V{};
    long long p = lo;
    for (; p < hi && p + W <= end; p += W) {
        // the chunk's values read through the vector type: a memcpy into a vector variable went
        // through the stack where GCC splits unaligned 32-byte loads (-march=x86-64-v3)
        const V w = *(const V*)(vals + p);
        const V g = gather<V>(x, crd + p, std::make_index_sequence<W>());
        a += (lanes < (M)(hi - p)) ? w * g : V{};
    }
    T acc = 0;
    for (int k = 0; k < W; ++k) acc += a[k];
    for (; p < hi; ++p) acc += vals[p] * x[crd[p]];
    return acc;
}

// sum over the entries p in [lo, hi) of vals[p] * x[crd[p]], W entries at a time: each chunk a
// vector of values times a vector of x gathered by W loads, the lanes past the row's end zeroed
// by a vector compare, so the loop tests the row's end once per chunk. The masked lanes read
// the next rows' entries (whose columns are valid indices of x); a chunk that would pass end
// (the end of the last row, not the arrays' capacity) is left to the scalar loop. Where the
// target's registers are narrower than a chunk (SSE), one entry per step (chunks cost 2-3x).
template <int W, typename T, typename I>
SS_ROW_INLINE T spmv_row_chunks(const I* __restrict__ crd, const T* __restrict__ vals, const T* __restrict__ x,
                                long long lo, long long hi, long long end) {
    return spmv_row_chunks<W>(crd, vals, x, lo, hi, end,
                              std::integral_constant < bool, W >= 2 && SS_VECTOR_BYTES >= W * (int)sizeof(T) > ());
}

// Whether the rows look regular (1) or not (0): in a sample of SAMPLE rows spread over the m
// rows, at least half are as long as the row before them, and rows hold at most MAX_MEAN
// entries on average. Such rows (bands, meshes of one degree) run faster one entry at a time
// (the loop's end is predicted; chunks would compute padding lanes); irregular or long rows
// in chunks. O(1): reads 3 * SAMPLE row pointers.
template <int SAMPLE, int MAX_MEAN, typename I>
SS_ROW_INLINE long long regular_rows(const I* __restrict__ pos, long long m) {
    long long same = 0, seen = 0;
    if (m >= 3)
        for (long long s = 0; s < SAMPLE; ++s) {
            const long long r = 1 + (m - 2) * s / (SAMPLE - 1);
            ++seen;
            same += (pos[r + 1] - pos[r]) == (pos[r] - pos[r - 1]);
        }
    return (seen > 0 && 2 * same >= seen && (long long)(pos[m] - pos[0]) <= (long long)MAX_MEAN * m) ? 1 : 0;
}

// One row of SDDMM: for the entries p in [lo, hi), out[p] = vals[p] * dot(x[0:k], y[crd[p] *
// ldy + 0:k]) and out_crd[p] = crd[p] (the result shares the operand's pattern). The dot
// products of GROUP entries are computed together over register-wide vectors: each piece of
// the x row is loaded once per group and feeds one accumulator per entry; the columns short of
// a vector are added in scalar. (The group step is a lambda over the row's locals, as the
// tasklet had it: a function of its own compiled 15 % slower with AVX2.)
template <int GROUP, typename T, typename I, typename IO>
SS_ROW_INLINE void sddmm_row(T* __restrict__ out, IO* __restrict__ out_crd, const T* __restrict__ x,
                             const T* __restrict__ y, long long ldy, const I* __restrict__ crd,
                             const T* __restrict__ vals, long long lo, long long hi, long k) {
    typedef typename vec_of<T, SS_VECTOR_BYTES>::type V;
    constexpr long L = SS_VECTOR_BYTES / sizeof(T);
    const long nv = k / L, t = nv * L;
    auto dots = [&](long long p, auto group) {
        constexpr int H = decltype(group)::value;
        const T* r[H];
        for (int h = 0; h < H; ++h) r[h] = y + (long long)crd[p + h] * ldy;
        V a[H];
        for (int h = 0; h < H; ++h) a[h] = V{};
        for (long u = 0; u < nv; ++u) {
            const V xv = *(const V*)(x + u * L);
            for (int h = 0; h < H; ++h) a[h] += xv * *(const V*)(r[h] + u * L);
        }
        for (int h = 0; h < H; ++h) {
            T s = 0;
            for (long l = 0; l < L; ++l) s += a[h][l];
            for (long c = t; c < k; ++c) s += x[c] * r[h][c];
            out[p + h] = vals[p + h] * s;
            out_crd[p + h] = crd[p + h];
        }
    };
    long long p = lo;
    for (; p + GROUP <= hi; p += GROUP) dots(p, std::integral_constant<int, GROUP>());
    for (; p < hi; ++p) dots(p, std::integral_constant<int, 1>());
}

// Rows ROWS * ib ... (at most ROWS; fewer at the end) of the dense product c = a @ b (m x k
// times k x n, rows contiguous): register blocks of ROWS rows by four vectors, a column panel
// at a time, the panel's accumulators held in registers over the whole k loop, so that every
// loaded piece of b feeds ROWS FMAs and c is written once; narrower panels (one vector) for the
// remaining columns, the last partial vector masked; trailing rows in one-row blocks. c is
// passed whole; blocks write disjoint rows. (Panels and row blocks are lambdas over the
// block's locals, as the tasklet had them: the same machine code.)
template <long ROWS, typename T>
SS_ROW_INLINE void gemm_row_block(T* c_, const T* a_, const T* b_, long long ib, long m, long k, long n, long lda,
                                  long ldb, long ldc) {
    constexpr long V = SS_VECTOR_BYTES / sizeof(T);
    const T* __restrict__ a = a_;
    const T* __restrict__ b = b_;
    T* __restrict__ c = c_;
    auto panel = [&](long r0, long c0, auto rows, auto width, auto masked, long rem) {
        constexpr long R = decltype(rows)::value;
        constexpr long W = decltype(width)::value;
        constexpr bool MASK = decltype(masked)::value;
        T acc[R][W];
        for (long r = 0; r < R; ++r) {
            _Pragma("omp simd") for (long j = 0; j < W; ++j) acc[r][j] = 0;
        }
        for (long q = 0; q < k; ++q) {
            const T* __restrict__ br = b + q * ldb + c0;
            for (long r = 0; r < R; ++r) {
                const T av = a[(r0 + r) * lda + q];
                if (MASK) {
                    _Pragma("omp simd") for (long j = 0; j < W; ++j) acc[r][j] += av * (j < rem ? br[j] : T(0));
                } else {
                    _Pragma("omp simd") for (long j = 0; j < W; ++j) acc[r][j] += av * br[j];
                }
            }
        }
        for (long r = 0; r < R; ++r) {
            T* __restrict__ cr = c + (r0 + r) * ldc + c0;
            if (MASK) {
                for (long j = 0; j < W; ++j)
                    if (j < rem) cr[j] = acc[r][j];
            } else {
                _Pragma("omp simd") for (long j = 0; j < W; ++j) cr[j] = acc[r][j];
            }
        }
    };
    auto rows = [&](long r0, auto count) {
        long c0 = 0;
        for (; c0 + 4 * V <= n; c0 += 4 * V)
            panel(r0, c0, count, std::integral_constant<long, 4 * V>(), std::false_type(), 0);
        for (; c0 + V <= n; c0 += V) panel(r0, c0, count, std::integral_constant<long, V>(), std::false_type(), 0);
        if (c0 < n) panel(r0, c0, count, std::integral_constant<long, V>(), std::true_type(), n - c0);
    };
    const long i0 = ib * ROWS;
    if (i0 + ROWS <= m) {
        rows(i0, std::integral_constant<long, ROWS>());
    } else {
        for (long r = i0; r < m; ++r) rows(r, std::integral_constant<long, 1>());
    }
}

}  // namespace sdfgsparse

#endif  // SDFGSPARSE_ROWS_H
