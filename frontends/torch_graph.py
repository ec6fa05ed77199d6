"""An exported ATen graph as SDFGs (``ss.torch.compile``).

Every ATen node gets a *value*: its kind (dense or a sparse format), dtype and
dimensions. Dimensions are :class:`Dims` classes: user inputs' sizes are free symbols,
parameters' sizes are numbers, and each operation unifies the dimensions it needs equal
(``mm``: ``a.shape[1] == b.shape[0]``), so the SDFG has as few symbols as the model
allows and any input size that satisfies the model runs without recompiling. A
translation (:data:`TRANSLATIONS`) turns a node into an expression of the operations of
:mod:`frontends.torch_sdfg` (``Call('matmul', (Ref('a'), Ref('x')))``: the NumPy
vocabulary of ``@dace.program`` and sdfgsparse) or raises :class:`Untranslatable` with the
reason; the node then runs in torch (a graph break) or the compile fails, per ``fallback``.

Sparse values: CSR and CSC matrices, COO tensors of any rank (2 and up). torch keeps the
sums of a sparse COO tensor sparse; the program computes them dense and the segment hands
torch a COO tensor (:func:`_sparse_sum`); a later node that torch would compute sparse from
such a value is not translated.

Consecutive translatable nodes form a :class:`Segment`: one SDFG, whose arguments are the
values it reads from before it and whose results are the values read after it;
:func:`translate` builds it (:class:`_Emitter`, :class:`~frontends.torch_sdfg.Builder`).
"""
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import dace
import torch

import sdfgsparse as ss
from sdfgsparse import errors
from sdfgsparse.formats import get_format, is_sparse_desc
from sdfgsparse.frontends.torch_sdfg import Builder, Call, Num, Ref, SizeDims, binary, describe

__all__ = ['Segment', 'plan_segments', 'translate', 'Untranslatable', 'TRANSLATIONS']

aten = torch.ops.aten


class Untranslatable(Exception):
    """A node this frontend does not translate (the message says why)."""


# ---------------------------------------------------------------------- dimensions
class Dims:
    """Union-find over dimensions: a dimension is a symbol until unified with a number."""

    def __init__(self):
        self.parent: Dict[str, str] = {}
        self.value: Dict[str, int] = {}  # root -> fixed size
        self.example: Dict[str, int] = {}  # symbol -> size in the example inputs

    def new(self, example: int) -> str:
        name = f'S{len(self.parent)}'
        self.parent[name] = name
        self.example[name] = int(example)
        return name

    def find(self, d):
        if isinstance(d, int):
            return d
        while self.parent[d] != d:
            self.parent[d] = self.parent[self.parent[d]]
            d = self.parent[d]
        return self.value.get(d, d)

    def unify(self, a, b, what: str) -> None:
        a, b = self.find(a), self.find(b)
        if a == b:
            return
        if isinstance(a, int) and isinstance(b, int):
            raise Untranslatable(f'{what}: sizes {a} and {b} differ')
        if isinstance(a, int):
            a, b = b, a
        if isinstance(b, int):
            self.value[a] = b
        else:
            self.parent[a] = b

    def resolve(self, dims: Sequence) -> Tuple:
        return tuple(self.find(d) for d in dims)


@dataclass
class Value:
    """What the program knows of a tensor: dense or a sparse format, dtype, dimensions."""
    kind: str  # 'dense', 'CSR', 'CSC' (matrices), 'COO' (of any rank: len(dims))
    dtype: torch.dtype
    dims: Tuple
    index_dtype: Optional[torch.dtype] = None

    @property
    def sparse(self) -> bool:
        return self.kind != 'dense'


_LAYOUTS = {torch.strided: 'dense', torch.sparse_csr: 'CSR', torch.sparse_csc: 'CSC', torch.sparse_coo: 'COO'}
_DTYPES = {torch.float32: 'float32', torch.float64: 'float64'}
_INDEX = {torch.int32: 'int32', torch.int64: 'int64'}


def _index_dtype(t) -> Optional[torch.dtype]:
    if t.layout == torch.sparse_csr:
        return t.crow_indices().dtype
    if t.layout == torch.sparse_csc:
        return t.ccol_indices().dtype
    if t.layout == torch.sparse_coo:
        return t._indices().dtype
    return None


# ---------------------------------------------------------------------- translations
class Context:
    """What a translation sees: its node's arguments as values or Python constants, and
    the dimensions."""

    def __init__(self, dims: Dims, values: Dict[str, Value], node, layouts: Optional[Dict[str, str]] = None):
        self.dims, self.values, self.node = dims, values, node
        self.layouts = layouts if layouts is not None else {}
        #: set by a translation whose dense value stands for torch's sparse COO result (a
        #: sum of a sparse tensor): the segment hands torch the COO layout
        self.dense_as_coo = False

    def held_dense(self, a) -> bool:
        """Whether the program holds ``a`` dense where torch holds it as a sparse COO
        tensor (a sum of a sparse tensor: :func:`_sparse_sum`)."""
        return self.is_tensor(a) and not self.values[a.name].sparse and self.layouts.get(a.name) == 'COO'

    def arg(self, k: int, default=None):
        args = self.node.args
        return args[k] if k < len(args) else default

    def value(self, a) -> Value:
        if not isinstance(a, torch.fx.Node) or a.name not in self.values:
            raise Untranslatable(f'argument {a!r} is not a tensor')
        return self.values[a.name]

    def expr(self, a):
        """``a`` in an expression: a value, or a Python number."""
        if isinstance(a, torch.fx.Node):
            self.value(a)
            return Ref(a.name)
        if isinstance(a, bool) or not isinstance(a, (int, float)):
            raise Untranslatable(f'argument {a!r} is neither a tensor nor a number')
        return Num(a)

    def is_tensor(self, a) -> bool:
        return isinstance(a, torch.fx.Node) and a.name in self.values

    def same_dtype(self, *vals: Value) -> torch.dtype:
        dtypes = {v.dtype for v in vals}
        if len(dtypes) != 1:
            raise Untranslatable(f'mixed dtypes {sorted(map(str, dtypes))}')
        return vals[0].dtype


@dataclass
class LinearOfSparse:
    """``x @ W.T + b`` of a sparse ``W``: built feature-major (see :func:`_emit_step`)."""
    w: str
    x: str
    b: Optional[str]


