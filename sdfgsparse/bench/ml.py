"""``sdfgsparse bench --suite ml``: sparse models end to end, in the same process as their
torch peers (needs torch).

Tasks (Scorch's evaluation, as far as built so far):

* ``gcn``: a 2-layer GCN (``log_softmax(A relu(A X W1 + b1) W2 + b2)``, hidden 16, 7
  classes), float32, on each square matrix of the set (``A``: its normalised propagation
  matrix, :func:`normalized`), 64 features;
  inference, and one training step (forward, NLL loss, backward, Adam);
* ``mlp``: Scorch's sparse autoencoder (784-1024-512-1024-784: four ``Linear`` layers,
  each followed by a ReLU; batch 256, float32, :data:`AUTOENCODER`), pruned by magnitude
  with :func:`ss.torch.sparsify` to 90 / 95 / 99 % sparsity: inference, and one Adam step
  of its reconstruction loss (the sparse models
  through ``ss.torch.SparseOptimizer``; torch-dense masks its gradients to keep the
  pattern);
* ``attention``: Longformer-style sparse attention (:func:`attention_class`, 4 layers,
  width 64, a window of 64 tokens on either side and 8 global tokens,
  :func:`window_mask`) at sequence lengths 512 / 1024 / 2048, float32: inference. One
  compile serves every length (the length is a symbol); torch-dense is masked dense
  attention.

The structured-sparsity tasks (``pointwise``, ``mlp-block``, ``rigl``) are in
:mod:`sdfgsparse.bench.ml_structured`.

Systems: ``torch-dense`` (the model with dense adjacency / weights, eager), ``torch-sparse``
(torch.sparse CSR, eager), ``sdfgsparse`` (``ss.torch.compile``; training through its custom
operators), and ``scorch`` (GCN inference, its products by ``scorch.matmul`` on
``scorch.from_csr``) where Scorch is installed: it is not a dependency and not on PyPI (the
``scorch`` package there is an unrelated CoNLL coreference scorer, which :func:`scorch`
tells apart and reports). Every sdfgsparse result is checked against torch-sparse's; compile time is
reported apart from the timed calls, which are interleaved (:mod:`.timing`).
"""
import copy
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

import numpy as np
import scipy.sparse as sp

from sdfgsparse.bench.timing import interleaved

__all__ = ['MLResult', 'run_ml', 'format_ml']

SYSTEMS = ('torch-dense', 'torch-sparse', 'scorch', 'sdfgsparse')
#: dense adjacency beyond this many entries is not built (torch-dense is skipped)
DENSE_LIMIT = 60_000_000


@dataclass
class MLResult:
    task: str
    data: str
    mode: str  # 'inference' or 'train step'
    seconds: Dict[str, float] = field(default_factory=dict)  # system -> median
    errors: Dict[str, str] = field(default_factory=dict)
    compile_s: Optional[float] = None
    correct: Optional[bool] = None

    def ratio_dense(self) -> Optional[float]:
        """sdfgsparse's speed-up over torch-dense (> 1: faster)."""
        ours, dense = self.seconds.get('sdfgsparse'), self.seconds.get('torch-dense')
        return dense / ours if ours and dense else None

    def ratio(self) -> Optional[float]:
        """sdfgsparse's speed-up over the fastest torch system (> 1: faster)."""
        ours = self.seconds.get('sdfgsparse')
        peers = [v for k, v in self.seconds.items() if k != 'sdfgsparse']
        return min(peers) / ours if ours and peers else None


def _gcn_class(torch):

    class GCN(torch.nn.Module):

        def __init__(self, f, h, c):
            super().__init__()
            self.l1, self.l2 = torch.nn.Linear(f, h), torch.nn.Linear(h, c)

        def forward(self, A, X):
            h = torch.relu(torch.sparse.mm(A, self.l1(X)) if A.layout != torch.strided else A @ self.l1(X))
            z = self.l2(h)
            return torch.log_softmax(torch.sparse.mm(A, z) if A.layout != torch.strided else A @ z, dim=1)

    return GCN


