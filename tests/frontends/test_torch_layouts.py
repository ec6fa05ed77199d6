"""Weights in catalogue layouts inside torch (``frontends/torch_layouts``, ``torch_dispatch``,
``torch_sparsifiers``, ``torch_layers``, ``torch_rigl``): every product against dense torch,
the custom operators' gradients against ``gradcheck``, sparsified models against the model
with the densified weights, RigL's invariants and accuracy against dense training."""
import copy
import warnings

import numpy as np
import pytest

import sdfgsparse as ss
from sdfgsparse.runtime.container import SparseMatrix
from sdfgsparse.runtime.marshal import _sizes, validate_storage
from sparse_zoo import from_threads

torch = pytest.importorskip('torch')
F = torch.nn.functional
from sdfgsparse.frontends import torch_dispatch  # noqa: E402 (needs torch)
from sdfgsparse.frontends import torch_layouts as L  # noqa: E402

pytestmark = [pytest.mark.xdist_group('torch_layouts')]

LAYOUTS = [ss.NM[2, 4], ss.GNM[2, 2, 4], ss.VNM[4, 2, 8], ss.CSR]
IDS = ['NM2_4', 'GNM2_2_4', 'VNM4_2_8', 'CSR']


def _names(fmt):
    return [m for m in fmt.member_names if m != 'vals']


def stored(fmt, seed, dtype=torch.float64, shape=(8, 16)):
    """(int32 index tensors, values, dense NumPy matrix) of a random matrix in ``fmt``."""
    rng = np.random.default_rng(seed)
    D = rng.standard_normal(shape)
    if getattr(fmt, 'pattern', None) is None:
        D[rng.random(shape) < 0.6] = 0
        S = ss.convert(D, fmt)
    else:
        S = ss.convert(D, fmt, prune=True)
    index, values = L.storage_tensors(S)
    index = [t.to(torch.int32) for t in index]
    return index, values.to(dtype), S.toarray().astype(np.float64)


def dense_of(fmt, index, values, shape):
    """The dense matrix of the storage, by the host container (not ``LayoutTensor``)."""
    arrays = dict(zip(_names(fmt), (t.numpy() for t in index)))
    arrays['vals'] = values.detach().double().numpy()
    return SparseMatrix(fmt, arrays, tuple(shape)).toarray()


def valid(fmt, index, values, shape):
    arrays = dict(zip(_names(fmt), (t.numpy() for t in index)))
    arrays['vals'] = values.detach().numpy()
    validate_storage(fmt, arrays, tuple(shape), _sizes(fmt, arrays, tuple(shape)), 'A')


@pytest.fixture
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(torch_dispatch, '_WARNED', set())


# ---------------------------------------------------------------------- 1. the custom operators
@pytest.mark.parametrize('dtype', [torch.float64, torch.float32], ids=['f64', 'f32'])
@pytest.mark.parametrize('fmt', LAYOUTS, ids=IDS)
def test_products_match_dense(fmt, dtype):
    index, values, D = stored(fmt, 1, dtype)
    g = torch.Generator().manual_seed(2)
    X, G = torch.randn(16, 3, generator=g, dtype=dtype), torch.randn(8, 3, generator=g, dtype=dtype)
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-4)
    Dt = torch.from_numpy(D).to(dtype)
    Y = L.layout_mm(fmt.name, 8, 16, index, values, X)
    assert Y.dtype == dtype and Y.shape == (8, 3)
    torch.testing.assert_close(Y, Dt @ X, **tol)
    torch.testing.assert_close(L.layout_mm_t(fmt.name, 8, 16, index, values, G), Dt.T @ G, **tol)
    # the sampled product at each slot: slot i's unit vector densified, against G @ X.T
    n = L.value_slots(fmt.name, 8, 16, index)
    assert n == values.numel()
    P = (G.double() @ X.double().T).numpy()
    want = np.array([(dense_of(fmt, index, torch.eye(n, dtype=torch.float64)[i], (8, 16)) * P).sum()
                     for i in range(n)])
    got = L.layout_sampled(fmt.name, 8, 16, index, G, X)
    assert got.shape == (n, ) and got.dtype == dtype
    torch.testing.assert_close(got.double(), torch.from_numpy(want), **tol)