def _dense(v: Value, what: str) -> Value:
    if v.sparse:
        raise Untranslatable(f'{what} of a sparse ({v.kind}) tensor')
    return v


def _broadcast(ctx: Context, a: Value, b: Value, what: str) -> Tuple:
    """The dimensions of ``a op b`` with NumPy broadcasting."""
    da, db = list(a.dims), list(b.dims)
    out = []
    for k in range(1, max(len(da), len(db)) + 1):
        x = ctx.dims.find(da[-k]) if k <= len(da) else 1
        y = ctx.dims.find(db[-k]) if k <= len(db) else 1
        if x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        else:
            ctx.dims.unify(x, y, what)
            out.append(x)
    return tuple(reversed(out))


def _matmul(ctx: Context, a, b, what: str):
    va, vb = ctx.value(a), ctx.value(b)
    dtype = ctx.same_dtype(va, vb)
    if len(va.dims) != 2 or len(vb.dims) not in (1, 2):
        raise Untranslatable(f'{what} of {len(va.dims)}-D by {len(vb.dims)}-D tensors (2-D by 1-D or 2-D only)')
    if va.sparse and vb.sparse and va.kind != vb.kind:
        raise Untranslatable(f'{what} of {va.kind} by {vb.kind}')
    ctx.dims.unify(va.dims[1], vb.dims[0], what)
    dims = (va.dims[0], ) + tuple(vb.dims[1:])
    kind = va.kind if va.sparse and vb.sparse else 'dense'
    return Call('matmul', (ctx.expr(a), ctx.expr(b))), Value(kind, dtype, dims,
                                                           va.index_dtype if kind != 'dense' else None)


def t_mm(ctx):
    return _matmul(ctx, ctx.arg(0), ctx.arg(1), ctx.node.target.__name__)


_LETTERS = 'abcdefghijklmnopqrstuvwxyz'
#: ``torch.bmm(a, b)`` in einsum notation: a batch of ``i x j`` by ``j x k`` products
_BMM = 'bij,bjk->bik'


def t_bmm(ctx):
    """``torch.bmm(a, b)``: ``B x M x K`` by ``B x K x N``, a dense ``B x M x N`` result (as
    torch's). With a sparse COO ``a`` (torch's only sparse ``bmm``; ``torch.matmul`` and
    ``@`` of a sparse 3-D tensor fail in torch itself, so they reach no graph) it is
    ``np.einsum('bij,bjk->bik', a, b)``: the loops follow the sparse operand's entries; two
    dense operands are DaCe's batched product ``a @ b``."""
    a, b = ctx.arg(0), ctx.arg(1)
    va, vb = ctx.value(a), ctx.value(b)
    dtype = ctx.same_dtype(va, vb)
    if len(va.dims) != 3 or len(vb.dims) != 3:
        raise Untranslatable(f'bmm of {len(va.dims)}-D by {len(vb.dims)}-D tensors (3-D by 3-D only)')
    if vb.sparse:  # (torch: "bmm_sparse: Tensor 'mat2' must be dense")
        raise Untranslatable(f'bmm by a sparse ({vb.kind}) tensor')
    ctx.dims.unify(va.dims[0], vb.dims[0], 'bmm (batches)')
    ctx.dims.unify(va.dims[2], vb.dims[1], 'bmm')
    dims = (va.dims[0], va.dims[1], vb.dims[2])
    if va.sparse:
        return Call('einsum', (ctx.expr(a), ctx.expr(b)), {'spec': _BMM}), Value('dense', dtype, dims)
    return Call('matmul', (ctx.expr(a), ctx.expr(b))), Value('dense', dtype, dims)


def t_addmm(ctx):
    bias, a, b = ctx.arg(0), ctx.arg(1), ctx.arg(2)
    beta, alpha = ctx.node.kwargs.get('beta', 1), ctx.node.kwargs.get('alpha', 1)
    prod, v = _matmul(ctx, a, b, 'addmm')
    vb = _dense(ctx.value(bias), 'addmm bias')
    dims = _broadcast(ctx, vb, v, 'addmm bias')
    if alpha != 1:
        prod = binary('*', ctx.expr(alpha), prod)
    shift = ctx.expr(bias) if beta == 1 else binary('*', ctx.expr(beta), ctx.expr(bias))
    return binary('+', shift, prod), Value('dense', v.dtype, dims)


def t_linear(ctx):
    x, w, b = ctx.arg(0), ctx.arg(1), ctx.arg(2)
    vx, vw = ctx.value(x), ctx.value(w)
    if vw.sparse:
        if len(vx.dims) != 2:
            raise Untranslatable('linear with a sparse weight of a non-2-D input')
        ctx.dims.unify(vx.dims[1], vw.dims[1], 'linear')
        if b is not None:
            ctx.dims.unify(_dense(ctx.value(b), 'linear bias').dims[-1], vw.dims[0], 'linear bias')
        return LinearOfSparse(w.name, x.name, None if b is None else b.name), \
            Value('dense', ctx.same_dtype(vx, vw), (vx.dims[0], vw.dims[0]))
    if len(vx.dims) not in (1, 2) or len(vw.dims) != 2:
        raise Untranslatable(f'linear of a {len(vx.dims)}-D input (1-D or 2-D only)')
    _dense(vx, 'linear')
    ctx.dims.unify(vx.dims[-1], vw.dims[1], 'linear')
    expr = Call('matmul', (ctx.expr(x), Call('transpose', (ctx.expr(w), ))))
    dtype = ctx.same_dtype(vx, vw)
    dims = tuple(vx.dims[:-1]) + (vw.dims[0], )
    if b is not None:
        vb = _dense(ctx.value(b), 'linear bias')
        ctx.dims.unify(vb.dims[-1], vw.dims[0], 'linear bias')
        expr = binary('+', expr, ctx.expr(b))
    return expr, Value('dense', dtype, dims)


def _unary(form: str, sparse: bool):

    def translate(ctx):
        x = ctx.arg(0)
        v = ctx.value(x)
        if v.sparse:
            if not sparse:
                raise Untranslatable(f'{ctx.node.target.__name__} of a sparse tensor')
            return Call(f'sparse_{form}', (ctx.expr(x), )), v
        return Call(form, (ctx.expr(x), )), v

    return translate


