"""Every expression and Python code string of an SDFG file checked against a strict
grammar before DaCe parses it.

DaCe's ``SDFG.from_json`` reads shapes, strides, offsets, symbols, memlet subsets,
interstate conditions and assignments, loop bounds and library-node properties with
``sympy.sympify``, which ``eval``s its text: a file whose array shape is
``getattr(__import__('os'),'system')('touch PWNED')`` runs that command as it loads.
:func:`check_sdfg_json` walks the parsed JSON first and refuses (:class:`UnsafeSDFGError`,
naming the file and the JSON path of the field) any string that is not:

- an *expression* (every string value and dictionary key outside the free-text fields
  :data:`TEXT_KEYS`): names (not dunder), numbers, ``True``/``False``/``None``,
  arithmetic, bitwise, comparison and boolean operators, ``a if c else b``, subscripts
  ``A[i, j]``, slices, tuples, attribute access ``A.rows`` (no name starting with ``_``
  after a dot), lambdas of such expressions (write-conflict resolutions
  ``lambda x, y: x + y``, which DaCe ``eval``s) and calls of the functions in
  :data:`EXPRESSION_FUNCTIONS` by name or of ``math.f`` / ``np.f`` / ``dace.f`` for a public
  ``f`` (``dace.float64(0)``); no ``__name__``-style names;
- in a Python code block (``{"string_data": ..., "language": "Python"}``: tasklet code,
  interstate and loop conditions, loop init / update statements), *statements* made of
  such expressions: assignments (also augmented and annotated), expression statements,
  ``if`` / ``for`` / ``while`` / ``pass`` / ``break`` / ``continue`` / ``return``, and also
  calls of the math functions and casts of :data:`CODE_FUNCTIONS`. No imports, no function or class definitions, no lambdas, comprehensions,
  f-strings, ``global``, ``with``, ``try`` or ``del``; no string constants anywhere (DaCe's
  ``Min("...")`` would hand the string to ``sympify`` again).

A ``classpath`` (which DaCe imports) must name a class of DaCe or sdfgsparse.

Code in another language (C++ tasklets) is not parsed by Python when a file loads; it is
compiled only when the program is built (``sdfgsparse run``), which runs it by design.
"""
import ast
import re
from typing import Any, List

from sdfgsparse import errors

__all__ = ['UnsafeSDFGError', 'check_sdfg_json', 'check_expression', 'check_code', 'TEXT_KEYS',
           'EXPRESSION_FUNCTIONS', 'CODE_FUNCTIONS']


class UnsafeSDFGError(errors.SparseError, ValueError):
    """An SDFG file holds a string that DaCe would evaluate and that is not a plain
    expression (or, in Python code, plain statements)."""


#: Keys whose string values are free text that DaCe never parses as code: labels, names of
#: the producing program, file names of debug information, docstrings, implementation names,
#: the I/O lower bound SparseIOLowerBound writes on each sparse node ('Q >= ... words (SpMM; ...)')
#: and its report in the SDFG's sparse_notes (sizes named as users name them: 'nnz(A)'); written
#: for people, read by nothing.
TEXT_KEYS = frozenset({
    'label', 'filename', 'debuginfo', 'doc', 'docstring', 'desc', 'implementation', 'name', 'dace_version', 'guid',
    'hash', 'reason', 'io_lower_bound'
})
#: Those of :data:`TEXT_KEYS` whose value may be a whole JSON tree of text.
_TEXT_TREES = ('debuginfo', 'config', 'io_lower_bound')

#: Functions an expression may call by name (DaCe's and SymPy's integer and boolean helpers).
EXPRESSION_FUNCTIONS = frozenset({
    'abs', 'min', 'max', 'Abs', 'Min', 'Max', 'floor', 'ceil', 'ceiling', 'round', 'int_floor', 'int_ceil',
    'Mod', 'mod', 'And', 'Or', 'Not', 'Xor', 'AND', 'OR', 'Eq', 'Ne', 'Lt', 'Le', 'Gt', 'Ge', 'GtE', 'LtE',
    'NotEq', 'Is', 'IsNot', 'BitwiseAnd', 'BitwiseOr', 'BitwiseXor', 'BitwiseNot', 'bitwise_and',
    'bitwise_or', 'bitwise_xor', 'bitwise_invert', 'LeftShift', 'left_shift', 'RightShift', 'right_shift',
    'IfExpr', 'Attr', 'ROUND_UP', 'ROUND_DOWN', 'Piecewise', 'ITE', 'sqrt', 'exp', 'log', 'Pow', 'sign', 'int',
    'float', 'bool', 'Integer', 'Rational', 'Float', 'int_ceiling'
})

#: Further functions Python code (tasklets) may call by name: math and DaCe's type casts.
CODE_FUNCTIONS = EXPRESSION_FUNCTIONS | frozenset({
    'sin', 'cos', 'tan', 'asin', 'acos', 'atan', 'atan2', 'sinh', 'cosh', 'tanh', 'asinh', 'acosh', 'atanh',
    'log2', 'log10', 'log1p', 'expm1', 'pow', 'fabs', 'fmin', 'fmax', 'fmod', 'copysign', 'isnan', 'isinf',
    'isfinite', 'hypot', 'erf', 'erfc', 'trunc', 'exp2', 'cbrt', 'reciprocal', 'heaviside', 'ipow', 'complex',
    'float16', 'float32', 'float64', 'int8', 'int16', 'int32', 'int64', 'uint8', 'uint16', 'uint32', 'uint64',
    'bool_', 'complex64', 'complex128', 'conj', 'real', 'imag'
})

