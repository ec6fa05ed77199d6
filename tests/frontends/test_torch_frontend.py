"""``ss.torch.compile``: torch models as SDFGs, checked against the same model in eager
torch; the sparse custom operators' gradients against ``gradcheck``; training against
eager training."""
import os
import copy

import numpy as np
import pytest

import sdfgsparse as ss

torch = pytest.importorskip('torch')
from sdfgsparse.frontends import torch_ops  # noqa: E402 (needs torch)

pytestmark = [pytest.mark.filterwarnings('ignore::UserWarning'), pytest.mark.xdist_group('torch_frontend')]


def adjacency(n: int, density: float, seed: int, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    A = (torch.rand(n, n, generator=g) < density).to(dtype) * torch.rand(n, n, generator=g, dtype=dtype)
    return (A + torch.eye(n, dtype=dtype)).to_sparse_csr()


class GCN(torch.nn.Module):

    def __init__(self, f, h, c):
        super().__init__()
        self.l1, self.l2 = torch.nn.Linear(f, h), torch.nn.Linear(h, c)

    def forward(self, A, X):
        h = torch.relu(torch.sparse.mm(A, self.l1(X)))
        return torch.log_softmax(torch.sparse.mm(A, self.l2(h)), dim=1)


class Mixed(torch.nn.Module):
    """Most translated ATen operations in one model."""

    def __init__(self):
        super().__init__()
        self.ln, self.lin, self.drop = torch.nn.LayerNorm(6), torch.nn.Linear(6, 6), torch.nn.Dropout(0.3)
        self.bias = torch.nn.Parameter(torch.randn(6))

    def forward(self, A, X):
        h = self.drop(torch.nn.functional.gelu(self.ln(X)))
        g = torch.nn.functional.gelu(h, approximate='tanh')
        y = torch.sparse.mm(A, self.lin(h)).sum(dim=1) + X.mean(dim=0).sum() * 2
        z = torch.sigmoid(h).t() @ torch.tanh(g) / 3 - 1
        w = torch.addmm(self.bias, h, torch.exp(-z), beta=0.5, alpha=2.0)
        return (y, z.reshape(-1), torch.softmax(h, dim=-1), w.mean(dim=1, keepdim=True), -w.t(),
                A * 2.0, torch.relu(A) @ X)


@pytest.fixture(scope='module')
def gcn():
    torch.manual_seed(0)
    model = GCN(16, 32, 7)
    A, X = adjacency(50, 0.1, 1), torch.randn(50, 16)
    return model, ss.torch.compile(model, (A, X))


def test_gcn_inference_matches_eager(gcn):
    model, compiled = gcn
    A, X = adjacency(50, 0.1, 2), torch.randn(50, 16)
    with torch.no_grad():
        got, want = compiled(A, X), model(A, X)
    assert isinstance(got, torch.Tensor) and got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert compiled.calls['sdfg'] >= 1


def test_gcn_is_one_sdfg_with_symbolic_sizes(gcn):
    """One SDFG: the node count is a symbol (A is square: one symbol for both), the
    layer widths are numbers; a graph of another size runs without recompiling."""
    model, compiled = gcn
    assert compiled.graph_breaks() == []
    src = compiled.source
    assert 't_a: ss.CSR[dace.float32, S0, S0, dace.int64]' in src and 'dace.float32[32, 16]' in src
    nodes = [n for n, _ in compiled.sdfg.all_nodes_recursive() if isinstance(n, ss.ops.SparseLibraryNode)]
    assert len(nodes) == 2
    program = compiled._segments[0].program._compiled
    for n in (13, 80):
        A, X = adjacency(n, 0.2, n), torch.randn(n, 16)
        with torch.no_grad():
            torch.testing.assert_close(compiled(A, X), model(A, X), rtol=1e-4, atol=1e-5)
    assert compiled._segments[0].program._compiled is program


def test_mixed_operations_match_eager():
    torch.manual_seed(1)
    model = Mixed().eval()
    A, X = adjacency(5, 0.4, 3), torch.randn(5, 6)
    compiled = ss.torch.compile(model, (A, X))
    assert compiled.graph_breaks() == []
    A2, X2 = adjacency(5, 0.5, 4), torch.randn(5, 6)
    with torch.no_grad():
        got, want = compiled(A2, X2), model(A2, X2)
    for k, (g, w) in enumerate(zip(got, want)):
        g = g.to_dense() if g.layout != torch.strided else g
        w = w.to_dense() if w.layout != torch.strided else w
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5, msg=f'result {k}')