def t_neg(ctx):
    """``-x``: of a sparse tensor (any rank), its pattern with negated values."""
    x = ctx.arg(0)
    return Call('neg', (ctx.expr(x), )), ctx.value(x)


def t_gelu(ctx):
    x = ctx.arg(0)
    v = _dense(ctx.value(x), 'gelu')
    approximate = ctx.node.kwargs.get('approximate', ctx.arg(1, 'none') if len(ctx.node.args) > 1 else 'none')
    if approximate == 'tanh':
        return Call('gelu_tanh', (ctx.expr(x), )), v
    if approximate != 'none':
        raise Untranslatable(f'gelu approximate={approximate!r}')
    return Call('gelu', (ctx.expr(x), ), {'sizes': SizeDims(v.dims)}), v  # a map with erf (NumPy's has none in DaCe)


def _binary(op: str):

    def translate(ctx):
        a, b = ctx.arg(0), ctx.arg(1)
        alpha = ctx.node.kwargs.get('alpha', 1)
        tensors = [ctx.value(x) for x in (a, b) if ctx.is_tensor(x)]
        if not tensors:
            raise Untranslatable(f'{op} of two numbers')
        dtype = ctx.same_dtype(*tensors)
        ea, eb = ctx.expr(a), ctx.expr(b)
        if alpha != 1:
            eb = Num(alpha * eb.value) if isinstance(eb, Num) else binary('*', ctx.expr(alpha), eb)
        if len(tensors) == 1:  # tensor op number
            v = tensors[0]
            if v.sparse and (op in '+-' or (op == '/' and not ctx.is_tensor(a))):
                raise Untranslatable(f'sparse {op} number changes the zeros')
            if v.sparse and op == '/':
                return binary('*', ea, Num(1.0 / eb.value)), v
            return binary(op, ea, eb), v
        va, vb = tensors
        high = [len(v.dims) for v in tensors if v.sparse and len(v.dims) != 2]
        if high:  # (sdfgsparse's element-wise operations of two tensors take sparse matrices)
            raise Untranslatable(f'{op} of a {high[0]}-D sparse tensor and another tensor (2-D sparse only; a '
                                 'number keeps any rank)')
        dims = _broadcast(ctx, va, vb, op)
        if va.sparse or vb.sparse:
            if va.dims != vb.dims and ctx.dims.resolve(va.dims) != ctx.dims.resolve(vb.dims):
                raise Untranslatable(f'sparse {op} with broadcasting')
            if op == '/':
                raise Untranslatable('division with a sparse tensor')
            if va.sparse and vb.sparse:
                if va.kind != vb.kind or va.index_dtype != vb.index_dtype:
                    raise Untranslatable(f'{va.kind} {op} {vb.kind}')
                return binary(op, ea, eb), Value(va.kind, dtype, dims, va.index_dtype)
            if op == '*':
                s = va if va.sparse else vb
                return binary(op, ea, eb), Value(s.kind, dtype, dims, s.index_dtype)
            return binary(op, ea, eb), Value('dense', dtype, dims)
        return binary(op, ea, eb), Value('dense', dtype, dims)

    return translate


def t_transpose(ctx):
    x = ctx.arg(0)
    v = ctx.value(x)
    target = ctx.node.target
    if target == aten.permute.default:
        perm = [p % len(v.dims) for p in ctx.arg(1)]
    elif target in (aten.t.default, aten.numpy_T.default):
        perm = list(range(len(v.dims)))[::-1]
    else:
        d0, d1 = ctx.arg(1) % len(v.dims), ctx.arg(2) % len(v.dims)
        perm = list(range(len(v.dims)))
        perm[d0], perm[d1] = perm[d1], perm[d0]
    dims = tuple(v.dims[p] for p in perm)
    if perm == sorted(perm):
        return ctx.expr(x), v
    if v.sparse:
        if len(v.dims) != 2:
            raise Untranslatable('permute of a sparse tensor that is not 2-D')
        # X.T is a zero-copy view in sdfgsparse (CSR seen as CSC)
        return Call('sparse_transpose', (ctx.expr(x), )), Value({
            'CSR': 'CSC',
            'CSC': 'CSR'
        }.get(v.kind, v.kind), v.dtype, dims, v.index_dtype)
    if len(v.dims) == 2:
        return Call('transpose', (ctx.expr(x), )), Value('dense', v.dtype, dims)
    return Call('permute', (ctx.expr(x), ), {'axes': tuple(perm)}), Value('dense', v.dtype, dims)


