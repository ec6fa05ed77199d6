"""Sparse products as torch custom operators, with backward rules derived by hand.

``sdfgsparse::spmm(crow, col, values, n_cols, X)`` is ``A @ X`` for the CSR matrix
``A = (crow, col, values)`` of ``n_cols`` columns and a dense 2-D ``X``. Its forward and
both gradients are sdfgsparse programs (compiled once per value and index dtype):

* ``dX = A.T @ G``                          (a transposed SpMM: CSR read as CSC, no copy)
* ``d values = (G @ X.T)`` at A's pattern    (an SDDMM over A's pattern, values one)

``sdfgsparse::sampled(crow, col, n_cols, G, X)`` is that SDDMM, ``(G @ X.T)`` at the
pattern, as an operator of its own (attention's scores); its gradient ``D`` (on the
pattern) gives ``dG = D @ X`` and ``dX = D.T @ G``, SpMMs again.

``sdfgsparse::softmax(crow, col, values, n_cols)`` is the row-wise softmax over the stored
entries (``ss.softmax``); its backward ``sdfgsparse::softmax_grad`` is a DaCe program of
its own: ``dv = P * (dP - rowsum(P * dP))`` per row, rows in parallel.

Being ``torch.library.custom_op`` operators with ``register_autograd``, they work with
``torch.autograd.gradcheck``, torch's optimizers, and ``torch.export``.

:func:`run_with_autograd` runs an exported ATen graph in torch with these operators in
place of torch's sparse products, ``sparse_sampled_addmm`` and ``_sparse_softmax`` (the
matrices between them kept as a pattern and values that autograd follows): the training
path of :class:`sdfgsparse.frontends.torch.CompiledModel`.
"""
import threading
from typing import Any, Dict, List, NamedTuple, Optional

import torch

from sdfgsparse import errors

__all__ = ['spmm', 'spmm_t', 'sampled', 'softmax', 'softmax_grad', 'sparse_mm', 'run_with_autograd']

aten = torch.ops.aten
_LOCK = threading.Lock()
_PROGRAMS: Dict[Any, Any] = {}


class _Programs(NamedTuple):
    spmm: Any
    spmm_t: Any
    sampled: Any
    softmax: Any
    softmax_grad: Any


def _programs(vdtype: torch.dtype, idtype: torch.dtype) -> _Programs:
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

    @dace.program
    def ss_torch_softmax(A: A_t):
        return ss.softmax(A, axis=1)

    NNZ = dace.symbol('NNZ')
    zero = vt.type(0)

    @dace.program
    def ss_torch_softmax_grad(crow: it[M + 1], P: vt[NNZ], dP: vt[NNZ]):
        # d v_q = P_q (dP_q - sum over the row of P dP): the softmax's Jacobian, row by row
        out = np.empty_like(P)
        for i in dace.map[0:M]:
            s = zero
            for q in range(crow[i], crow[i + 1]):
                s = s + P[q] * dP[q]
            for q in range(crow[i], crow[i + 1]):
                out[q] = P[q] * (dP[q] - s)
        return out

    return _Programs(ss_torch_spmm, ss_torch_spmm_t, ss_torch_sampled, ss_torch_softmax, ss_torch_softmax_grad)


def _csr(crow, col, values, n_cols: int):
    return torch.sparse_csr_tensor(crow, col, values, (crow.numel() - 1, n_cols), dtype=values.dtype,
                                   check_invariants=False)


def _values_on_pattern(op: str, result, col) -> torch.Tensor:
    """The values of a program's sparse result that keeps the pattern of ``col`` (a
    torch or scipy CSR matrix), in the pattern's order; anything else is a bug."""
    out = result.values() if isinstance(result, torch.Tensor) else torch.as_tensor(result.data)
    if out.shape[0] != col.shape[0]:
        raise errors.ShapeError(f'sdfgsparse::{op}: {out.shape[0]} values for {col.shape[0]} entries')
    return out


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
    fwd = _programs(values.dtype, crow.dtype).spmm
    return torch.as_tensor(fwd(_csr(crow, col, values, n_cols), X.detach().contiguous()))


@spmm.register_fake
def _(crow, col, values, n_cols, X):
    return X.new_empty((crow.shape[0] - 1, X.shape[1]))


@torch.library.custom_op('sdfgsparse::spmm_t', mutates_args=())
def spmm_t(crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor, n_cols: int, G: torch.Tensor) -> torch.Tensor:
    """``A.T @ G`` (the gradient of :func:`spmm` with respect to ``X``)."""
    fwd_t = _programs(values.dtype, crow.dtype).spmm_t
    return torch.as_tensor(fwd_t(_csr(crow, col, values, n_cols), G.detach().contiguous()))


