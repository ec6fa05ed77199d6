"""Property-based tests (hypothesis) of sparse values returned by a program.

The properties: for any matrix (shape 0-9 x 0-9, any density, empty rows, explicit zeros,
COO duplicates and unsorted entries) in any catalogue format that can be an argument,
with float64 or int32 values,
* ``return A, A.T, A.T.T`` gives the argument, its transpose and the argument again, as
  scipy has them (``dense(arg)``, ``dense(arg).T``), in the caller's library: a scipy
  argument gives scipy results of the format scipy gives (``A.T`` of a CSR is a CSC);
* the results share no memory with the argument, which is left as it was;
* ``return A.T`` alone (the single-result path) gives the transpose.

One unannotated program per returned shape, so each (format, dtype) pair compiles once.
Examples are derandomised (the same ones on every run) and no database is kept.
"""
import dace
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sdfgsparse.runtime.container import SparseMatrix
from sparse_zoo import FORMATS, as_format, dense

SETTINGS = dict(derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
DTYPES = [np.float64, np.int32]


@dace.program
def returns_views(A):
    return A, A.T, A.T.T


@dace.program
def returns_transpose(A):
    return A.T


@st.composite
def matrices(draw, dtype, even=False):
    """A CSR matrix of ``dtype``: any shape up to 9 x 9 (even for 2x2 blocks), any density,
    sometimes an explicit zero and an empty row. Integer values are even, so that the COO
    argument's split duplicates (halves) stay exact."""
    m = draw(st.integers(0, 4)) * 2 if even else draw(st.integers(0, 9))
    n = draw(st.integers(0, 4)) * 2 if even else draw(st.integers(0, 9))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    density = draw(st.sampled_from([0.0, 0.2, 0.5, 1.0]))
    D = np.where(rng.random((m, n)) < density, rng.standard_normal((m, n)), 0.0)
    if np.dtype(dtype).kind == 'i':
        D = 2 * np.round(5 * D)
    if m and draw(st.booleans()):
        D[rng.integers(0, m)] = 0
    A = sp.csr_array(D.astype(dtype))
    if A.nnz and draw(st.booleans()):
        A.data[rng.integers(0, A.nnz)] = 0  # an explicit zero
    return A, rng


def _arrays(x):
    """The storage arrays of an argument or result."""
    if isinstance(x, SparseMatrix):
        return list(x.arrays.values())
    return [getattr(x, a) for a in ('data', 'indices', 'indptr', 'row', 'col', 'offsets') if hasattr(x, a)]


def _argument(data, fmt, dtype):
    A, rng = data.draw(matrices(dtype, even=fmt == 'BSR'))
    if fmt == 'DIA':
        assume(min(A.shape) > 0)  # (scipy's dia_array of an empty shape has no diagonals array)
    return as_format(A, fmt, np.int32, rng)


@settings(max_examples=50, **SETTINGS)
@given(data=st.data(), fmt=st.sampled_from(FORMATS), dtype=st.sampled_from(DTYPES))
def test_returned_argument_and_views_against_scipy(data, fmt, dtype):
    arg = _argument(data, fmt, dtype)
    want = dense(arg)
    kept = [a.copy() for a in _arrays(arg)]
    got = returns_views(arg)
    assert len(got) == 3
    for label, g, w in zip(['A', 'A.T', 'A.T.T'], got, [want, want.T, want]):
        assert g.shape == w.shape, (fmt, label)
        np.testing.assert_array_equal(dense(g), w, err_msg=f'{fmt} {np.dtype(dtype)}: {label}')
        assert np.dtype(dense(g).dtype) == np.dtype(dtype), (fmt, label)
        if sp.issparse(arg) and label != 'A.T':  # the caller's library and format
            assert sp.issparse(g) and g.format == arg.format, (fmt, label)
        elif sp.issparse(arg):  # CSR.T is scipy's CSC (and back); other views stay zero-copy views
            if arg.format in ('csr', 'csc'):
                assert sp.issparse(g) and g.format == arg.T.format, (fmt, label)
            else:
                assert isinstance(g, SparseMatrix) and g.format.transpose_name is not None, (fmt, label)
        for a in _arrays(g):
            assert not any(np.shares_memory(a, b) for b in _arrays(arg)), (fmt, label)
    for a, b in zip(_arrays(arg), kept):
        np.testing.assert_array_equal(a, b)


@settings(max_examples=20, **SETTINGS)
@given(data=st.data(), fmt=st.sampled_from(FORMATS))
def test_returned_transpose_alone_against_scipy(data, fmt):
    arg = _argument(data, fmt, np.float64)
    got = returns_transpose(arg)
    assert got.shape == arg.shape[::-1]
    np.testing.assert_array_equal(dense(got), dense(arg).T, err_msg=fmt)
