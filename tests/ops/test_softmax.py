"""``ss.softmax``: the SparseSoftmax node in every format (rows, columns, ``A.T``) and the
host version, against a NumPy reference computed on the stored entries only.

The reference walks the *argument's* storage (``storage_to_coo``), so explicit zeros,
each duplicate of a COO matrix and the zero fill of BSR blocks take part, as they must;
results are compared entry by entry in storage order, and densely where no coordinate
is stored twice. One program per (format, value dtype) computes the three variants, so
each signature compiles once.
"""
import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.ops.softmax import SparseSoftmax
from sdfgsparse.runtime.container import SparseMatrix
from sdfgsparse.runtime.convert import scipy_members, storage_to_coo
from sparse_zoo import FORMATS, as_format, real_matrix, softmax_reference, tol, zoo

M, N = dace.symbol('M'), dace.symbol('N')

_PROGRAMS = {}


def softmax_program(fmt, vt):
    key = (fmt, vt)
    if key not in _PROGRAMS:
        F = ss.BSR.with_block(2, 2) if fmt == 'BSR' else getattr(ss, fmt)
        T = F[vt, M, N]

        if vt == dace.float32:  # rows only: CSC, COO and BSR still take the workspace path

            @dace.program
            def softmaxes(A: T):
                return ss.softmax(A)
        else:

            @dace.program
            def softmaxes(A: T):
                return ss.softmax(A), ss.softmax(A, axis=0), ss.softmax(A.T)

        _PROGRAMS[key] = softmaxes
    return _PROGRAMS[key]


@dace.program
def softmax_i64(A: ss.CSR[dace.int64, M, N]):
    return ss.softmax(A)


# ---------------------------------------------------------------------- reference
def entries(X):
    """(format, rows, cols, vals) of every stored entry of a scipy matrix or SparseMatrix,
    in storage order."""
    if isinstance(X, SparseMatrix):
        fmt, arrays = X.format, X.arrays
    else:
        fmt = ss.BSR.with_block(*X.blocksize) if X.format == 'bsr' else getattr(ss, X.format.upper())
        arrays = scipy_members(X, fmt)
    return (fmt, ) + storage_to_coo(fmt, arrays, X.shape)


def dense_reference(r, c, v, shape, axis):
    """Masked dense softmax (no coordinate stored twice): absent entries are -inf."""
    D = np.full(shape, -np.inf)
    D[r, c] = v
    if axis == 0:
        D = D.T
    mx = D.max(axis=1, keepdims=True) if D.size else D
    E = np.exp(D - np.where(np.isfinite(mx), mx, 0))
    s = E.sum(axis=1, keepdims=True)
    P = np.divide(E, s, out=np.zeros_like(E), where=s > 0)
    return P.T if axis == 0 else P


def check(got, arg, axis, dtype, transposed=False, what=''):
    """``got`` holds softmax over ``arg``'s stored entries along ``axis`` (of ``arg.T``
    when ``transposed``)."""
    _, r, c, v = entries(arg)
    if transposed:
        r, c = c, r
    _, gr, gc, gv = entries(got)
    np.testing.assert_array_equal(gr, r, err_msg=f'{what}: pattern (rows) changed')
    np.testing.assert_array_equal(gc, c, err_msg=f'{what}: pattern (cols) changed')
    assert gv.dtype == np.dtype(dtype), f'{what}: result dtype {gv.dtype}, expected {np.dtype(dtype)}'
    np.testing.assert_allclose(gv, softmax_reference(r if axis == 1 else c, v), **tol(dtype), err_msg=what)
    shape = arg.shape[::-1] if transposed else arg.shape
    if len(set(zip(r.tolist(), c.tolist()))) == r.size:
        want = dense_reference(r, c, v.astype(np.float64), shape, axis)
        np.testing.assert_allclose(got.toarray(), want, **tol(dtype), err_msg=f'{what} (dense)')


def _with_explicit_zeros(dtype):
    """Rows of stored zeros only, a stored zero next to values, an empty row."""
    indptr = np.array([0, 2, 2, 5, 6])
    indices = np.array([0, 3, 0, 1, 2, 3])
    data = np.array([0.0, 0.0, 0.0, 2.0, -1.0, 0.0], dtype=dtype)
    return sp.csr_array((data, indices, indptr), shape=(4, 4))


def _cases(fmt, dtype):
    mats = dict(zoo(dtype))
    mats['explicit_zeros'] = _with_explicit_zeros(dtype)
    mats['large_values'] = sp.csr_array(1000.0 * mats['dense_50'])  # exp overflows without the max
    if fmt == 'BSR':
        mats = {k: v for k, v in mats.items() if v.shape[0] % 2 == 0 and v.shape[1] % 2 == 0}
    return mats