#: The autoencoder of Scorch's evaluation: layer widths and batch.
AUTOENCODER = ((784, 1024, 512, 1024, 784), 256)


def _autoencoder(torch, widths):
    layers = []
    for a, b in zip(widths, widths[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)


def attention_class(torch):
    """Longformer-style sparse attention: ``layers`` single-head layers
    ``x = LayerNorm(x + O(softmax_S(Q K^T / sqrt(d)) V))``, the softmax over the stored
    entries of the pattern ``S`` (a CSR mask, :func:`window_mask`) only. Called with a
    dense boolean ``S``, the same model runs as masked dense attention."""

    class SparseAttention(torch.nn.Module):

        def __init__(self, d: int, layers: int):
            super().__init__()
            self.scale = 1.0 / float(d)**0.5
            self.q = torch.nn.ModuleList(torch.nn.Linear(d, d) for _ in range(layers))
            self.k = torch.nn.ModuleList(torch.nn.Linear(d, d) for _ in range(layers))
            self.v = torch.nn.ModuleList(torch.nn.Linear(d, d) for _ in range(layers))
            self.out = torch.nn.ModuleList(torch.nn.Linear(d, d) for _ in range(layers))
            self.norm = torch.nn.ModuleList(torch.nn.LayerNorm(d) for _ in range(layers))

        def forward(self, x, S):
            for lq, lk, lv, out, norm in zip(self.q, self.k, self.v, self.out, self.norm):
                q, k, v = lq(x), lk(x), lv(x)
                if S.layout == torch.strided:
                    scores = (q @ k.T * self.scale).masked_fill(~S, float('-inf'))
                    h = torch.softmax(scores, dim=1) @ v
                else:
                    scores = torch.sparse.sampled_addmm(S, q, k.T, beta=0.0, alpha=self.scale)
                    # torch's sparse softmax takes COO only
                    h = torch.sparse.mm(torch.sparse.softmax(scores.to_sparse_coo(), 1), v)
                x = norm(x + out(h))
            return x

    return SparseAttention


def window_mask(n: int, window: int, n_global: int) -> sp.csr_array:
    """Longformer's pattern: each token sees ``window`` tokens on either side, and the
    first ``n_global`` tokens see, and are seen by, all (float32 ones, CSR, sorted)."""
    band = sp.diags_array([np.ones(n - abs(k), dtype=np.float32) for k in range(-window, window + 1)],
                          offsets=list(range(-window, window + 1)), shape=(n, n), format='csr')
    g = np.zeros((n, n), dtype=bool)
    g[:n_global, :] = True
    g[:, :n_global] = True
    rows, cols = np.nonzero(g)
    glob = sp.csr_array((np.ones(rows.size, dtype=np.float32), (rows, cols)), shape=(n, n))
    M = sp.csr_array(((band + glob) != 0).astype(np.float32))
    M.sort_indices()
    return M


def normalized(A) -> sp.csr_array:
    """GCN's propagation matrix D^-1/2 (|A| + I) D^-1/2 (Kipf & Welling), float32."""
    A = abs(sp.csr_array(A)) + sp.eye_array(A.shape[0], dtype=A.dtype, format='csr')
    d = np.asarray(A.sum(axis=1)).ravel() ** -0.5
    return sp.csr_array(sp.diags_array(d) @ A @ sp.diags_array(d), dtype=np.float32)


def scorch():
    """``(module, None)`` when Scorch, the sparse tensor library, imports; else
    ``(None, why not)``."""
    try:
        import scorch as mod
    except ImportError:
        return None, 'Scorch is not installed (optional; not on PyPI: install it from its repository)'
    except Exception as e:  # a broken install is reported, not fatal
        return None, f'Scorch does not import ({type(e).__name__}: {e})'
    missing = [a for a in ('from_csr', 'matmul') if not callable(getattr(mod, a, None))]
    if missing:
        return None, (f'the installed "scorch" ({getattr(mod, "__file__", "?")}) is not the sparse tensor library '
                      f'(no {", ".join(missing)}; PyPI\'s "scorch" is a CoNLL coreference scorer)')
    return mod, None


def _scorch_gcn(torch, sc, model, As):
    """GCN inference with Scorch's sparse products (the model's own dense layers)."""
    A = sc.from_csr(As)

    def mm(X):
        Y = sc.matmul(A, X, format='dd')
        return Y if isinstance(Y, torch.Tensor) else torch.as_tensor(Y)

    def run(X):
        h = torch.relu(mm(model.l1(X)))
        return torch.log_softmax(mm(model.l2(h)), dim=1)

    return run


def _gcn(torch, ss, name, A, repeat, log, sc=None) -> List[MLResult]:
    torch.manual_seed(0)
    A = normalized(A)
    A.sort_indices()
    n = A.shape[0]
    As = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)),
                                 torch.from_numpy(A.indices.astype(np.int64)),
                                 torch.from_numpy(A.data.astype(np.float32)), A.shape, check_invariants=False)
    X = torch.randn(n, 64)
    labels = torch.randint(0, 7, (n, ))
    model = _gcn_class(torch)(64, 16, 7)
    t0 = time.perf_counter()
    compiled = ss.torch.compile(copy.deepcopy(model), (As, X))
    compile_s = time.perf_counter() - t0
    Ad = As.to_dense() if n * n <= DENSE_LIMIT else None
    out = []
    with torch.no_grad():
        calls = {'torch-sparse': lambda: model(As, X), 'sdfgsparse': lambda: compiled(As, X)}
        if Ad is not None:
            calls['torch-dense'] = lambda: model(Ad, X)
        res = MLResult('gcn', name, 'inference', compile_s=compile_s)
        want = model(As, X)
        res.correct = bool(torch.allclose(compiled(As, X), want, rtol=1e-3, atol=1e-4))
        if sc is not None:
            try:
                run = _scorch_gcn(torch, sc, model, As)
                if not torch.allclose(run(X), want, rtol=1e-3, atol=1e-4):
                    raise ValueError('result differs from torch-sparse')
                calls['scorch'] = lambda: run(X)
            except Exception as e:  # a peer that fails is reported, never timed
                res.errors['scorch'] = f'{type(e).__name__}: {e}'
        _time(res, calls, repeat)
        out.append(res)
    log(f'gcn {name} inference: {_line(out[-1])}')
    models = {'torch-sparse': copy.deepcopy(model), 'sdfgsparse': compiled}
    if Ad is not None:
        models['torch-dense'] = copy.deepcopy(model)
    opts = {k: torch.optim.Adam(m.parameters(), lr=0.01) for k, m in models.items()}
    inputs = {'torch-sparse': As, 'sdfgsparse': As, 'torch-dense': Ad}

    def step(k):

        def run():
            opts[k].zero_grad()
            loss = torch.nn.functional.nll_loss(models[k](inputs[k], X), labels)
            loss.backward()
            opts[k].step()

        return run

    res = MLResult('gcn', name, 'train step', compile_s=compile_s)
    _time(res, {k: step(k) for k in models}, repeat)
    res.correct = all(
        torch.allclose(p, q, rtol=1e-3, atol=1e-4)
        for p, q in zip(models['torch-sparse'].parameters(), compiled.module.parameters()))
    out.append(res)
    log(f'gcn {name} train step: {_line(res)}')
    return out


