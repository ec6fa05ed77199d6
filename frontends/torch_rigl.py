"""RigL (Evci et al., ICML 2020): sparse training with a fixed parameter count.

>>> rigl = ss.torch.RigL(model, optimizer, density=0.1, update_every=100, T_end=3000)  # doctest: +SKIP
>>> for x, y in batches:                                                   # doctest: +SKIP
...     optimizer.zero_grad()
...     F.cross_entropy(model(x), y).backward()
...     if rigl():                 # False on a topology update: the optimizer skips that step
...         optimizer.step()

Given a dense model, :class:`RigL` sparsifies its ``nn.Linear`` and pointwise
``nn.Conv2d`` layers with a random pattern of ``density`` in ``layout`` (uniform over the
layers; a model sparsified before keeps its layers and their patterns) and puts each
layer's values in the optimizer in place of the dense weight. Every ``update_every``
calls until ``T_end``, it updates each layer's topology:

1. drop the ``k = round(f(t) * nnz)`` active weights of smallest magnitude, where
   ``f(t) = drop_fraction / 2 * (1 + cos(pi * t / T_end))`` (``schedule='cosine'``) or
   ``drop_fraction`` (``'constant'``);
2. grow ``k`` connections where the dense gradient is largest among those inactive after
   the drop (so a dropped weight may come back). The dense gradient is computed on that
   step only: during its forward and backward each layer records its products' inputs and
   output gradients, and ``dW = dY @ X.T`` is formed once;
3. grown weights start at zero and their optimizer state (momentum, Adam's moments) is
   reset; the kept weights keep theirs (moved with them where the storage order changes),
   and so does a connection dropped and grown again in the same update (RigL's
   ``reinit_when_same=False``). Layers at full density (ERK gives small layers 1.0) are
   left as they are.

Each layer's number of values never changes, so its compiled programs (a symbolic number
of entries) run every pattern without a recompile. Layouts: ``ss.CSR`` (the default) and
``ss.NM[n, m]`` (drop anywhere, grow within the groups that lost weights, so every group
keeps ``n``).
"""
import math
from typing import List, Optional

import numpy as np
import torch

from sdfgsparse import errors
from sdfgsparse.formats import CSR
from sdfgsparse.frontends.torch_layers import SparseConv2d, SparseLinear, pointwise, sparsify_layers
from sdfgsparse.frontends.torch_sparsifiers import Random, check_density, check_seed

__all__ = ['RigL']

SCHEDULES = ('cosine', 'constant')
DISTRIBUTIONS = ('uniform', 'erk')


