"""Property-based tests (hypothesis): generated matrices in every format, dense operands
in generated layouts, and generated bad inputs, differential against scipy.

The properties:
* any matrix (shape 0-11 x 0-11, any density, empty rows and columns, explicit zeros,
  COO duplicates) in any catalogue format, times dense operands in any memory layout,
  gives scipy's results, and the operands are left as they were;
* any single corruption of a valid CSR matrix's arrays (an index out of range or
  negative, positions that decrease or do not end at nnz, a row out of order, a
  duplicate, a short array) raises an ``ss.errors`` error naming the argument, before
  or after a warm call, and modifies nothing;
* anything that is not an array (strings, None, numbers, lists, tuples, dicts) where
  an array belongs raises ``ArgumentError``.

Examples are derandomised (the same ones on every run) and no database is kept.
"""
import dace
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import sdfgsparse as ss
from sdfgsparse import errors
from sparse_zoo import FORMATS, as_format, dense, tol

M, N, K = dace.symbol('M'), dace.symbol('N'), dace.symbol('K')

SETTINGS = dict(derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))


def _program(fmt):
    F = ss.BSR.with_block(2, 2) if fmt == 'BSR' else getattr(ss, fmt)
    T = F[dace.float64, M, N]

    def prop_ops(A: T, x: dace.float64[N], B: dace.float64[N, K], D: dace.float64[M, N], yt: dace.float64[M]):
        return A @ x, A @ B, A + D, A * D, yt @ A, A.sum(axis=0), A.sum(axis=1)

    prop_ops.__name__ = f'prop_ops_{fmt}'
    return dace.program(prop_ops)


PROGRAMS = {}


def program(fmt):
    if fmt not in PROGRAMS:
        PROGRAMS[fmt] = _program(fmt)
    return PROGRAMS[fmt]


@st.composite
def matrices(draw, even=False):
    """A float64 CSR matrix: any shape up to 11 x 11 (even for 2x2 blocks), any
    density, some explicit zeros, some empty rows."""
    m = draw(st.integers(0, 5)) * 2 if even else draw(st.integers(0, 11))
    n = draw(st.integers(0, 5)) * 2 if even else draw(st.integers(0, 11))
    seed = draw(st.integers(0, 2**32 - 1))
    density = draw(st.sampled_from([0.0, 0.1, 0.4, 1.0]))
    rng = np.random.default_rng(seed)
    D = np.where(rng.random((m, n)) < density, rng.standard_normal((m, n)), 0.0)
    if m and draw(st.booleans()):
        D[rng.integers(0, m)] = 0.0  # an empty row
    A = sp.csr_array(D)
    if A.nnz and draw(st.booleans()):
        A.data[rng.integers(0, A.nnz)] = 0.0  # an explicit zero
    return A


LAYOUTS = ['C', 'F', 'strided', 'reversed']


def _layout(a, how):
    if how == 'F':
        return np.asfortranarray(a)
    if how == 'strided':
        big = np.zeros(tuple(2 * s for s in a.shape) or (1, ))
        view = big[tuple(slice(None, None, 2) for _ in a.shape)]
        view[...] = a
        return view
    if how == 'reversed':
        return a[tuple(slice(None, None, -1) for _ in a.shape)].copy()[tuple(slice(None, None, -1) for _ in a.shape)]
    return a


@settings(max_examples=60, **SETTINGS)
@given(data=st.data(), fmt=st.sampled_from(FORMATS), how=st.sampled_from(LAYOUTS), k=st.integers(1, 3))
def test_every_format_and_layout_against_scipy(data, fmt, how, k):
    A = data.draw(matrices(even=fmt == 'BSR'))
    m, n = A.shape
    if fmt == 'DIA':
        assume(m > 0 and n > 0)  # (scipy's dia_array of an empty shape has no diagonals array)
    rng = np.random.default_rng(m * 100 + n)
    x, B = rng.standard_normal(n), rng.standard_normal((n, k))
    D, yt = rng.standard_normal((m, n)), rng.standard_normal(m)
    ops = {name: _layout(v, how) for name, v in dict(x=x, B=B, D=D, yt=yt).items()}
    kept = {name: v.copy() for name, v in ops.items()}
    got = program(fmt)(as_format(A, fmt, np.int32, rng), **ops)
    Ad = A.toarray()
    want = [Ad @ x, Ad @ B, Ad + D, Ad * D, yt @ Ad, Ad.sum(axis=0), Ad.sum(axis=1)]
    for label, g, w in zip(['A@x', 'A@B', 'A+D', 'A*D', 'yt@A', 'sum0', 'sum1'], got, want):
        np.testing.assert_allclose(dense(g).reshape(w.shape), w, **tol(np.float64), err_msg=f'{fmt} {how}: {label}')
    for name, v in ops.items():
        np.testing.assert_array_equal(v, kept[name])