def test_functions_compile_too():

    def f(A, x):
        return torch.tanh(torch.sparse.mm(A, x)) * 3

    A, x = adjacency(7, 0.3, 5, torch.float64), torch.randn(7, 2, dtype=torch.float64)
    compiled = ss.torch.compile(f, (A, x))
    torch.testing.assert_close(compiled(A, x), f(A, x))


class WithCumsum(torch.nn.Module):

    def forward(self, A, X):
        return torch.relu(torch.cumsum(torch.sparse.mm(A, X), dim=0)) * 2


def test_untranslated_operation_is_named():
    A, X = adjacency(6, 0.3, 6), torch.randn(6, 3)
    with pytest.raises(ss.errors.UnsupportedOperationError, match=r'cumsum.*fallback="torch"'):
        ss.torch.compile(WithCumsum(), (A, X))


def test_graph_break_runs_in_torch():
    A, X = adjacency(6, 0.3, 6), torch.randn(6, 3)
    compiled = ss.torch.compile(WithCumsum(), (A, X), fallback='torch')
    assert [b.split(' ')[0] for b in compiled.graph_breaks()] == ['cumsum.default']
    assert len(compiled.sdfgs) == 2
    with torch.no_grad():
        torch.testing.assert_close(compiled(A, X), WithCumsum()(A, X))
    assert 'torch  cumsum.default' in compiled.report()


def test_bad_inputs_are_named(gcn):
    model, compiled = gcn
    A, X = adjacency(10, 0.2, 7), torch.randn(10, 16)
    with torch.no_grad():
        with pytest.raises(ss.errors.DTypeError, match=r'^x: dtype torch.float64'):
            compiled(A, X.double())
        with pytest.raises(ss.errors.ArgumentError, match=r'^a: a dense tensor where the model was compiled for CSR'):
            compiled(A.to_dense(), X)
        with pytest.raises(ss.errors.ArgumentError, match=r'^x: expected a tensor, got str'):
            compiled(A, 'X')
        with pytest.raises(ss.errors.ArgumentError, match='takes 2 inputs, got 1'):
            compiled(A)
        with pytest.raises(ss.errors.ShapeError):
            compiled(A, torch.randn(10, 15))
    with pytest.raises(ss.errors.ArgumentError, match='example_inputs must be a tuple'):
        ss.torch.compile(model, [A, X])
    with pytest.raises(ss.errors.ArgumentError, match='fallback must be one of'):
        ss.torch.compile(model, (A, X), fallback='eager')


# ---------------------------------------------------------------------- sparse attention
def _mask(n, seed):
    from sdfgsparse.bench.ml import window_mask
    M = window_mask(n, 2, 1)
    return torch.sparse_csr_tensor(torch.from_numpy(M.indptr.astype(np.int64)),
                                   torch.from_numpy(M.indices.astype(np.int64)), torch.from_numpy(M.data), M.shape)


