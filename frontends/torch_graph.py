"""An exported ATen graph as NumPy-style ``@dace.program`` sources (``ss.torch.compile``).

Every ATen node gets a *value*: its kind (dense or a sparse format), dtype and
dimensions. Dimensions are :class:`Dims` classes: user inputs' sizes are free symbols,
parameters' sizes are numbers, and each operation unifies the dimensions it needs equal
(``mm``: ``a.shape[1] == b.shape[0]``), so the generated program has as few symbols as
the model allows and any input size that satisfies the model runs without recompiling.
A translation (:data:`TRANSLATIONS`) turns a node into one line of the program — the
NumPy vocabulary of ``@dace.program`` and sdfgsparse (``A @ X``, ``ss.relu(A)``,
``np.transpose(w)``) — or raises :class:`Untranslatable` with the reason; the node then
runs in torch (a graph break) or the compile fails, per ``fallback``.

Consecutive translatable nodes form a :class:`Segment`: one program, whose arguments are
the values it reads from before it and whose results are the values read after it.
"""
import linecache
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from sdfgsparse import errors
from sdfgsparse.formats import parsing_ours

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
    kind: str  # 'dense', 'CSR', 'CSC', 'COO'
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
    """What a translation sees: its node's arguments as values or Python constants, the
    dimensions, and the names of the generated program."""

    def __init__(self, dims: Dims, values: Dict[str, Value], names: Dict[str, str], node):
        self.dims, self.values, self.names, self.node = dims, values, names, node

    def arg(self, k: int, default=None):
        args = self.node.args
        return args[k] if k < len(args) else default

    def value(self, a) -> Value:
        if not isinstance(a, torch.fx.Node) or a.name not in self.values:
            raise Untranslatable(f'argument {a!r} is not a tensor')
        return self.values[a.name]

    def code(self, a) -> str:
        """``a`` in the program: a value's name, or a Python number."""
        if isinstance(a, torch.fx.Node):
            self.value(a)
            return self.names[a.name]
        if isinstance(a, bool) or not isinstance(a, (int, float)):
            raise Untranslatable(f'argument {a!r} is neither a tensor nor a number')
        return repr(float(a)) if isinstance(a, float) and math.isfinite(a) else (
            repr(a) if isinstance(a, int) else _special_float(a))

    def is_tensor(self, a) -> bool:
        return isinstance(a, torch.fx.Node) and a.name in self.values

    def same_dtype(self, *vals: Value) -> torch.dtype:
        dtypes = {v.dtype for v in vals}
        if len(dtypes) != 1:
            raise Untranslatable(f'mixed dtypes {sorted(map(str, dtypes))}')
        return vals[0].dtype


def _special_float(a: float) -> str:
    if math.isnan(a):
        return 'math.nan'
    return 'math.inf' if a > 0 else '-math.inf'


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
    return f'{ctx.code(a)} @ {ctx.code(b)}', Value(kind, dtype, dims, va.index_dtype if kind != 'dense' else None)


def t_mm(ctx):
    return _matmul(ctx, ctx.arg(0), ctx.arg(1), ctx.node.target.__name__)


def t_addmm(ctx):
    bias, a, b = ctx.arg(0), ctx.arg(1), ctx.arg(2)
    beta, alpha = ctx.node.kwargs.get('beta', 1), ctx.node.kwargs.get('alpha', 1)
    prod, v = _matmul(ctx, a, b, 'addmm')
    vb = _dense(ctx.value(bias), 'addmm bias')
    dims = _broadcast(ctx, vb, v, 'addmm bias')
    scale = '' if alpha == 1 else f'{ctx.code(alpha)} * '
    bscale = '' if beta == 1 else f'{ctx.code(beta)} * '
    return f'{bscale}{ctx.code(bias)} + {scale}({prod})', Value('dense', v.dtype, dims)


