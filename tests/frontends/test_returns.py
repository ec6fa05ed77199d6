"""Sparse values leaving a program, and NumPy on sparse operands (issue 33, items 1 and 11).

* ``return A.T`` (a zero-copy view inside the program) returned an all-zero matrix on
  every call path: the view named no storage, and the frontend renamed it ``__return``.
  ``return A`` / ``return A.T.T`` raised a bare ``NotImplementedError``. Each now returns a
  copy (``SparseCopy``), in the caller's library, never aliasing the argument.
* NumPy functions, methods, subscripts, assignments and Python callbacks that DaCe would
  apply to a sparse operand raise ``UnsupportedOperationError`` while parsing, naming the
  function and the operand (they failed deep inside DaCe, or parsed into garbage).
"""
import threading

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse import errors
from sdfgsparse.ops.sparse_copy import SparseCopy

M, N = dace.symbol('M'), dace.symbol('N')

A0 = sp.csr_array([[1., 0, 2], [0, 3, 0]])


@dace.program
def ret_t(A: ss.CSR[dace.float64, M, N]):
    return A.T


@dace.program
def ret_views(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    B = A  # a variable bound to the argument
    y, C = B @ x, A.T  # ... and one bound to its transposed view
    return C, y, B, A.T.T


@dace.program
def ret_any(A):
    return A


def _same(got, want):
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.toarray(), want.toarray() if hasattr(want, 'toarray') else want)


def test_returned_transpose_on_every_path():
    """The issue's example: a 3 x 2 csc_array with A's entries (was one with none), from a
    plain call, ss.compile, ss.optimize and an SDFG through ss.compile."""
    want = A0.T
    paths = {'call': ret_t, 'compile': ss.compile(ret_t), 'sdfg': ss.compile(ret_t.to_sdfg()),
             'optimize': ss.optimize(ret_t)}
    for label, f in paths.items():
        got = f(A0)
        assert got.format == 'csc', label
        _same(got, want)
    sdfg = ret_t.to_sdfg()
    copies = [n for s in sdfg.states() for n in s.nodes() if isinstance(n, SparseCopy)]
    assert len(copies) == 1 and copies[0].transpose_A


def test_returned_views_in_a_tuple_fortran_operand_and_no_aliasing():
    A = sp.csr_array(np.array([[0., 1, 0, 4], [0, 0, 0, 0], [2, 0, 3, 0]]))
    kept = A.copy()
    x = np.asfortranarray(np.arange(8.).reshape(4, 2))[:, 1]  # strided
    at, y, b, att = ret_views(A, x)
    _same(at, A.T)
    np.testing.assert_allclose(y, A.toarray() @ x)
    for r in (b, att):
        assert r.format == 'csr'
        _same(r, A)
        assert not np.shares_memory(r.data, A.data) and not np.shares_memory(r.indices, A.indices)
        r.data[:] = -1  # the caller's matrix is not the result
    _same(A, kept)
    np.testing.assert_array_equal(A.data, kept.data)


@pytest.mark.parametrize('fmt', ['csr', 'csc', 'coo'])
def test_returned_argument_keeps_library_and_format(fmt):
    A = sp.coo_array(([1., 2., 5.], ([0, 2, 0], [1, 0, 1])), shape=(3, 2)).asformat(fmt)  # COO: a duplicate
    got = ret_any(A)
    assert type(got) is type(A)
    _same(got, A)
    assert not np.shares_memory(got.data, A.data)


def test_returned_torch_argument_and_view_are_torch():
    torch = pytest.importorskip('torch')
    T = torch.sparse_csr_tensor(torch.tensor([0, 2, 3]), torch.tensor([0, 2, 1]),
                                torch.tensor([1., 2., 3.], dtype=torch.float64), size=(2, 3))
    got = ret_any(T)
    assert got.layout == torch.sparse_csr
    np.testing.assert_array_equal(got.to_dense().numpy(), T.to_dense().numpy())
    assert got.values().data_ptr() != T.values().data_ptr()
    tt = ret_t(T)
    assert tt.layout == torch.sparse_csc
    np.testing.assert_array_equal(tt.to_dense().numpy(), T.to_dense().numpy().T)


