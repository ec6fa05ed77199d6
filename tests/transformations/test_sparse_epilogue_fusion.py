"""SparseEpilogueFusion: differential runs before/after on random and real matrices, exact
application counts, JSON round trip, and the cases it must refuse."""
import copy

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.ops.base import FusableSparseNode
from sdfgsparse.transformations import SparseEpilogueFusion
from sparse_zoo import real_matrix

M, N, K = (dace.symbol(s) for s in 'MNK')


@dace.program
def gcn_bias(A: ss.CSR[dace.float64, N, N], X: dace.float64[N, K], W: dace.float64[K, M], b: dace.float64[M]):
    return np.maximum(A @ (X @ W) + b, 0)


@dace.program
def gcn_bias_csc(A: ss.CSC[dace.float64, N, N], X: dace.float64[N, K], W: dace.float64[K, M], b: dace.float64[M]):
    return np.maximum(A @ (X @ W) + b, 0)


@dace.program
def spmv_relu(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return np.maximum(2.0 * (A @ x), 0)


@dace.program
def spmm_used_twice(A: ss.CSR[dace.float64, M, N], B: dace.float64[N, K]):
    Y = A @ B
    return np.maximum(Y, 0), Y


@dace.program
def spmm_math(A: ss.CSR[dace.float64, M, N], B: dace.float64[N, K]):
    return np.tanh(A @ B) * 3.0


@dace.program
def spmm_math_csc(A: ss.CSC[dace.float64, M, N], B: dace.float64[N, K]):
    return np.exp(A @ B) + np.sqrt(np.abs(A @ B))


@dace.program
def spmv_math(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return np.log(np.exp(A @ x) + 1.0)


NB = dace.symbol('NB')


@dace.program
def batch_relu(A: ss.CSR[dace.float64, M, N], X: dace.float64[NB, N, K], b: dace.float64[M], Y: dace.float64[NB, M,
                                                                                                             K]):
    for i in range(NB):
        Y[i] = np.maximum(A @ X[i] + b[:, np.newaxis], 0)


@dace.program
def batch_relu_csc(A: ss.CSC[dace.float64, M, N], X: dace.float64[NB, N, K], b: dace.float64[M],
                   Y: dace.float64[NB, M, K]):
    for i in range(NB):
        Y[i] = np.maximum(A @ X[i] + b[:, np.newaxis], 0)


@dace.program
def column_slices(A: ss.CSR[dace.float64, M, N], X: dace.float64[N, K], Y: dace.float64[M, NB, K]):
    for i in range(NB):
        Y[:, i] = np.maximum(A @ X, 0)


def _fused(prog):
    sdfg = prog.to_sdfg()
    before = copy.deepcopy(sdfg)
    applied = sdfg.apply_transformations_repeated(SparseEpilogueFusion)
    sdfg.validate()
    return before, sdfg, applied


def _products(sdfg):
    return [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, FusableSparseNode)]


def _maps(sdfg):
    return [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.MapEntry)]


@pytest.mark.parametrize('prog,fmt', [(gcn_bias, 'csr'), (gcn_bias_csc, 'csc')], ids=['row-owned', 'scatter'])
def test_gcn_bias_relu_fused(prog, fmt, rng):
    before, after, applied = _fused(prog)
    assert applied == 2
    (node, ) = _products(after)
    assert node.epilogue and len(node.epilogue_inputs) == 1
    assert len(_maps(after)) == len(_maps(before)) - 2
    a, b = ss.compile(before), ss.compile(after)
    for A in (sp.random_array((60, 60), density=0.1, format='csr', rng=rng), real_matrix('cora_A')):
        A = A.asformat(fmt)
        n = A.shape[0]
        X, W, bias = rng.standard_normal((n, 8)), rng.standard_normal((8, 5)), rng.standard_normal(5)
        want = np.maximum(A @ (X @ W) + bias, 0)
        np.testing.assert_allclose(b(A=A, X=X, W=W, b=bias), a(A=A, X=X, W=W, b=bias), rtol=1e-12)
        np.testing.assert_allclose(b(A=A, X=X, W=W, b=bias), want, rtol=1e-10, atol=1e-12)


