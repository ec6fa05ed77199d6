"""Products with a weight in any catalogue layout, as torch custom operators.

torch has no n:m or V:N:M layout, so a weight in one of sdfgsparse's layouts travels as
its storage: the index members (``crd3`` of ``ss.NM[2, 4]``, ``pos1``/``crd1`` of CSR, ...)
and the values, a dense 1-D tensor that autograd and every torch optimizer follow.

``sdfgsparse::layout_mm(fmt, rows, cols, index, values, X)`` is ``A @ X`` for the matrix
``A`` of format ``fmt`` (a catalogue name: ``'NM2_4'``, ``'CSR'``); its gradients are
sdfgsparse programs too:

* ``dX = A.T @ G``                               (the transposed view, no copy)
* ``d values = (G @ X.T)`` at A's value slots     (an SDDMM, in storage order; the stored
  zeros of an n:m group are slots and get their gradient as well)

``sdfgsparse::layout_mm_epilogue`` is the inference form with the bias (per row of the
result) and the activation fused into the product's kernel (``ss.optimize``'s
``SparseEpilogueFusion``): no autograd.

A layout's storage is checked (:func:`sdfgsparse.runtime.marshal.validate_storage`) the
first time it is seen and again whenever an index tensor is modified in place (torch's
version counter), not on every call.
"""
import collections
import threading
from typing import Any, Dict, List, Tuple

import numpy as np
import torch

from sdfgsparse import errors
from sdfgsparse.formats import get_format
from sdfgsparse.formats.levels import Compressed
from sdfgsparse.runtime.container import SparseMatrix
from sdfgsparse.runtime.convert import scipy_members
from sdfgsparse.runtime.marshal import _sizes as storage_sizes
from sdfgsparse.runtime.marshal import validate_storage

__all__ = ['layout_mm', 'layout_mm_t', 'layout_sampled', 'layout_mm_epilogue', 'layout_bmm_epilogue', 'matrix_of',
           'ACTIVATIONS']

_LOCK = threading.Lock()
_PROGRAMS: Dict[Any, Any] = {}
#: index storages already checked: (format, shape, (pointer, version, size) per tensor)
_CHECKED: 'collections.OrderedDict[tuple, bool]' = collections.OrderedDict()
_CHECKED_MAX = 256

#: activations a fused product applies after its bias
ACTIVATIONS = ('none', 'relu')


def _check_activation(activation: str) -> None:
    if activation not in ACTIVATIONS:
        raise errors.ArgumentError(f'sdfgsparse layouts: activation must be one of {ACTIVATIONS}, got {activation!r}')


def _typeclasses(vdtype: torch.dtype, idtype: torch.dtype):
    import dace
    try:
        vt = {torch.float32: dace.float32, torch.float64: dace.float64}[vdtype]
        it = {torch.int32: dace.int32, torch.int64: dace.int64}[idtype]
    except KeyError:
        raise errors.DTypeError(f'sdfgsparse layouts: values must be float32 or float64 and indices int32 or int64, '
                                f'got {vdtype} and {idtype}') from None
    return vt, it


def _program(kind: str, fmt_name: str, vdtype: torch.dtype, idtype: torch.dtype, activation: str = 'none'):
    """The program of ``kind`` for one format and dtype pair (built once, optimised)."""
    key = (kind, fmt_name, vdtype, idtype, activation)
    with _LOCK:
        if key not in _PROGRAMS:
            _PROGRAMS[key] = _build(*key)
        return _PROGRAMS[key]


