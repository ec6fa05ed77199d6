"""Row-parallel A ± B (targets/cpu/row_union.py): CSR and CSC operands in every orientation
(a column-major operand is stored by rows first), cancellation kept, empty rows, against
scipy; selected only for CSR / CSC operands, with a CSR result or a CSC one (merged column
by column: the CSR of A.T ± B.T)."""
import dace
import numpy as np
import scipy.sparse as sp

import sdfgsparse as ss
from sparse_zoo import real_matrix

M, N = dace.symbol('M'), dace.symbol('N')


@dace.program
def add_rr(A: ss.CSR[dace.float64, M, N], B: ss.CSR[dace.float64, M, N]):
    return A + B


@dace.program
def sub_rc(A: ss.CSR[dace.float64, M, N], B: ss.CSC[dace.float64, M, N]):
    return A - B


@dace.program
def add_t(A: ss.CSR[dace.float64, N, N]):
    return A + A.T


@dace.program
def sub_ct(A: ss.CSC[dace.float32, M, N, dace.int64], B: ss.CSR[dace.float32, N, M, dace.int64]):
    return A - B.T


@dace.program
def add_cc(A: ss.CSC[dace.float64, M, N], B: ss.CSC[dace.float64, M, N]):
    return A + B


@dace.program
def sub_cr(A: ss.CSC[dace.float32, M, N, dace.int64], B: ss.CSR[dace.float32, M, N, dace.int64]):
    return A - B


