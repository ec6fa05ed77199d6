"""The grammars a string of an SDFG file must meet, by how DaCe will read it.

:mod:`sdfgsparse.scripting.sdfg_schema` walks a file by DaCe's serialisation schema and
hands each string to the check of its kind (DaCe reads the string as such, whatever the
file calls it):

- an *expression* (:func:`check_expression`; ``sympify`` evaluates it: shapes, strides,
  subsets, symbolic properties, interstate assignments, write-conflict lambdas): names
  (not dunder), numbers, ``True``/``False``/``None``, arithmetic, bitwise, comparison and
  boolean operators, ``a if c else b``, subscripts, slices, tuples, attribute access (no
  name starting with ``_`` after a dot), lambdas of such expressions and calls of the
  functions in :data:`EXPRESSION_FUNCTIONS` by name or of ``math.f`` / ``np.f`` /
  ``dace.f`` for a public ``f``; no string constants (``Min("...")`` would reach
  ``sympify`` again);
- *Python code* (:func:`check_code`; tasklets, interstate and loop conditions, loop
  statements): statements of such expressions (assignments, ``if`` / ``for`` / ``while``
  / ``pass`` / ``break`` / ``continue`` / ``return``) and calls of
  :data:`CODE_FUNCTIONS`; no imports, definitions, comprehensions, ``global``, ``with``,
  ``try`` or ``del``;
- *C++ code* (:func:`check_cpp`; C++ tasklets and the SDFG's global / init / exit code,
  which the code generator pastes into the program it builds): identifiers, numbers and
  operators; calls only of our leaf functions (``sdfgsparse::f``, ``dace::f``,
  ``ss_f`` / ``__ss_f``), the math functions and scalar casts; no string or character
  literals but ``#include "sdfgsparse_*.h"``, no other preprocessor line than
  ``#ifndef`` / ``#define NAME`` / ``#endif`` / ``#pragma omp``, no ``asm``, attributes,
  ``typedef``, ``using``, function pointers or calls through an expression;
- a *name* (:func:`check_name`; data, symbols, connectors, map parameters, the SDFG's
  name; the code generator writes them as identifiers): a dotted identifier;
- *text* (:func:`check_text`; debug file names, guids, versions: never evaluated, but
  written into comments): one line without quotes, backslashes or ``*/``.
"""
import ast
import re
import textwrap

from sdfgsparse import errors

__all__ = ['UnsafeSDFGError', 'check_expression', 'check_code', 'check_cpp', 'check_name', 'check_text',
           'check_subset_text', 'EXPRESSION_FUNCTIONS', 'CODE_FUNCTIONS', 'CLASSPATH_PREFIXES']


class UnsafeSDFGError(errors.SparseError, ValueError):
    """An SDFG file holds a key DaCe's schema does not have, or a string that DaCe would
    evaluate or compile and that is not of its kind's grammar."""


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
_DOTTED_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z')