@pytest.mark.parametrize('fmt', LAYOUTS, ids=IDS)
def test_gradcheck(fmt):
    index, values, _ = stored(fmt, 3)
    g = torch.Generator().manual_seed(4)
    X = torch.randn(16, 2, generator=g, dtype=torch.float64, requires_grad=True)
    G = torch.randn(8, 2, generator=g, dtype=torch.float64, requires_grad=True)
    v = values.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda v, X: L.layout_mm(fmt.name, 8, 16, index, v, X), (v, X))
    assert torch.autograd.gradcheck(lambda v, G: L.layout_mm_t(fmt.name, 8, 16, index, v, G), (v, G))


def test_bad_inputs_are_typed_errors():
    index, values, _ = stored(ss.NM[2, 4], 5)
    X = torch.randn(16, 3, dtype=torch.float64)
    with pytest.raises(ss.errors.ShapeError, match=r'A is 8 x 16, X has shape \(15, 3\)'):
        L.layout_mm('NM2_4', 8, 16, index, values, X[:15])
    with pytest.raises(ss.errors.ShapeError, match=r'A is 8 x 16, G has shape \(16, 3\)'):
        L.layout_mm_t('NM2_4', 8, 16, index, values, X)
    with pytest.raises(ss.errors.DTypeError, match=r'X is torch.float32, the weight is torch.float64'):
        L.layout_mm('NM2_4', 8, 16, index, values, X.float())
    with pytest.raises(ss.errors.ShapeError, match=r'layout_sampled: G \(8, 2\) and X \(16, 3\)'):
        L.layout_sampled('NM2_4', 8, 16, index, torch.randn(8, 2, dtype=torch.float64), X)
    with pytest.raises(ss.errors.ArgumentError, match='G must be a dense 2-D tensor, got NoneType'):
        L.layout_sampled('NM2_4', 8, 16, index, None, X)
    with pytest.raises(ss.errors.ArgumentError, match='X must be a dense 2-D tensor, got NoneType'):
        L.layout_mm('NM2_4', 8, 16, index, values, None)
    with pytest.raises(ss.errors.ShapeError, match=r'G must be 2-D, got shape \(8, 3, 1\)'):
        L.layout_mm_t('NM2_4', 8, 16, index, values, torch.randn(8, 3, 1, dtype=torch.float64))
    with pytest.raises(ss.errors.DTypeError, match=r'X is torch.float32, G is torch.float64'):
        L.layout_sampled('NM2_4', 8, 16, index, torch.randn(8, 3, dtype=torch.float64), X.float())
    vindex, vvalues, _ = stored(ss.VNM[4, 2, 8], 5)
    with pytest.raises(ss.errors.ArgumentError, match=r"has index members \['crd4', 'sel4'\], got 1 tensors"):
        L.layout_mm('VNM4_2_8', 8, 16, vindex[:1], vvalues, X)
    with pytest.raises(ss.errors.ArgumentError, match='must be a 1-D int32 or int64 tensor'):
        L.layout_mm('NM2_4', 8, 16, [index[0].double()], values, X)
    with pytest.raises(ss.errors.DTypeError, match='values must be float32 or float64'):
        L.layout_mm('NM2_4', 8, 16, index, values.half(), X.half())


def test_tampered_index_is_rejected_before_any_result():
    """An index already checked and then modified in place (its version changes) is checked again."""
    index, values, D = stored(ss.NM[2, 4], 6)
    X = torch.randn(16, 3, dtype=torch.float64)
    torch.testing.assert_close(L.layout_mm('NM2_4', 8, 16, index, values, X), torch.from_numpy(D) @ X)
    crd = index[0]
    assert crd[0] < crd[1]
    crd[[0, 1]] = crd[[1, 0]].clone()  # the first group's offsets out of order
    with pytest.raises(ss.errors.PatternError, match=r'crd3\[0:2\].*out of order'):
        L.layout_mm('NM2_4', 8, 16, index, values, X)
    with pytest.raises(ss.errors.PatternError, match='out of order'):
        L.layout_mm_t('NM2_4', 8, 16, index, values, torch.randn(8, 3, dtype=torch.float64))


