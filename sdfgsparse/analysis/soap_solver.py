"""The SOAP tile optimisation: maximise ``|H|`` subject to ``|Dom(H)| <= X``, then choose ``X``.

Model
-----
A tile is a box with extents ``t_1 .. t_n`` over a statement group's iteration
variables. Its size is ``|H| = c * prod_d t_d**h_d`` (``c`` statements per point, ``h_d = 1``)
and its dominator set, as built by :mod:`sdfgsparse.analysis.soap_groups`, is a
posynomial ``|Dom(H)| = sum_m w_m * prod_d t_d**e_md`` (array projections, with their
constant-offset overlap terms).

``chi(X) = max |H|  s.t. |Dom(H)| <= X`` is a geometric programme. We solve it through
its dual (the KKT conditions in logarithmic coordinates), which gives a closed form: for
weights ``delta_m >= 0`` with ``sum delta_m = 1`` and ``sum_m delta_m e_m >= h / gamma``
(componentwise; ``>`` is allowed because extents are at least 1), the weighted AM-GM
inequality yields, for *every* tile,

    X >= |Dom(H)| >= K * (|H| / c)**(1/gamma),     K = prod_m (w_m / delta_m)**delta_m

so ``chi(X) <= c * (X / K)**gamma``; the best exponent is the smallest ``gamma`` (a small
linear programme over the vertices of the weight polytope, enumerated exactly with
rationals) and, among those, the largest ``K``. The bound is attained (the tiles
``w_m prod t**e_m = delta_m X`` are optimal) when the weight vector is unique, which is the
case for the SOAP kernels; otherwise it is still a valid upper bound on ``chi``, so the I/O
bound stays a lower bound.

Then ``rho(X) = chi(X) / (X - S)`` is minimised at ``X0 = gamma / (gamma - 1) * S`` and

    rho = c * gamma**gamma * (gamma - 1)**(1 - gamma) * S**(gamma - 1) / K**gamma,

``Q >= |V| / rho``. For ``gamma = 1`` (an operand as large as the tile: streaming kernels)
``rho = c / K`` as ``X -> oo`` and the tiles are the whole domain. If no weights exist
(a dimension no access depends on) ``|H|`` is unbounded and the SOAP bound is 0.
"""
import itertools
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Dict, List, Optional, Sequence, Tuple

import sympy

__all__ = ['Poly', 'poly_mono', 'poly_add', 'poly_sub', 'poly_mul', 'poly_to_sympy', 'clean_poly', 'SoapSolution',
           'solve_tiles']

Exps = Tuple[Fraction, ...]
Poly = Dict[Exps, Fraction]

#: largest number of candidate weight supports enumerated exactly
_MAX_SUPPORTS = 20000


def poly_mono(exps: Sequence, coeff=1) -> Poly:
    return {tuple(Fraction(e) for e in exps): Fraction(coeff)} if coeff != 0 else {}


def poly_add(p: Poly, q: Poly, sign: int = 1) -> Poly:
    r = dict(p)
    for k, v in q.items():
        r[k] = r.get(k, Fraction(0)) + sign * v
        if r[k] == 0:
            del r[k]
    return r


def poly_sub(p: Poly, q: Poly) -> Poly:
    return poly_add(p, q, -1)


def poly_mul(p: Poly, q: Poly) -> Poly:
    r: Poly = {}
    for k1, v1 in p.items():
        for k2, v2 in q.items():
            k = tuple(a + b for a, b in zip(k1, k2))
            r[k] = r.get(k, Fraction(0)) + v1 * v2
    return {k: v for k, v in r.items() if v != 0}


def poly_to_sympy(p: Poly, syms: Sequence[sympy.Symbol]) -> sympy.Expr:
    terms = []
    for exps, c in p.items():
        t = sympy.Rational(c.numerator, c.denominator)
        for s, e in zip(syms, exps):
            if e:
                t = t * s**sympy.Rational(e.numerator, e.denominator)
        terms.append(t)
    return sympy.Add(*terms)


def _dominates(a: Exps, b: Exps) -> bool:
    """Monomial ``a`` >= monomial ``b`` for all tiles with extents >= 1."""
    return all(x >= y for x, y in zip(a, b))


