"""Partitions and their communication counts, in one process (no MPI): every stored entry
goes to one process, blocks are balanced, the counts equal a brute-force count, the arrow
decomposition sends less than 1-D rows on graph matrices (the model: test_model.py)."""
import numpy as np
import pytest
import scipy.sparse as sp

from sdfgsparse.analysis.communication import Assignment, exchange_counts
from sdfgsparse.distributed.arrow import arrow_assignment, arrow_levels
from sdfgsparse.distributed.partition import assignment, balanced_offsets, grid_shape
from sparse_zoo import real_matrix


def brute_force(A, asg):
    """Words and messages counted entry by entry with Python sets."""
    A = sp.csr_array(A)
    need, fold = set(), set()
    for i in range(A.shape[0]):
        for k in range(A.indptr[i], A.indptr[i + 1]):
            r, j = int(asg.entry_rank[k]), int(A.indices[k])
            if asg.col_owner[j] != r:
                need.add((r, j))
            if asg.row_owner[i] != r:
                fold.add((r, i))
    return len(need) + len(fold)


@pytest.fixture(scope='module')
def graphs():
    rng = np.random.default_rng(0)
    power = sp.random_array((300, 300), density=0.02, rng=rng, format='csr')
    hubs = sp.lil_array((300, 300))
    hubs[:3, :] = 1.0  # three hubs joined to everything
    hubs[:, :3] = 1.0
    return {'cora_A': real_matrix('cora_A'), 'adder_dcop_05': real_matrix('adder_dcop_05'),
            'random_with_hubs': sp.csr_array(power + power.T + hubs)}


@pytest.mark.parametrize('partition', ['rows', '2d', 'arrow'])
@pytest.mark.parametrize('p', [1, 2, 3, 4, 7, 16])
def test_every_entry_on_one_process_and_counts_exact(graphs, partition, p):
    for name, A in graphs.items():
        A = sp.csr_array(A)
        A.sum_duplicates()
        asg = assignment(A, p, partition)
        assert asg.entry_rank.shape == (A.nnz,) and asg.entry_rank.min(initial=0) >= 0
        assert asg.entry_rank.max(initial=0) < p
        assert asg.row_owner.shape == (A.shape[0],) and asg.col_owner.shape == (A.shape[1],)
        assert set(np.unique(asg.row_owner)) <= set(range(p))
        counts = exchange_counts(A, asg)
        assert counts.total == brute_force(A, asg), name
        for links, words_in in ((counts.expand_links, counts.expand_in), (counts.fold_links, counts.fold_in)):
            assert np.all(links[:, 0] != links[:, 1]) and np.all(links[:, 2] > 0)
            assert np.array_equal(np.bincount(links[:, 1], links[:, 2], minlength=p), words_in)
        assert np.array_equal(np.bincount(counts.expand_links[:, 0], minlength=p) +
                              np.bincount(counts.fold_links[:, 0], minlength=p), counts.messages_out)
        assert counts.owned_cols.sum() == A.shape[1]
        if p == 1:
            assert counts.total == 0 and counts.messages_out.sum() == 0


def test_rows_balance_entries_and_keep_x_with_y():
    A = real_matrix('cora_A')
    asg = assignment(A, 4, 'rows')
    e = exchange_counts(A, asg).entries
    assert e.max() / e.mean() < 1.1
    assert np.array_equal(asg.row_owner, asg.col_owner)  # square: the result is the next input
    assert np.all(np.diff(asg.row_owner) >= 0)  # contiguous blocks


def test_rectangular_and_empty_matrices():
    for A in (sp.csr_array((5, 9)), sp.csr_array(np.ones((1, 6))), sp.csr_array(np.ones((6, 1))),
              sp.csr_array((0, 0))):
        for partition in ('rows', '2d'):
            asg = assignment(A, 3, partition)
            assert exchange_counts(A, asg).total == brute_force(A, asg)
    with pytest.raises(ValueError, match='square'):
        arrow_assignment(sp.csr_array(np.ones((2, 3))), 2)
    with pytest.raises(ValueError, match="partition='cols'"):
        assignment(sp.csr_array(np.ones((2, 2))), 2, 'cols')


def test_balanced_offsets_and_grid():
    assert list(balanced_offsets(np.ones(10), 2)) == [0, 5, 10]
    assert list(balanced_offsets(np.array([9, 1, 1, 1]), 2)) == [0, 1, 4]
    assert list(balanced_offsets(np.ones(2), 4))[-1] == 2
    assert [grid_shape(p) for p in (1, 2, 3, 4, 6, 12, 16)] == [(1, 1), (1, 2), (1, 3), (2, 2), (2, 3), (3, 4),
                                                                (4, 4)]


def test_2d_blocks_on_their_grid():
    A = real_matrix('cora_A')
    asg = assignment(A, 6, '2d')
    assert asg.grid == (2, 3)
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    # every row's entries sit on one grid row, every column's on one grid column
    grid_row, grid_col = asg.entry_rank // 3, asg.entry_rank % 3
    for keys, grid in ((rows, grid_row), (A.indices, grid_col)):
        first = np.full(A.shape[0], -1)
        first[keys] = grid
        assert np.all(first[keys] == grid)
    with pytest.raises(ValueError, match='options of the arrow decomposition'):
        assignment(A, 6, '2d', width=3)


@pytest.mark.parametrize('name', ['cora_A', 'random_with_hubs', 'adder_dcop_05'])
@pytest.mark.parametrize('p', [4, 16])
def test_arrow_sends_less_than_rows_on_graphs(graphs, name, p):
    A = graphs[name]
    rows = exchange_counts(A, assignment(A, p, 'rows')).total
    arrow = exchange_counts(A, assignment(A, p, 'arrow')).total
    assert arrow < rows, (name, p, arrow, rows)


def test_arrow_levels_are_arrow_matrices(graphs):
    """Each level but the last holds only head edges and edges between the same or
    adjacent blocks of its order; the levels together hold every edge once."""
    A = graphs['random_with_hubs']
    levels, (u, v) = arrow_levels(A, 4, max_levels=3)
    taken = np.zeros(u.size, int)
    for number, (order, nhead, block_of, take) in enumerate(levels):
        taken += take
        head = np.zeros(A.shape[0], bool)
        head[order[:nhead]] = True
        if number < len(levels) - 1:
            ok = head[u[take]] | head[v[take]] | (np.abs(block_of[u[take]] - block_of[v[take]]) <= 1)
            assert ok.all()
    assert np.all(taken == 1)
    assert levels[0][1] >= 3  # the three hubs head level 0


def test_counts_reject_a_foreign_assignment():
    A = real_matrix('cora_A')
    asg = assignment(A, 2, 'rows')
    with pytest.raises(ValueError, match='entry_rank'):
        exchange_counts(A[:100], Assignment(2, asg.row_owner, asg.col_owner, asg.entry_rank))
