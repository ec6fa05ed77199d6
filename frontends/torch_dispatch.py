"""``LayoutTensor``: a matrix in any catalogue layout inside torch code, with STen's dispatch.

A :class:`LayoutTensor` is a format, a shape, the index tensors of the layout and its
values (a dense 1-D tensor, usually a ``torch.nn.Parameter``: autograd and any torch
optimizer follow it). It takes part in torch calls through ``__torch_function__``:

* products with a sparse implementation run it (:mod:`frontends.torch_layouts`):
  ``W @ X``, ``X @ W``, ``torch.mm`` / ``torch.matmul`` either way round, and
  ``F.linear(x, W, b)`` (bias and, with no gradient needed, nothing else between the
  product and the result);
* any other operation runs on the dense matrix (``W.to_dense()``, differentiable with
  respect to the values), with one :class:`~sdfgsparse.errors.LayoutFallbackWarning` per
  operation and layout naming both; never an error, never silently slow.
"""
import threading
from typing import List, Sequence

import numpy as np
import torch

from sdfgsparse import errors
from sdfgsparse.formats import SparseFormat, get_format
from sdfgsparse.runtime.convert import slot_coordinates
from sdfgsparse.frontends import torch_layouts as ops

__all__ = ['LayoutTensor']

_WARNED = set()
_WARN_LOCK = threading.Lock()


def _fallback_warning(op: str, layout: str) -> None:
    with _WARN_LOCK:
        if (op, layout) in _WARNED:
            return
        _WARNED.add((op, layout))
    errors.warn_user(f'{op} has no sparse implementation for the {layout} layout; it runs on the dense matrix '
                     '(to_dense()). Later calls of it on this layout do not warn again.', errors.LayoutFallbackWarning)