def clean_poly(p: Poly) -> Poly:
    """A posynomial ``q <= p`` on extents >= 1 that keeps ``p``'s leading terms.

    Negative terms are absorbed into the lowest-degree positive terms that dominate them
    (``c' m' - c m >= (c' - c) m'``; a footprint is never negative, so such terms exist);
    positive terms dominated by another positive term are dropped. Both steps only lower
    the dominator size, so the resulting bound stays a lower bound.
    """
    pos = {k: v for k, v in p.items() if v > 0}
    for k, v in sorted(((k, -v) for k, v in p.items() if v < 0), key=lambda kv: sum(kv[0])):
        need = v
        for k2 in sorted((k2 for k2 in pos if _dominates(k2, k)), key=lambda e: sum(e)):
            take = min(pos[k2], need)
            pos[k2] -= take
            need -= take
            if pos[k2] == 0:
                del pos[k2]
            if need == 0:
                break
    keep = {}
    for k, v in pos.items():
        if any(k2 != k and _dominates(k2, k) for k2 in pos):
            continue
        keep[k] = v
    return keep


def _solve_exact(rows: List[List[Fraction]], rhs: List[Fraction]) -> Optional[List[Fraction]]:
    """The unique solution of an (over)determined linear system, or None."""
    n = len(rows[0])
    m = [list(r) + [b] for r, b in zip(rows, rhs)]
    piv_row = 0
    pivots = []
    for col in range(n):
        pr = next((r for r in range(piv_row, len(m)) if m[r][col] != 0), None)
        if pr is None:
            return None  # free variable: not a vertex
        m[piv_row], m[pr] = m[pr], m[piv_row]
        inv = 1 / m[piv_row][col]
        m[piv_row] = [x * inv for x in m[piv_row]]
        for r in range(len(m)):
            if r != piv_row and m[r][col] != 0:
                f = m[r][col]
                m[r] = [a - f * b for a, b in zip(m[r], m[piv_row])]
        pivots.append(col)
        piv_row += 1
    for r in range(piv_row, len(m)):
        if m[r][n] != 0:
            return None  # inconsistent
    return [m[i][n] for i in range(n)]


def _vertices(monos: List[Exps], h: Exps) -> List[Tuple[Fraction, Dict[int, Fraction], frozenset]]:
    """Vertices of ``{delta >= 0, sum delta = 1, E^T delta >= s h}`` with ``s > 0``.

    Returns ``(s, delta, slack dims)``. The inequality (rather than ``=``) is the dual of the
    extents being at least 1: a dimension with slack has tile extent 1 at the optimum
    (e.g. the batch dimension of a batched matrix product).
    """
    n = len(h)
    res = []
    if len(monos) > 8 and math.comb(len(monos) + n, n) > _MAX_SUPPORTS:
        # keep the highest-degree monomials (the leading terms) to stay fast
        monos = sorted(monos, key=lambda e: -sum(e))[:8]
    cols = [('m', m) for m in range(len(monos))] + [('slack', d) for d in range(n)]
    for size in range(1, n + 1):
        for basis in itertools.combinations(cols, size):
            support = [m for kind, m in basis if kind == 'm']
            if not support:
                continue
            slack = [d for kind, d in basis if kind == 'slack']
            rows = []
            for d in range(n):
                row = [monos[m][d] for m in support] + [Fraction(-1) if d == q else Fraction(0) for q in slack]
                rows.append(row + [-h[d]])
            rows.append([Fraction(1)] * len(support) + [Fraction(0)] * len(slack) + [Fraction(0)])
            rhs = [Fraction(0)] * n + [Fraction(1)]
            sol = _solve_exact(rows, rhs)
            if sol is None:
                continue
            s_val, x = sol[-1], sol[:-1]
            if s_val <= 0 or any(v <= 0 for v in x):
                continue
            res.append((s_val, dict(zip(support, x[:len(support)])), frozenset(slack)))
    return res


