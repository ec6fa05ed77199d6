"""Sums of sparse matrices accumulate in NumPy's dtype (:func:`sdfgsparse.ops.reduce.sum_dtype`):
``int32`` values sum in ``int64``, as ``np.sum`` and scipy's ``A.sum()`` do, floats keep
their dtype. Before, a row of four ``int32`` entries of ``2**30`` summed to 0 (an ``int32``
result). Checked for ``A.sum()``, ``A.sum(axis=0 / 1)``, ``np.sum(A, ...)``, a transposed
view and a COO (scatter) operand, in the ``cpu`` and ``pure`` expansions, on the plain
call, ``ss.compile`` and ``ss.optimize``; the result dtype is the one the SDFG declares.
"""
import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.ops.reduce import sum_dtype

M, N = dace.symbol('M'), dace.symbol('N')

#: (name, reference on the scipy CSR int32 matrix A, the COO twin C and the float32 F)
SUMS = [
    ('A.sum()', lambda A, F: np.array([A.sum()])),
    ('A.sum(axis=0)', lambda A, F: A.sum(axis=0)),
    ('A.sum(axis=1)', lambda A, F: A.sum(axis=1)),
    ('np.sum(A)', lambda A, F: np.array([np.sum(A)])),
    ('np.sum(A, axis=0)', lambda A, F: np.sum(A, axis=0)),
    ('np.sum(A, axis=1)', lambda A, F: np.sum(A, axis=1)),
    ('A.T.sum(axis=1)', lambda A, F: A.T.sum(axis=1)),
    ('C.sum(axis=1)', lambda A, F: A.sum(axis=1)),
    ('np.sum(C, axis=0)', lambda A, F: A.sum(axis=0)),
    ('F.sum(axis=1)', lambda A, F: F.sum(axis=1)),
]


def _program(impl):

    def sums(A: ss.CSR[dace.int32, M, N], C: ss.COO[dace.int32, M, N], F: ss.CSR[dace.float32, M, N]):
        return (A.sum(), A.sum(axis=0), A.sum(axis=1), np.sum(A), np.sum(A, axis=0), np.sum(A, axis=1),
                A.T.sum(axis=1), C.sum(axis=1), np.sum(C, axis=0), F.sum(axis=1))

    sums.__name__ = f'int_sums_{impl}'
    return dace.program(sums)


PROGRAMS = {impl: _program(impl) for impl in ('cpu', 'pure')}


def near_overflow():
    """int32 values whose row, column and total sums leave int32 (both signs), and an empty row."""
    big, low = 2**30, -2**31
    d = np.array([[big, big, big, big], [low, low, 0, 1], [0, 0, 0, 0], [big, 7, low, big]], dtype=np.int32)
    return sp.csr_array(d)


def _arguments(A):
    F = sp.csr_array(A.astype(np.float32))
    return A, sp.coo_array(A), F


def _check(results, A, what):
    F = _arguments(A)[2]
    assert len(results) == len(SUMS)
    for (name, ref), got in zip(SUMS, results):
        want = np.asarray(ref(A, F)).reshape(-1)
        assert got.dtype == want.dtype, f'{what} {name}: dtype {got.dtype}, NumPy/scipy give {want.dtype}'
        np.testing.assert_array_equal(np.asarray(got).reshape(-1), want, err_msg=f'{what} {name}')


@pytest.mark.parametrize('dtype', [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                                   np.uint64, np.float16, np.float32, np.float64])
def test_sum_dtype_is_numpys(dtype):
    t = dace.dtypes.dtype_to_typeclass(dtype)
    assert sum_dtype(t) == dace.dtypes.dtype_to_typeclass(np.sum(np.zeros(2, dtype)).dtype.type)


@pytest.mark.parametrize('impl', ['cpu', 'pure'])
def test_integer_sums_widen_like_numpy(impl):
    A = near_overflow()
    assert A.sum(axis=1)[0] == 4 * 2**30  # (the reference itself leaves int32)
    with ss.targets.use_implementation(impl if impl == 'pure' else None):
        results = PROGRAMS[impl](*_arguments(A))
    _check(results, A, impl)


def test_declared_dtypes_on_compile_and_optimize():
    """The SDFG declares the accumulator's dtype for each sum, and ``ss.compile`` and
    ``ss.optimize`` return it."""
    A = near_overflow()
    sdfg = PROGRAMS['cpu'].to_sdfg()
    declared = [sdfg.arrays[n].dtype for n in sorted((n for n in sdfg.arrays if n.startswith('__return')),
                                                     key=lambda n: int(n.rsplit('_', 1)[1]))]
    assert declared == [dace.int64] * 9 + [dace.float32]
    _check(ss.compile(PROGRAMS['cpu'])(*_arguments(A)), A, 'ss.compile')
    _check(ss.optimize(PROGRAMS['cpu'])(*_arguments(A)), A, 'ss.optimize')
