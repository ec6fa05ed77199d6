"""Sparse types with fixed sizes (``ss.CSR[dace.float32, 6, 4]``), as the torch frontend
writes for weights. Before: every program with one failed DaCe's validation ("Memlet
subset out-of-bounds (A.pos1[0:7])"), which checked the member view against the
structure's shape."""
import dace
import numpy as np
import scipy.sparse as sp

import sdfgsparse as ss

K = dace.symbol('K')


@dace.program
def fixed_products(A: ss.CSR[dace.float32, 6, 4], B: ss.CSR[dace.float32, 6, 4], C: ss.CSC[dace.float32, 4, 6],
                   X: dace.float32[4, K], x: dace.float32[4]):
    return A @ X, A @ x, A + B, C.T @ X, ss.relu(A).sum(axis=1), C * 2.0, A @ C


def test_fixed_size_sparse_types_against_scipy(rng):
    A, B = (sp.random_array((6, 4), density=0.5, format='csr', rng=rng, dtype=np.float32) for _ in range(2))
    C = sp.random_array((4, 6), density=0.4, format='csc', rng=rng, dtype=np.float32)
    X, x = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    got = fixed_products(A, B, C, X, x)
    want = [A @ X, A @ x, (A + B).toarray(), C.T @ X, np.maximum(A.toarray(), 0).sum(axis=1), 2 * C.toarray(),
            (A @ C).toarray()]
    for k, (g, w) in enumerate(zip(got, want)):
        g = g.toarray() if hasattr(g, 'toarray') else np.asarray(g)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f'result {k}')
