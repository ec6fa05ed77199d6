"""SparseDenseTiling: tile sizes from the data-movement model, differential runs of tiled
SpMM (scatter and row-owned walks, partial last tile, fused epilogue), JSON round trip, and
refusals."""
import copy

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.analysis.schedules import Machine, spmm_tile_decision
from sdfgsparse.analysis.tiling import machine_cache_bytes
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
    # scatter walk whose 16-column tiles (two threads) overflow the cache but 8-column ones fit
    m = Machine(llc=2000 * 8 * 8 * 2, l2=128 << 10, threads=2)
    d = spmm_tile_decision('x', 1000, 1000, 50_000, 64, True, 16, m)
    assert d.default == 'tile 16' and d.chosen == 'tile 8' and d.applies and d.saving > 0.1
    assert d.candidate('tile 8').param == 8 and d.candidate('tile 8').cost < d.candidate('tile 16').cost
    # everything in the cache: one more walk over A buys nothing, the default stays
    d = spmm_tile_decision('x', 100, 100, 1000, 64, True, 16, Machine(llc=32 << 20, l2=1 << 20, threads=2))
    assert d.chosen == d.default == 'tile 16' and not d.applies
    assert {c.name for c in d.candidates} == {'tile 8', 'tile 16'}  # two threads: at most K / 4 per tile
    # one thread: a single walk is a candidate too
    d = spmm_tile_decision('x', 100, 100, 1000, 64, True, 16, Machine(llc=32 << 20, l2=1 << 20, threads=1))
    assert 'one walk' in {c.name for c in d.candidates}
    # row-owned walk whose B fits: untiled (one walk)
    d = spmm_tile_decision('x', 1000, 1000, 10_000, 64, False, 0, Machine(llc=32 << 20, l2=1 << 20, threads=2))
    assert d.chosen == d.default == 'one walk'
    assert machine_cache_bytes(2) > 0


@pytest.mark.parametrize('prog,fmt', [(atb, 'csr'), (csc_relu, 'csc')], ids=['A.T-of-csr', 'csc+relu'])
def test_tiled_scatter_agrees(prog, fmt, rng):
    A0 = real_matrix('cora_A')
    sdfg = prog.to_sdfg()
    sdfg.apply_transformations_repeated(SparseEpilogueFusion)
    before = copy.deepcopy(sdfg)
    n = A0.shape[0]
    # a last-level cache of 2 n rows of 8 doubles: 8-column tiles fit, the default 16 do not
    opts = {'sizes': {'M': n, 'N': n, 'K': 20, _nnz_symbol(sdfg): A0.nnz}, 'cache_bytes': 8 * 2 * n * 8, 'threads': 1}
    applied = sdfg.apply_transformations(SparseDenseTiling, options=opts)
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


def _nnz_symbol(sdfg):
    from sdfgsparse.formats import sparse_type_of
    return str(sparse_type_of(sdfg.arrays['A']).sizes['n1'])


def _small_cache(sdfg):
    """Sizes and a cache under which the model tiles atb's 1000 x 1000 product (K = 64)."""
    return {'sizes': {'M': 1000, 'N': 1000, 'K': 64, _nnz_symbol(sdfg): 50_000}, 'cache_bytes': 2000 * 8 * 8,
            'threads': 1}


def test_refuses_without_sizes_or_when_tiled():
    sdfg = atb.to_sdfg()
    assert sdfg.apply_transformations(SparseDenseTiling) == 0  # sizes unknown
    no_nnz = {'sizes': {'M': 1000, 'N': 1000, 'K': 64}, 'cache_bytes': 2000 * 8 * 8, 'threads': 1}
    assert sdfg.apply_transformations(SparseDenseTiling, options=no_nnz) == 0  # entry count unknown
    big = dict(_small_cache(sdfg), cache_bytes=1 << 30, threads=2)
    assert sdfg.apply_transformations(SparseDenseTiling, options=big) == 0  # all cached, two threads: 16 stays
    opts = _small_cache(sdfg)
    assert sdfg.apply_transformations(SparseDenseTiling, options=opts) == 1
    assert sdfg.apply_transformations(SparseDenseTiling, options=opts) == 0  # already tiled
    sdfg = csr_spmm.to_sdfg()
    opts = dict(_small_cache(sdfg), cache_bytes=1 << 30)
    assert sdfg.apply_transformations(SparseDenseTiling, options=opts) == 0  # row-owned, B cached: one walk


def test_decision_lists_every_candidate():
    sdfg = atb.to_sdfg()
    state = next(s for s in sdfg.states() if any(isinstance(n, SpMM) for n in s.nodes()))
    xf = SparseDenseTiling()
    for k, v in _small_cache(sdfg).items():
        setattr(xf, k, v)
    xf.setup_match(sdfg, sdfg.cfg_id, sdfg.node_id(state), {SparseDenseTiling.product: state.node_id(_spmm(sdfg))}, 0)
    d = xf.decision(state, sdfg)
    assert d.applies and d.default == 'tile 16' and xf.tile(state, sdfg) == d.candidate(d.chosen).param
    assert d.bound is not None and d.bound > 0 and 'SOAP lower bound' in d.line() and 'rejected' in d.line()


def test_round_trips_through_json():
    sdfg = atb.to_sdfg()
    sdfg.apply_transformations(SparseDenseTiling, options=_small_cache(sdfg))
    tile = _spmm(sdfg).dense_tile
    assert tile in (8, 16)
    again = dace.SDFG.from_json(sdfg.to_json())
    assert _spmm(again).dense_tile == tile
    xf = SparseDenseTiling()
    xf.cache_bytes, xf.sizes = 1 << 20, {'K': 64}
    back = SparseDenseTiling.from_json(xf.to_json())
    assert back.cache_bytes == 1 << 20 and dict(back.sizes) == {'K': 64} and back.CATEGORY == 'Sparse'