# ---------------------------------------------------------------------- 2. LayoutTensor
def layout_tensor(fmt, seed, rows=8, cols=16, dtype=torch.float32):
    index, values, D = stored(fmt, seed, dtype, (rows, cols))
    return ss.torch.LayoutTensor(fmt, (rows, cols), index, values.requires_grad_(True)), torch.from_numpy(D).to(dtype)


@pytest.mark.parametrize('fmt', [ss.NM[2, 4], ss.CSR], ids=['NM2_4', 'CSR'])
def test_layout_tensor_products(fmt):
    W, D = layout_tensor(fmt, 7)
    torch.testing.assert_close(W.to_dense().detach(), D)
    g = torch.Generator().manual_seed(8)
    x, b = torch.randn(5, 16, generator=g, requires_grad=True), torch.randn(8, generator=g, requires_grad=True)
    y = F.linear(x, W, b)
    torch.testing.assert_close(y, x @ D.T + b)
    y.square().sum().backward()
    grads = W.values.grad.clone(), x.grad.clone(), b.grad.clone()
    for t in (W.values, x, b):
        t.grad = None
    (x @ W.to_dense().T + b).square().sum().backward()  # the same through the dense matrix
    for got, want in zip(grads, (W.values.grad, x.grad, b.grad)):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    with torch.no_grad():  # the fused bias epilogue
        torch.testing.assert_close(F.linear(x, W, b), x @ D.T + b)
        torch.testing.assert_close(F.linear(x.reshape(5, 1, 16), W), (x @ D.T).reshape(5, 1, 8))
    X, Z = torch.randn(16, 3, generator=g), torch.randn(4, 8, generator=g)
    torch.testing.assert_close(W @ X, D @ X)
    torch.testing.assert_close(Z @ W, Z @ D)
    torch.testing.assert_close(torch.mm(W, X), D @ X)
    torch.testing.assert_close(torch.matmul(Z, W), Z @ D)
    v, u = torch.randn(16, generator=g), torch.randn(8, generator=g)
    assert (W @ v).shape == (8, ) and (u @ W).shape == (16, )
    torch.testing.assert_close(W @ v, D @ v)
    torch.testing.assert_close(u @ W, u @ D)


def test_fallback_warns_once_per_operation_and_layout(fresh_warnings):
    W, D = layout_tensor(ss.NM[2, 4], 9)
    V, E = layout_tensor(ss.CSR, 9)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        torch.testing.assert_close(torch.sin(W), torch.sin(D))
        torch.testing.assert_close(torch.sin(W), torch.sin(D))
        torch.testing.assert_close(torch.sum(W), D.sum())
        torch.testing.assert_close(torch.sin(V), torch.sin(E))
        torch.testing.assert_close(torch.mul(W, 2), 2 * D)
        torch.testing.assert_close(W.T, D.T)
        torch.testing.assert_close(W.T, D.T)
    got = sorted(str(w.message).split(' has no')[0] + ' | ' + str(w.message).split(' for the ')[1].split(' layout')[0]
                 for w in caught if issubclass(w.category, ss.errors.LayoutFallbackWarning))
    assert got == ['LayoutTensor.T | ss.NM[2, 4]', 'mul | ss.NM[2, 4]', 'sin | ss.CSR', 'sin | ss.NM[2, 4]',
                   'sum | ss.NM[2, 4]']
    assert all(issubclass(w.category, ss.errors.LayoutFallbackWarning) for w in caught)


def test_fallback_gradient_reaches_values(fresh_warnings):
    W, _ = layout_tensor(ss.VNM[4, 2, 8], 10, dtype=torch.float64)
    with pytest.warns(ss.errors.LayoutFallbackWarning, match=r'sin has no sparse implementation for the ss.VNM'):
        torch.sin(W).sum().backward()
    # every slot's value sits at its own position: d/dv sum(sin(dense)) = cos(v)
    torch.testing.assert_close(W.values.grad, torch.cos(W.values.detach()))


