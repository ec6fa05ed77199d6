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


@dace.program
def spmv32(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


def _csr32(rng, m=12, n=9):
    A = torch.from_numpy(_dense(rng, m, n)).to_sparse_csr()
    return torch.sparse_csr_tensor(A.crow_indices().to(torch.int32), A.col_indices().to(torch.int32), A.values(),
                                   size=A.shape)


def test_torch_dense_arguments_checked(rng):
    """A dense torch tensor goes to the kernel as it is when it is a contiguous CPU tensor
    of the expected dtype, a strided one as a contiguous copy; another dtype is an error.
    Before, DaCe read a strided or float32 tensor's bytes as a contiguous float64 vector
    (wrong results, no error)."""
    A = _csr32(rng)
    D = A.to_dense().numpy()
    x = torch.from_numpy(rng.standard_normal(18))
    np.testing.assert_allclose(spmv32(A, x[:9]).numpy(), D @ x[:9].numpy(), rtol=1e-12)
    np.testing.assert_allclose(spmv32(A, x[::2]).numpy(), D @ x[::2].numpy(), rtol=1e-12)  # copied
    with pytest.raises(ss.errors.DTypeError, match=r'x: dtype is float32, .*pass x.to\(torch.float64\)'):
        spmv32(A, x[:9].float())
    with pytest.raises(ss.errors.FormatMismatchError, match='x: a sparse matrix was passed where .* expects a dense'):
        spmv32(A, x[:9].to_sparse())
    y = spmv32(A, x[:9].clone().requires_grad_())
    np.testing.assert_allclose(y.numpy(), D @ x[:9].numpy(), rtol=1e-12)


def test_torch_warm_calls_take_the_compiled_binder(rng):
    """Torch CSR / CSC with torch vectors: warm calls run the plan's binder, which reads the
    tensors in C (before plans, a dense torch argument sent every call down the full path:
    ~1.4 ms), and refuses what its twin with the slots' Python steps refuses."""
    from sdfgsparse.runtime.plan import MISS
    for layout in ('csr', 'csc'):
        A = _csr32(rng) if layout == 'csr' else torch.from_numpy(_dense(rng)).to_sparse_csc()
        prog = spmv32 if layout == 'csr' else spmv_csc
        x = torch.from_numpy(rng.standard_normal(9))
        for _ in range(3):
            y = prog(A, x)
        np.testing.assert_allclose(y.numpy(), A.to_dense().numpy() @ x.numpy(), rtol=1e-12)
        plans = [p for key, ps in prog._ss_plans.items() for p in ps if key[1][0] is torch.Tensor]
        assert len(plans) == 1 and plans[0].steps == {'A': 'sparse', 'x': 'torch'}
        plan = plans[0]
        twin = plan.python_twin()
        fast = plan.run((A, x))
        assert isinstance(fast, torch.Tensor)
        np.testing.assert_array_equal(fast.numpy(), twin((A, x)).numpy())
        for bad in (x[:8].clone(), x.float(), torch.cat([x, x])[::2], x.to_sparse()):
            assert plan.run((A, bad)) is MISS and twin((A, bad)) is MISS
        other = A.to_sparse_csc() if layout == 'csr' else A.to_sparse_csr()
        pos = A.crow_indices() if layout == 'csr' else A.ccol_indices()
        crd = A.col_indices() if layout == 'csr' else A.row_indices()
        make = torch.sparse_csr_tensor if layout == 'csr' else torch.sparse_csc_tensor
        wide = torch.int32 if pos.dtype == torch.int64 else torch.int64
        broken = crd.clone()
        broken[0] = 99
        for B in (other, A.to(torch.float32), make(pos.to(wide), crd.to(wide), A.values(), size=A.shape),
                  make(pos, broken, A.values(), size=A.shape, check_invariants=False)):
            assert plan.run((B, x)) is MISS and twin((B, x)) is MISS
        same = make(pos.clone(), crd.clone(), A.values().clone(), size=A.shape)
        np.testing.assert_array_equal(plan.run((same, x)).numpy(), fast.numpy())
