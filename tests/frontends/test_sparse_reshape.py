"""Reshapes of sparse matrices inside ``@dace.program`` (``A.reshape``, ``np.reshape``):
views whose coordinates are the stored walk's, linearised in C order and split again,
checked against NumPy on the dense matrix, alone and composed with the operations and the
other views (slices, transposes, concatenation)."""

import dace
import numpy as np
import pytest
import scipy.sparse as sp
import sympy

import sdfgsparse as ss
from sdfgsparse import errors
from tests.sparse_zoo import FORMATS, as_format, from_threads, program_from_source

M, N, K = (dace.symbol(s) for s in 'MNK')
a, b = dace.symbol('a'), dace.symbol('b')


def _matrix(m, n, seed, density=0.35):
    rng = np.random.default_rng(seed)
    A = sp.random_array((m, n), density=density, format='csr', rng=rng, data_sampler=lambda size: rng.standard_normal(size))
    A = A.tolil()
    if m > 3:
        A[1, :] = 0  # an empty row
    return sp.csr_array(A)


_PROGRAMS = {}


def _program(fmt):
    """Reshapes read by every view reader and returned, one build per format."""
    if fmt not in _PROGRAMS:
        T = getattr(ss, fmt)

        @dace.program
        def reshaped(A: T[dace.float64, M, N], x: dace.float64[N // 2], X: dace.float64[2 * N, 3], z: dace.float64[2 * M],
                     Z: dace.float64[2, M // 2]):
            R = A.reshape((M * 2, N // 2))  # each row in two
            Q = np.reshape(A, (-1, 2 * N))  # two rows in one
            return (R @ x, Q @ X, z @ R, Z @ Q, R.sum(axis=1), R.sum(axis=0), Q.sum(), R, Q,
                    A.reshape((N, M), order='F'))

        _PROGRAMS[fmt] = reshaped
    return _PROGRAMS[fmt]


@pytest.mark.parametrize('fmt', FORMATS)
def test_reshape_is_numpy_for_every_reader(fmt):
    prog = _program(fmt)
    rng = np.random.default_rng(2)
    for m, n in [(6, 8), (4, 2)]:  # even sizes: BSR's 2 x 2 blocks, N // 2 and M // 2 exact
        A = _matrix(m, n, seed=m)
        D = A.toarray()
        x, X, z, Z = (rng.standard_normal(s) for s in ((n // 2, ), (2 * n, 3), (2 * m, ), (2, m // 2)))
        got = prog(as_format(A, fmt), x, X, z, Z)
        R, Q = D.reshape(m * 2, n // 2), D.reshape(-1, 2 * n)
        want = (R @ x, Q @ X, z @ R, Z @ Q, R.sum(1), R.sum(0), Q.sum())
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g).reshape(np.shape(w)), w, atol=1e-12)
        for g, w in zip(got[7:], (R, Q, D.reshape((n, m), order='F'))):
            assert g.shape == w.shape
            np.testing.assert_allclose(g.toarray(), w, atol=1e-12)
            assert sp.csr_array(g).has_canonical_format
    assert (A != _matrix(4, 2, seed=4)).nnz == 0  # the argument is untouched


def test_reshape_composes_with_views_and_operations():

    @dace.program
    def composed(A: ss.CSR[dace.float64, M, N], B: ss.CSC[dace.float64, K, N], y: dace.float64[M * N // 3]):
        R1 = A[a:b].reshape((-1, 2))  # a reshaped slice
        R2 = A.reshape((N, M))[1:, ::2]  # a sliced reshape
        R3 = A.T.reshape((M * N, 1)).T  # a transposed reshape of a transpose
        R4 = np.vstack((A, B)).reshape((N, M + K))  # a reshaped concatenation (materialised first)
        R5 = ss.relu(A.reshape((M * N // 3, 3)))  # an operation that does not read views
        t = y @ A.reshape((M * N // 3, 3))
        u = A.reshape((1, -1)) @ A.reshape((M * N, 1)).T.T.sum(axis=1)  # one row; one column
        return R1, R2, R3, R4, R5, t, u

    A, B = _matrix(6, 4, seed=7), _matrix(2, 4, seed=8)
    D, E = A.toarray(), B.toarray()
    y = np.arange(8.0)
    for lo, hi in [(0, 6), (2, 5), (-3, 100), (4, 1)]:
        R1, R2, R3, R4, R5, t, u = composed(A, sp.csc_array(B), y, a=lo, b=hi)
        np.testing.assert_allclose(u, D.reshape(1, -1) @ D.reshape(24, 1).sum(axis=1), atol=1e-12)
        np.testing.assert_allclose(R1.toarray(), D[lo:hi].reshape(-1, 2), atol=1e-12)
        assert sp.csr_array(R1).has_canonical_format  # the ordered copy of a reshaped CSR: no sort
        np.testing.assert_allclose(R2.toarray(), D.reshape(4, 6)[1:, ::2], atol=1e-12)
        np.testing.assert_allclose(R3.toarray(), D.T.reshape(24, 1).T, atol=1e-12)
        np.testing.assert_allclose(R4.toarray(), np.vstack((D, E)).reshape(4, 8), atol=1e-12)
        np.testing.assert_allclose(R5.toarray(), np.maximum(D.reshape(8, 3), 0), atol=1e-12)
        np.testing.assert_allclose(t, y @ D.reshape(8, 3), atol=1e-12)


def test_reshape_in_the_pure_expansion():
    with ss.targets.use_implementation('pure'):

        @dace.program
        def pure_reshape(A: ss.COO[dace.float64, M, N], x: dace.float64[N // 2]):
            R = A.reshape((2 * M, N // 2))
            return R @ x, R.sum(axis=0), R

        sdfg = pure_reshape.to_sdfg()
    assert {n.implementation for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.LibraryNode)} == {'pure'}
    prog = ss.compile(sdfg)
    A = _matrix(5, 6, seed=9)
    D = A.toarray().reshape(10, 3)
    x = np.arange(3.0) - 1
    y, s, R = prog(A=as_format(A, 'COO'), x=x)
    np.testing.assert_allclose(y, D @ x, atol=1e-12)
    np.testing.assert_allclose(s, D.sum(0), atol=1e-12)
    np.testing.assert_allclose(R.toarray(), D, atol=1e-12)


def test_reshaped_program_from_eight_threads():
    prog = _program('CSR')
    A = _matrix(6, 8, seed=10)
    D = A.toarray()
    failures = []

    def work(t):
        rng = np.random.default_rng(t)
        for _ in range(10):
            x, X, z, Z = (rng.standard_normal(s) for s in ((4, ), (16, 3), (12, ), (2, 3)))
            y, Y, *_ = prog(A, x, X, z, Z)
            if not (np.allclose(y, D.reshape(12, 4) @ x) and np.allclose(Y, D.reshape(3, 16) @ X)):
                failures.append(t)

    prog(A, np.ones(4), np.ones((16, 3)), np.ones(12), np.ones((2, 3)))  # build once
    from_threads(work)
    assert not failures


def test_reshape_sizes_are_checked():

    @dace.program
    def fixed(A: ss.CSR[dace.float64, 4, 6]):
        return A.reshape((5, 5))

    with pytest.raises(errors.ShapeError, match=r'A.reshape\(\(5, 5\)\): the number of elements \(A has 24\) differ'):
        fixed.to_sdfg()

    @dace.program
    def odd(A: ss.CSR[dace.float64, M, N], x: dace.float64[N // 2]):
        return A.reshape((2 * M, N // 2)) @ x

    with pytest.raises(errors.ShapeError, match=r'the number of elements \(A has M\*N\)'):
        odd(_matrix(4, 5, seed=1), np.ones(2))  # N = 5 is odd: 8 x 2 is not 4 x 5


# (reshapes to other ranks are views: tests/frontends/test_tensor_views.py)
@pytest.mark.parametrize('body, error, match', [
    ('return A.reshape((-1, -1))', errors.ShapeError, 'only specify one unknown dimension'),
    ('return A.reshape(())', errors.UnsupportedOperationError, r'a 0-D result \(a scalar\)'),
    ('return A.reshape((N, N), order="A")', errors.UnsupportedOperationError, "order='A'"),
    ('return A.reshape((N, -3))', errors.ShapeError, 'negative dimension -3'),
    ('return A.ravel()', errors.UnsupportedOperationError, r'A\.ravel\(\): A is a sparse matrix'),
])
def test_refused_reshapes_name_the_operand(tmp_path, body, error, match):
    src = ('import dace\nimport numpy as np\nimport sdfgsparse as ss\nN = dace.symbol("N")\n\n'
           f'@dace.program\ndef prog(A: ss.CSR[dace.float64, N, N]):\n    {body}\n')
    prog = program_from_source(tmp_path, src)
    with pytest.raises(error, match=match):
        prog.to_sdfg()


def test_reshape_with_minus_one_of_a_concatenation():
    """``np.vstack((A, B)).reshape((-1, 2))`` with symbolic sizes: the rows are
    ``(M + K) * N / 2``, an integer written over one denominator (it was ``K*N/2 + M*N/2``,
    a float size in the generated kernel); checked where ``K * N`` alone is odd, and where
    ``K * N`` and ``M * N`` both are (C rounds each half down: arrays one element short)."""

    @dace.program
    def stacked_pairs(A: ss.CSR[dace.float64, M, N], B: ss.CSR[dace.float64, K, N]):
        return np.vstack((A, B)).reshape((-1, 2))

    for m, k, n in ((4, 3, 6), (3, 5, 2), (5, 3, 3)):
        A = sp.random_array((m, n), density=0.5, format='csr', random_state=m)
        B = sp.random_array((k, n), density=0.5, format='csr', random_state=k)
        got = stacked_pairs(A, B)
        want = np.vstack((A.toarray(), B.toarray())).reshape(-1, 2)
        assert got.shape == want.shape
        np.testing.assert_allclose(got.toarray(), want, atol=1e-12)
    # every array the kernels allocate has an integral size: a sum of fractions printed term
    # by term (``(K*N)/2 + (M*N)/2`` in C) is one short where K*N and M*N are odd (5, 3, 3):
    # the count array of the conversion was, and its last row's count went past its end
    sdfg = stacked_pairs.to_sdfg()
    sdfg.expand_library_nodes()
    for sd in sdfg.all_sdfgs_recursive():
        for name, desc in sd.arrays.items():
            if desc.transient:
                fractions = [d for d in desc.shape if any(not r.is_Integer for r in sympy.sympify(d).atoms(sympy.Rational))]
                assert not fractions, f'{sd.name}.{name}: {desc.shape}'