def t_reshape(ctx):
    x, shape = ctx.arg(0), list(ctx.arg(1))
    v = _dense(ctx.value(x), 'reshape')
    # the literal sizes come from the example; the reshaped dimensions become fixed
    sizes = [ctx.dims.find(d) for d in v.dims]
    total = 1
    for d, s in zip(v.dims, sizes):
        if not isinstance(s, int):
            ctx.dims.unify(d, ctx.dims.example[s] if s in ctx.dims.example else _root_example(ctx.dims, s),
                           'reshape (fixed sizes)')
        total *= ctx.dims.find(d)
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    out = tuple(total // known if s == -1 else s for s in shape)
    return Call('reshape', (ctx.expr(x), ), {'shape': out}), Value('dense', v.dtype, out)


def _root_example(dims: Dims, s: str) -> int:
    for name, ex in dims.example.items():
        if dims.find(name) == s:
            return ex
    raise Untranslatable(f'size {s} has no example')


def _reduce(fn: str):

    def translate(ctx):
        x = ctx.arg(0)
        v = ctx.value(x)
        node = ctx.node
        dims_arg = ctx.arg(1) if len(node.args) > 1 else node.kwargs.get('dim')
        keepdim = (node.args[2] if len(node.args) > 2 else node.kwargs.get('keepdim', False))
        if node.kwargs.get('dtype') is not None:
            raise Untranslatable(f'{fn} with a dtype')
        if v.sparse or ctx.held_dense(x):
            if fn != 'sum':
                raise Untranslatable(f'{fn} of a sparse tensor')
            return _sparse_sum(ctx, x, v, dims_arg, keepdim)
        if dims_arg is None or (isinstance(dims_arg, (list, tuple)) and len(dims_arg) == 0):
            return Call(fn, (ctx.expr(x), )), Value('dense', v.dtype, ())
        axes = [d % len(v.dims) for d in (dims_arg if isinstance(dims_arg, (list, tuple)) else [dims_arg])]
        if len(axes) != 1:
            raise Untranslatable(f'{fn} over {len(axes)} dimensions at once')
        axis = axes[0]
        rest = tuple(d for k, d in enumerate(v.dims) if k != axis)
        expr = Call(f'{fn}_axis', (ctx.expr(x), ), {'axis': axis})
        if keepdim:
            kept = tuple(1 if k == axis else d for k, d in enumerate(v.dims))
            return Call('reshape', (expr, ), {'shape': SizeDims(kept)}), Value('dense', v.dtype, kept)
        return expr, Value('dense', v.dtype, rest)

    return translate


def _sparse_sum(ctx, x, v: Value, dims_arg, keepdim: bool):
    """``torch.sum(x, dims, keepdim)`` / ``torch.sparse.sum(x, dims)`` of a sparse tensor of
    any rank (or of one the program holds dense, :meth:`Context.held_dense`): ``x.sum(axis)``,
    the dense sums over ``dims`` (all of them where ``dims`` is None). torch's result is a
    sparse COO tensor where dimensions remain (the fibers that hold entries) and a dense
    one where none does (or with ``keepdim``, over every dimension): the program's is dense,
    and a COO one is handed to torch as COO (:data:`Context.dense_as_coo`). An empty list of
    dimensions sums nothing in torch for sparse tensors (not everything, as for dense ones):
    not translated; nor is ``keepdim=True`` of a sparse tensor (see the code)."""
    rank = len(v.dims)
    if isinstance(dims_arg, (list, tuple)) and len(dims_arg) == 0:
        raise Untranslatable('sum of a sparse tensor over an empty list of dimensions (torch sums nothing)')
    if keepdim and v.sparse:
        # DaCe's simplification writes the sum node's result straight into the reshaped array
        # (a segment result), which the node's validation refuses (a 1-D connector at a
        # [1, S, 1] array: sdfgsparse.lowering.graph.connector_desc keeps the unit dimensions
        # of a whole array)
        raise Untranslatable('sum of a sparse tensor with keepdim=True (the sum node cannot write a reshaped '
                             'array yet)')
    if dims_arg is None:
        axes = list(range(rank))
    else:
        axes = sorted({d % rank for d in (dims_arg if isinstance(dims_arg, (list, tuple)) else [dims_arg])})
    rest = tuple(d for k, d in enumerate(v.dims) if k not in axes)
    if not rest:
        axis = None
    elif v.sparse:
        axis = axes[0] if len(axes) == 1 else tuple(axes)
    else:  # a value the program holds dense: NumPy's sum over one axis
        if len(axes) != 1:
            raise Untranslatable(f'sum over {len(axes)} dimensions at once of a sum of a sparse tensor')
        axis = axes[0]
    form = 'sparse_sum_axis' if v.sparse else ('sum' if axis is None else 'sum_axis')
    expr = Call(form, (ctx.expr(x), ), {} if form == 'sum' else {'axis': axis})
    ctx.dense_as_coo = True
    if keepdim:
        kept = tuple(1 if k in axes else d for k, d in enumerate(v.dims))
        return Call('reshape', (expr, ), {'shape': SizeDims(kept)}), Value('dense', v.dtype, kept)
    return expr, Value('dense', v.dtype, rest)


def t_softmax(ctx, log=False):
    x, dim = ctx.arg(0), ctx.arg(1)
    v = ctx.value(x)
    if v.sparse:
        if log or len(v.dims) != 2:
            raise Untranslatable('log-softmax of a sparse tensor' if log else 'softmax of a sparse tensor (not 2-D)')
        return Call('sparse_softmax', (ctx.expr(x), ), {'axis': dim % 2}), v
    if len(v.dims) != 2:
        raise Untranslatable(f'softmax of a {len(v.dims)}-D tensor (2-D only)')
    return Call('softmax', (ctx.expr(x), ), {'axis': dim % 2, 'sizes': SizeDims(v.dims), 'log': log}), v


def t_layer_norm(ctx):
    x, shape, w, b = ctx.arg(0), list(ctx.arg(1)), ctx.arg(2), ctx.arg(3)
    eps = ctx.arg(4, 1e-5)
    v = _dense(ctx.value(x), 'layer_norm')
    if len(shape) != 1 or len(v.dims) != 2:
        raise Untranslatable('layer_norm over more than the last dimension, or of a tensor that is not 2-D')
    ctx.dims.unify(v.dims[1], shape[0], 'layer_norm')
    for p in (w, b):
        if p is not None:
            ctx.dims.unify(_dense(ctx.value(p), 'layer_norm').dims[-1], shape[0], 'layer_norm')
    expr = Call('normalize', (ctx.expr(x), ), {'sizes': SizeDims(v.dims), 'eps': float(eps)})
    if w is not None:
        expr = binary('*', expr, ctx.expr(w))
    if b is not None:
        expr = binary('+', expr, ctx.expr(b))
    return expr, v


def t_identity(ctx):
    x = ctx.arg(0)
    ctx.dense_as_coo = ctx.held_dense(x)
    return ctx.expr(x), ctx.value(x)


def t_to_dense(ctx):
    """``x.to_dense()``: a dense value (or one the program holds dense for torch's COO, a sum
    of a sparse tensor) is itself. A sparse COO tensor of 3 or more dimensions is the
    contraction that adds every entry (duplicates summed) into a dense array with its first
    two dimensions swapped, ``np.einsum('abc->bac', x)`` (a result on the operand's leading
    dimensions in order would stay sparse), swapped back by ``np.transpose``. A sparse
    matrix inside a program is not made dense (untranslated)."""
    x = ctx.arg(0)
    v = ctx.value(x)
    if ctx.node.kwargs.get('dtype') is not None:
        raise Untranslatable('to_dense with a dtype')
    if not v.sparse:
        return ctx.expr(x), v
    rank = len(v.dims)
    if rank < 3 or rank > len(_LETTERS):
        raise Untranslatable(f'to_dense of a {rank}-D sparse tensor (3-D to {len(_LETTERS)}-D only)')
    letters = _LETTERS[:rank]
    swapped = letters[1] + letters[0] + letters[2:]
    axes = (1, 0) + tuple(range(2, rank))
    expr = Call('einsum_1', (ctx.expr(x), ), {'spec': f'{letters}->{swapped}'})
    return Call('permute', (expr, ), {'axes': axes}), Value('dense', v.dtype, v.dims)


def t_dropout(ctx):
    train = ctx.arg(2, False)
    if train:
        raise Untranslatable('dropout in training mode (random)')
    return t_identity(ctx)


def t_sddmm(ctx):
    """``torch.sparse.sampled_addmm(S, X, Y, beta=1, alpha=1)``: ``beta * S + alpha * (X @ Y)``
    at S's pattern. ``ss.sddmm`` scales by S's values, so the product is sampled through
    ``ss.spones(S)`` (1 at every stored entry); with ``beta=0`` S's values are not read
    (torch's CPU kernel multiplies them by 0: a NaN or inf there gives NaN in torch, not
    here), which keeps the chain to a sparse softmax fusable into one attention node."""
    S, X, Y = ctx.arg(0), ctx.arg(1), ctx.arg(2)
    beta, alpha = ctx.node.kwargs.get('beta', 1), ctx.node.kwargs.get('alpha', 1)
    vs, vx, vy = ctx.value(S), ctx.value(X), ctx.value(Y)
    if not vs.sparse or vx.sparse or vy.sparse:
        raise Untranslatable('sampled_addmm of a dense pattern or of sparse factors')
    if len(vx.dims) != 2 or len(vy.dims) != 2:
        raise Untranslatable('sampled_addmm of factors that are not 2-D (batched)')
    dtype = ctx.same_dtype(vs, vx, vy)
    ctx.dims.unify(vs.dims[0], vx.dims[0], 'sampled_addmm')
    ctx.dims.unify(vx.dims[1], vy.dims[0], 'sampled_addmm')
    ctx.dims.unify(vy.dims[1], vs.dims[1], 'sampled_addmm')
    pattern = Call('spones', (ctx.expr(S), ))
    if alpha != 1:
        pattern = binary('*', pattern, ctx.expr(alpha))
    expr = Call('sddmm', (pattern, ctx.expr(X), ctx.expr(Y)))
    if beta != 0:
        expr = binary('+', ctx.expr(S) if beta == 1 else binary('*', ctx.expr(beta), ctx.expr(S)), expr)
    return expr, Value(vs.kind, dtype, vs.dims, vs.index_dtype)

_TO_SPARSE = {aten.to_sparse_csr.default: 'CSR', aten.to_sparse_csc.default: 'CSC'}


def t_to_sparse(ctx):
    """A sparse tensor in another layout. Inside a program a COO result stays in its
    compressed format (what every sparse operation reads best); the segment hands torch
    the layout it asked for (:meth:`Segment.run`). CSR and CSC are converted."""
    x = ctx.arg(0)
    v = ctx.value(x)
    node = ctx.node
    if node.target in _TO_SPARSE:
        want = _TO_SPARSE[node.target]
    else:
        layout = node.kwargs.get('layout')
        if node.kwargs.get('blocksize') is not None or node.target == aten.to_sparse.sparse_dim and ctx.arg(1) != 2:
            raise Untranslatable('to_sparse with blocks or a sparse dimension other than 2')
        want = 'COO' if layout is None else _LAYOUTS.get(layout)
        if want not in ('COO', 'CSR', 'CSC'):
            raise Untranslatable(f'to_sparse with layout {layout}')
    if not v.sparse:
        raise Untranslatable('a dense tensor made sparse (its pattern is known only at run time)')
    if want == v.kind or want == 'COO':
        return ctx.expr(x), v
    return Call(f'to_{want.lower()}', (ctx.expr(x), )), Value(want, v.dtype, v.dims, v.index_dtype)


TRANSLATIONS: Dict[Any, Callable] = {
    aten.mm.default: t_mm,
    aten.matmul.default: t_mm,
    aten._sparse_mm.default: t_mm,
    aten.addmm.default: t_addmm,
    aten.linear.default: t_linear,
    aten.relu.default: _unary('relu', True),
    aten.sigmoid.default: _unary('sigmoid', True),
    aten.tanh.default: _unary('tanh', True),
    aten.exp.default: _unary('exp', True),
    aten.neg.default: t_neg,
    aten.gelu.default: t_gelu,
    aten.add.Tensor: _binary('+'),
    aten.sub.Tensor: _binary('-'),
    aten.mul.Tensor: _binary('*'),
    aten.div.Tensor: _binary('/'),
    aten.t.default: t_transpose,
    aten.transpose.int: t_transpose,
    aten.permute.default: t_transpose,
    aten.view.default: t_reshape,
    aten.reshape.default: t_reshape,
    aten._unsafe_view.default: t_reshape,
    aten.sum.dim_IntList: _reduce('sum'),
    aten.sum.default: _reduce('sum'),
    aten._sparse_sum.dim: _reduce('sum'),
    aten._sparse_sum.default: _reduce('sum'),
    aten.to_dense.default: t_to_dense,
    aten.bmm.default: t_bmm,
    aten.mean.dim: _reduce('mean'),
    aten.mean.default: _reduce('mean'),
    aten.softmax.int: t_softmax,
    aten._softmax.default: t_softmax,
    aten.log_softmax.int: lambda ctx: t_softmax(ctx, log=True),
    aten._log_softmax.default: lambda ctx: t_softmax(ctx, log=True),
    aten.layer_norm.default: t_layer_norm,
    aten.dropout.default: t_dropout,
    aten.clone.default: t_identity,
    aten.contiguous.default: t_identity,
    aten.alias.default: t_identity,
    aten.detach.default: t_identity,
    aten.sparse_sampled_addmm.default: t_sddmm,
    aten._sparse_softmax.int: t_softmax,
    aten.to_sparse.default: t_to_sparse,
    aten.to_sparse.sparse_dim: t_to_sparse,
    aten.to_sparse_csr.default: t_to_sparse,
    aten.to_sparse_csc.default: t_to_sparse,
    aten.numpy_T.default: t_transpose,
}


# ---------------------------------------------------------------------- segments
@dataclass
class Step:
    node: Any  # torch.fx.Node
    code: Any = None  # the translation's expression (frontends/torch_sdfg.py), or a LinearOfSparse
    error: Optional[str] = None  # why it is not translated


@dataclass
class Segment:
    """Consecutive nodes: compiled as one program, or (``compiled=False``) one node run
    in torch."""
    compiled: bool
    steps: List[Step] = field(default_factory=list)
    inputs: List[str] = field(default_factory=list)
    outputs: List[str] = field(default_factory=list)
    source: str = ''  # the listing of its operations (CompiledModel.source)
    program: Any = None
    dims: Optional[Dims] = None
    values: Optional[Dict[str, Value]] = None
    names: Optional[Dict[str, str]] = None
    #: torch's layout of every value ('dense', 'CSR', 'CSC', 'COO'); a program may hold a
    #: COO value in a compressed format (:func:`t_to_sparse`)
    layouts: Optional[Dict[str, str]] = None

    @property
    def label(self) -> str:
        if self.compiled:
            return f'{len(self.steps)} ATen ops -> {self.program.sdfg.name if self.program else "(not built)"}'
        return f'{_op_name(self.steps[0].node)} ({self.steps[0].error})'

    def run(self, env: Dict[str, Any]) -> None:
        if not self.compiled:
            node = self.steps[0].node
            args = torch.fx.node.map_arg(node.args, lambda n: env[n.name])
            kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[n.name])
            env[node.name] = node.target(*args, **kwargs)
            return
        args = []
        for name in self.inputs:
            v = env[name]
            want = self.values[name]
            if not isinstance(v, torch.Tensor):
                raise errors.ArgumentError(f'{name}: expected a tensor, got {type(v).__name__}')
            have = _LAYOUTS.get(v.layout)
            if have != self.layouts[name]:
                raise errors.ArgumentError(f'{name}: a {have or v.layout} tensor where the model was compiled for '
                                           f'{self.layouts[name]}')
            if have != want.kind:  # a value the program holds in another format than torch
                v = _to_layout(v, want.kind)
            if v.dtype != want.dtype:
                raise errors.DTypeError(f'{name}: dtype {v.dtype}, the model was compiled for {want.dtype}')
            if v.dim() != len(want.dims):
                raise errors.ShapeError(f'{name}: {v.dim()}-D, the model was compiled for {len(want.dims)}-D')
            if v.layout == torch.sparse_coo and not v.is_coalesced():
                # duplicates summed first, as torch's sparse operations do: sdfgsparse's value
                # functions (relu, exp, ...) of a COO tensor map each duplicate apart
                v = v.coalesce()
            args.append(v.detach())
        res = self.program(*args)
        res = res if isinstance(res, tuple) else (res, )
        for name, r in zip(self.outputs, res):
            if not self.values[name].dims and isinstance(r, torch.Tensor) and r.numel() == 1:
                r = r.reshape(())  # a full reduction: the program returns one element, torch a 0-d tensor
            if self.values[name].kind != self.layouts[name]:
                r = _to_layout(r, self.layouts[name])
            env[name] = r


