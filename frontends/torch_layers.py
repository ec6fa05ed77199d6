"""Layers whose weight is a :class:`LayoutTensor`: ``SparseLinear`` and ``SparseConv2d`` (1x1).

Each holds its weight as ``values`` (a ``torch.nn.Parameter``: any torch optimizer trains
it, its state included) and the layout's index members as buffers (``index_crd3`` of
``ss.NM[2, 4]``; in ``state_dict``, moved by ``.to()``). The index can change in place
(:class:`~sdfgsparse.frontends.torch_rigl.RigL` does) while the number of values stays:
the compiled programs have a symbolic number of entries, so nothing recompiles.

``SparseConv2d`` is a pointwise convolution: ``Y[b] = W @ X[b]`` over the channels, one
SpMM per image for NCHW input (the pixels are the dense columns; maps of at most
:data:`ONE_PRODUCT_PIXELS` pixels: one SpMM over the batch's pixels), one for the whole
batch for channels-last input (its pixels are rows: ``(W @ X.T).T``). Without a gradient to
compute, the bias and the activation (``'relu'``) are fused into the product's kernel.

:func:`sparsify_layers` puts them in a model: every ``nn.Linear`` and every 1x1
``nn.Conv2d`` (stride 1, no padding, no groups, no dilation) is replaced; other
convolutions stay dense. A ``nn.ReLU`` right after a replaced layer in an
``nn.Sequential`` is fused into it (and becomes ``nn.Identity``).
"""
from typing import Dict, List, Optional

import torch

from sdfgsparse import errors
from sdfgsparse.frontends import torch_layouts as ops
from sdfgsparse.frontends.torch_layouts import ACTIVATIONS
from sdfgsparse.frontends.torch_dispatch import LayoutTensor

__all__ = ['SparseLinear', 'SparseConv2d', 'sparsify_layers', 'ONE_PRODUCT_PIXELS']

#: NCHW maps of at most this many pixels take one product for the whole batch (the images'
#: pixels side by side); larger maps one product per image. One product over the batch: 14 x 14
#: at batch 8, 1.6x -> 1.9x dense; 7 x 7 0.9x -> 1.7x; but 56 x 56 1.2x -> 0.7x (docs/performance.md)
ONE_PRODUCT_PIXELS = 256


