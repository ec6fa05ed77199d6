"""The portable (``pure``) expansions of the products with dense operands — SpMM (with a
fused epilogue and ``dense_tile``), DenseSpMM (matrix and vector), SDDMM and the fused
SparseAttention — against NumPy on the zoo, for every catalogue format and its
transposed view; and DaCe's own map transformations applied inside them.

One program per (format, value dtype, index dtype) computes every product at once, so
each signature compiles once: all formats in (float64, int32), CSR and COO also in
(float32, int64) (the other dtype pairs run under ``pure`` in the pure suite's zoos,
``make test``). The programs are parsed under ``use_implementation('pure')``; the
structural checks expand the nodes and require Python tasklets only.
"""
import copy
import warnings

import dace
import numpy as np
import pytest
import scipy.sparse as sp
from dace.sdfg import nodes
from dace.transformation.dataflow import MapCollapse, MapTiling, Vectorization

import sdfgsparse as ss
from sdfgsparse.ops.attention import SparseAttention
from sdfgsparse.ops.dense_spmm import DenseSpMM
from sdfgsparse.ops.sddmm import SDDMM
from sdfgsparse.ops.spmm import SpMM
from sdfgsparse.runtime.container import SparseMatrix
from sdfgsparse.runtime.convert import scipy_members, storage_to_coo
from sdfgsparse.transformations import SparseEpilogueFusion, SparseFusion
from sparse_zoo import FORMATS, as_format, dense, tol, zoo

M, N, K, D, E = (dace.symbol(s) for s in ('M', 'N', 'K', 'D', 'E'))

#: the nodes this file covers
PRODUCTS = (SpMM, DenseSpMM, SDDMM, SparseAttention)

OPS = ['A@B', 'A.T@C (dense_tile=2)', 'P@A', 'x@A', 'R@A.T', 'sddmm(A)', 'sddmm(A.T)', 'attention(A)',
       'attention(A.T)', 'relu(A@B2 + b) (epilogue)']

SIGNATURES = [(fmt, dace.float64, dace.int32) for fmt in FORMATS] + [(fmt, dace.float32, dace.int64)
                                                                      for fmt in ('CSR', 'COO')]

_SHORT = {dace.float64: 'f64', dace.float32: 'f32', dace.int32: 'i32', dace.int64: 'i64'}

_PROGRAMS = {}


def _fmt(name):
    return ss.BSR.with_block(2, 2) if name == 'BSR' else getattr(ss, name)


def products_program(fmt, vt, it):
    """(parsed and transformed SDFG, compiled program) of one signature. The attention
    patterns are fused (``SparseFusion``; with int64 indices the keys stay transposed,
    ``key_layout='KT'``), the epilogue of the last product is fused
    (``SparseEpilogueFusion``) and the SpMM over ``A.T`` is tiled (``dense_tile=2``)."""
    key = (fmt, vt, it)
    if key not in _PROGRAMS:
        T = _fmt(fmt)[vt, M, N, it]

        with ss.targets.use_implementation('pure'):

            @dace.program
            def products(A: T, B: vt[N, K], C: vt[M, K], P: vt[K, M], x: vt[M], R: vt[K, N], X: vt[M, K],
                         Y: vt[K, N], Xt: vt[N, K], Yt: vt[K, M], Q: vt[M, D], Kq: vt[N, D], V: vt[N, E],
                         Qt: vt[N, D], Kt: vt[M, D], Vt: vt[M, E], B2: vt[N, K], b: vt[K]):
                return (A @ B, A.T @ C, P @ A, x @ A, R @ A.T, ss.sddmm(A, X, Y), ss.sddmm(A.T, Xt, Yt),
                        ss.softmax(ss.sddmm(A, Q, Kq.T), axis=1) @ V, ss.softmax(ss.sddmm(A.T, Qt, Kt.T),
                                                                                axis=1) @ Vt,
                        np.maximum(A @ B2 + b, 0))

            sdfg = products.to_sdfg()
            absorb = it == dace.int32
            assert sdfg.apply_transformations_repeated(SparseFusion, options={'absorb_transpose': absorb}) == 2
            assert sdfg.apply_transformations_repeated(SparseEpilogueFusion) == 2
        tiled = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, SpMM) and n.transpose_A]
        assert len(tiled) == 1
        tiled[0].dense_tile = 2
        sdfg.validate()
        _PROGRAMS[key] = (sdfg, ss.compile(sdfg))
    return _PROGRAMS[key]