@dataclass
class SoapSolution:
    """Result of :func:`solve_tiles` (expressions use the fast-memory size ``S``).

    :ivar gamma: growth exponent of ``chi(X) ~ X**gamma`` (None: unbounded tiles).
    :ivar K: the dual constant of the closed form ``chi(X) <= c (X / K)**gamma``.
    :ivar chi: ``c (X / K)**gamma`` as an expression of the symbol ``X``.
    :ivar X0: the optimal dominator size (``oo`` for streaming kernels).
    :ivar rho: the computational-intensity bound ``|V| / Q``.
    :ivar tiles: optimal tile extent per dimension (None for streaming / unbounded).
    :ivar weights: the AM-GM weights per monomial (exponent vector -> weight).
    """
    gamma: Optional[sympy.Rational]
    K: sympy.Expr
    chi: sympy.Expr
    X0: sympy.Expr
    rho: sympy.Expr
    tiles: Optional[List[sympy.Expr]]
    weights: Dict[Exps, Fraction] = field(default_factory=dict)

    @property
    def unbounded(self) -> bool:
        return self.gamma is None


def _rat(f: Fraction) -> sympy.Rational:
    return sympy.Rational(f.numerator, f.denominator)


def _least_norm(E: List[List[Fraction]]) -> Tuple[sympy.Matrix, List[int]]:
    """``(P, rows)``: ``u = P y`` is the minimal-norm solution of ``E[rows] u = y`` (the rows kept
    are linearly independent; the others are implied for the consistent systems we solve)."""
    M = sympy.Matrix([[_rat(x) for x in row] for row in E])
    # keep linearly independent rows
    keep, basis = [], sympy.zeros(0, M.cols)
    for r in range(M.rows):
        trial = basis.col_join(M[r, :])
        if trial.rank() > basis.rows:
            basis = trial
            keep.append(r)
    G = basis * basis.T
    P = basis.T * G.inv()
    return P, keep


def solve_tiles(dom: Poly, h: Exps, count: int, S: sympy.Symbol, X: sympy.Symbol) -> SoapSolution:
    """Solve the SOAP tiling problem for a dominator posynomial ``dom``.

    :param dom: ``|Dom(H)|`` as exponent vector -> coefficient (cleaned with :func:`clean_poly`).
    :param h: exponents of ``|H| / count`` per dimension (all 1 for a product of extents).
    :param count: ``c``, statements executed per iteration point.
    :param S: symbol (or positive number) of the fast-memory size, in words.
    :param X: symbol used for ``chi(X)``.
    """
    c = sympy.Integer(count)
    monos = [k for k in dom if any(k)] or list(dom)
    verts = _vertices(monos, h) if monos and any(h) else []
    if not verts:
        return SoapSolution(None, sympy.Integer(0), sympy.oo, sympy.oo, sympy.oo, None, {})
    best_s = max(s for s, _, _ in verts)
    cands = [(d, sl) for s, d, sl in verts if s == best_s]

    def log_k(cand):
        delta = cand[0]
        return sum(float(x) * (math.log(float(dom[monos[m]])) - math.log(float(x))) for m, x in delta.items())

    delta, slack = max(cands, key=log_k)
    gamma = _rat(1 / best_s)
    K = sympy.Integer(1)
    for m, x in delta.items():
        K = K * (_rat(dom[monos[m]]) / _rat(x))**_rat(x)
    chi = c * (X / K)**gamma
    weights = {monos[m]: x for m, x in delta.items()}
    if gamma == 1:
        return SoapSolution(gamma, K, chi, sympy.oo, c / K, None, weights)
    X0 = gamma / (gamma - 1) * S
    rho = sympy.powsimp(c * (X0 / K)**gamma / (X0 - S))
    # tiles: w_m prod t**e_m = delta_m X0 on the support, t_d = 1 on dimensions with slack
    support = sorted(delta)
    free = [d for d in range(len(h)) if d not in slack]
    E = [[monos[m][d] for d in free] for m in support]
    P, keep = _least_norm(E)
    tiles = []
    for d in range(len(h)):
        t = sympy.Integer(1)
        if d in free:
            col = free.index(d)
            for q, r in enumerate(keep):
                m = support[r]
                base = _rat(delta[m]) * X0 / _rat(dom[monos[m]])
                t = t * base**P[col, q]
        tiles.append(sympy.powsimp(t))
    return SoapSolution(gamma, K, chi, X0, rho, tiles, weights)
