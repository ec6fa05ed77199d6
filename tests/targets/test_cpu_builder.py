"""The cpu kernels are SDFGs from the builder (``targets/cpu/builder.py``): no source is
written and parsed to build them, C++ appears only as one-statement calls of the headers'
leaves, and they agree with scipy when called from 8 threads at once with Fortran-ordered
and strided dense operands. One test per group of nodes: the products, the sparse-sparse
operations, conversions and copies, reductions, softmax and attention."""
import ast
import re

import dace
import dace.frontend.python.newast
import dace.frontend.python.parser
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.ops.add import SparseAdd
from sdfgsparse.ops.add_dense import SparseAddDense
from sdfgsparse.ops.attention import SparseAttention
from sdfgsparse.ops.concat import SparseConcat
from sdfgsparse.ops.convert import Convert
from sdfgsparse.ops.dense_spmm import DenseSpMM
from sdfgsparse.ops.map_values import MapValues
from sdfgsparse.ops.mul import SparseMul
from sdfgsparse.ops.mul_dense import SparseMulDense
from sdfgsparse.ops.reduce import SparseSum
from sdfgsparse.ops.sddmm import SDDMM
from sdfgsparse.ops.spmm import SpMM
from sdfgsparse.ops.softmax import SparseSoftmax
from sdfgsparse.ops.sparse_copy import SparseCopy
from sdfgsparse.ops.spgemm import SpGEMM
from sdfgsparse.ops.spmv import SpMV
from sparse_zoo import format_of, from_threads

M, N, K = dace.symbol('M'), dace.symbol('N'), dace.symbol('K')
PRODUCTS = (SpMV, SpMM, SDDMM, DenseSpMM)
SPARSE_SPARSE = (SparseAdd, SparseMul, SpGEMM)
STRUCTURAL = (Convert, SparseConcat, SparseCopy, MapValues, SparseMulDense, SparseAddDense, SparseSum, SparseSoftmax)
FORMATS = ['CSR', 'CSC', 'COO', 'BSR', 'DCSR', 'ELL', 'DIA', 'NM2_4', 'GNM2_2_4', 'VNM4_2_8']

#: a C++ leaf call: one statement, optionally behind one condition on a connector
_LEAF = re.compile(r'^(if \(\w+( >= 0)?\) )?(\w+ = )?(sdfgsparse::|ss_)[\w:<>, ()*+/\-?.=]*;$')


def _program(fmt, vt=dace.float64, it=dace.int32):
    T = format_of(fmt)[vt, M, N, it]

    @dace.program
    def products(A: T, x: vt[N], xt: vt[M], B: vt[N, K], P: vt[K, M], X: vt[M, K], Y: vt[K, N], Z: vt[N, K]):
        return A @ x, A @ B, xt @ A, P @ A, ss.sddmm(A, X, Y), A.T @ xt, A.T @ X, ss.sddmm(A, X, Z.T)

    return products


def _sparse_sparse(fmt, vt=dace.float64, it=dace.int32):
    T = format_of(fmt)[vt, M, N, it]
    S = format_of(fmt)[vt, N, N, it]

    @dace.program
    def sparse_sparse(A: T, B: T, C: S):
        return A + B, A - B, A * B, A @ C, C + C.T

    return sparse_sparse


def _structural(fmt, vt=dace.float64, it=dace.int32):
    T = format_of(fmt)[vt, M, N, it]

    @dace.program
    def structural(A: T, D: vt[M, N]):
        return (ss.convert(A, ss.CSR), ss.convert(A, ss.CSC), ss.convert(A.T, ss.CSR), np.vstack([A, A]),
                np.hstack([A, A]), A.T, ss.abs(A), A * D, A + D, np.sum(A, axis=0), np.sum(A, axis=1), np.sum(A),
                ss.softmax(A), ss.softmax(A, axis=0))

    return structural


def _expanded_products(sdfg, kinds=PRODUCTS):
    """The labels of the nodes of ``kinds`` in ``sdfg``, each expanded with its cpu implementation."""
    found = []
    for node, state in list(sdfg.all_nodes_recursive()):
        if isinstance(node, kinds):
            node.implementation = 'cpu'
            found.append(node.label)
            node.expand(state.sdfg, state)
    return found


def _leaf_only(kernel_sdfg):
    """Tasklets that are more than a leaf call (C++) or assignments (Python)."""
    bad = []
    for node, _ in kernel_sdfg.all_nodes_recursive():
        if not isinstance(node, dace.nodes.Tasklet):
            continue
        code = node.code.as_string.strip()
        if node.language == dace.Language.CPP:
            if '\n' in code or not _LEAF.match(code):
                bad.append((node.label, code))
        elif not _assignments(ast.parse(code).body):
            bad.append((node.label, code))
    return bad


def _assignments(statements) -> bool:
    """Whether Python tasklet code is assignments only (behind a guard at most): no loop,
    no function, nothing that walks a row in Python."""
    for s in statements:
        if isinstance(s, ast.If):
            if not _assignments(s.body) or not _assignments(s.orelse):
                return False
        elif not isinstance(s, (ast.Assign, ast.AugAssign)):
            return False
    return True