class _LayoutWeight(torch.nn.Module):
    """The weight storage shared by the sparse layers."""

    def _init_weight(self, weight: LayoutTensor, bias: Optional[torch.Tensor], activation: str):
        if not isinstance(weight, LayoutTensor):
            raise errors.ArgumentError(f'{type(self).__name__}: weight must be a LayoutTensor (a sparsifier\'s '
                                       f'result), got {type(weight).__name__}')
        if activation not in ACTIVATIONS:
            raise errors.ArgumentError(f'{type(self).__name__}: activation must be one of {ACTIVATIONS}, got '
                                       f'{activation!r}')
        self.format = weight.format
        self.weight_shape = tuple(weight.shape)
        self.values = torch.nn.Parameter(weight.values.detach().clone(), requires_grad=True)
        self._index_names = [m for m in weight.format.member_names if m != 'vals']
        for name, t in zip(self._index_names, weight.index):
            self.register_buffer(f'index_{name}', t.detach().clone().contiguous())
        if isinstance(bias, torch.nn.Parameter) and bias.dim() == 1:
            self.bias = bias  # the layer's own (an optimizer built over the dense model keeps it)
        elif bias is not None:
            self.bias = torch.nn.Parameter(bias.detach().clone().reshape(-1), requires_grad=bias.requires_grad)
        else:
            self.register_parameter('bias', None)
        self.activation = activation
        self._weight_view = None
        #: while not None, each product with a gradient appends ``(X, dY)`` here (RigL's dense gradient)
        self.probe = None

    @property
    def index(self) -> List[torch.Tensor]:
        return [getattr(self, f'index_{n}') for n in self._index_names]

    @property
    def weight(self) -> LayoutTensor:
        """The weight as a :class:`LayoutTensor` over this layer's tensors (no copy)."""
        w = self._weight_view
        index = self.index
        if w is None or w.values is not self.values or any(a is not b for a, b in zip(w.index, index)):
            w = self._weight_view = LayoutTensor(self.format, self.weight_shape, index, self.values)
        return w

    def _activate(self, Y):
        return torch.relu(Y) if self.activation == 'relu' else Y

    def _grad(self, x) -> bool:
        return torch.is_grad_enabled() and (self.values.requires_grad or x.requires_grad or
                                            (self.bias is not None and self.bias.requires_grad))

    def dense_gradient(self) -> torch.Tensor:
        """The gradient of the dense weight from the products recorded in :attr:`probe`
        (``sum dY @ X.T``), which is then emptied."""
        rows, cols = self.weight_shape
        g = torch.zeros(rows, cols, dtype=self.values.dtype)
        for X, dY in self.probe or ():
            g.addmm_(dY, X.t())
        if self.probe is not None:
            self.probe.clear()
        return g

    def _product(self, X: torch.Tensor, grad: bool) -> torch.Tensor:
        """``activation(W @ X + bias[:, None])`` for a dense ``[in, k]`` ``X``."""
        rows, cols = self.weight_shape
        if grad:
            Y = ops.layout_mm(self.format.name, rows, cols, self.index, self.values, X)
            if self.probe is not None and Y.requires_grad:
                probe = self.probe
                Y.register_hook(lambda dY: probe.append((X.detach(), dY.detach())))
            if self.bias is not None:
                Y = Y + self.bias[:, None]
            return self._activate(Y)
        bias = self.bias if self.bias is not None else torch.zeros(rows, dtype=self.values.dtype)
        return ops.layout_mm_epilogue(self.format.name, rows, cols, self.index, self.values, X, bias,
                                      self.activation)

    def extra_repr(self):
        rows, cols = self.weight_shape
        act = f', activation={self.activation!r}' if self.activation != 'none' else ''
        return f'{cols} -> {rows}, layout={self.format!r}, {self.values.numel()} values, ' \
               f'bias={self.bias is not None}{act}'


class SparseLinear(_LayoutWeight):
    """``activation(x @ W.T + bias)`` with ``W`` (``out x in``) in a catalogue layout."""

    def __init__(self, weight: LayoutTensor, bias: Optional[torch.Tensor] = None, activation: str = 'none'):
        super().__init__()
        self._init_weight(weight, bias, activation)
        self.out_features, self.in_features = self.weight_shape

    @classmethod
    def from_dense(cls, linear: torch.nn.Linear, sparsifier, activation: str = 'none') -> 'SparseLinear':
        return cls(sparsifier(linear.weight), linear.bias, activation)

    def forward(self, x):
        if not isinstance(x, torch.Tensor) or x.shape[-1:] != (self.in_features, ):
            raise errors.ShapeError(f'SparseLinear: expected input [..., {self.in_features}], got '
                                    f'{tuple(getattr(x, "shape", ()))}')
        lead = x.shape[:-1]
        X = x.reshape(-1, self.in_features).t().contiguous()
        return self._product(X, self._grad(x)).t().reshape(*lead, self.out_features)