def _mlp(torch, ss, sparsity, repeat, log, shape=AUTOENCODER) -> List[MLResult]:
    widths, batch = shape
    torch.manual_seed(1)
    dense = _autoencoder(torch, widths)
    # (a model with CSR parameters cannot be deep-copied: torch clones them 'preserving format')
    sparse, ours = (ss.torch.sparsify(copy.deepcopy(dense), 1 - sparsity) for _ in range(2))
    masks = []
    with torch.no_grad():
        for d, s in zip(dense, sparse):
            if isinstance(d, torch.nn.Linear):  # torch-dense: the same pruned weights, stored dense
                d.weight.copy_(s.weight.to_dense())
                masks.append((d.weight, d.weight != 0))
    x = torch.randn(batch, widths[0])
    t0 = time.perf_counter()
    compiled = ss.torch.compile(ours, (x, ))
    compile_s = time.perf_counter() - t0
    data = f'{round(sparsity * 100)}% sparse'
    res = MLResult('mlp', data, 'inference', compile_s=compile_s)
    with torch.no_grad():
        res.correct = bool(torch.allclose(compiled(x), sparse(x), rtol=1e-3, atol=1e-3))
        _time(res, {'torch-dense': lambda: dense(x), 'torch-sparse': lambda: sparse(x),
                    'sdfgsparse': lambda: compiled(x)}, repeat)
    log(f'mlp {data} inference: {_line(res)}')
    # one Adam step of the autoencoder's reconstruction loss: the sparse models through
    # ss.torch.SparseOptimizer (torch's optimizers do not take CSR parameters), torch-dense
    # with its gradients masked to keep the pattern
    models = {'torch-dense': dense, 'torch-sparse': sparse, 'sdfgsparse': compiled}
    opts = {k: (torch.optim.Adam(m.parameters(), lr=1e-3) if k == 'torch-dense' else
                ss.torch.SparseOptimizer(torch.optim.Adam, m.parameters(), lr=1e-3)) for k, m in models.items()}

    def step(k):

        def run():
            opts[k].zero_grad()
            ((models[k](x) - x)**2).mean().backward()
            if k == 'torch-dense':
                for w, mask in masks:
                    w.grad.mul_(mask)
            opts[k].step()

        return run

    def linears(m):
        return [l for l in m if isinstance(l, torch.nn.Linear)]

    # checked on the gradients of the first step, from equal weights, against the dense
    # model's on the pattern: the weights after the timed steps are not comparable (each
    # system's float32 rounding, amplified by Adam where a ReLU unit flips in one of them,
    # moved every layer by 1e-5 after 8 steps at Scorch's shape, eager torch.sparse too)
    for k in ('torch-dense', 'sdfgsparse'):
        opts[k].zero_grad()
        ((models[k](x) - x)**2).mean().backward()
    grads = []
    for (w, mask), d, m in zip(masks, linears(dense), linears(compiled.module)):
        grads += [(m.weight.grad.to_dense(), w.grad * mask), (m.bias.grad, d.bias.grad)]
    correct = all(torch.allclose(g, ref, rtol=1e-3, atol=1e-4 * float(ref.abs().max()) + 1e-30) for g, ref in grads)
    train = MLResult('mlp', data, 'train step', compile_s=compile_s, correct=correct)
    _time(train, {k: step(k) for k in models}, repeat)
    log(f'mlp {data} train step: {_line(train)}')
    return [res, train]