class RigL:
    """The RigL topology schedule for ``model`` trained by ``optimizer`` (see the module
    docstring).

    :param density: fraction of each layer's weights kept (None: the model is already
        sparse, or the layout fixes it, as ``ss.NM[2, 4]`` does).
    :param update_every: calls between topology updates (RigL's delta T).
    :param drop_fraction: fraction of the active weights replaced at the first update.
    :param schedule: ``'cosine'`` (needs ``T_end``) or ``'constant'``.
    :param T_end: the call after which the topology is frozen (RigL uses 75 % of the
        training steps); None with ``'constant'``: never frozen.
    :param layout: the layout of layers this schedule sparsifies (``ss.CSR`` by default).
    :param seed: the seed of the initial random pattern.
    """

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, density: Optional[float] = 0.1,
                 update_every: int = 100, drop_fraction: float = 0.3, schedule: str = 'cosine',
                 T_end: Optional[int] = None, layout=None, distribution: str = 'uniform', seed: int = 0):
        if not isinstance(model, torch.nn.Module):
            raise errors.ArgumentError(f'RigL: model must be a torch.nn.Module, got {type(model).__name__}')
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise errors.ArgumentError(f'RigL: optimizer must be a torch.optim.Optimizer, got '
                                       f'{type(optimizer).__name__}')
        if isinstance(update_every, bool) or not isinstance(update_every, int) or update_every < 1:
            raise errors.ArgumentError(f'RigL: update_every must be a positive integer, got {update_every!r}')
        if isinstance(drop_fraction, bool) or not isinstance(drop_fraction, (int, float)) or \
                not 0 <= drop_fraction <= 1:
            raise errors.ArgumentError(f'RigL: drop_fraction must be in [0, 1], got {drop_fraction!r}')
        if schedule not in SCHEDULES:
            raise errors.ArgumentError(f'RigL: schedule must be one of {SCHEDULES}, got {schedule!r}')
        if schedule == 'cosine' and T_end is None:
            raise errors.ArgumentError("RigL: schedule='cosine' needs T_end (the call after which the topology is "
                                       "frozen; RigL uses 75 % of the training steps)")
        if T_end is not None and (isinstance(T_end, bool) or not isinstance(T_end, int) or T_end < 1):
            raise errors.ArgumentError(f'RigL: T_end must be a positive integer, got {T_end!r}')
        seed = check_seed(seed, 'RigL')
        if layout is not None and layout is not CSR and getattr(layout, 'pattern', None) is None:
            raise errors.UnsupportedOperationError(f'RigL: layout={layout!r}; RigL updates ss.CSR and '
                                                   'ss.NM[n, m] layers')
        if distribution not in DISTRIBUTIONS:
            raise errors.ArgumentError(f'RigL: distribution must be one of {DISTRIBUTIONS}, got {distribution!r}')
        self.distribution = distribution
        self.model, self.optimizer = model, optimizer
        self.update_every, self.drop_fraction, self.schedule, self.T_end = update_every, drop_fraction, schedule, T_end
        self.layers = self._sparse_layers(model, density, layout, seed)
        for name, layer in self.layers:
            pat = getattr(layer.format, 'pattern', None)
            if pat is not None and pat.kind != 'nm':
                raise errors.UnsupportedOperationError(f'RigL: layer {name} is {layer.format!r}; RigL updates '
                                                       'ss.CSR and ss.NM[n, m] layers')
            if layer.format.name != 'CSR' and pat is None:
                raise errors.UnsupportedOperationError(f'RigL: layer {name} is {layer.format!r}; RigL updates '
                                                       'ss.CSR and ss.NM[n, m] layers')
        self.t = 0
        #: per update: (call, [(layer name, weights replaced)])
        self.history: List[tuple] = []
        self._arm()

    # ------------------------------------------------------------------ set-up
    def _sparse_layers(self, model, density, layout, seed):
        existing = [(n, m) for n, m in model.named_modules() if isinstance(m, (SparseLinear, SparseConv2d))]
        if existing:
            if density is not None and any(abs(m.values.numel() / np.prod(m.weight_shape) - density) > 0.01
                                           for _, m in existing):
                raise errors.ArgumentError('RigL: the model is sparse already; pass density=None to keep its layers')
            return existing
        dense = {n: m.weight for n, m in model.named_modules()
                 if isinstance(m, torch.nn.Linear) or pointwise(m)}
        if not dense:
            raise errors.ArgumentError(f'RigL: {type(model).__name__} has no torch.nn.Linear or pointwise '
                                       'torch.nn.Conv2d layer')
        layout = CSR if layout is None else layout
        structured = getattr(layout, 'pattern', None) is not None
        if not structured:
            density = check_density(density, 'RigL')
        per_layer = {}
        if self.distribution == 'erk' and not structured:
            per_layer = {'0.' + n: Random(d, layout, seed) for n, d in erk({n: tuple(w.shape) for n, w in dense.items()},
                                                                          density).items()}
        wrapped = torch.nn.Sequential(model)
        sparsify_layers(wrapped, Random(None if structured else density, layout, seed), per_layer)
        if wrapped[0] is not model:
            raise errors.ArgumentError(f'RigL: {type(model).__name__} is itself a layer; wrap it in a module')
        layers = [(n, m) for n, m in model.named_modules() if isinstance(m, (SparseLinear, SparseConv2d))]
        # the optimizer trains each layer's values instead of its dense weight
        swap = {id(dense[n]): m.values for n, m in layers if n in dense}
        for group in self.optimizer.param_groups:
            group['params'] = [swap.get(id(p), p) for p in group['params']]
        for n in dense:
            self.optimizer.state.pop(dense[n], None)
        return layers

    # ------------------------------------------------------------------ the schedule
    def fraction(self, t: int) -> float:
        """The fraction of active weights replaced at call ``t``."""
        if self.schedule == 'constant':
            return float(self.drop_fraction)
        return self.drop_fraction / 2 * (1 + math.cos(math.pi * t / self.T_end))

    def _is_update(self, t: int) -> bool:
        return t % self.update_every == 0 and (self.T_end is None or t <= self.T_end)

    def _arm(self):
        """Record products during the next call's step when it updates the topology (in the
        layers RigL updates: not those at full density)."""
        probe = self._is_update(self.t + 1)
        for _, layer in self.layers:
            layer.probe = [] if probe and layer.values.numel() < np.prod(layer.weight_shape) else None

    def __call__(self) -> bool:
        """Count one training step (after its backward); on an update step change the
        topology and return False (the optimizer does not step), else return True."""
        self.t += 1
        update = self._is_update(self.t)
        if update:
            f = self.fraction(self.t)
            done = []
            with torch.no_grad():
                for name, layer in self.layers:
                    grad = layer.dense_gradient()
                    if layer.values.numel() < np.prod(layer.weight_shape):  # (a dense layer stays as it is)
                        done.append((name, self._update(layer, grad, f)))
            self.history.append((self.t, done))
        self._arm()
        return not update

    step = __call__

    def nnz(self) -> int:
        """The number of values (parameters) of the sparse layers."""
        return sum(layer.values.numel() for _, layer in self.layers)

    # ------------------------------------------------------------------ one layer
    def _update(self, layer, grad: torch.Tensor, fraction: float) -> int:
        rows, cols = layer.weight_shape
        n = layer.values.numel()
        k = int(round(fraction * n))
        if k == 0:
            return 0
        w = layer.values.detach()
        order = torch.argsort(w.abs(), stable=True)
        dropped = order[:k]  # slots of the k smallest magnitudes
        r, c, q = layer.weight.entries()
        pos_of = torch.full((n, ), -1, dtype=torch.int64)
        pos_of[q] = torch.arange(q.numel())
        active = torch.zeros(rows * cols, dtype=torch.bool)
        flat = r * cols + c  # of each entry, in entries order
        active[flat] = True
        slot_flat = torch.empty(n, dtype=torch.int64)
        slot_flat[q] = flat
        active[slot_flat[dropped]] = False
        if getattr(layer.format, 'pattern', None) is None:
            new_flat, src = self._grow_unstructured(active, slot_flat, dropped, grad, k, n)
            index = _csr_index(new_flat, rows, cols)
        else:
            new_flat, src, index = self._grow_nm(layer, active, slot_flat, dropped, grad)
        self._rewrite(layer, index, src)
        return k

    @staticmethod
    def _grow_unstructured(active, slot_flat, dropped, grad, k, n):
        score = grad.abs().reshape(-1).clone()
        score[active] = -1.0  # only inactive positions grow (those just dropped included)
        grown = torch.argsort(score, descending=True, stable=True)[:k]
        keep = torch.ones(n, dtype=torch.bool)
        keep[dropped] = False
        kept_slots = torch.nonzero(keep).reshape(-1)
        flat = torch.cat([slot_flat[kept_slots], grown])
        # a grown connection that was just dropped keeps its weight and state (RigL's code:
        # reinit_when_same=False); the others start at zero
        was = torch.full(active.shape, -1, dtype=torch.int64)
        was[slot_flat] = torch.arange(n)
        src = torch.cat([kept_slots, was[grown]])
        order = torch.argsort(flat, stable=True)  # row-major: CSR order
        return flat[order], src[order]

    @staticmethod
    def _grow_nm(layer, active, slot_flat, dropped, grad):
        pat = layer.format.pattern
        rows, cols = layer.weight_shape
        m, nn = pat.m, pat.n
        G = cols // m
        score = grad.abs().reshape(rows, G, m).clone()
        score[active.reshape(rows, G, m)] = -1.0
        lost = torch.zeros(rows * G, dtype=torch.int64)  # slots each group must grow
        lost.index_add_(0, slot_flat[dropped] // m, torch.ones(dropped.numel(), dtype=torch.int64))
        rank = torch.argsort(torch.argsort(score, dim=2, descending=True, stable=True), dim=2, stable=True)
        grow = rank < lost.reshape(rows, G, 1)
        now = active.reshape(rows, G, m) | grow  # n per group
        if not bool((now.sum(dim=2) == nn).all()):  # the construction guarantees it
            raise errors.SparseError('RigL: an n:m group lost its count (internal error)')
        offs = torch.nonzero(now.reshape(rows * G, m))[:, 1].reshape(rows * G, nn)  # increasing per group
        base = (torch.arange(rows * G) * m).reshape(-1, 1)
        new_flat = (base + offs).reshape(-1)  # storage order: row, group, slot
        # every position active before the update keeps its slot's weight and state (a
        # connection dropped and grown again included: RigL's reinit_when_same=False)
        old_slot = torch.full((rows * cols, ), -1, dtype=torch.int64)
        old_slot[slot_flat] = torch.arange(slot_flat.numel())
        src = old_slot[new_flat]
        return new_flat, src, [offs.reshape(-1).to(torch.int32)]

    def _rewrite(self, layer, index, src):
        """The new index in place (same sizes), the values and the optimizer's per-value
        state moved along ``src`` (-1: grown, zero)."""
        grown = src < 0
        take = src.clamp(min=0)
        for t, new in zip(layer.index, index):
            if t.shape != new.shape:
                raise errors.SparseError(f'RigL: index {tuple(t.shape)} -> {tuple(new.shape)} (internal error)')
            t.copy_(new.to(t.dtype))
        v = layer.values
        moved = v.detach()[take].clone()
        moved[grown] = 0
        v.data.copy_(moved)
        if v.grad is not None:
            v.grad = None
        state = self.optimizer.state.get(v, {})
        for key, s in state.items():
            if isinstance(s, torch.Tensor) and s.shape == v.shape:
                new = s[take].clone()
                new[grown] = 0
                s.copy_(new)


def erk(shapes, density: float) -> dict:
    """Erdos-Renyi-Kernel densities (RigL's): layer ``l`` keeps ``eps * sum(dims) /
    prod(dims)`` of its weights, ``eps`` chosen so that all layers together keep ``density``
    of theirs; a layer that would exceed 1 stays dense and the rest share what is left."""
    sizes = {n: float(np.prod(s)) for n, s in shapes.items()}
    raw = {n: float(sum(s)) / sizes[n] for n, s in shapes.items()}
    target = density * sum(sizes.values())
    full = set()
    while True:
        rest = target - sum(sizes[n] for n in full)
        eps = rest / sum(raw[n] * sizes[n] for n in shapes if n not in full)
        over = {n for n in shapes if n not in full and eps * raw[n] > 1}
        if not over:
            return {n: 1.0 if n in full else eps * raw[n] for n in shapes}
        full |= over


def _csr_index(flat: torch.Tensor, rows: int, cols: int) -> List[torch.Tensor]:
    r = torch.div(flat, cols, rounding_mode='floor')
    pos = torch.zeros(rows + 1, dtype=torch.int64)
    pos[1:] = torch.bincount(r, minlength=rows).cumsum(0)
    return [pos.to(torch.int32), (flat - r * cols).to(torch.int32)]
