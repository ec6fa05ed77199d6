"""The README example, SDFG-level scripting (to_sdfg, DaCe transformations, ss.compile),
compile-once behaviour, and the rule that inputs are never modified."""
import dace
import numpy as np
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.ops.base import SparseLibraryNode

M, N, K = (dace.symbol(s) for s in 'MNK')


@dace.program
def spmv(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


@dace.program
def gcn(A: ss.CSR[dace.float32, N, N], X: dace.float32[N, K], W: dace.float32[K, M]):
    return np.maximum(A @ (X @ W), 0)


def test_readme_example():
    A = sp.random_array((1000, 800), density=0.01, format='csr', rng=np.random.default_rng(0))
    y = spmv(A, np.ones(800))
    np.testing.assert_allclose(y, A @ np.ones(800), rtol=1e-12)

    rng = np.random.default_rng(1)
    G = sp.random_array((300, 300), density=0.02, format='csr', rng=rng, dtype=np.float32)
    X = rng.standard_normal((300, 16)).astype(np.float32)
    W = rng.standard_normal((16, 8)).astype(np.float32)
    np.testing.assert_allclose(gcn(G, X, W), np.maximum(G @ (X @ W), 0), rtol=1e-4, atol=1e-5)


def test_to_sdfg_shows_library_nodes_and_transformations_keep_it_correct(rng):
    sdfg = spmv.to_sdfg()
    libnodes = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, SparseLibraryNode)]
    assert [type(n).__name__ for n in libnodes] == ['SpMV']
    sdfg.expand_library_nodes()
    from dace.transformation.dataflow import MapTiling
    applied = sdfg.apply_transformations(MapTiling, options={'tile_sizes': (16, )})
    assert applied == 1
    sdfg.validate()
    A = sp.random_array((100, 70), density=0.1, format='csr', rng=rng)
    x = rng.standard_normal(70)
    prog = ss.compile(sdfg)
    np.testing.assert_allclose(prog(A=A, x=x), A @ x, rtol=1e-12)
    np.testing.assert_allclose(prog(A=2 * A, x=x), 2 * (A @ x), rtol=1e-12)


def test_sdfg_json_round_trip_keeps_formats(rng):
    sdfg = spmv.to_sdfg()
    again = dace.SDFG.from_json(sdfg.to_json())
    A = sp.random_array((40, 30), density=0.2, format='csr', rng=rng)
    x = rng.standard_normal(30)
    np.testing.assert_allclose(ss.compile(again)(A=A, x=x), A @ x, rtol=1e-12)


def test_compiles_once_per_signature(rng):

    @dace.program
    def once(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
        return A @ x

    for m in (20, 35):
        A = sp.random_array((m, 30), density=0.2, format='csr', rng=rng)
        once(A, np.ones(30))
    assert len(once._cache.cache) == 1


def test_inputs_unchanged_by_every_op(rng):

    @dace.program
    def many(A: ss.CSR[dace.float64, M, N], B: ss.CSR[dace.float64, M, N], x: dace.float64[N],
             D: dace.float64[M, N]):
        return (A @ x, A * D, A + D, A + B, A * B, ss.relu(A), 3 * A, A.T @ A, ss.convert(A, ss.CSC), A.sum(axis=0))

    A = sp.random_array((12, 9), density=0.3, format='csr', rng=rng)
    B = sp.random_array((12, 9), density=0.3, format='csr', rng=rng)
    x, D = rng.standard_normal(9), rng.standard_normal((12, 9))
    before = [a.copy() for a in (A.data, A.indices, A.indptr, B.data, B.indices, B.indptr, x, D)]
    many(A, B, x, D)
    for got, want in zip((A.data, A.indices, A.indptr, B.data, B.indices, B.indptr, x, D), before):
        np.testing.assert_array_equal(got, want)


def test_zero_copy_arguments(rng):
    from sdfgsparse.runtime.marshal import marshal_sparse
    from sdfgsparse.formats import sparse_type_of
    A = sp.random_array((10, 8), density=0.3, format='csr', rng=rng)
    arg = marshal_sparse('A', A, sparse_type_of(ss.CSR[dace.float64, M, N]))
    assert arg.arrays['vals'] is A.data and arg.arrays['crd1'] is A.indices and arg.arrays['pos1'] is A.indptr


def test_unannotated_sparse_argument(rng):

    @dace.program
    def free(A, x: dace.float64[N]):
        return A @ x

    A = sp.random_array((15, 11), density=0.3, format='csc', rng=rng)
    x = rng.standard_normal(11)
    np.testing.assert_allclose(free(A, x), A @ x, rtol=1e-12)