@dace.program
def add_then_spmv(A: ss.CSR[dace.float64, M, N], B: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return (A + B) @ x


def _check(got, want, rtol=1e-12, fmt='csr'):
    want = sp.csr_array(want).asformat(fmt)
    assert got.format == fmt and got.shape == want.shape and got.has_canonical_format
    np.testing.assert_allclose(got.toarray(), want.toarray(), rtol=rtol, atol=rtol)


def _with_empty_rows(rng, m, n, d, fmt='csr', dtype=np.float64):
    A = sp.random_array((m, n), density=d, format='lil', rng=rng, dtype=dtype)
    A[m // 2, :] = 0
    return sp.csr_array(A).asformat(fmt)


def test_every_orientation(rng):
    for m, n in ((1, 1), (7, 5), (40, 30), (64, 200), (5, 1)):
        A, B = _with_empty_rows(rng, m, n, 0.3), _with_empty_rows(rng, m, n, 0.3)
        _check(add_rr(A, B), A + B)
        Bc = B.tocsc()
        _check(sub_rc(A, Bc), A - B)
        S = _with_empty_rows(rng, n, n, 0.2)
        _check(add_t(S), S + S.T)
        Ac = sp.csc_array(A.astype(np.float32))
        Bt = sp.csr_array(B.T.astype(np.float32))
        Ac.indices, Ac.indptr = Ac.indices.astype(np.int64), Ac.indptr.astype(np.int64)
        Bt.indices, Bt.indptr = Bt.indices.astype(np.int64), Bt.indptr.astype(np.int64)
        _check(sub_ct(Ac, Bt), A.astype(np.float32) - B.astype(np.float32), rtol=1e-5, fmt='csc')


def test_cancellation_is_kept():
    A = sp.csr_array(np.array([[1.0, 2.0, 0.0], [0.0, 0.0, 3.0]]))
    C = sub_rc(A, A.tocsc())
    assert C.nnz == 3 and list(C.indices) == [0, 1, 2] and not C.data.any()


def test_real_matrix_plus_transpose():
    A = real_matrix('cora_A')
    _check(add_t(A), A + A.T)


def test_intermediate_sum(rng):
    """A sum that stays inside the program (allocated from its capacity)."""
    A, B = _with_empty_rows(rng, 30, 20, 0.2), _with_empty_rows(rng, 30, 20, 0.2)
    x = rng.standard_normal(20)
    np.testing.assert_allclose(add_then_spmv(A, B, x), (A + B) @ x, rtol=1e-12)


def test_parallel_transposition(rng):
    """Operands stored the other way round above the size where that runs in parallel chunks
    (32768 entries per chunk): power-law and banded patterns, empty rows and columns,
    int32 (CSR result) and int64 (CSC result), against scipy."""
    n = 3000
    deg = np.minimum(rng.zipf(1.6, n), n // 2)
    rows = np.repeat(np.arange(n), deg)
    cols = rng.integers(0, n, rows.size)
    P = sp.csr_array((rng.standard_normal(rows.size), (rows, cols)), shape=(n, n))
    P.sum_duplicates()
    P = sp.csr_array(P)
    P[:, 7] = 0  # an empty column of P: an empty row of P.T
    P.eliminate_zeros()
    band = sp.diags_array([rng.standard_normal(n - abs(k)) for k in range(-30, 31)], offsets=range(-30, 31),
                          format='csr')
    for S in (P, band):
        assert S.nnz > 2 * 32768
        _check(add_t(S), S + S.T)
    # a CSC result (A is CSC): the CSR operand is the one stored by columns first
    A = _with_empty_rows(rng, 900, 700, 0.12, dtype=np.float32)
    B = _with_empty_rows(rng, 900, 700, 0.12, dtype=np.float32)
    Ac, Br = sp.csc_array(A), sp.csr_array(B)
    Ac.indices, Ac.indptr = Ac.indices.astype(np.int64), Ac.indptr.astype(np.int64)
    Br.indices, Br.indptr = Br.indices.astype(np.int64), Br.indptr.astype(np.int64)
    assert Br.nnz > 2 * 32768
    _check(sub_cr(Ac, Br), A - B, rtol=1e-5, fmt='csc')


def test_column_major_results(rng):
    """A CSC left operand gives a CSC result (scipy's rule), merged column by column: CSC
    operands directly, a CSR one stored by columns first; empty rows and columns,
    cancellation kept, int64, against scipy."""
    for m, n, d in ((1, 1, 0.5), (7, 5, 0.3), (64, 200, 0.2), (5, 1, 0.5), (40, 30, 0.3)):
        A, B = _with_empty_rows(rng, m, n, d, 'csc'), _with_empty_rows(rng, m, n, d, 'csc')
        _check(add_cc(A, B), A + B, fmt='csc')
        A32, B32 = sp.csc_array(A, dtype=np.float32), sp.csr_array(B, dtype=np.float32)
        A32.indices, A32.indptr = A32.indices.astype(np.int64), A32.indptr.astype(np.int64)
        B32.indices, B32.indptr = B32.indices.astype(np.int64), B32.indptr.astype(np.int64)
        _check(sub_cr(A32, B32), A32 - B32, rtol=1e-5, fmt='csc')
    C = sub_cr(A32, sp.csr_array(A32))
    assert C.nnz == A32.nnz and not C.data.any()  # cancellation kept


def test_rows_with_the_same_columns(rng):
    """Rows of A and B with the same columns take a shortcut (a compare of the rows, one
    vector loop: row_union.h): symmetric patterns with different values (A + A.T), rows of
    the same length with other columns, one column apart, empty rows, and cancellation."""
    n = 500
    U = sp.random_array((n, n), density=0.02, format='csr', rng=rng)
    S = sp.csr_array(U + U.T)  # a symmetric pattern
    S.data = rng.standard_normal(S.nnz)  # values that are not symmetric
    D = S.tolil()
    for i in range(0, n, 7):  # the same number of entries, one of them in another column
        cols = D.rows[i]
        if cols and cols[-1] + 1 < n:
            v = D[i, cols[-1]]
            D[i, cols[-1]] = 0
            D[i, cols[-1] + 1] = v
    D[3, :] = 0
    S2 = sp.csr_array(D)
    S2.eliminate_zeros()
    for A in (S, S2):
        _check(add_t(A), A + A.T)
        _check(add_rr(A, sp.csr_array(A.T)), A + A.T)
        B = A.copy()
        B.data = rng.standard_normal(B.nnz)
        _check(add_rr(A, B), A + B)  # every row: the same columns
    C = sub_rc(S, S.tocsc())  # A - A: every entry kept, every value zero
    assert C.nnz == S.nnz and not C.data.any()
    np.testing.assert_array_equal(C.indices, S.indices)
