"""The ``mkl`` implementation family (``sdfgsparse/targets/mkl``: MKL's sparse BLAS behind
SpMV, SpMM and SpGEMM), checked against scipy; where it does not apply the node computes
with its ``cpu`` expansion, with the same results. Skipped without the ``[mkl]`` extra."""
import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.ops.spgemm import SpGEMM
from sdfgsparse.ops.spmm import SpMM
from sdfgsparse.ops.spmv import SpMV
from sdfgsparse.ops.softmax import SparseSoftmax
from sdfgsparse.targets import mkl
from sdfgsparse.targets.registry import registered

pytestmark = pytest.mark.skipif(not mkl.available(), reason=f'the [mkl] extra: {mkl.missing()}')

M, N, K = (dace.symbol(s) for s in 'MNK')


def _compiled(prog):
    """``prog`` parsed with every node that has it taking ``mkl``, compiled."""
    with ss.targets.use_implementation('mkl'):
        sdfg = prog.to_sdfg()
    from sdfgsparse.targets.mkl.expansions import unsupported
    nodes = [(n, s) for n, s in sdfg.all_nodes_recursive() if isinstance(n, (SpMV, SpMM, SpGEMM))]
    assert nodes and all(n.implementation == 'mkl' for n, _ in nodes)
    assert [unsupported(n, s) for n, s in nodes] == [None] * len(nodes)  # MKL computes them, not cpu
    return ss.compile(sdfg)


def _refused(program) -> int:
    from sdfgsparse.targets.mkl.expansions import refused_calls
    return refused_calls(program.compiled)


