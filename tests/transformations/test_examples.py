"""Example arguments recorded on an SDFG (``ss.record_examples``, ``ss.optimize(matrices=)``):
what is kept, that it survives a save and reload, that the transformations read it, that the
notes leave the build folder's key alone, and the errors."""
import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.build import naming
from sdfgsparse.transformations import SparseDenseTiling, SparseFormatSelection
from sdfgsparse.transformations.examples import recorded, recorded_sizes, recorded_stats

M, N, K = (dace.symbol(s) for s in 'MNK')


@dace.program
def atb(A: ss.CSR[dace.float64, N, M], B: dace.float64[N, K]):
    return A.T @ B


def test_optimize_records_examples_that_survive_a_reload(tmp_path, rng):
    A = sp.random_array((200, 150), density=0.05, format='csr', random_state=1)
    B = rng.standard_normal((200, 16))
    opt = ss.optimize(atb, matrices={'A': A, 'B': B}, cache_size=1 << 20)
    rec = recorded(opt.sdfg)
    assert {'N': 200, 'M': 150, 'K': 16}.items() <= rec['sizes'].items() and rec['cache_bytes'] == 1 << 20
    assert rec['stats']['A']['nnz'] == A.nnz and rec['given'] == {'A': 'CSR'} and 'B' not in rec['stats']
    path = tmp_path / 'atb.sdfg'
    opt.sdfg.save(str(path))
    again = dace.SDFG.from_file(str(path))
    assert recorded(again) == rec
    assert recorded_sizes(again)['K'] == 16 and recorded_stats(again, 'A')[0]['nnz'] == A.nnz


def test_transformations_read_the_record(rng):
    A = sp.random_array((1000, 1000), density=0.05, format='csr', random_state=5)
    B = rng.standard_normal((1000, 64))
    sdfg = atb.to_sdfg()
    assert sdfg.apply_transformations(SparseDenseTiling) == 0  # sizes unknown
    ss.record_examples(sdfg, {'A': A, 'B': B}, threads=1, cache_bytes=2000 * 8 * 8)
    assert sdfg.apply_transformations(SparseDenseTiling) == 1
    # the same decision as with the sizes given as properties
    other = atb.to_sdfg()
    nnz = [k for k in recorded_sizes(sdfg) if k not in 'MNK'][0]
    opts = {'sizes': {'M': 1000, 'N': 1000, 'K': 64, nnz: A.nnz}, 'cache_bytes': 2000 * 8 * 8, 'threads': 1}
    assert other.apply_transformations(SparseDenseTiling, options=opts) == 1
    tiles = [[n.dense_tile for n, _ in g.all_nodes_recursive() if hasattr(n, 'dense_tile')] for g in (sdfg, other)]
    assert tiles[0] == tiles[1] and tiles[0][0] > 0
    np.testing.assert_allclose(ss.compile(sdfg)(A=A, B=B), A.T @ B, rtol=1e-10, atol=1e-12)


def test_notes_do_not_change_the_build_folder():
    sdfg = atb.to_sdfg()
    before = naming.content_hash(sdfg)
    ss.record_examples(sdfg, {'A': sp.eye(30, format='csr')})
    assert naming.content_hash(sdfg) == before


def test_record_errors():
    sdfg = atb.to_sdfg()
    with pytest.raises(ss.errors.ShapeError, match="'Z' is not an argument"):
        ss.record_examples(sdfg, {'Z': np.ones(3)})
    with pytest.raises(ss.errors.ArgumentError, match='must map argument names'):
        ss.record_examples(sdfg, [('A', 1)])
    with pytest.raises(ss.errors.ArgumentError, match='threads must be a positive integer'):
        ss.record_examples(sdfg, {'A': sp.eye(30, format='csr')}, threads=0)
    with pytest.raises(ss.errors.ShapeError):
        ss.record_examples(sdfg, {'A': sp.eye(30, format='csr'), 'B': np.ones((29, 4))})  # N: 30 against 29
    assert recorded(sdfg) == {}  # nothing recorded by a failed call
    with pytest.raises(TypeError, match='must be a dict'):
        sdfg.sparse_notes = 'x'
    assert SparseFormatSelection().stats == {}
