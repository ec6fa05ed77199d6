"""One graph segment's SDFG, built operation by operation (``ss.torch.compile``).

A translation (:mod:`frontends.torch_graph`) gives each ATen node an expression: a tree of
:class:`Call` (an operation of this module's vocabulary, :data:`FORMS`), :class:`Ref` (a
value of the graph) and :class:`Num` (a Python number). :class:`Builder` turns each call into
a nested SDFG: the operation is a small NumPy-style function written here, in this file
(``def matmul(a, b): return a @ b``), parsed by DaCe's frontend for the descriptors of its
arguments (so the products, element-wise maps and reductions are the nodes that
``@dace.program`` makes, sparse ones our library nodes), its data renamed to the segment's
names and nested in the segment's one state; :meth:`Builder.finish` inlines them all
(DaCe's simplification). Numbers, axes and shapes are the operation's closure (constants of
the parse), never program text: nothing is generated and run.
"""
import collections
import copy
import inspect
import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Sequence, Tuple

import dace
from dace.sdfg.replace import replace_properties_dict
import numpy as np

import sdfgsparse as ss
from sdfgsparse.build.naming import canonical_edge_order
from sdfgsparse.formats import mark_ours, parsing_ours
from sdfgsparse.runtime.capacity import PREFIX as CAPACITY_PREFIX
from sdfgsparse.runtime.capacity import capacity_symbol

__all__ = ['Ref', 'Num', 'Call', 'SizeDims', 'Builder', 'FORMS', 'describe']


# ---------------------------------------------------------------------- expressions
@dataclass(frozen=True)
class Ref:
    """A value of the graph (its node name)."""
    name: str


@dataclass(frozen=True)
class Num:
    """A Python number."""
    value: Any


class SizeDims(tuple):
    """Dimensions of the graph (numbers and size-symbol names) in an operation's parameters:
    resolved when the segment is built, after every node has unified its sizes."""


@dataclass
class Call:
    """An operation of :data:`FORMS` on tensor arguments (expressions), with parameters
    (numbers, axes, :class:`SizeDims`) that become constants of its function."""
    form: str
    args: Tuple[Any, ...]
    params: Dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if self.form not in FORMS:
            raise KeyError(f'no operation {self.form!r}')
        self.args = tuple(self.args)


def binary(op: str, a, b) -> Any:
    """``a op b`` of expressions; a number becomes a constant (on the left of ``+`` or ``*``
    only: ATen puts the tensor first, and ``c + x`` is ``x + c``)."""
    if isinstance(a, Num) and op in '+*':
        a, b = b, a
    if isinstance(a, Num):
        raise ValueError(f'a number {op} a tensor')
    if isinstance(b, Num):
        return Call(f'{op}_num', (a, ), {'c': b.value})
    return Call(op, (a, b))


# ---------------------------------------------------------------------- the vocabulary
# Each form is a function of the tensor arguments, or a factory called with the call's
# parameters that returns one. DaCe parses their source (these lines), as it parses a
# user's @dace.program.
def _matmul(a, b):
    return a @ b


def _add(a, b):
    return a + b


def _sub(a, b):
    return a - b


def _mul(a, b):
    return a * b


def _div(a, b):
    return a / b


def _add_num(c):

    def add_num(a):
        return a + c

    return add_num


def _sub_num(c):

    def sub_num(a):
        return a - c

    return sub_num


def _mul_num(c):

    def mul_num(a):
        return a * c

    return mul_num


def _div_num(c):

    def div_num(a):
        return a / c

    return div_num


def _relu(x):
    return np.maximum(x, 0)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _tanh(x):
    return np.tanh(x)


def _exp(x):
    return np.exp(x)


def _neg(x):
    return -x


def _sparse_relu(x):
    return ss.relu(x)


def _sparse_sigmoid(x):
    return ss.sigmoid(x)


def _sparse_tanh(x):
    return ss.tanh(x)


def _sparse_exp(x):
    return ss.exp(x)


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def _gelu(sizes):
    """gelu with ``erf`` (DaCe has no NumPy erf): one element-wise map over the flat arrays,
    written through a view of a new array of ``x``'s shape (a product reading the result
    reads an array, not a view)."""
    n = 1
    for d in sizes:
        n = n * d
    flat = (n, )

    def gelu(x):
        out = np.empty_like(x)
        u = np.reshape(x, flat)
        w = np.reshape(out, flat)
        for i in dace.map[0:n]:
            with dace.tasklet:
                v << u[i]  # noqa: F821 (tasklet syntax)
                o >> w[i]  # noqa: F821
                o = 0.5 * v * (1.0 + erf(v * 0.7071067811865476))  # noqa: F821,F841
        return out

    return gelu