class LayoutTensor:
    """A ``rows x cols`` matrix of format ``fmt`` (a catalogue format or its name) stored as
    ``index`` (the format's index members, in order) and ``values``."""

    def __init__(self, fmt, shape: Sequence[int], index: List[torch.Tensor], values: torch.Tensor):
        self.format = fmt if isinstance(fmt, SparseFormat) else get_format(fmt)
        self.shape = torch.Size((int(shape[0]), int(shape[1])))
        self.index = list(index)
        self.values = values
        names = [m for m in self.format.member_names if m != 'vals']
        if len(self.index) != len(names):
            raise errors.ArgumentError(f'LayoutTensor: {self.format!r} has index members {names}, got '
                                       f'{len(self.index)} tensors')
        self._coords = None  # (key, rows, cols, slots) of the entries, per version of the index

    @classmethod
    def from_matrix(cls, S, values_dtype=None, requires_grad: bool = False) -> 'LayoutTensor':
        """Tensors over the storage of a host matrix (``ss.SparseMatrix`` or scipy of a twin
        format); the values become a leaf tensor (``requires_grad`` as given)."""
        index, values = ops.storage_tensors(S)
        fmt = S.format if hasattr(S, 'arrays') else S.format.upper()
        if values_dtype is not None:
            values = values.to(values_dtype)
        return cls(fmt, S.shape, index, values.clone().requires_grad_(requires_grad))

    # ------------------------------------------------------------------ description
    @property
    def layout(self) -> str:
        return repr(self.format)

    @property
    def dtype(self) -> torch.dtype:
        return self.values.dtype

    @property
    def requires_grad(self) -> bool:
        return self.values.requires_grad

    def dim(self) -> int:
        return 2

    @property
    def nnz(self) -> int:
        """Stored value slots (an n:m group's stored zeros count: they are trainable)."""
        return int(self.values.numel())

    def __repr__(self):
        return f'LayoutTensor({self.layout}, shape={tuple(self.shape)}, {self.nnz} values, dtype={self.dtype})'

    # ------------------------------------------------------------------ conversions
    def entries(self):
        """``(rows, cols, slots)`` (int64 tensors) of the stored entries: their coordinates
        and the position of each one's value, computed once per version of the index."""
        key = tuple((t.data_ptr(), t._version, t.numel()) for t in self.index)
        if self._coords is None or self._coords[0] != key:
            names = [m for m in self.format.member_names if m != 'vals']
            arrays = {m: t.detach().numpy() for m, t in zip(names, self.index)}
            arrays['vals'] = np.empty(self.nnz, dtype=np.float32)  # only its size is read
            r, c, q = slot_coordinates(self.format, arrays, tuple(self.shape))
            self._coords = (key, *(torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64)) for a in (r, c, q)))
        return self._coords[1:]

    def to_dense(self) -> torch.Tensor:
        """The dense matrix (differentiable with respect to the values; duplicates summed)."""
        rows, cols, slots = self.entries()
        dense = torch.zeros(tuple(self.shape), dtype=self.dtype)
        return dense.index_put((rows, cols), self.values[slots], accumulate=True)

    # ------------------------------------------------------------------ products
    def _mm(self, X: torch.Tensor) -> torch.Tensor:
        vec = X.dim() == 1
        Y = ops.layout_mm(self.format.name, self.shape[0], self.shape[1], self.index, self.values,
                          X.unsqueeze(1) if vec else X)
        return Y.squeeze(1) if vec else Y

    def _rmm(self, X: torch.Tensor) -> torch.Tensor:
        """``X @ self`` = ``(self.T @ X.T).T``."""
        vec = X.dim() == 1
        XT = X.unsqueeze(1) if vec else X.t()
        Y = ops.layout_mm_t(self.format.name, self.shape[0], self.shape[1], self.index, self.values,
                            XT.contiguous())
        return Y.squeeze(1) if vec else Y.t()

    def linear(self, x: torch.Tensor, bias=None) -> torch.Tensor:
        """``x @ self.T + bias`` over the last dimension of ``x`` (``F.linear``)."""
        lead = x.shape[:-1]
        X = x.reshape(-1, x.shape[-1]).t().contiguous()  # [in, batch]
        grad = torch.is_grad_enabled() and (self.values.requires_grad or x.requires_grad or
                                            (bias is not None and bias.requires_grad))
        if grad or bias is None:
            Y = self._mm(X)
            if bias is not None:
                Y = Y + bias[:, None]
        else:
            Y = ops.layout_mm_epilogue(self.format.name, self.shape[0], self.shape[1], self.index, self.values, X,
                                       bias)
        return Y.t().reshape(*lead, self.shape[0])

    def __matmul__(self, X):
        return torch.matmul(self, X)

    def __rmatmul__(self, X):
        return torch.matmul(X, self)

    @property
    def T(self):
        _fallback_warning('LayoutTensor.T', self.layout)
        return self.to_dense().t()

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.matmul, torch.mm, torch.Tensor.matmul, torch.Tensor.mm, torch.Tensor.__matmul__) and \
                len(args) == 2 and not kwargs:
            a, b = args
            if isinstance(a, LayoutTensor) and _dense(b) and b.dim() in (1, 2) and b.shape[0] == a.shape[1]:
                return a._mm(b)
            if isinstance(b, LayoutTensor) and _dense(a) and a.dim() in (1, 2) and a.shape[-1] == b.shape[0]:
                return b._rmm(a)
        if func is torch.nn.functional.linear:
            x, w = args[0], args[1] if len(args) > 1 else kwargs.get('weight')
            b = args[2] if len(args) > 2 else kwargs.get('bias')
            if isinstance(w, LayoutTensor) and _dense(x) and x.shape[-1] == w.shape[1] and \
                    not isinstance(b, LayoutTensor):
                return w.linear(x, b)
        layout = next(a.layout for a in list(args) + list(kwargs.values()) if isinstance(a, LayoutTensor))
        _fallback_warning(getattr(func, '__name__', str(func)), layout)
        dense = torch.utils._pytree.tree_map(lambda v: v.to_dense() if isinstance(v, LayoutTensor) else v,
                                             (args, kwargs))
        return func(*dense[0], **dense[1])


def _dense(v) -> bool:
    return isinstance(v, torch.Tensor) and v.layout == torch.strided
