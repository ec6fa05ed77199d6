"""Symbolic iteration counts of an SDFG: how many times its innermost statements run.

``iteration_count(sdfg)`` sums, over every state, the iterations of the loop nests the
state will generate:

- a tasklet outside any map: 1; inside maps: the product of the enclosing map sizes;
- a nested SDFG: its own count, times the enclosing map sizes;
- a sparse library node: the iterations of its expansion's loop nest, stated in
  :data:`SPARSE_MODELS` (``nnz`` is the operand's number of value slots, as a symbolic
  expression of its size symbols): SpMV ``nnz``, SpMM ``nnz * K``, SDDMM ``nnz * K``,
  SpGEMM the product count (its result capacity), element-wise and conversion passes
  ``nnz``, sparse + dense ``nnz + M * N`` …;
- DaCe's dense ``MatMul``: ``M * N * K`` (``M * K`` for a matrix-vector product);
  other library nodes: the size of their output.

States inside loops count once (a count per execution of the program's straight-line
body), which is what comparisons of two versions of the same program need: the
transformations of :mod:`sdfgsparse.transformations` do not move work across loops.

The count is what tests use to prove that a loop order avoids an asymptotic cliff
(``S * (X @ Y)``: ``M * N * K`` before :class:`SparseLoopOrdering`, ``nnz * K`` after).
"""
from typing import Callable, Dict

import dace
import sympy
from dace.sdfg import nodes

from sdfgsparse.formats import SparseType

__all__ = ['iteration_count', 'node_iterations', 'SPARSE_MODELS']


def _sym(expr) -> sympy.Expr:
    return sympy.sympify(dace.symbolic.pystr_to_symbolic(str(expr)))


def _nnz(st: SparseType) -> sympy.Expr:
    return _sym(st.fmt.counts(st.shape, st.sizes)[-1])


def _shape(node, state, conn):
    return [_sym(s) for s in node.connected(state, conn).shape]


def _cols(node, state, conn):
    shape = _shape(node, state, conn)
    return shape[1] if len(shape) == 2 else sympy.Integer(1)


def _first(node, state, conn_prefix='A'):
    return _nnz(node.sparse_type(state, conn_prefix))


def _sum_inputs(node, state):
    return sum((_nnz(node.sparse_type(state, p)) for p in node.SPARSE_INPUTS), sympy.Integer(0))


def _spgemm(node, state):
    vals = node.member_arrays(state, 'out')['vals']
    return _sym(vals.shape[0])


def _add_dense(node, state):
    st = node.sparse_type(state, 'A')
    return _nnz(st) + _sym(st.rows) * _sym(st.cols)


def _dense_spmm(node, state):
    shape = _shape(node, state, '_C')
    return _first(node, state) * (shape[0] if len(shape) == 2 else 1)


def _attention(node, state):
    q = _shape(node, state, '_Q')
    v = _shape(node, state, '_V')
    return _first(node, state, 'S') * (q[-1] + v[-1])


#: library node class name -> iterations of its expansion's loop nest
SPARSE_MODELS: Dict[str, Callable] = {
    'SpMV': lambda n, s: _first(n, s),
    'SpMM': lambda n, s: _first(n, s) * _cols(n, s, '_Y'),
    'DenseSpMM': _dense_spmm,
    'SDDMM': lambda n, s: _first(n, s, 'S') * _shape(n, s, '_X')[1],
    'SparseMulDense': lambda n, s: _first(n, s),
    'SparseAddDense': _add_dense,
    'MapValues': lambda n, s: _first(n, s),
    'SparseSum': lambda n, s: _first(n, s),
    'SparseSoftmax': lambda n, s: 3 * _sum_inputs(n, s),
    'SparseAttention': _attention,
    'Convert': lambda n, s: _first(n, s),
    'SparseAdd': _sum_inputs,
    'SparseMul': _sum_inputs,
    'SpGEMM': _spgemm,
}


def _dense_library(node, state, sdfg) -> sympy.Expr:
    name = type(node).__name__
    ins = {e.dst_conn: e for e in state.in_edges(node)}
    if name == 'MatMul' and '_a' in ins and '_b' in ins:
        a = [_sym(s) for s in sdfg.arrays[ins['_a'].data.data].shape]
        b = [_sym(s) for s in sdfg.arrays[ins['_b'].data.data].shape]
        if len(a) == 2 and len(b) == 2:
            return a[0] * a[1] * b[1]
        if len(a) == 2 and len(b) == 1:
            return a[0] * a[1]
        if len(a) == 1 and len(b) == 2:
            return b[0] * b[1]
        return a[-1]
    total = sympy.Integer(0)
    for e in state.out_edges(node):
        total += _sym(e.data.subset.num_elements())
    return total


def node_iterations(node: nodes.Node, state: dace.SDFGState) -> sympy.Expr:
    """Iterations of one node that is not inside a map (a library node, tasklet, nested SDFG)."""
    sdfg = state.parent
    if isinstance(node, nodes.LibraryNode):
        model = SPARSE_MODELS.get(type(node).__name__)
        if model is not None:
            return sympy.expand(model(node, state))
        return _dense_library(node, state, sdfg)
    if isinstance(node, nodes.NestedSDFG):
        return iteration_count(node.sdfg)
    if isinstance(node, nodes.Tasklet):
        return sympy.Integer(1)
    return sympy.Integer(0)


def _scope_count(state, entry, children) -> sympy.Expr:
    volume = sympy.Integer(1)
    for size in entry.map.range.size():
        volume *= _sym(size)
    inner = sympy.Integer(0)
    for child in children.get(entry, []):
        if isinstance(child, nodes.MapEntry):
            inner += _scope_count(state, child, children)
        elif not isinstance(child, (nodes.MapExit, nodes.AccessNode)):
            inner += node_iterations(child, state)
    return volume * inner


def iteration_count(sdfg: dace.SDFG) -> sympy.Expr:
    """Total iterations of the SDFG's loop nests (see the module docstring)."""
    total = sympy.Integer(0)
    for state in sdfg.states():
        children = state.scope_children()
        for node in children.get(None, []):
            if isinstance(node, nodes.MapEntry):
                total += _scope_count(state, node, children)
            elif not isinstance(node, (nodes.AccessNode, nodes.MapExit)):
                total += node_iterations(node, state)
    return sympy.expand(total)
