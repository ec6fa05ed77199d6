"""Element-wise epilogues fused into sparse kernels (set by ``SparseEpilogueFusion``).

A node carries its epilogue as a Python expression of ``__value`` (the node's own result
element) and of extra inputs (node connectors ``_epi_<name>``), each with an index template
over the output dimensions: ``max(__value + _epi_b0[{1}], 0)`` reads ``_epi_b0[k]`` for the
output element ``[i, k]``. Fusing a second map composes: its expression takes the first one
as ``__value``.
"""
import ast
from typing import Dict, Sequence

__all__ = ['EPI_PREFIX', 'VALUE', 'NUMPY_CALLS', 'substitute', 'epilogue_expression', 'node_epilogue',
           'emit_epilogue_pass', 'compose', 'program_expressible']

#: Prefix of the node connectors that carry the epilogue's extra inputs.
EPI_PREFIX = '_epi_'
#: Name of the node's own result in an epilogue expression.
VALUE = '__value'


class _Rename(ast.NodeTransformer):

    def __init__(self, repl: Dict[str, str]):
        self.repl = repl

    def visit_Name(self, node: ast.Name):
        if node.id in self.repl:
            return ast.copy_location(ast.parse(self.repl[node.id], mode='eval').body, node)
        return node


def substitute(expr: str, repl: Dict[str, str]) -> str:
    """``expr`` with the names of ``repl`` replaced by their expressions."""
    return ast.unparse(_Rename(repl).visit(ast.parse(expr, mode='eval').body))


def compose(outer_code: str, value_conn: str, renames: Dict[str, str], inner_expr: str) -> str:
    """The expression of a tasklet ``__out = f(value_conn, ...)`` applied to ``inner_expr``,
    its other connectors renamed (``renames``)."""
    assign = ast.parse(outer_code).body[0]
    repl = {value_conn: f'({inner_expr})', **renames}
    return ast.unparse(_Rename(repl).visit(assign.value))


def epilogue_expression(expr: str, value: str, inputs: Dict[str, str], index: Sequence[str]) -> str:
    """An epilogue expression in terms of the kernel's names.

    :param value: the kernel expression of the node's result element (``acc``, ``_Y[i, k]``).
    :param inputs: extra input connector -> index template (``'{1}'``).
    :param index: the kernel expressions of the output indices.
    """
    repl = {VALUE: f'({value})'}
    for conn, template in inputs.items():
        idx = template.format(*index)
        repl[conn] = f'{conn}[{idx or 0}]'
    return substitute(expr, repl)


#: Functions of tasklet code (C's names, which DaCe's tasklets call bare: ``tanh(__in1)``)
#: as the NumPy functions that a ``@dace.program`` statement can call on one element.
NUMPY_CALLS = {
    'exp': 'np.exp', 'log': 'np.log', 'tanh': 'np.tanh', 'sin': 'np.sin', 'cos': 'np.cos', 'tan': 'np.tan',
    'sqrt': 'np.sqrt', 'floor': 'np.floor', 'ceil': 'np.ceil', 'exp2': 'np.exp2', 'log2': 'np.log2',
    'log10': 'np.log10', 'sinh': 'np.sinh', 'cosh': 'np.cosh', 'asin': 'np.arcsin', 'acos': 'np.arccos',
    'atan': 'np.arctan', 'fabs': 'np.abs', 'pow': 'np.power', 'log1p': 'np.log1p', 'expm1': 'np.expm1',
    'fmax': 'np.fmax', 'fmin': 'np.fmin',
}

#: The code of the ``np.maximum`` / ``np.minimum`` tasklets in our programs (the frontend
#: writes them, :mod:`sdfgsparse.frontends.numpy`): NaN in either operand gives NaN, as in
#: NumPy. DaCe 1.0.2's own (``dace/frontend/python/replacements.py``) are ``max(a, b)`` /
#: ``min(a, b)``, C++'s ``a > b ? a : b``, which returns ``b`` when ``a`` is NaN:
#: ``np.maximum(A @ X, 0)`` (the GCN layer) turned a NaN into 0. The first operand is returned
#: when it is NaN or wins the comparison, else the second (a NaN second operand loses every
#: comparison and is returned). ``np.fmax`` / ``np.fmin`` already ignore NaN; the reductions
#: are DaCe's.
NAN_UFUNC_CODE = {
    'maximum': '__out = __in1 if (__in1 > __in2 or __in1 != __in1) else __in2',
    'minimum': '__out = __in1 if (__in1 < __in2 or __in1 != __in1) else __in2',
}

