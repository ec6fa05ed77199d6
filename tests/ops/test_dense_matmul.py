"""The register-blocked SIMD expansion of DaCe's dense MatMul (selected by ss.optimize and
by default in programs with sparse data): compared with NumPy on rectangular, one-column
and float32/float64 products; refused where it does not apply. The dot-product reduction
that replaces DaCe's atomic-add map, and DaCe's 'pure-seq' for reductions along an axis
(a row-wise log_softmax after SpMM), likewise."""
import copy

import dace
import numpy as np
import pytest
import scipy.sparse as sp
from dace.libraries.blas import MatMul
from dace.libraries.standard import Reduce

import sdfgsparse as ss
from sdfgsparse.targets.cpu.dense_products import (DOT_PARALLEL, IMPLEMENTATION, REDUCE_IMPLEMENTATION, dot_applicable,
                                         rows_applicable)

M, K, N = (dace.symbol(s) for s in 'MKN')


@dace.program
def mm64(A: dace.float64[M, K], B: dace.float64[K, N]):
    return A @ B


@dace.program
def mm32(A: dace.float32[M, K], B: dace.float32[K, N]):
    return A @ B


@dace.program
def mv(A: dace.float64[M, K], x: dace.float64[K]):
    return A @ x


def _select(prog):
    sdfg = prog.to_sdfg()
    n = 0
    for node, state in sdfg.all_nodes_recursive():
        if rows_applicable(node, state):
            node.implementation = IMPLEMENTATION
            n += 1
    return sdfg, n


@pytest.mark.parametrize('prog,dt', [(mm64, np.float64), (mm32, np.float32)])
def test_row_expansion_matches_numpy(prog, dt, rng):
    sdfg, n = _select(prog)
    assert n == 1
    compiled = sdfg.compile()
    # register blocks of 4 rows; column panels of 4 vectors, 1 vector and a masked rest
    # (a vector is 16 float32 / 8 float64): full, trailing rows, every panel kind, k = 0
    for m, k, nn in ((7, 5, 3), (33, 1, 17), (1, 40, 1), (64, 64, 64), (9, 3, 100), (130, 70, 301),
                     (4, 16, 8), (6, 0, 5)):
        A, B = rng.standard_normal((m, k)).astype(dt), rng.standard_normal((k, nn)).astype(dt)
        got = compiled(A=A, B=B, M=m, K=k, N=nn)
        np.testing.assert_allclose(got, A @ B, rtol=1e-5 if dt == np.float32 else 1e-12, atol=1e-5)


def test_not_applicable_to_matrix_vector():
    _, n = _select(mv)
    assert n == 0


@dace.program
def dot64(x: dace.float64[M], y: dace.float64[M]):
    return np.dot(x, y)


@dace.program
def dot32_strided(x: dace.float32[M, 2], y: dace.float32[M]):
    return np.dot(x[:, 1], y)


def _select_dots(prog):
    sdfg = prog.to_sdfg()
    n = 0
    for node, state in sdfg.all_nodes_recursive():
        if isinstance(state, dace.SDFGState) and dot_applicable(node, state):
            node.implementation = IMPLEMENTATION
            n += 1
    return sdfg, n


def test_dot_reduction_matches_numpy(rng):
    sdfg, n = _select_dots(dot64)
    assert n == 1
    compiled = sdfg.compile()
    # one element, a SIMD remainder, and above DOT_PARALLEL (the parallel reduction)
    for m in (1, 37, 1000, DOT_PARALLEL + 123):
        x, y = rng.standard_normal(m), rng.standard_normal(m)
        np.testing.assert_allclose(compiled(x=x, y=y, M=m)[0], x @ y, rtol=1e-10)


def test_dot_reduction_on_a_strided_column(rng):
    sdfg, n = _select_dots(dot32_strided)
    assert n == 1
    compiled = sdfg.compile()
    for m in (5, 4099):
        x, y = rng.standard_normal((m, 2)).astype(np.float32), rng.standard_normal(m).astype(np.float32)
        np.testing.assert_allclose(compiled(x=x, y=y, M=m)[0], x[:, 1] @ y, rtol=1e-4)


def test_dot_not_applicable_to_mixed_types():
    @dace.program
    def mixed(x: dace.float64[M], y: dace.float32[M]):
        return np.dot(x, y)

    assert _select_dots(mixed)[1] == 0


@dace.program
def gcn_plain(A: ss.CSR[dace.float32, M, M], X: dace.float32[M, K], W: dace.float32[K, N]):
    return np.maximum(A @ (X @ W), 0)


