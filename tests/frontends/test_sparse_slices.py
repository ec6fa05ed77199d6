"""Slices of sparse matrices inside ``@dace.program``: views that the operations iterate
directly (``sdfgsparse.formats.views``), checked against NumPy on the dense matrix.

Every format of the catalogue, with symbolic bounds (one build per program, many slices
per build: negative, clipped, empty and reversed ones), steps and transpositions, alone
and composed with the operations; returned views come back materialised."""
import itertools

import dace
import numpy as np
import pytest
import scipy.sparse as sp
import sympy

import sdfgsparse as ss
from sdfgsparse import errors
from sdfgsparse.formats.views import normalise_slice
from tests.sparse_zoo import FORMATS, as_format, from_threads, program_from_source

M, N, K, R = (dace.symbol(s) for s in 'MNKR')
a, b, c, d = (dace.symbol(s) for s in 'abcd')

_BOUNDS = [None, -12, -7, -3, -1, 0, 1, 2, 3, 5, 7, 9, 14]


@pytest.mark.parametrize('n', [0, 1, 2, 5, 8])
@pytest.mark.parametrize('step', [1, 2, 3, -1, -2, -3])
def test_normalise_slice_is_numpy_for_integers_and_symbols(n, step):
    """(first, count) against NumPy for every pair of bounds; the symbolic form (size and
    bounds as symbols, the Min / Max expressions) evaluated at the same values too."""
    ns, s0, s1 = sympy.Symbol('n', integer=True), sympy.Symbol('s0', integer=True), sympy.Symbol('s1', integer=True)
    for start, stop in itertools.product(_BOUNDS, _BOUNDS):
        picked = np.arange(n)[start:stop:step]
        first, count, st = normalise_slice(n, start, stop, step)
        assert (count, st) == (picked.size, step)
        assert picked.size == 0 or first == picked[0]
        sym = normalise_slice(ns, None if start is None else s0, None if stop is None else s1, step)
        values = {ns: n, s0: 0 if start is None else start, s1: 0 if stop is None else stop}
        count_s = int(sympy.sympify(sym[1]).subs(values))
        assert count_s == picked.size, (start, stop, sym)
        if picked.size:
            assert int(sympy.sympify(sym[0]).subs(values)) == picked[0]


def test_normalise_slice_refuses_a_zero_or_symbolic_step():
    with pytest.raises(errors.ShapeError, match='step must not be zero'):
        normalise_slice(5, 0, 3, 0)
    with pytest.raises(errors.UnsupportedOperationError, match='step must be an integer constant'):
        normalise_slice(5, 0, 3, sympy.Symbol('k'))


def _matrix(m, n, seed, density=0.35):
    rng = np.random.default_rng(seed)
    A = sp.random_array((m, n), density=density, format='csr', rng=rng,
                        data_sampler=lambda size: rng.standard_normal(size))
    A = A.tolil()
    if m > 3:
        A[3, :] = 0  # an empty row
    if n > 2:
        A[:, 2] = 0  # an empty column
    return sp.csr_array(A)


_SPMV = {}


def _spmv_program(fmt):
    """``A[a:b, c:d] @ x`` and ``A[b:a:-1, ::2] @ w`` of one format, one build."""
    if fmt not in _SPMV:
        T = getattr(ss, fmt)[dace.float64, M, N]

        @dace.program
        def spmv_slices(A: T, x: dace.float64[K], w: dace.float64[R]):
            return A[a:b, c:d] @ x, A[b:a:-1, ::2] @ w

        _SPMV[fmt] = spmv_slices
    return _SPMV[fmt]


_CASES = [(2, 9, 1, 7), (-6, 100, -5, -1), (0, 12, 0, 10), (7, 3, 4, 4), (-100, 5, 9, 100), (11, 12, 0, 3)]


