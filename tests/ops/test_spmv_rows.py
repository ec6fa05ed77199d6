"""SpMV's row walk in vector chunks (``SpMV.row_chunk``, targets/cpu/dense_loops.spmv_row_chunks):
the same program with chunks of 2, 4 and 8 (adaptive: one entry per step on calls whose
rows look regular), chunks of 4 on every call, and the scalar loop (``row_chunk = 0``)
against scipy, on rows of every length around the chunk sizes, rows at the very end of
the arrays, empty and one-entry matrices, a real power-law matrix, both value dtypes and
index widths, CSC seen as ``A.T`` with its epilogue apart and fused into the SpMV, and a
matrix computed inside the program (its arrays may be larger than its entries). Also: a
float32 matrix times a float64 vector (the chunks need one dtype; the scalar loop and
the kernel's checked walk sum in float64)."""
import os

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.ops.spmv import SpMV
from sdfgsparse.transformations import SparseEpilogueFusion
from sparse_zoo import real_matrix

M, N = dace.symbol('M'), dace.symbol('N')


@dace.program
def spmv64(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


@dace.program
def spmv32_i64(A: ss.CSR[dace.float32, M, N, dace.int64], x: dace.float32[N]):
    return A @ x


@dace.program
def spmv_t_relu(A: ss.CSC[dace.float64, M, N], x: dace.float64[M]):
    return np.maximum(A.T @ x, 0)


@dace.program
def spmv_of_sum(A: ss.CSR[dace.float64, M, N], B: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return (A + B) @ x


@dace.program
def spmv_mixed(A: ss.CSR[dace.float32, M, N], x: dace.float64[N]):
    return A @ x


_COMPILED = {}


def _variants(prog, fuse=False):
    """The program compiled with each row_chunk (the SpMV nodes set before expansion);
    ``fuse``: with the epilogue (bias, activation) fused into the SpMV first."""
    if (prog, fuse) not in _COMPILED:
        out = {}
        for chunk in (0, 2, 4, 8, -4):  # -4: chunks of 4 on every call (adaptive_walk off)
            sdfg = prog.to_sdfg()
            sdfg.name = f'{sdfg.name}_chunk{chunk}{"_fused" if fuse else ""}'.replace('-', 'fixed')
            if fuse:
                assert sdfg.apply_transformations_repeated(SparseEpilogueFusion) >= 1
            nodes = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, SpMV)]
            assert nodes
            for n in nodes:
                n.row_chunk = abs(chunk)
                n.adaptive_walk = chunk >= 0
                assert bool(n.epilogue) == fuse
            out[chunk] = ss.compile(sdfg)
        _COMPILED[prog, fuse] = out
    return _COMPILED[prog, fuse]


def _rows_of_every_length(rng, widest=19, rows=3):
    """Rows of 0..widest entries in a shuffled order, ``rows`` of each, random columns;
    the last rows of the array are long ones (their chunks meet the array's end)."""
    lengths = np.repeat(np.arange(widest + 1), rows)
    rng.shuffle(lengths)
    lengths = np.concatenate([lengths, [widest, widest - 1]])
    n = 40
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    indices = np.concatenate([np.sort(rng.choice(n, size=k, replace=False)) for k in lengths]).astype(np.int32)
    data = rng.standard_normal(indptr[-1])
    return sp.csr_matrix((data, indices, indptr), shape=(len(lengths), n))


def _matrices(rng):
    yield _rows_of_every_length(rng)
    yield sp.csr_matrix((5, 7))  # no entries
    yield sp.csr_matrix(np.array([[2.5]]))
    yield sp.csr_matrix(np.ones((3, 9)))  # rows of 9: two chunks of 4 and a tail
    yield sp.csr_matrix(real_matrix('cora_A'))  # power-law rows
    band = sp.diags([rng.standard_normal(300 - abs(d)) for d in range(-4, 5)], list(range(-4, 5)), format='csr')
    yield band  # regular rows: the adaptive walk takes one entry per step


def _check(variants, args, want, rtol):
    for chunk, prog in variants.items():
        np.testing.assert_allclose(prog(*args), want, rtol=rtol, atol=rtol, err_msg=f'row_chunk={chunk}')


def test_chunks_agree_with_the_scalar_loop_and_scipy(rng):
    v64, v32 = _variants(spmv64), _variants(spmv32_i64)
    for A in _matrices(rng):
        A = sp.csr_matrix(A, dtype=np.float64)
        A.indices, A.indptr = A.indices.astype(np.int32), A.indptr.astype(np.int32)
        x = rng.standard_normal(A.shape[1])
        _check(v64, (A, x), A @ x, 1e-12)
        B = A.astype(np.float32)
        B.indices, B.indptr = B.indices.astype(np.int64), B.indptr.astype(np.int64)
        x32 = x.astype(np.float32)
        _check(v32, (B, x32), B.astype(np.float64) @ x32.astype(np.float64), 1e-4)


