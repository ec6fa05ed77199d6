"""The I/O lower bound of contractions with one sparse operand (``einsum_model``), from the
model and through ``io_lower_bound`` of a program, and its validity: never above the words an
LRU fast memory moves for the level walk the kernels run."""
import dace
import numpy as np
import pytest
import scipy.sparse as sp
import sympy

import sdfgsparse as ss
from sdfgsparse.analysis import LRUCache, StatsError, einsum_distinct, einsum_model, io_lower_bound

I, J, K, R = (dace.symbol(s) for s in 'IJKR')


@dace.program
def mttkrp_ttv(T: ss.CSF[dace.float64, I, J, K], B: dace.float64[J, R], C: dace.float64[K, R], v: dace.float64[K]):
    return np.einsum('ijk,jr,kr->ir', T, B, C), np.einsum('ijk,k->ij', T, v)


def _tensor(shape, density, seed=0):
    return sp.random_array(shape, density=density, format='coo', rng=np.random.default_rng(seed))


def test_the_model_counts_the_compulsory_words():
    ext = {'i': 10, 'j': 20, 'k': 30, 'r': 4}
    # without projections: their lower bounds nnz / (extents of the other sparse indices)
    m = einsum_model('ijk,jr,kr->ir', 600, ext)
    assert m.volume == 600 * 4 and m.intensity == 4
    assert m.total == 600 + sympy.Rational(600, 300) * 4 + sympy.Rational(600, 200) * 4 + sympy.Rational(600, 600) * 4
    given = einsum_model('ijk,jr,kr->ir', 600, ext, distinct={'j': 20, 'k': 25, 'i': 10})
    assert given.total == 600 + 4 * (20 + 25 + 10)
    # a dense operand that shares no index with the sparse one moves whole; TTV's output
    assert einsum_model('ijk,rs->ijrs', 6, {**ext, 's': 3}, distinct={'ij': 5}).total == 6 + 12 + 5 * 12
    assert einsum_model('ijk,k->ij', 0, ext).total == 0
    with pytest.raises(StatsError, match='no extent for r'):
        einsum_model('ijk,kr->ir', 5, {'i': 1, 'j': 1, 'k': 1})


def test_distinct_projections():
    T = sp.coo_array((np.ones(4), (np.array([0, 0, 1, 0]), np.array([1, 1, 2, 1]), np.array([0, 3, 0, 0]))),
                     shape=(2, 3, 4))
    d = einsum_distinct(T, 'ijk')
    assert d == {'i': 2, 'j': 2, 'k': 2, 'ij': 2, 'ik': 3, 'jk': 3, 'ijk': 3, 'nnz': 3}  # (a duplicate counted once)
    with pytest.raises(StatsError, match='3 dimensions, subscripts'):
        einsum_distinct(T, 'ij')


def test_a_programs_contractions_are_bounded():
    T = _tensor((20, 30, 40), 0.05)
    d = einsum_distinct(T, 'ijk')
    res = io_lower_bound(mttkrp_ttv, matrices={'T': T})
    r = sympy.Symbol('R', positive=True)
    want_mttkrp = d['nnz'] + r * (d['j'] + d['k'] + d['i'])
    got = {op.op: op.bound for op in res.sparse_ops}
    assert sympy.simplify(got['SparseEinsum'].subs('R', r) - want_mttkrp) == 0
    assert got['SparsePrefixEinsum'] == d['nnz'] + d['k'] + d['ij']
    # both read T: the larger of the two, not their sum
    assert sympy.simplify(res.total.subs('R', r) - want_mttkrp) == 0
    symbolic = io_lower_bound(mttkrp_ttv)
    assert {"SparseEinsum", "SparsePrefixEinsum"} <= {op.op for op in symbolic.sparse_ops}


@pytest.mark.parametrize('shape, density, rank, words', [((6, 8, 10), 0.2, 3, 16), ((12, 5, 7), 0.3, 8, 64),
                                                         ((4, 4, 4), 1.0, 2, 8)])
def test_the_bound_never_exceeds_the_walk(shape, density, rank, words):
    """An LRU fast memory of ``words`` words running the CSF walk of MTTKRP (root slices, then
    fibers, then entries; the rank innermost) moves at least the bound."""
    T = _tensor(shape, density, seed=rank)
    coords = np.stack(T.coords)
    order = np.lexsort(coords[::-1])
    i, j, k = coords[:, order]
    cache = LRUCache(words)
    for e, (a, b, c) in enumerate(zip(i, j, k)):
        cache.read(('T', e))
        for r in range(rank):
            cache.read(('B', b, r))
            cache.read(('C', c, r))
            cache.read(('M', a, r))
            cache.write(('M', a, r))
    cache.flush()
    moved = cache.loads + cache.stores
    ext = dict(zip('ijk', shape), r=rank)
    bound = einsum_model('ijk,jr,kr->ir', T.nnz, ext, distinct=einsum_distinct(T, 'ijk')).total
    assert bound <= moved