# ---------------------------------------------------------------------- 3. sparsifiers
def _weight(shape=(8, 16), seed=11, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def test_magnitude_nm_keeps_each_groups_two_largest():
    W = _weight()
    S = ss.torch.Magnitude(layout=ss.NM[2, 4])(W)
    assert S.format is ss.NM[2, 4] and S.nnz == 64
    w = W.numpy().reshape(8, 4, 4)
    keep = np.zeros_like(w, dtype=bool)
    np.put_along_axis(keep, np.argsort(-np.abs(w), axis=2)[:, :, :2], True, axis=2)
    np.testing.assert_array_equal(dense_of(ss.NM[2, 4], S.index, S.values, (8, 16)),
                                  np.where(keep, w, 0).reshape(8, 16))


def test_magnitude_and_random_unstructured_counts():
    W = _weight((10, 12))
    k = round(0.25 * 120)
    S = ss.torch.Magnitude(0.25)(W)
    assert S.format is ss.CSR and S.nnz == k
    top = np.zeros(120, dtype=bool)
    top[np.argsort(-np.abs(W.numpy().reshape(-1)))[:k]] = True
    np.testing.assert_array_equal(dense_of(ss.CSR, S.index, S.values, (10, 12)),
                                  np.where(top.reshape(10, 12), W.numpy(), 0))
    R1, R2, R3 = (ss.torch.Random(0.3, seed=s)(W) for s in (1, 1, 2))
    assert R1.nnz == R2.nnz == R3.nnz == round(0.3 * 120)
    assert all(torch.equal(a, b) for a, b in zip(R1.index, R2.index))
    assert not all(torch.equal(a, b) for a, b in zip(R1.index, R3.index))
    D = dense_of(ss.CSR, R1.index, R1.values, (10, 12))
    assert np.count_nonzero(D) == R1.nnz and np.array_equal(D[D != 0], W.numpy()[D != 0])
    valid(ss.CSR, R1.index, R1.values, (10, 12))
    N = ss.torch.Random(layout=ss.NM[1, 4], seed=3)(W)
    valid(ss.NM[1, 4], N.index, N.values, (10, 12))
    assert N.nnz == 30 and np.all(np.count_nonzero(dense_of(ss.NM[1, 4], N.index, N.values, (10, 12)).reshape(
        10, 3, 4), axis=2) == 1)


def test_block_keeps_largest_blocks():
    W = _weight((8, 8), seed=12)
    S = ss.torch.Block(0.5, block=(2, 2))(W)
    assert S.nnz == 8 * 4
    sums = np.abs(W.numpy()).reshape(4, 2, 4, 2).sum(axis=(1, 3))
    keep = np.zeros(16, dtype=bool)
    keep[np.argsort(-sums.reshape(-1))[:8]] = True
    mask = np.kron(keep.reshape(4, 4), np.ones((2, 2), dtype=bool))
    np.testing.assert_array_equal(dense_of(S.format, S.index, S.values, (8, 8)), np.where(mask, W.numpy(), 0))


def test_sparsifier_errors():
    with pytest.raises(ss.errors.ArgumentError, match=r'fixes the density \(0.5\); pass density=None'):
        ss.torch.Magnitude(0.5, layout=ss.NM[2, 4])
    for bad in (0, 1.5, True):
        with pytest.raises(ss.errors.ArgumentError, match=r'density must be a number in \(0, 1\]'):
            ss.torch.Magnitude(bad)
    with pytest.raises(ss.errors.ShapeError, match=r'expected a 2-D weight .* got shape \(2, 3, 4\)'):
        ss.torch.Magnitude(0.5)(torch.randn(2, 3, 4))
    with pytest.raises(ss.errors.DTypeError, match='weights must be float32 or float64, got torch.int64'):
        ss.torch.Random(0.5)(torch.ones(4, 4, dtype=torch.int64))


# ---------------------------------------------------------------------- 4. sparsified models
def mlp(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))