@pytest.mark.parametrize('fmt', FORMATS)
def test_slices_of_every_format_times_a_vector(fmt):
    A = _matrix(12, 10, seed=3)
    D = A.toarray()
    prog = _spmv_program(fmt)
    arg = as_format(A, fmt)
    rng = np.random.default_rng(5)
    for lo, hi, lo2, hi2 in _CASES:
        x = rng.standard_normal(D[lo:hi, lo2:hi2].shape[1])
        w = rng.standard_normal(D[hi:lo:-1, ::2].shape[1])
        y, z = prog(arg, x, w, a=lo, b=hi, c=lo2, d=hi2)
        np.testing.assert_allclose(y, D[lo:hi, lo2:hi2] @ x, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(z, D[hi:lo:-1, ::2] @ w, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('fmt', FORMATS)
def test_returned_slice_is_materialised_canonical(fmt):
    T = getattr(ss, fmt)[dace.float64, M, N]

    @dace.program
    def cut(A: T):
        return A[a:b:2, c:]

    A = _matrix(12, 10, seed=4)
    arg = as_format(A, fmt)
    for lo, hi, lo2 in [(1, 11, 3), (-5, 100, -4), (6, 2, 0), (0, 12, 0)]:
        R_ = cut(arg, a=lo, b=hi, c=lo2)
        want = A.toarray()[lo:hi:2, lo2:]
        assert R_.shape == want.shape
        np.testing.assert_array_equal(R_.toarray(), want)
        R_ = sp.csr_array(R_)
        assert R_.has_canonical_format
    assert (A != _matrix(12, 10, seed=4)).nnz == 0  # the argument is untouched


_OPS = {}


def _ops_program(fmt):
    if fmt not in _OPS:
        T = getattr(ss, fmt)[dace.float64, M, N]

        @dace.program
        def sliced_ops(A: T, X: dace.float64[K, 3], Z: dace.float64[3, R], D: dace.float64[3, 4]):
            S = A[a:b, c:d]
            Y = S @ X  # SpMM
            W = Z @ A[c:d:2, a:b].T  # dense @ sparse, through a transposed view
            r0 = A[a:b, :].sum(axis=0)
            r1 = A.T[c:d].sum(axis=1)
            tot = np.sum(A[a:b, ::-1])
            E = A[1:4, 2:6] + D
            nnz = S.nnz
            R2 = ss.relu(A[a:b, c:d])  # an operation without a view reader: a copy first
            return Y, W, r0, r1, tot, E, nnz, R2

        _OPS[fmt] = sliced_ops
    return _OPS[fmt]


@pytest.mark.parametrize('fmt', ['CSR', 'CSC', 'COO'])
def test_views_compose_with_the_operations(fmt):
    A = _matrix(9, 8, seed=6)
    Dn = A.toarray()
    prog = _ops_program(fmt)
    arg = as_format(A, fmt)
    rng = np.random.default_rng(7)
    Dd = rng.standard_normal((3, 4))
    for lo, hi, lo2, hi2 in [(1, 8, 0, 7), (-4, 100, 2, -1), (5, 5, 0, 8)]:
        S = Dn[lo:hi, lo2:hi2]
        X = rng.standard_normal((S.shape[1], 3))
        Zc = Dn[lo2:hi2:2, lo:hi].T
        Z = rng.standard_normal((3, Zc.shape[0]))
        Y, W, r0, r1, tot, E, nnz, R2 = prog(arg, X, Z, Dd, a=lo, b=hi, c=lo2, d=hi2)
        np.testing.assert_allclose(Y, S @ X, atol=1e-12)
        np.testing.assert_allclose(W, Z @ Zc, atol=1e-12)
        np.testing.assert_allclose(r0, Dn[lo:hi, :].sum(axis=0), atol=1e-12)
        np.testing.assert_allclose(r1, Dn.T[lo2:hi2].sum(axis=1), atol=1e-12)
        np.testing.assert_allclose(np.asarray(tot).ravel()[0], Dn[lo:hi, ::-1].sum(), atol=1e-12)
        np.testing.assert_allclose(E, Dn[1:4, 2:6] + Dd, atol=1e-12)
        # stored entries in the slice (the COO argument stores some entries twice)
        C = sp.coo_array(arg) if fmt == 'COO' else A.tocoo()
        rows, cols = np.arange(A.shape[0])[lo:hi], np.arange(A.shape[1])[lo2:hi2]
        assert int(np.asarray(nnz).ravel()[0]) == np.count_nonzero(np.isin(C.row, rows) & np.isin(C.col, cols))
        np.testing.assert_allclose(R2.toarray(), np.maximum(S, 0), atol=1e-12)


def test_views_of_views_and_transposes():

    @dace.program
    def chain(A: ss.CSR[dace.float64, M, N], x: dace.float64[K]):
        B = A[1:][a:b]  # a slice of a slice
        return B.T[::-1].T @ x

    A = _matrix(10, 7, seed=8)
    D = A.toarray()
    x = np.arange(7.0)
    for lo, hi in [(0, 9), (2, 5), (-3, 100), (4, 1)]:
        np.testing.assert_allclose(chain(A, x, a=lo, b=hi), D[1:][lo:hi].T[::-1].T @ x, atol=1e-12)


def test_slices_in_the_pure_expansion():
    with ss.targets.use_implementation('pure'):

        @dace.program
        def pure_slices(A: ss.COO[dace.float64, M, N], x: dace.float64[K]):
            return A[a:b:2, ::-1] @ x, A[a:b].sum(axis=1)

        sdfg = pure_slices.to_sdfg()
    assert {n.implementation for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.LibraryNode)} == {'pure'}
    prog = ss.compile(sdfg)
    A = _matrix(11, 6, seed=9)
    arg = as_format(A, 'COO')
    D = A.toarray()
    x = np.arange(6.0) - 2
    for lo, hi in [(0, 11), (-7, 9), (3, 3)]:
        y, s = prog(A=arg, x=x, a=lo, b=hi)
        np.testing.assert_allclose(y, D[lo:hi:2, ::-1] @ x, atol=1e-12)
        np.testing.assert_allclose(s, D[lo:hi].sum(axis=1), atol=1e-12)


def test_sliced_program_from_eight_threads():
    prog = _spmv_program('CSR')
    A = _matrix(12, 10, seed=10)
    D = A.toarray()
    prog(A, np.ones(8), np.ones(5), a=0, b=5, c=0, d=8)  # build once
    failures = []

    def work(t):
        rng = np.random.default_rng(t)
        for _ in range(20):
            lo, hi = sorted(rng.integers(-12, 13, size=2))
            lo2, hi2 = sorted(rng.integers(-10, 11, size=2))
            x = rng.standard_normal(D[lo:hi, lo2:hi2].shape[1])
            w = rng.standard_normal(D[hi:lo:-1, ::2].shape[1])
            y, z = prog(A, x, w, a=int(lo), b=int(hi), c=int(lo2), d=int(hi2))
            if not (np.allclose(y, D[lo:hi, lo2:hi2] @ x) and np.allclose(z, D[hi:lo:-1, ::2] @ w)):
                failures.append((lo, hi, lo2, hi2))

    from_threads(work)
    assert not failures


def test_vector_of_the_wrong_length_for_a_slice_is_refused_at_the_call():
    prog = _spmv_program('CSR')
    A = _matrix(12, 10, seed=11)
    with pytest.raises(errors.ShapeError, match='inner dimensions'):
        prog(A, np.ones(9), np.ones(5), a=0, b=5, c=0, d=8)


def test_constant_slices_check_shapes_while_parsing():

    @dace.program
    def bad(A: ss.CSR[dace.float64, 6, 5], x: dace.float64[5]):
        return A[:, 1:4] @ x

    with pytest.raises(errors.ShapeError, match=r'A\[:, 1:4\] @ x: inner dimensions differ \(3 vs 5\)'):
        bad.to_sdfg()


@pytest.mark.parametrize('body, error, match', [
    ('return A[2] @ x', errors.UnsupportedOperationError, r'A\[2\]: only slices'),
    ('return A[1:2, 0:1, 0:1] @ x', errors.ShapeError, 'too many indices'),
    ('return A[::0] @ x', errors.ShapeError, 'step must not be zero'),
    ('return A[None] @ x', errors.UnsupportedOperationError, 'only slices'),
    ('return A[A > 0]', errors.UnsupportedOperationError, r'A > 0: comparisons of a sparse matrix'),
    ('return 0 <= A', errors.UnsupportedOperationError, r'0 <= A: comparisons of a sparse matrix'),
])
def test_refused_subscripts_name_the_operand(tmp_path, body, error, match):
    src = (f'import dace\nimport sdfgsparse as ss\nM, N = dace.symbol("M"), dace.symbol("N")\n\n'
           f'@dace.program\ndef prog(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):\n    {body}\n')
    prog = program_from_source(tmp_path, src)
    with pytest.raises(error, match=match):
        prog.to_sdfg()


def test_assignment_into_a_slice_is_refused():

    @dace.program
    def write(A: ss.CSR[dace.float64, M, N], B: ss.CSR[dace.float64, M, N]):
        A[0:2] = B[0:2]

    with pytest.raises(errors.UnsupportedOperationError, match='assignment into A'):
        write.to_sdfg()


def test_sparse_times_sparse_of_slices():
    """SpGEMM reads materialised slices; the capacity of the whole product bounds theirs."""

    @dace.program
    def products(A: ss.CSR[dace.float64, M, N], B: ss.CSC[dace.float64, N, K]):
        return A[a:b] @ B[:, c:d], A[a:b].T.T @ A.T[:, a:b]

    A, B = _matrix(9, 7, seed=12), sp.csc_array(_matrix(7, 8, seed=13))
    for lo, hi, lo2, hi2 in [(1, 8, 2, 7), (-3, 100, 0, 8), (4, 4, 3, 1)]:
        P, Q = products(A, B, a=lo, b=hi, c=lo2, d=hi2)
        np.testing.assert_allclose(P.toarray(), A.toarray()[lo:hi] @ B.toarray()[:, lo2:hi2], atol=1e-12)
        np.testing.assert_allclose(Q.toarray(), A.toarray()[lo:hi] @ A.toarray().T[:, lo:hi], atol=1e-12)


def test_transpose_with_axes():

    @dace.program
    def permuted(A: ss.CSR[dace.float64, M, N], x: dace.float64[M], y: dace.float64[N]):
        return np.transpose(A, (1, 0)) @ x, np.transpose(A, axes=(-2, -1)) @ y, np.transpose(A[a:b], (1, 0)).sum(axis=0)

    A = _matrix(6, 5, seed=14)
    x, y = np.arange(6.0), np.arange(5.0)
    p, q, r = permuted(A, x, y, a=1, b=4)
    D = A.toarray()
    np.testing.assert_allclose(p, D.T @ x, atol=1e-12)
    np.testing.assert_allclose(q, D @ y, atol=1e-12)
    np.testing.assert_allclose(r, D[1:4].T.sum(axis=0), atol=1e-12)

    @dace.program
    def bad(A: ss.CSR[dace.float64, M, N]):
        return np.transpose(A, (0, 0))

    with pytest.raises(errors.ShapeError, match=r'axes must be a permutation of \(0, 1\)'):
        bad.to_sdfg()


def test_bounds_by_name_take_the_warm_plan_and_bad_ones_are_named():
    """Symbol values given by name are part of the warm call plan (positional after the
    arguments); a non-integer or a missing one is an ArgumentError naming it."""

    @dace.program
    def rows_of(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
        return A[a:b] @ x

    A = _matrix(10, 8, seed=15)
    x = np.arange(8.0)
    for lo, hi in [(2, 7), (3, 9), (-4, 20), (2, 7)]:
        np.testing.assert_allclose(rows_of(A, x, a=lo, b=hi), A.toarray()[lo:hi] @ x, atol=1e-12)
        np.testing.assert_allclose(rows_of(A=A, x=x, b=hi, a=lo), A.toarray()[lo:hi] @ x, atol=1e-12)
    assert [p.given for ps in rows_of.__dict__['_ss_plans'].values() for p in ps] == [['a', 'b']]
    with pytest.raises(errors.ArgumentError, match=r"a=1\.5: a symbol's value must be an integer"):
        rows_of(A, x, a=1.5, b=4)
    with pytest.raises(errors.ArgumentError, match='missing the value of symbol b'):
        rows_of(A, x, a=1)


def test_mkl_and_the_fpga_target_do_not_read_views():
    """MKL multiplies stored matrices: a node that reads a slice stays on ``cpu`` (the MKL
    trial of ``ss.optimize`` had run it on the whole matrix and crashed the process); the
    FPGA lowering refuses views, naming the node."""
    from sdfgsparse.ops.spmm import SpMM
    from sdfgsparse.targets.fpga.lower import flatten_sparse_arguments
    from sdfgsparse.targets.mkl import expansions as mkl_expansions

    @dace.program
    def sliced_spmm(A: ss.CSR[dace.float64, M, N], X: dace.float64[K, 3]):
        return A[a:b, c:d] @ X

    sdfg = sliced_spmm.to_sdfg()
    (node, state), = [(n, s) for n, s in sdfg.all_nodes_recursive() if isinstance(n, SpMM)]
    assert node.views and 'view of an operand' in mkl_expansions.unsupported(node, state)
    with pytest.raises(errors.UnsupportedOperationError, match='reads a view'):
        flatten_sparse_arguments(sdfg)


def test_one_row_slice_of_a_fixed_shape():
    """A slice of one row with constant bounds: the result (one element) reaches the kernel
    as a scalar in DaCe 1.0.2, which refused the computed row index ("Tried to offset
    address of scalar _y"); the view's coordinate along a one-position dimension is 0."""

    @dace.program
    def one(A: ss.CSR[dace.float64, 6, 5], x: dace.float64[5], B: ss.CSC[dace.float64, 6, 5]):
        return A[2:3] @ x, B[2:3] @ x, A[:, ::-1][2:3] @ x, B[:, 4:5].sum(axis=0)

    A = _matrix(6, 5, seed=12)
    D = A.toarray()
    x = np.arange(5.0)
    got = one(A, x, sp.csc_array(A))
    for g, w in zip(got, (D[2:3] @ x, D[2:3] @ x, D[:, ::-1][2:3] @ x, D[:, 4:5].sum(axis=0))):
        np.testing.assert_allclose(g, w, atol=1e-12)


def test_an_integer_constant_past_64_bits_names_itself(tmp_path):
    """DaCe's frontend raised a bare OverflowError on ``A[::10**21]`` written out."""
    src = ('import dace\nimport sdfgsparse as ss\nM, N = dace.symbol("M"), dace.symbol("N")\n\n'
           '@dace.program\ndef huge(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):\n'
           '    return A[::1000000000000000000000] @ x\n')
    prog = program_from_source(tmp_path, src, 'huge')
    with pytest.raises(errors.UnsupportedOperationError, match=r'huge\(\): the constant 1000000000000000000000 in '
                       r'`return A\[::1000000000000000000000\] @ x` does not fit in a 64-bit integer'):
        prog(_matrix(6, 4, seed=1), np.ones(4))


_STEPPED = {}


@pytest.mark.parametrize('fmt', FORMATS)
def test_slices_of_stepped_slices_in_every_format(fmt):
    """``u @ A[::3][1:]`` and ``A[::3][1:] @ x`` (a bound test on a coordinate that is a
    floor division: BSR's kernel failed to parse), against NumPy."""
    if fmt not in _STEPPED:
        T = getattr(ss, fmt)[dace.float64, M, N]

        @dace.program
        def stepped(A: T, u: dace.float64[K], x: dace.float64[N]):
            return u @ A[::3][1:], A[::3][1:] @ x, A[1::2][::2] @ x

        _STEPPED[fmt] = stepped
    A = _matrix(12, 10, seed=4)
    D = A.toarray()
    rng = np.random.default_rng(2)
    u, x = rng.standard_normal(D[::3][1:].shape[0]), rng.standard_normal(10)
    left, right, twice = _STEPPED[fmt](as_format(A, fmt), u, x)
    np.testing.assert_allclose(left, u @ D[::3][1:], atol=1e-12)
    np.testing.assert_allclose(right, D[::3][1:] @ x, atol=1e-12)
    np.testing.assert_allclose(twice, D[1::2][::2] @ x, atol=1e-12)


def test_elementwise_of_a_transpose():
    """``ss.relu(A.T)`` (refused: 'map_values does not take a transposed operand'), scaling
    and negation of ``A.T``, returned and multiplied, against NumPy."""

    @dace.program
    def on_transpose(A: ss.CSR[dace.float64, M, N], x: dace.float64[M]):
        return ss.relu(A.T), (-A.T) @ x, 2.0 * ss.relu(A.T).T

    A = _matrix(7, 5, seed=11)
    D = A.toarray()
    x = np.arange(7.0)
    R, y, S = on_transpose(A, x)
    np.testing.assert_allclose(R.toarray(), np.maximum(D.T, 0), atol=1e-12)
    np.testing.assert_allclose(y, -D.T @ x, atol=1e-12)
    np.testing.assert_allclose(S.toarray(), 2 * np.maximum(D, 0), atol=1e-12)
