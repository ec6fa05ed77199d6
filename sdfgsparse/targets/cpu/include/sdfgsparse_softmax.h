// sdfgsparse: the row leaves of the sparse softmax and of the fused sparse attention
// (targets/cpu/expansions/softmax.py, attention.py call them from one-line tasklets inside a
// parallel map over the rows of a CSR walk). exp is glibc's, vectorised through libmvec where
// sdfgsparse_vecmath.h declares it (NaN and infinities kept).
#ifndef SDFGSPARSE_SOFTMAX_H
#define SDFGSPARSE_SOFTMAX_H
#include <algorithm>
#include <cmath>

#include "sdfgsparse_rows.h"
#include "sdfgsparse_vecmath.h"

namespace sdfgsparse {

static inline double ss_exp(double x) { return exp(x); }
static inline float ss_exp(float x) { return expf(x); }

// o[p] = exp(v[p] - max) / sum over the row's entries [lo, hi), in T: the maximum (from low, the
// lowest finite T), then exp and their sum, then a scaling by 1 / sum. A row of -inf entries
// gives NaN, as NumPy does; a NaN entry makes the row NaN.
template <typename T, typename AV>
static inline void softmax_row(T* __restrict__ o, const AV* __restrict__ v, long long lo, long long hi, T low) {
    T mx = low;
    for (long long p = lo; p < hi; ++p) mx = std::max(mx, (T)v[p]);
    T s = 0;
    _Pragma("omp simd reduction(+:s)") for (long long p = lo; p < hi; ++p) {
        const T e = ss_exp((T)v[p] - mx);
        o[p] = e;
        s += e;
    }
    const T rs = T(1) / s;
    _Pragma("omp simd") for (long long p = lo; p < hi; ++p) o[p] *= rs;
}

// Row i of softmax(S ∘ (Q K^T)) V over the row's entries [lo, hi) of S: each score
// vals[p] * dot(q[i, 0:d], key(crd[p])) parked in the entry's scratch slot sc[p] (re-read at
// once, cache-hot), the row's maximum, exp and sum, the weights normalised by 1 / max(sum, 1)
// (an empty row: an all-zero output row), then y[0:dv] = sum_p sc[p] * v[crd[p], 0:dv] in
// registers (spmm_row). key(j)[h] = k[j * ldkj + h * ldkh]: K's rows (K[j, :]) or its columns
// (K^T given as d x n); a unit step is one SIMD dot product.
template <int PANEL, typename T, typename I, typename SV>
static inline void attention_row(T* __restrict__ y, const T* __restrict__ q, long long ldq, const T* __restrict__ k,
                                 long long ldkj, long long ldkh, const T* __restrict__ v, long long ldv,
                                 const I* __restrict__ crd, const SV* __restrict__ vals, T* __restrict__ sc,
                                 long long i, long long lo, long long hi, long d, long dv, T low) {
    const T* __restrict__ qr = q + i * ldq;
    T mx = low;
    for (long long p = lo; p < hi; ++p) {
        const T* __restrict__ kr = k + (long long)crd[p] * ldkj;
        T acc = 0;
        if (ldkh == 1) {
            _Pragma("omp simd reduction(+:acc)") for (long h = 0; h < d; ++h) acc += qr[h] * kr[h];
        } else {
            for (long h = 0; h < d; ++h) acc += qr[h] * kr[h * ldkh];
        }
        const T s = (T)vals[p] * acc;
        sc[p] = s;
        mx = std::max(mx, s);
    }
    T sm = 0;
    _Pragma("omp simd reduction(+:sm)") for (long long p = lo; p < hi; ++p) {
        const T e = ss_exp(sc[p] - mx);
        sc[p] = e;
        sm += e;
    }
    const T rs = T(1) / std::max(sm, T(1));
    _Pragma("omp simd") for (long long p = lo; p < hi; ++p) sc[p] *= rs;
    spmm_row<PANEL, T, I>(y, v, ldv, crd, sc, lo, hi, dv);
}

}  // namespace sdfgsparse

#endif  // SDFGSPARSE_SOFTMAX_H