def test_sparse_attention_is_fused_and_matches_eager():
    """Longformer-style attention, 2 layers: sampled_addmm -> to_sparse_coo -> sparse
    softmax -> sparse.mm becomes one fused SparseAttention node per layer; another
    sequence length runs on the same build."""
    from sdfgsparse.bench.ml import attention_class, window_mask
    torch.manual_seed(4)
    model = attention_class(torch)(8, 2).eval()
    x, S = torch.randn(20, 8), _mask(20, 0)
    compiled = ss.torch.compile(model, (x, S))
    assert compiled.graph_breaks() == []
    assert 'SparseFusion           applied 2x' in compiled.report()
    for n in (20, 33):
        x, S = torch.randn(n, 8), _mask(n, n)
        with torch.no_grad():
            torch.testing.assert_close(compiled(x, S), model(x, S), rtol=1e-4, atol=1e-5)
            torch.testing.assert_close(model(x, S.to_dense() != 0), model(x, S), rtol=1e-4, atol=1e-5)
    i, j = np.indices((6, 6))
    np.testing.assert_array_equal(window_mask(6, 1, 1).toarray(), (abs(i - j) <= 1) | (i == 0) | (j == 0))


def test_sampled_addmm_and_layouts_match_eager():
    """beta / alpha of sampled_addmm; a COO result handed to torch as COO, a CSC one as
    CSC."""

    def f(S, q, k):
        s1 = torch.sparse.sampled_addmm(S, q, k.T, beta=0.0, alpha=0.5)
        s2 = torch.sparse.sampled_addmm(S, q, k.T, beta=2.0)
        p = torch.sparse.softmax(s1.to_sparse_coo(), 1)
        return p, s2, s1.to_sparse_csc(), torch.sparse.mm(p, k)

    g = torch.Generator().manual_seed(5)
    S = (torch.rand(7, 7, generator=g) < 0.4) * torch.randn(7, 7, generator=g, dtype=torch.float64)
    S = S.to_sparse_csr()
    q, k = torch.randn(7, 3, dtype=torch.float64, generator=g), torch.randn(7, 3, dtype=torch.float64, generator=g)
    compiled = ss.torch.compile(f, (S, q, k))

    def check(got, want, which):
        for k_ in which:
            a, b = got[k_], want[k_]
            assert a.layout == b.layout, f'result {k_}: {a.layout}, torch {b.layout}'
            a = a.to_dense() if a.layout != torch.strided else a
            b = b.to_dense() if b.layout != torch.strided else b
            torch.testing.assert_close(a, b, equal_nan=True, msg=f'result {k_}')

    check(compiled(S, q, k), f(S, q, k), range(4))
    # beta=0 samples at S's pattern without reading its values (torch's CPU kernel
    # multiplies them by 0, so a NaN there turns into NaN in torch, not here)
    S.values()[0] = float('nan')
    got, want = compiled(S, q, k), f(S, q, k)
    check(got, want, [1])
    assert torch.isnan(want[0].values()).any() and not torch.isnan(got[0].values()).any()


# ---------------------------------------------------------------------- gradients
def _csr64(m, n, seed, density=0.5):
    g = torch.Generator().manual_seed(seed)
    D = torch.rand(m, n, generator=g, dtype=torch.float64)
    D[D < 1 - density] = 0
    return D.to_sparse_csr()


@pytest.mark.parametrize('shape', [(6, 5, 3), (1, 4, 2), (5, 1, 1), (4, 4, 0)], ids=str)
def test_spmm_gradcheck(shape):
    m, n, k = shape
    A = _csr64(m, n, m * 10 + n)
    values = A.values().clone().requires_grad_(True)
    X = torch.randn(n, k, dtype=torch.float64, requires_grad=True)

    def f(v, x):
        return torch_ops.spmm(A.crow_indices(), A.col_indices(), v, n, x)

    assert torch.autograd.gradcheck(f, (values, X))


@pytest.mark.parametrize('shape', [(6, 5, 3), (1, 4, 2), (5, 1, 1), (4, 4, 0)], ids=str)
def test_sampled_gradcheck(shape):
    """SDDMM ``(G @ X.T)`` at a pattern: its gradients are SpMMs with the pattern."""
    m, n, k = shape
    A = _csr64(m, n, m * 7 + n)
    G = torch.randn(m, k, dtype=torch.float64, requires_grad=True)
    X = torch.randn(n, k, dtype=torch.float64, requires_grad=True)

    def f(g, x):
        return torch_ops.sampled(A.crow_indices(), A.col_indices(), n, g, x)

    torch.testing.assert_close(f(G, X), (G @ X.T).detach()[A.to_dense() != 0])
    assert torch.autograd.gradcheck(f, (G, X))