def _to_layout(t: 'torch.Tensor', kind: str) -> 'torch.Tensor':
    """``t`` in the layout ``kind`` (a value's kind in :class:`Value`'s terms): what the
    program holds, or what torch holds (a dense sum of a sparse tensor is a coalesced COO
    tensor for torch; a sum that is exactly zero is then not stored)."""
    if kind == 'dense':
        return t.to_dense()
    if kind == 'COO':
        return t.to_sparse_coo().coalesce()
    return t.to_sparse_csr() if kind == 'CSR' else t.to_sparse_csc()


def _op_name(node) -> str:
    t = node.target
    return getattr(t, '__name__', str(t))


def plan_segments(graph, fallback: str, user_inputs: Sequence[str]) -> List[Segment]:
    """Give every node a value and a translation, and cut the graph into segments; with
    ``fallback='raise'`` an untranslatable node raises before anything is compiled."""
    dims = Dims()
    values: Dict[str, Value] = {}
    names: Dict[str, str] = {}
    layouts: Dict[str, str] = {}
    used_names = set()
    steps: List[Step] = []
    for node in graph.nodes:
        if node.op == 'output':
            continue
        val = node.meta.get('val')
        names[node.name] = _py_name(node.name, used_names)
        if isinstance(val, torch.Tensor):
            layouts[node.name] = _LAYOUTS.get(val.layout, str(val.layout))
        if node.op == 'placeholder':
            if not isinstance(val, torch.Tensor):
                raise errors.UnsupportedOperationError(f'input {node.name}: not a tensor ({type(val).__name__})')
            values[node.name] = _placeholder_value(node.name, val, dims, node.name in user_inputs)
            continue
        if node.op != 'call_function':
            steps.append(Step(node, error=f'{node.op} nodes are not translated'))
            continue
        step = Step(node)
        fn = TRANSLATIONS.get(node.target)
        try:
            if fn is None:
                raise Untranslatable('no translation')
            if not isinstance(val, torch.Tensor):
                raise Untranslatable(f'its result is {type(val).__name__}, not one tensor')
            if val.dtype not in _DTYPES:
                raise Untranslatable(f'dtype {val.dtype}')
            ctx = Context(dims, values, node, layouts)
            code, value = fn(ctx)
            if (val.layout == torch.strided) != (value.kind == 'dense') and not (
                    ctx.dense_as_coo and value.kind == 'dense' and val.layout == torch.sparse_coo):
                raise Untranslatable(f'torch makes a {val.layout} result, the translation a {value.kind} one')
            if val.dim() != len(value.dims):
                raise Untranslatable(f'torch makes a {val.dim()}-D result, the translation a {len(value.dims)}-D one')
            step.code = code
            values[node.name] = value
        except Untranslatable as e:
            step.error = str(e) or 'no translation'
            if isinstance(val, torch.Tensor):
                values[node.name] = _placeholder_value(node.name, val, dims, True)
        steps.append(step)
    bad = [s for s in steps if s.error]
    if bad and fallback == 'raise':
        lines = '; '.join(f'{_op_name(s.node)} at {s.node.name}: {s.error}' for s in bad)
        raise errors.UnsupportedOperationError(f'ss.torch.compile: {len(bad)} ATen operation(s) are not translated '
                                               f'({lines}); pass fallback="torch" to run them in torch')
    segments: List[Segment] = []
    for s in steps:
        if s.error:
            segments.append(Segment(False, [s]))
        elif segments and segments[-1].compiled:
            segments[-1].steps.append(s)
        else:
            segments.append(Segment(True, [s]))
    outputs = {a.name for n in graph.nodes if n.op == 'output' for a in _flat_nodes(n.args)}
    for k, seg in enumerate(segments):
        if not seg.compiled:
            continue
        inside = {s.node.name for s in seg.steps}
        later = set(outputs)
        for other in segments[k + 1:]:
            for s in other.steps:
                later.update(a.name for a in _flat_nodes((s.node.args, s.node.kwargs)))
        reads = []
        for s in seg.steps:
            for a in _flat_nodes((s.node.args, s.node.kwargs)):
                if a.name not in inside and a.name not in reads:
                    reads.append(a.name)
        seg.inputs = reads
        seg.outputs = [s.node.name for s in seg.steps if s.node.name in later]
        seg.dims, seg.values, seg.names, seg.layouts = dims, values, names, layouts
    return segments