class SparseConv2d(_LayoutWeight):
    """A 1x1 convolution (``out x in`` channels) with its weight in a catalogue layout."""

    def __init__(self, weight: LayoutTensor, bias: Optional[torch.Tensor] = None, activation: str = 'none'):
        super().__init__()
        self._init_weight(weight, bias, activation)
        self.out_channels, self.in_channels = self.weight_shape

    @classmethod
    def from_dense(cls, conv: torch.nn.Conv2d, sparsifier, activation: str = 'none') -> 'SparseConv2d':
        if not pointwise(conv):
            raise errors.UnsupportedOperationError(f'SparseConv2d: {conv} is not a pointwise convolution (1x1 kernel, '
                                                   'stride 1, no padding, dilation 1, groups 1)')
        return cls(sparsifier(conv.weight), conv.bias, activation)

    def forward(self, x):
        if not isinstance(x, torch.Tensor) or x.dim() != 4 or x.shape[1] != self.in_channels:
            raise errors.ShapeError(f'SparseConv2d: expected input [batch, {self.in_channels}, height, width], got '
                                    f'{tuple(getattr(x, "shape", ()))}')
        B, C, H, W = x.shape
        grad = self._grad(x)
        if x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous():
            rows = x.permute(0, 2, 3, 1).reshape(B * H * W, C)  # a view: pixels are rows
            Y = self._product(rows.t().contiguous(), grad).t()  # [pixels, out]
            return Y.reshape(B, H, W, self.out_channels).permute(0, 3, 1, 2)  # channels-last, no copy
        X = x.contiguous().reshape(B, C, H * W)
        if grad and B == 0:  # no image: one product of no columns keeps the graph (as F.conv2d does)
            Y = self._product(X.permute(1, 0, 2).reshape(C, 0), True)
            return Y.reshape(self.out_channels, 0, H, W).permute(1, 0, 2, 3)
        if grad:
            return torch.stack([self._product(X[b], True) for b in range(B)]).reshape(B, self.out_channels, H, W)
        rows, cols = self.weight_shape
        bias = self.bias if self.bias is not None else torch.zeros(rows, dtype=self.values.dtype)
        if H * W <= ONE_PRODUCT_PIXELS and B > 1:
            # small maps: the batch's pixels as the columns of one product (a copy each way)
            Y = ops.layout_mm_epilogue(self.format.name, rows, cols, self.index, self.values,
                                       X.permute(1, 0, 2).reshape(C, B * H * W), bias.detach(), self.activation)
            return Y.reshape(rows, B, H, W).permute(1, 0, 2, 3)
        out = ops.layout_bmm_epilogue(self.format.name, rows, cols, self.index, self.values, X, bias.detach(),
                                      self.activation)  # one call for the batch, a product per image
        return out.reshape(B, self.out_channels, H, W)


def pointwise(conv) -> bool:
    """Whether ``conv`` is a 1x1 ``nn.Conv2d`` that is a plain product over channels."""
    return isinstance(conv, torch.nn.Conv2d) and tuple(conv.kernel_size) == (1, 1) and tuple(conv.stride) == (1, 1) \
        and tuple(conv.dilation) == (1, 1) and conv.groups == 1 and conv.padding_mode == 'zeros' and \
        (conv.padding in ('valid', 0) or tuple(conv.padding) == (0, 0))


def sparsify_layers(module: torch.nn.Module, sparsifier, per_layer: Optional[Dict[str, object]] = None) -> List[str]:
    """Replace the ``nn.Linear`` and pointwise ``nn.Conv2d`` layers of ``module`` (not
    ``module`` itself) by their sparse forms with ``sparsifier``'s weights (or
    ``per_layer[name]``'s, by the layer's qualified name), in place; returns the names of
    the replaced layers."""
    done = []
    per_layer = per_layer or {}

    def visit(parent, prefix):
        children = list(parent.named_children())
        for k, (name, child) in enumerate(children):
            if isinstance(child, torch.nn.Linear) or pointwise(child):
                nxt = children[k + 1][1] if k + 1 < len(children) else None
                fuse = isinstance(parent, torch.nn.Sequential) and type(nxt) is torch.nn.ReLU
                cls = SparseLinear if isinstance(child, torch.nn.Linear) else SparseConv2d
                setattr(parent, name, cls.from_dense(child, per_layer.get(prefix + name, sparsifier),
                                                     'relu' if fuse else 'none'))
                if fuse:
                    setattr(parent, children[k + 1][0], torch.nn.Identity())
                done.append(prefix + name)
            elif not isinstance(child, (SparseLinear, SparseConv2d)):
                visit(child, f'{prefix}{name}.')

    visit(module, '')
    return done

