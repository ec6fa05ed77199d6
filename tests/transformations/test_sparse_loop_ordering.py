"""SparseLoopOrdering: sampled products iterate over the sample's entries. Differential runs
before/after on random and real matrices (CSR, CSC, a transposed view), iteration counts
that prove the asymptotic cliff is gone, JSON round trip, and refusals."""
import copy

import dace
import numpy as np
import pytest
import scipy.sparse as sp
import sympy

import sdfgsparse as ss
from sdfgsparse.analysis import iteration_count
from sdfgsparse.ops.mul_dense import SparseMulDense
from sdfgsparse.ops.sddmm import SDDMM
from sdfgsparse.transformations import SparseLoopOrdering
from sparse_zoo import real_matrix

M, N, K = (dace.symbol(s) for s in 'MNK')


@dace.program
def sampled_csr(S: ss.CSR[dace.float64, M, N], X: dace.float64[M, K], Y: dace.float64[N, K]):
    return S * (X @ Y.T)


@dace.program
def sampled_csc_left(S: ss.CSC[dace.float64, M, N], X: dace.float64[M, K], Y: dace.float64[K, N]):
    return (X @ Y) * S


@dace.program
def sampled_transposed(S: ss.CSR[dace.float64, N, M], X: dace.float64[M, K], Y: dace.float64[K, N]):
    return S.T * (X @ Y)


@dace.program
def product_read_twice(S: ss.CSR[dace.float64, M, N], X: dace.float64[M, K], Y: dace.float64[K, N]):
    D = X @ Y
    return S * D, D


@dace.program
def scaled_product(S: ss.CSR[dace.float64, M, N], X: dace.float64[M, K], Y: dace.float64[K, N]):
    return S * (2.0 * (X @ Y))


def _ordered(prog):
    sdfg = prog.to_sdfg()
    before = copy.deepcopy(sdfg)
    applied = sdfg.apply_transformations_repeated(SparseLoopOrdering)
    sdfg.validate()
    return before, sdfg, applied


def _nodes(sdfg, cls):
    return [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, cls)]


def _symbols(expr, *names):
    """The symbols of ``expr`` with these names (a fresh one for a name it does not contain)."""
    have = {s.name: s for s in expr.free_symbols}
    return [have.get(n, sympy.Symbol(n)) for n in names]


def _inputs(prog, S, rng):
    m, n = (S.shape[1], S.shape[0]) if prog is sampled_transposed else S.shape
    X = rng.standard_normal((m, 7))
    Y = rng.standard_normal((n, 7) if prog is sampled_csr else (7, n))
    want = (S.T if prog is sampled_transposed else S).multiply(X @ (Y.T if prog is sampled_csr else Y))
    return X, Y, want.toarray()


@pytest.mark.parametrize('prog,fmt', [(sampled_csr, 'csr'), (sampled_csc_left, 'csc'), (sampled_transposed, 'csr')],
                         ids=['csr', 'csc-left', 'transposed-view'])
def test_sampled_product_becomes_sddmm(prog, fmt, rng):
    before, after, applied = _ordered(prog)
    assert applied == 1
    assert len(_nodes(after, SDDMM)) == 1 and not _nodes(after, SparseMulDense)
    assert not [n for n, _ in after.all_nodes_recursive() if type(n).__name__ in ('MatMul', 'Transpose')]
    assert _nodes(after, SDDMM)[0].y_layout == ('NK' if prog is sampled_csr else 'KN')
    a, b = ss.compile(before), ss.compile(after)
    for S in (sp.random_array((40, 30), density=0.15, format='csr', rng=rng), real_matrix('cora_A')):
        S = S.asformat(fmt)
        X, Y, want = _inputs(prog, S, rng)
        got_before, got_after = a(S=S, X=X, Y=Y), b(S=S, X=X, Y=Y)
        assert sp.issparse(got_after) and got_after.nnz == got_before.nnz
        np.testing.assert_allclose(got_after.toarray(), got_before.toarray(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got_after.toarray(), want, rtol=1e-10, atol=1e-10)


def test_iteration_count_drops_from_dense_to_sparse():
    before, after, _ = _ordered(sampled_csr)
    it_before, it_after = iteration_count(before), iteration_count(after)
    m, n, k = _symbols(it_before, 'M', 'N', 'K')
    assert sympy.expand(it_before).coeff(m * n * k) == 1  # the dense product: every (i, j, k)
    nnz = [s for s in it_after.free_symbols if s.name.endswith('_n1')]
    assert len(nnz) == 1
    # after: one dot product of length K per stored entry (Y.T is read by rows: no transpose left)
    assert sympy.simplify(it_after - nnz[0] * k) == 0
    # on a 10^6 x 10^6 matrix with 10^7 entries and K = 64: 6.4e8 iterations instead of 6.4e13
    vals = {m: 10**6, n: 10**6, k: 64, nnz[0]: 10**7}
    assert it_after.subs(vals) < 2 * 10**7 * 64 < it_before.subs(vals) / 10**4


def test_other_cliff_free_products_stay_linear_in_nnz():
    """A.T @ B and SpGEMM with mixed CSR/CSC operands already iterate over stored entries:
    O(nnz * K) and O(flops + nnz(B)) (B converted once), never O(rows * cols)."""

    @dace.program
    def atb(A: ss.CSR[dace.float64, N, M], B: dace.float64[N, K]):
        return A.T @ B

    @dace.program
    def mixed(A: ss.CSR[dace.float64, M, N], B: ss.CSC[dace.float64, N, K]):
        return A @ B

    for prog in (atb, mixed):
        count = iteration_count(prog.to_sdfg())
        poly = sympy.Poly(count, *_symbols(count, 'M', 'N', 'K'))
        assert all(sum(mono) <= 1 for mono in poly.monoms()), (prog.name, count)  # no rows * cols term


def test_refuses_product_with_another_reader():
    _, after, applied = _ordered(product_read_twice)
    assert applied == 0
    assert _nodes(after, SparseMulDense)


def test_refuses_scaled_product():
    """``2 * (X @ Y)`` is a map between the product and the sample: not the pattern."""
    _, after, applied = _ordered(scaled_product)
    assert applied == 0


def test_round_trips_through_json():
    _, after, _ = _ordered(sampled_transposed)
    again = dace.SDFG.from_json(after.to_json())
    (node, ) = _nodes(again, SDDMM)
    assert node.transpose_S
    xf = SparseLoopOrdering()
    assert SparseLoopOrdering.from_json(xf.to_json()).CATEGORY == 'Sparse'