def _flat_nodes(obj) -> List:
    out = []
    torch.fx.node.map_arg(obj, lambda n: out.append(n))
    return out


def _py_name(name: str, used: set) -> str:
    """The program's name of an ATen value: ``t_`` + its graph name, so that no value
    shadows a module of the program, a size symbol (``S0``), or a C function that DaCe's
    generated code calls (a value named ``exp`` or ``tanh`` would)."""
    base = 't_' + ''.join(c if c.isalnum() or c == '_' else '_' for c in name)
    out, k = base, 0
    while out in used:
        k += 1
        out = f'{base}_{k}'
    used.add(out)
    return out


def _placeholder_value(name: str, val, dims: Dims, free: bool) -> Value:
    """The value of a graph input (``free``: its sizes are new symbols, else numbers).
    Sparse CSR and CSC tensors are matrices; a sparse COO tensor has 2 or more dimensions
    (kind ``'COO'`` of any rank, held as ``ss.COO[dt, I, J, K, ...]``), all of them sparse
    (a hybrid COO tensor, whose values are dense blocks, is refused)."""
    kind = _LAYOUTS.get(val.layout)
    if kind is None:
        raise errors.UnsupportedOperationError(f'{name}: layout {val.layout} is not supported')
    if val.dtype not in _DTYPES:
        raise errors.UnsupportedOperationError(f'{name}: dtype {val.dtype} is not supported (float32 or float64)')
    shape = tuple(int(s) for s in val.shape)
    if kind == 'COO':
        if len(shape) < 2:
            raise errors.UnsupportedOperationError(f'{name}: a sparse COO tensor of {len(shape)} dimension(s); '
                                                   'sparse COO tensors must have 2 or more')
        if val.dense_dim() != 0:
            raise errors.UnsupportedOperationError(
                f'{name}: a hybrid sparse COO tensor ({val.sparse_dim()} sparse and {val.dense_dim()} dense '
                'dimensions); every dimension must be sparse (torch: sparse_dim == dim())')
    elif kind != 'dense' and len(shape) != 2:
        raise errors.UnsupportedOperationError(f'{name}: sparse {kind} tensors must be 2-D, got {len(shape)}-D '
                                               '(a tensor of more dimensions: sparse COO)')
    ds = tuple(dims.new(s) for s in shape) if free else shape
    if kind == 'dense':
        return Value('dense', val.dtype, ds)
    return Value(kind, val.dtype, ds, _index_dtype(val))