def convnet(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Conv2d(8, 16, 1), torch.nn.ReLU(), torch.nn.Conv2d(16, 16, 3, padding=1),
                               torch.nn.ReLU(), torch.nn.Conv2d(16, 8, 1))


def densified(sparse, dense):
    """``dense`` with every replaced layer's weight the sparse layer's weight, densified."""
    ref = copy.deepcopy(dense)
    for (_, s), (_, d) in zip(sparse.named_children(), ref.named_children()):
        if isinstance(s, (ss.torch.SparseLinear, ss.torch.SparseConv2d)):
            d.weight = torch.nn.Parameter(s.weight.to_dense().detach().reshape(d.weight.shape).clone())
            d.bias = torch.nn.Parameter(s.bias.detach().clone())
    return ref


@pytest.mark.parametrize('kind', ['mlp', 'conv'])
def test_sparsified_model_matches_densified(kind):
    dense = mlp() if kind == 'mlp' else convnet()
    model = ss.torch.sparsify(copy.deepcopy(dense), ss.torch.Magnitude(layout=ss.NM[2, 4]))
    sparse_type = ss.torch.SparseLinear if kind == 'mlp' else ss.torch.SparseConv2d
    assert isinstance(model[0], sparse_type) and model[0].activation == 'relu'
    assert type(model[1]) is torch.nn.Identity and model[2 if kind == 'mlp' else 4].activation == 'none'
    if kind == 'conv':
        assert type(model[2]) is torch.nn.Conv2d and type(model[3]) is torch.nn.ReLU  # 3x3 stays dense
    ref = densified(model, dense)
    g = torch.Generator().manual_seed(13)
    for batch in (1, 3):
        xs = [torch.randn(batch, 16, generator=g)] if kind == 'mlp' else \
            [x for x in [torch.randn(batch, 8, 5, 4, generator=g)] for x in (x, x.contiguous(
                memory_format=torch.channels_last))]
        for x in xs:
            with torch.no_grad():
                torch.testing.assert_close(model(x), ref(x), rtol=1e-4, atol=1e-5)
            x1, x2 = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
            y1, y2 = model(x1), ref(x2)
            torch.testing.assert_close(y1, y2, rtol=1e-4, atol=1e-5)
            (y1 * y2.detach()).sum().backward()
            (y2 * y2.detach()).sum().backward()
            torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-4, atol=1e-5)
    # one Adam step trains the values; the pattern stays
    x = torch.randn(4, 16) if kind == 'mlp' else torch.randn(2, 8, 3, 3)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.zero_grad()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    model(x).square().sum().backward()
    assert model[0].values.grad is not None
    opt.step()
    after = model.state_dict()
    for k in before:
        assert torch.equal(before[k], after[k]) == ('index_' in k), k
    # state_dict round trip into a freshly sparsified model (other weights, so another pattern)
    fresh = ss.torch.sparsify(mlp(1) if kind == 'mlp' else convnet(1), ss.torch.Magnitude(layout=ss.NM[2, 4]))
    with torch.no_grad():
        assert not torch.equal(fresh(x), model(x))
        fresh.load_state_dict(model.state_dict())
        assert torch.equal(fresh(x), model(x))


@pytest.mark.filterwarnings('ignore:Sparse:UserWarning')  # torch's CSR beta notices
def test_sparsify_errors_and_float_density():
    with pytest.raises(ss.errors.ArgumentError, match='Sequential has no torch.nn.Linear or pointwise'):
        ss.torch.sparsify(torch.nn.Sequential(torch.nn.Conv2d(3, 3, 3), torch.nn.ReLU()), ss.torch.Magnitude(0.5))
    with pytest.raises(ss.errors.ArgumentError, match='is itself a layer'):
        ss.torch.sparsify(torch.nn.Linear(4, 4), ss.torch.Magnitude(0.5))
    old = ss.torch.sparsify(mlp(), 0.5)  # a plain density: CSR torch parameters inside nn.Linear
    assert type(old[0]) is torch.nn.Linear and old[0].weight.layout == torch.sparse_csr
    assert old[0].weight.values().numel() == 256
    # ss.torch.compile names a layout layer before torch.export sees it
    with pytest.raises(ss.errors.UnsupportedOperationError, match=r'layer 0 is a SparseLinear \(ss.NM\[2, 4\]\)'):
        ss.torch.compile(ss.torch.sparsify(mlp(), ss.torch.Magnitude(layout=ss.NM[2, 4])), (torch.randn(3, 16), ))