def _build(kind, fmt_name, vdtype, idtype, activation):
    import dace
    import sdfgsparse as ss
    vt, it = _typeclasses(vdtype, idtype)
    fmt = ss.formats.get_format(fmt_name)
    M, N, K = dace.symbol('M'), dace.symbol('N'), dace.symbol('K')
    A_t = fmt[vt, M, N, it]
    zero = vt.type(0)

    if kind == 'mm':

        @dace.program
        def ss_layout_mm(A: A_t, X: vt[N, K]):
            return A @ X

        return ss_layout_mm
    if kind == 'mm_t':

        @dace.program
        def ss_layout_mm_t(A: A_t, G: vt[M, K]):
            return A.T @ G

        return ss_layout_mm_t
    if kind == 'sampled':

        @dace.program
        def ss_layout_sampled(A: A_t, G: vt[M, K], XT: vt[K, N]):
            return ss.sddmm(A, G, XT)

        return ss_layout_sampled
    if kind == 'bmm_bias':  # one product per image of a batch (a pointwise convolution, NCHW)
        NB = dace.symbol('NB')
        if activation == 'relu':

            @dace.program
            def ss_layout_bmm_bias_relu(A: A_t, X: vt[NB, N, K], b: vt[M]):
                Y = np.empty((NB, M, K), dtype=vt.type)
                for i in range(NB):
                    Y[i] = np.maximum(A @ X[i] + b[:, np.newaxis], zero)
                return Y

            return ss.optimize(ss_layout_bmm_bias_relu)

        @dace.program
        def ss_layout_bmm_bias(A: A_t, X: vt[NB, N, K], b: vt[M]):
            Y = np.empty((NB, M, K), dtype=vt.type)
            for i in range(NB):
                Y[i] = A @ X[i] + b[:, np.newaxis]
            return Y

        return ss.optimize(ss_layout_bmm_bias)
    if activation == 'relu':

        @dace.program
        def ss_layout_mm_bias_relu(A: A_t, X: vt[N, K], b: vt[M]):
            return np.maximum(A @ X + b[:, np.newaxis], zero)

        return ss.optimize(ss_layout_mm_bias_relu)

    @dace.program
    def ss_layout_mm_bias(A: A_t, X: vt[N, K], b: vt[M]):
        return A @ X + b[:, np.newaxis]

    return ss.optimize(ss_layout_mm_bias)


def matrix_of(fmt_name: str, rows: int, cols: int, index: List[torch.Tensor], values: torch.Tensor):
    """The :class:`~sdfgsparse.SparseMatrix` over these tensors (no copies), its storage
    checked once per version of the index tensors."""
    fmt = get_format(fmt_name)
    names = [m for m in fmt.member_names if m != 'vals']
    if len(index) != len(names):
        raise errors.ArgumentError(f'sdfgsparse layouts: {fmt!r} has index members {names}, got {len(index)} tensors')
    for name, t in zip(names, index):
        if not isinstance(t, torch.Tensor) or t.dim() != 1 or t.dtype not in (torch.int32, torch.int64):
            raise errors.ArgumentError(f'sdfgsparse layouts: index member {name} must be a 1-D int32 or int64 tensor')
    if values.dim() != 1:
        raise errors.ShapeError(f'sdfgsparse layouts: values must be 1-D, got shape {tuple(values.shape)}')
    arrays = {name: t.detach().contiguous().numpy() for name, t in zip(names, index)}
    arrays['vals'] = values.detach().contiguous().numpy()
    m = SparseMatrix(fmt, arrays, (rows, cols))
    key = (fmt_name, rows, cols, values.numel()) + tuple((t.data_ptr(), t._version, t.numel()) for t in index)
    with _LOCK:
        seen = key in _CHECKED
        if seen:
            _CHECKED.move_to_end(key)
    if not seen:
        validate_storage(fmt, arrays, (rows, cols), storage_sizes(fmt, arrays, (rows, cols)), 'A')
        with _LOCK:
            _CHECKED[key] = True
            while len(_CHECKED) > _CHECKED_MAX:
                _CHECKED.popitem(last=False)
    m._ss_checked = True
    return m


def _dense(name: str, X: torch.Tensor, dtype: torch.dtype, of: str = 'the weight') -> np.ndarray:
    """``X`` as a C-ordered NumPy array, after checking that it is a dense 2-D tensor of
    ``dtype`` (``of``: what sets that dtype, for the error)."""
    if not isinstance(X, torch.Tensor) or X.layout != torch.strided:
        raise errors.ArgumentError(f'sdfgsparse layouts: {name} must be a dense 2-D tensor, got '
                                   f'{type(X).__name__ if not isinstance(X, torch.Tensor) else X.layout}')
    if X.dim() != 2:
        raise errors.ShapeError(f'sdfgsparse layouts: {name} must be 2-D, got shape {tuple(X.shape)}')
    if X.dtype != dtype:
        raise errors.DTypeError(f'sdfgsparse layouts: {name} is {X.dtype}, {of} is {dtype}')
    return X.detach().contiguous().numpy()


