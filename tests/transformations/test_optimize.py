"""``ss.optimize``: the pipeline applies the transformations that fit, the optimised program
agrees with the original (random and real matrices), the report explains, bad arguments
raise typed errors."""
import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.bench.programs import bench_cg as cg_step  # samples/cg.py's iteration
from sdfgsparse.ops.attention import SparseAttention
from sdfgsparse.ops.spmm import SpMM
from sparse_zoo import real_matrix

M, N, K, F, D = (dace.symbol(s) for s in 'MNKFD')


@dace.program
def gcn_layer(A: ss.CSR[dace.float64, N, N], X: dace.float64[N, K], W: dace.float64[K, F], b: dace.float64[F]):
    return np.maximum(A @ (X @ W) + b, 0)


@dace.program
def naive_attention(S: ss.CSR[dace.float64, M, N], Q: dace.float64[M, D], Kt: dace.float64[N, D],
                    V: dace.float64[N, F]):
    return ss.softmax(S * (Q @ Kt.T)) @ V


@dace.program
def atb(A: ss.CSR[dace.float64, N, M], B: dace.float64[N, K]):
    return A.T @ B


def _steps(opt):
    return {s.name: s.applied for s in opt.steps}


def _attention_ref(S, Q, Kt, V):
    P = S.multiply(Q @ Kt.T).tocsr()
    out = np.zeros((S.shape[0], V.shape[1]))
    for i in range(S.shape[0]):
        lo, hi = P.indptr[i], P.indptr[i + 1]
        if hi > lo:
            s = P.data[lo:hi]
            w = np.exp(s - s.max())
            out[i] = (w / w.sum()) @ V[P.indices[lo:hi]]
    return out


def test_gcn_layer_fuses_bias_and_relu(rng):
    opt = ss.optimize(gcn_layer)
    assert _steps(opt)['SparseEpilogueFusion'] == 2
    assert 'SparseEpilogueFusion' in opt.report() and opt.heuristics_s > 0
    for A in (sp.random_array((50, 50), density=0.1, format='csr', rng=rng), real_matrix('cora_A')):
        n = A.shape[0]
        X, W, b = rng.standard_normal((n, 6)), rng.standard_normal((6, 4)), rng.standard_normal(4)
        want = np.maximum(A @ (X @ W) + b, 0)
        np.testing.assert_allclose(opt(A, X, W, b), want, rtol=1e-10, atol=1e-12)  # positional, like the program
        np.testing.assert_allclose(opt(A=A, X=X, W=W, b=b), gcn_layer(A, X, W, b), rtol=1e-12, atol=1e-12)


def test_the_report_says_each_decision_once(rng):
    """The GCN layer's two fusions into one SpMM are one model line, counted (it was
    printed twice, word for word)."""
    A = sp.random_array((200, 200), density=0.05, format='csr', rng=rng)
    opt = ss.optimize(gcn_layer, matrices={'A': A, 'X': np.ones((200, 16)), 'W': np.ones((16, 8)), 'b': np.ones(8)})
    lines = opt.report().splitlines()
    assert len(lines) == len(set(lines)), opt.report()
    assert any(line.strip().startswith('SparseEpilogueFusion: spmm') and line.endswith('(2 alike)') for line in lines)


