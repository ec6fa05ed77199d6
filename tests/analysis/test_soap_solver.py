"""The closed-form SOAP tile solver and the dominator posynomials."""
from fractions import Fraction as F

import pytest
import sympy

from sdfgsparse.analysis.soap_groups import count_points, leading_terms
from sdfgsparse.analysis.program_model import Dim
from sdfgsparse.analysis.soap_solver import clean_poly, solve_tiles
from sdfgsparse.analysis.symbols import S_POS as S, X

ONE = F(1)


def poly(**terms):
    """``poly(ab=1, a=4)`` over dims a, b, c (letters name the dims a monomial uses)."""
    out = {}
    for name, c in terms.items():
        name = '' if name == 'one' else name
        out[tuple(F(1) if d in name else F(0) for d in 'abc')] = F(c)
    return out


def test_mmm_closed_form():
    sol = solve_tiles(poly(ab=1, ac=1, bc=1), (ONE, ) * 3, 1, S, X)
    assert sol.gamma == sympy.Rational(3, 2)
    assert sol.K == 3
    assert sympy.simplify(sol.rho - sympy.sqrt(S) / 2) == 0
    assert sympy.simplify(sol.X0 - 3 * S) == 0
    assert all(sympy.simplify(t - sympy.sqrt(S)) == 0 for t in sol.tiles)
    assert sympy.simplify(sol.chi - (X / 3)**sympy.Rational(3, 2)) == 0


def test_chi_is_an_upper_bound_on_tiles():
    """Every tile with |Dom| <= X has |H| <= chi(X) (the AM-GM certificate)."""
    sol = solve_tiles(poly(ab=1, ac=2, bc=1), (ONE, ) * 3, 1, S, X)
    for a in range(1, 12):
        for b in range(1, 12):
            for c in range(1, 12):
                dom = a * b + 2 * a * c + b * c
                assert a * b * c <= float(sol.chi.subs(X, dom)) * (1 + 1e-12)


def test_stencil_two_statements():
    # jacobi-1d: bottom face t_i (= b) plus 4 halo words per time step (a)
    sol = solve_tiles({(F(0), F(1)): F(1), (F(1), F(0)): F(4)}, (ONE, ONE), 2, S, X)
    assert sol.gamma == 2
    assert sympy.simplify(sol.rho - S / 2) == 0
    assert [sympy.simplify(t) for t in sol.tiles] == [S / 4, S]


def test_streaming_has_gamma_one():
    dom = clean_poly(poly(ab=1, a=1, b=2))
    assert dom == poly(ab=1)
    sol = solve_tiles(dom, (ONE, ONE), 2, S, X)
    assert sol.gamma == 1 and sol.rho == 2 and sol.X0 == sympy.oo and sol.tiles is None


def test_unbounded_when_a_dimension_is_unused():
    sol = solve_tiles(poly(a=1), (ONE, ONE), 1, S, X)
    assert sol.unbounded and sol.rho == sympy.oo


def test_clean_poly_absorbs_negative_terms():
    p = {(F(1), F(1)): F(1), (F(1), F(0)): F(3), (F(0), F(0)): F(-2)}
    q = clean_poly(p)
    assert q == {(F(1), F(1)): F(1)}
    for a in range(1, 6):
        for b in range(1, 6):
            assert a * b <= a * b + 3 * a - 2


def test_count_points_triangular():
    i, j, k = (sympy.Symbol(v, integer=True) for v in 'ijk')
    n = sympy.Symbol('n', integer=True)
    dims = [Dim(k, 'k', 0, n), Dim(i, 'i', k + 1, n), Dim(j, 'j', k + 1, i + 1)]
    vol = count_points(dims)
    for nv in range(1, 8):
        brute = sum(1 for kv in range(nv) for iv in range(kv + 1, nv) for jv in range(kv + 1, iv + 1))
        assert vol.subs(n, nv) == brute
    assert sympy.expand(leading_terms(vol) - n**3 / 6) == 0


def test_count_points_with_step():
    i, n = sympy.Symbol('i', integer=True), sympy.Symbol('n', integer=True, positive=True)
    assert count_points([Dim(i, 'i', 0, 10, sympy.Integer(3))]) == 4


_n, _t = sympy.symbols('n t')


@pytest.mark.parametrize('expr, lead', [(_n**3 / 6 - _n / 6, _n**3 / 6), (_n * _t - 2 * _t, _n * _t),
                                        (sympy.Integer(7), 7), (2 * _n**3 / sympy.sqrt(S) + _n**2, None)])
def test_leading_terms(expr, lead):
    if lead is None:  # S is kept fixed, the sizes grow
        assert sympy.expand(leading_terms(expr, keep={S}) - 2 * _n**3 / sympy.sqrt(S)) == 0
    else:
        assert sympy.expand(leading_terms(expr) - lead) == 0