def _attention(torch, ss, seqs, layers, repeat, log) -> List[MLResult]:
    torch.manual_seed(2)
    d = 64
    model = attention_class(torch)(d, layers).eval()
    out, compiled, compile_s = [], None, None
    for n in seqs:
        M = window_mask(n, 64, 8)
        S = torch.sparse_csr_tensor(torch.from_numpy(M.indptr.astype(np.int64)),
                                    torch.from_numpy(M.indices.astype(np.int64)), torch.from_numpy(M.data), M.shape,
                                        check_invariants=False)
        x = torch.randn(n, d)
        if compiled is None:
            t0 = time.perf_counter()
            compiled = ss.torch.compile(model, (x, S))
            compile_s = time.perf_counter() - t0
        res = MLResult('attention', f'seq {n}', 'inference', compile_s=compile_s)
        compile_s = None  # the other lengths run on the same build
        Sd = S.to_dense() != 0
        with torch.no_grad():
            res.correct = bool(torch.allclose(compiled(x, S), model(x, S), rtol=1e-3, atol=1e-4))
            _time(res, {'torch-dense': lambda: model(x, Sd), 'torch-sparse': lambda: model(x, S),
                        'sdfgsparse': lambda: compiled(x, S)}, repeat)
        log(f'attention {res.data} inference: {_line(res)}')
        out.append(res)
    return out