@dace.program
def prop_spmv(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


CORRUPTIONS = ['index_out_of_range', 'index_negative', 'indptr_decreases', 'indptr_end', 'indptr_start', 'unsorted',
               'duplicate', 'short_indices', 'short_data', 'short_indptr']


def _corrupt(A, how, rng):
    """A copy of CSR ``A`` with one defect; None when ``A`` cannot hold it."""
    data, indices, indptr = A.data.copy(), A.indices.copy(), A.indptr.copy()
    m, n = A.shape
    lengths = np.diff(indptr)
    long_rows = np.flatnonzero(lengths >= 2)
    if how == 'index_out_of_range' and A.nnz:
        indices[rng.integers(0, A.nnz)] = n + rng.integers(0, 3)
    elif how == 'index_negative' and A.nnz:
        indices[rng.integers(0, A.nnz)] = -1 - rng.integers(0, 3)
    elif how == 'indptr_decreases' and m >= 2 and A.nnz:
        at = rng.integers(1, m)
        indptr[at] = indptr[at + 1] + 1 if indptr[at + 1] < A.nnz else A.nnz + 1
        if np.all(np.diff(indptr) >= 0):
            return None
    elif how == 'indptr_end':
        indptr[-1] += 1
    elif how == 'indptr_start' and A.nnz:
        indptr[0] = 1
    elif how == 'unsorted' and long_rows.size:
        r = long_rows[0]
        lo = indptr[r]
        indices[lo], indices[lo + 1] = indices[lo + 1], indices[lo]
    elif how == 'duplicate' and long_rows.size:
        r = long_rows[0]
        indices[indptr[r] + 1] = indices[indptr[r]]
    elif how == 'short_indices' and A.nnz:
        indices = indices[:-1]
    elif how == 'short_data' and A.nnz:
        data = data[:-1]
    elif how == 'short_indptr':
        indptr = indptr[:-1]
    else:
        return None
    B = sp.csr_array(A.shape)
    B.data, B.indices, B.indptr = data, indices, indptr
    return B


@settings(max_examples=80, **SETTINGS)
@given(A=matrices(), how=st.sampled_from(CORRUPTIONS), warm=st.booleans(), seed=st.integers(0, 1000))
def test_every_corruption_is_a_typed_error(A, how, warm, seed):
    rng = np.random.default_rng(seed)
    bad = _corrupt(A, how, rng)
    assume(bad is not None)
    x = np.ones(A.shape[1])
    if warm:
        prop_spmv(A, x)
        prop_spmv(A, x)
    kept = (bad.data.copy(), bad.indices.copy(), bad.indptr.copy())
    with pytest.raises(errors.SparseError, match='^A: '):
        prop_spmv(bad, x)
    for got, want in zip((bad.data, bad.indices, bad.indptr), kept):
        np.testing.assert_array_equal(got, want)


@settings(max_examples=40, **SETTINGS)
@given(junk=st.one_of(st.none(), st.text(max_size=5), st.integers(), st.floats(), st.booleans(),
                      st.lists(st.floats(), max_size=4), st.tuples(st.integers(), st.integers()),
                      st.dictionaries(st.text(max_size=2), st.integers(), max_size=2)))
def test_junk_where_an_array_belongs(junk):
    A = sp.csr_array(np.eye(3))
    with pytest.raises(errors.ArgumentError, match='^x: expected a NumPy array'):
        prop_spmv(A, junk)
    with pytest.raises(errors.SparseError, match='^A: '):
        prop_spmv(junk, np.ones(3))