#: The comparison of a NaN-propagating extremum ``a if (a > b or a != a) else b`` (the code of
#: :data:`NAN_UFUNC_CODE`) -> the NumPy function that computes it in a statement of a
#: ``@dace.program``.
_EXTREMA = {ast.Gt: 'np.maximum', ast.Lt: 'np.minimum'}


def _same(a: ast.AST, b: ast.AST) -> bool:
    return ast.dump(a) == ast.dump(b)


def _extremum(node: ast.IfExp):
    """``np.maximum(a, b)`` (or ``np.minimum``) for ``a if (a > b or a != a) else b``
    (``<``), else None."""
    test, a, b = node.test, node.body, node.orelse
    if not (isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) and len(test.values) == 2):
        return None
    cmp, nan = test.values
    if not all(isinstance(c, ast.Compare) and len(c.ops) == 1 for c in (cmp, nan)):
        return None
    fn = _EXTREMA.get(type(cmp.ops[0]))
    if (fn is None or not isinstance(nan.ops[0], ast.NotEq) or not _same(cmp.left, a)
            or not _same(cmp.comparators[0], b) or not _same(nan.left, a) or not _same(nan.comparators[0], a)):
        return None
    return ast.Call(func=ast.parse(fn, mode='eval').body, args=[a, b], keywords=[])


class _NumpyCalls(ast.NodeTransformer):

    def visit_Call(self, node: ast.Call):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in NUMPY_CALLS:
            node.func = ast.parse(NUMPY_CALLS[node.func.id], mode='eval').body
        return node

    def visit_IfExp(self, node: ast.IfExp):
        self.generic_visit(node)
        return _extremum(node) or node


def _statement_expression(expr: str) -> ast.AST:
    return _NumpyCalls().visit(ast.parse(expr, mode='eval').body)


def program_expressible(expr: str) -> bool:
    """Whether the CPU kernels can write epilogue ``expr`` as a statement of a
    ``@dace.program`` (:func:`node_epilogue`): every conditional expression in it is a
    NaN-propagating extremum (a statement has no ``a if c else b``)."""
    return not any(isinstance(n, ast.IfExp) for n in ast.walk(_statement_expression(expr)))


def node_epilogue(node, value: str, index: Sequence[str]) -> str:
    """The node's epilogue applied to ``value`` at output ``index`` (``value`` itself when
    the node has none), as a statement of a ``@dace.program`` (the CPU kernels): C math
    functions of the tasklet code become NumPy's (:data:`NUMPY_CALLS`; a bare ``tanh``
    does not parse there), which the kernels' namespace provides as ``np``, and the
    NaN-propagating extrema of ``np.maximum`` / ``np.minimum`` tasklets (``a if (a > b or
    a != a) else b``, a form a statement cannot hold) become those calls again."""
    if not getattr(node, 'epilogue', ''):
        return value
    expr = epilogue_expression(node.epilogue, value, dict(node.epilogue_inputs), index)
    return ast.unparse(_statement_expression(expr))


def emit_epilogue_pass(kb, node, target: str, shape: Sequence):
    """A parallel pass applying the node's epilogue to every element of ``target``."""
    if not getattr(node, 'epilogue', ''):
        return
    from sdfgsparse._symbolic import pyexpr
    idx = [f'z{d}' for d in range(len(shape))]
    kb.line(f'for {", ".join(idx)} in dace.map[{", ".join(f"0:{pyexpr(s)}" for s in shape)}]:')
    el = f'{target}[{", ".join(idx)}]'
    kb.line(f'    {el} = {node_epilogue(node, el, idx)}')
