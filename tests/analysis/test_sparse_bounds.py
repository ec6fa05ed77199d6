"""Sparse models: formulas, structure statistics, and bound <= a simulated known algorithm."""
import numpy as np
import pytest
import scipy.sparse as sp
import sympy

from sdfgsparse.analysis import (S, StatsError, chain_bound, dense_mm_model, sddmm_bound, spgemm_bound, spgemm_model,
                                 spgemm_counts, spmm_bound, spmm_model, spmv_bound, structure_stats)
from sdfgsparse.analysis.sparse_traces import sddmm_csr, spgemm_gustavson, spmm_csr

nnz, rows, cols, k = sympy.symbols('nnz rows cols k', positive=True)


def num(e) -> float:
    return float(sympy.sympify(e))


# ---------------------------------------------------------------------- formulas
def test_spmv_is_compulsory_traffic():
    assert sympy.expand(spmv_bound(nnz, rows, cols) - (nnz + rows + cols)) == 0


def test_spmv_uses_nonempty_columns():
    assert spmv_bound(100, 50, 80, stats={'nonempty_cols': 30}) == 180


def test_spmm_symbolic_form():
    e = spmm_bound(nnz, rows, cols, k)
    expected = sympy.Max(nnz * k / sympy.Min(sympy.sqrt(S) / 2, k), nnz + k * (cols + rows))
    assert e == expected


def test_spmm_reuse_term_on_dense_structure():
    # 64x64 dense block, k = 64, S = 64: reuse nnz*k/(sqrt(S)/2) dominates compulsory traffic
    assert spmm_bound(4096, 64, 64, 64, 64) == 4096 * 64 // 4


def test_spmm_structure_caps_intensity():
    # diagonal matrix: every nonzero meets one row of B: rho <= max_row = 1
    m = spmm_model(100, 100, 100, 32, 1024, stats={'max_row': 1, 'max_col': 1})
    assert m.intensity == 1 and m.reuse == 100 * 32
    assert m.total == 100 + 32 * 200  # compulsory traffic is larger here


def test_bandwidth_caps_intensity():
    m = spmm_model(300, 100, 100, 64, 4096, stats={'bandwidth': 1})
    assert m.intensity == 3


def test_sddmm_formula():
    e = sddmm_bound(nnz, rows, cols, k, stats={'max_row': 4})
    assert e == sympy.Max(nnz * k / sympy.Min(sympy.sqrt(S) / 2, k, 4), 2 * nnz + k * (rows + cols))


def test_spgemm_formula_and_caps():
    e = spgemm_bound(10, 20, 5, 6, 7, S=64, flops=400, nnz_c=30, stats_a={'max_col': 2}, stats_b={'max_row': 8})
    assert e == max(sympy.Rational(400, 2), 60)
    assert spgemm_model(10, 20, 5, 6, 7).volume == sympy.Symbol('flops', nonnegative=True)


def test_chain_drops_intermediates():
    n, f, h = sympy.symbols('n f h', positive=True)
    mm = dense_mm_model(n, h, f, names=('X', 'W', 'T'))
    spmm = spmm_model(nnz, n, n, h, names=('A', 'T', 'Y'))
    e = chain_bound([mm, spmm])
    reuse = 2 * n * h * f / sympy.sqrt(S) + nnz * h / sympy.Min(sympy.sqrt(S) / 2, h)
    assert e == sympy.Max(reuse, n * f + f * h + nnz + n * h)


def test_chain_sharing_a_sparse_operand_takes_the_max():
    """``A @ (A @ B)`` may read A once (matrix-powers fusion): its reuse term counts once."""
    a = spmm_model(nnz, rows, rows, k, names=('A', 'B', 'T'))
    b = spmm_model(nnz, rows, rows, k, names=('A', 'T', 'Y'))
    assert chain_bound([a, b]) == sympy.Max(a.reuse, nnz + 2 * k * rows)