@pytest.mark.parametrize('shape', [(6, 5), (1, 4), (5, 1), (7, 7)], ids=str)
def test_sparse_softmax_matches_torch_and_gradcheck(shape):
    m, n = shape
    A = _csr64(m, n, m * 3 + n)  # (7, 7) has empty rows
    crow, col = A.crow_indices(), A.col_indices()
    values = (A.values() * 4 - 2).clone().requires_grad_(True)
    got = torch_ops.softmax(crow, col, values, n)
    ref = torch.sparse.softmax(torch.sparse_csr_tensor(crow, col, values, (m, n)).to_sparse_coo(), 1)
    torch.testing.assert_close(got, ref.coalesce().values())
    W = torch.randn(values.shape, dtype=torch.float64)
    g_got, = torch.autograd.grad((got * W).sum(), values)
    g_ref, = torch.autograd.grad((ref.coalesce().values() * W).sum(), values)
    torch.testing.assert_close(g_got, g_ref)
    assert torch.autograd.gradcheck(lambda v: torch_ops.softmax(crow, col, v, n), (values, ))


def test_sampled_and_softmax_pass_torch_opcheck():
    A = _csr64(5, 4, 3)
    crow, col = A.crow_indices().clone(), A.col_indices().clone()
    G = torch.randn(5, 2, dtype=torch.float64, requires_grad=True)
    X = torch.randn(4, 2, dtype=torch.float64, requires_grad=True)
    torch.library.opcheck(torch_ops.sampled, (crow, col, 4, G, X))
    torch.library.opcheck(torch_ops.softmax, (crow, col, A.values().clone().requires_grad_(), 4))


def test_sparse_attention_gradients_match_eager(monkeypatch):
    """The attention model's backward through sdfgsparse's custom operators (sampled
    scores, sparse softmax, SpMM; each backward an SDFG) gives eager torch's gradients,
    and SGD steps on both end with the same parameters."""
    from sdfgsparse.bench.ml import attention_class, window_mask
    used = []
    for name in ('sampled', 'softmax', 'spmm'):
        op = getattr(torch_ops, name)
        monkeypatch.setattr(torch_ops, name, lambda *a, _op=op, _n=name: used.append(_n) or _op(*a))
    torch.manual_seed(4)
    eager = attention_class(torch)(16, 2).double()
    M = window_mask(48, 4, 2)
    S = torch.sparse_csr_tensor(torch.from_numpy(M.indptr).long(), torch.from_numpy(M.indices).long(),
                                torch.from_numpy(M.data).double(), M.shape)
    x, W = torch.randn(48, 16, dtype=torch.float64), torch.randn(48, 16, dtype=torch.float64)
    compiled = ss.torch.compile(copy.deepcopy(eager), (x, S))
    opts = [torch.optim.SGD(m.parameters(), lr=0.05) for m in (eager, compiled)]
    for step in range(3):
        for m, opt in zip((eager, compiled), opts):
            opt.zero_grad()
            (m(x, S) * W).sum().backward()
        for (name, p), q in zip(eager.named_parameters(), compiled.module.parameters()):
            # the key biases' gradient is 0 (a row's scores all shift by q_i . b): rounding noise
            torch.testing.assert_close(q.grad, p.grad, rtol=1e-6, atol=1e-9, msg=f'step {step}: {name}')
        for opt in opts:
            opt.step()
    assert compiled.calls['autograd'] == 3
    # per layer and step: forward sampled, softmax, spmm; backward (spmm's) sampled, and
    # (sampled's) spmm, spmm_t (softmax's backward program is not counted here)
    assert used.count('softmax') == 2 * 3 and used.count('sampled') == used.count('spmm') == 2 * 2 * 3, used
    for p, q in zip(eager.parameters(), compiled.module.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-6, atol=1e-9)