# ---------------------------------------------------------------------- references
def storage(X):
    """(format, member arrays) of a scipy matrix or SparseMatrix."""
    if isinstance(X, SparseMatrix):
        return X.format, X.arrays
    fmt = ss.BSR.with_block(*X.blocksize) if X.format == 'bsr' else getattr(ss, X.format.upper())
    return fmt, scipy_members(X, fmt)


def attention_reference(arg, Q, Kq, V, transposed=False):
    """softmax over each row's stored entries (explicit zeros, COO duplicates and BSR's
    block fill included; padding excluded) of ``S ∘ (Q @ Kq.T)``, times V; ``S`` is the
    argument, or its transpose."""
    fmt, arrays = storage(arg)
    r, c, v = storage_to_coo(fmt, arrays, arg.shape)
    rows = arg.shape[1] if transposed else arg.shape[0]
    if transposed:
        r, c = c, r
    s = v.astype(np.float64) * np.einsum('qd,qd->q', Q[r].astype(np.float64), Kq[c].astype(np.float64))
    p = np.zeros_like(s)
    for i in np.unique(r):
        sel = r == i
        e = np.exp(s[sel] - s[sel].max())
        p[sel] = e / e.sum()
    out = np.zeros((rows, V.shape[1]))
    np.add.at(out, r, p[:, None] * V[c].astype(np.float64))
    return out


def check_sampled(got, arg, want, what, npv):
    """A sampled result: S's storage (index members copied), values ``want`` on the
    pattern, padding slots zero."""
    np.testing.assert_allclose(dense(got), want, **tol(npv), err_msg=what)
    gfmt, gm = storage(got)
    _, am = storage(arg)
    for m, a in am.items():
        if m != 'vals':
            np.testing.assert_array_equal(gm[m], a, err_msg=f'{what}: index member {m} not copied')
    vals = np.asarray(gm['vals']).reshape(-1)
    assert vals.dtype == npv, f'{what}: values {vals.dtype}'
    if 'crd2' in gm:  # ELL padding
        assert not vals[np.asarray(gm['crd2']) < 0].any(), f'{what}: an ELL padding slot is not 0'
    if 'off1' in gm:  # DIA slots outside the matrix
        off = np.asarray(gm['off1'])
        rows, cols = arg.shape
        L = vals.size // max(off.size, 1)
        j = np.arange(L)[None, :]
        inside = (j - off[:, None] >= 0) & (j - off[:, None] < rows) & (j < cols)
        assert not vals.reshape(off.size, L)[~inside].any(), f'{what}: a DIA slot outside the matrix is not 0'


def _matrices(fmt, npv):
    mats = dict(zoo(npv))
    mats['large_values'] = sp.csr_array(1000.0 * mats['dense_50'])  # exp overflows without the row maximum
    if fmt == 'BSR':
        mats = {k: v for k, v in mats.items() if v.shape[0] % 2 == 0 and v.shape[1] % 2 == 0}
    return mats


def _expanded_products(sdfg):
    """Expand every product node of a copy of ``sdfg``; returns (implementations used,
    the SDFGs they expanded to)."""
    sdfg = copy.deepcopy(sdfg)
    found = [(n, st) for n, st in sdfg.all_nodes_recursive() if isinstance(n, PRODUCTS)]
    impls = {node.expand(state.sdfg, state) for node, state in found}
    nested = [n.sdfg for n, _ in sdfg.all_nodes_recursive() if isinstance(n, nodes.NestedSDFG)]
    return found, impls, nested, sdfg