# ---------------------------------------------------------------------- building
def _type(v: Value, dims: Dims) -> str:
    """A value's type in the listing (``CompiledModel.source``)."""
    sizes = ', '.join(str(d) for d in dims.resolve(v.dims))
    dt = f'dace.{_DTYPES[v.dtype]}'
    if v.sparse:
        return f'ss.{v.kind}[{dt}, {sizes}, dace.{_INDEX[v.index_dtype]}]'
    if not v.dims:
        return f'{dt}[1]'
    return f'{dt}[{sizes}]'


def _size(d):
    return d if isinstance(d, int) else dace.symbol(d)


def _descriptor(name: str, v: Value, dims: Dims):
    """The data descriptor of an input: sizes are the segment's symbols (``S0``) or numbers;
    a sparse input's entry counts are named after it (``N_t_a_n1``)."""
    sizes = [_size(d) for d in dims.resolve(v.dims)]
    dt = getattr(dace, _DTYPES[v.dtype])
    if v.sparse:
        fmt = get_format(v.kind).with_rank(len(v.dims)) if v.kind == 'COO' else get_format(v.kind)
        return fmt.type(dt, *sizes, getattr(dace, _INDEX[v.index_dtype]),
                        **{k: f'N_{name}_{k}' for k in fmt.size_keys}).structure()
    return dace.data.Array(dt, tuple(sizes) or (1, ))


#: Element-wise operations of one tensor that commute with a transpose: applied to the
#: feature-major form of a sparse linear layer's output (see :class:`_Emitter`).
_FEATURE_MAJOR = {aten.relu.default, aten.sigmoid.default, aten.tanh.default, aten.exp.default, aten.neg.default}
_IDENTITIES = {aten.clone.default, aten.contiguous.default, aten.alias.default, aten.detach.default,
               aten.dropout.default}


def _substitute(expr, name: str, data: str):
    """``expr`` with the value ``name`` read from the datum ``data`` instead."""
    if isinstance(expr, Ref):
        return data if expr.name == name else expr
    if isinstance(expr, Call):
        return Call(expr.form, tuple(_substitute(a, name, data) for a in expr.args), expr.params)
    return expr


