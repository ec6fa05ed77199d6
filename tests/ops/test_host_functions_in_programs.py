"""Every function of ``ss`` that computes on matrices works inside a ``@dace.program`` and on
host values alike, with the same results, which are NumPy's / scipy's.

The functions are enumerated from the module (every public function of ``sdfgsparse``):
one missing from :data:`CASES` and not listed in :data:`NOT_ON_VALUES` fails
:func:`test_every_function_is_covered`. One program per value dtype (float32, float64, int32)
calls them all, on a matrix with NaN, +-inf, a negative value (``sqrt``: NaN), an explicit
zero and an empty row, and one for int32 values (float functions give float64, as in
NumPy). (``ss.tanh`` inside a program did not build: its kernel statement did not know
``math.tanh``; ``ss.sqrt`` of int32 values in a program took C's integer overload:
``sqrt(2)`` was 1.)
"""
import inspect

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sparse_zoo import dense, softmax_reference, tol

M, N, K = dace.symbol('M'), dace.symbol('N'), dace.symbol('K')

#: public functions of ``ss`` that do not compute on matrices, and why
NOT_ON_VALUES = {
    'compile': 'builds a program',
    'optimize': 'transforms a program',
    'set_validation': 'a runtime setting',
    'record_examples': 'notes on an SDFG',
    'to_device': 'a copy to GPU memory (tests/targets/test_gpu_ops.py)',
}


def _on_values(f):
    """Reference for an element-wise function of the stored values (scipy's pattern kept)."""

    def ref(A, X, Y):
        B = A.copy()
        with np.errstate(all='ignore'):
            B.data = f(B.data)
        return B

    return ref


def _sddmm(A, X, Y):
    C = A.tocoo()
    return sp.coo_array((C.data * np.einsum('ij,ji->i', X[C.row], Y[:, C.col]), (C.row, C.col)), shape=A.shape)


def _softmax(A, X, Y):
    C = A.tocoo()
    with np.errstate(all='ignore'):
        p = softmax_reference(C.row, C.data).astype(A.dtype if A.dtype.kind == 'f' else np.float64)
    return sp.coo_array((p, (C.row, C.col)), shape=A.shape)


#: name -> (host call, NumPy/scipy reference); the program below returns them in this order
CASES = {
    'relu': (lambda A, X, Y: ss.relu(A), _on_values(lambda v: np.maximum(v, 0))),
    'exp': (lambda A, X, Y: ss.exp(A), _on_values(np.exp)),
    'sqrt': (lambda A, X, Y: ss.sqrt(A), _on_values(np.sqrt)),
    'abs': (lambda A, X, Y: ss.abs(A), _on_values(np.abs)),
    'sin': (lambda A, X, Y: ss.sin(A), _on_values(np.sin)),
    'tanh': (lambda A, X, Y: ss.tanh(A), _on_values(np.tanh)),
    'square': (lambda A, X, Y: ss.square(A), _on_values(np.square)),
    'sigmoid': (lambda A, X, Y: ss.sigmoid(A), _on_values(lambda v: 1 / (1 + np.exp(-v)))),
    'spones': (lambda A, X, Y: ss.spones(A), _on_values(np.ones_like)),
    'sddmm': (lambda A, X, Y: ss.sddmm(A, X, Y), _sddmm),
    'softmax': (lambda A, X, Y: ss.softmax(A), _softmax),
    'convert': (lambda A, X, Y: ss.convert(A, ss.CSC), lambda A, X, Y: sp.csc_array(A)),
}


def _program(vt):

    def host_functions(A: ss.CSR[vt, M, N], X: vt[M, K], Y: vt[K, N]):
        return (ss.relu(A), ss.exp(A), ss.sqrt(A), ss.abs(A), ss.sin(A), ss.tanh(A), ss.square(A), ss.sigmoid(A),
                ss.spones(A), ss.sddmm(A, X, Y), ss.softmax(A), ss.convert(A, ss.CSC))

    host_functions.__name__ = f'host_functions_{np.dtype(vt.type).name}'
    return dace.program(host_functions)


PROGRAMS = {}


def program(dtype):
    if dtype not in PROGRAMS:
        PROGRAMS[dtype] = _program(dace.dtypes.dtype_to_typeclass(dtype))
    return PROGRAMS[dtype]