@torch.library.custom_op('sdfgsparse::layout_mm', mutates_args=())
def layout_mm(fmt: str, rows: int, cols: int, index: List[torch.Tensor], values: torch.Tensor,
              X: torch.Tensor) -> torch.Tensor:
    """``A @ X`` for the matrix ``A`` of format ``fmt`` stored as ``index`` and ``values``."""
    A = matrix_of(fmt, rows, cols, index, values)
    x = _dense('X', X, values.dtype)
    if X.shape[0] != cols:
        raise errors.ShapeError(f'sdfgsparse::layout_mm: A is {rows} x {cols}, X has shape {tuple(X.shape)}')
    prog = _program('mm', fmt, values.dtype, index[0].dtype)
    return torch.as_tensor(prog(A, x))


@layout_mm.register_fake
def _(fmt, rows, cols, index, values, X):
    return X.new_empty((rows, X.shape[1]))


@torch.library.custom_op('sdfgsparse::layout_mm_t', mutates_args=())
def layout_mm_t(fmt: str, rows: int, cols: int, index: List[torch.Tensor], values: torch.Tensor,
                G: torch.Tensor) -> torch.Tensor:
    """``A.T @ G`` (the gradient of :func:`layout_mm` with respect to ``X``)."""
    A = matrix_of(fmt, rows, cols, index, values)
    g = _dense('G', G, values.dtype)
    if G.shape[0] != rows:
        raise errors.ShapeError(f'sdfgsparse::layout_mm_t: A is {rows} x {cols}, G has shape {tuple(G.shape)}')
    prog = _program('mm_t', fmt, values.dtype, index[0].dtype)
    return torch.as_tensor(prog(A, g))


@layout_mm_t.register_fake
def _(fmt, rows, cols, index, values, G):
    return G.new_empty((cols, G.shape[1]))


@torch.library.custom_op('sdfgsparse::layout_sampled', mutates_args=())
def layout_sampled(fmt: str, rows: int, cols: int, index: List[torch.Tensor], G: torch.Tensor,
                   X: torch.Tensor) -> torch.Tensor:
    """``(G @ X.T)`` at every value slot of the layout, in storage order (the gradient of
    :func:`layout_mm` with respect to ``values``)."""
    g = _dense('G', G, getattr(G, 'dtype', None))
    x = _dense('X', X, G.dtype, of='G')
    if G.shape[0] != rows or X.shape[0] != cols or G.shape[1] != X.shape[1]:
        raise errors.ShapeError(f'sdfgsparse::layout_sampled: G {tuple(G.shape)} and X {tuple(X.shape)} for a '
                                f'{rows} x {cols} layout (G @ X.T at its slots)')
    nvals = value_slots(fmt, rows, cols, index)
    # the slots' ones from NumPy: its buffer takes huge pages, torch.ones' 4 KiB faults cost 2x
    A = matrix_of(fmt, rows, cols, index, torch.from_numpy(np.ones(nvals, dtype=g.dtype)))
    prog = _program('sampled', fmt, G.dtype, index[0].dtype)
    S = prog(A, g, x.T.copy())
    vals = S.arrays['vals'] if hasattr(S, 'arrays') else S.data
    if vals.shape[0] != nvals:
        raise errors.ShapeError(f'sdfgsparse::layout_sampled: {vals.shape[0]} values for {nvals} slots')
    return torch.as_tensor(np.ascontiguousarray(vals))


@layout_sampled.register_fake
def _(fmt, rows, cols, index, G, X):
    return G.new_empty((value_slots(fmt, rows, cols, index), ))


def value_slots(fmt_name: str, rows: int, cols: int, index: List[torch.Tensor]) -> int:
    """Number of value slots of a layout with these index tensors (format member order)."""
    fmt = get_format(fmt_name)
    names = [m for m in fmt.member_names if m != 'vals']
    members = dict(zip(names, index))
    sizes = {f'n{k}': members[f'crd{k}'].shape[0] for k, lvl in enumerate(fmt.levels) if isinstance(lvl, Compressed)}
    if set(fmt.size_keys) - set(sizes):
        raise errors.UnsupportedOperationError(f'sdfgsparse layouts: {fmt!r} sizes its values by more than its '
                                               'index members; use CSR, COO, BSR or a structured layout')
    return int(fmt.counts((rows, cols), sizes)[-1])


