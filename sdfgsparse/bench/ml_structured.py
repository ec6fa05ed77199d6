"""``sdfgsparse bench --suite ml``: the structured-sparsity and sparse-training tasks.

* ``pointwise``: a MobileNet-v1-shaped stack of pointwise (1x1) convolutions, width 1.0,
  224 x 224 input (13 layers, 32 -> 1024 channels on 112 x 112 -> 7 x 7 maps, each
  followed by a ReLU; each layer reads its own input, as the depthwise layers between
  them would give it), float32, NCHW, batch 1 and 8, weights pruned by magnitude to 80 and
  90 % (``ss.torch.Magnitude``, CSR). Systems: torch-dense (``nn.Conv2d``, oneDNN) and
  sdfgsparse (``ss.torch.sparsify``: ``SparseConv2d``, bias and ReLU in the kernel);
* ``mlp-block``: ``Linear(4096, 16384), ReLU, Linear(16384, 4096)``, batch 64, float32, in
  the layouts 2:4, 1:4, V:N:M 64:2:8 and grouped 8:2:4 (``ss.torch.Magnitude(layout=...)``):
  inference, and one training step (forward, MSE loss, backward, Adam). Systems:
  torch-dense (the pruned weights stored dense), torch-sparse (the same weights as torch
  CSR; training through ``ss.torch.SparseOptimizer``) and sdfgsparse (the layout);
* ``rigl``: an MLP (64 -> 2048 -> 2048 -> 10) on the digits data set shipped with the
  benchmark (:mod:`sdfgsparse.bench.digits`), trained dense and with
  ``ss.torch.RigL`` at 90 % sparsity (ERK) for the same epochs; reported: each one's test
  accuracy, the median training step, and whether the parameter count stayed constant at
  every step. A row is correct when RigL's accuracy is within 1 point of dense's.

Every sdfgsparse result is checked against torch-dense's on the same (pruned) weights.
"""
import math
import time
from dataclasses import dataclass
from typing import Tuple

import numpy as np

from sdfgsparse.bench.timing import interleaved

__all__ = ['StructuredTasks', 'FULL', 'QUICK', 'run_structured', 'MOBILENET_POINTWISE']

#: MobileNet v1 (width 1.0, 224 x 224): (in, out, feature-map side) of its pointwise layers
MOBILENET_POINTWISE = ((32, 64, 112), (64, 128, 56), (128, 128, 56), (128, 256, 28), (256, 256, 28), (256, 512, 14),
                       (512, 512, 14), (512, 512, 14), (512, 512, 14), (512, 512, 14), (512, 512, 14), (512, 1024, 7),
                       (1024, 1024, 7))


@dataclass
class StructuredTasks:
    """Sizes of the structured tasks (``QUICK`` for ``--quick`` and tests)."""
    pointwise: Tuple[Tuple[int, int, int], ...] = MOBILENET_POINTWISE
    batches: Tuple[int, ...] = (1, 8)
    conv_sparsities: Tuple[float, ...] = (0.8, 0.9)
    block: Tuple[int, int, int] = (4096, 16384, 64)  # in/out width, hidden width, batch
    layouts: Tuple[str, ...] = ('2:4', '1:4', '64:2:8', 'g8:2:4')
    rigl_hidden: int = 2048
    rigl_epochs: int = 30


FULL = StructuredTasks()
QUICK = StructuredTasks(pointwise=((32, 64, 28), (64, 128, 14), (128, 128, 14)), batches=(1, 2),
                        conv_sparsities=(0.9, ), block=(256, 1024, 16), layouts=('2:4', '64:2:8'), rigl_hidden=256,
                        rigl_epochs=8)


def layout_of(ss, name: str):
    """``'2:4'`` -> ``ss.NM[2, 4]``, ``'64:2:8'`` -> ``ss.VNM[64, 2, 8]``, ``'g8:2:4'`` -> ``ss.GNM[8, 2, 4]``."""
    grouped = name.startswith('g')
    parts = [int(p) for p in name.lstrip('g').split(':')]
    if grouped:
        return ss.GNM[tuple(parts)]
    return ss.NM[tuple(parts)] if len(parts) == 2 else ss.VNM[tuple(parts)]


