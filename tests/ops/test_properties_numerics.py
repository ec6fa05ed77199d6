"""Property-based numerics (hypothesis), differential against NumPy / scipy:

* integer matrices whose values sit near the ends of ``int32`` (either sign, empty rows and
  columns, COO duplicates) sum like ``np.sum`` / scipy in every reduction (total, per
  column, per row, ``np.sum``, through ``A.T``): in ``int64``, without wrapping;
* matrices holding NaN, +-inf, signed zeros and ordinary values give NumPy's results in
  every element-wise function of ``ss`` (and scaling, negation, softmax, SDDMM), and dense
  operands holding them give NumPy's results in every fused epilogue (``np.maximum``,
  ``np.minimum``, ``np.fmax``, ``np.fmin``, ``np.tanh``): NaN where NumPy has NaN.

Examples are derandomised (the same ones on every run) and no database is kept; each
property runs through programs compiled once.
"""
import dace
import numpy as np
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sdfgsparse as ss
from sparse_zoo import as_format, dense, softmax_reference

M, N, K = dace.symbol('M'), dace.symbol('N'), dace.symbol('K')

SETTINGS = dict(derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck),
                max_examples=25)

I32 = np.iinfo(np.int32)
#: int32 values near overflow, and a few ordinary ones
NEAR_OVERFLOW = st.one_of(st.integers(I32.max - 3, I32.max), st.integers(I32.min, I32.min + 3),
                          st.sampled_from([2**30, -2**30, 0, 1, -1]))
#: float64 values NumPy treats specially, and ordinary ones
SPECIAL = st.one_of(st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, -1e300, 1e300]),
                    st.floats(-8, 8, allow_nan=False))


@st.composite
def matrices(draw, values, dtype):
    """A CSR matrix of shape up to 7 x 7, any density (empty rows and columns), values drawn
    from ``values``."""
    m, n = draw(st.integers(0, 7)), draw(st.integers(0, 7))
    mask = np.array(draw(st.lists(st.booleans(), min_size=m * n, max_size=m * n)), dtype=bool).reshape(m, n)
    data = np.array(draw(st.lists(values, min_size=int(mask.sum()), max_size=int(mask.sum()))), dtype=dtype)
    rows, cols = np.nonzero(mask)
    return sp.csr_array((data, (rows.astype(np.int32), cols.astype(np.int32))), shape=(m, n))


# ---------------------------------------------------------------------- integer reductions
@dace.program
def int_reductions(A: ss.CSR[dace.int32, M, N], C: ss.COO[dace.int32, M, N]):
    return A.sum(), A.sum(axis=0), A.sum(axis=1), np.sum(A, axis=1), A.T.sum(axis=0), C.sum(), C.sum(axis=0), \
        C.sum(axis=1)


@settings(**SETTINGS)
@given(A=matrices(NEAR_OVERFLOW, np.int32), seed=st.integers(0, 2**16))
def test_integer_reductions_near_overflow_are_numpys(A, seed):
    C = as_format(A, 'COO', np.int32, np.random.default_rng(seed))  # unsorted, some entries split in two
    got = int_reductions(A, C)
    total, cols, rows = np.array([A.sum()]), A.sum(axis=0), A.sum(axis=1)
    assert total.dtype == np.int64
    wants = [total, cols, rows, rows, rows, np.array([C.sum()]), C.sum(axis=0), C.sum(axis=1)]  # (C's halves round)
    for k, want in enumerate(wants):
        assert got[k].dtype == np.int64, f'result {k}: dtype {got[k].dtype}'
        np.testing.assert_array_equal(got[k].reshape(-1), want.reshape(-1), err_msg=f'result {k}')


# ---------------------------------------------------------------------- element-wise functions
@dace.program
def nan_elementwise(A: ss.CSR[dace.float64, M, N], X: dace.float64[M, K], Y: dace.float64[K, N]):
    return (ss.relu(A), ss.exp(A), ss.sqrt(A), ss.abs(A), ss.sin(A), ss.tanh(A), ss.square(A), ss.sigmoid(A),
            ss.spones(A), 2.5 * A, -A, ss.softmax(A), ss.sddmm(A, X, Y))


ELEMENTWISE = [lambda v: np.maximum(v, 0), np.exp, np.sqrt, np.abs, np.sin, np.tanh, np.square,
               lambda v: 1 / (1 + np.exp(-v)), np.ones_like, lambda v: 2.5 * v, np.negative]


def _close(got, want, what):
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0, equal_nan=True, err_msg=what)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f'{what}: NaN positions')


@settings(**SETTINGS)
@given(A=matrices(SPECIAL, np.float64), seed=st.integers(0, 2**16))
def test_nan_in_every_elementwise_function(A, seed):
    rng = np.random.default_rng(seed)
    X, Y = rng.standard_normal((A.shape[0], 2)), rng.standard_normal((2, A.shape[1]))
    got = nan_elementwise(A, X, Y)
    with np.errstate(all='ignore'):
        for k, f in enumerate(ELEMENTWISE):
            _close(got[k].data, f(A.data), f'function {k}')
        C = A.tocoo()
        _close(got[11].tocoo().data, softmax_reference(C.row, C.data), 'softmax')
        _close(got[12].tocoo().data, C.data * np.einsum('ij,ji->i', X[C.row], Y[:, C.col]), 'sddmm')


# ---------------------------------------------------------------------- fused epilogues
@dace.program
def nan_fused(A: ss.CSR[dace.float64, M, N], B: dace.float64[N, K], x: dace.float64[N], b: dace.float64[K]):
    return (np.maximum(A @ B + b, 0), np.minimum(A @ x, 0.5), np.fmax(A @ B, 0.0), np.fmin(A @ B, b),
            np.tanh(A @ x))


FUSED = {}


def fused():
    """``nan_fused`` through ``ss.optimize`` (its epilogues fused), built once."""
    if 'prog' not in FUSED:
        FUSED['prog'] = ss.optimize(nan_fused)
        fusable = [n for n, _ in FUSED['prog'].sdfg.all_nodes_recursive() if hasattr(n, 'epilogue')]
        assert sum(bool(n.epilogue) for n in fusable) == 5, 'every epilogue fused'
    return FUSED['prog']


@settings(**SETTINGS)
@given(A=matrices(st.floats(-4, 4, allow_nan=False), np.float64),
       dense_values=st.lists(SPECIAL.filter(lambda v: abs(v) < 1e10 or not np.isfinite(v)), min_size=40, max_size=40))
def test_nan_in_every_fused_epilogue(A, dense_values):
    m, n = A.shape
    vals = np.array(dense_values)
    B, x, b = vals[:n * 3].reshape(n, 3), vals[21:21 + n], vals[30:33]
    got = fused()(A, B, x, b)
    with np.errstate(all='ignore'):
        want = (np.maximum(A @ B + b, 0), np.minimum(A @ x, 0.5), np.fmax(A @ B, 0.0), np.fmin(A @ B, b),
                np.tanh(A @ x))
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(dense(g), w, rtol=1e-10, atol=1e-12, equal_nan=True, err_msg=f'epilogue {k}')
        np.testing.assert_array_equal(np.isnan(dense(g)), np.isnan(w), err_msg=f'epilogue {k}: NaN positions')