def special(dtype):
    """NaN, +-inf, a negative value, an explicit zero, an empty row (rows are softmax's
    lines: NaN and inf spoil only theirs)."""
    nan, inf = np.nan, np.inf
    indptr = np.array([0, 2, 4, 4, 7, 9], dtype=np.int32)
    indices = np.array([0, 2, 1, 3, 0, 1, 3, 2, 3], dtype=np.int32)
    data = np.array([nan, 1.0, -inf, 2.0, 0.0, -1.5, 0.25, inf, 3.0], dtype=dtype)
    return sp.csr_array((data, indices, indptr), shape=(5, 4))


def integers(dtype):
    """Negative values (``sqrt``: NaN), an explicit zero, an empty row; float functions of
    integer values are float64, as in NumPy."""
    indptr = np.array([0, 2, 4, 4, 7, 9], dtype=np.int32)
    indices = np.array([0, 2, 1, 3, 0, 1, 3, 2, 3], dtype=np.int32)
    data = np.array([3, 1, -4, 2, 0, -1, 7, 5, 2], dtype=dtype)
    return sp.csr_array((data, indices, indptr), shape=(5, 4))


def public_functions():
    return sorted(n for n, v in vars(ss).items() if not n.startswith('_') and inspect.isfunction(v))


def test_every_function_is_covered():
    """A new public function of ``ss`` needs a case here (or a reason in NOT_ON_VALUES)."""
    missing = set(public_functions()) - set(CASES) - set(NOT_ON_VALUES)
    assert not missing, f'ss functions without an in-program test: {sorted(missing)}'
    assert set(CASES) <= set(public_functions()), 'a case for a function ss no longer has'
    assert set(ss.__all__) >= set(CASES)


def _same(got, want, dtype, what):
    g, w = dense(got), dense(want)
    assert g.shape == w.shape, f'{what}: shape {g.shape} != {w.shape}'
    np.testing.assert_allclose(g, w, equal_nan=True, **tol(dtype), err_msg=what)


@pytest.mark.parametrize('dtype', [np.float32, np.float64, np.int32])
def test_in_program_equals_host_equals_numpy(dtype, rng):
    A = special(dtype) if np.dtype(dtype).kind == 'f' else integers(dtype)
    X = (rng.standard_normal((5, 3)) * 3).astype(dtype)
    Y = (rng.standard_normal((3, 4)) * 3).astype(dtype)
    results = program(dtype)(A, X, Y)
    assert len(results) == len(CASES)
    for (name, (host, ref)), got in zip(CASES.items(), results):
        with np.errstate(all='ignore'):
            on_host = host(A, X, Y)
        want = ref(A, X, Y)
        _same(on_host, want, dtype, f'ss.{name} on the host vs NumPy/scipy')
        _same(got, want, dtype, f'ss.{name} in a program vs NumPy/scipy')
        assert dense(got).dtype == dense(on_host).dtype == dense(want).dtype, f'ss.{name}: dtype'
        if name != 'convert':  # pattern kept: NaN where the host has NaN, in stored order
            gv = got.data if sp.issparse(got) else got.arrays['vals']
            np.testing.assert_array_equal(np.isnan(gv), np.isnan(on_host.data), err_msg=f'ss.{name}: NaN slots')
    if np.dtype(dtype).kind == 'f':
        assert np.isnan(dense(results[0])[0, 0]), 'ss.relu(nan) is nan (NumPy, torch)'


@pytest.mark.parametrize('name', ['relu', 'exp', 'sqrt', 'abs', 'sin', 'tanh', 'square', 'sigmoid', 'spones'])
@pytest.mark.parametrize('bad, error', [('x', ss.errors.ArgumentError), (None, ss.errors.ArgumentError),
                                        (np.array(['a', 'b']), ss.errors.DTypeError)])
def test_host_functions_name_a_bad_argument(name, bad, error):
    """A string, None or an array of strings is an error naming ``A``, not NumPy's ufunc
    error; a sparse argument goes through the runtime's argument check (registered on import)."""
    with pytest.raises(error, match=r'^A: '):
        getattr(ss, name)(bad)
    broken = sp.csr_array((np.ones(2), np.array([0, 9]), np.array([0, 1, 2])), shape=(2, 3))
    with pytest.raises(ss.errors.SparseError, match='A'):
        getattr(ss, name)(broken)
    assert getattr(ss, name)(np.zeros(2)).shape == (2, )  # dense arrays still work
