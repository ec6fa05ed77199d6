"""The FPGA streaming writer applies fused ``np.maximum`` / ``np.minimum`` epilogues as NumPy
does: NaN in either operand gives NaN (C-simulation; ``_dace_compat`` patch 23 gives the
tasklets the NaN-propagating code, which the writer copies lane by lane)."""
import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.targets.fpga import design_of

pytestmark = [pytest.mark.filterwarnings('ignore::UserWarning'), pytest.mark.xdist_group('fpga')]

M, N, K = dace.symbol('M'), dace.symbol('N'), dace.symbol('K')


@dace.program
def fpga_nan_epilogues(A: ss.CSR[dace.float32, M, N, dace.int32], X: dace.float32[N, K], b: dace.float32[K]):
    return np.maximum(A @ X + b, 0), np.minimum(A @ X, b)


def test_streamed_extrema_keep_nan():
    opt = ss.optimize(fpga_nan_epilogues, target='fpga')
    low = opt.lowered
    assert sorted(bool(design_of(st)['epilogue']) for st in low.states() if design_of(st)) == [True, True]
    rng = np.random.default_rng(5)
    A = sp.random_array((12, 9), density=0.3, format='csr', dtype=np.float32, rng=rng)
    A.indices = A.indices.astype(np.int32)
    A.indptr = A.indptr.astype(np.int32)
    X = rng.standard_normal((9, 5)).astype(np.float32)
    X[2, 1] = X[4, 3] = np.nan
    b = np.array([0.5, np.nan, -0.25, 1.0, 0.0], dtype=np.float32)
    Y = A @ X  # scipy: stored entries only
    want = (np.maximum(Y + b, 0), np.minimum(Y, b))
    assert np.isnan(want[0]).any() and np.isnan(want[1]).any()
    for k, (g, w) in enumerate(zip(opt(A, X, b), want)):
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=f'result {k}: NaN positions')
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4, equal_nan=True, err_msg=f'result {k}')
