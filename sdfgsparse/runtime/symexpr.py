"""Symbolic sizes compiled once into plain Python functions of a symbol table.

The call path evaluates the same size expressions (``M + 1``, ``ss0_n1``, ``M // 2``) on
every call; :func:`compile_int` turns one into ``f(symbols) -> int`` once, so a warm call
pays a dictionary lookup or two instead of SymPy substitution.
"""
from typing import Callable, Dict

import dace
import sympy

from sdfgsparse._symbolic import _PyPrinter

__all__ = ['compile_int']


class _TablePrinter(_PyPrinter):
    """Prints symbols as look-ups in the table ``s``."""

    def _print_Symbol(self, expr):
        return f's[{str(expr)!r}]'


_CACHE: Dict[object, Callable] = {}


def compile_int(expr) -> Callable[[Dict[str, int]], int]:
    """``f(symbols) -> int`` for an integer, a symbol or a symbolic expression.
    A missing symbol raises ``KeyError`` when ``f`` is called."""
    if not dace.symbolic.issymbolic(expr):
        value = int(expr)
        return lambda s: value
    if expr.is_Symbol:
        name = str(expr)
        return lambda s: s[name]
    fn = _CACHE.get(expr)
    if fn is None:
        src = _TablePrinter().doprint(sympy.sympify(expr))
        fn = _CACHE[expr] = eval(f'lambda s: int({src})', {})  # noqa: S307 (our own printed expression)
    return fn