_EXPR_NODES = (ast.Expression, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Compare, ast.IfExp, ast.Subscript,
               ast.Slice, ast.Tuple, ast.List, ast.Set, ast.Name, ast.Load, ast.Store, ast.Constant, ast.Attribute,
               ast.Call, ast.keyword, ast.operator, ast.unaryop, ast.cmpop, ast.boolop, ast.expr_context, ast.Lambda,
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
        if isinstance(node, ast.Constant) and not (node.value is None or isinstance(node.value,
                                                                                    (bool, int, float, complex))):
            return f'a {type(node.value).__name__} constant is not allowed'
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in functions:
                continue
            if isinstance(func, ast.Attribute) and _dotted(func.value) in CODE_MODULES:
                continue
            return f'a call of {_dotted(func) or type(func).__name__} is not allowed'
    return ''


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f'{inner}.{node.attr}' if inner else ''
    return ''


def _parse(text: str, mode: str):
    try:
        return ast.parse(text, mode=mode), ''
    except (SyntaxError, ValueError) as exc:  # ValueError: a NUL byte
        return None, f'not Python syntax ({getattr(exc, "msg", exc)})'


def check_expression(text: str) -> str:
    """'' when ``text`` is an expression of the grammar, else what is wrong with it."""
    if not isinstance(text, str):
        return f'a {type(text).__name__} where an expression belongs'
    if _NAME.match(text) or not text.strip():
        return ''
    if '\n' in text or '\r' in text:
        return 'a line break in an expression is not allowed'
    tree, why = _parse(text.strip(), 'eval')
    return why or _problem(tree, EXPRESSION_FUNCTIONS, code=False)


def check_subset_text(text: str) -> str:
    """'' when ``text`` is a subset written as text (``0:N, i``: expressions separated by
    ``,`` and ``:``), else what is wrong with it."""
    if not isinstance(text, str):
        return f'a {type(text).__name__} where a subset belongs'
    for part in re.split(r'[,:]', text):
        why = check_expression(part)
        if why:
            return why
    return ''


def check_code(text: str) -> str:
    """'' when ``text`` is Python code of the grammar (statements of expressions), else
    what is wrong with it."""
    if not isinstance(text, str):
        return f'a {type(text).__name__} where code belongs'
    tree, why = _parse(textwrap.dedent(text), 'exec')
    return why or _problem(tree, CODE_FUNCTIONS, code=True)


def check_name(text: str) -> str:
    """'' when ``text`` is a (dotted) identifier, else what is wrong with it."""
    if not isinstance(text, str):
        return f'a {type(text).__name__} where a name belongs'
    return '' if _DOTTED_NAME.match(text) else 'not a name'


def check_text(text: str) -> str:
    """'' when ``text`` is one line of text that cannot leave a C++ comment or string."""
    if not isinstance(text, str):
        return f'a {type(text).__name__} where text belongs'
    if any(c in text for c in '"\'\\\n\r\0') or '*/' in text or '??' in text:
        return 'text with a quote, a backslash, a line break or */'
    return ''


# --- C++ ---------------------------------------------------------------------------------------------------------

_CPP_TOKEN = re.compile(r'''
    (?P<space>\s+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\s*::\s*[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<number>(?:\d|\.\d)(?:[0-9A-Za-z_.]|[eEpP][+-])*)
  | (?P<op>::|->\*?|\+\+|--|<<=|>>=|<=|>=|==|!=|&&|\|\||[-+*/%&|^]=|[-+*/%<>=!&|^~?:;,.()\[\]{}])
''', re.VERBOSE | re.DOTALL)

#: Leaf functions C++ code may call: ours and DaCe's runtime, by qualified prefix or by name prefix.
CPP_CALL_PREFIXES = ('sdfgsparse::', 'dace::', 'ss_', '__ss_', 'sdfgsparse_')
#: C++ words a call-like ``word(`` may be besides a function: statements, casts, scalar types and the
#: storage checks' export macro (include/sdfgsparse_storage_check.h), which a kernel's global code holds.
_CPP_SCALARS = frozenset({
    'int', 'long', 'short', 'char', 'unsigned', 'signed', 'float', 'double', 'bool', 'const', 'size_t',
    'int8_t', 'int16_t', 'int32_t', 'int64_t', 'uint8_t', 'uint16_t', 'uint32_t', 'uint64_t', 'void', 'auto',
    'volatile', 'ptrdiff_t'
})
#: The float forms of the C math functions (``CODE_FUNCTIONS`` holds the double ones).
_CPP_FLOAT_MATH = frozenset({'sqrtf', 'expf', 'logf', 'fabsf', 'fmaxf', 'fminf', 'powf'})
_CPP_CALLABLE_WORDS = frozenset({'if', 'for', 'while', 'switch', 'return', 'sizeof', 'alignof', 'static_cast',
                                 'const_cast', 'DACE_EXPORTED', 'SDFGSPARSE_STORAGE_CHECK_EXPORTS'}) | _CPP_SCALARS
#: Words that change what C++ code can reach (inline assembly, attributes such as
#: ``constructor``, type aliases that hide a function pointer, the C library's process calls).
_CPP_FORBIDDEN = frozenset({
    'asm', '__asm', '__asm__', '_Pragma', '__attribute__', '__declspec', 'typedef', 'using', 'decltype',
    'typeof', '__typeof__', 'goto', 'extern', 'operator', 'friend', 'reinterpret_cast', 'dlopen', 'dlsym',
    'system', 'popen', 'execl', 'execlp', 'execle', 'execv', 'execvp', 'execve', 'fork', 'vfork', 'syscall',
    'std', 'posix_spawn', 'getenv', 'setenv', 'putenv', 'fopen', 'open', 'unlink', 'remove', 'rename',
    '__builtin_apply', 'signal', 'atexit', 'at_quick_exit', 'longjmp', 'setjmp', 'mprotect', 'mmap'
})
_INCLUDE = re.compile(r'#\s*include\s*"sdfgsparse_[A-Za-z0-9_]+\.h"\s*\Z')
_GUARD = re.compile(r'#\s*(?:ifndef|define)\s+[A-Za-z_][A-Za-z0-9_]*\s*\Z|#\s*endif\s*\Z|#\s*pragma\s+once\s*\Z')
_PRAGMA_OMP = re.compile(r'#\s*pragma\s+omp(?:\s+[A-Za-z_][A-Za-z0-9_]*(?:\s*\([A-Za-z0-9_,:+*\s]*\))?)*\s*\Z')


def check_cpp(text: str) -> str:
    """'' when ``text`` is C++ of the leaf-call grammar (module docstring), else what is
    wrong with it."""
    if not isinstance(text, str):
        return f'a {type(text).__name__} where code belongs'
    if '\\' in text or '??' in text:
        return 'a backslash (or a trigraph) in C++ code is not allowed'
    body = []
    for line in text.split('\n'):
        stripped = line.strip()
        if stripped.startswith('#'):
            if not (_INCLUDE.match(stripped) or _GUARD.match(stripped) or _PRAGMA_OMP.match(stripped)):
                return f'the preprocessor line {stripped[:40]!r} is not allowed'
            body.append('')
        else:
            body.append(line)
    code = '\n'.join(body)
    tokens = []
    pos = 0
    while pos < len(code):
        m = _CPP_TOKEN.match(code, pos)
        if m is None:
            return f'the character {code[pos]!r} is not allowed in C++ code (no string or character literals)'
        pos = m.end()
        kind = m.lastgroup
        if kind in ('space', 'comment'):
            continue
        value = re.sub(r'\s+', '', m.group(kind))
        tokens.append((kind, value))
    return _cpp_problem(tokens)


def _cpp_problem(tokens) -> str:
    for i, (kind, value) in enumerate(tokens):
        if kind == 'name':
            parts = value.split('::')
            bad = next((p for p in parts if p in _CPP_FORBIDDEN), None)
            if bad:
                return f'the word {bad} is not allowed in C++ code'
            j = _after_template(tokens, i + 1)
            if j < len(tokens) and tokens[j][1] == '(' and not _callable(value):
                return f'a call of {value} is not allowed (only sdfgsparse:: and dace:: leaves and math)'
        elif value == '(' and i > 0:
            prev = tokens[i - 1][1]
            if prev == ']':
                return 'a call through an array element is not allowed'
            if prev == ')' and not _cast_before(tokens, i - 1):
                return 'a call through an expression is not allowed'
            if i + 1 < len(tokens) and tokens[i + 1][1] in ('*', '&', '^') and i + 2 < len(tokens) and \
                    tokens[i + 2][1] == ')':
                return 'a function pointer type is not allowed'
    return ''


def _matching(tokens, at: int, step: int, limit: int = 64) -> int:
    """The index of the bracket matching the one at ``at`` (``<``/``(`` forward with ``step``
    1, ``)`` backward with -1), or -1 when there is none within ``limit`` tokens or a
    statement boundary comes first."""
    opening = tokens[at][1]
    closing = {'<': '>', '(': ')', ')': '('}[opening]
    depth = 0
    for k in range(at, at + step * limit, step):
        if not 0 <= k < len(tokens) or tokens[k][1] in (';', '{', '}'):
            return -1
        v = tokens[k][1]
        depth += (v == opening) - (v == closing)
        if depth == 0:
            return k
    return -1


def _after_template(tokens, j: int) -> int:
    """The index after a template argument list ``<...>`` starting at ``j`` (``j`` when there is none)."""
    if j >= len(tokens) or tokens[j][1] != '<':
        return j
    k = _matching(tokens, j, 1)
    return j if k < 0 else k + 1


def _callable(name: str) -> bool:
    if name.startswith(CPP_CALL_PREFIXES) or name in _CPP_CALLABLE_WORDS:
        return True
    return name in CODE_FUNCTIONS or name in _CPP_FLOAT_MATH


def _cast_before(tokens, close: int) -> bool:
    """Whether the parenthesised group ending at ``close`` is a cast to a scalar type."""
    k = _matching(tokens, close, -1, limit=close + 1)
    inner = [t[1] for t in tokens[k + 1:close]] if k >= 0 else []
    return bool(inner) and all(w in _CPP_SCALARS or w == '*' for w in inner)