# ---------------------------------------------------------------------- 5. RigL
def test_rigl_on_digits_keeps_its_parameter_count():
    """10 % of the weights (ERK), RigL against dense training, same seeds and batches: the
    parameter count after every step, valid storage after every update, a changed topology.
    At this density a 512-wide MLP stays 1.5 to 2 points below dense (so does a masked-dense
    RigL in plain torch); 1536 wide, 30 epochs, it is within half a point (75 s here): the
    1-point goal is checked by ``bench --suite ml``'s rigl row at 2048 wide; here, short of
    that training budget, within 3 points."""
    from sdfgsparse.bench.digits import load_digits, split
    Xtr, ytr, Xte, yte = (torch.from_numpy(a) for a in split(*load_digits()))
    hidden, epochs, batch = 512, 12, 64
    steps = epochs * -(-len(ytr) // batch)
    acc = {}
    for kind in ('dense', 'rigl'):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(64, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden),
                                    torch.nn.ReLU(), torch.nn.Linear(hidden, 10))
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        rigl = None
        if kind == 'rigl':
            rigl = ss.torch.RigL(model, opt, density=0.1, update_every=20, drop_fraction=0.3, T_end=int(0.75 * steps),
                                 distribution='erk')
            nnz, initial = rigl.nnz(), [[t.clone() for t in layer.index] for _, layer in rigl.layers]
            assert nnz == pytest.approx(0.1 * (64 * hidden + hidden * hidden + hidden * 10), rel=0.01)
        g = torch.Generator().manual_seed(1)
        for _ in range(epochs):
            for at in torch.randperm(len(ytr), generator=g).split(batch):
                opt.zero_grad()
                F.cross_entropy(model(Xtr[at]), ytr[at]).backward()
                if rigl is None or rigl():
                    opt.step()
                else:  # an update: every layer's new index is valid storage
                    for _, layer in rigl.layers:
                        valid(layer.format, layer.index, layer.values, layer.weight_shape)
                if rigl is not None:
                    assert rigl.nnz() == nnz
        with torch.no_grad():
            acc[kind] = float((model(Xte).argmax(dim=1) == yte).double().mean()) * 100
    assert rigl.history and rigl.history[0][0] == 20 and all(t <= int(0.75 * steps) for t, _ in rigl.history)
    assert any(not torch.equal(a, b) for (_, layer), old in zip(rigl.layers, initial) for a, b in zip(layer.index, old))
    print(f'digits test accuracy: dense {acc["dense"]:.2f} %, RigL 10 % {acc["rigl"]:.2f} %')
    assert acc['rigl'] >= acc['dense'] - 3.0 and acc['rigl'] >= 90.0, acc