@dace.program
def spmv64(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


@dace.program
def spmv_t32(A: ss.CSR[dace.float32, M, N], x: dace.float32[M]):
    return A.T @ x


@dace.program
def spmv_csc(A: ss.CSC[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


@dace.program
def spmm_csc(A: ss.CSC[dace.float64, M, N], B: dace.float64[N, K]):
    return A @ B


@dace.program
def spmm32(A: ss.CSR[dace.float32, M, N], B: dace.float32[N, K]):
    return A @ B


@dace.program
def spgemm64(A: ss.CSR[dace.float64, M, N], B: ss.CSR[dace.float64, N, K]):
    return A @ B


def _matrix(rng, shape, dtype=np.float64, fmt='csr', empty_rows=True):
    A = sp.random_array(shape, density=0.08, format='csr', rng=rng, dtype=dtype)
    if empty_rows:
        A = sp.csr_array(A.multiply((np.arange(shape[0]) % 7 != 0)[:, None]))
    return A.asformat(fmt)


def test_registered_on_the_products_only_and_not_the_default():
    assert set(registered('mkl')) == {SpMV, SpMM, SpGEMM}
    for cls in (SpMV, SpMM, SpGEMM):
        assert cls.default_implementation == 'cpu' and 'mkl' in cls.implementations
    assert 'mkl' not in SparseSoftmax.implementations


def test_spmv_forms_against_scipy(rng):
    A = _matrix(rng, (120, 90))
    x = rng.standard_normal(90)
    p = _compiled(spmv64)
    np.testing.assert_allclose(p(A=A, x=x), A @ x, rtol=1e-12, atol=1e-12)
    A32 = A.astype(np.float32)
    x32 = rng.standard_normal(120).astype(np.float32)
    pt = _compiled(spmv_t32)
    np.testing.assert_allclose(pt(A=A32, x=x32), A32.T @ x32, rtol=1e-5, atol=1e-5)
    Ac = sp.csc_array(A)
    pc = _compiled(spmv_csc)
    np.testing.assert_allclose(pc(A=Ac, x=x), Ac @ x, rtol=1e-12, atol=1e-12)
    assert _refused(p) == _refused(pt) == _refused(pc) == 0  # MKL computed them


def test_spmm_against_scipy(rng):
    A = _matrix(rng, (64, 48), fmt='csc')
    B = rng.standard_normal((48, 20))
    p = _compiled(spmm_csc)
    np.testing.assert_allclose(p(A=A, B=B), A @ B, rtol=1e-12, atol=1e-12)
    A32 = _matrix(rng, (64, 48), dtype=np.float32)
    B32 = rng.standard_normal((48, 7)).astype(np.float32)
    p32 = _compiled(spmm32)
    np.testing.assert_allclose(p32(A=A32, B=B32), A32 @ B32, rtol=1e-5, atol=1e-5)
    assert _refused(p) == _refused(p32) == 0


def test_spgemm_against_scipy_sorted_rows(rng):
    A = _matrix(rng, (80, 60))
    B = _matrix(rng, (60, 70))
    p = _compiled(spgemm64)
    C = p(A=A, B=B)
    want = A @ B
    assert C.shape == want.shape and C.has_sorted_indices
    np.testing.assert_allclose(C.toarray(), want.toarray(), rtol=1e-12, atol=1e-12)
    assert _refused(p) == 0


def test_empty_and_degenerate_operands(rng):
    p, g = _compiled(spmv64), _compiled(spgemm64)
    Z = sp.csr_array((5, 4))
    np.testing.assert_array_equal(p(A=Z, x=np.ones(4)), np.zeros(5))
    C = g(A=Z, B=sp.csr_array((4, 3)))
    assert C.shape == (5, 3) and C.nnz == 0
    one = sp.csr_array(np.array([[2.0]]))
    np.testing.assert_array_equal(p(A=one, x=np.array([3.0])), [6.0])
    assert _refused(p) == 0


@dace.program
def spmv_int64(A: ss.CSR[dace.float64, M, N, dace.int64], x: dace.float64[N]):
    return A @ x


@dace.program
def spmv_relu(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return np.maximum(A @ x, 0)


def test_where_mkl_does_not_apply_the_cpu_kernel_computes(rng):
    """int64 indices (MKL's LP64 interface takes int32) and a fused epilogue: the node keeps
    ``mkl`` as its implementation, expands as ``cpu``, and the results are scipy's."""
    from sdfgsparse.targets.mkl.expansions import unsupported
    A = _matrix(rng, (50, 40))
    x = rng.standard_normal(40)
    A64 = sp.csr_array((A.data, A.indices.astype(np.int64), A.indptr.astype(np.int64)), shape=A.shape)
    with ss.targets.use_implementation('mkl'):
        sdfg = spmv_int64.to_sdfg()
    (node, state), = [(n, s) for n, s in sdfg.all_nodes_recursive() if isinstance(n, SpMV)]
    assert 'int64' in unsupported(node, state)
    np.testing.assert_allclose(ss.compile(sdfg)(A=A64, x=x), A @ x, rtol=1e-12)
    with ss.targets.use_implementation('mkl'):
        sdfg = spmv_relu.to_sdfg()
    applied = sdfg.apply_transformations_repeated(ss.transformations.SparseEpilogueFusion)  # the epilogue onto the node
    assert applied == 1
    (node, state), = [(n, s) for n, s in sdfg.all_nodes_recursive() if isinstance(n, SpMV)]
    assert node.implementation == 'mkl' and 'epilogue' in unsupported(node, state)
    np.testing.assert_allclose(ss.compile(sdfg)(A=A, x=x), np.maximum(A @ x, 0), rtol=1e-12)


def test_missing_extra_is_named(monkeypatch):
    from sdfgsparse.targets.mkl import environment
    monkeypatch.setattr(environment, 'include_dir', lambda: None)
    assert 'mkl-include' in environment.missing()
    monkeypatch.setattr(environment, 'include_dir', lambda: '/x')
    monkeypatch.setattr(environment, 'library', lambda: None)
    assert 'libmkl_rt' in environment.missing()


@dace.program
def spgemm_csc_t(A: ss.CSC[dace.float64, M, N], B: ss.CSR[dace.float64, M, K]):
    return A.T @ B


def test_spgemm_of_a_transposed_csc_operand(rng):
    """``A.T @ B`` with a non-square CSC A: A's arrays are the CSR storage of A.T (N x M),
    which MKL multiplies as they are."""
    A = _matrix(rng, (70, 40), fmt='csc')
    B = _matrix(rng, (70, 55))
    p = _compiled(spgemm_csc_t)
    C = p(A=A, B=B)
    assert C.shape == (40, 55) and C.has_sorted_indices
    np.testing.assert_allclose(C.toarray(), (A.T @ B).toarray(), rtol=1e-12, atol=1e-12)
    assert _refused(p) == 0
