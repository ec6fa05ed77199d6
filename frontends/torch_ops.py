"""Sparse products as torch custom operators, with backward rules derived by hand.

``sdfgsparse::spmm(crow, col, values, n_cols, X)`` is ``A @ X`` for the CSR matrix
``A = (crow, col, values)`` of ``n_cols`` columns and a dense 2-D ``X``. Its forward and
both gradients are sdfgsparse programs (compiled once per value and index dtype):

* ``dX = A.T @ G``                          (a transposed SpMM: CSR read as CSC, no copy)
* ``d values = (G @ X.T)`` at A's pattern    (an SDDMM over A's pattern, values one)

Being a ``torch.library.custom_op`` with ``register_autograd``, it works with
``torch.autograd.gradcheck``, torch's optimizers, and ``torch.export``.

:func:`run_with_autograd` runs an exported ATen graph in torch with every product of a
sparse CSR matrix by a dense matrix replaced by the operator: the training path of
:class:`sdfgsparse.frontends.torch.CompiledModel`.
"""
import threading
from typing import Any, Dict, List

import torch

from sdfgsparse import errors

__all__ = ['spmm', 'spmm_t', 'sampled', 'sparse_mm', 'run_with_autograd']

aten = torch.ops.aten
_LOCK = threading.Lock()
_PROGRAMS: Dict[Any, Any] = {}


def _programs(vdtype: torch.dtype, idtype: torch.dtype):
    """The forward and backward programs for one value and index dtype (built once)."""
    key = (vdtype, idtype)
    with _LOCK:
        if key not in _PROGRAMS:
            _PROGRAMS[key] = _build(vdtype, idtype)
        return _PROGRAMS[key]


def _build(vdtype: torch.dtype, idtype: torch.dtype):
    import dace
    import numpy as np
    import sdfgsparse as ss
    vt = {torch.float32: dace.float32, torch.float64: dace.float64}[vdtype]
    it = {torch.int32: dace.int32, torch.int64: dace.int64}[idtype]
    M, N, K = dace.symbol('M'), dace.symbol('N'), dace.symbol('K')
    A_t = ss.CSR[vt, M, N, it]

    @dace.program
    def ss_torch_spmm(A: A_t, X: vt[N, K]):
        return A @ X

    @dace.program
    def ss_torch_spmm_t(A: A_t, G: vt[M, K]):
        return A.T @ G

    @dace.program
    def ss_torch_sampled(P: A_t, G: vt[M, K], XT: vt[K, N]):
        return ss.sddmm(P, G, XT)

    del np
    return ss_torch_spmm, ss_torch_spmm_t, ss_torch_sampled


def _csr(crow, col, values, n_cols: int):
    return torch.sparse_csr_tensor(crow, col, values, (crow.numel() - 1, n_cols), dtype=values.dtype)


def _check(crow, col, values, n_cols, X):
    if X.dim() != 2:
        raise errors.ShapeError(f'sdfgsparse::spmm: X must be 2-D, got {X.dim()}-D')
    if X.shape[0] != n_cols:
        raise errors.ShapeError(f'sdfgsparse::spmm: A has {n_cols} columns, X has {X.shape[0]} rows')
    if values.dtype != X.dtype:
        raise errors.DTypeError(f'sdfgsparse::spmm: A is {values.dtype}, X is {X.dtype}')


@torch.library.custom_op('sdfgsparse::spmm', mutates_args=())
def spmm(crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor, n_cols: int, X: torch.Tensor) -> torch.Tensor:
    """``A @ X`` for the CSR matrix ``A = (crow, col, values)`` with ``n_cols`` columns."""
    _check(crow, col, values, n_cols, X)
    fwd, _, _ = _programs(values.dtype, crow.dtype)
    return torch.as_tensor(fwd(_csr(crow, col, values, n_cols), X.detach().contiguous()))


@spmm.register_fake
def _(crow, col, values, n_cols, X):
    return X.new_empty((crow.shape[0] - 1, X.shape[1]))


@torch.library.custom_op('sdfgsparse::spmm_t', mutates_args=())
def spmm_t(crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor, n_cols: int, G: torch.Tensor) -> torch.Tensor:
    """``A.T @ G`` (the gradient of :func:`spmm` with respect to ``X``)."""
    _, fwd_t, _ = _programs(values.dtype, crow.dtype)
    return torch.as_tensor(fwd_t(_csr(crow, col, values, n_cols), G.detach().contiguous()))


