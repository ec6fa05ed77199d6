"""SDDMM with a K x N right operand: Y.T is stored by rows in a buffer the calling thread
keeps between calls (targets/cpu/dense_loops.transposed_rows). Calls of growing, shrinking
and growing sizes, float32, two calling threads, against NumPy; the inputs are not modified."""
import threading

import dace
import numpy as np
import scipy.sparse as sp

import sdfgsparse as ss

M, N, K = dace.symbol('M'), dace.symbol('N'), dace.symbol('K')


@dace.program
def sddmm64(S: ss.CSR[dace.float64, M, N], X: dace.float64[M, K], Y: dace.float64[K, N]):
    return ss.sddmm(S, X, Y)


@dace.program
def sddmm32(S: ss.CSR[dace.float32, M, N], X: dace.float32[M, K], Y: dace.float32[K, N]):
    return ss.sddmm(S, X, Y)


def _inputs(rng, m, n, k, density, dtype=np.float64):
    S = sp.random_array((m, n), density=density, format='csr', rng=rng, dtype=dtype)
    X = rng.standard_normal((m, k)).astype(dtype)
    Y = rng.standard_normal((k, n)).astype(dtype)
    return S, X, Y


def _want(S, X, Y):
    S = sp.csr_array(S)
    rows = np.repeat(np.arange(S.shape[0]), np.diff(S.indptr))
    return S.data * np.einsum('ek,ek->e', X[rows], Y[:, S.indices].T)


def _check(got, S, X, Y, rtol):
    got = sp.csr_array(got)
    assert got.shape == S.shape
    np.testing.assert_array_equal(got.indptr, S.indptr)
    np.testing.assert_array_equal(got.indices, S.indices)
    np.testing.assert_allclose(got.data, _want(S, X, Y), rtol=rtol, atol=rtol)


def test_sizes_grow_shrink_grow(rng):
    """The kept buffer is reused and regrown: each call sees only its own Y."""
    for m, n, k, d in [(5, 7, 3, 0.5), (300, 900, 64, 0.02), (40, 30, 8, 0.3), (0, 4, 2, 0.5), (700, 1200, 70, 0.01),
                       (6, 2, 1, 1.0)]:
        S, X, Y = _inputs(rng, m, n, k, d)
        before = (S.data.copy(), X.copy(), Y.copy())
        _check(sddmm64(S, X, Y), S, X, Y, 1e-12)
        np.testing.assert_array_equal(S.data, before[0])
        np.testing.assert_array_equal(X, before[1])
        np.testing.assert_array_equal(Y, before[2])


def test_float32(rng):
    """A float32 buffer next to the float64 one of the same thread."""
    S, X, Y = _inputs(rng, 120, 200, 16, 0.05, np.float32)
    _check(sddmm32(S, X, Y), S, X, Y, 1e-5)
    S, X, Y = _inputs(rng, 90, 500, 24, 0.05)
    _check(sddmm64(S, X, Y), S, X, Y, 1e-12)


def test_calls_from_two_threads(rng):
    """Each calling thread has its own buffer: concurrent calls with different Y agree."""
    cases = [_inputs(np.random.default_rng(s), 200, 300 + 100 * s, 32, 0.05) for s in range(2)]
    for S, X, Y in cases:  # compile and plan before the threads start
        sddmm64(S, X, Y)
    errors = []

    def work(S, X, Y):
        try:
            for _ in range(20):
                _check(sddmm64(S, X, Y), S, X, Y, 1e-12)
        except Exception as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=c) for c in cases]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
