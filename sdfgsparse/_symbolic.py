"""Symbolic helpers shared by formats, lowering and runtime."""
from typing import Optional

import dace
import sympy
from sympy.printing.str import StrPrinter

__all__ = ['pyexpr', 'integral', 'free_symbol_names', 'evaluate', 'integer_function', 'integer_code', 'CODE_OPS']


class _PyPrinter(StrPrinter):
    """Prints symbolic sizes as Python expressions the DaCe frontend understands; reads of
    storage arrays (:func:`sdfgsparse.formats.levels.member`) named in ``members`` print as
    subscripts of the array's variable (``crd1(p1)`` -> ``A_crd1[p1]``)."""

    def __init__(self, members=None, subset: bool = False):
        super().__init__()
        self.members = members or {}
        self.subset = subset

    def _print_Function(self, expr):
        name = expr.func.__name__
        if name in self.members:
            return f'{self.members[name]}[{", ".join(self._print(a) for a in expr.args)}]'
        return super()._print_Function(expr)

    def _print_Float(self, expr):  # every digit of the double (15 digits round -DBL_MAX to -inf)
        return repr(float(expr))

    def _print_And(self, expr):
        return ' and '.join(f'({self._print(a)})' for a in expr.args)

    def _print_Or(self, expr):
        return ' or '.join(f'({self._print(a)})' for a in expr.args)

    def _print_Not(self, expr):
        return f'not ({self._print(expr.args[0])})'

    def _print_Equality(self, expr):
        return f'(({self._print(expr.lhs)}) == ({self._print(expr.rhs)}))'

    def _print_Mod(self, expr):  # a view's step test; the operand is non-negative where it is read
        a, b = expr.args
        return f'(({self._print(a)}) % ({self._print(b)}))'

    def _print_int_floor(self, expr):
        a, b = expr.args
        if self.subset or _of_symbols(expr):
            # a size (``N // 2``: DaCe's frontend parses the call, not ``//``), or an index of a
            # memlet, which DaCe parses as a symbolic expression (no cast there)
            return f'int_floor({self._print(a)}, {self._print(b)})'
        if not expr.atoms(sympy.core.function.AppliedUndef):
            # loop variables and symbols only (a slice of a stepped slice): DaCe's frontend would
            # make ``a // b`` a symbolic int_floor and then fail to print it in the tasklet;
            # the cast keeps the division in the tasklet's code
            return f'((dace.int64({self._print(a)})) // ({self._print(b)}))'
        return f'(({self._print(a)}) // ({self._print(b)}))'

    def _print_floor(self, expr):  # SymPy's form of some floor divisions (``int_floor(M*N, 2*N)``: M/2)
        num, den = sympy.fraction(sympy.together(expr.args[0]))
        return self._print(dace.symbolic.int_floor(num, den, evaluate=False))

    def _print_int_ceil(self, expr):
        a, b = expr.args
        return f'(({self._print(a)} + {self._print(b)} - 1) // ({self._print(b)}))'


def _of_symbols(e) -> bool:
    """Whether ``e`` reads program symbols only (``dace.symbol``: no loop variable, no array)."""
    return not e.atoms(sympy.core.function.AppliedUndef) and all(isinstance(s, dace.symbol) for s in e.free_symbols)


def pyexpr(e, members=None, subset: bool = False) -> str:
    """A symbolic expression (or int / string) as Python source; ``members`` maps storage
    array names to the variables that hold them. ``subset``: for a memlet's subset or a map
    range built with DaCe's API (floor divisions of loop variables as ``int_floor``, which
    DaCe's symbolic parser reads; tasklet code casts them instead)."""
    if isinstance(e, str):
        e = dace.symbolic.pystr_to_symbolic(e)
    if isinstance(e, int):
        return str(e)
    return _PyPrinter(members, subset).doprint(integral(sympy.sympify(e)))