def _time(res, calls, repeat):
    for k, st in interleaved(calls, repeat).items():
        if st.error:
            res.errors[k] = st.error
        elif st.times:
            res.seconds[k] = float(np.median(st.times))


def _close(a, b, rel=2e-3) -> bool:
    return bool((a - b).abs().max() <= rel * (b.abs().max() + 1e-30))


def _pointwise(torch, ss, tasks, repeat, log, MLResult) -> list:
    specs = tasks.pointwise

    class Stack(torch.nn.Module):

        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.layers = torch.nn.ModuleList(
                torch.nn.Sequential(torch.nn.Conv2d(i, o, 1), torch.nn.ReLU()) for i, o, _ in specs)

        def forward(self, xs):
            return [layer(x) for layer, x in zip(self.layers, xs)]

    out = []
    for sparsity in tasks.conv_sparsities:
        sparse = Stack()
        t0 = time.perf_counter()
        ss.torch.sparsify(sparse, ss.torch.Magnitude(1 - sparsity))
        dense = Stack()
        with torch.no_grad():  # torch-dense: the pruned weights, stored dense
            for d, s in zip(dense.layers, sparse.layers):
                d[0].weight.copy_(s[0].weight.to_dense().reshape(d[0].weight.shape))
        for batch in tasks.batches:
            torch.manual_seed(batch)
            xs = [torch.relu(torch.randn(batch, i, h, h)) for i, _, h in specs]
            res = MLResult('pointwise', f'{round(sparsity * 100)}% b{batch}', 'inference')
            with torch.no_grad():
                got = sparse(xs)  # (the first call builds the programs)
                if t0 is not None:
                    res.compile_s, t0 = time.perf_counter() - t0, None
                res.correct = all(_close(g, w) for g, w in zip(got, dense(xs)))
                _time(res, {'torch-dense': lambda: dense(xs), 'sdfgsparse': lambda: sparse(xs)}, repeat)
            log(f'pointwise {res.data} inference: {_summary(res)}')
            out.append(res)
    return out