def test_spmv_epilogue_on_the_accumulator(rng):
    before, after, applied = _fused(spmv_relu)
    assert applied == 2
    A = sp.random_array((50, 40), density=0.2, format='csr', rng=rng, data_sampler=rng.standard_normal)
    x = rng.standard_normal(40)
    np.testing.assert_allclose(ss.compile(after)(A=A, x=x), ss.compile(before)(A=A, x=x), rtol=1e-12)
    np.testing.assert_allclose(ss.compile(after)(A=A, x=x), np.maximum(2 * (A @ x), 0), rtol=1e-12)


@pytest.mark.parametrize('prog,fmt,ref', [
    (spmm_math, 'csr', lambda P: np.tanh(P) * 3.0),
    (spmm_math_csc, 'csc', lambda P: np.exp(P) + np.sqrt(np.abs(P))),
    (spmv_math, 'csr', lambda P: np.log(np.exp(P) + 1.0)),
], ids=['spmm-tanh', 'spmm-exp-sqrt-scatter', 'spmv-log-exp'])
def test_math_functions_in_epilogues(prog, fmt, ref, rng):
    """Epilogues calling math functions (a tasklet's bare ``tanh``) compile in every CPU
    kernel shape. Before: ``np.tanh(A @ X)`` failed to parse once fused ("Use of undefined
    variable tanh")."""
    before, after, applied = _fused(prog)
    assert applied >= 1 and any(n.epilogue for n in _products(after))
    A = sp.random_array((30, 20), density=0.2, format=fmt, rng=rng, data_sampler=rng.standard_normal)
    other = rng.standard_normal(20) if prog is spmv_math else rng.standard_normal((20, 4))
    got = ss.compile(after)(A, other)
    np.testing.assert_allclose(got, ss.compile(before)(A, other), rtol=1e-12)
    np.testing.assert_allclose(got, ref(A @ other), rtol=1e-12)


@pytest.mark.parametrize('prog,fmt', [(batch_relu, 'csr'), (batch_relu_csc, 'csc')], ids=['row-owned', 'scatter'])
def test_fuses_into_a_slice_of_the_output(prog, fmt, rng):
    """``Y[i] = relu(A @ X[i] + b)`` in a batch loop (a pointwise convolution, NCHW): the
    product writes the slice ``Y[i]`` directly (before: an M x K intermediate per image and a
    second pass over it)."""
    before, after, applied = _fused(prog)
    assert applied == 2
    (node, ) = _products(after)
    assert node.epilogue and not any(d.transient and len(d.shape) == 2 for d in after.arrays.values())
    A = sp.random_array((30, 20), density=0.2, format=fmt, rng=rng, data_sampler=rng.standard_normal)
    X, bias = rng.standard_normal((3, 20, 7)), rng.standard_normal(30)
    got, ref = np.full((3, 30, 7), np.nan), np.full((3, 30, 7), np.nan)
    ss.compile(after)(A, X, bias, got)
    ss.compile(before)(A, X, bias, ref)
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    np.testing.assert_allclose(got, np.maximum(np.einsum('mn,bnk->bmk', A.toarray(), X) + bias[:, None], 0),
                               rtol=1e-12)


def test_refuses_a_slice_that_is_not_leading():
    """``Y[:, i] = relu(A @ X)``: the fixed index sits between the map's; the map stays."""
    _, after, applied = _fused(column_slices)
    assert applied == 0 and not _products(after)[0].epilogue


def test_refuses_intermediate_with_another_reader():
    _, after, applied = _fused(spmm_used_twice)
    assert applied == 0
    assert not _products(after)[0].epilogue


def test_round_trips_through_json():
    _, after, _ = _fused(gcn_bias)
    again = dace.SDFG.from_json(after.to_json())
    (node, ) = _products(again)
    (orig, ) = _products(after)
    assert node.epilogue == orig.epilogue and dict(node.epilogue_inputs) == dict(orig.epilogue_inputs)


def test_is_listed_as_sparse_transformation():
    assert SparseEpilogueFusion.CATEGORY == 'Sparse'
    assert 'SparseEpilogueFusion' in {c.__name__ for c in dace.transformation.PatternTransformation.subclasses_recursive()}
