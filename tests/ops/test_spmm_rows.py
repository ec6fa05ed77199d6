"""SpMM over a plain row walk (targets/cpu/dense_loops.spmm_row): register panels of the dense
columns, single vectors and a scalar tail, for every split of K into them, float64 and
float32, int32 and int64 indices, empty rows, CSR and a CSC operand seen as A.T, a fused
epilogue; against scipy."""
import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss

M, N, K = dace.symbol('M'), dace.symbol('N'), dace.symbol('K')


@dace.program
def spmm64(A: ss.CSR[dace.float64, M, N], B: dace.float64[N, K]):
    return A @ B


@dace.program
def spmm32(A: ss.CSR[dace.float32, M, N, dace.int64], B: dace.float32[N, K]):
    return A @ B


@dace.program
def spmm_t(A: ss.CSC[dace.float64, N, M], B: dace.float64[N, K]):
    return A.T @ B


@dace.program
def spmm_relu(A: ss.CSR[dace.float64, M, N], B: dace.float64[N, K]):
    return np.maximum(A @ B, 0)


def _matrix(rng, m, n, d, dtype=np.float64):
    A = sp.random_array((m, n), density=d, format='lil', rng=rng, dtype=dtype)
    A[m // 3, :] = 0  # an empty row
    return sp.csr_array(A)


# lanes per 64-byte vector: 8 doubles, 16 floats; a panel is 4 vectors
@pytest.mark.parametrize('k', [1, 7, 8, 9, 31, 32, 33, 64, 70, 130])
def test_every_split_of_k(rng, k):
    A = _matrix(rng, 50, 40, 0.2)
    B = rng.standard_normal((40, k))
    np.testing.assert_allclose(spmm64(A, B), A @ B, rtol=1e-12, atol=1e-12)
    A32 = _matrix(rng, 50, 40, 0.2, np.float32)
    A32.indices, A32.indptr = A32.indices.astype(np.int64), A32.indptr.astype(np.int64)
    B32 = rng.standard_normal((40, 2 * k)).astype(np.float32)
    np.testing.assert_allclose(spmm32(A32, B32), A32 @ B32, rtol=1e-5, atol=1e-5)


def test_transposed_csc_and_epilogue(rng):
    A = _matrix(rng, 60, 45, 0.15)
    B = rng.standard_normal((45, 40))
    At = sp.csc_array(A.T)  # 45 x 60, stored by columns: A.T walks it by rows
    np.testing.assert_allclose(spmm_t(At, B), A @ B, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(spmm_relu(A, B), np.maximum(A @ B, 0), rtol=1e-12, atol=1e-12)


def test_all_rows_empty_and_no_rows(rng):
    A = sp.csr_array((7, 5))
    B = rng.standard_normal((5, 64))
    got = spmm64(A, B)
    assert got.shape == (7, 64) and not got.any()
    got = spmm64(sp.csr_array((0, 5)), B)
    assert got.shape == (0, 64)