@dace.program
def cg_dots(A: ss.CSR[dace.float64, M, M], p: dace.float64[M]):
    Ap = A @ p
    return np.dot(p, Ap), Ap


def _compiled_sdfg(prog):
    (csdfg, _), = prog.__dict__['_ss_fast'].values()
    return csdfg.sdfg


def _implementations(sdfg, cls):
    return [n.implementation for n, _ in sdfg.all_nodes_recursive() if isinstance(n, cls)]


def _tasklet_code(sdfg):
    """The code of every tasklet of the compiled (expanded) SDFG."""
    return '\n'.join(n.code.as_string for n, _ in sdfg.all_nodes_recursive()
                     if isinstance(n, dace.sdfg.nodes.Tasklet))


def test_plain_sparse_program_takes_the_row_expansion(rng):
    """A program with sparse data: its dense X @ W takes sdfgsparse's expansion without
    ss.optimize (the SDFG call hook), and the result matches NumPy."""
    A = sp.random(70, 70, density=0.1, format='csr', random_state=4, dtype=np.float32)
    X = rng.random((70, 19)).astype(np.float32)
    W = rng.random((19, 37)).astype(np.float32)
    got = gcn_plain(A, X, W)
    np.testing.assert_allclose(got, np.maximum(A @ (X @ W), 0), rtol=1e-5)
    assert 'sdfgsparse::gemm_row_block' in _tasklet_code(_compiled_sdfg(gcn_plain))  # its register panels


def test_plain_sparse_program_takes_the_dot_reduction(rng):
    A = sp.random(90, 90, density=0.1, format='csr', random_state=5)
    p = rng.random(90)
    dot, Ap = cg_dots(A, p)
    np.testing.assert_allclose(Ap, A @ p)
    np.testing.assert_allclose(dot, p @ (A @ p))
    assert 'reduction(+:s)' in _tasklet_code(_compiled_sdfg(cg_dots))  # ExpandDotReduce's tasklet


def test_dense_only_program_keeps_dace_choices(rng):
    a, b = rng.random((9, 5)), rng.random((5, 7))
    sdfg = mm64.to_sdfg(a, b)
    from sdfgsparse.targets.cpu.dense_products import sparse_program_defaults
    sparse_program_defaults(sdfg)
    assert _implementations(sdfg, MatMul) == [None]
    np.testing.assert_allclose(mm64(a, b), a @ b)


def test_ss_compile_takes_the_row_expansion_on_a_copy(rng):
    """SDFG-level scripting gets the same default; the caller's SDFG is left as it was."""
    A = sp.random(40, 40, density=0.1, format='csr', random_state=6, dtype=np.float32)
    X = rng.random((40, 8)).astype(np.float32)
    W = rng.random((8, 24)).astype(np.float32)
    sdfg = dace.program(gcn_plain.f).to_sdfg(A, X, W)  # a fresh parse (not one a call has compiled)
    before = sdfg.to_json()
    prog = ss.compile(sdfg)
    np.testing.assert_allclose(prog(A=A, X=X, W=W), np.maximum(A @ (X @ W), 0), rtol=1e-5)
    assert 'sdfgsparse::gemm_row_block' in _tasklet_code(prog.compiled.sdfg)
    assert _implementations(sdfg, MatMul) == [None]
    assert sdfg.to_json() == before


@dace.program
def product_of_slices(A: ss.CSR[dace.float64, M, N], X: dace.float64[12, 5], W: dace.float64[5, 5],
                      C: dace.float64[12, 5]):
    C[0:4, :] = X[2:6, :] @ W
    return A @ X


def test_products_of_array_slices_keep_dace_expansion(rng):
    """The row expansion reads whole arrays: a product of slices (constant shapes, so no
    views remain after simplify) must not take it."""
    A = sp.random(12, 12, density=0.3, format='csr', random_state=1)
    X, W, C = rng.random((12, 5)), rng.random((5, 5)), np.zeros((12, 5))
    sdfg = dace.program(product_of_slices.f).to_sdfg(A, X, W, C)
    (node, state), = [(n, s) for n, s in sdfg.all_nodes_recursive() if isinstance(n, MatMul)]
    assert not rows_applicable(node, state)
    want = np.zeros((12, 5))
    want[0:4] = X[2:6] @ W
    y = product_of_slices(A, X, W, C)
    np.testing.assert_allclose(C, want)
    np.testing.assert_allclose(y, A @ X)