#: What a ``classpath`` (of a library node or an expansion, which DaCe imports with
#: ``pydoc.locate``) may start with: a class of DaCe's or ours, never a module of the folder.
CLASSPATH_PREFIXES = ('dace.', 'sdfgsparse.')

#: Modules whose public functions Python code may call as ``module.f(...)``.
CODE_MODULES = frozenset({'math', 'cmath', 'np', 'numpy', 'dace', 'dace.math'})

_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*\Z')

_EXPR_NODES = (ast.Expression, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Compare, ast.IfExp, ast.Subscript,
               ast.Slice, ast.Tuple, ast.List, ast.Set, ast.Name, ast.Load, ast.Store, ast.Constant, ast.Attribute, ast.Call,
               ast.keyword, ast.operator, ast.unaryop, ast.cmpop, ast.boolop, ast.expr_context, ast.Lambda,
               ast.arguments, ast.arg)
_CODE_NODES = _EXPR_NODES + (ast.Module, ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.If, ast.For,
                             ast.While, ast.Pass, ast.Break, ast.Continue, ast.Return)


def _problem(tree: ast.AST, functions: frozenset, code: bool) -> str:
    """What is not allowed in ``tree`` ('' when all is)."""
    allowed = _CODE_NODES if code else _EXPR_NODES
    for node in ast.walk(tree):
        if not isinstance(node, allowed):
            return f'{type(node).__name__} is not allowed'
        if isinstance(node, ast.Name) and node.id.startswith('__') and node.id.endswith('__'):
            return f'the name {node.id} is not allowed'
        if isinstance(node, ast.Attribute) and node.attr.startswith('_'):
            return f'the attribute .{node.attr} is not allowed'
        if isinstance(node, ast.Constant) and not (node.value is None or isinstance(node.value, (bool, int, float,
                                                                                                  complex))):
            return f'a {type(node.value).__name__} constant is not allowed'
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in functions:
                continue
            if isinstance(func, ast.Attribute) and _dotted(func.value) in CODE_MODULES:
                continue
            return f'a call of {_describe_callee(func)} is not allowed'
    return ''


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f'{inner}.{node.attr}' if inner else ''
    return ''


def _describe_callee(func: ast.AST) -> str:
    return _dotted(func) or type(func).__name__


def _parse(text: str, mode: str):
    try:
        return ast.parse(text, mode=mode), ''
    except (SyntaxError, ValueError) as exc:  # ValueError: a NUL byte
        return None, f'not Python syntax ({getattr(exc, "msg", exc)})'


def check_expression(text: str) -> str:
    """'' when ``text`` is an expression of the grammar, else what is wrong with it."""
    if _NAME.match(text) or not text.strip():
        return ''
    tree, why = _parse(text.strip(), 'eval')
    return why or _problem(tree, EXPRESSION_FUNCTIONS, code=False)


def check_code(text: str) -> str:
    """'' when ``text`` is Python code of the grammar (statements of expressions), else
    what is wrong with it."""
    import textwrap
    tree, why = _parse(textwrap.dedent(text), 'exec')
    return why or _problem(tree, CODE_FUNCTIONS, code=True)


def _is_code_block(value: dict) -> bool:
    return isinstance(value.get('string_data'), str) and 'language' in value


def check_sdfg_json(content: Any, source: str) -> None:
    """Raise :class:`UnsafeSDFGError` (``<source>: field <json path>: ...``) at the first
    string of the parsed SDFG file ``content`` outside the grammar (module docstring)."""
    stack: List[tuple] = [(content, '$')]
    while stack:
        value, path = stack.pop()
        why = ''
        if isinstance(value, str):
            why = check_expression(value)
            if not why and path.endswith('.classpath') and not value.startswith(CLASSPATH_PREFIXES):
                why = f'a class outside {" and ".join(p.rstrip(".") for p in CLASSPATH_PREFIXES)} (DaCe would import it)'
        elif isinstance(value, dict):
            if _is_code_block(value):
                language = str(value.get('language') or '')
                if language.lower().startswith('python') or not language:
                    why = check_code(value['string_data'])
                    path = f'{path}.string_data'
                elif not isinstance(language, str) or check_expression(language):
                    why = 'an unknown language'
            else:
                for key, item in value.items():
                    if not isinstance(key, str) or check_expression(key):
                        why = f'the key {str(key)[:60]!r} is not a name or an expression'
                        break
                    if key in TEXT_KEYS and (isinstance(item, str) or key in _TEXT_TREES):
                        continue
                    stack.append((item, f'{path}.{key}' if _NAME.match(key) else f'{path}[{key!r}]'))
        elif isinstance(value, list):
            stack.extend((item, f'{path}[{i}]') for i, item in enumerate(value))
        if why:
            shown = value if isinstance(value, str) else value.get('string_data', '') if isinstance(value, dict) \
                else ''
            shown = shown.strip().replace('\n', '; ')
            shown = f' {shown[:80]!r}{"..." if len(shown) > 80 else ""}' if shown else ''
            raise UnsafeSDFGError(f'{source}: field {path}:{shown}: {why}; the file is refused (DaCe would evaluate '
                                  'it as it loads)')