@pytest.mark.parametrize('vt', [dace.float64, dace.float32], ids=['f64', 'f32'])
@pytest.mark.parametrize('fmt', FORMATS)
def test_softmax_every_format(fmt, vt):
    """Rows, columns and ``A.T`` (float64; rows only in float32) over the zoo (empty
    matrix, empty rows and columns, explicit zeros, COO duplicates, values that overflow
    exp without the shift), and the real cora_A in float64 (except DIA, which it would
    fill with padding)."""
    npv = np.dtype(vt.type)
    cases = list(_cases(fmt, npv).items())
    if vt == dace.float64 and fmt != 'DIA':
        cases.append(('cora_A', real_matrix('cora_A')))
    prog = softmax_program(fmt, vt)
    for name, A in cases:
        arg = as_format(A, fmt, np.int32)
        res = prog(arg)
        rows, *cols_tr = res if isinstance(res, tuple) else (res, )
        what = f'{fmt} {npv} {name}'
        check(rows, arg, 1, npv, what=what + ' axis=1')
        if cols_tr:
            check(cols_tr[0], arg, 0, npv, what=what + ' axis=0')
        if len(cols_tr) > 1:
            check(cols_tr[1], arg, 1, npv, transposed=True, what=what + ' A.T')


def test_explicit_zeros_take_part():
    P = softmax_program('CSR', dace.float64)(_with_explicit_zeros(np.float64))[0]
    np.testing.assert_allclose(P.data[:2], [0.5, 0.5])  # a row of two stored zeros
    assert P.nnz == 6 and P.indptr.tolist() == [0, 2, 2, 5, 6]  # the empty row stays empty
    np.testing.assert_allclose(P.data[2:5], np.exp([0, 2, -1]) / np.exp([0, 2, -1]).sum())


def test_integer_values_give_float64():
    A = sp.csr_array(np.array([[1, 0, 3], [0, 0, 0], [2, 2, 0]], dtype=np.int64))
    A.indices, A.indptr = A.indices.astype(np.int32), A.indptr.astype(np.int32)
    P = softmax_i64(A)
    check(P, A, 1, np.float64, what='int64 CSR')


def test_softmax_is_a_library_node():
    sdfg = softmax_program('CSR', dace.float64).to_sdfg()
    nodes = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, SparseSoftmax)]
    assert sorted(n.axis for n in nodes) == [0, 1, 1]
    assert sorted(n.transpose_A for n in nodes) == [False, False, True]


# ---------------------------------------------------------------------- host version
@pytest.mark.parametrize('fmt', ['csr', 'csc', 'coo', 'bsr', 'dia'])
@pytest.mark.parametrize('axis', [1, 0, -1])
def test_host_softmax(fmt, axis):
    A = zoo(np.float64)['empty_rows_cols']
    arg = A.asformat(fmt)
    if fmt == 'coo':
        arg = as_format(A, 'COO', np.int32)  # duplicates, unsorted
    got = ss.softmax(arg, axis=axis)
    assert got.format == (fmt if fmt != 'dia' else 'csr')
    check(got, arg if fmt != 'dia' else sp.csr_array(arg), 1 if axis in (1, -1) else 0, np.float64,
          what=f'host {fmt}')


def test_host_softmax_float32_and_empty():
    A = sp.csr_array(zoo(np.float32)['power_law'])
    got = ss.softmax(A)
    assert got.dtype == np.float32
    check(got, A, 1, np.float32, what='host f32')
    E = ss.softmax(sp.csr_array((3, 5)))
    assert E.shape == (3, 5) and E.nnz == 0


# ---------------------------------------------------------------------- errors
def test_bad_axis_raises_typed_error():
    with pytest.raises(ss.errors.UnsupportedOperationError, match=r'axis=2.*axis must be 1'):
        ss.softmax(sp.eye(3, format='csr'), axis=2)
    with pytest.raises(ss.errors.UnsupportedOperationError, match=r'axis=None'):
        ss.softmax(sp.eye(3, format='csr'), axis=None)

    @dace.program
    def bad_axis(A: ss.CSR[dace.float64, M, N]):
        return ss.softmax(A, axis=2)

    with pytest.raises(ss.errors.UnsupportedOperationError, match=r'axis=2'):
        bad_axis.to_sdfg()


def test_dense_input_raises_typed_error():
    with pytest.raises(ss.errors.UnsupportedOperationError, match='must be a scipy sparse matrix'):
        ss.softmax(np.ones((2, 2)))