def test_naive_attention_is_reordered_then_fused(rng):
    opt = ss.optimize(naive_attention)
    steps = _steps(opt)
    assert steps['SparseLoopOrdering'] == 1 and steps['SparseFusion'] == 1
    assert [n for n, _ in opt.sdfg.all_nodes_recursive() if isinstance(n, SparseAttention)]
    # the iteration count lost its M * N * D term
    assert 'M*N' not in str(opt.iterations_after).replace(' ', '') and 'D*M*N' in str(opt.iterations_before)
    for S in (sp.random_array((40, 30), density=0.15, format='csr', rng=rng), real_matrix('cora_A')):
        m, n = S.shape
        Q, Kt, V = rng.standard_normal((m, 8)), rng.standard_normal((n, 8)), rng.standard_normal((n, 5))
        want = _attention_ref(S, Q, Kt, V)
        np.testing.assert_allclose(opt(S=S, Q=Q, Kt=Kt, V=V), want, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(opt(S=S, Q=Q, Kt=Kt, V=V), naive_attention(S, Q, Kt, V), rtol=1e-9, atol=1e-12)


def test_the_model_decides_the_attention_fusion(rng, monkeypatch):
    from sdfgsparse.analysis.schedules import Candidate, Decision
    from sdfgsparse.transformations import SparseFusion
    S = real_matrix('cora_A')
    m, n = S.shape
    Q, Kt, V = rng.standard_normal((m, 8)), rng.standard_normal((n, 8)), rng.standard_normal((n, 5))
    args = {'S': S, 'Q': Q, 'Kt': Kt, 'V': V}
    opt = ss.optimize(naive_attention, matrices=args)
    (d, ) = [d for d in opt.decisions if d.transformation == 'SparseFusion']
    assert d.applies and d.chosen == 'fused' and _steps(opt)['SparseFusion'] == 1 and not d.notes  # pattern given
    assert 'SparseFusion: ' in opt.report() and 'SOAP lower bound' in opt.report()

    # a model that prefers the three nodes: the pipeline leaves them, and the program is right
    def three_nodes(self, state, sdfg, sizes=None, pattern=None, machine=None):
        cands = [Candidate('fused', 2.0, 0.0), Candidate('three nodes', 1.0, 0.0)]
        return Decision('sddmm', 'SparseFusion', cands, 'three nodes', 'three nodes')

    monkeypatch.setattr(SparseFusion, 'decision', three_nodes)
    kept = ss.optimize(naive_attention, matrices=args)
    assert _steps(kept)['SparseFusion'] == 0 and 'keeps the three nodes' in kept.report()
    assert not [x for x, _ in kept.sdfg.all_nodes_recursive() if isinstance(x, SparseAttention)]
    np.testing.assert_allclose(kept(**args), _attention_ref(S, Q, Kt, V), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(opt(**args), kept(**args), rtol=1e-9, atol=1e-12)


def test_tiling_needs_sizes_and_uses_them(rng):
    A = real_matrix('cora_A')
    B = rng.standard_normal((A.shape[0], 40))
    untiled = ss.optimize(atb)
    assert _steps(untiled)['SparseDenseTiling'] == 0 and 'give example arguments: ss.optimize(..., matrices=' in untiled.report()
    # a last-level cache of 2 n rows of 8 doubles: the model takes tiles of 8 columns
    opt = ss.optimize(atb, matrices={'A': A, 'B': B}, cache_size=2 * A.shape[0] * 8 * 8)
    assert _steps(opt)['SparseDenseTiling'] == 1
    (node, ) = [n for n, _ in opt.sdfg.all_nodes_recursive() if isinstance(n, SpMM)]
    (d, ) = [d for d in opt.decisions if d.transformation == 'SparseDenseTiling']
    assert d.applies and node.dense_tile == d.candidate(d.chosen).param == 8
    assert 'SparseDenseTiling: ' in opt.report() and 'below the default' in opt.report()
    np.testing.assert_allclose(opt(A=A, B=B), A.T @ B, rtol=1e-10, atol=1e-12)
    # everything cached: the model cannot justify another walk over A (with two threads)
    kept = ss.optimize(atb, matrices={'A': A, 'B': B}, cache_size=1 << 30)
    (d, ) = [d for d in kept.decisions if d.transformation == 'SparseDenseTiling']
    assert d.chosen == d.default or d.chosen == 'one walk'  # one thread: a single walk may win
    np.testing.assert_allclose(kept(A=A, B=B), A.T @ B, rtol=1e-10, atol=1e-12)


def test_dot_products_take_the_reduction_expansion(rng):
    from sdfgsparse.targets.cpu.dense_products import IMPLEMENTATION
    opt = ss.optimize(cg_step)
    assert _steps(opt)['dense nodes'] == 2
    dots = [n for n, _ in opt.sdfg.all_nodes_recursive() if type(n).__name__ == 'Dot']
    assert len(dots) == 2 and all(d.implementation == IMPLEMENTATION for d in dots)
    for A in (sp.random_array((60, 60), density=0.1, format='csr', rng=rng) + sp.eye_array(60), real_matrix('cora_A')):
        n = A.shape[0]
        x, r, p = rng.standard_normal(n), rng.standard_normal(n), rng.standard_normal(n)
        got, plain = opt(A, x, r, p, 2.0), cg_step(A, x, r, p, 2.0)
        Ap = A @ p
        alpha = 2.0 / (p @ Ap)
        rn = r - alpha * Ap
        want = (x + alpha * p, rn, rn + (rn @ rn) / 2.0 * p, rn @ rn)
        for g, q, w in zip(got, plain, want):
            np.testing.assert_allclose(np.ravel(g), np.ravel(w), rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(np.ravel(g), np.ravel(q), rtol=1e-9, atol=1e-12)


def test_sdfg_is_transformed_in_place():
    sdfg = gcn_layer.to_sdfg()
    opt = ss.optimize(sdfg)
    assert opt.sdfg is sdfg
    assert any(isinstance(n, SpMM) and n.epilogue for n, _ in sdfg.all_nodes_recursive())


def test_bad_arguments_raise_typed_errors():
    with pytest.raises(ss.errors.UnsupportedOperationError, match="target 'tpu'"):
        ss.optimize(atb, target='tpu')
    with pytest.raises(ss.errors.ShapeError, match="'Z' is not an argument"):
        ss.optimize(atb, matrices={'Z': np.ones(3)})
    with pytest.raises(ss.errors.ShapeError, match='cache_size'):
        ss.optimize(atb, cache_size=-1)
    with pytest.raises(ss.errors.UnsupportedOperationError, match='expected a @dace.program or an SDFG'):
        ss.optimize(42)
