"""The data-movement model of schedules (sdfgsparse.analysis.schedules): gather misses
against hand counts and the LRU simulator, the margin rule, and the decisions of tiling,
attention fusion and epilogue fusion on hand-checked cases."""
import numpy as np
import pytest
import scipy.sparse as sp

from sdfgsparse.analysis import schedules as sch
from sdfgsparse.analysis.cache_sim import LRUCache
from sdfgsparse.analysis.schedules import (MARGIN, Candidate, Machine, attention_decision, epilogue_decision,
                                           product_cost, row_misses)

BIG = Machine(llc=32 << 20, l2=1 << 20, threads=2)


def test_row_misses_compulsory_when_the_rows_fit():
    idx = np.array([0, 1, 0, 1, 5, 5, 0])
    assert row_misses(idx, 8, 512, 1 << 20) == 3  # three distinct rows
    assert row_misses(np.array([], dtype=np.int64), 8, 512, 1 << 20) == 0
    assert row_misses(idx, 8, 4096, 1024) == len(idx)  # not one row fits: every gather misses


def test_row_misses_match_a_fully_associative_lru(rng):
    # one set of 16 ways holds 16 rows; a stream over 40 rows with reuse
    idx = rng.integers(0, 40, size=3000)
    lru = LRUCache(16)
    for j in idx:
        lru.read(int(j))
    assert row_misses(idx, 40, 256, 16 * 256) == lru.loads


def test_row_misses_without_a_pattern_scale_by_what_does_not_fit():
    # 100 rows of 1 KiB in a 50 KiB cache, 1000 gathers: 100 first touches, half of the rest
    assert row_misses(None, 100, 1024, 50 * 1024, accesses=1000) == pytest.approx(100 + 900 * 0.5)
    assert row_misses(None, 100, 1024, 1 << 20, accesses=1000) == pytest.approx(100)


def test_margin_keeps_the_default_for_small_savings():
    base = Candidate('default', 100.0, 0.0)
    near = Candidate('other', 100.0 * (1 - MARGIN / 2), 0.0)
    far = Candidate('better', 100.0 * (1 - 2 * MARGIN), 0.0)
    assert not sch._choose('n', 'X', [base, near], 'default').applies
    d = sch._choose('n', 'X', [base, near, far], 'default')
    assert d.chosen == 'better' and d.saving == pytest.approx(2 * MARGIN)
    assert set(d.to_dict()['candidates']) == {'default', 'other', 'better'}
    assert 'rejected: default' in d.line() and 'below the default' in d.line()


def test_attention_fuses_when_the_sampled_matrices_cost_more():
    A = sp.random_array((2000, 2000), density=0.01, format='csr', random_state=3)
    d = attention_decision('s', 2000, 2000, A.nnz, 64, 64, BIG, indices=A.indices, keys_transposed=True)
    assert d.default == 'three nodes' and d.chosen == 'fused'
    fused, three = d.candidate('fused'), d.candidate('three nodes')
    # everything fits the last-level cache: no memory traffic either way, one parallel
    # region against five (transpose, SDDMM, softmax passes, SpMM)
    assert fused.memory == sch.PARALLEL_PASS and three.memory == 5 * sch.PARALLEL_PASS
    # the three nodes write and read two sampled matrices and the transposed keys
    assert three.private - fused.private >= 4 * A.nnz * 12 + 2 * 2000 * 64 * 8
    no_pattern = attention_decision('s', 2000, 2000, A.nnz, 64, 64, BIG)
    assert no_pattern.notes and 'without the pattern' in no_pattern.line()


def test_attention_without_row_ownership_pays_the_scores_twice():
    A = sp.random_array((3000, 3000), density=0.01, format='csr', random_state=4)
    own = attention_decision('s', 3000, 3000, A.nnz, 64, 64, BIG, indices=A.indices)
    scatter = attention_decision('s', 3000, 3000, A.nnz, 64, 64, BIG, indices=A.indices, row_owning=False)
    assert scatter.candidate('fused').cost > own.candidate('fused').cost
    assert scatter.candidate('three nodes').cost == pytest.approx(own.candidate('three nodes').cost)


def test_epilogue_fusion_saves_the_result_pass():
    p = product_cost(1000, 1000, 10_000, 64, BIG, 4)
    d = epilogue_decision('spmm', p, 1000, 64, BIG, 4, extra_inputs=1)
    sep, fused = d.candidate('separate pass'), d.candidate('fused')
    assert sep.private - fused.private == 2 * 1000 * 64 * 4 + 64 * 4
    assert d.applies
    # a result that is tiny next to its product: the pass is not worth a rewrite
    p = product_cost(10, 100_000, 1_000_000, 1, BIG, 8)
    assert not epilogue_decision('spmv', p, 10, 1, BIG, 8).applies


def test_machine_here_reads_the_caches():
    m = Machine.here()
    assert m.llc >= m.l2 > 0 and m.threads >= 1
    assert Machine.here(llc=1 << 20, threads=3) == Machine(1 << 20, min(m.l2, 1 << 20), 3)