# ---------------------------------------------------------------------- statistics
def test_spgemm_counts_only_participating_entries():
    A = sp.csr_matrix(np.array([[1, 1, 0], [0, 1, 0]]))
    B = sp.csr_matrix(np.array([[1, 0], [0, 0], [1, 1]]))
    assert spgemm_counts(A, B) == {'flops': 1, 'nnz_c': 1, 'nnz_a': 1, 'nnz_b': 1}


def test_structure_stats_exact():
    A = sp.csr_matrix(np.array([[1, 0, 2, 0], [0, 0, 0, 0], [0, 3, 0, 0]]))
    assert structure_stats(A) == {
        'nnz': 3, 'rows': 3, 'cols': 4, 'max_row': 2, 'max_col': 1, 'avg_row': 1, 'bandwidth': 2,
        'nonempty_rows': 2, 'nonempty_cols': 3
    }


def test_structure_stats_sums_duplicates():
    A = sp.coo_matrix((np.ones(3), ([0, 0, 1], [1, 1, 0])), shape=(2, 2))
    assert structure_stats(A)['nnz'] == 2


@pytest.mark.parametrize('stats, msg', [({'nzz': 3}, "unknown statistic 'nzz'"), ({'nnz': -1}, 'negative'),
                                        ({'rows': 'x y'}, 'not a number'), ([1, 2], 'must be a mapping')])
def test_bad_stats(stats, msg):
    with pytest.raises(StatsError, match=msg):
        spmm_bound(10, 5, 5, 4, stats=stats)


def test_structure_stats_rejects_dense():
    with pytest.raises(StatsError, match='scipy.sparse'):
        structure_stats(np.ones((2, 2)))


# ---------------------------------------------------------------------- bound <= simulated algorithms
def _spmm_bound_for(A, kk, cache):
    st = structure_stats(A)
    return num(spmm_bound(st['nnz'], st['rows'], st['cols'], kk, cache, stats=st))


@pytest.mark.parametrize('kk', [1, 4, 16])
@pytest.mark.parametrize('cache', [16, 64])
def test_spmm_bound_below_simulated(matrix_zoo, kk, cache):
    for name, A in matrix_zoo.items():
        bound = _spmm_bound_for(A, kk, cache)
        for col_block, row_block in [(None, None), (2, None), (4, 4), (1, 8)]:
            moved = spmm_csr(A, kk, cache, col_block, row_block).moved
            assert bound <= moved, (name, kk, cache, col_block, row_block, bound, moved)


def test_spmm_bound_is_not_trivial_on_dense_block(matrix_zoo):
    A = matrix_zoo['dense_block']
    bound = _spmm_bound_for(A, 24, 16)
    best = min(spmm_csr(A, 24, 16, cb, rb).moved for cb, rb in [(None, None), (2, 2), (4, 2), (2, 4)])
    assert bound > A.nnz + 24 * 48  # the reuse term is active
    assert best <= 8 * bound  # and within a small factor of a reasonable schedule


@pytest.mark.parametrize('kk', [1, 8])
def test_sddmm_bound_below_simulated(matrix_zoo, kk):
    for name, A in matrix_zoo.items():
        st = structure_stats(A)
        bound = num(sddmm_bound(st['nnz'], st['rows'], st['cols'], kk, 32, stats=st))
        for col_block in (None, 2):
            moved = sddmm_csr(A, kk, 32, col_block).moved
            assert bound <= moved, (name, kk, col_block, bound, moved)


def test_spgemm_bound_below_gustavson(matrix_zoo, rng):
    for name, A in matrix_zoo.items():
        B = sp.random(A.shape[1], 25, density=0.15, random_state=np.random.RandomState(int(rng.integers(1000))),
                      format='csr')
        c = spgemm_counts(A, B)
        sa, sb = structure_stats(A), structure_stats(B)
        del sa['nnz'], sb['nnz']
        for cache in (16, 64):
            bound = num(
                spgemm_bound(c['nnz_a'], c['nnz_b'], A.shape[0], A.shape[1], 25, cache, c['flops'], c['nnz_c'], sa,
                             sb))
            moved = spgemm_gustavson(A, B, cache).moved
            assert bound <= moved, (name, cache, bound, moved)
