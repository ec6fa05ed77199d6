"""Row-parallel Gustavson SpGEMM (targets/cpu/gustavson.py): sparse rows (sorted columns),
dense-ish rows (marker scan), cancellation, empty rows, repeated calls with more and fewer
columns (per-thread workspaces reused across calls), against scipy; selected for CSR A."""
import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.ops.spgemm import SpGEMM
from sparse_zoo import real_matrix

M, K, N = (dace.symbol(s) for s in 'MKN')


@dace.program
def gemm64(A: ss.CSR[dace.float64, M, K], B: ss.CSR[dace.float64, K, N]):
    return A @ B


@dace.program
def gemm32(A: ss.CSR[dace.float32, M, K, dace.int64], B: ss.CSR[dace.float32, K, N, dace.int64]):
    return A @ B


@dace.program
def gemm_csc_t(A: ss.CSC[dace.float64, K, M], B: ss.CSR[dace.float64, K, N]):
    return A.T @ B


@dace.program
def gemm_then_spmv(A: ss.CSR[dace.float64, M, K], B: ss.CSR[dace.float64, K, N], x: dace.float64[N]):
    return (A @ B) @ x


def _check(got, A, B, rtol=1e-12):
    want = sp.csr_array(A @ B)
    assert got.format == 'csr' and got.shape == want.shape
    assert got.has_canonical_format  # sorted, no duplicates
    np.testing.assert_allclose(got.toarray(), want.toarray(), rtol=rtol, atol=rtol)
    return want


def test_gustavson_is_the_csr_lowering():
    sdfg = gemm64.to_sdfg()
    sdfg.expand_library_nodes()
    guided = [n for n, _ in sdfg.all_nodes_recursive()
              if isinstance(n, dace.nodes.MapEntry) and n.map.omp_schedule == dace.dtypes.OMPScheduleType.Guided]
    assert len(guided) == 2  # count and fill


def test_sparse_and_dense_rows(rng):
    # rows 0-2 dense (more than an eighth of the columns: marker scan), the others sparse
    # (sort), an empty row, a matrix of a different size on each call
    for m, k, n in ((30, 20, 40), (64, 50, 200), (9, 7, 12), (64, 50, 200), (5, 3, 1)):
        A = sp.random_array((m, k), density=0.15, format='lil', rng=rng)
        A[0, :] = rng.standard_normal(k)
        A[1, : k // 2] = 1.0
        A[m - 1, :] = 0
        A = sp.csr_array(A)
        A.eliminate_zeros()
        B = sp.random_array((k, n), density=0.2, format='csr', rng=rng)
        B[0, :] = 2.0
        B = sp.csr_array(B)
        _check(gemm64(A, B), A, B)


def test_cancellation_keeps_explicit_zeros():
    A = sp.csr_array(np.array([[1.0, 1.0], [0.0, 2.0]]))
    B = sp.csr_array(np.array([[1.0, 3.0], [-1.0, 0.0]]))
    C = gemm64(A, B)
    # C[0, 0] = 1 - 1 = 0 stays stored (as in the generic lowering); C[0, 1] = 3, C[1, 0] = -2
    assert C.nnz == 3 and list(C.indptr) == [0, 2, 3] and list(C.indices) == [0, 1, 0]
    assert list(C.data) == [0.0, 3.0, -2.0]


def test_float32_int64_and_transposed_csc(rng):
    A = sp.random_array((40, 30), density=0.2, format='csr', rng=rng, dtype=np.float32)
    B = sp.random_array((30, 25), density=0.2, format='csr', rng=rng, dtype=np.float32)
    A64 = sp.csr_array((A.data, A.indices.astype(np.int64), A.indptr.astype(np.int64)), shape=A.shape)
    B64 = sp.csr_array((B.data, B.indices.astype(np.int64), B.indptr.astype(np.int64)), shape=B.shape)
    _check(gemm32(A64, B64), A, B, rtol=1e-5)
    At = sp.random_array((30, 40), density=0.2, format='csc', rng=rng)
    Bt = sp.random_array((30, 25), density=0.2, format='csr', rng=rng)
    _check(gemm_csc_t(At, Bt), At.T, Bt)


def test_real_matrix_squared():
    A = real_matrix('cora_A')
    _check(gemm64(A, A), A, A)


def test_intermediate_product(rng):
    """An SpGEMM result that stays inside the program (allocated from its capacity)."""
    A = sp.random_array((30, 20), density=0.2, format='csr', rng=rng)
    B = sp.random_array((20, 25), density=0.2, format='csr', rng=rng)
    x = rng.standard_normal(25)
    np.testing.assert_allclose(gemm_then_spmv(A, B, x), A @ (B @ x), rtol=1e-12)
