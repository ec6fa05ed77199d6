"""The communication model (analysis/communication.py), in one process: it adds up, a
process waits for its partners as MPI over shared memory makes it (no progress outside MPI
calls) or as a network that moves data on its own does, the fold waits for the senders'
products, processes that outnumber cores share them, rates may differ by process,
and products choose the split (overlapped) product where it pays on this node."""
import types

import numpy as np
import pytest
import scipy.sparse as sp

from sdfgsparse.analysis.communication import CommunicationModel, ExchangeCounts, allgather_words, exchange_counts
from sdfgsparse.bench.distributed import grid_laplacian
from sdfgsparse.distributed import products
from sdfgsparse.distributed.partition import assignment
from sparse_zoo import real_matrix


def two_processes(expand=(100, 100), fold=(0, 0), own=(900, 900)):
    """Hand-made counts: process 0 sends ``expand[0]`` words of x to 1 and 1 sends
    ``expand[1]`` to 0; ``fold[0]`` partial rows go from 0 to 1, ``fold[1]`` from 1 to 0;
    each multiplies 1000 entries, ``own`` of them in its own columns."""
    e0, e1 = expand
    f0, f1 = fold
    links = lambda a, b: np.array([r for r in ([0, 1, a], [1, 0, b]) if r[2]], np.int64).reshape(-1, 3)  # noqa: E731
    return ExchangeCounts(
        expand_in=np.array([e1, e0]), expand_out=np.array([e0, e1]), fold_out=np.array([f0, f1]),
        fold_in=np.array([f1, f0]), messages_out=np.array([(e0 > 0) + (f0 > 0), (e1 > 0) + (f1 > 0)]),
        entries=np.array([1000, 1000]), rows=np.array([10, 10]), halo_rows=np.array([5, 5]),
        own_entries=np.array(own), owned_cols=np.array([10, 10]), expand_links=links(e0, e1),
        fold_links=links(f0, f1))


def test_model_adds_up():
    A = real_matrix('cora_A')
    counts = exchange_counts(A, assignment(A, 4, 'rows'))
    model = CommunicationModel(alpha=1e-6, beta=1e-9, seconds_per_entry=2e-9)
    compute = model.compute_seconds(counts)
    exchange = model.exchange_seconds(counts)
    assert np.allclose(compute, 2e-9 * counts.entries)
    assert np.allclose(exchange, 1e-6 * counts.messages_out +
                       1e-9 * 8 * np.maximum(counts.sent, counts.expand_in + counts.fold_in))
    # every process receives here, so each ends after its messages and its product
    assert counts.expand_in.min() > 0
    assert model.seconds(counts) == pytest.approx(float((compute + exchange).max()))
    # free copies and adds: overlapping hides the own columns' product behind the messages
    assert model.seconds(counts, overlap=True) < model.seconds(counts)
    assert model.seconds(counts, overlap=None) <= min(model.seconds(counts), model.seconds(counts, overlap=True))
    assert model.seconds(counts, k=8) > model.seconds(counts)
    # without progress nothing is hidden: a split pays only by saving the copy of x, unless
    # adding its halo rows back and a second call cost more
    copying = dict(alpha=0.0, beta=0.0, seconds_per_entry=2e-9, beta_copy=1e-8, progress=0.0)
    assert all(CommunicationModel(**copying).overlap_pays(counts, r) for r in range(4))
    costly = CommunicationModel(**copying, beta_add=1e-6, local_call=1e-3)
    assert not any(costly.overlap_pays(counts, r) for r in range(4))
    cheap = CommunicationModel(alpha=1e-3, beta=0, seconds_per_entry=2e-9)
    assert cheap.overlap_pays(counts, 0)  # a slow message hides the own-column product
    assert counts.halo_rows.sum() <= counts.rows.sum() and counts.own_entries.sum() <= A.nnz
    assert allgather_words(100, 4) == 300
    assert counts.total < allgather_words(A.shape[0], 4)


def test_without_progress_a_process_waits_for_its_partner():
    """Process 1 packs 10x slower: with no progress outside MPI calls both halos complete
    only once process 1 waits too; with progress, process 1's own halo (sent by the fast
    packer) is there when it arrives, so only process 0 waits."""
    counts = two_processes()
    compute = np.array([1e-3, 2e-3])
    kw = dict(alpha=0.0, beta=1e-9, seconds_per_entry=0.0, beta_pack=np.array([1e-9, 1e-8]))
    pack = np.array([1e-9, 1e-8]) * 800
    xfer = 1e-9 * 800
    stalled = CommunicationModel(progress=0.0, **kw).timeline(counts, compute=compute)
    assert stalled == pytest.approx(pack.max() + xfer + compute)
    moving = CommunicationModel(progress=1.0, **kw).timeline(counts, compute=compute)
    assert moving == pytest.approx([pack[1] + xfer + compute[0], pack[1] + compute[1]])
    half = CommunicationModel(progress=0.5, **kw).timeline(counts, compute=compute)
    assert half == pytest.approx((stalled + moving) / 2)
    assert CommunicationModel(progress=0.0, **kw).seconds(counts, compute=compute) == pytest.approx(stalled.max())