def t_linear(ctx):
    x, w, b = ctx.arg(0), ctx.arg(1), ctx.arg(2)
    vx, vw = ctx.value(x), ctx.value(w)
    if vw.sparse:
        if len(vx.dims) != 2:
            raise Untranslatable('linear with a sparse weight of a non-2-D input')
        ctx.dims.unify(vx.dims[1], vw.dims[1], 'linear')
        if b is not None:
            ctx.dims.unify(_dense(ctx.value(b), 'linear bias').dims[-1], vw.dims[0], 'linear bias')
        # (W @ x.T).T: written by _lines, which keeps the product feature-major (see _FEATURE_MAJOR)
        return ('sparse_linear', ctx.code(w), ctx.code(x), None if b is None else ctx.code(b)), \
            Value('dense', ctx.same_dtype(vx, vw), (vx.dims[0], vw.dims[0]))
    else:
        if len(vx.dims) not in (1, 2) or len(vw.dims) != 2:
            raise Untranslatable(f'linear of a {len(vx.dims)}-D input (1-D or 2-D only)')
        _dense(vx, 'linear')
        ctx.dims.unify(vx.dims[-1], vw.dims[1], 'linear')
        expr = f'{ctx.code(x)} @ np.transpose({ctx.code(w)})'
    dtype = ctx.same_dtype(vx, vw)
    dims = tuple(vx.dims[:-1]) + (vw.dims[0], )
    if b is not None:
        vb = _dense(ctx.value(b), 'linear bias')
        ctx.dims.unify(vb.dims[-1], vw.dims[0], 'linear bias')
        expr = f'{expr} + {ctx.code(b)}'
    return expr, Value('dense', dtype, dims)


def _unary(dense_fmt: str, sparse_fn: Optional[str]):

    def translate(ctx):
        x = ctx.arg(0)
        v = ctx.value(x)
        if v.sparse:
            if sparse_fn is None:
                raise Untranslatable(f'{ctx.node.target.__name__} of a sparse tensor')
            return f'ss.{sparse_fn}({ctx.code(x)})', v
        return dense_fmt.format(x=ctx.code(x)), v

    return translate


def t_gelu(ctx):
    x = ctx.arg(0)
    v = _dense(ctx.value(x), 'gelu')
    approximate = ctx.node.kwargs.get('approximate', ctx.arg(1, 'none') if len(ctx.node.args) > 1 else 'none')
    n = ctx.code(x)
    if approximate == 'tanh':
        return f'0.5 * {n} * (1.0 + np.tanh(0.7978845608028654 * ({n} + 0.044715 * {n} * {n} * {n})))', v
    if approximate != 'none':
        raise Untranslatable(f'gelu approximate={approximate!r}')
    return ('map', 'gelu', n), v  # element-wise map with math.erf (no NumPy erf in DaCe)


def _binary(op: str):

    def translate(ctx):
        a, b = ctx.arg(0), ctx.arg(1)
        alpha = ctx.node.kwargs.get('alpha', 1)
        tensors = [ctx.value(x) for x in (a, b) if ctx.is_tensor(x)]
        if not tensors:
            raise Untranslatable(f'{op} of two numbers')
        dtype = ctx.same_dtype(*tensors)
        ca, cb = ctx.code(a), ctx.code(b)
        if alpha != 1:
            cb = f'{ctx.code(alpha)} * {cb}'
        if len(tensors) == 1:  # tensor op number
            v = tensors[0]
            if v.sparse and (op in '+-' or (op == '/' and not ctx.is_tensor(a))):
                raise Untranslatable(f'sparse {op} number changes the zeros')
            if v.sparse and op == '/':
                return f'{ca} * (1.0 / {cb})', v
            return f'{ca} {op} {cb}', v
        va, vb = tensors
        dims = _broadcast(ctx, va, vb, op)
        if va.sparse or vb.sparse:
            if va.dims != vb.dims and ctx.dims.resolve(va.dims) != ctx.dims.resolve(vb.dims):
                raise Untranslatable(f'sparse {op} with broadcasting')
            if op == '/':
                raise Untranslatable('division with a sparse tensor')
            if va.sparse and vb.sparse:
                if va.kind != vb.kind or va.index_dtype != vb.index_dtype:
                    raise Untranslatable(f'{va.kind} {op} {vb.kind}')
                return f'{ca} {op} {cb}', Value(va.kind, dtype, dims, va.index_dtype)
            if op == '*':
                s = va if va.sparse else vb
                return f'{ca} {op} {cb}', Value(s.kind, dtype, dims, s.index_dtype)
            return f'{ca} {op} {cb}', Value('dense', dtype, dims)
        return f'{ca} {op} {cb}', Value('dense', dtype, dims)

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
        return ctx.code(x), v
    if v.sparse:
        if len(v.dims) != 2:
            raise Untranslatable('permute of a sparse tensor that is not 2-D')
        # X.T is a zero-copy view in sdfgsparse (CSR seen as CSC)
        return f'{ctx.code(x)}.T', Value({'CSR': 'CSC', 'CSC': 'CSR'}.get(v.kind, v.kind), v.dtype, dims,
                                         v.index_dtype)
    if len(v.dims) == 2:
        return f'np.transpose({ctx.code(x)})', Value('dense', v.dtype, dims)
    return f'np.transpose({ctx.code(x)}, axes={tuple(perm)!r})', Value('dense', v.dtype, dims)