def _transpose(x):
    return np.transpose(x)


def _sparse_transpose(x):
    return x.T  # a view: the same arrays, CSR seen as CSC


def _permute(axes):

    def permute(x):
        return np.transpose(x, axes=axes)

    return permute


def _reshape(shape):

    def reshape(x):
        return np.reshape(x, shape)

    return reshape


def _sum(x):
    return np.sum(x)


def _mean(x):
    return np.mean(x)


def _sum_axis(axis):

    def sum_axis(x):
        return np.sum(x, axis=axis)

    return sum_axis


def _mean_axis(axis):

    def mean_axis(x):
        return np.mean(x, axis=axis)

    return mean_axis


def _sparse_sum_axis(axis):

    def sparse_sum_axis(x):
        return x.sum(axis=axis)

    return sparse_sum_axis


def _einsum(spec):
    """``np.einsum(spec, a, b)`` (sdfgsparse's contraction where an operand is sparse)."""

    def einsum(a, b):
        return np.einsum(spec, a, b)

    return einsum


def _einsum_1(spec):
    """``np.einsum(spec, a)`` of one operand (a sparse tensor's sums, or its dense form)."""

    def einsum_1(a):
        return np.einsum(spec, a)

    return einsum_1


def _softmax(axis, sizes, log):
    """Softmax (or log-softmax) of an ``m x n`` tensor along ``axis``. The exponential runs
    over the flat array: one loop of m * n, vectorised with libmvec; over rows of a few
    columns (a GCN's 7 classes) GCC left a 2-D loop's exp scalar."""
    m, n = sizes
    keep = (m, 1) if axis == 1 else (1, n)
    flat = (m * n, )
    if log:

        def log_softmax(x):
            shift = x - np.reshape(np.max(x, axis=axis), keep)
            e = np.reshape(np.exp(np.reshape(shift, flat)), sizes)
            return shift - np.log(np.reshape(np.sum(e, axis=axis), keep))

        return log_softmax

    def softmax(x):
        shift = x - np.reshape(np.max(x, axis=axis), keep)
        e = np.reshape(np.exp(np.reshape(shift, flat)), sizes)
        return e / np.reshape(np.sum(e, axis=axis), keep)

    return softmax


def _sparse_softmax(axis):

    def sparse_softmax(x):
        return ss.softmax(x, axis=axis)

    return sparse_softmax


def _normalize(sizes, eps):
    """``layer_norm`` without its scale and shift: each row less its mean, over its standard
    deviation (biased, as torch's)."""
    keep = (sizes[0], 1)

    def normalize(x):
        cen = x - np.reshape(np.mean(x, axis=1), keep)
        var = np.reshape(np.mean(cen * cen, axis=1), keep)
        return cen / np.sqrt(var + eps)

    return normalize


def _spones(x):
    return ss.spones(x)


def _sddmm(s, x, y):
    return ss.sddmm(s, x, y)


def _to_csr(x):
    return ss.convert(x, ss.CSR)


def _to_csc(x):
    return ss.convert(x, ss.CSC)


def _copy(x):
    return x.copy()  # a segment result that is another value too, or a sparse value read twice


