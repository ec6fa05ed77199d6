"""Concatenation of sparse matrices inside ``@dace.program`` (``np.concatenate``,
``np.vstack``, ``np.hstack``), checked against NumPy on the dense matrices and scipy.

A concatenation is a view: a linear operation on it (``@``, ``.sum``, ``.nnz``) runs once
per part, into that part's block of the result or as a partial result added afterwards;
no part is copied (the tests look for the absence of a ``SparseConcat`` node). Anything
else materialises it once, canonical, with a ``SparseConcat`` node."""

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse import errors
from sdfgsparse.ops.concat import SparseConcat
from tests.sparse_zoo import FORMATS, as_format, from_threads, program_from_source

M, N, K, P = (dace.symbol(s) for s in 'MNKP')
a, b = dace.symbol('a'), dace.symbol('b')


def _matrix(m, n, seed, density=0.35):
    rng = np.random.default_rng(seed)
    A = sp.random_array((m, n), density=density, format='csr', rng=rng, data_sampler=lambda size: rng.standard_normal(size))
    A = A.tolil()
    if m > 3:
        A[m - 2, :] = 0  # an empty row
    if n > 2:
        A[:, 1] = 0  # an empty column
    return sp.csr_array(A)


def _concat_nodes(sdfg) -> int:
    return sum(isinstance(n, SparseConcat) for n, _ in sdfg.all_nodes_recursive())


_LINEAR = {}


def _linear_program(fmt):
    """Every linear reader of a concatenation, both axes, one build per format."""
    if fmt not in _LINEAR:
        T = getattr(ss, fmt)

        @dace.program
        def linear(A: T[dace.float64, M, N], B: T[dace.float64, K, N], C: T[dace.float64, M, P], x: dace.float64[N],
                   x2: dace.float64[N + P], X: dace.float64[N, 3], Z: dace.float64[2, M], Z2: dace.float64[2, M + K]):
            V = np.vstack((A, B))
            H = np.hstack((A, C))
            y = V @ x  # row blocks of y
            y2 = H @ x2  # a sum over the column blocks of H and the row blocks of x2
            Y = V @ X  # SpMM, row blocks
            W = Z @ H  # dense @ sparse, column blocks of W
            W2 = Z2 @ V  # dense @ sparse, a sum over the row blocks of V
            return (y, y2, Y, W, W2, V.sum(axis=1), V.sum(axis=0), V.sum(), H.sum(axis=0), H.sum(axis=1),
                    np.sum(H), V.nnz, H.nnz)

        _LINEAR[fmt] = linear
    return _LINEAR[fmt]


@pytest.mark.parametrize('fmt', FORMATS)
def test_linear_readers_run_per_part(fmt):
    prog = _linear_program(fmt)
    sdfg = prog.to_sdfg()
    assert _concat_nodes(sdfg) == 0  # fused: no part is copied
    rng = np.random.default_rng(3)
    for m, n, k, p in [(8, 6, 4, 2), (2, 4, 6, 2)]:  # even: BSR's 2 x 2 blocks
        A, B, C = _matrix(m, n, 1), _matrix(k, n, 2), _matrix(m, p, 4)
        V, H = sp.vstack((A, B)).toarray(), sp.hstack((A, C)).toarray()
        x, x2 = rng.standard_normal(n), rng.standard_normal(n + p)
        X, Z, Z2 = rng.standard_normal((n, 3)), rng.standard_normal((2, m)), rng.standard_normal((2, m + k))
        args = [as_format(S, fmt) for S in (A, B, C)]
        got = prog(*args, x, x2, X, Z, Z2)
        want = (V @ x, H @ x2, V @ X, Z @ H, Z2 @ V, V.sum(1), V.sum(0), V.sum(), H.sum(0), H.sum(1), H.sum())
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g).reshape(np.shape(w)), w, atol=1e-12)
        if fmt in ('COO', 'CSR', 'CSC', 'DCSR'):  # formats that store no padding: the stored entries of the parts
            stored = [S.nnz if fmt == 'DCSR' else args[i].nnz for i, S in enumerate((A, B, C))]
            assert int(np.asarray(got[11]).ravel()[0]) == stored[0] + stored[1]
            assert int(np.asarray(got[12]).ravel()[0]) == stored[0] + stored[2]


