"""Arrays a program returns can be passed straight back into a program (DaCe 1.0.2 made
them NumPy views, which it refuses as arguments; see _dace_compat patch 6)."""
import dace
import numpy as np
import scipy.sparse as sp

import sdfgsparse as ss

N = dace.symbol('N')


@dace.program
def step(A: ss.CSR[dace.float64, N, N], x: dace.float64[N], r: dace.float64[N]):
    Ap = A @ x
    return x + 0.5 * Ap, r - Ap


def test_tuple_results_feed_the_next_call(rng):
    A = sp.random_array((30, 30), density=0.2, format='csr', rng=rng)
    x, r = rng.standard_normal(30), rng.standard_normal(30)
    wx, wr = x.copy(), r.copy()
    for _ in range(4):
        x, r = step(A, x, r)
        assert x.base is None and r.base is None
        Ap = A @ wx
        wx, wr = wx + 0.5 * Ap, wr - Ap
        np.testing.assert_allclose(x, wx, rtol=1e-12)
        np.testing.assert_allclose(r, wr, rtol=1e-12)


def test_each_call_returns_fresh_arrays(rng):
    A = sp.random_array((10, 10), density=0.3, format='csr', rng=rng)
    x, r = np.ones(10), np.zeros(10)
    x1, r1 = step(A, x, r)
    keep = x1.copy()
    step(A, x1, r1)
    np.testing.assert_array_equal(x1, keep)  # the second call did not write into the first's results
