"""SparseFusion: sampled attention ``softmax(sddmm(S, Q, K.T)) @ V`` as one SparseAttention
node. Differential runs before/after on random, zoo and real matrices against a NumPy
reference on S's stored entries, exact application counts, JSON round trips, and the
cases it must refuse."""
import copy

import dace
import numpy as np
import pytest
import scipy.sparse as sp
from dace.libraries.standard.nodes.transpose import Transpose
from dace.transformation.optimizer import Optimizer

import sdfgsparse as ss
from sdfgsparse.ops.attention import SparseAttention
from sdfgsparse.ops.sddmm import SDDMM
from sdfgsparse.ops.softmax import SparseSoftmax
from sdfgsparse.ops.spmm import SpMM
from sdfgsparse.runtime.container import SparseMatrix
from sdfgsparse.runtime.convert import scipy_members, storage_to_coo
from sdfgsparse.transformations import SparseFusion
from sparse_zoo import as_format, real_matrix, tol, zoo

M, N, D, E = (dace.symbol(s) for s in 'MNDE')

_PROGRAMS = {}


def attention_program(fmt, vt=dace.float64):
    key = (fmt, vt)
    if key not in _PROGRAMS:
        F = ss.BSR.with_block(2, 2) if fmt == 'BSR' else getattr(ss, fmt)

        @dace.program
        def attention(S: F[vt, M, N], Q: vt[M, D], K: vt[N, D], V: vt[N, E]):
            return ss.softmax(ss.sddmm(S, Q, K.T), axis=1) @ V

        _PROGRAMS[key] = attention
    return _PROGRAMS[key]


@dace.program
def scores_also_returned(S: ss.CSR[dace.float64, M, N], Q: dace.float64[M, D], K: dace.float64[N, D],
                         V: dace.float64[N, E]):
    P = ss.sddmm(S, Q, K.T)
    return ss.softmax(P, axis=1) @ V, P


@dace.program
def weights_also_returned(S: ss.CSR[dace.float64, M, N], Q: dace.float64[M, D], K: dace.float64[N, D],
                          V: dace.float64[N, E]):
    W = ss.softmax(ss.sddmm(S, Q, K.T), axis=1)
    return W @ V, W


@dace.program
def no_softmax(S: ss.CSR[dace.float64, M, N], Q: dace.float64[M, D], K: dace.float64[N, D], V: dace.float64[N, E]):
    return ss.sddmm(S, Q, K.T) @ V


@dace.program
def column_softmax(S: ss.CSR[dace.float64, M, N], Q: dace.float64[M, D], K: dace.float64[N, D],
                   V: dace.float64[M, E]):
    return ss.softmax(ss.sddmm(S, Q, K.T), axis=0).T @ V


# ---------------------------------------------------------------------- reference
def stored_entries(S):
    """(rows, cols, vals) of every stored entry of a scipy matrix or SparseMatrix."""
    if isinstance(S, SparseMatrix):
        return storage_to_coo(S.format, S.arrays, S.shape)
    fmt = ss.BSR.with_block(*S.blocksize) if S.format == 'bsr' else getattr(ss, S.format.upper())
    return storage_to_coo(fmt, scipy_members(S, fmt), S.shape)


def reference(S, Q, K, V):
    """softmax over each row's stored entries of S ∘ (Q @ K.T), times V (float64)."""
    r, c, v = stored_entries(S)
    s = v * np.einsum('qd,qd->q', Q[r].astype(np.float64), K[c].astype(np.float64))
    p = np.zeros_like(s)
    for i in np.unique(r):
        sel = r == i
        e = np.exp(s[sel] - s[sel].max())
        p[sel] = e / e.sum()
    out = np.zeros((S.shape[0], V.shape[1]))
    np.add.at(out, r, p[:, None] * V[c])
    return out


def _fused(prog, **options):
    sdfg = prog.to_sdfg()
    before = copy.deepcopy(sdfg)
    applied = sdfg.apply_transformations_repeated(SparseFusion, options=options or None)
    sdfg.validate()
    return before, sdfg, applied


def _nodes(sdfg, cls):
    return [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, cls)]


def _matrices(fmt, dtype, rng):
    mats = {k: zoo(dtype)[k] for k in ('empty', 'empty_rows_cols', 'power_law')}
    mats['random'] = sp.random_array((40, 30), density=0.15, format='csr', rng=rng, dtype=dtype)
    if dtype == np.float64:
        mats['cora_A'] = real_matrix('cora_A')
    return mats