@pytest.mark.parametrize('fuse', [False, True])
def test_transposed_csc_with_a_fused_epilogue(rng, fuse):
    variants = _variants(spmv_t_relu, fuse)
    for A in _matrices(rng):
        C = sp.csc_matrix(A, dtype=np.float64)
        C.indices, C.indptr = C.indices.astype(np.int32), C.indptr.astype(np.int32)
        x = rng.standard_normal(C.shape[0])
        _check(variants, (C, x), np.maximum(C.T @ x, 0), 1e-12)


def test_a_matrix_computed_in_the_program(rng):
    """``A + B`` has arrays sized for both operands' entries, the tail unwritten. (The
    chunks stop at the last row's end, not the arrays'; a read past it would not change
    the results, so this test sees only that the sums are right.)"""
    variants = _variants(spmv_of_sum)
    A = _rows_of_every_length(rng)
    B = _rows_of_every_length(np.random.default_rng(7))[:A.shape[0]]
    for P, Q in ((A, B), (A, A), (A, sp.csr_matrix(A.shape))):
        P, Q = sp.csr_matrix(P), sp.csr_matrix(Q)
        for S in (P, Q):
            S.indices, S.indptr = S.indices.astype(np.int32), S.indptr.astype(np.int32)
        x = rng.standard_normal(A.shape[1])
        _check(variants, (P, Q, x), (P + Q) @ x, 1e-12)


def test_float32_matrix_times_float64_vector(rng):
    """Mixed dtypes sum in float64, as scipy does (the kernel's checked walk once read the
    float32 values as float64 and did not compile)."""
    A = sp.random(60, 50, density=0.1, format='csr', random_state=2, dtype=np.float32)
    x = rng.standard_normal(50)
    want = A.astype(np.float64) @ x
    np.testing.assert_allclose(spmv_mixed(A, x), want, rtol=1e-12)
    (node, ) = [n for n, _ in spmv_mixed.to_sdfg().all_nodes_recursive() if isinstance(n, SpMV)]
    assert node.row_chunk == 4  # the default; the chunks are skipped for mixed dtypes


@pytest.mark.parametrize('chunk', [-1, 0, 1])
def test_chunks_off(chunk, rng):
    """row_chunk <= 1: the scalar loop (no vector tasklet in the expansion)."""
    sdfg = spmv64.to_sdfg()
    for n, _ in sdfg.all_nodes_recursive():
        if isinstance(n, SpMV):
            n.row_chunk = chunk
    sdfg.expand_library_nodes()
    code = [n.code.as_string for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.Tasklet)]
    assert not any('spmv_row_chunks' in c for c in code)
    sdfg = spmv64.to_sdfg()
    sdfg.expand_library_nodes()
    code = [n.code.as_string for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.Tasklet)]
    assert any('sdfgsparse::spmv_row_chunks<4>' in c for c in code)


@pytest.mark.parametrize('chunk', [3, 6, 128])
def test_chunks_must_be_a_power_of_two(chunk):
    sdfg = spmv64.to_sdfg()
    for n, _ in sdfg.all_nodes_recursive():
        if isinstance(n, SpMV):
            n.row_chunk = chunk
    with pytest.raises(ValueError, match=f'row_chunk must be 0, 1 or a power of two up to 64.*got {chunk}'):
        sdfg.expand_library_nodes()


def _regular_rows_program():
    """The leaf alone: one C++ tasklet calling it (the call text the kernels use)."""
    from sdfgsparse.targets.cpu.dense_loops import regular_rows_call
    from sdfgsparse.targets.cpu.environment import INCLUDE
    sdfg = dace.SDFG('regular_rows_probe')
    R = dace.symbol('R')
    sdfg.add_array('_pos', [R + 1], dace.int32)
    sdfg.add_array('_out', [1], dace.int64)
    state = sdfg.add_state()
    t = state.add_tasklet('probe', {'_tpos'}, {'_treg'}, regular_rows_call('_treg', '_tpos', 'R'),
                          language=dace.Language.CPP)
    state.add_edge(state.add_read('_pos'), None, t, '_tpos', dace.Memlet('_pos[0:R + 1]'))
    state.add_edge(t, '_treg', state.add_write('_out'), None, dace.Memlet('_out[0]'))
    sdfg.append_global_code(f'#include "{os.path.join(INCLUDE, "sdfgsparse_rows.h")}"')  # (no library node: no environment)
    return sdfg.compile()


@pytest.mark.parametrize('lengths, regular', [
    ([9] * 500, 1),  # a band
    ([9] * 250 + [3] * 250, 1),  # two bands
    ([4] * 100 + [40] * 100, 0),  # regular but long rows (mean > 16)
    (list(np.random.default_rng(0).integers(0, 12, 500)), 0),  # irregular
    ([5, 6], 0),  # too few rows to sample
    ([], 0),
])
def test_regular_rows_decision(lengths, regular):
    probe = _regular_rows_program()
    pos = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    out = np.full(1, -1, np.int64)
    probe(_pos=pos, _out=out, R=len(lengths))
    assert out[0] == regular
