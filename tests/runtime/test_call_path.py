"""The call path: signatures, the direct call of compiled programs, integer values."""
import dace
import numpy as np
import scipy.sparse as sp

import sdfgsparse as ss

M, N = dace.symbol('M'), dace.symbol('N')


@dace.program
def spmv_any(A, x):
    return A @ x


def test_direct_call_after_first_and_per_signature(rng):
    A = sp.random_array((30, 20), density=0.2, format='csr', rng=rng)
    x = rng.standard_normal(20)
    np.testing.assert_allclose(spmv_any(A, x), A @ x, rtol=1e-12)
    assert len(spmv_any._ss_fast) == 1
    B = sp.random_array((45, 20), density=0.1, format='csr', rng=rng)
    np.testing.assert_allclose(spmv_any(B, x), B @ x, rtol=1e-12)  # same signature, new sizes
    A32, x32 = A.astype(np.float32), x.astype(np.float32)
    np.testing.assert_allclose(spmv_any(A32, x32), A32 @ x32, rtol=1e-5)
    assert len(spmv_any._ss_fast) == 2
    np.testing.assert_allclose(spmv_any(A, 3 * x), A @ (3 * x), rtol=1e-12)  # back to the first build
    assert len(spmv_any._cache.cache) == 2


def test_direct_call_still_validates(rng):
    A = sp.random_array((10, 8), density=0.3, format='csr', rng=rng)
    spmv_any(A, np.ones(8))
    bad = A.copy()
    bad.indices[0] = 99
    import pytest
    with pytest.raises(ss.errors.InvalidIndexError, match=r'A: crd1\[0\] = 99 is out of range'):
        spmv_any(bad, np.ones(8))


@dace.program
def int_ops(A: ss.CSR[dace.int64, M, N], B: ss.CSR[dace.int64, M, N], x: dace.int64[N]):
    return A @ x, A + B, A.sum(axis=1)


def test_integer_values(rng):
    A = sp.random_array((16, 12), density=0.3, format='csr', rng=rng, dtype=np.int64,
                        data_sampler=lambda size: rng.integers(-5, 6, size))
    B = sp.random_array((16, 12), density=0.3, format='csr', rng=rng, dtype=np.int64,
                        data_sampler=lambda size: rng.integers(-5, 6, size))
    x = rng.integers(-3, 4, 12)
    y, S, r = int_ops(A, B, x)
    assert y.dtype == np.int64 and S.dtype == np.int64
    np.testing.assert_array_equal(y, A @ x)
    np.testing.assert_array_equal(S.toarray(), (A + B).toarray())
    np.testing.assert_array_equal(r, A.sum(axis=1))