@spmm_t.register_fake
def _(crow, col, values, n_cols, G):
    return G.new_empty((n_cols, G.shape[1]))


@torch.library.custom_op('sdfgsparse::sampled', mutates_args=())
def sampled(crow: torch.Tensor, col: torch.Tensor, n_cols: int, G: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """``(G @ X.T)`` at the entries of the pattern ``(crow, col)``, in its order (the
    gradient of :func:`spmm` with respect to ``values``)."""
    if G.dim() != 2 or X.dim() != 2 or G.shape[1] != X.shape[1] or X.shape[0] != n_cols or G.dtype != X.dtype:
        raise errors.ShapeError(f'sdfgsparse::sampled: G {tuple(G.shape)} {G.dtype} and X {tuple(X.shape)} {X.dtype} '
                                f'for a pattern of {crow.numel() - 1} x {n_cols} (G @ X.T at the pattern)')
    fwd_s = _programs(G.dtype, crow.dtype).sampled
    ones = torch.ones(col.shape[0], dtype=G.dtype)
    S = fwd_s(_csr(crow, col, ones, n_cols), G.detach().contiguous(), X.detach().t().contiguous())
    return _values_on_pattern('sampled', S, col)


@sampled.register_fake
def _(crow, col, n_cols, G, X):
    return G.new_empty((col.shape[0], ))


def _setup_sampled(ctx, inputs, output):
    crow, col, n_cols, G, X = inputs
    ctx.save_for_backward(crow, col, G, X)
    ctx.n_cols = n_cols


def _backward_sampled(ctx, D):
    # D: the gradient of the sampled values, a CSR matrix on the pattern:
    # dG = D @ X, dX = D.T @ G (both sdfgsparse SpMMs)
    crow, col, G, X = ctx.saved_tensors
    d_G = spmm(crow, col, D, ctx.n_cols, X) if ctx.needs_input_grad[3] else None
    d_X = spmm_t(crow, col, D, ctx.n_cols, G) if ctx.needs_input_grad[4] else None
    return None, None, None, d_G, d_X


sampled.register_autograd(_backward_sampled, setup_context=_setup_sampled)


@torch.library.custom_op('sdfgsparse::softmax', mutates_args=())
def softmax(crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor, n_cols: int) -> torch.Tensor:
    """The row-wise softmax over the stored entries of the CSR matrix ``(crow, col,
    values)``: its values, in the pattern's order (torch's ``sparse.softmax(A, 1)``)."""
    fwd = _programs(values.dtype, crow.dtype).softmax
    P = fwd(_csr(crow, col, values.detach(), n_cols))
    return _values_on_pattern('softmax', P, col)


@softmax.register_fake
def _(crow, col, values, n_cols):
    return values.new_empty(values.shape)


@torch.library.custom_op('sdfgsparse::softmax_grad', mutates_args=())
def softmax_grad(crow: torch.Tensor, P: torch.Tensor, dP: torch.Tensor) -> torch.Tensor:
    """The gradient of :func:`softmax`'s input values, given its output ``P`` and the
    output's gradient ``dP``: ``P * (dP - rowsum(P * dP))``."""
    grad = _programs(P.dtype, crow.dtype).softmax_grad
    return torch.as_tensor(grad(crow.contiguous(), P.detach().contiguous(), dP.detach().contiguous()))


@softmax_grad.register_fake
def _(crow, P, dP):
    return P.new_empty(P.shape)


def _setup_softmax(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], output)


def _backward_softmax(ctx, dP):
    crow, P = ctx.saved_tensors
    return None, None, softmax_grad(crow, P, dP) if ctx.needs_input_grad[2] else None, None


softmax.register_autograd(_backward_softmax, setup_context=_setup_softmax)


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