# ---------------------------------------------------------------------- every format
@pytest.mark.parametrize('fmt,vt,it', SIGNATURES, ids=[f'{f}-{_SHORT[v]}-{_SHORT[i]}' for f, v, i in SIGNATURES])
def test_products_pure(fmt, vt, it):
    """Every product of the pure expansions agrees with NumPy on the zoo; the nodes took
    ``pure`` and expand to Python tasklets only."""
    sdfg, prog = products_program(fmt, vt, it)
    found = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, PRODUCTS)]
    assert sorted(type(n).__name__ for n in found) == sorted(['SpMM'] * 3 + ['DenseSpMM'] * 3 + ['SDDMM'] * 2 +
                                                            ['SparseAttention'] * 2)
    assert {n.implementation for n in found} == {'pure'}
    keys = {n.key_layout for n in found if isinstance(n, SparseAttention)}
    assert keys == ({'K'} if it == dace.int32 else {'KT'})
    npv = np.dtype(vt.type)
    for name, A in _matrices(fmt, npv).items():
        rng = np.random.default_rng(3)
        m, n = A.shape
        k, d, e = 3, 4, 3
        shapes = dict(B=(n, k), C=(m, k), P=(k, m), x=(m, ), R=(k, n), X=(m, k), Y=(k, n), Xt=(n, k), Yt=(k, m),
                      Q=(m, d), Kq=(n, d), V=(n, e), Qt=(n, d), Kt=(m, d), Vt=(m, e), B2=(n, k), b=(k, ))
        a = {key: rng.standard_normal(s).astype(npv) for key, s in shapes.items()}
        arg = as_format(A, fmt, np.dtype(it.type), rng)
        got = prog(A=arg, **a)
        Ad = A.toarray().astype(np.float64)
        want = [Ad @ a['B'], Ad.T @ a['C'], a['P'] @ Ad, a['x'] @ Ad, a['R'] @ Ad.T, Ad * (a['X'] @ a['Y']),
                Ad.T * (a['Xt'] @ a['Yt']),
                attention_reference(arg, a['Q'], a['Kq'], a['V']),
                attention_reference(arg, a['Qt'], a['Kt'], a['Vt'], transposed=True),
                np.maximum(Ad @ a['B2'] + a['b'], 0)]
        for op, g, w in zip(OPS, got, want):
            what = f'{fmt} {vt} {it} {name}: {op}'
            if op.startswith('sddmm'):
                check_sampled(g, arg, w, what, npv)
                continue
            g = np.asarray(g)
            assert g.dtype == npv, f'{what}: dtype {g.dtype}'
            np.testing.assert_allclose(g.reshape(w.shape), w, **tol(npv), err_msg=what)


@pytest.mark.parametrize('fmt', FORMATS)
def test_pure_expansion_is_python_only(fmt):
    """Expanded, every product node is a nested SDFG of maps and Python tasklets (no C++
    tasklet, no library node left inside); the tiled SpMM has its tile map."""
    sdfg, _ = products_program(fmt, dace.float64, dace.int32)
    found, impls, nested, _ = _expanded_products(sdfg)
    assert len(found) == 10 and 'pure' in impls and 'cpu' not in impls
    assert nested
    for g in nested:
        for n, _ in g.all_nodes_recursive():
            assert not isinstance(n, nodes.LibraryNode), f'{g.name}: library node {n} left'
            if isinstance(n, nodes.Tasklet):
                assert n.language == dace.dtypes.Language.Python, f'{g.name}: tasklet {n.label} is {n.language}'
    params = {p for g in nested for n, _ in g.all_nodes_recursive() if isinstance(n, nodes.MapEntry)
              for p in n.map.params}
    assert '__h_tile' in params  # SpMM's dense_tile strip-mined the column map


# ---------------------------------------------------------------------- DaCe transformations inside
@pytest.fixture(scope='module')
def spmm_pure_expanded():
    """A CSR SpMM parsed under the pure implementation, library nodes expanded."""
    with ss.targets.use_implementation('pure'):

        @dace.program
        def spmm_csr(A: ss.CSR[dace.float64, M, N], B: dace.float64[N, K]):
            return A @ B

        sdfg = spmm_csr.to_sdfg()
    sdfg.expand_library_nodes()
    assert not [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, nodes.LibraryNode)]
    return sdfg


