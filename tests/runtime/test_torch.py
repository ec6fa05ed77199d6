"""torch.sparse tensors pass straight into programs; torch in, torch out."""
import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss

torch = pytest.importorskip('torch')

M, N = dace.symbol('M'), dace.symbol('N')


@dace.program
def spmv64(A: ss.CSR[dace.float64, M, N, dace.int64], x: dace.float64[N]):
    return A @ x


@dace.program
def scale_coo(A: ss.COO[dace.float64, M, N, dace.int64]):
    return 2 * A


@dace.program
def spmv_csc(A: ss.CSC[dace.float64, M, N, dace.int64], x: dace.float64[N]):
    return A @ x


def _dense(rng, m=12, n=9):
    D = rng.standard_normal((m, n))
    D[rng.random((m, n)) < 0.7] = 0
    return D


def test_torch_csr_zero_copy_and_torch_result(rng):
    D = _dense(rng)
    A = torch.from_numpy(D).to_sparse_csr()
    x = torch.from_numpy(rng.standard_normal(9))
    y = spmv64(A, x)
    assert isinstance(y, torch.Tensor)
    np.testing.assert_allclose(y.numpy(), D @ x.numpy(), rtol=1e-12)


def test_torch_csc(rng):
    D = _dense(rng)
    A = torch.from_numpy(D).to_sparse_csc()
    x = rng.standard_normal(9)
    np.testing.assert_allclose(np.asarray(spmv_csc(A, x)), D @ x, rtol=1e-12)


def test_torch_coo_sparse_result_is_torch(rng):
    D = _dense(rng)
    A = torch.from_numpy(D).to_sparse()
    R = scale_coo(A)
    assert isinstance(R, torch.Tensor) and R.layout == torch.sparse_coo
    np.testing.assert_allclose(R.to_dense().numpy(), 2 * D)


def test_torch_int64_indices_into_int32_program_copy_with_warning(rng):

    @dace.program
    def spmv32(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
        return A @ x

    D = _dense(rng)
    A = torch.from_numpy(D).to_sparse_csr()
    with pytest.warns(ss.errors.CopyWarning, match='A: index arrays are int64'):
        y = spmv32(A, rng.standard_normal(9))
    assert y.shape == (12, )


def test_torch_format_mismatch(rng):
    A = torch.from_numpy(_dense(rng)).to_sparse_csc()
    with pytest.raises(ss.errors.FormatMismatchError, match='A: the program expects CSR but got CSC'):
        spmv64(A, np.ones(9))