def test_spmm_passes_torch_opcheck():
    A = _csr64(5, 4, 3)
    X = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    crow, col, values = A.crow_indices().clone(), A.col_indices().clone(), A.values().clone().requires_grad_()
    torch.library.opcheck(torch_ops.spmm, (crow, col, values, 4, X))


def test_spmm_checks_its_arguments():
    A = _csr64(5, 4, 3)
    with pytest.raises(ss.errors.ShapeError, match='A has 4 columns, X has 3 rows'):
        torch_ops.spmm(A.crow_indices(), A.col_indices(), A.values(), 4, torch.randn(3, 2, dtype=torch.float64))
    with pytest.raises(ss.errors.DTypeError, match='A is torch.float64, X is torch.float32'):
        torch_ops.spmm(A.crow_indices(), A.col_indices(), A.values(), 4, torch.randn(4, 2))


def test_sparse_weight_gradient_keeps_the_pattern():
    g = torch.Generator().manual_seed(9)
    W = torch.nn.Parameter(((torch.rand(6, 4, generator=g) < 0.5) * torch.randn(6, 4, generator=g)).to_sparse_csr())
    x = torch.randn(3, 4, generator=g)
    y = torch_ops.sparse_mm(W, x.t()).t()
    (y * y).sum().backward()
    Wd = W.detach().to_dense()
    want = (2 * (x @ Wd.t())).t() @ x * (Wd != 0)
    assert W.grad.layout == torch.sparse_csr
    torch.testing.assert_close(W.grad.to_dense(), want, rtol=1e-5, atol=1e-6)