#: form -> (the function or factory, a factory?, the NumPy notation of :func:`describe`)
FORMS: Dict[str, Tuple[Callable, bool, str]] = {
    'matmul': (_matmul, False, '{0} @ {1}'),
    '+': (_add, False, '{0} + {1}'),
    '-': (_sub, False, '{0} - {1}'),
    '*': (_mul, False, '{0} * {1}'),
    '/': (_div, False, '{0} / {1}'),
    '+_num': (_add_num, True, '{0} + {c!r}'),
    '-_num': (_sub_num, True, '{0} - {c!r}'),
    '*_num': (_mul_num, True, '{0} * {c!r}'),
    '/_num': (_div_num, True, '{0} / {c!r}'),
    'relu': (_relu, False, 'np.maximum({0}, 0)'),
    'sigmoid': (_sigmoid, False, '1.0 / (1.0 + np.exp(-{0}))'),
    'tanh': (_tanh, False, 'np.tanh({0})'),
    'exp': (_exp, False, 'np.exp({0})'),
    'neg': (_neg, False, '-{0}'),
    'sparse_relu': (_sparse_relu, False, 'ss.relu({0})'),
    'sparse_sigmoid': (_sparse_sigmoid, False, 'ss.sigmoid({0})'),
    'sparse_tanh': (_sparse_tanh, False, 'ss.tanh({0})'),
    'sparse_exp': (_sparse_exp, False, 'ss.exp({0})'),
    'gelu_tanh': (_gelu_tanh, False, 'gelu({0}, approximate="tanh")'),
    'gelu': (_gelu, True, 'gelu({0})'),
    'transpose': (_transpose, False, 'np.transpose({0})'),
    'sparse_transpose': (_sparse_transpose, False, '{0}.T'),
    'permute': (_permute, True, 'np.transpose({0}, axes={axes})'),
    'reshape': (_reshape, True, 'np.reshape({0}, {shape})'),
    'sum': (_sum, False, 'np.sum({0})'),
    'mean': (_mean, False, 'np.mean({0})'),
    'sum_axis': (_sum_axis, True, 'np.sum({0}, axis={axis})'),
    'mean_axis': (_mean_axis, True, 'np.mean({0}, axis={axis})'),
    'sparse_sum_axis': (_sparse_sum_axis, True, '{0}.sum(axis={axis})'),
    'einsum': (_einsum, True, 'np.einsum({spec!r}, {0}, {1})'),
    'einsum_1': (_einsum_1, True, 'np.einsum({spec!r}, {0})'),
    'softmax': (_softmax, True, 'softmax({0}, axis={axis}, log={log})'),
    'sparse_softmax': (_sparse_softmax, True, 'ss.softmax({0}, axis={axis})'),
    'normalize': (_normalize, True, 'layer_norm({0}, eps={eps!r})'),
    'spones': (_spones, False, 'ss.spones({0})'),
    'sddmm': (_sddmm, False, 'ss.sddmm({0}, {1}, {2})'),
    'to_csr': (_to_csr, False, 'ss.convert({0}, ss.CSR)'),
    'to_csc': (_to_csc, False, 'ss.convert({0}, ss.CSC)'),
    'copy': (_copy, False, '{0}.copy()'),
}


_OPERATOR = re.compile(r'.* [-+*/@] ')


def describe(expr, names: Dict[str, str], resolve: Callable = lambda p: p) -> str:
    """``expr`` in NumPy notation (the listing of ``CompiledModel.source``)."""
    if isinstance(expr, Ref):
        return names.get(expr.name, expr.name)
    if isinstance(expr, Num):
        return repr(expr.value)
    if isinstance(expr, str):
        return expr
    args = [describe(a, names, resolve) for a in expr.args]
    args = [f'({a})' if isinstance(e, Call) and _OPERATOR.match(FORMS[e.form][2]) else a
            for a, e in zip(args, expr.args)]
    params = {k: resolve(v) for k, v in expr.params.items()}
    return FORMS[expr.form][2].format(*args, **params)


# ---------------------------------------------------------------------- the builder
_PARSED: 'collections.OrderedDict[tuple, dace.SDFG]' = collections.OrderedDict()
_PARSED_MAX = 256
_PARSED_LOCK = threading.Lock()


def _parse(form: str, params: Dict[str, Any], fn: Callable, descs: List) -> dace.SDFG:
    """``fn`` parsed by DaCe's frontend for ``descs``: a copy of the same operation's parse
    for the same descriptors and parameters earlier in this process (the layers of a model
    repeat), else a new one."""
    key = (form, repr(sorted(params.items())), tuple(json.dumps(d.to_json(), sort_keys=True) for d in descs))
    with _PARSED_LOCK:
        hit = _PARSED.get(key)
        if hit is not None:
            _PARSED.move_to_end(key)
    if hit is None:
        with parsing_ours():
            hit = dace.program(fn).to_sdfg(*descs, simplify=False)
        with _PARSED_LOCK:
            _PARSED[key] = hit
            while len(_PARSED) > _PARSED_MAX:
                _PARSED.popitem(last=False)
    return copy.deepcopy(hit)


def _replace_in_members(desc, symrepl) -> None:
    for member in getattr(desc, 'members', {}).values():
        if not isinstance(member, dace.data.Data):  # a symbol (the structure's rows and cols)
            continue
        replace_properties_dict(member, {}, symrepl)
        _replace_in_members(member, symrepl)


