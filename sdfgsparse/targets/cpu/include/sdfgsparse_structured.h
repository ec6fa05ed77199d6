// sdfgsparse: the row leaves of the structured layouts (ss.NM, ss.GNM, ss.VNM; formats/structured.py).
//
// A structured row has G groups of N slots, every slot stored (zeros where a group has fewer
// entries): no row pointers, a fixed trip count per group, so the slot loop unrolls and the
// dense rows it reads are known a group ahead. The slot (g, s) of a row has its value at
// vals[g * N + s] and the column g * M + off[g * N + s] (n:m), or g * M + sel[g * 4 + off[g * N + s]]
// (V:N:M: the slot picks one of the 4 columns its block of rows keeps in group g). GNM stores
// the R rows of a row block side by side: the slot (g, s) of row r at vals[(g * N + s) * R + r],
// one offset per slot for the R rows, so one read of b's row serves R rows (register blocking,
// as a dense GEMM does). Conventions as in sdfgsparse_rows.h (C++14, restrict, forced inline).
#ifndef SDFGSPARSE_STRUCTURED_H
#define SDFGSPARSE_STRUCTURED_H
#include <type_traits>

#include "sdfgsparse_rows.h"

namespace sdfgsparse {

template <bool TABLE, typename I>
SS_ROW_INLINE long long structured_col(const I* __restrict__ off, const I* __restrict__ sel, long long g, long long p,
                                       long long M) {
    return g * M + (long long)(TABLE ? sel[g * 4 + off[p]] : off[p]);
}

// R rows (rows `stride` slots apart in off and vals, ldy apart in y) of y = A @ b, sharing `sel`
// (V:N:M: R divides v): y[r, 0:k] = sum over row r's slots of vals[p] * b[col(p), 0:k]. The groups
// run outermost, the R rows inside: a group's window of M rows of b, read by every row, stays in
// L1 for the R rows (each row alone streamed its slots' rows of b from L2 / L3: 2:4 SpMM 1.3-1.8x
// slower). PANEL vectors of each row of y in registers; one row keeps one chain per slot.
template <int R, int PANEL, int N, bool TABLE, typename T, typename I>
SS_ROW_INLINE void structured_spmm_rows(T* __restrict__ y, long long ldy, const T* __restrict__ b, long long ldb,
                                        const I* __restrict__ off, const I* __restrict__ sel,
                                        const T* __restrict__ vals, long long stride, long long G, long long M,
                                        long k) {
    typedef typename vec_of<T, SS_VECTOR_BYTES>::type V;
    constexpr long L = SS_VECTOR_BYTES / sizeof(T);
    constexpr int S = R == 1 ? N : 1;  // independent chains per row
    auto panel = [&](long c0, auto vectors) {
        constexpr int NV = decltype(vectors)::value;
        V acc[R][S][NV];
        for (int r = 0; r < R; ++r)
            for (int h = 0; h < S; ++h)
                for (int u = 0; u < NV; ++u) acc[r][h][u] = V{};
        for (long long g = 0; g < G; ++g)
            for (int r = 0; r < R; ++r)
                for (int s = 0; s < N; ++s) {
                    const long long p = r * stride + g * N + s;
                    const T a = vals[p];
                    const V* br = (const V*)(b + structured_col<TABLE>(off + r * stride, sel, g, g * N + s, M) * ldb +
                                             c0);
                    for (int u = 0; u < NV; ++u) acc[r][S == 1 ? 0 : s][u] += a * br[u];
                }
        for (int r = 0; r < R; ++r) {
            V* yv = (V*)(y + r * ldy + c0);
            for (int u = 0; u < NV; ++u) {
                V t = acc[r][0][u];
                for (int h = 1; h < S; ++h) t += acc[r][h][u];
                yv[u] = t;
            }
        }
    };
    long c0 = 0;
    for (; c0 + PANEL * L <= k; c0 += PANEL * L) panel(c0, std::integral_constant<int, PANEL>());
    if (PANEL > 2 && c0 + 2 * L <= k) {
        panel(c0, std::integral_constant<int, 2>());
        c0 += 2 * L;
    }
    for (; c0 + L <= k; c0 += L) panel(c0, std::integral_constant<int, 1>());
    for (; c0 < k; ++c0)  // fewer columns than a vector
        for (int r = 0; r < R; ++r) {
            T acc = 0;
            for (long long g = 0; g < G; ++g)
                for (int s = 0; s < N; ++s) {
                    const long long p = r * stride + g * N + s;
                    acc += vals[p] * b[structured_col<TABLE>(off + r * stride, sel, g, g * N + s, M) * ldb + c0];
                }
            y[r * ldy + c0] = acc;
        }
}

// y = sum over the row's slots of vals[p] * x[col(p)]
template <int N, bool TABLE, typename T, typename I, typename X>
SS_ROW_INLINE T structured_spmv_row(const I* __restrict__ off, const I* __restrict__ sel, const T* __restrict__ vals,
                                    const X* __restrict__ x, long long G, long long M) {
    T acc[N] = {};
    for (long long g = 0; g < G; ++g)
        for (int s = 0; s < N; ++s) {
            const long long p = g * N + s;
            acc[s] += vals[p] * x[structured_col<TABLE>(off, sel, g, p, M)];
        }
    T t = acc[0];
    for (int s = 1; s < N; ++s) t += acc[s];
    return t;
}

// The R rows of a GNM row block: y[r, 0:k] = sum over slots of vals[p * R + r] * b[col(p), 0:k]
// (rows ldy apart). Each vector of b's row is read once for the R rows.
template <int R, int N, typename T, typename I>
SS_ROW_INLINE void grouped_spmm_block(T* __restrict__ y, long long ldy, const T* __restrict__ b, long long ldb,
                                      const I* __restrict__ off, const T* __restrict__ vals, long long G,
                                      long long M, long k) {
    typedef typename vec_of<T, SS_VECTOR_BYTES>::type V;
    constexpr long L = SS_VECTOR_BYTES / sizeof(T);
    // accumulators: R rows x NV vectors within 16 of the 32 (AVX-512) or 16 (AVX2) registers
    constexpr int NV = R >= 16 ? 1 : 16 / R > 4 ? 4 : 16 / R;
    long c0 = 0;
    for (; c0 + NV * L <= k; c0 += NV * L) {
        V acc[R][NV];
        for (int r = 0; r < R; ++r)
            for (int u = 0; u < NV; ++u) acc[r][u] = V{};
        for (long long g = 0; g < G; ++g)
            for (int s = 0; s < N; ++s) {
                const long long p = g * N + s;
                const V* br = (const V*)(b + (g * M + (long long)off[p]) * ldb + c0);
                V bv[NV];
                for (int u = 0; u < NV; ++u) bv[u] = br[u];
                const T* a = vals + p * R;
                for (int r = 0; r < R; ++r)
                    for (int u = 0; u < NV; ++u) acc[r][u] += a[r] * bv[u];
            }
        for (int r = 0; r < R; ++r) {
            V* yv = (V*)(y + r * ldy + c0);
            for (int u = 0; u < NV; ++u) yv[u] = acc[r][u];
        }
    }
    for (; c0 < k; ++c0) {  // the columns beyond the last full panel
        T acc[R] = {};
        for (long long g = 0; g < G; ++g)
            for (int s = 0; s < N; ++s) {
                const long long p = g * N + s;
                const T bj = b[(g * M + (long long)off[p]) * ldb + c0];
                for (int r = 0; r < R; ++r) acc[r] += vals[p * R + r] * bj;
            }
        for (int r = 0; r < R; ++r) y[r * ldy + c0] = acc[r];
    }
}

// The sum of a vector's lanes as a tree: the halves added as vectors of half the width, down
// to two lanes (log2 L dependent adds; a lane-by-lane sum is L dependent adds, which made the
// SDDMM below 1.6x slower at AVX-512)
template <typename T, int BYTES> struct lanes_sum_of {
    typedef typename vec_of<T, BYTES>::type V;
    typedef typename vec_of<T, BYTES / 2>::type H;
    static inline __attribute__((always_inline)) T run(const V& v) {
        H lo, hi;
        __builtin_memcpy(&lo, &v, BYTES / 2);
        __builtin_memcpy(&hi, (const char*)&v + BYTES / 2, BYTES / 2);
        return lanes_sum_of<T, BYTES / 2>::run(lo + hi);
    }
};
template <typename T> struct lanes_sum_of<T, 2 * sizeof(T)> {
    typedef typename vec_of<T, 2 * sizeof(T)>::type V;
    static inline __attribute__((always_inline)) T run(const V& v) { return v[0] + v[1]; }
};

// SDDMM of the R rows of one structured row block (R = 1 but for GNM): for each slot p and
// row r, out[p * R + r] = vals[p * R + r] * dot(x[r * ldx + 0:k], y[col(p) * ldy + 0:k]); the
// dot products of GROUP slots at a time share each vector of x (as sddmm_row's).
template <int GROUP, int R, int N, bool TABLE, typename T, typename I>
SS_ROW_INLINE void structured_sddmm_rows(T* __restrict__ out, const T* __restrict__ x, long long ldx,
                                         const T* __restrict__ y, long long ldy, const I* __restrict__ off,
                                         const I* __restrict__ sel, const T* __restrict__ vals, long long G,
                                         long long M, long k) {
    typedef typename vec_of<T, SS_VECTOR_BYTES>::type V;
    constexpr long L = SS_VECTOR_BYTES / sizeof(T);
    const long nv = k / L, t = nv * L;
    const long long slots = G * N;
    auto dots = [&](long long p, int r, auto group) {
        constexpr int H = decltype(group)::value;
        const T* xr = x + r * ldx;
        const T* yr[H];
        for (int h = 0; h < H; ++h) yr[h] = y + structured_col<TABLE>(off, sel, (p + h) / N, p + h, M) * ldy;
        V a[H];
        for (int h = 0; h < H; ++h) a[h] = V{};
        for (long u = 0; u < nv; ++u) {
            const V xv = *(const V*)(xr + u * L);
            for (int h = 0; h < H; ++h) a[h] += xv * *(const V*)(yr[h] + u * L);
        }
        for (int h = 0; h < H; ++h) {
            T s = lanes_sum_of<T, SS_VECTOR_BYTES>::run(a[h]);
            for (long c = t; c < k; ++c) s += xr[c] * yr[h][c];
            out[(p + h) * R + r] = vals[(p + h) * R + r] * s;
        }
    };
    for (int r = 0; r < R; ++r) {
        long long p = 0;
        for (; p + GROUP <= slots; p += GROUP) dots(p, r, std::integral_constant<int, GROUP>());
        for (; p < slots; ++p) dots(p, r, std::integral_constant<int, 1>());
    }
}

// Columns [k0, k1) of y = A.T @ b (y: A's columns x k, b: A's rows x k) for a structured A of
// `rows` rows (GNM: R > 1, rows of a block side by side): row by row, the row's part of b in
// registers, added into the rows of y its slots name. Different column ranges never meet, so
// the ranges run in parallel; y's range is zeroed first.
template <int R, int N, bool TABLE, typename T, typename I>
SS_ROW_INLINE void structured_spmm_t(T* __restrict__ y, long long ldy, const T* __restrict__ b, long long ldb,
                                     const I* __restrict__ off, const I* __restrict__ sel, long long table_rows,
                                     const T* __restrict__ vals, long long rows, long long G, long long M, long k0,
                                     long k1) {
    typedef typename vec_of<T, SS_VECTOR_BYTES>::type V;
    constexpr long L = SS_VECTOR_BYTES / sizeof(T);
    const long long cols = G * M;
    for (long long j = 0; j < cols; ++j)
        for (long c = k0; c < k1; ++c) y[j * ldy + c] = 0;
    const long long blocks = rows / R;
    const long long per = G * N;  // slots per row (GNM: per row block)
    long c0 = k0;
    for (; c0 + 2 * L <= k1; c0 += 2 * L) {
        for (long long i = 0; i < blocks; ++i) {
            V bv[R][2];
            for (int r = 0; r < R; ++r) {
                const V* br = (const V*)(b + (i * R + r) * ldb + c0);
                bv[r][0] = br[0];
                bv[r][1] = br[1];
            }
            const I* o = off + i * per;
            const T* v = vals + i * per * R;
            const I* t = TABLE ? sel + (i / table_rows) * G * 4 : sel;
            for (long long g = 0; g < G; ++g)
                for (int s = 0; s < N; ++s) {
                    const long long p = g * N + s;
                    V* yr = (V*)(y + structured_col<TABLE>(o, t, g, p, M) * ldy + c0);
                    V a0 = V{}, a1 = V{};
                    for (int r = 0; r < R; ++r) {
                        a0 += v[p * R + r] * bv[r][0];
                        a1 += v[p * R + r] * bv[r][1];
                    }
                    yr[0] += a0;
                    yr[1] += a1;
                }
        }
    }
    for (; c0 < k1; ++c0)  // the columns beyond the last pair of vectors
        for (long long i = 0; i < blocks; ++i) {
            const I* o = off + i * per;
            const T* v = vals + i * per * R;
            const I* t = TABLE ? sel + (i / table_rows) * G * 4 : sel;
            for (long long g = 0; g < G; ++g)
                for (int s = 0; s < N; ++s) {
                    const long long p = g * N + s;
                    T a = 0;
                    for (int r = 0; r < R; ++r) a += v[p * R + r] * b[(i * R + r) * ldb + c0];
                    y[structured_col<TABLE>(o, t, g, p, M) * ldy + c0] += a;
                }
        }
}

}  // namespace sdfgsparse
#endif  // SDFGSPARSE_STRUCTURED_H