def _setup(ctx, inputs, output):
    fmt, rows, cols, index, values, X = inputs
    ctx.save_for_backward(values, X, *index)
    ctx.layout = (fmt, rows, cols)


def _backward(ctx, G):
    values, X, *index = ctx.saved_tensors
    fmt, rows, cols = ctx.layout
    G = G.contiguous()
    d_values = layout_sampled(fmt, rows, cols, index, G, X) if ctx.needs_input_grad[4] else None
    d_X = layout_mm_t(fmt, rows, cols, index, values, G) if ctx.needs_input_grad[5] else None
    return None, None, None, [None] * len(index), d_values, d_X


layout_mm.register_autograd(_backward, setup_context=_setup)


def _backward_t(ctx, dY):
    # Y = A.T @ G: dG = A @ dY, d values = (G @ dY.T) at A's slots
    values, G, *index = ctx.saved_tensors
    fmt, rows, cols = ctx.layout
    dY = dY.contiguous()
    d_values = layout_sampled(fmt, rows, cols, index, G, dY) if ctx.needs_input_grad[4] else None
    d_G = layout_mm(fmt, rows, cols, index, values, dY) if ctx.needs_input_grad[5] else None
    return None, None, None, [None] * len(index), d_values, d_G


layout_mm_t.register_autograd(_backward_t, setup_context=_setup)


def layout_mm_epilogue(fmt: str, rows: int, cols: int, index: List[torch.Tensor], values: torch.Tensor,
                       X: torch.Tensor, bias: torch.Tensor, activation: str = 'none') -> torch.Tensor:
    """``activation(A @ X + bias[:, None])`` in one kernel (inference: no gradient)."""
    _check_activation(activation)
    A = matrix_of(fmt, rows, cols, index, values)
    if X.dim() != 2 or X.shape[0] != cols:
        raise errors.ShapeError(f'sdfgsparse layouts: A is {rows} x {cols}, X has shape {tuple(X.shape)}')
    if bias.dim() != 1 or bias.shape[0] != rows:
        raise errors.ShapeError(f'sdfgsparse layouts: bias has shape {tuple(bias.shape)}, expected ({rows},)')
    prog = _program('mm_bias', fmt, values.dtype, index[0].dtype, activation)
    return torch.as_tensor(prog(A, _dense('X', X, values.dtype), bias.detach().contiguous().numpy()))


def layout_bmm_epilogue(fmt: str, rows: int, cols: int, index: List[torch.Tensor], values: torch.Tensor,
                        X: torch.Tensor, bias: torch.Tensor, activation: str = 'none') -> torch.Tensor:
    """``activation(A @ X[i] + bias[:, None])`` for each ``i`` of a 3-D ``X`` (one program
    call for the batch; inference: no gradient)."""
    _check_activation(activation)
    A = matrix_of(fmt, rows, cols, index, values)
    if X.dim() != 3 or X.shape[1] != cols or X.dtype != values.dtype:
        raise errors.ShapeError(f'sdfgsparse layouts: A is {rows} x {cols} {values.dtype}, X is {tuple(X.shape)} '
                                f'{X.dtype} (expected [batch, {cols}, k])')
    if bias.dim() != 1 or bias.shape[0] != rows:
        raise errors.ShapeError(f'sdfgsparse layouts: bias has shape {tuple(bias.shape)}, expected ({rows},)')
    prog = _program('bmm_bias', fmt, values.dtype, index[0].dtype, activation)
    return torch.as_tensor(prog(A, X.detach().contiguous().numpy(), bias.detach().contiguous().numpy()))


def storage_tensors(S) -> Tuple[List[torch.Tensor], torch.Tensor]:
    """The index tensors (format member order) and the values of a host matrix ``S``
    (:class:`~sdfgsparse.SparseMatrix`, or scipy of a twin format), as torch tensors."""
    if hasattr(S, 'arrays'):
        arrays, fmt = S.arrays, S.format
    else:
        fmt = get_format(S.format.upper())
        arrays = scipy_members(S, fmt)
    names = [m for m in fmt.member_names if m != 'vals']
    return [torch.from_numpy(np.ascontiguousarray(arrays[m])) for m in names], torch.from_numpy(
        np.ascontiguousarray(arrays['vals']))