def test_the_fold_waits_for_the_senders_product():
    """2-D: process 0 multiplies 3 ms, then sends partial rows that process 1 adds: process
    1 ends after process 0's product, not after its own 1 ms."""
    counts = two_processes(expand=(0, 0), fold=(50, 0))
    model = CommunicationModel(alpha=1e-6, beta=1e-9, seconds_per_entry=0.0, beta_copy=2e-9, beta_add=3e-9,
                               progress=0.0, call_overhead=5e-6)
    compute = np.array([3e-3, 1e-3])
    end = model.timeline(counts, compute=compute)
    fold = 2e-9 * 400 + 1e-6 + 1e-9 * 400 + 3e-9 * 400  # copy out, message, add in
    assert end[1] == pytest.approx(3e-3 + fold)
    assert model.seconds(counts, compute=compute) == pytest.approx(3e-3 + fold + 5e-6)
    busy = model.busy_seconds(counts, compute=compute)
    assert busy[1] < end[1]  # process 1 mostly waits


def test_processes_sharing_cores():
    counts = two_processes()
    compute = np.array([1e-3, 1e-3])
    alone = CommunicationModel(alpha=0.0, beta=0.0, seconds_per_entry=0.0, progress=0.0)
    assert alone.seconds(counts, compute=compute) == pytest.approx(1e-3)
    one_core = CommunicationModel(alpha=0.0, beta=0.0, seconds_per_entry=0.0, progress=0.0, cores=1)
    assert one_core.seconds(counts, compute=compute) == pytest.approx(2e-3)  # both products on one core
    two_cores = CommunicationModel(alpha=0.0, beta=0.0, seconds_per_entry=0.0, progress=0.0, cores=2)
    assert two_cores.seconds(counts, compute=compute) == pytest.approx(1e-3)  # not outnumbered


def test_rates_per_process():
    """The bench gives each process its own measured rates."""
    counts = two_processes()
    model = CommunicationModel(alpha=0.0, beta=np.array([1e-9, 3e-9]), seconds_per_entry=0.0, progress=0.0)
    end = model.timeline(counts, compute=np.zeros(2))
    assert end == pytest.approx(np.array([1e-9, 3e-9]) * 800)


@pytest.mark.parametrize('k', [1, 64])
def test_node_model_splits_where_copying_x_costs_more(k):
    """Measured here (docs/performance.md, 2026-12-05): the split product is faster on a
    large grid (copying 128K rows of x costs more than a second call for 512 halo rows),
    not on a small one at k = 1, and slower where most rows have halo entries."""
    grid = grid_laplacian(512)
    counts = exchange_counts(grid, assignment(grid, 2, 'rows'))
    assert all(products.NODE_MODEL.overlap_pays(counts, r, k) for r in range(2))
    if k == 1:  # 512 rows of x copied cost less than a second call
        small = grid_laplacian(32)
        counts = exchange_counts(small, assignment(small, 2, 'rows'))
        assert not any(products.NODE_MODEL.overlap_pays(counts, r, k) for r in range(2))
    rng = np.random.default_rng(0)
    n = 4000
    graph = sp.random_array((n, n), density=8 / n, rng=rng, format='csr')
    graph = sp.csr_array(graph + graph.T)
    counts = exchange_counts(graph, assignment(graph, 2, 'rows'))
    assert counts.halo_rows.min() > 0.9 * counts.rows.min()
    if k == 64:
        assert not any(products.NODE_MODEL.overlap_pays(counts, r, k) for r in range(2))


def test_overlap_choice_is_made_once_per_width(monkeypatch):
    """The choice costs more than a small product: chooses_overlap keeps it per width."""
    calls = []
    monkeypatch.setattr(products.NODE_MODEL.__class__, 'overlap_pays',
                        lambda self, counts, rank, k=1, itemsize=8: calls.append(k) or k > 1)
    D = types.SimpleNamespace(overlap=None, plan=types.SimpleNamespace(expand_recv={1: (0, 1)}),
                              _overlap_choices={}, counts=None, comm=types.SimpleNamespace(Get_rank=lambda: 0),
                              dtype=np.dtype(np.float64))
    assert [products.chooses_overlap(D, w) for w in (1, 64, 1, 64, 64)] == [False, True, False, True, True]
    assert calls == [1, 64]
    D.overlap = False
    assert products.chooses_overlap(D, 64) is False


def test_a_split_that_delays_its_partners_does_not_pay():
    """Without progress a split process enters the exchange after its own columns'
    product. Process 0's entries are mostly in its own columns, process 1's in the halo:
    split, process 0 would end sooner (no copy of x) but process 1 waits for process 0's
    own product, then multiplies its halo part: the product ends later, so neither splits."""
    counts = two_processes(own=(900, 100))
    model = CommunicationModel(alpha=0.0, beta=0.0, seconds_per_entry=1e-6, beta_copy=1.25e-6, progress=0.0)
    plain = model.timeline(counts, overlap=False)
    assert plain == pytest.approx([1.1e-3, 1.1e-3])
    assert model.timeline(counts, overlap=True) == pytest.approx([1.0e-3, 1.8e-3])
    alone = model.timeline(counts, overlap=[True, False])
    assert alone[0] < plain[0] and alone[1] > plain[1]  # a choice of its own would delay the partner
    assert not model.overlap_pays(counts, 0) and not model.overlap_pays(counts, 1)
    assert model.timeline(counts, overlap=None) == pytest.approx(plain)


def test_model_arguments_are_checked():
    with pytest.raises(ValueError, match='cores'):
        CommunicationModel(alpha=0.0, beta=0.0, seconds_per_entry=0.0, cores=0)
    with pytest.raises(ValueError, match='single numbers'):
        CommunicationModel(alpha=0.0, beta=0.0, seconds_per_entry=0.0, call_overhead=np.ones(2))
