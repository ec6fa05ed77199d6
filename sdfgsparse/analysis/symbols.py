"""Symbols shared by the analysis modules.

``S`` is the fast-memory size in words: the symbol every bound is written in when no
``cache_size`` is given. It is a plain ``sympy.Symbol('S')`` so that user code can build it
the same way; internally the solver works with a positive twin (``S_POS``) so that powers
of products simplify, and replaces it by ``S`` in every result.
"""
import sympy

__all__ = ['S', 'S_POS', 'X']

#: fast-memory size (words), as it appears in results
S = sympy.Symbol('S')
#: positive twin used inside the solver
S_POS = sympy.Symbol('S', positive=True)
#: the dominator-set size of the SOAP argument (``chi(X)``)
X = sympy.Symbol('X', positive=True)