def test_explicit_implementations_and_blas_defaults_are_kept(rng):
    from sdfgsparse.targets.cpu.dense_products import select_dense_products
    A = sp.random(30, 30, density=0.1, format='csr', random_state=2, dtype=np.float32)
    X, W = rng.random((30, 4)).astype(np.float32), rng.random((4, 6)).astype(np.float32)
    sdfg = dace.program(gcn_plain.f).to_sdfg(A, X, W)
    (node, _), = [(n, s) for n, s in sdfg.all_nodes_recursive() if isinstance(n, MatMul)]
    node.implementation = 'specialize'  # the user's choice
    assert select_dense_products(sdfg) == 0 and node.implementation == 'specialize'
    node.implementation = None
    with dace.config.set_temporary('library', 'blas', 'default_implementation', value='MKL'):
        assert select_dense_products(sdfg) == 0 and node.implementation is None
    assert select_dense_products(sdfg, apply=False) == 1 and node.implementation is None
    assert select_dense_products(sdfg) == 1 and node.implementation == IMPLEMENTATION


@dace.program
def spmm_reductions(A: ss.CSR[dace.float32, M, N], Y: dace.float32[N, 7]):
    Z = A @ Y
    mx = np.reshape(np.max(Z, axis=1), (M, 1))
    e = np.exp(Z - mx)
    lsm = Z - mx - np.log(np.reshape(np.sum(e, axis=1), (M, 1)))
    return lsm, np.min(Z, axis=0), np.sum(Z)


def test_axis_reductions_take_the_sequential_expansion(rng):
    """Row max / row sum / column min of a dense result keep one register accumulator per
    output (DaCe's 'pure-seq'), no atomic update per element; the full sum keeps DaCe's
    parallel expansion. Results against NumPy, with rows longer than a vector, empty rows
    and 2 threads."""
    A = sp.random(300, 120, density=0.05, format='csr', random_state=3, dtype=np.float32)
    Y = rng.standard_normal((120, 7)).astype(np.float32)
    opt = ss.optimize(spmm_reductions)
    reduces = [n for n, _ in opt.sdfg.all_nodes_recursive() if isinstance(n, Reduce)]
    assert sorted(map(str, (r.implementation for r in reduces))) == ['None'] + [REDUCE_IMPLEMENTATION] * 3
    Z = (A @ Y).astype(np.float64)
    lsm, cmin, total = opt(A=A, Y=Y)
    mx = Z.max(axis=1, keepdims=True)
    want = Z - mx - np.log(np.exp(Z - mx).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(lsm, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(cmin, Z.min(axis=0), rtol=1e-5)
    np.testing.assert_allclose(total.ravel()[0], Z.sum(), rtol=1e-4, atol=1e-4)
    sdfg = copy.deepcopy(opt.sdfg)
    sdfg.expand_library_nodes()
    code = '\n'.join(c.clean_code for c in sdfg.generate_code())
    atomics = [line.split('reduce_atomic')[0].split('ReductionType::')[1] for line in code.splitlines()
               if 'reduce_atomic' in line and 'ReductionType::' in line]
    assert atomics == ['Sum, float>::'], atomics  # the full sum only


@dace.program
def sparse_linear(W: ss.CSR[dace.float32, M, N], X: dace.float32[K, N], b: dace.float32[M]):
    return np.transpose(W @ np.transpose(X)) + b


def test_transposes_take_the_tiled_expansion(rng):
    """x @ W.T of a sparse linear layer, as the torch frontend writes it: both transposes
    take DaCe's MapTiling-ed expansion (tiles in parallel, sequential inside); shapes that
    are not multiples of the tile, and a single row, against NumPy."""
    from dace.libraries.standard import Transpose
    from sdfgsparse.targets.cpu.dense_products import TRANSPOSE_TILE
    opt = ss.optimize(sparse_linear)
    nodes = [n for n, _ in opt.sdfg.all_nodes_recursive() if isinstance(n, Transpose)]
    assert len(nodes) == 2 and all(n.implementation == IMPLEMENTATION for n in nodes)
    sdfg = copy.deepcopy(opt.sdfg)
    sdfg.expand_library_nodes()
    tiled = [n for n, _ in sdfg.all_nodes_recursive()
             if isinstance(n, dace.nodes.MapEntry) and n.map.params[0].startswith('tile_')]
    assert len(tiled) == 2 and all(str(n.map.range[0][2]) == str(TRANSPOSE_TILE) for n in tiled)
    for m, n, k in ((37, 50, 21), (16, 16, 16), (5, 70, 1)):
        W = sp.random(m, n, density=0.2, format='csr', random_state=m, dtype=np.float32)
        X, b = rng.standard_normal((k, n)).astype(np.float32), rng.standard_normal(m).astype(np.float32)
        np.testing.assert_allclose(opt(W=W, X=X, b=b), X @ W.T.toarray() + b, rtol=1e-5, atol=1e-5)
