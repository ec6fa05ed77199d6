"""The bound never exceeds the words a concrete schedule moves through an LRU cache of S words."""
import pytest

from sdfgsparse.analysis import LRUCache, SimulationError, io_lower_bound, simulate
from sdfgsparse.analysis.sdfg_extract import extract

CASES = [
    # kernel, sizes, S, schedules (map tiling, map order)
    ('gemm', dict(N=16, M=16, K=16), 64, [(None, None), ({'i': 4, 'j': 4, 'k': 4}, None),
                                         ({'i': 2, 'j': 8, 'k': 8}, None), (None, ('k', 'i', 'j')),
                                         ({'i': 8, 'j': 8, 'k': 1}, ('k', 'i', 'j'))]),
    ('gemm', dict(N=12, M=20, K=8), 32, [(None, None), ({'i': 4, 'j': 4, 'k': 4}, None)]),
    ('gemm_loops', dict(N=10, M=10, K=10), 24, [(None, None)]),
    ('gemm_nested', dict(N=10, M=10, K=10), 24, [(None, None), ({'i': 3, 'j': 3}, None)]),
    ('gemm_lib', dict(N=12, M=12, K=12), 32, [(None, None), ({'i': 4, 'j': 4, 'k': 4}, None)]),
    ('k2mm', dict(NI=10, NJ=10, NK=10, NL=10), 32, [(None, None), ({'i': 4, 'j': 4, 'k': 4, 'l': 4}, None)]),
    ('doitgen', dict(NR=4, NQ=4, NP=8), 32, [(None, None), ({'p': 4, 's': 4}, None)]),
    ('syrk', dict(N=12, M=12), 32, [(None, None), ({'j': 4, 'k': 4}, None)]),
    ('cholesky', dict(N=16), 32, [(None, None)]),
    ('lu', dict(N=14), 32, [(None, None), ({'i': 4, 'j': 4}, None)]),
    ('atax', dict(M=20, N=16), 16, [(None, None), ({'i': 4, 'j': 4}, None)]),
    ('mvt', dict(N=20), 16, [(None, None), ({'i': 5, 'j': 5}, ('j', 'i'))]),
    ('gesummv', dict(N=18), 16, [(None, None)]),
    ('jacobi1d', dict(N=24, T=12), 16, [(None, None), ({'i': 4}, None)]),
    ('jacobi2d', dict(N=10, T=4), 32, [(None, None), ({'i': 4, 'j': 4}, None)]),
    ('seidel1d', dict(N=24, T=10), 8, [(None, None)]),
]


@pytest.mark.parametrize('name, sizes, cache, schedules', CASES, ids=[c[0] + str(i) for i, c in enumerate(CASES)])
def test_bound_below_lru_traffic(kernel_sdfg, name, sizes, cache, schedules):
    sdfg = kernel_sdfg(name)
    res = io_lower_bound(sdfg, cache_size=cache)
    bound = res.evaluate(**{k: v for k, v in sizes.items() if k in {s.name for s in res.total.free_symbols}})
    assert bound > 0
    model = extract(sdfg)
    for tiling, order in schedules:
        moved = simulate(model, cache, sizes, tiling=tiling, order=order).moved
        assert bound <= moved, (name, tiling, order, bound, moved)


def test_blocked_gemm_moves_less_than_naive(kernel_sdfg):
    """The simulator sees the effect of tiling (sanity check of the validation itself)."""
    model = extract(kernel_sdfg('gemm'))
    sizes = dict(N=16, M=16, K=16)
    naive = simulate(model, 64, sizes).moved
    tiled = simulate(model, 64, sizes, tiling={'i': 4, 'j': 4, 'k': 4}).moved
    assert tiled < naive


def test_lru_counts_loads_and_write_backs():
    c = LRUCache(2)
    c.read('a')  # load a
    c.read('a')  # hit
    c.write('b')  # allocate b, no load
    c.read('c')  # load c, evict a (clean)
    c.read('d')  # load d, evict b (dirty -> store)
    c.flush()
    assert (c.loads, c.stores, c.accesses) == (3, 1, 5)


def test_lru_flush_drops_transients():
    c = LRUCache(4)
    c.write(('tmp', 0))
    c.write(('out', 0))
    c.flush(lambda key: key[0] == 'tmp')
    assert c.stores == 1


def test_transient_results_are_not_stored(kernel_sdfg):
    model = extract(kernel_sdfg('gemm'))
    model.transients.add('C')
    res = simulate(model, 4096, dict(N=4, M=4, K=4))
    assert res.stores == 0 and res.loads == 4 * 4 + 4 * 4 + 4 * 4


@pytest.mark.parametrize('words', [0, -3, 2.5, True])
def test_lru_rejects_bad_sizes(words):
    with pytest.raises(SimulationError, match='positive integer'):
        LRUCache(words)


def test_simulate_needs_every_symbol(kernel_sdfg):
    with pytest.raises(SimulationError, match='no value for symbol K'):
        simulate(kernel_sdfg('gemm'), 16, dict(N=4, M=4))


def test_simulate_rejects_bad_tiles(kernel_sdfg):
    with pytest.raises(SimulationError, match='tile sizes'):
        simulate(kernel_sdfg('gemm'), 16, dict(N=4, M=4, K=4), tiling={'i': 0})
