"""Property-based tests (hypothesis) of arguments that share memory (runtime/aliasing.py).

The property: ``x`` and ``y`` drawn as views of one buffer (any offset, step 1 or 2,
forwards or reversed, overlapping or not, or the very same array), and called as
``y[:] = A @ x`` and ``y[:] += A @ x``, the buffer afterwards is NumPy's: the right-hand
side computed from the values before the call, then assigned into ``y``'s elements, and
no other element of the buffer changes. Every call is made twice, so the first runs the
full path and the second the warm plan. Examples are derandomised; no database is kept.
"""
import numpy as np
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_aliasing import alias_spmv_acc, alias_spmv_out  # (tests/runtime is on the path)

SETTINGS = dict(derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck),
                max_examples=60)


@st.composite
def view_of(draw, size: int, n: int):
    """Indices of a view of ``n`` elements of a buffer of ``size``: (start, step)."""
    step = draw(st.sampled_from([1, 2, -1, -2]))
    span = (n - 1) * abs(step) + 1
    first = draw(st.integers(0, size - span))
    return (first, step) if step > 0 else (first + span - 1, step)


@st.composite
def aliased_calls(draw):
    n = draw(st.integers(1, 11))
    size = draw(st.integers(2 * n, 3 * n + 2))
    x, y = draw(view_of(size, n)), draw(view_of(size, n))
    if draw(st.booleans()):
        y = x  # the very same elements
    density = draw(st.sampled_from([0.0, 0.3, 1.0]))
    seed = draw(st.integers(0, 2**32 - 1))
    return n, size, x, y, density, seed


def _view(buf, where, n):
    first, step = where
    stop = first + step * n
    return buf[first:stop if stop >= 0 else None:step]


@settings(**SETTINGS)
@given(call=aliased_calls(), accumulate=st.booleans())
def test_aliased_views_give_numpys_result(call, accumulate):
    n, size, xw, yw, density, seed = call
    rng = np.random.default_rng(seed)
    A = sp.random_array((n, n), density=density, format='csr', rng=rng, dtype=np.float64)
    A.indices, A.indptr = A.indices.astype(np.int32), A.indptr.astype(np.int32)
    prog = alias_spmv_acc if accumulate else alias_spmv_out
    for _ in range(2):  # full path, then the warm plan
        buf = rng.standard_normal(size)
        want = buf.copy()
        wx, wy = _view(want, xw, n), _view(want, yw, n)
        rhs = A @ wx.copy()
        if accumulate:
            wy += rhs
        else:
            wy[:] = rhs
        prog(A, _view(buf, xw, n), _view(buf, yw, n))
        np.testing.assert_allclose(buf, want, rtol=1e-12, atol=1e-12)