def test_gcn_trains_like_eager():
    """20 Adam steps of a 2-layer GCN: compiled (sparse products through sdfgsparse's
    custom operators) and eager end with the same parameters."""
    torch.manual_seed(3)
    A, X = adjacency(40, 0.1, 8), torch.randn(40, 16)
    labels = torch.randint(0, 7, (40, ))
    eager = GCN(16, 32, 7)
    compiled = ss.torch.compile(copy.deepcopy(eager), (A, X))
    opts = [torch.optim.Adam(m.parameters(), lr=0.01) for m in (eager, compiled)]
    for _ in range(20):
        for m, opt in zip((eager, compiled), opts):
            opt.zero_grad()
            torch.nn.functional.nll_loss(m(A, X), labels).backward()
            opt.step()
    assert compiled.calls['autograd'] == 20
    for p, q in zip(eager.parameters(), compiled.module.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
    with torch.no_grad():  # the trained parameters are what the SDFG reads
        torch.testing.assert_close(compiled(A, X), eager(A, X), rtol=1e-4, atol=1e-5)


def test_ss_torch_is_the_frontend():
    import sdfgsparse.frontends.torch as frontend
    assert ss.torch is frontend and callable(ss.torch.compile)
    assert np.__name__ == 'numpy'


class WithState(torch.nn.Module):
    """A buffer, a plain tensor attribute (torch.export lifts it as a constant) and a
    parameter of a submodule."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(5, 5)
        self.register_buffer('scale', torch.full((5, ), 2.0))
        self.shift = torch.arange(5, dtype=torch.float32)

    def forward(self, A, X):
        return torch.sparse.mm(A, self.lin(X)) * self.scale + self.shift


def test_buffers_constants_and_replaced_parameters():
    torch.manual_seed(3)
    model = WithState()
    A, X = adjacency(12, 0.3, 4), torch.randn(12, 5)
    compiled = ss.torch.compile(model, (A, X))
    with torch.no_grad():
        torch.testing.assert_close(compiled(A, X), model(A, X))
        model.lin.weight = torch.nn.Parameter(torch.randn(5, 5))  # replaced, not updated in place
        model.scale.mul_(3)
        torch.testing.assert_close(compiled(A, X), model(A, X))


def _autoencoder():
    torch.manual_seed(5)
    return torch.nn.Sequential(torch.nn.Linear(40, 24), torch.nn.ReLU(), torch.nn.Linear(24, 40), torch.nn.ReLU())


def test_sparsify_keeps_the_largest_weights():
    dense = _autoencoder()
    model = ss.torch.sparsify(copy.deepcopy(dense), 0.1)
    for k in (0, 2):
        W, S = dense[k].weight.detach(), model[k].weight
        assert S.layout == torch.sparse_csr and isinstance(S, torch.nn.Parameter) and S.requires_grad
        assert S.values().numel() == round(0.1 * W.numel())
        kept = S.to_dense() != 0
        assert W.abs()[kept].min() >= W.abs()[~kept].max()  # by magnitude
        torch.testing.assert_close(S.to_dense(), W * kept)
        torch.testing.assert_close(model[k].bias, dense[k].bias)
    x = torch.randn(9, 40)
    with torch.no_grad():
        compiled = ss.torch.compile(model, (x, ))
        torch.testing.assert_close(compiled(x), model(x))  # eager torch with CSR weights
        torch.testing.assert_close(compiled(torch.randn(3, 40)).shape, torch.Size([3, 40]))


def test_sparsified_model_trains_like_masked_dense():
    """8 Adam steps through ss.torch.SparseOptimizer: the compiled model with CSR weights
    (CSR gradients on the pattern), the same model in eager torch (dense gradients, read
    on the pattern) and eager torch with dense weights whose gradients are masked end
    equal, and the CSR weights keep their pattern."""
    model = ss.torch.sparsify(_autoencoder(), 0.2)
    eager_sparse = ss.torch.sparsify(_autoencoder(), 0.2)
    masks = {k: model[k].weight.to_dense() != 0 for k in (0, 2)}
    dense = _autoencoder()
    with torch.no_grad():
        for k in (0, 2):
            dense[k].weight.copy_(model[k].weight.to_dense())
    x = torch.randn(16, 40)
    compiled = ss.torch.compile(model, (x, ))
    opts = [torch.optim.Adam(dense.parameters(), lr=0.01),
            ss.torch.SparseOptimizer(torch.optim.Adam, eager_sparse.parameters(), lr=0.01),
            ss.torch.SparseOptimizer(torch.optim.Adam, compiled.parameters(), lr=0.01)]
    for _ in range(8):
        for m, opt in zip((dense, eager_sparse, compiled), opts):
            opt.zero_grad()
            ((m(x) - x)**2).mean().backward()
            if m is dense:
                for k in (0, 2):
                    m[k].weight.grad *= masks[k]
            opt.step()
    assert compiled.calls['autograd'] == 8
    for trained in (model, eager_sparse):
        for k in (0, 2):
            W = trained[k].weight
            assert W.layout == torch.sparse_csr and W.values().numel() == int(masks[k].sum())
            torch.testing.assert_close(W.to_dense(), dense[k].weight, rtol=1e-4, atol=1e-6)
            torch.testing.assert_close(trained[k].bias, dense[k].bias, rtol=1e-4, atol=1e-6)
    assert not torch.equal(model[0].weight.values(), ss.torch.sparsify(_autoencoder(), 0.2)[0].weight.values())


def test_sparse_optimizer_checks_its_arguments():
    model = ss.torch.sparsify(_autoencoder(), 0.3)
    with pytest.raises(ss.errors.ArgumentError, match='optimizer_cls must be a torch.optim.Optimizer'):
        ss.torch.SparseOptimizer('adam', model.parameters())
    with pytest.raises(ss.errors.ArgumentError, match='got one tensor'):
        ss.torch.SparseOptimizer(torch.optim.SGD, model[0].bias, lr=0.1)
    with pytest.raises(ss.errors.ArgumentError, match=r'params\[0\] is str'):
        ss.torch.SparseOptimizer(torch.optim.SGD, ['w'], lr=0.1)
    coo = torch.nn.Parameter(torch.eye(3).to_sparse_coo())
    with pytest.raises(ss.errors.ArgumentError, match='dense and CSR parameters are supported'):
        ss.torch.SparseOptimizer(torch.optim.SGD, [coo], lr=0.1)
    opt = ss.torch.SparseOptimizer(torch.optim.SGD, model.parameters(), lr=0.1)
    W = model[0].weight
    other = torch.sparse_csr_tensor(W.crow_indices(), W.col_indices().flip(0), W.values(), W.shape)
    W.grad = other
    before = W.values().clone()
    with pytest.raises(ss.errors.ArgumentError, match='another pattern'):
        opt.step()
    torch.testing.assert_close(W.values(), before)  # nothing was updated


def test_sparsify_checks_its_arguments():
    for bad in (0, 1.5, -0.1, '0.5', None, True):
        with pytest.raises(ss.errors.ArgumentError, match='density must be a number in'):
            ss.torch.sparsify(_autoencoder(), bad)
    with pytest.raises(ss.errors.ArgumentError, match='module must be a torch.nn.Module'):
        ss.torch.sparsify('model', 0.5)
    with pytest.raises(ss.errors.ArgumentError, match='has no torch.nn.Linear'):
        ss.torch.sparsify(torch.nn.ReLU(), 0.5)
    model = ss.torch.sparsify(_autoencoder(), 0.5)
    with pytest.raises(ss.errors.ArgumentError, match='already'):
        ss.torch.sparsify(model, 0.5)
    one = ss.torch.sparsify(torch.nn.Linear(4, 3), 1e-6)  # at least one entry
    assert one.weight.values().numel() == 1


class SparseChain(torch.nn.Module):
    """Sparse linear layers with element-wise operations between them; ``h`` is also an
    output, and ``* 2`` (not carried feature-major) reads the normal form."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = torch.nn.Linear(30, 20), torch.nn.Linear(20, 20), torch.nn.Linear(20, 30, bias=False)

    def forward(self, x):
        h = torch.tanh(self.a(x))
        y = self.c(torch.relu(self.b(h)) * 2.0)
        return y, h


def test_sparse_layers_stay_feature_major():
    """x @ W.T of a sparse W is W @ x.T: a chain of sparse layers and the element-wise
    operations between them run on the transposed (feature-major) values; the optimised
    SDFG keeps only the transposes something reads."""
    from dace.libraries.standard import Transpose
    torch.manual_seed(6)
    model = ss.torch.sparsify(SparseChain(), 0.3)
    x = torch.randn(12, 30)
    compiled = ss.torch.compile(model, (x, ))
    assert 't_tanh_fm = np.tanh(t_linear_fm)' in compiled.source
    assert '@ t_tanh_fm' in compiled.source  # the second layer reads the first's feature-major output
    transposes = [n for n, _ in compiled.sdfg.all_nodes_recursive() if isinstance(n, Transpose)]
    # x.T; h (an output); relu's normal form for `* 2`, that product's transpose; y
    assert len(transposes) == 5, compiled.source
    with torch.no_grad():
        for batch in (12, 1, 7):
            xb = torch.randn(batch, 30)
            for got, want in zip(compiled(xb), model(xb)):
                torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_compiling_and_training_a_sparse_model_raises_no_torch_warning_of_ours(tmp_path):
    """torch's 'Sparse invariant checks are implicitly disabled' came from our own tensor
    constructors (frontends/torch_ops.py); in a fresh process (torch warns once) a compiled
    sparse model's forward and backward raise none of it."""
    import subprocess
    import sys
    script = '''
import warnings
import torch
import sdfgsparse as ss
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    torch.manual_seed(0)
    layers = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    model = ss.torch.sparsify(layers, 0.5)
    X = torch.randn(5, 16)
    compiled = ss.torch.compile(model, (X,))
    compiled(X).sum().backward()
print("WARNINGS", [str(w.message)[:60] for w in caught if "invariant" in str(w.message)])
'''
    done = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, timeout=600,
                          cwd=str(tmp_path), env={**os.environ, 'DACE_cache': 'hash'})
    assert done.returncode == 0, done.stderr[-3000:]
    assert 'WARNINGS []' in done.stdout, done.stdout + done.stderr[-2000:]