class _OnPattern:
    """A sparse matrix of the training path: a CSR pattern and values (a dense tensor that
    autograd follows through the custom operators), standing for the torch tensor of
    ``layout`` the graph computes there (its COO form is the same entries in the same
    order: CSR's, sorted). An operation without a replacement gets :meth:`tensor`."""

    def __init__(self, crow, col, values, shape, layout):
        self.crow, self.col, self.values, self.shape, self.layout = crow, col, values, tuple(shape), layout

    def with_values(self, values, layout=None) -> '_OnPattern':
        return _OnPattern(self.crow, self.col, values, self.shape, layout or self.layout)

    def tensor(self) -> torch.Tensor:
        if self.layout == torch.sparse_csr:
            return torch.sparse_csr_tensor(self.crow, self.col, self.values, self.shape, check_invariants=False)
        rows = torch.repeat_interleave(torch.arange(self.shape[0], dtype=self.col.dtype), self.crow.diff())
        return torch.sparse_coo_tensor(torch.stack((rows, self.col)), self.values, self.shape, is_coalesced=True,
                                       check_invariants=False)

    @staticmethod
    def of(v) -> Optional['_OnPattern']:
        """``v`` as a pattern and values: itself, a CSR tensor (its values; gradients reach
        them when it requires one), or None."""
        if isinstance(v, _OnPattern):
            return v
        if isinstance(v, torch.Tensor) and v.layout == torch.sparse_csr and v.dim() == 2:
            return _OnPattern(v.crow_indices(), v.col_indices(), v.values(), v.shape, torch.sparse_csr)
        return None


def sparse_mm(A, X: torch.Tensor) -> torch.Tensor:
    """``A @ X`` through :func:`spmm` for a CSR ``A`` (gradients reach ``A.values()``
    when ``A`` requires them, and ``X``); 1-D ``X`` is a matrix-vector product."""
    A = _OnPattern.of(A)
    vec = X.dim() == 1
    Y = spmm(A.crow, A.col, A.values, A.shape[1], X.unsqueeze(1) if vec else X)
    return Y.squeeze(1) if vec else Y


def _dense(v) -> bool:
    return isinstance(v, torch.Tensor) and v.layout == torch.strided


_TO_LAYOUT = {aten.to_sparse_csr.default: torch.sparse_csr, aten.to_sparse.default: torch.sparse_coo}


def _replacement(node, args, kwargs):
    """The custom-operator form of ``node`` with these arguments, or None."""
    t = node.target
    if t in (aten._sparse_mm.default, aten.mm.default, aten.matmul.default) and not kwargs:
        A, X = _OnPattern.of(args[0]), args[1]
        if A is not None and _dense(X) and X.dim() in (1, 2):
            return sparse_mm(A, X)
    if t == aten.addmm.default and _OnPattern.of(args[1]) is not None and _dense(args[2]):
        beta, alpha = kwargs.get('beta', 1), kwargs.get('alpha', 1)
        return beta * args[0] + alpha * sparse_mm(args[1], args[2])
    if t == aten.linear.default and _OnPattern.of(args[1]) is not None and _dense(args[0]) and args[0].dim() == 2:
        y = sparse_mm(args[1], args[0].t()).t()
        return y + args[2] if len(args) > 2 and args[2] is not None else y
    if t == aten.sparse_sampled_addmm.default:
        S = _OnPattern.of(args[0])
        G, XT = args[1], args[2]
        if S is not None and _dense(G) and _dense(XT) and G.dim() == XT.dim() == 2:
            beta, alpha = kwargs.get('beta', 1), kwargs.get('alpha', 1)
            v = sampled(S.crow, S.col, S.shape[1], G, XT.t())
            v = v if alpha == 1 else alpha * v
            return S.with_values(v if beta == 0 else beta * S.values + v)
    if t in _TO_LAYOUT and isinstance(args[0], _OnPattern) and not kwargs:
        return args[0].with_values(args[0].values, _TO_LAYOUT[t])
    if t == aten._sparse_softmax.int and isinstance(args[0], _OnPattern) and args[1] in (1, -1):
        if len(args) < 3 or not args[2]:  # half_to_float
            S = args[0]
            return S.with_values(softmax(S.crow, S.col, S.values, S.shape[1]))
    return None


def run_with_autograd(graph, env: Dict[str, Any], outputs: List[str]):
    """Run the ATen ``graph`` in torch on the values in ``env`` (placeholder name ->
    tensor), products with sparse CSR matrices, sampled products and sparse softmaxes
    through the custom operators above (their values followed by autograd); returns the
    outputs."""
    env = dict(env)

    def value(n):
        return env[n.name]

    for node in graph.nodes:
        if node.op != 'call_function':
            continue
        args = torch.fx.node.map_arg(node.args, value)
        kwargs = torch.fx.node.map_arg(node.kwargs, value)
        out = _replacement(node, args, kwargs)
        if out is None:
            args, kwargs = torch.utils._pytree.tree_map(_as_tensor, (args, kwargs))
            out = node.target(*args, **kwargs)
        env[node.name] = out
    outs = [_as_tensor(env[name]) for name in outputs]
    return outs[0] if len(outs) == 1 else tuple(outs)


def _as_tensor(v):
    return v.tensor() if isinstance(v, _OnPattern) else v