class Builder:
    """The SDFG of one segment: its inputs, then one nested SDFG per operation in one state
    (each reads what earlier ones wrote), then :meth:`finish`."""

    def __init__(self, name: str):
        self.sdfg = mark_ours(dace.SDFG(name))
        self.state = self.sdfg.add_state('segment', is_start_block=True)
        self._node: Dict[str, Any] = {}  # data -> its access node in the state
        self._count = 0
        self._taken = set()

    # ------------------------------------------------------------------ data
    def add_input(self, name: str, desc) -> None:
        self._add_data(name, copy.deepcopy(desc), transient=False)
        self.sdfg.arg_names.append(name)

    def _add_data(self, name: str, desc, transient: bool) -> None:
        desc.transient = transient
        self.sdfg.add_datadesc(name, desc)
        for s in sorted(desc.free_symbols, key=str):  # sorted: one SDFG (one build) in every process
            self._add_symbol(s)

    def _add_symbol(self, s, dtype=None) -> None:
        name = str(s)
        if name not in self.sdfg.symbols:
            self.sdfg.add_symbol(name, dtype or getattr(s, 'dtype', None) or dace.int64)

    def desc(self, name: str):
        return self.sdfg.arrays[name]

    def reserve(self, names) -> None:
        """Names :meth:`fresh` must not give (the values of the segment, before they exist)."""
        self._taken.update(names)

    def fresh(self, base: str) -> str:
        """A new data name: ``base`` where it is free, else ``base_<k>``."""
        name = base
        while name in self.sdfg.arrays or name in self._taken or name in self.sdfg.symbols:
            self._count += 1
            name = f'{base}_{self._count}'
        self._taken.add(name)
        return name

    # ------------------------------------------------------------------ operations
    def call(self, form: str, args: Sequence[str], params: Dict[str, Any], out: str, output: bool = False) -> str:
        """Nest ``form`` applied to the data ``args``; its result is the new data ``out``
        (a result of the segment where ``output``). Returns ``out``."""
        fn, factory, _ = FORMS[form]
        if factory:
            fn = fn(**params)
        names = list(inspect.signature(fn).parameters)
        if len(names) != len(args):
            raise TypeError(f'{form} takes {len(names)} tensors, got {len(args)}')
        args = list(args)
        for k, a in enumerate(args):  # one connector per datum: a value read twice is copied
            if a in args[:k]:
                args[k] = self.call('copy', [a], {}, self.fresh(f'{a}_again'))
        descs = []
        for a in args:
            d = copy.deepcopy(self.desc(a))
            d.transient = False
            descs.append(d)
        g = _parse(form, params, fn, descs)
        if '__return' not in g.arrays:
            raise TypeError(f'{form} returned no single value')
        repl = dict(zip(names, args))
        repl['__return'] = out
        for name in list(g.arrays):
            if name not in repl and name in self.sdfg.arrays:  # an inner datum named like one of ours
                repl[name] = self.fresh(f'{name}_in')
        caps = self._capacities(g, dict(zip(names, args)))
        g.replace_dict({k: v for k, v in repl.items() if k != v})  # (DaCe drops a datum renamed to itself)
        if caps:  # a symbol's new name in the symbols, memlets and shapes; DaCe's replace skips structure members
            g.replace_dict(caps)
            symrepl = {dace.symbol(k): dace.symbol(v) for k, v in caps.items()}
            for desc in g.arrays.values():
                _replace_in_members(desc, symrepl)
        g.name = self.fresh(f'{form.replace("+", "add").replace("-", "sub").replace("*", "mul").replace("/", "div")}')
        g.arg_names = []
        ret = g.arrays[out]
        self._add_data(out, copy.deepcopy(ret), transient=not output)
        inner = sorted(map(str, g.free_symbols))
        for s in inner:
            self._add_symbol(s, g.symbols.get(s))
        ins = {a: self._read(a) for a in args}
        node = self.state.add_nested_sdfg(g, self.sdfg, {a: None for a in args}, {out: None},
                                          {s: dace.symbol(s, self.sdfg.symbols[s]) for s in inner})
        for a, acc in ins.items():
            self.state.add_edge(acc, None, node, a, dace.Memlet.from_array(a, self.desc(a)))
        w = self.state.add_write(out)
        self.state.add_edge(node, out, w, None, dace.Memlet.from_array(out, self.desc(out)))
        self._node[out] = w
        return out

    def _read(self, name: str):
        node = self._node.get(name)
        if node is None:
            node = self._node[name] = self.state.add_read(name)
        return node

    def _capacities(self, g, args: Dict[str, str]) -> Dict:
        """SpGEMM capacity symbols name their operands (runtime/capacity.py): rename them to
        the segment's data."""
        out = {}
        for name in sorted(map(str, g.free_symbols)):
            if not name.startswith(CAPACITY_PREFIX):
                continue
            _, a, ta, b, tb = name.split('__')
            new = capacity_symbol(args.get(a, a), ta == '1', args.get(b, b), tb == '1',
                                  taken=list(self.sdfg.symbols) + list(out.values()))
            out[name] = new
        return out

    # ------------------------------------------------------------------ the end
    def finish(self) -> dace.SDFG:
        """Inline the operations into one dataflow (DaCe's simplification), put the edges in
        one order (``ArrayElimination`` leaves them in an order that changes from process to
        process: another build each time) and validate."""
        self.sdfg.simplify()
        canonical_edge_order(self.sdfg)
        self.sdfg.validate()
        return self.sdfg
