"""The SpMV traffic model (:mod:`sdfgsparse.analysis.spmv_traffic`): against hand counts,
against the fully associative LRU simulator of the analysis, and its set sampling against
the simulation of every set."""
import numpy as np
import pytest
import scipy.sparse as sp

from sdfgsparse.analysis.cache_sim import LRUCache
from sdfgsparse.analysis.spmv_traffic import spmv_traffic, x_line_misses
from sdfgsparse.bench.kernels import Kernel
from sdfgsparse.bench.matrices import banded, rmat


def test_x_that_fits_costs_the_lines_its_pattern_touches():
    # columns 0, 1 (line 0), 17 (line 2), 0 again: two lines of 8 doubles, x of 3 lines
    A = sp.csr_array((np.ones(4), np.array([0, 1, 17, 0], np.int32), np.array([0, 2, 4], np.int32)), shape=(2, 24))
    t = spmv_traffic(A, cache_bytes=1 << 20)
    assert t.x_fits and t.sampled_sets == 0
    assert t.x_bytes == 2 * 64
    assert t.streams == 4 * 8 + 4 * 4 + 3 * 4 + 2 * 8
    assert t.total == t.streams + t.x_bytes


def test_one_set_is_the_fully_associative_lru_of_the_analysis():
    rng = np.random.default_rng(0)
    cols = rng.integers(0, 4000, size=5000)
    ways = 8  # one set of 8 lines: fully associative
    misses, fits, sampled = x_line_misses(cols, 4000, 8, cache_bytes=64 * ways, ways=ways, sample_sets=None)
    lru = LRUCache(ways)
    for c in cols.tolist():
        lru.read(c // 8)
    assert not fits and sampled == 1
    assert misses == lru.loads


def test_sampled_sets_estimate_every_set():
    A = rmat(14, 8)
    exact = x_line_misses(A.indices, A.shape[1], 8, 64 << 10, sample_sets=None)[0]
    sampled, fits, n = x_line_misses(A.indices, A.shape[1], 8, 64 << 10, sample_sets=32)
    assert not fits and n == 32
    assert abs(sampled - exact) <= 0.1 * exact, (sampled, exact)


def test_a_band_reuses_x_even_when_x_does_not_fit():
    A = banded(50_000, 4)
    t = spmv_traffic(A, cache_bytes=64 << 10)
    assert not t.x_fits
    assert t.x_bytes == -(-A.shape[1] // 8) * 64  # every line once


def test_random_columns_cost_more_than_compulsory_when_x_does_not_fit():
    A = rmat(14, 8)
    small, large = spmv_traffic(A, 64 << 10), spmv_traffic(A, 64 << 20)
    assert large.x_fits and small.x_bytes > 3 * large.x_bytes


def test_bad_arguments():
    A = sp.random_array((5, 5), density=0.5, format='csr', rng=np.random.default_rng(0))
    with pytest.raises(TypeError, match='A: expected a scipy CSR matrix, got ndarray'):
        spmv_traffic(A.toarray(), 1 << 20)
    with pytest.raises(ValueError, match='cache_bytes=64: expected at least one set'):
        spmv_traffic(sp.csr_array(A), 64)


def test_the_bench_counts_spmv_bytes_with_the_model():
    A = sp.csr_array(rmat(10, 8))
    x = np.ones(A.shape[1])
    k = Kernel('spmv')
    assert k.bytes({'A': A, 'x': x}, A @ x, cache_bytes=64 << 10) == spmv_traffic(A, 64 << 10).total
    compulsory = A.data.nbytes + A.indices.nbytes + A.indptr.nbytes + x.nbytes + A.shape[0] * 8
    assert k.bytes({'A': A, 'x': x}, A @ x) == compulsory