def _built_without_source(sdfg, kinds, count, monkeypatch):
    """Expand the ``count`` nodes of ``kinds`` in ``sdfg`` with the parser refused; every
    tasklet of their kernels is a leaf call or assignments. Returns the leaf calls."""

    def refuse(*args, **kwargs):
        raise AssertionError('a kernel was parsed from Python source')

    monkeypatch.setattr(dace.frontend.python.newast, 'parse_dace_program', refuse)
    monkeypatch.setattr(dace.frontend.python.parser.DaceProgram, '_parse', refuse)
    names = _expanded_products(sdfg, kinds)
    assert len(names) >= count, names
    kernels = [n.sdfg for n, _ in sdfg.all_nodes_recursive()
               if isinstance(n, dace.nodes.NestedSDFG) and (n.label in names or n.sdfg.name in names)]
    assert len(kernels) >= len(names)
    for k in kernels:
        assert not _leaf_only(k), _leaf_only(k)
    return [n.code.as_string for k in kernels for n, _ in k.all_nodes_recursive()
            if isinstance(n, dace.nodes.Tasklet) and n.language == dace.Language.CPP]


@pytest.mark.parametrize('fmt', FORMATS)
def test_products_are_built_without_source(fmt, monkeypatch):
    """Expanding every product of every format parses nothing, and each tasklet is a C++
    leaf call (one statement) or Python assignments (behind a guard at most)."""
    calls = _built_without_source(_program(fmt).to_sdfg(), PRODUCTS, 8, monkeypatch)
    if fmt in ('CSR', 'NM2_4'):
        assert calls, 'no leaf on the fast path'


@pytest.mark.parametrize('fmt', ['CSR', 'CSC', 'BSR', 'DCSR', 'ELL', 'DIA', 'NM2_4'])
def test_sparse_sparse_are_built_without_source(fmt, monkeypatch):
    """A ± B, A * B, A @ C and C + C.T of every format with unique coordinates (a COO
    may repeat one: the product of two is refused): no source parsed, leaves only; CSR
    operands merge and multiply through the row leaves."""
    calls = _built_without_source(_sparse_sparse(fmt).to_sdfg(), SPARSE_SPARSE, 5, monkeypatch)
    if fmt == 'CSR':
        for name in ('union_fill', 'intersect_fill', 'gustavson_fill', 'rows_of_columns'):
            assert any(name in c for c in calls), name


@pytest.mark.parametrize('fmt', FORMATS)
def test_structural_are_built_without_source(fmt, monkeypatch):
    """Conversions, concatenations, copies, value maps, element-wise operations with a
    dense operand, sums and softmax of every format: no source parsed, leaves only; a CSR
    takes the row leaves (softmax_row, copy_row, dedupe-free row copies)."""
    calls = _built_without_source(_structural(fmt).to_sdfg(), STRUCTURAL, 14, monkeypatch)
    if fmt == 'CSR':
        for name in ('softmax_row', 'copy_row'):
            assert any(name in c for c in calls), name
    if fmt == 'COO':
        assert any('dedupe_fill' in c for c in calls)


def test_attention_is_built_without_source(monkeypatch):
    """The fused attention of a CSR is one leaf call per row (attention_row)."""
    S = dace.symbol('S')

    @dace.program
    def naive_attention(A: ss.CSR[dace.float64, M, N], Q: dace.float64[M, S], Kt: dace.float64[N, S],
                        V: dace.float64[N, K]):
        return ss.softmax(A * (Q @ Kt.T)) @ V

    opt = ss.optimize(naive_attention)
    calls = _built_without_source(opt.sdfg, (SparseAttention, ), 1, monkeypatch)
    assert any('attention_row' in c for c in calls), calls


def _layouts(rng, m, n, k):
    """Dense operands as a caller may hold them: Fortran-ordered and strided views."""
    x = rng.standard_normal(2 * n)[::2]  # strided vector
    xt = rng.standard_normal(m)
    B = np.asfortranarray(rng.standard_normal((n, k)))
    P = rng.standard_normal((k, 2 * m))[:, ::2]
    X = np.asfortranarray(rng.standard_normal((m, k)))
    Y = rng.standard_normal((2 * k, n))[::2]
    Z = rng.standard_normal((n, k))
    return x, xt, B, P, X, Y, Z


