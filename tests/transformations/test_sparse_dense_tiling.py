"""SparseDenseTiling: tile sizes from the data-movement model, differential runs of tiled
SpMM (scatter and row-owned walks, partial last tile, fused epilogue), JSON round trip, and
refusals."""
import copy

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.analysis.tiling import machine_cache_bytes, spmm_dense_tile
from sdfgsparse.ops.spmm import SpMM
from sdfgsparse.transformations import SparseDenseTiling, SparseEpilogueFusion
from sparse_zoo import real_matrix

M, N, K = (dace.symbol(s) for s in 'MNK')


@dace.program
def atb(A: ss.CSR[dace.float64, N, M], B: dace.float64[N, K]):
    return A.T @ B


@dace.program
def csc_relu(A: ss.CSC[dace.float64, M, N], B: dace.float64[N, K]):
    return np.maximum(A @ B, 0)


@dace.program
def csr_spmm(A: ss.CSR[dace.float64, M, N], B: dace.float64[N, K]):
    return A @ B


def _spmm(sdfg):
    (node, ) = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, SpMM)]
    return node


def test_tile_model():
    # scatter: the working set (rows + cols) * J fits, capped by K / units (two per thread
    # when there are several), a multiple of 8
    assert spmm_dense_tile(1000, 1000, 64, cache_words=2000 * 24, scatter=True, threads=1) == 24
    assert spmm_dense_tile(1000, 1000, 64, cache_words=10**9, scatter=True, threads=2) == 16
    assert spmm_dense_tile(1000, 1000, 256, cache_words=10**9, scatter=True, threads=4) == 32
    assert spmm_dense_tile(1000, 1000, 64, cache_words=10**9, scatter=True, threads=1) == 64
    assert spmm_dense_tile(10**6, 10**6, 64, cache_words=1000, scatter=True, threads=1) == 8  # never below a vector
    assert spmm_dense_tile(1000, 1000, 8, cache_words=10**9, scatter=True) == 0  # K within one vector: nothing to tile
    # row-owned walks are not tiled by the model (measured slower; see the module docstring)
    assert spmm_dense_tile(1000, 10**6, 256, cache_words=10**5, scatter=False) == 0
    assert machine_cache_bytes(2) > 0


@pytest.mark.parametrize('prog,fmt', [(atb, 'csr'), (csc_relu, 'csc')], ids=['A.T-of-csr', 'csc+relu'])
def test_tiled_scatter_agrees(prog, fmt, rng):
    A0 = real_matrix('cora_A')
    sdfg = prog.to_sdfg()
    sdfg.apply_transformations_repeated(SparseEpilogueFusion)
    before = copy.deepcopy(sdfg)
    n = A0.shape[0]
    applied = sdfg.apply_transformations(SparseDenseTiling,
                                         options={'sizes': {'M': n, 'N': n, 'K': 20}, 'cache_bytes': 8 * 2 * n * 8,
                                                  'threads': 1})
    sdfg.validate()
    assert applied == 1 and _spmm(sdfg).dense_tile == 8  # 20 columns: tiles of 8, 8 and 4
    a, b = ss.compile(before), ss.compile(sdfg)
    for A in (sp.random_array((50, 50), density=0.1, format='csr', rng=rng), A0):
        A = A.asformat(fmt)
        B = rng.standard_normal((A.shape[0], 20))
        want = A.T @ B if prog is atb else np.maximum(A @ B, 0)
        np.testing.assert_allclose(b(A=A, B=B), a(A=A, B=B), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(b(A=A, B=B), want, rtol=1e-10, atol=1e-12)
        # a K the tile was not chosen for still gives the right result
        B = rng.standard_normal((A.shape[0], 3))
        want = A.T @ B if prog is atb else np.maximum(A @ B, 0)
        np.testing.assert_allclose(b(A=A, B=B), want, rtol=1e-10, atol=1e-12)


def test_hand_set_row_owned_tile_agrees(rng):
    """The model does not tile row-owned walks, but the expansion supports a tile set by hand."""
    sdfg = csr_spmm.to_sdfg()
    _spmm(sdfg).dense_tile = 8
    prog = ss.compile(sdfg)
    A = sp.random_array((40, 30), density=0.2, format='csr', rng=rng)
    B = rng.standard_normal((30, 19))
    np.testing.assert_allclose(prog(A=A, B=B), A @ B, rtol=1e-12, atol=1e-12)


def test_refuses_without_sizes_or_when_tiled():
    sdfg = atb.to_sdfg()
    assert sdfg.apply_transformations(SparseDenseTiling) == 0  # sizes unknown
    opts = {'sizes': {'M': 100, 'N': 100, 'K': 64}}
    assert sdfg.apply_transformations(SparseDenseTiling, options=opts) == 1
    assert sdfg.apply_transformations(SparseDenseTiling, options=opts) == 0  # already tiled
    sdfg = csr_spmm.to_sdfg()
    assert sdfg.apply_transformations(SparseDenseTiling, options=opts) == 0  # row-owned: the model says no


def test_round_trips_through_json():
    sdfg = atb.to_sdfg()
    sdfg.apply_transformations(SparseDenseTiling, options={'sizes': {'M': 100, 'N': 100, 'K': 64}, 'threads': 2})
    again = dace.SDFG.from_json(sdfg.to_json())
    assert _spmm(again).dense_tile == 16
    xf = SparseDenseTiling()
    xf.cache_bytes, xf.sizes = 1 << 20, {'K': 64}
    back = SparseDenseTiling.from_json(xf.to_json())
    assert back.cache_bytes == 1 << 20 and dict(back.sizes) == {'K': 64} and back.CATEGORY == 'Sparse'