@spmm_t.register_fake
def _(crow, col, values, n_cols, G):
    return G.new_empty((n_cols, G.shape[1]))


@torch.library.custom_op('sdfgsparse::sampled', mutates_args=())
def sampled(crow: torch.Tensor, col: torch.Tensor, n_cols: int, G: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """``(G @ X.T)`` at the entries of the pattern ``(crow, col)``, in its order (the
    gradient of :func:`spmm` with respect to ``values``)."""
    _, _, fwd_s = _programs(G.dtype, crow.dtype)
    ones = torch.ones(col.shape[0], dtype=G.dtype)
    S = fwd_s(_csr(crow, col, ones, n_cols), G.detach().contiguous(), X.detach().t().contiguous())
    out = S.values() if isinstance(S, torch.Tensor) else torch.as_tensor(S.data)
    if out.shape[0] != col.shape[0]:  # the result keeps the pattern; anything else is a bug
        raise errors.ShapeError(f'sdfgsparse::sampled: {out.shape[0]} values for {col.shape[0]} entries')
    return out


@sampled.register_fake
def _(crow, col, n_cols, G, X):
    return G.new_empty((col.shape[0], ))


def _setup(ctx, inputs, output):
    crow, col, values, n_cols, X = inputs
    ctx.save_for_backward(crow, col, values, X)
    ctx.n_cols = n_cols


def _backward(ctx, G):
    crow, col, values, X = ctx.saved_tensors
    d_values = d_X = None
    if ctx.needs_input_grad[4]:
        d_X = spmm_t(crow, col, values, ctx.n_cols, G)
    if ctx.needs_input_grad[2]:
        d_values = sampled(crow, col, ctx.n_cols, G, X)
    return None, None, d_values, None, d_X


spmm.register_autograd(_backward, setup_context=_setup)


def sparse_mm(A: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """``A @ X`` through :func:`spmm` for a CSR ``A`` (gradients reach ``A.values()``
    when ``A`` requires them, and ``X``); 1-D ``X`` is a matrix-vector product."""
    vec = X.dim() == 1
    Y = spmm(A.crow_indices(), A.col_indices(), A.values(), A.shape[1], X.unsqueeze(1) if vec else X)
    return Y.squeeze(1) if vec else Y


def _is_csr(v) -> bool:
    return isinstance(v, torch.Tensor) and v.layout == torch.sparse_csr


def _dense(v) -> bool:
    return isinstance(v, torch.Tensor) and v.layout == torch.strided


def _replacement(node, args, kwargs):
    """The custom-operator form of ``node`` with these arguments, or None."""
    t = node.target
    if t in (aten._sparse_mm.default, aten.mm.default, aten.matmul.default) and not kwargs:
        A, X = args[0], args[1]
        if _is_csr(A) and _dense(X) and X.dim() in (1, 2):
            return sparse_mm(A, X)
    if t == aten.addmm.default and _is_csr(args[1]) and _dense(args[2]):
        beta, alpha = kwargs.get('beta', 1), kwargs.get('alpha', 1)
        return beta * args[0] + alpha * sparse_mm(args[1], args[2])
    if t == aten.linear.default and _is_csr(args[1]) and _dense(args[0]) and args[0].dim() == 2:
        y = sparse_mm(args[1], args[0].t()).t()
        return y + args[2] if len(args) > 2 and args[2] is not None else y
    return None


def run_with_autograd(graph, env: Dict[str, Any], outputs: List[str]):
    """Run the ATen ``graph`` in torch on the values in ``env`` (placeholder name ->
    tensor), sparse products through :func:`spmm`; returns the outputs."""
    env = dict(env)
    for node in graph.nodes:
        if node.op != 'call_function':
            continue
        args = torch.fx.node.map_arg(node.args, lambda n: env[n.name])
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[n.name])
        out = _replacement(node, args, kwargs)
        env[node.name] = node.target(*args, **kwargs) if out is None else out
    outs = [env[name] for name in outputs]
    return outs[0] if len(outs) == 1 else tuple(outs)