def _maps(sdfg):
    return {tuple(n.map.params): (n, st) for n, st in sdfg.all_nodes_recursive() if isinstance(n, nodes.MapEntry)}


def _run_against_scipy(sdfg, k=10):
    prog = ss.compile(sdfg)
    rng = np.random.default_rng(5)
    for name, A in zoo().items():
        B = rng.standard_normal((A.shape[1], k))
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', ss.errors.CopyWarning)  # int64 zoo indices, an int32 program
            got = prog(A=A, B=B)
        np.testing.assert_allclose(got, A @ B, rtol=1e-12, atol=1e-12, err_msg=name)


def test_map_tiling_inside_pure_spmm(spmm_pure_expanded):
    """DaCe's MapTiling applies to the dense-column map and to the row map of the
    expanded SpMM (tiles of 4, K = 10 not a multiple), the SDFG validates, and the tiled
    kernel still agrees with scipy."""
    sdfg = copy.deepcopy(spmm_pure_expanded)
    maps = _maps(sdfg)
    assert ('__h', ) in maps and ('c0', ) in maps  # the dense-column map and the row map of CSR
    applied = 0
    for params in (('__h', ), ('c0', )):
        entry, state = maps[params]
        MapTiling.apply_to(state.sdfg, options={'tile_sizes': (4, )}, map_entry=entry)
        applied += 1
    assert applied == 2
    after = _maps(sdfg)
    assert ('tile___h', ) in after and ('tile_c0', ) in after
    assert after[('tile___h', )][0].map.range[0][2] == 4
    sdfg.validate()
    _run_against_scipy(sdfg)


def test_map_collapse_inside_pure_spmm(spmm_pure_expanded):
    """DaCe's MapCollapse merges the two maps of the zero fill of Y into one 2-D map
    (one application); the result still agrees with scipy."""
    sdfg = copy.deepcopy(spmm_pure_expanded)
    maps = _maps(sdfg)
    (outer, state), (inner, _) = maps[('__f_Y0', )], maps[('__f_Y1', )]
    MapCollapse.apply_to(state.sdfg, outer_map_entry=outer, inner_map_entry=inner)
    after = _maps(sdfg)
    assert ('__f_Y0', '__f_Y1') in after and ('__f_Y1', ) not in after
    sdfg.validate()
    _run_against_scipy(sdfg)


def test_vectorization_matches_dense_column_map(spmm_pure_expanded):
    """DaCe's Vectorization matches the dense-column map (both dense accesses are exact
    memlets, the columns contiguous) and not the maps over the stored entries; applied, it
    gives the tasklet vector connectors and validates.

    Not run: DaCe 1.0.2 loads ``dace::vec<double, 4>`` as an aligned type (``vmovapd``),
    so the kernel needs rows of B and Y on 32-byte boundaries, which NumPy does not
    guarantee (a misaligned row is a segmentation fault)."""
    sdfg = copy.deepcopy(spmm_pure_expanded)
    maps = _maps(sdfg)
    matches = set()
    for params, (entry, state) in maps.items():
        xf = Vectorization()
        xf.setup_match(state.sdfg, state.sdfg.cfg_id, state.block_id, {Vectorization.map_entry: state.node_id(entry)},
                       0)
        if xf.can_be_applied(state, 0, state.sdfg):
            matches.add(params)
    assert ('__h', ) in matches and not matches & {('c0', ), ('p1', ), ('__j', )}
    entry, state = maps[('__h', )]
    Vectorization.apply_to(state.sdfg, options={'vector_len': 4}, map_entry=entry)
    sdfg.validate()
    vec = [n for n, _ in sdfg.all_nodes_recursive()
           if isinstance(n, nodes.Tasklet) and n.label == 'spmm' and isinstance(n.out_connectors['__out0'],
                                                                               dace.dtypes.vector)]
    assert len(vec) == 1