@pytest.mark.parametrize('fmt', FORMATS)
def test_returned_concatenation_is_materialised_canonical(fmt):
    T = getattr(ss, fmt)

    @dace.program
    def cat(A: T[dace.float64, M, N], B: T[dace.float64, K, N], C: T[dace.float64, M, P]):
        return np.concatenate((A, B)), np.concatenate((A, C), axis=1), np.vstack((B, A, B))

    A, B, C = _matrix(6, 4, 5), _matrix(2, 4, 6), _matrix(6, 4, 7)
    args = [as_format(S, fmt) for S in (A, B, C)]
    V, H, V3 = cat(*args)
    for got, want in ((V, sp.vstack((A, B))), (H, sp.hstack((A, C))), (V3, sp.vstack((B, A, B)))):
        assert got.shape == want.shape
        np.testing.assert_allclose(got.toarray(), want.toarray(), atol=1e-12)
        canon = sp.csr_array(got) if got.format == 'csr' else sp.csc_array(got)
        assert canon.has_canonical_format
    want_fmt = 'csc' if fmt == 'CSC' else 'csr'  # column-major parts give a CSC
    assert V.format == want_fmt
    assert (A != _matrix(6, 4, 5)).nnz == 0  # the arguments are untouched


def test_concatenation_composes_with_views_and_operations():

    @dace.program
    def composed(A: ss.CSR[dace.float64, M, N], B: ss.CSC[dace.float64, K, N], C: ss.COO[dace.float64, M, P],
                 D: dace.float64[M + K, N], x: dace.float64[M + K], w: dace.float64[P + N]):
        V = np.vstack((A, B))
        r0 = ss.relu(V)  # an operation that does not split: materialised once
        E = V + D  # sparse + dense
        t = V.T @ x  # the transposed concatenation: hstack((A.T, B.T)), still per part
        s = np.hstack((C[a:b], A[a:b])) @ w  # slices of the parts
        Q = np.vstack((A, B))[:, 1:4]  # a slice across the parts: the parts' slices
        G = np.vstack((A, B))[a:b]  # a slice along the parts: materialised, then a view
        nest = np.hstack((np.vstack((A, B)), np.vstack((C, C[0:K]))))  # a concatenation of concatenations
        return r0, E, t, s, Q, G, nest

    A, B, C = _matrix(6, 5, 8), _matrix(4, 5, 9), _matrix(6, 3, 10)
    Dd, Bd, Cd = A.toarray(), B.toarray(), C.toarray()
    V = np.vstack((Dd, Bd))
    rng = np.random.default_rng(11)
    D, x, w = rng.standard_normal((10, 5)), rng.standard_normal(10), None
    for lo, hi in [(0, 6), (1, 4), (-3, 100), (5, 2)]:
        w = rng.standard_normal(8)
        r0, E, t, s, Q, G, nest = composed(A, sp.csc_array(B), as_format(C, 'COO'), D, x, w, a=lo, b=hi)
        np.testing.assert_allclose(r0.toarray(), np.maximum(V, 0), atol=1e-12)
        np.testing.assert_allclose(E, V + D, atol=1e-12)
        np.testing.assert_allclose(t, V.T @ x, atol=1e-12)
        np.testing.assert_allclose(s, np.hstack((Cd[lo:hi], Dd[lo:hi])) @ w, atol=1e-12)
        np.testing.assert_allclose(Q.toarray(), V[:, 1:4], atol=1e-12)
        np.testing.assert_allclose(G.toarray(), V[lo:hi], atol=1e-12)
        np.testing.assert_allclose(nest.toarray(), np.hstack((V, np.vstack((Cd, Cd[0:4])))), atol=1e-12)


def test_mixed_dtypes_and_formats():

    @dace.program
    def mixed(A: ss.CSR[dace.float32, M, N], B: ss.DIA[dace.float64, K, N], x: dace.float64[N]):
        V = np.vstack((A, B))
        return V, V @ x

    A, B = _matrix(5, 6, 12).astype(np.float32), _matrix(3, 6, 13)
    x = np.arange(6.0)
    V, y = mixed(A, as_format(B, 'DIA'), x)
    want = np.vstack((A.toarray().astype(np.float64), B.toarray()))
    assert V.dtype == np.float64
    np.testing.assert_allclose(V.toarray(), want, rtol=1e-6)
    np.testing.assert_allclose(y, want @ x, rtol=1e-6)