class _Emitter:
    """Builds a segment's steps into an SDFG (:class:`~frontends.torch_sdfg.Builder`).

    ``x @ W.T`` with a sparse ``W`` is computed as ``W @ x.T`` (an SpMM over W's rows) and
    transposed back; the feature-major result is kept (``major``: value -> the datum of its
    transpose), so that element-wise operations in :data:`_FEATURE_MAJOR` run on it and the
    next sparse layer reads it without transposing: a chain of sparse layers transposes its
    input once and its output once. The transpose back is built when something reads the
    value (``pending``: value -> its datum-to-be and the listing name), so a layer whose
    output only the next sparse layer reads has none."""

    def __init__(self, seg: 'Segment', name: str):
        self.seg = seg
        self.b = Builder(name)
        self.b.reserve(seg.names[n] for n in seg.inputs + [s.node.name for s in seg.steps])
        self.data: Dict[str, str] = {}  # value -> its datum
        self.major: Dict[str, str] = {}  # value -> the datum of its transpose
        self.pending: Dict[str, Tuple[str, str]] = {}  # value -> (its datum-to-be, listing name)
        many = len(seg.outputs) > 1
        self.rets = {n: f'__return_{k}' if many else '__return' for k, n in enumerate(seg.outputs)}
        self.label: Dict[str, str] = {r: seg.names[n] for n, r in self.rets.items()}  # datum -> listing name
        self.lines: List[str] = []
        for n in seg.inputs:
            self.b.add_input(seg.names[n], _descriptor(seg.names[n], seg.values[n], seg.dims))
            self.data[n] = seg.names[n]

    def resolve(self, p):
        return tuple(_size(d) for d in self.seg.dims.resolve(p)) if isinstance(p, SizeDims) else p

    def _name(self, datum: str) -> str:
        return self.label.get(datum, datum)

    def emit(self, expr, out: str, base: str, output: bool = False) -> str:
        """Build ``expr``; its last operation writes ``out``, earlier ones new data named
        after ``base``. Returns the datum that holds the value."""
        if isinstance(expr, Ref):
            return self.datum(expr.name)
        if isinstance(expr, str):
            return expr
        args = [self.emit(a, self.b.fresh(base), base) for a in expr.args]
        params = {k: self.resolve(v) for k, v in expr.params.items()}
        self.b.call(expr.form, args, params, out, output)
        return out

    def datum(self, name: str) -> str:
        """The datum that holds the value ``name`` (its transpose back built now, where it
        was pending)."""
        if name in self.pending:
            out, label = self.pending.pop(name)
            expr = Call('transpose', (self.major[name], ))
            self.data[name] = self.emit(expr, out, label, output=out in self.label)
            self.line(out, expr)
        return self.data[name]

    def line(self, out: str, expr) -> None:
        names = {n: self._name(d) for n, d in self.data.items()}
        self.lines.append(f'{self._name(out)} = {describe(expr, names, self.resolve)}')

    def step(self, step: Step) -> None:
        seg, node = self.seg, step.node
        name, expr = node.name, step.code
        label = seg.names[name]
        out = self.rets.get(name, label)
        output = name in self.rets
        args = [a.name for a in _flat_nodes((node.args, node.kwargs))]
        if isinstance(expr, LinearOfSparse):
            x = self.major.get(expr.x) or Call('transpose', (Ref(expr.x), ))
            product = Call('matmul', (Ref(expr.w), x))
            if expr.b is not None:
                rows = seg.dims.resolve(seg.values[name].dims)[1]
                product = binary('+', product, Call('reshape', (Ref(expr.b), ), {'shape': SizeDims((rows, 1))}))
            self._feature_major(name, product, out, label)
            return
        if len(args) == 1 and args[0] in self.major:
            x = args[0]
            if node.target in _IDENTITIES and expr == Ref(x):
                self.major[name] = self.major[x]
                if x in self.pending:  # its transpose back is pending too, with its own name
                    self.pending[name] = (out, label)
                    return
            elif node.target in _FEATURE_MAJOR and len(seg.values[name].dims) == 2:
                self._feature_major(name, _substitute(expr, x, self.major[x]), out, label)
                return
        if isinstance(expr, Ref):
            self.data[name] = self.datum(expr.name)
            self.lines.append(f'{label} = {self._name(self.data[name])}')
            return
        self.data[name] = self.emit(expr, out, label, output)
        self.line(out, expr)
        self._check_kind(node)

    def _check_kind(self, node) -> None:
        """The datum the operations made is what the translation promised, a sparse
        structure for a sparse value and an array for a dense one (the NumPy frontend
        decides whether a result stays sparse: a disagreement would hand torch another
        layout than its own)."""
        value = self.seg.values[node.name]
        made = is_sparse_desc(self.b.desc(self.data[node.name]))
        if made != value.sparse:
            raise errors.UnsupportedOperationError(
                f'ss.torch.compile: {_op_name(node)} at {node.name}: the translation gives a {value.kind} value, '
                f'its operations made a {"sparse" if made else "dense"} one')

    def _feature_major(self, name: str, product, out: str, label: str) -> None:
        fm = self.b.fresh(f'{label}_fm')
        self.emit(product, fm, fm)
        self.line(fm, product)
        self.major[name] = fm
        self.pending[name] = (out, label)

    def finish(self) -> dace.SDFG:
        for n, ret in self.rets.items():  # a result that is another value: a copy of it
            if self.datum(n) != ret:
                self.b.call('copy', [self.data[n]], {}, ret, output=True)
        return self.b.finish()

    def listing(self) -> str:
        seg = self.seg
        params = ', '.join(f'{seg.names[n]}: {_type(seg.values[n], seg.dims)}' for n in seg.inputs)
        head = [f'# the operations of SDFG {self.b.sdfg.name}, one nested SDFG each (a listing: nothing runs it)',
                f'def {self.b.sdfg.name}({params}):']
        return '\n'.join(head + ['    ' + line for line in self.lines] +
                         [f'    return {", ".join(seg.names[n] for n in seg.outputs)}']) + '\n'


def translate(seg: Segment, name: str) -> Dict[str, float]:
    """Build the segment's SDFG, optimise and build it; returns the seconds of each step."""
    seconds = {}
    em = None
    try:
        t0 = time.perf_counter()
        em = _Emitter(seg, name)
        for s in seg.steps:
            em.step(s)
        sdfg = em.finish()
        seg.source = em.listing()
        t1 = time.perf_counter()
        seg.program = ss.optimize(sdfg)
        t2 = time.perf_counter()
        seg.program.build()
        seconds = {'parse': t1 - t0, 'optimize': t2 - t1, 'build': time.perf_counter() - t2}
    except errors.SparseError:
        raise
    except Exception as e:
        listing = em.listing() if em is not None else ''
        raise errors.UnsupportedOperationError(f'ss.torch.compile: DaCe could not compile the segment {name} '
                                               f'({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ""})'
                                               f'; its operations:\n{listing}') from e
    return seconds
