"""Symbolic sizes compiled once into plain Python functions of a symbol table.

The call path evaluates the same size expressions (``M + 1``, ``ss0_n1``, ``M // 2``) on
every call; :func:`compile_int` turns one into ``f(symbols) -> int`` once (a tree of
closures, :func:`sdfgsparse._symbolic.integer_function`; no source is generated and run),
so a warm call pays a dictionary lookup or two instead of SymPy substitution.
"""
from typing import Callable, Dict

import dace
import sympy

from sdfgsparse._symbolic import _PyPrinter, integer_function

__all__ = ['compile_int', 'compile_rules']


class _TablePrinter(_PyPrinter):
    """Prints symbols as look-ups in the table ``s``."""

    def _print_Symbol(self, expr):
        return f's[{str(expr)!r}]'

    def _print_Min(self, expr):  # a view's shape: NumPy's clipping of slice bounds
        return f'min({", ".join(self._print(a) for a in expr.args)})'

    def _print_Max(self, expr):
        return f'max({", ".join(self._print(a) for a in expr.args)})'

    def _print_int_floor(self, expr):  # Python's floor division (a reshape's ``N // 2``)
        a, b = expr.args
        return f'(({self._print(a)}) // ({self._print(b)}))'


_CACHE: Dict[object, Callable] = {}


def compile_int(expr) -> Callable[[Dict[str, int]], int]:
    """``f(symbols) -> int`` for an integer, a symbol or a symbolic expression.
    A missing symbol raises ``KeyError`` when ``f`` is called. ``f.source`` is the same as a
    Python expression over the table ``s`` (for code that inlines it: runtime/specialise.py)."""
    if not dace.symbolic.issymbolic(expr):
        value = int(expr)
        fn = lambda s: value  # noqa: E731
        fn.source = repr(value)
        return fn
    if expr.is_Symbol:
        name = str(expr)
        fn = lambda s: s[name]  # noqa: E731
        fn.source = f's[{name!r}]'
        return fn
    fn = _CACHE.get(expr)
    if fn is None:
        inner = integer_function(expr)
        fn = _CACHE[expr] = lambda s: int(inner(s))  # noqa: E731
        fn.source = f'int({_TablePrinter().doprint(sympy.sympify(expr))})'
    return fn


def compile_rules(found) -> list:
    """Shape rules (:func:`sdfgsparse.ops.shape_checks.rules`: ``(a, b, what)`` with ``a``
    and ``b`` as strings) compiled once: ``(f_a, f_b, free symbols, rule)`` each."""
    out = []
    for rule in found:
        ea, eb = (dace.symbolic.pystr_to_symbolic(x) for x in rule[:2])
        free = frozenset(str(x) for e in (ea, eb) for x in getattr(e, 'free_symbols', ()))
        out.append((compile_int(ea), compile_int(eb), free, rule))
    return out