def _time(res: MLResult, calls: Dict[str, Callable], repeat: int) -> None:
    for k, st in interleaved(calls, repeat).items():
        if st.error:
            res.errors[k] = st.error
        elif st.times:
            res.seconds[k] = float(np.median(st.times))


def _line(r: MLResult) -> str:
    parts = [f'{k} {v * 1e3:.2f} ms' for k, v in sorted(r.seconds.items())]
    ratio = r.ratio()
    return ', '.join(parts) + (f'; x{ratio:.2f} vs best torch' if ratio else '') + ('' if r.correct else ' WRONG')


def run_ml(matrices, repeat: int = 10, log=print, seqs=(512, 1024, 2048), attention_layers: int = 4,
           sparsities=(0.9, 0.95, 0.99), autoencoder=AUTOENCODER, structured=None) -> List[MLResult]:
    """Run the ML tasks; ``matrices``: :class:`~sdfgsparse.bench.matrices.MatrixSource` list
    (the square ones are GCN graphs); ``seqs``: the attention task's sequence lengths;
    ``sparsities``: the autoencoder's; ``autoencoder``: its layer widths and batch;
    ``structured``: the sizes of the structured-sparsity and RigL tasks
    (:class:`~sdfgsparse.bench.ml_structured.StructuredTasks`; None: not run)."""
    try:
        import torch
    except ImportError as e:
        from sdfgsparse.bench.errors import OptionError
        raise OptionError('--suite ml needs torch (pip install torch==2.13.0)') from e
    import sdfgsparse as ss
    from sdfgsparse.bench.matrices import canonical
    results = []
    sc, why = scorch()
    log(f'scorch: {why}' if sc is None else f'scorch: {getattr(sc, "__file__", "?")}')
    for src in matrices:
        A = canonical(src.load(), np.float32)
        if A.shape[0] != A.shape[1]:
            continue
        results.extend(_gcn(torch, ss, src.name, A, repeat, log, sc))
    for sparsity in sparsities:
        results.extend(_mlp(torch, ss, sparsity, repeat, log, autoencoder))
    if seqs:
        results.extend(_attention(torch, ss, seqs, attention_layers, repeat, log))
    if structured is not None:
        from sdfgsparse.bench.ml_structured import run_structured
        results.extend(run_structured(structured, repeat, log, MLResult))
    return results


def format_ml(results: List[MLResult]) -> str:
    head = f'{"task":<9} {"data":<14} {"mode":<10} ' + ' '.join(f'{s:>13}' for s in SYSTEMS) + \
        f' {"vs best":>8} {"vs dense":>8} {"compile":>8}  ok'
    lines = [head, '-' * len(head)]
    for r in results:
        cells = ' '.join(f'{r.seconds[s] * 1e3:>10.2f} ms' if s in r.seconds else f'{"-":>13}' for s in SYSTEMS)
        ratio, dense = r.ratio(), r.ratio_dense()
        lines.append(f'{r.task:<9} {r.data[:14]:<14} {r.mode:<10} {cells} '
                     f'{f"x{ratio:.2f}" if ratio else "-":>8} {f"x{dense:.2f}" if dense else "-":>8} '
                     f'{f"{r.compile_s:.1f} s" if r.compile_s else "-":>8}  {"yes" if r.correct else "NO"}')
    ratios = [r.ratio() for r in results if r.ratio()]
    if ratios:
        lines.append(f'geomean vs the best torch system: x{float(np.exp(np.mean(np.log(ratios)))):.2f} '
                     f'over {len(ratios)} rows (> 1: sdfgsparse faster)')
    errs = [f'{r.task} {r.data} {r.mode} {k}: {v}' for r in results for k, v in r.errors.items()]
    return '\n'.join(lines + errs)
