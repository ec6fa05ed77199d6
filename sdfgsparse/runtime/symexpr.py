"""Symbolic sizes compiled once into plain Python functions of a symbol table.

The call path evaluates the same size expressions (``M + 1``, ``ss0_n1``, ``M // 2``) on
every call; :func:`compile_int` turns one into ``f(symbols) -> int`` once (a tree of
closures, :func:`sdfgsparse._symbolic.integer_function`; no source is generated and run),
so a warm call pays a dictionary lookup or two instead of SymPy substitution.
"""
from typing import Callable, Dict

import dace
from sdfgsparse._symbolic import integer_function

__all__ = ['compile_int', 'compile_rules']


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
        inner = integer_function(expr)
        fn = _CACHE[expr] = lambda s: int(inner(s))  # noqa: E731
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