def _size_code(d) -> str:
    return str(d)


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
    return f'np.reshape({ctx.code(x)}, {out!r})', Value('dense', v.dtype, out)


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
        if dims_arg is None or (isinstance(dims_arg, (list, tuple)) and len(dims_arg) == 0):
            if v.sparse:
                raise Untranslatable(f'{fn} of a whole sparse tensor')
            return f'np.{fn}({ctx.code(x)})', Value('dense', v.dtype, ())
        axes = [d % len(v.dims) for d in (dims_arg if isinstance(dims_arg, (list, tuple)) else [dims_arg])]
        if len(axes) != 1:
            raise Untranslatable(f'{fn} over {len(axes)} dimensions at once')
        axis = axes[0]
        rest = tuple(d for k, d in enumerate(v.dims) if k != axis)
        if v.sparse:
            if fn != 'sum':
                raise Untranslatable(f'{fn} of a sparse tensor')
            expr = f'{ctx.code(x)}.sum(axis={axis})'
        else:
            expr = f'np.{fn}({ctx.code(x)}, axis={axis})'
        if keepdim:
            kept = tuple(1 if k == axis else d for k, d in enumerate(v.dims))
            return ('reshape', expr, kept), Value('dense', v.dtype, kept)
        return expr, Value('dense', v.dtype, rest)

    return translate


def t_softmax(ctx, log=False):
    x, dim = ctx.arg(0), ctx.arg(1)
    v = ctx.value(x)
    if v.sparse:
        if log or len(v.dims) != 2:
            raise Untranslatable('log-softmax of a sparse tensor' if log else 'softmax of a sparse tensor (not 2-D)')
        return f'ss.softmax({ctx.code(x)}, axis={dim % 2})', v
    if len(v.dims) != 2:
        raise Untranslatable(f'softmax of a {len(v.dims)}-D tensor (2-D only)')
    return ('softmax', ctx.code(x), dim % 2, log), v


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
    return ('layer_norm', ctx.code(x), None if w is None else ctx.code(w), None if b is None else ctx.code(b),
            float(eps)), v


def t_identity(ctx):
    x = ctx.arg(0)
    return ctx.code(x), ctx.value(x)


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
    pattern = f'ss.spones({ctx.code(S)})' + ('' if alpha == 1 else f' * {ctx.code(alpha)}')
    expr = f'ss.sddmm({pattern}, {ctx.code(X)}, {ctx.code(Y)})'
    if beta != 0:
        expr = f'{ctx.code(S)} + {expr}' if beta == 1 else f'{ctx.code(beta)} * {ctx.code(S)} + {expr}'
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
        return ctx.code(x), v
    return f'ss.convert({ctx.code(x)}, ss.{want})', Value(want, v.dtype, v.dims, v.index_dtype)


