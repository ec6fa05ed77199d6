"""Dense operands of exactly one element in unannotated programs (DaCe compiles their
shape in and passes a one-element array by value): the ops compile and agree with scipy.
Found by ``make fuzz``: ``A @ x`` with ``A`` of one column and ``x`` unannotated did not
compile (the row kernels read ``x`` by pointer), nor did ``x @ A`` (the kernel indexed
the one-element ``x``, which reaches it as a scalar)."""
import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss


@dace.program
def one_spmv(A, x):
    return A @ x


@dace.program
def one_spmm(A, B):
    return A @ B


@dace.program
def one_vecmat(x, S):
    return x @ S


@dace.program
def one_elementwise(S, D, X, Y, B):
    return S * D, S + D, ss.sddmm(S, X, Y), B @ S


def test_one_element_dense_operands(rng):
    A = sp.csr_array(rng.standard_normal((5, 1)))
    S = sp.csr_array(np.array([[2.5]]))
    x, B, D, X, Y = np.array([1.5]), np.array([[0.5]]), np.array([[3.0]]), np.array([[-1.0]]), np.array([[4.0]])
    for _ in range(2):  # first call and warm
        np.testing.assert_allclose(one_spmv(A, x), A @ x, rtol=1e-12)
        np.testing.assert_allclose(one_spmm(A, B), A @ B, rtol=1e-12)
        np.testing.assert_allclose(one_vecmat(x, S), x @ S.toarray(), rtol=1e-12)
        Sd = S.toarray()
        got = one_elementwise(S, D, X, Y, B)
        for g, w in zip(got, [Sd * D, Sd + D, Sd * (X @ Y), B @ Sd]):
            np.testing.assert_allclose(g.toarray() if sp.issparse(g) else g, w, rtol=1e-12)
    with pytest.raises(ss.errors.ShapeError, match='inner dimensions differ'):
        one_spmv(A, np.array([1.0, 2.0]))