def integral(e):
    """``e`` with a sum of fractions of program symbols (``K*N/2 + M*N/2``: the rows of a
    reshape of stacked parts, an integer) as one exact division of the sum over the common
    denominator. Printed term by term, C's integer divisions would round each term down: with
    K*N and M*N odd, one less than the sum (an array one element short)."""
    e = sympy.sympify(e)
    if _of_symbols(e) and any(not r.is_Integer for r in e.atoms(sympy.Rational)):
        num, den = sympy.fraction(sympy.together(e))
        if den.is_Integer and den > 1:
            return dace.symbolic.int_floor(sympy.expand(num), den, evaluate=False)
    return e


def free_symbol_names(*exprs) -> set:
    res = set()
    for e in exprs:
        if dace.symbolic.issymbolic(e):
            res |= {str(s) for s in sympy.sympify(e).free_symbols}
    return res


_COMPILED = {}


def evaluate(e, values: dict):
    """Evaluate a symbolic expression given symbol values; returns int or None if unknown.
    Plain symbols are a dictionary lookup; other expressions are compiled once."""
    if not dace.symbolic.issymbolic(e):
        return int(e)
    if e.is_Symbol:
        v = values.get(str(e))
        return None if v is None else int(v)
    hit = _COMPILED.get(e)
    if hit is None:
        names = sorted(free_symbol_names(e))
        fn = sympy.lambdify([sympy.Symbol(n) for n in names], e.subs({s: sympy.Symbol(str(s)) for s in e.free_symbols}),
                            modules=[{'int_floor': lambda a, b: a // b, 'int_ceil': lambda a, b: -(-a // b)}, 'math'])
        hit = _COMPILED[e] = (names, fn)
    names, fn = hit
    if not all(n in values for n in names):
        return None
    return int(fn(*(values[n] for n in names)))


def _floor_div(a, b):
    return a // b


def _ceil_div(a, b):
    return -(-a // b)


def _fold(fns, op):
    first, rest = fns[0], fns[1:]

    def fold(s):
        acc = first(s)
        for f in rest:
            acc = op(acc, f(s))
        return acc

    return fold


def integer_function(e, minimum=min, maximum=max):
    """``f(table) -> value`` for a symbolic integer expression ``e`` (or a string of one),
    built once as a tree of closures: no source text is generated or run. Symbols are read as
    ``table[name]``; the values may be Python integers or NumPy integer arrays (``minimum`` /
    ``maximum``: ``np.minimum`` / ``np.maximum`` for arrays). Sums, products (a rational
    coefficient ``p/q`` as ``(p * rest) // q``: the expressions are integers), integer powers,
    ``int_floor`` / ``floor`` / ``int_ceil`` / ``ceiling`` divisions, ``Mod``, ``Min`` and ``Max``; anything else
    raises ``ValueError``."""
    if isinstance(e, str):
        e = dace.symbolic.pystr_to_symbolic(e)
    e = integral(sympy.sympify(e))  # (K*N/2 + M*N/2: one division of the sum, not two rounded halves)
    if e.is_Integer:
        value = int(e)
        return lambda s: value
    if e.is_Symbol:
        name = str(e)
        return lambda s: s[name]
    name = type(e).__name__
    if e.is_Mul:
        coeff, rest = e.as_coeff_Mul()
        if coeff.is_Rational and not coeff.is_Integer:
            p, q, inner = int(coeff.p), int(coeff.q), integer_function(rest, minimum, maximum)
            return lambda s: (p * inner(s)) // q
    if e.is_Rational:
        raise ValueError(f'integer_function: {e} is not an integer')
    if isinstance(e, (sympy.floor, sympy.ceiling)):  # (DaCe writes a slice's length ceiling(N/2))
        num, den = sympy.fraction(sympy.together(e.args[0]))
        a, b = integer_function(num, minimum, maximum), integer_function(den, minimum, maximum)
        if isinstance(e, sympy.ceiling):
            return lambda s: -(-a(s) // b(s))
        return lambda s: a(s) // b(s)
    args = [integer_function(a, minimum, maximum) for a in e.args]
    if e.is_Add:
        return _fold(args, lambda a, b: a + b)
    if e.is_Mul:
        return _fold(args, lambda a, b: a * b)
    if e.is_Pow and e.exp.is_Integer and int(e.exp) >= 0:
        base, k = integer_function(e.base, minimum, maximum), int(e.exp)
        return lambda s: base(s)**k
    if name in ('int_floor', 'int_ceil') or isinstance(e, sympy.Mod):
        a, b = args
        op = _floor_div if name == 'int_floor' else _ceil_div if name == 'int_ceil' else (lambda x, y: x % y)
        return lambda s: op(a(s), b(s))
    if isinstance(e, (sympy.Min, sympy.Max)):
        return _fold(args, minimum if isinstance(e, sympy.Min) else maximum)
    raise ValueError(f'integer_function: {e} ({name}) is not an integer expression of symbols')


#: The operations of :func:`integer_code`, by name: their numbers in the code (the compiled
#: binder's, sdfgsparse/runtime/_binder.c, reads the same numbers).
CODE_OPS = {'const': 0, 'sym': 1, 'add': 2, 'mul': 3, 'floor': 4, 'ceil': 5, 'mod': 6, 'min': 7, 'max': 8, 'pow': 9}
_INT64 = (-2**63, 2**63)


def integer_code(e, index) -> Optional[list]:
    """Symbolic integer expression ``e`` as reverse Polish code for the compiled binder: a
    flat list of ``(operation, operand)`` pairs (:data:`CODE_OPS`; a constant's operand is its
    value, a symbol's its position ``index(name)``, a power's its exponent). The expressions
    :func:`integer_function` takes, with the same meaning; None where ``e`` has another part,
    a constant past 64 bits, or a symbol ``index`` does not know (None from it)."""
    ops = CODE_OPS
    e = integral(sympy.sympify(e))
    if e.is_Integer:
        v = int(e)
        return [ops['const'], v] if _INT64[0] <= v < _INT64[1] else None
    if e.is_Symbol:
        i = index(str(e))
        return None if i is None else [ops['sym'], i]
    parts = None
    if e.is_Mul:
        coeff, rest = e.as_coeff_Mul()
        if coeff.is_Rational and not coeff.is_Integer:  # (p * rest) // q, as integer_function
            inner = integer_code(rest, index)
            if inner is None or not all(_INT64[0] <= int(x) < _INT64[1] for x in (coeff.p, coeff.q)):
                return None
            return [ops['const'], int(coeff.p)] + inner + [ops['mul'], 0, ops['const'], int(coeff.q), ops['floor'], 0]
    if e.is_Rational:
        return None
    name = type(e).__name__
    if e.is_Add or e.is_Mul or isinstance(e, (sympy.Min, sympy.Max)):
        op = ops['add'] if e.is_Add else ops['mul'] if e.is_Mul else ops['min' if isinstance(e, sympy.Min) else 'max']
        parts = [integer_code(a, index) for a in e.args]
        if any(p is None for p in parts):
            return None
        code = parts[0]
        for p in parts[1:]:
            code = code + p + [op, 0]
        return code
    if e.is_Pow and e.exp.is_Integer and int(e.exp) >= 0:
        base = integer_code(e.base, index)
        return None if base is None else base + [ops['pow'], int(e.exp)]
    if name in ('int_floor', 'int_ceil') or isinstance(e, sympy.Mod):
        a, b = (integer_code(x, index) for x in e.args)
        op = ops['floor'] if name == 'int_floor' else ops['ceil'] if name == 'int_ceil' else ops['mod']
        return None if a is None or b is None else a + b + [op, 0]
    if isinstance(e, (sympy.floor, sympy.ceiling)):
        num, den = sympy.fraction(sympy.together(e.args[0]))
        a, b = integer_code(num, index), integer_code(den, index)
        op = ops['floor'] if isinstance(e, sympy.floor) else ops['ceil']
        return None if a is None or b is None else a + b + [op, 0]
    return None