def _mlp_block(torch, ss, tasks, repeat, log, MLResult) -> list:
    width, hidden, batch = tasks.block

    def block():
        torch.manual_seed(3)
        return torch.nn.Sequential(torch.nn.Linear(width, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, width))

    x = torch.randn(batch, width)
    out = []
    for name in tasks.layouts:
        layout = layout_of(ss, name)
        t0 = time.perf_counter()
        ours = ss.torch.sparsify(block(), ss.torch.Magnitude(layout=layout))
        dense = block()
        with torch.no_grad():
            dense[0].weight.copy_(ours[0].weight.to_dense())
            dense[2].weight.copy_(ours[2].weight.to_dense())
            ours(x)  # builds the programs
        compile_s = time.perf_counter() - t0
        csr = block()
        with torch.no_grad():
            for k in (0, 2):
                csr[k].weight = torch.nn.Parameter(dense[k].weight.detach().to_sparse_csr())
        res = MLResult('mlp-block', name, 'inference', compile_s=compile_s)
        with torch.no_grad():
            want = dense(x)
            res.correct = _close(ours(x), want) and _close(csr(x), want)
            _time(res, {'torch-dense': lambda: dense(x), 'torch-sparse': lambda: csr(x),
                        'sdfgsparse': lambda: ours(x)}, repeat)
        log(f'mlp-block {name} inference: {_summary(res)}')
        out.append(res)
        # one training step: forward, MSE, backward, Adam (torch-dense's gradients masked
        # to the pattern; torch CSR through ss.torch.SparseOptimizer)
        masks = [(dense[k].weight, dense[k].weight != 0) for k in (0, 2)]
        opts = {'torch-dense': torch.optim.Adam(dense.parameters(), lr=1e-4),
                'torch-sparse': ss.torch.SparseOptimizer(torch.optim.Adam, csr.parameters(), lr=1e-4),
                'sdfgsparse': torch.optim.Adam(ours.parameters(), lr=1e-4)}
        models = {'torch-dense': dense, 'torch-sparse': csr, 'sdfgsparse': ours}
        target = torch.randn(batch, width)

        def step(k):

            def run():
                opts[k].zero_grad()
                ((models[k](x) - target)**2).mean().backward()
                if k == 'torch-dense':
                    for w, mask in masks:
                        w.grad.mul_(mask)
                opts[k].step()

            return run

        # checked on the first step's gradients, from equal weights (see ml._mlp)
        for k in ('torch-dense', 'sdfgsparse'):
            opts[k].zero_grad()
            ((models[k](x) - target)**2).mean().backward()
        grads = []
        for j, k in enumerate((0, 2)):
            lay = ours[k]
            rows, cols, slots = lay.weight.entries()
            ref = dense[k].weight.grad[rows, cols]
            grads += [(lay.values.grad[slots], ref), (lay.bias.grad, dense[k].bias.grad)]
        train = MLResult('mlp-block', name, 'train step', compile_s=None,
                         correct=all(_close(g, r, 1e-3) for g, r in grads))
        _time(train, {k: step(k) for k in models}, max(2, repeat // 2))
        log(f'mlp-block {name} train step: {_summary(train)}')
        out.append(train)
    return out


def _rigl(torch, ss, tasks, repeat, log, MLResult) -> list:
    import torch.nn.functional as F
    from sdfgsparse.bench.digits import load_digits, split
    X, y = load_digits()
    Xtr, ytr, Xte, yte = (torch.from_numpy(a) for a in split(X, y))
    H, epochs, bs = tasks.rigl_hidden, tasks.rigl_epochs, 64
    steps = epochs * math.ceil(len(ytr) / bs)

    def mlp():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(64, H), torch.nn.ReLU(), torch.nn.Linear(H, H), torch.nn.ReLU(),
                                   torch.nn.Linear(H, 10))

    def train(model, opt, rigl=None):
        g = torch.Generator().manual_seed(1)
        times, counts = [], set()
        for _ in range(epochs):
            perm = torch.randperm(len(ytr), generator=g)
            for i in range(0, len(ytr), bs):
                idx = perm[i:i + bs]
                t0 = time.perf_counter()
                opt.zero_grad()
                F.cross_entropy(model(Xtr[idx]), ytr[idx]).backward()
                if rigl is None or rigl():
                    opt.step()
                times.append(time.perf_counter() - t0)
                if rigl is not None:
                    counts.add(rigl.nnz())
        with torch.no_grad():
            acc = float((model(Xte).argmax(1) == yte).float().mean())
        return acc, float(np.median(times)), counts

    dense = mlp()
    acc_d, t_d, _ = train(dense, torch.optim.Adam(dense.parameters(), lr=1e-3))
    sparse = mlp()
    opt = torch.optim.Adam(sparse.parameters(), lr=1e-3)
    rigl = ss.torch.RigL(sparse, opt, density=0.1, update_every=20, drop_fraction=0.3, T_end=int(0.75 * steps),
                         distribution='erk')
    acc_s, t_s, counts = train(sparse, opt, rigl)
    res = MLResult('rigl', f'{acc_d:.1%}/{acc_s:.1%}', 'train step')  # test accuracy: dense / RigL
    res.seconds = {'torch-dense': t_d, 'sdfgsparse': t_s}
    res.correct = acc_s >= acc_d - 0.01 and len(counts) == 1
    if len(counts) != 1:
        res.errors['sdfgsparse'] = f'parameter count changed: {sorted(counts)}'
    log(f'rigl digits (90 % sparse, {len(rigl.history)} topology updates, {rigl.nnz()} parameters; test accuracy '
        f'dense {acc_d:.1%}, RigL {acc_s:.1%}): {_summary(res)}')
    return [res]


def _summary(r) -> str:
    parts = [f'{k} {v * 1e3:.2f} ms' for k, v in sorted(r.seconds.items())]
    dense = r.seconds.get('torch-dense')
    ours = r.seconds.get('sdfgsparse')
    ratio = f'; x{dense / ours:.2f} vs torch-dense' if dense and ours else ''
    return ', '.join(parts) + ratio + ('' if r.correct else ' WRONG')


def run_structured(tasks: StructuredTasks, repeat: int, log, MLResult) -> list:
    """The three tasks (``MLResult`` rows)."""
    import torch

    import sdfgsparse as ss
    return (_pointwise(torch, ss, tasks, repeat, log, MLResult) + _mlp_block(torch, ss, tasks, repeat, log, MLResult) +
            _rigl(torch, ss, tasks, repeat, log, MLResult))