# ---------------------------------------------------------------------- positive
@pytest.mark.parametrize('fmt', ['CSR', 'CSC', 'COO', 'DCSR', 'ELL', 'BSR'])
def test_attention_fused(fmt, rng):
    """Row-owned formats (CSR, DCSR, ELL: parallel rows; BSR: parallel block rows) and
    scattered ones (CSC, COO: sequential passes) agree before and after, and with NumPy,
    on empty rows, an empty matrix, COO duplicates and cora_A."""
    before, after, applied = _fused(attention_program(fmt))
    assert applied == 1
    (node, ) = _nodes(after, SparseAttention)
    assert node.key_layout == 'K'  # the frontend's transpose of K was absorbed
    for cls in (SDDMM, SparseSoftmax, SpMM, Transpose):
        assert not _nodes(after, cls), f'{cls.__name__} left after fusion'
    assert not [n for n, d in after.arrays.items() if isinstance(d, dace.data.Structure) and d.transient]
    a, b = ss.compile(before), ss.compile(after)
    for name, A in _matrices(fmt, np.float64, rng).items():
        if fmt == 'BSR' and (A.shape[0] % 2 or A.shape[1] % 2):
            A = sp.csr_array(A[:A.shape[0] // 2 * 2, :A.shape[1] // 2 * 2])
        S = as_format(A, fmt, np.int32, rng)
        m, n = A.shape
        Q, K, V = rng.standard_normal((m, 6)), rng.standard_normal((n, 6)), rng.standard_normal((n, 5))
        got, want = b(S=S, Q=Q, K=K, V=V), a(S=S, Q=Q, K=K, V=V)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=f'{fmt} {name}: fused != unfused')
        np.testing.assert_allclose(got, reference(S, Q, K, V), rtol=1e-10, atol=1e-12, err_msg=f'{fmt} {name}')


def test_attention_float32_and_transposed_keys(rng):
    """float32, and the fused node reading SDDMM's operand K.T as given (no absorption)."""
    before, after, applied = _fused(attention_program('CSR', dace.float32), absorb_transpose=False)
    assert applied == 1
    (node, ) = _nodes(after, SparseAttention)
    assert node.key_layout == 'KT' and len(_nodes(after, Transpose)) == 1
    a, b = ss.compile(before), ss.compile(after)
    for name, A in _matrices('CSR', np.float32, rng).items():
        m, n = A.shape
        Q, K, V = (rng.standard_normal(s).astype(np.float32) for s in ((m, 4), (n, 4), (n, 3)))
        got = b(S=A, Q=Q, K=K, V=V)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, a(S=A, Q=Q, K=K, V=V), **tol(np.float32), err_msg=name)
        np.testing.assert_allclose(got, reference(A, Q, K, V), **tol(np.float32), err_msg=name)


def test_large_scores_are_stable(rng):
    """Scores of magnitude ~1e3 overflow exp without the row maximum."""
    _, after, _ = _fused(attention_program('CSR'))
    A = sp.random_array((20, 20), density=0.3, format='csr', rng=rng) * 1000
    Q, K, V = rng.standard_normal((20, 4)), rng.standard_normal((20, 4)), rng.standard_normal((20, 2))
    got = ss.compile(after)(S=A, Q=Q, K=K, V=V)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, reference(A, Q, K, V), rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------- serialisation
def test_transformation_round_trips_through_json():
    sdfg = attention_program('CSR').to_sdfg()
    (match, ) = list(Optimizer(sdfg).get_pattern_matches(patterns=[SparseFusion]))
    match.absorb_transpose = False
    again = SparseFusion.from_json(match.to_json())
    assert isinstance(again, SparseFusion) and again.absorb_transpose is False
    assert again.subgraph == match.subgraph and again.state_id == match.state_id
    again._sdfg = sdfg  # from_json restores the match, not the SDFG it belongs to
    assert again.can_be_applied(sdfg.node(again.state_id), again.expr_index, sdfg)
    again.apply_pattern()
    sdfg.validate()
    (node, ) = _nodes(sdfg, SparseAttention)
    assert node.key_layout == 'KT'


def test_fused_sdfg_round_trips_through_json():
    _, after, _ = _fused(attention_program('CSR'))
    again = dace.SDFG.from_json(after.to_json())
    (node, ) = _nodes(again, SparseAttention)
    (orig, ) = _nodes(after, SparseAttention)
    assert (node.key_layout, node.transpose_S) == (orig.key_layout, orig.transpose_S)
    again.validate()


# ---------------------------------------------------------------------- negative
@pytest.mark.parametrize('prog', [scores_also_returned, weights_also_returned, no_softmax, column_softmax],
                         ids=['scores-read-twice', 'weights-read-twice', 'spmm-without-softmax', 'column-softmax'])
def test_refuses(prog):
    _, after, applied = _fused(prog)
    assert applied == 0
    assert not _nodes(after, SparseAttention)
    assert _nodes(after, SDDMM)


def test_is_listed_as_sparse_transformation():
    assert SparseFusion.CATEGORY == 'Sparse'
    assert 'SparseFusion' in {c.__name__ for c in dace.transformation.PatternTransformation.subclasses_recursive()}
    assert SparseFusion.absorb_transpose.desc  # noqa: the property's description shows in the editor