def test_rigl_moves_optimizer_state_and_grows_by_gradient():
    torch.manual_seed(2)
    model = torch.nn.Sequential(torch.nn.Linear(16, 8))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    rigl = ss.torch.RigL(model, opt, density=0.25, update_every=3, drop_fraction=0.5, schedule='constant')
    layer = model[0]
    assert isinstance(layer, ss.torch.SparseLinear) and opt.param_groups[0]['params'][0] is layer.values
    x, y = torch.randn(6, 16), torch.randn(6, 8)
    for step in range(1, 7):
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        if step % 3:
            assert rigl()
            opt.step()
            continue
        # the state before the update, by (row, col); the dense gradient of this step
        r, c, q = (t.tolist() for t in layer.weight.entries())
        v, st = layer.values.detach().clone(), {k: s.clone() for k, s in opt.state[layer.values].items() if k != 'step'}
        old = {(i, j): s for i, j, s in zip(r, c, q)}
        n = v.numel()
        k = round(0.5 * n)
        drop = set(torch.argsort(v.abs(), stable=True)[:k].tolist())  # slots of the k smallest magnitudes
        dropped = {(i, j) for i, j, s in zip(r, c, q) if s in drop}
        Wd = layer.weight.to_dense().detach().requires_grad_(True)
        F.mse_loss(F.linear(x, Wd, layer.bias.detach()), y).backward()
        inactive = torch.ones(8, 16, dtype=torch.bool)
        for rc in set(old) - dropped:
            inactive[rc] = False
        score = torch.where(inactive, Wd.grad.abs(), torch.tensor(-1.0))
        want_grown = {divmod(f, 16) for f in torch.argsort(score.reshape(-1), descending=True)[:k].tolist()}
        assert not rigl()
        assert rigl.history[-1] == (step, [('0', k)])
        valid(ss.CSR, layer.index, layer.values, (8, 16))
        r2, c2, q2 = (t.tolist() for t in layer.weight.entries())
        new = dict(zip(zip(r2, c2), q2))
        assert len(new) == n and set(new) - (set(old) - dropped) == want_grown
        for rc, s in new.items():
            if rc in old:  # kept, or dropped and grown again: its weight and state stay (reinit_when_same=False)
                assert layer.values[s] == v[old[rc]]
                assert all(opt.state[layer.values][key][s] == st[key][old[rc]] for key in st)
            else:
                assert layer.values[s] == 0 and all(opt.state[layer.values][key][s] == 0 for key in st)
        assert sorted(st) == ['exp_avg', 'exp_avg_sq']


def test_rigl_nm_keeps_n_per_group():
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rigl = ss.torch.RigL(model, opt, density=None, layout=ss.NM[2, 4], update_every=2, drop_fraction=0.5,
                         schedule='constant')
    initial = [layer.index[0].clone() for _, layer in rigl.layers]
    x, y = torch.randn(5, 16), torch.randint(0, 4, (5, ))
    for _ in range(8):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        if rigl():
            opt.step()
        for _, layer in rigl.layers:
            rows, cols = layer.weight_shape
            assert layer.values.numel() == rows * cols // 2
            valid(layer.format, layer.index, layer.values, layer.weight_shape)
            offs = layer.index[0].reshape(-1, 2)
            assert bool((offs[:, 0] < offs[:, 1]).all()) and bool(((offs >= 0) & (offs < 4)).all())
    assert len(rigl.history) == 4
    assert any(not torch.equal(layer.index[0], old) for (_, layer), old in zip(rigl.layers, initial))


def test_rigl_errors():
    opt = lambda m: torch.optim.SGD(m.parameters(), lr=0.1)  # noqa: E731
    m = mlp()
    with pytest.raises(ss.errors.ArgumentError, match=r"schedule='cosine' needs T_end"):
        ss.torch.RigL(m, opt(m), density=0.1)
    with pytest.raises(ss.errors.ArgumentError, match='update_every must be a positive integer, got 0'):
        ss.torch.RigL(m, opt(m), update_every=0, T_end=10)
    with pytest.raises(ss.errors.UnsupportedOperationError, match=r'is ss.GNM\[2, 2, 4\]; RigL updates'):
        ss.torch.RigL(mlp(), opt(m), density=None, layout=ss.GNM[2, 2, 4], T_end=10)
    sparse = ss.torch.sparsify(mlp(), ss.torch.Magnitude(0.5))
    with pytest.raises(ss.errors.ArgumentError, match='the model is sparse already; pass density=None'):
        ss.torch.RigL(sparse, opt(sparse), density=0.1, T_end=10)
    # the schedule's own arguments are named as RigL's (not the Random sparsifier it uses inside)
    with pytest.raises(ss.errors.UnsupportedOperationError, match=r'RigL: layout=.*RigL updates ss.CSR and ss.NM'):
        ss.torch.RigL(m, opt(m), layout=ss.BSR, T_end=10)
    with pytest.raises(ss.errors.ArgumentError, match=r"RigL: seed must be an integer, got 'x'"):
        ss.torch.RigL(m, opt(m), seed='x', T_end=10)