def test_concatenation_in_the_pure_expansion():
    with ss.targets.use_implementation('pure'):

        @dace.program
        def pure_cat(A: ss.COO[dace.float64, M, N], B: ss.CSR[dace.float64, M, K], x: dace.float64[N + K]):
            H = np.hstack((A, B[:, ::-1]))
            return H @ x, H

        sdfg = pure_cat.to_sdfg()
    assert {n.implementation for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.LibraryNode)} == {'pure'}
    prog = ss.compile(sdfg)
    A, B = _matrix(7, 4, 14), _matrix(7, 5, 15)
    H = np.hstack((A.toarray(), B.toarray()[:, ::-1]))
    x = np.arange(9.0) - 3
    y, Hs = prog(A=as_format(A, 'COO'), B=B, x=x)
    np.testing.assert_allclose(y, H @ x, atol=1e-12)
    np.testing.assert_allclose(Hs.toarray(), H, atol=1e-12)
    assert sp.csr_array(Hs).has_canonical_format


def test_concatenated_program_from_eight_threads():
    prog = _linear_program('CSR')
    A, B, C = _matrix(9, 6, 16), _matrix(5, 6, 17), _matrix(9, 2, 18)
    V, H = sp.vstack((A, B)).toarray(), sp.hstack((A, C)).toarray()
    failures = []

    def work(t):
        rng = np.random.default_rng(t)
        for _ in range(10):
            x, x2 = rng.standard_normal(6), rng.standard_normal(8)
            X, Z, Z2 = rng.standard_normal((6, 3)), rng.standard_normal((2, 9)), rng.standard_normal((2, 14))
            y, y2, *_ = prog(A, B, C, x, x2, X, Z, Z2)
            if not (np.allclose(y, V @ x) and np.allclose(y2, H @ x2)):
                failures.append(t)

    prog(A, B, C, np.ones(6), np.ones(8), np.ones((6, 3)), np.ones((2, 9)), np.ones((2, 14)))  # build once
    from_threads(work)
    assert not failures


def test_mismatched_parts_are_refused():

    @dace.program
    def fixed(A: ss.CSR[dace.float64, 4, 5], B: ss.CSR[dace.float64, 3, 6]):
        return np.vstack((A, B))

    with pytest.raises(errors.ShapeError, match=r'np.vstack\(\(A, B\), axis=0\): columns of A and B differ \(5 vs 6\)'):
        fixed.to_sdfg()

    @dace.program
    def symbolic(A: ss.CSR[dace.float64, M, N], B: ss.CSR[dace.float64, K, P], x: dace.float64[N]):
        return np.vstack((A, B)) @ x

    with pytest.raises(errors.ShapeError, match='columns of A and B'):
        symbolic(_matrix(4, 5, 1), _matrix(3, 6, 2), np.ones(5))


@pytest.mark.parametrize('body, error, match', [
    ('return np.vstack((A, x))', errors.UnsupportedOperationError, 'x is not sparse'),
    ('return np.concatenate((A, A), axis=None)', errors.UnsupportedOperationError, 'axis=None flattens'),
    ('return np.concatenate((A, A), axis=2)', errors.ShapeError, 'axis 2 is out of range'),
    ('return np.dstack((A, A))', errors.UnsupportedOperationError, r'would stack along a third axis; write np\.stack'),
    ('return np.vstack((A, A)) @ A', errors.UnsupportedOperationError, 'does not take a concatenation'),
])
def test_refused_concatenations_name_the_operands(tmp_path, body, error, match):
    src = ('import dace\nimport numpy as np\nimport sdfgsparse as ss\nM, N = dace.symbol("M"), dace.symbol("N")\n\n'
           f'@dace.program\ndef prog(A: ss.CSR[dace.float64, N, N], x: dace.float64[N, N]):\n    {body}\n')
    prog = program_from_source(tmp_path, src)
    with pytest.raises(error, match=match):
        prog.to_sdfg()
