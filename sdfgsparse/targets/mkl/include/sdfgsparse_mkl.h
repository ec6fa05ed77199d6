// sdfgsparse: the leaves of the `mkl` implementations (targets/mkl/expansions.py): SpMV, SpMM
// and SpGEMM of a CSR matrix (32-bit indices, float or double values) through Intel MKL's
// inspector-executor sparse BLAS. Made known to DaCe by the SdfgsparseMKL environment
// (targets/mkl/environment.py), which links libmkl_rt.
//
// A call wraps the caller's arrays in an MKL handle (no copy), runs the operation and frees
// the handle. MKL runs on the process's GNU OpenMP runtime (the one our kernels, torch and
// GraphBLAS share) when these leaves are the first to call it in the process (otherwise it
// keeps the first caller's choice), with the LP64 interface (32-bit indices). Empty operands
// never reach MKL; where MKL refuses an operand (a status other than success, e.g. too
// little memory) or the process set MKL's ILP64 interface, the same result comes from a
// plain loop here, so a call never fails silently.
#ifndef SDFGSPARSE_MKL_H
#define SDFGSPARSE_MKL_H
#include <mkl_service.h>
#include <mkl_spblas.h>
#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

namespace sdfgsparse {
namespace mkl {

// calls that MKL refused and the plain loops computed (read by the tests through the export below)
static inline std::atomic<long long>& refused() {
    static std::atomic<long long> count{0};
    return count;
}

// once per library: GNU OpenMP threading and the LP64 interface; whether MKL takes 32-bit
// indices here (false where the process had chosen ILP64 before: the plain loops then)
static inline bool ready() {
    static const bool lp64 = [] {
        mkl_set_threading_layer(MKL_THREADING_GNU);
        return mkl_set_interface_layer(MKL_INTERFACE_LP64) == MKL_INTERFACE_LP64;
    }();
    return lp64;
}

template <typename T> struct ops;
template <> struct ops<float> {
    static sparse_status_t csr(sparse_matrix_t* A, MKL_INT m, MKL_INT n, const MKL_INT* pos, const MKL_INT* crd,
                               const float* v) {
        return mkl_sparse_s_create_csr(A, SPARSE_INDEX_BASE_ZERO, m, n, const_cast<MKL_INT*>(pos),
                                       const_cast<MKL_INT*>(pos) + 1, const_cast<MKL_INT*>(crd),
                                       const_cast<float*>(v));
    }
    static sparse_status_t mv(sparse_operation_t op, sparse_matrix_t A, matrix_descr d, const float* x, float* y) {
        return mkl_sparse_s_mv(op, 1.0f, A, d, x, 0.0f, y);
    }
    static sparse_status_t mm(sparse_operation_t op, sparse_matrix_t A, matrix_descr d, const float* B, MKL_INT k,
                              MKL_INT ldb, float* Y, MKL_INT ldy) {
        return mkl_sparse_s_mm(op, 1.0f, A, d, SPARSE_LAYOUT_ROW_MAJOR, B, k, ldb, 0.0f, Y, ldy);
    }
    static sparse_status_t out(sparse_matrix_t C, sparse_index_base_t* b, MKL_INT* m, MKL_INT* n, MKL_INT** s,
                               MKL_INT** e, MKL_INT** c, float** v) {
        return mkl_sparse_s_export_csr(C, b, m, n, s, e, c, v);
    }
};
template <> struct ops<double> {
    static sparse_status_t csr(sparse_matrix_t* A, MKL_INT m, MKL_INT n, const MKL_INT* pos, const MKL_INT* crd,
                               const double* v) {
        return mkl_sparse_d_create_csr(A, SPARSE_INDEX_BASE_ZERO, m, n, const_cast<MKL_INT*>(pos),
                                       const_cast<MKL_INT*>(pos) + 1, const_cast<MKL_INT*>(crd),
                                       const_cast<double*>(v));
    }
    static sparse_status_t mv(sparse_operation_t op, sparse_matrix_t A, matrix_descr d, const double* x, double* y) {
        return mkl_sparse_d_mv(op, 1.0, A, d, x, 0.0, y);
    }
    static sparse_status_t mm(sparse_operation_t op, sparse_matrix_t A, matrix_descr d, const double* B, MKL_INT k,
                              MKL_INT ldb, double* Y, MKL_INT ldy) {
        return mkl_sparse_d_mm(op, 1.0, A, d, SPARSE_LAYOUT_ROW_MAJOR, B, k, ldb, 0.0, Y, ldy);
    }
    static sparse_status_t out(sparse_matrix_t C, sparse_index_base_t* b, MKL_INT* m, MKL_INT* n, MKL_INT** s,
                               MKL_INT** e, MKL_INT** c, double** v) {
        return mkl_sparse_d_export_csr(C, b, m, n, s, e, c, v);
    }
};

static inline matrix_descr general() {
    matrix_descr d;
    d.type = SPARSE_MATRIX_TYPE_GENERAL;
    return d;
}

// Y = op(A) @ B with A the m x n CSR matrix (pos, crd, v), op(A) its transpose when
// `transpose`; B has k columns, rows `ldb` apart, Y rows `ldy` apart (k = 1, ldb = ldy = 1: SpMV).
template <typename T>
static inline void csr_mm(bool transpose, long long m, long long n, long long k, const int* pos, const int* crd,
                          const T* v, const T* B, long long ldb, T* Y, long long ldy) {
    static_assert(sizeof(MKL_INT) == sizeof(int), "sdfgsparse's mkl implementations use MKL's LP64 interface");
    const long long out_rows = transpose ? n : m;
    sparse_status_t s = SPARSE_STATUS_NOT_SUPPORTED;
    if (m > 0 && n > 0 && pos[m] > 0 && ready()) {
        sparse_matrix_t A = nullptr;
        s = ops<T>::csr(&A, (MKL_INT)m, (MKL_INT)n, pos, crd, v);
        if (s == SPARSE_STATUS_SUCCESS) {
            const sparse_operation_t op = transpose ? SPARSE_OPERATION_TRANSPOSE : SPARSE_OPERATION_NON_TRANSPOSE;
            s = k == 1 && ldb == 1 && ldy == 1 ? ops<T>::mv(op, A, general(), B, Y)
                                               : ops<T>::mm(op, A, general(), B, (MKL_INT)k, (MKL_INT)ldb, Y,
                                                            (MKL_INT)ldy);
        }
        if (A) mkl_sparse_destroy(A);
    }
    if (s == SPARSE_STATUS_SUCCESS) return;
    if (m > 0 && n > 0 && pos[m] > 0) ++refused();
    for (long long i = 0; i < out_rows; ++i)  // MKL refused (or nothing to do): the same result, plainly
        for (long long c = 0; c < k; ++c) Y[i * ldy + c] = T(0);
    for (long long i = 0; i < m; ++i)
        for (int q = pos[i]; q < pos[i + 1]; ++q) {
            const long long r = transpose ? crd[q] : i, j = transpose ? i : crd[q];
            for (long long c = 0; c < k; ++c) Y[r * ldy + c] += v[q] * B[j * ldb + c];
        }
}

// C = A @ B by Gustavson's row-wise product, one row at a time (where MKL refused), columns
// sorted within each row; returns C's entries, or -1 when they do not fit in `cap`.
template <typename T>
static inline long long plain_spgemm(long long m, long long p, const int* apos, const int* acrd, const T* aval,
                                     const int* bpos, const int* bcrd, const T* bval, int* cpos, int* ccrd, T* cval,
                                     long long cap) {
    std::vector<T> acc(p, T(0));
    std::vector<long long> seen(p, -1);
    std::vector<int> cols;
    long long at = 0;
    cpos[0] = 0;
    for (long long i = 0; i < m; ++i) {
        cols.clear();
        for (int q = apos[i]; q < apos[i + 1]; ++q)
            for (int r = bpos[acrd[q]]; r < bpos[acrd[q] + 1]; ++r) {
                const int j = bcrd[r];
                if (seen[j] != i) { seen[j] = i; acc[j] = T(0); cols.push_back(j); }
                acc[j] += aval[q] * bval[r];
            }
        if (at + (long long)cols.size() > cap) return -1;
        std::sort(cols.begin(), cols.end());
        for (int j : cols) { ccrd[at] = j; cval[at] = acc[j]; ++at; }
        cpos[i + 1] = (int)at;
    }
    return at;
}

// C = A @ B (A m x n, B n x p, both CSR), C's columns sorted within each row, written into
// (cpos, ccrd, cval) of capacity `cap`; returns C's entries, or -1 when C does not fit (never
// from the mkl expansion: its capacity is the product's flops, computed before the call).
template <typename T>
static inline long long csr_spgemm(long long m, long long n, long long p, const int* apos, const int* acrd,
                                   const T* aval, const int* bpos, const int* bcrd, const T* bval, int* cpos,
                                   int* ccrd, T* cval, long long cap) {
    if (m == 0 || n == 0 || p == 0 || apos[m] == 0 || bpos[n] == 0) {
        for (long long i = 0; i <= m; ++i) cpos[i] = 0;
        return 0;
    }
    sparse_matrix_t A = nullptr, B = nullptr, C = nullptr;
    long long nnz = -1;
    if (ready() && ops<T>::csr(&A, (MKL_INT)m, (MKL_INT)n, apos, acrd, aval) == SPARSE_STATUS_SUCCESS &&
        ops<T>::csr(&B, (MKL_INT)n, (MKL_INT)p, bpos, bcrd, bval) == SPARSE_STATUS_SUCCESS &&
        mkl_sparse_spmm(SPARSE_OPERATION_NON_TRANSPOSE, A, B, &C) == SPARSE_STATUS_SUCCESS &&
        mkl_sparse_order(C) == SPARSE_STATUS_SUCCESS) {
        sparse_index_base_t base;
        MKL_INT rows, cols, *start, *end, *crd;
        T* val;
        if (ops<T>::out(C, &base, &rows, &cols, &start, &end, &crd, &val) == SPARSE_STATUS_SUCCESS &&
            base == SPARSE_INDEX_BASE_ZERO && rows == m && cols == p) {
            long long at = 0;
            bool fits = true;
            cpos[0] = 0;
            for (long long i = 0; i < m && fits; ++i) {
                const long long len = (long long)end[i] - start[i];
                if (at + len > cap) { fits = false; break; }
                std::memcpy(ccrd + at, crd + start[i], sizeof(int) * len);
                std::memcpy(cval + at, val + start[i], sizeof(T) * len);
                at += len;
                cpos[i + 1] = (int)at;
            }
            if (fits) nnz = at;
        }
    }
    if (C) mkl_sparse_destroy(C);
    if (B) mkl_sparse_destroy(B);
    if (A) mkl_sparse_destroy(A);
    if (nnz >= 0) return nnz;
    ++refused();
    return plain_spgemm(m, p, apos, acrd, aval, bpos, bcrd, bval, cpos, ccrd, cval, cap);
}

}  // namespace mkl
}  // namespace sdfgsparse

DACE_EXPORTED long long __ss_mkl_refused() { return sdfgsparse::mkl::refused().load(); }
#endif  // SDFGSPARSE_MKL_H