def test_densities_and_seeds_may_be_numpy_numbers():
    """np.float32(0.5) is a density ('density must be a number in (0, 1], got 0.5' before)."""
    import numpy as np
    model = ss.torch.sparsify(mlp(), np.float32(0.5))
    assert model[0].weight.layout == torch.sparse_csr and model[0].weight.values().numel() == 16 * 32 // 2
    assert ss.torch.Magnitude(np.float64(0.25)).density == 0.25
    assert ss.torch.Random(np.float32(0.5), seed=np.int64(3)).seed == 3
    with pytest.raises(ss.errors.ArgumentError, match=r'Random: seed must be an integer, got 1.5'):
        ss.torch.Random(0.5, seed=1.5)
    with pytest.raises(ss.errors.ArgumentError, match=r'density must be a number in \(0, 1\], got True'):
        ss.torch.sparsify(mlp(), True)


# ---------------------------------------------------------------------- 6. threads
def test_sparse_linear_from_threads():
    torch.manual_seed(5)
    lin = torch.nn.Linear(16, 8)
    layer = ss.torch.SparseLinear.from_dense(lin, ss.torch.Magnitude(layout=ss.NM[2, 4]))
    D = layer.weight.to_dense().detach()
    xs = [torch.randn(3, 16, generator=torch.Generator().manual_seed(t)) for t in range(8)]
    got = [None] * 8

    def work(t):
        with torch.no_grad():
            a = layer(xs[t])
        b = layer(xs[t])  # with a gradient: the custom operator
        got[t] = (a, b.detach())

    from_threads(work)
    for t in range(8):
        want = xs[t] @ D.T + lin.bias.detach()
        torch.testing.assert_close(got[t][0], want, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(got[t][1], want, rtol=1e-5, atol=1e-5)


def test_pointwise_conv_both_batch_paths():
    """NCHW maps above ONE_PRODUCT_PIXELS: one product per image (a loop in one program); at or
    below it (batch > 1): one product over the batch's pixels. Both equal the dense convolution."""
    from sdfgsparse.frontends.torch_layers import ONE_PRODUCT_PIXELS
    torch.manual_seed(5)
    conv = torch.nn.Conv2d(8, 6, 1)
    layer = ss.torch.SparseConv2d.from_dense(conv, ss.torch.Magnitude(0.3), 'relu')
    w = layer.weight.to_dense()[:, :, None, None]
    for h, wd in ((17, 16), (16, 16), (3, 5)):
        assert (h * wd <= ONE_PRODUCT_PIXELS) == (h * wd != 272)
        for batch in (1, 2):
            x = torch.randn(batch, 8, h, wd)
            with torch.no_grad():
                got = layer(x)
            want = torch.relu(F.conv2d(x, w, conv.bias))
            assert got.shape == want.shape
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_pointwise_conv_on_an_empty_batch():
    """A batch of no images, with and without gradients (``torch.stack`` of nothing failed
    with ``requires_grad``): shape (0, out, H, W) like F.conv2d; backward reaches the weights."""
    conv = torch.nn.Conv2d(8, 6, 1)
    layer = ss.torch.SparseConv2d.from_dense(conv, ss.torch.Magnitude(0.3))
    w = layer.weight.to_dense()[:, :, None, None]
    for requires_grad in (False, True):
        x = torch.randn(0, 8, 5, 4, requires_grad=requires_grad)
        got = layer(x)
        want = F.conv2d(x, w, conv.bias)
        assert got.shape == want.shape == (0, 6, 5, 4)
        if requires_grad:
            got.sum().backward()
            assert x.grad is not None and x.grad.shape == x.shape
        with torch.no_grad():
            assert layer(x).shape == (0, 6, 5, 4)