TRANSLATIONS: Dict[Any, Callable] = {
    aten.mm.default: t_mm,
    aten.matmul.default: t_mm,
    aten._sparse_mm.default: t_mm,
    aten.addmm.default: t_addmm,
    aten.linear.default: t_linear,
    aten.relu.default: _unary('np.maximum({x}, 0)', 'relu'),
    aten.sigmoid.default: _unary('1.0 / (1.0 + np.exp(-{x}))', 'sigmoid'),
    aten.tanh.default: _unary('np.tanh({x})', 'tanh'),
    aten.exp.default: _unary('np.exp({x})', 'exp'),
    aten.neg.default: _unary('-{x}', None),
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
    code: Any = None  # the translation's result (a string, or a tuple for multi-line forms)
    error: Optional[str] = None  # why it is not translated


@dataclass
class Segment:
    """Consecutive nodes: compiled as one program, or (``compiled=False``) one node run
    in torch."""
    compiled: bool
    steps: List[Step] = field(default_factory=list)
    inputs: List[str] = field(default_factory=list)
    outputs: List[str] = field(default_factory=list)
    source: str = ''
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
            code, value = fn(Context(dims, values, names, node))
            if (val.layout == torch.strided) != (value.kind == 'dense'):
                raise Untranslatable(f'torch makes a {val.layout} result, the translation a {value.kind} one')
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
    kind = _LAYOUTS.get(val.layout)
    if kind is None:
        raise errors.UnsupportedOperationError(f'{name}: layout {val.layout} is not supported')
    if val.dtype not in _DTYPES:
        raise errors.UnsupportedOperationError(f'{name}: dtype {val.dtype} is not supported (float32 or float64)')
    shape = tuple(int(s) for s in val.shape)
    ds = tuple(dims.new(s) for s in shape) if free else shape
    if kind == 'dense':
        return Value('dense', val.dtype, ds)
    if len(shape) != 2:
        raise errors.UnsupportedOperationError(f'{name}: sparse tensors must be 2-D, got {len(shape)}-D')
    return Value(kind, val.dtype, ds, _index_dtype(val))


# ---------------------------------------------------------------------- source
def _type(v: Value, dims: Dims) -> str:
    sizes = ', '.join(str(d) for d in dims.resolve(v.dims))
    dt = f'dace.{_DTYPES[v.dtype]}'
    if v.sparse:
        return f'ss.{v.kind}[{dt}, {sizes}, dace.{_INDEX[v.index_dtype]}]'
    if not v.dims:
        return f'{dt}[1]'
    return f'{dt}[{sizes}]'


#: Element-wise operations of one tensor that commute with a transpose: applied to the
#: feature-major form of a sparse linear layer's output (see :func:`_lines`).
_FEATURE_MAJOR = {aten.relu.default, aten.sigmoid.default, aten.tanh.default, aten.exp.default, aten.neg.default}
_IDENTITIES = {aten.clone.default, aten.contiguous.default, aten.alias.default, aten.detach.default,
               aten.dropout.default}


def _lines(seg: Segment, step: Step) -> List[str]:
    """The program lines of one step. ``x @ W.T`` with a sparse ``W`` is computed as
    ``W @ x.T`` (an SpMM over W's rows) and transposed back; the feature-major result is
    kept (``seg.feature_major``: name -> name of its transpose), so that element-wise
    operations in :data:`_FEATURE_MAJOR` run on it and the next sparse layer reads it
    without transposing: a chain of sparse layers transposes its input once and its output
    once. Transposes nothing reads are removed by DaCe's dead-dataflow elimination."""
    out = seg.names[step.node.name]
    code = step.code
    v = seg.values[step.node.name]
    major = seg.__dict__.setdefault('feature_major', {})
    if isinstance(code, str):
        args = [a for a in _flat_nodes((step.node.args, step.node.kwargs))]
        if len(args) == 1 and seg.names.get(args[0].name) in major:
            x = seg.names[args[0].name]
            if step.node.target in _IDENTITIES and code == x:
                major[out] = major[x]
            elif step.node.target in _FEATURE_MAJOR and len(seg.dims.resolve(v.dims)) == 2:
                body = re.sub(r'\b' + re.escape(x) + r'\b', major[x], code)
                major[out] = f'{out}_fm'
                return [f'{out}_fm = {body}', f'{out} = np.transpose({out}_fm)']
        return [f'{out} = {code}']
    form = code[0]
    if form == 'sparse_linear':
        _, w, x, b = code
        rows = str(seg.dims.resolve(v.dims)[1])
        product = f'{w} @ {major.get(x, f"np.transpose({x})")}'
        major[out] = f'{out}_fm'
        return [f'{out}_fm = {product}' + (f' + np.reshape({b}, ({rows}, 1))' if b is not None else ''),
                f'{out} = np.transpose({out}_fm)']
    if form == 'reshape':
        sizes = ', '.join(str(d) for d in seg.dims.resolve(code[2]))
        return [f'{out} = np.reshape({code[1]}, ({sizes},))']
    if form == 'softmax':
        _, x, axis, log = code
        m, n = (str(d) for d in seg.dims.resolve(v.dims))
        keep = f'({m}, 1)' if axis == 1 else f'(1, {n})'
        lines = [f'{out}_max = np.reshape(np.max({x}, axis={axis}), {keep})',
                 f'{out}_shift = {x} - {out}_max',
                 # exp over the flat array: one loop of m * n (vectorised with libmvec); over the
                 # rows' few columns (a GCN's 7 classes) GCC left the 2-D loop's exp scalar
                 f'{out}_exp = np.reshape(np.exp(np.reshape({out}_shift, ({m} * {n},))), ({m}, {n}))',
                 f'{out}_sum = np.reshape(np.sum({out}_exp, axis={axis}), {keep})']
        if log:
            lines.append(f'{out} = {out}_shift - np.log({out}_sum)')
        else:
            lines.append(f'{out} = {out}_exp / {out}_sum')
        return lines
    if form == 'layer_norm':
        _, x, w, b, eps = code
        m, n = (str(d) for d in seg.dims.resolve(v.dims))
        lines = [f'{out}_mean = np.reshape(np.mean({x}, axis=1), ({m}, 1))',
                 f'{out}_cen = {x} - {out}_mean',
                 f'{out}_var = np.reshape(np.mean({out}_cen * {out}_cen, axis=1), ({m}, 1))',
                 f'{out} = {out}_cen / np.sqrt({out}_var + {eps!r})']
        if w is not None:
            lines.append(f'{out} = {out} * {w}')
        if b is not None:
            lines.append(f'{out} = {out} + {b}')
        return lines
    if form == 'map':
        _, fn, x = code
        sizes = seg.dims.resolve(v.dims)
        idx = [f'i{k}' for k in range(len(sizes))]
        rng = ', '.join(f'0:{s}' for s in sizes)
        at = ', '.join(idx) if idx else '0'
        body = {'gelu': '0.5 * u * (1.0 + erf(u * 0.7071067811865476))'}[fn]
        return [f'{out} = np.empty_like({x})',
                f'for {", ".join(idx)} in dace.map[{rng}]:',
                '    with dace.tasklet:',
                f'        u << {x}[{at}]',
                f'        o >> {out}[{at}]',
                f'        o = {body}']
    raise AssertionError(form)


def translate(seg: Segment, name: str) -> Dict[str, float]:
    """Write the segment's program, parse it with DaCe, optimise and build it; returns the
    seconds of each step."""
    import dace
    import sdfgsparse as ss
    symbols = set()
    for n in seg.inputs + [s.node.name for s in seg.steps]:
        for d in seg.dims.resolve(seg.values[n].dims):
            if not isinstance(d, int):
                symbols.add(d)
    params = ', '.join(f'{seg.names[n]}: {_type(seg.values[n], seg.dims)}' for n in seg.inputs)
    body = [line for s in seg.steps for line in _lines(seg, s)]
    rets = [seg.names[n] for n in seg.outputs]
    src = ['import math', 'import dace', 'import numpy as np', 'import sdfgsparse as ss', '']
    src += [f'{s} = dace.symbol({s!r})' for s in sorted(symbols, key=lambda s: int(s[1:]))]
    src += ['', '', f'def {name}({params}):']
    src += ['    ' + line for line in body]
    src += [f'    return {", ".join(rets)}']
    seg.source = '\n'.join(src) + '\n'
    filename = f'<sdfgsparse.torch {name}>'
    linecache.cache[filename] = (len(seg.source), None, seg.source.splitlines(True), filename)
    scope: Dict[str, Any] = {'__name__': '__main__'}  # DaCe names the SDFG after the function alone
    exec(compile(seg.source, filename, 'exec'), scope)  # defines the function (DaCe reads its source)
    prog = dace.program(scope[name])
    seconds = {}
    try:
        t0 = time.perf_counter()
        with parsing_ours():
            sdfg = prog.to_sdfg()
        t1 = time.perf_counter()
        seg.program = ss.optimize(sdfg)
        t2 = time.perf_counter()
        seg.program.build()
        seconds = {'parse': t1 - t0, 'optimize': t2 - t1, 'build': time.perf_counter() - t2}
    except errors.SparseError:
        raise
    except Exception as e:
        raise errors.UnsupportedOperationError(f'ss.torch.compile: DaCe could not compile the generated program '
                                               f'{name} ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ""})'
                                               f'; its source:\n{seg.source}') from e
    return seconds