def test_returned_transpose_from_threads():
    rng = np.random.default_rng(33)
    mats = [sp.random_array((5 + i, 4), density=0.4, format='csr', rng=rng) for i in range(8)]
    ret_t(mats[0])  # compiled once
    got = [None] * 8

    def work(i):
        for _ in range(20):
            got[i] = ret_t(mats[i])

    threads = [threading.Thread(target=work, args=(i, )) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for g, A in zip(got, mats):
        _same(g, A.T)


# ---------------------------------------------------------------------- NumPy on sparse operands
def _transpose_axes(A: ss.CSR[dace.float64, M, N]):
    return np.transpose(A, (1, 0), 2)


def _slice(A: ss.CSR[dace.float64, M, N]):
    return A[0]  # an integer index (a slice A[0:1] is a view: tests/frontends/test_sparse_slices.py)


def _slice_view(A: ss.CSR[dace.float64, M, N]):
    return A.T[1]


def _inv(A: ss.CSR[dace.float64, N, N]):
    return np.linalg.inv(A)


def _norm(A: ss.CSR[dace.float64, M, N]):
    return np.linalg.norm(A)  # no replacement in DaCe: a Python callback


def _where(A: ss.CSR[dace.float64, M, N], x: dace.float64[M, N]):
    return np.where(x > 0, A, x)


def _ufunc(A: ss.CSR[dace.float64, M, N]):
    return np.exp(A)


def _astype(A: ss.CSR[dace.float64, M, N]):
    return A.astype(np.float32)


def _len(A: ss.CSR[dace.float64, M, N]):
    return len(A)


def _store_dense(A: ss.CSR[dace.float64, M, N], x: dace.float64[M, N]):
    x[:] = A
    return x


def _store_sparse(A: ss.CSR[dace.float64, M, N]):
    A[0, 1] = 5.0
    return A


def _elementwise(A: ss.CSR[dace.float64, M, N]):
    return dace.elementwise(lambda v: 2 * v, A.T)


UNSUPPORTED = [  # (np.stack and reshapes to other ranks are views: tests/frontends/test_tensor_views.py)
    (_transpose_axes, r'numpy\.transpose with axes=\(1, 0\): A is a sparse'),  # an extra argument
    (_slice, r'A\[0\]: only slices \(start:stop:step\) select'),
    (_slice_view, r'A\.T\[1\]: only slices \(start:stop:step\) select'),
    (_inv, r'numpy\.linalg\.inv: A is a sparse'),
    (_norm, r'numpy\.linalg\.norm \(a Python callback\): A is a sparse'),
    (_where, r'numpy\.where: A is a sparse'),
    (_ufunc, r'numpy\.exp: A is a sparse'),
    (_astype, r'A\.astype\(\): A is a sparse'),
    (_len, r'len: A is a sparse'),
    (_store_dense, r'A assigned into x\[:\]: a sparse matrix cannot be stored'),
    (_store_sparse, r'assignment into A: a sparse matrix .* cannot be written'),
    (_elementwise, r'dace\.elementwise: A\.T is a sparse'),
]


@pytest.mark.parametrize('func, message', UNSUPPORTED, ids=[f.__name__.strip('_') for f, _ in UNSUPPORTED])
def test_numpy_on_sparse_operand_is_a_parse_time_error(func, message):
    with pytest.raises(errors.UnsupportedOperationError, match=message):
        dace.program(func).to_sdfg()


def _copy_and_transpose(A: ss.CSR[dace.float64, M, N]):
    return np.copy(A), A.copy(), np.transpose(A), np.sum(A)


def test_numpy_functions_with_sparse_meaning_still_work():
    """np.copy / A.copy() (a SparseCopy), np.transpose without axes (A.T) and np.sum (A.sum())
    are the sparse operations, not refused."""
    c1, c2, t, s = dace.program(_copy_and_transpose)(A0)
    _same(c1, A0)
    _same(c2, A0)
    _same(t, A0.T)
    np.testing.assert_allclose(s, [A0.sum()])


def _dense_only(x: dace.float64[M, N]):
    return np.concatenate((x, x)), np.transpose(x, (1, 0)), x[1]


def test_numpy_on_dense_operands_is_untouched():
    x = np.arange(6.).reshape(2, 3).copy()
    c, t, s = dace.program(_dense_only)(x)
    np.testing.assert_array_equal(c, np.concatenate((x, x)))
    np.testing.assert_array_equal(t, x.T)
    np.testing.assert_array_equal(s, x[1])