@pytest.mark.parametrize('fmt', ['CSR', 'COO', 'NM2_4'])
def test_products_from_eight_threads_with_hostile_layouts(fmt):
    """8 Python threads call the products at once, each with its own matrix and operands
    in Fortran order and strided views; every result agrees with scipy."""
    from sparse_zoo import as_format, padded_to_block
    prog = _program(fmt)
    F = format_of(fmt)
    m, n, k = 24, 16, 5
    cases = []
    for t in range(8):
        rng = np.random.default_rng(t)
        A = sp.random(m, n, density=0.3, format='csr', random_state=t)
        if fmt == 'NM2_4':
            A = sp.csr_array(ss.convert(padded_to_block(A, F), F, prune=True).to_scipy())
        cases.append((as_format(A, fmt, np.int32, rng) if fmt != 'NM2_4' else ss.convert(A, F), A.toarray(),
                      _layouts(rng, m, n, k)))
    prog(cases[0][0], *cases[0][2])  # (built once, before the threads)
    errors = {}

    def work(t):
        arg, Ad, (x, xt, B, P, X, Y, Z) = cases[t]
        want = [Ad @ x, Ad @ B, xt @ Ad, P @ Ad, Ad * (X @ Y), Ad.T @ xt, Ad.T @ X, Ad * (X @ Z.T)]
        for rep in range(5):
            got = prog(arg, x, xt, B, P, X, Y, Z)
            for name, g, w in zip(['A@x', 'A@B', 'xt@A', 'P@A', 'sddmm', 'A.T@xt', 'A.T@X', 'sddmm(Z.T)'], got,
                                  want):
                g = g.toarray() if hasattr(g, 'toarray') else np.asarray(g)
                if not np.allclose(g.reshape(w.shape), w, rtol=1e-10, atol=1e-10):
                    errors[(t, name)] = float(np.abs(g.reshape(w.shape) - w).max())

    from_threads(work)
    assert not errors, errors


@pytest.mark.parametrize('fmt', ['CSR', 'CSC', 'ELL'])
def test_sparse_sparse_from_eight_threads(fmt):
    """8 Python threads run A ± B, A * B, A @ C and C + C.T at once, each on its own
    matrices (a different pattern per thread); every result agrees with scipy."""
    from sparse_zoo import as_format
    prog = _sparse_sparse(fmt)
    m, n = 20, 14
    cases = []
    for t in range(8):
        rng = np.random.default_rng(100 + t)
        mats = [sp.random(r, c, density=0.25, format='csr', random_state=10 * t + j)
                for j, (r, c) in enumerate(((m, n), (m, n), (n, n)))]
        cases.append(([as_format(a, fmt, np.int32, rng) for a in mats], [a.toarray() for a in mats]))
    prog(*cases[0][0])
    errors = {}

    def work(t):
        args, (A, B, C) = cases[t]
        want = [A + B, A - B, A * B, A @ C, C + C.T]
        for rep in range(5):
            for name, g, w in zip(['A+B', 'A-B', 'A*B', 'A@C', 'C+C.T'], prog(*args), want):
                g = g.toarray() if hasattr(g, 'toarray') else np.asarray(g)
                if not np.allclose(g, w, rtol=1e-12, atol=1e-12):
                    errors[(t, name)] = float(np.abs(g - w).max())

    from_threads(work)
    assert not errors, errors


@pytest.mark.parametrize('fmt', ['CSR', 'COO', 'BSR'])
def test_structural_from_eight_threads(fmt):
    """8 Python threads run the conversions, copies, sums and softmax at once, each on its
    own matrix and a Fortran-ordered or strided dense operand; every result agrees with
    scipy / NumPy (softmax, over the stored entries: BSR's zero fill and COO's duplicates
    count on their own, with the CSR's reference, elsewhere with the call made before the
    threads)."""
    from sparse_zoo import as_format
    prog = _structural(fmt)
    m, n = 12, 8
    cases = []
    for t in range(8):
        rng = np.random.default_rng(200 + t)
        A = sp.random(m, n, density=0.3, format='csr', random_state=t)
        D = np.asfortranarray(rng.standard_normal((m, n))) if t % 2 else rng.standard_normal((m, 2 * n))[:, ::2]
        cases.append((as_format(A, fmt, np.int32, rng), A.toarray(), D))
    alone = [prog(arg, D)[12:] for arg, _, D in cases]
    errors = {}

    def softmax(a, axis):
        out = np.zeros_like(a)
        for r in range(a.shape[0] if axis == 1 else a.shape[1]):
            line = a[r] if axis == 1 else a[:, r]
            nz = line != 0
            if nz.any():
                e = np.exp(line[nz] - line[nz].max())
                (out[r] if axis == 1 else out[:, r])[nz] = e / e.sum()
        return out

    def work(t):
        arg, Ad, D = cases[t]
        want = [Ad, Ad, Ad.T, np.vstack([Ad, Ad]), np.hstack([Ad, Ad]), Ad.T, np.abs(Ad), Ad * D, Ad + D, Ad.sum(0),
                Ad.sum(1), Ad.sum()]
        want += [softmax(Ad, 1), softmax(Ad, 0)] if fmt == 'CSR' else [w.toarray() for w in alone[t]]
        for rep in range(3):
            for n_, (g, w) in enumerate(zip(prog(arg, D), want)):
                g = g.toarray() if hasattr(g, 'toarray') else np.asarray(g)
                if not np.allclose(np.reshape(g, np.shape(w)), w, rtol=1e-10, atol=1e-12):
                    errors[(t, n_)] = float(np.abs(np.reshape(g, np.shape(w)) - w).max())

    from_threads(work)
    assert not errors, errors
