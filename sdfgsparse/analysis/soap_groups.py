"""Statement groups and their dominator sets, as in SOAP.

Grouping
--------
Two statements are analysed together when they share an input array, or one produces
an array the other reads, *and* their iteration variables can be identified through that
array's access functions (``A[i, j]`` in one and ``A[p, q]`` in the other give ``i ~ p``,
``j ~ q``) without identifying two variables of one statement, and the identified variable
sets are equal. Statements inside one loop already share that loop's variable. Shared
inputs of a group are then counted once (``atax``, ``bicg``, ``mvt``), and values produced
inside a tile and consumed in it are not counted at all (stencil time steps).

Dominator set of a tile
-----------------------
For a box tile with extents ``t_d`` over the group's variables, each array contributes

* per *access class* (accesses whose index expressions differ only by constants):
  the union of the shifted projections ``prod_p (ext_p + span_p)``, where ``ext_p`` is
  ``t_v`` for an index ``a*v + c``, ``prod_v t_v**(1/k)`` for an index over ``k`` variables
  (a lower bound on its extent), 1 for a constant or opaque index, and ``span_p`` the
  spread of the constant offsets ("overlap" terms);
* minus the values of that class produced inside the tile by a write of the same class,
  ``prod_p (ext_p + ov_p)`` with ``ov_p`` the overlap of the read and written offset ranges.

An array overwritten inside a sequential loop whose variable ``v`` its index does not use
gets ``v`` as a *version* coordinate: a read sees version ``v`` when a writer precedes it
in the loop body, ``v - 1`` otherwise, and an update (``+=``) is a read of ``v - 1`` and a
write of ``v`` — so ``C[i, j] += ...`` under ``for k`` contributes ``t_i t_j`` and a Jacobi
step contributes its two halos per time step plus one bottom face. Updates outside such a
loop (reductions by write-conflict resolution) contribute their projection. Different
access functions of one array (``A[i, k]`` and ``A[j, k]``) are counted separately, as in
SOAP.
"""
from collections import defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Dict, List, Optional, Sequence, Set, Tuple

import sympy

from sdfgsparse.analysis.program_model import READ, UPDATE, WRITE, Dim, Statement
from sdfgsparse.analysis.soap_solver import Poly, clean_poly, poly_add, poly_mono, poly_mul, poly_sub

__all__ = ['Group', 'form_groups', 'dominator_poly', 'count_points', 'leading_terms']


@dataclass(eq=False)
class Group:
    """Statements analysed as one SOAP subgraph, over shared iteration variables ``dims``."""
    statements: List[Statement]
    dims: List[Dim]
    rep: Dict[sympy.Symbol, sympy.Symbol] = field(default_factory=dict)

    @property
    def syms(self) -> List[sympy.Symbol]:
        return [d.sym for d in self.dims]

    def subs(self, st: Statement) -> Dict[sympy.Symbol, sympy.Symbol]:
        return {d.sym: self.rep[d.sym] for d in st.dims}


# ---------------------------------------------------------------------- union-find
def _find(uf: Dict, x):
    while uf[x] is not x:
        uf[x] = uf[uf[x]]
        x = uf[x]
    return x


def _single_var(e: Optional[sympy.Expr], syms: Set[sympy.Symbol]) -> Optional[sympy.Symbol]:
    """``v`` if ``e`` is ``a*v + c`` with a numeric ``a`` and ``c`` free of variables."""
    if e is None:
        return None
    fs = e.free_symbols & syms
    if len(fs) != 1:
        return None
    v = next(iter(fs))
    coef = sympy.expand(e).coeff(v)
    if coef.is_number and coef != 0 and v not in sympy.expand(e - coef * v).free_symbols:
        return v
    return None


def _touches(st: Statement, array: str, kinds) -> bool:
    return any(a.array == array and a.kind in kinds for a in st.accesses)


def form_groups(statements: Sequence[Statement]) -> List[Group]:
    """Group statements that share inputs or a produced array (see the module docstring)."""
    uf = {}
    for st in statements:
        for s in st.syms:
            uf.setdefault(s, s)
    group_of = {id(st): i for i, st in enumerate(statements)}
    members: Dict[int, List[Statement]] = {i: [st] for i, st in enumerate(statements)}
    by_array = defaultdict(list)
    for st in statements:
        for arr in st.arrays():
            by_array[arr].append(st)
    reads, writes = (READ, UPDATE), (WRITE, UPDATE)
    pairs = []
    for arr, sts in by_array.items():
        for a in range(len(sts)):
            for b in range(a + 1, len(sts)):
                s1, s2 = sts[a], sts[b]
                r1, r2 = _touches(s1, arr, reads), _touches(s2, arr, reads)
                w1, w2 = _touches(s1, arr, writes), _touches(s2, arr, writes)
                if (r1 and r2) or (w1 and r2) or (w2 and r1):
                    pairs.append((min(s1.order, s2.order), max(s1.order, s2.order), arr, s1, s2))
    pairs.sort(key=lambda p: (p[0], p[1], p[2]))
    for _, _, arr, s1, s2 in pairs:
        g1, g2 = group_of[id(s1)], group_of[id(s2)]
        if g1 == g2:
            continue
        trial = dict(uf)
        for a1 in (a for a in s1.accesses if a.array == arr):
            for a2 in (a for a in s2.accesses if a.array == arr):
                for e1, e2 in zip(a1.index, a2.index):
                    v1, v2 = _single_var(e1, set(s1.syms)), _single_var(e2, set(s2.syms))
                    if v1 is not None and v2 is not None:
                        r1, r2 = _find(trial, v1), _find(trial, v2)
                        if r1 is not r2:
                            trial[r1] = r2
        merged = members[g1] + members[g2]
        classes = []
        ok = True
        for st in merged:
            cl = [_find(trial, s) for s in st.syms]
            if len(set(cl)) != len(cl):
                ok = False
                break
            classes.append(set(cl))
        if not ok or any(c != classes[0] for c in classes):
            continue
        uf = trial
        members[g1] = sorted(merged, key=lambda s: s.order)
        for st in members[g2]:
            group_of[id(st)] = g1
        del members[g2]
    groups = []
    for key in sorted(members, key=lambda k: members[k][0].order):
        sts = members[key]
        first = sts[0]
        rep = {}
        for st in sts:
            for d in st.dims:
                root = _find(uf, d.sym)
                # the representative is the first statement's variable of that class
                match = next(fd.sym for fd in first.dims if _find(uf, fd.sym) is root)
                rep[d.sym] = match
        groups.append(Group(sts, list(first.dims), rep))
    return groups


# ---------------------------------------------------------------------- access classes
def _decompose(e: Optional[sympy.Expr], syms: Set[sympy.Symbol]):
    """``e`` as (linear part {var: coef}, symbolic constant, numeric offset) or None."""
    if e is None:
        return None
    lin, symc, num = {}, sympy.Integer(0), sympy.Integer(0)
    for term in sympy.Add.make_args(sympy.expand(e)):
        fs = term.free_symbols & syms
        if not fs:
            if term.is_number:
                num += term
            else:
                symc += term
        elif len(fs) == 1:
            v = next(iter(fs))
            coef = term / v
            if v in coef.free_symbols:
                return None
            lin[v] = lin.get(v, 0) + coef
        else:
            return None
    lin = {v: c for v, c in lin.items() if c != 0}
    if not num.is_Rational:
        symc, num = symc + num, sympy.Integer(0)
    return lin, symc, Fraction(int(num.p), int(num.q))


class _Pos:
    """One index position of an access class: its key, exponents and offset."""
    __slots__ = ('key', 'exps', 'offset')

    def __init__(self, key, exps, offset):
        self.key, self.exps, self.offset = key, exps, offset


def _positions(index: Sequence[Optional[sympy.Expr]], dims: List[sympy.Symbol], uid) -> List[_Pos]:
    """Index positions of an access with their exponents and constant offsets.

    When every position uses at most one variable and no variable repeats (the SOAP case)
    each position is a factor ``t_v + span``. Otherwise (``A[k, k]``, ``A[i + j]``) the access
    is one factor: a rank-``r`` map over ``V`` variables touches at least
    ``prod_V t_v**(r/|V|)`` elements (the geometric mean of its injective restrictions).
    """
    syms = set(dims)
    decs = [_decompose(e, syms) for e in index]
    used = [set(d[0]) if d is not None else set() for d in decs]
    flat = [v for u in used for v in u]
    simple = all(d is not None for d in decs) and all(len(u) <= 1 for u in used) and len(flat) == len(set(flat))
    out = []
    if simple:
        for p, (lin, symc, num) in enumerate(decs):
            exps = tuple(Fraction(1) if v in lin else Fraction(0) for v in dims) if lin else ()
            key = (tuple(sorted(((str(v), str(c)) for v, c in lin.items()))), str(symc))
            out.append(_Pos(key, exps, num))
        return out
    allv = [v for v in dims if any(v in u for u in used)]
    if not allv:
        return [_Pos(('?', uid), (), Fraction(0))]
    rows = [[d[0].get(v, 0) for v in allv] for d in decs if d is not None and d[0]]
    rank = sympy.Matrix(rows).rank()
    frac = Fraction(int(rank), len(allv))
    exps = tuple(frac if v in allv else Fraction(0) for v in dims)
    key = ('multi', tuple((tuple(sorted((str(v), str(c)) for v, c in d[0].items())), str(d[1])) if d else ('?', uid)
                          for d in decs))
    return [_Pos(key, exps, Fraction(0))]


def _factor(exps, n: int, const) -> Poly:
    mono = poly_mono(exps if exps else (0, ) * n, 1)
    if const:
        mono = poly_add(mono, poly_mono((0, ) * n, const))
    return mono


def _box(positions_list: List[List[_Pos]], n: int) -> Poly:
    """Size of the union of shifted boxes (hull approximation of the overlap terms)."""
    poly = poly_mono((0, ) * n, 1)
    for p in range(len(positions_list[0])):
        offs = [pl[p].offset for pl in positions_list]
        poly = poly_mul(poly, _factor(positions_list[0][p].exps, n, max(offs) - min(offs)))
    return poly


def _intersection(reads: List[List[_Pos]], writes: List[List[_Pos]], n: int) -> Poly:
    poly = poly_mono((0, ) * n, 1)
    for p in range(len(reads[0])):
        ro, wo = [r[p].offset for r in reads], [w[p].offset for w in writes]
        ov = min(max(ro), max(wo)) - max(min(ro), min(wo))
        exps = reads[0][p].exps
        if not exps and 1 + ov <= 0:
            return {}
        poly = poly_mul(poly, _factor(exps, n, ov))
    return poly


def _version_dim(group: Group, array: str) -> Optional[sympy.Symbol]:
    """The innermost sequential variable under which ``array`` is overwritten in place."""
    for st in group.statements:
        rep = group.subs(st)
        for a in st.accesses:
            if a.array != array or a.kind not in (WRITE, UPDATE):
                continue
            used = set()
            for e in a.index:
                if e is not None:
                    used |= e.xreplace(rep).free_symbols
            seq = [rep[d.sym] for d in st.dims if d.sequential and rep[d.sym] not in used]
            if seq:
                return seq[-1]
    return None


def dominator_poly(group: Group) -> Tuple[Poly, List[str]]:
    """``|Dom(H)|`` of a box tile over ``group.dims`` as a posynomial (see module doc)."""
    dims = group.syms
    n = len(dims)
    notes = []
    arrays = []
    for st in group.statements:
        for a in st.accesses:
            if a.array not in arrays:
                arrays.append(a.array)
    total: Poly = {}
    for arr in arrays:
        vdim = _version_dim(group, arr)
        vexp = tuple(Fraction(1) if s is vdim else Fraction(0) for s in dims)
        writers = [st for st in group.statements if _touches(st, arr, (WRITE, UPDATE))]
        # key -> role -> list of position lists
        classes: Dict[tuple, Dict[str, list]] = defaultdict(lambda: {'R': [], 'W': [], 'U': [], 'prev': False})
        opaque = False
        for st in group.statements:
            rep = group.subs(st)
            for a in st.accesses:
                if a.array != arr:
                    continue
                index = [e.xreplace(rep) if e is not None else None for e in a.index]
                if any(e is None for e in index) or not a.exact:
                    opaque = True
                if vdim is not None:
                    prev = any(w.order < st.order for w in writers if w is not st)
                    if a.kind in (READ, UPDATE):
                        off = 0 if (prev and a.kind == READ) else -1
                        rd = _positions(index + [vdim + off], dims, id(a))
                        classes[tuple(p.key for p in rd)]['R'].append(rd)
                        classes[tuple(p.key for p in rd)]['prev'] = True
                    if a.kind in (WRITE, UPDATE):
                        wr = _positions(index + [vdim], dims, id(a))
                        classes[tuple(p.key for p in wr)]['W'].append(wr)
                        classes[tuple(p.key for p in wr)]['prev'] = True
                else:
                    pos = _positions(index, dims, id(a))
                    key = tuple(p.key for p in pos)
                    role = {READ: 'R', WRITE: 'W', UPDATE: 'U'}[a.kind]
                    classes[key][role].append(pos)
                    if a.kind == READ and any(w.order < st.order for w in writers if w is not st):
                        classes[key]['prev'] = True
        pure: Dict[frozenset, Poly] = {}
        for key, c in classes.items():
            if c['U']:
                total = poly_add(total, _box(c['U'], n))
            if c['R']:
                produced = c['W'] + c['U']
                if produced and c['prev']:
                    total = poly_add(total, poly_sub(_box(c['R'], n), _intersection(c['R'], produced, n)))
                    continue
                # reads of one array over the same variables in another order (A[i, j], A[j, i])
                # can cover the same elements: count the largest once
                sig = frozenset(d for p in c['R'][0] for d, e in enumerate(p.exps) if e)
                box = _box(c['R'], n)
                if sig not in pure or sum(box.values()) > sum(pure[sig].values()):
                    pure[sig] = box
        for box in pure.values():
            total = poly_add(total, box)
        if opaque:
            notes.append(f'{arr}: opaque index (range or data-dependent) treated as a single element')
    return clean_poly(total), notes


# ---------------------------------------------------------------------- volumes
_FAULHABER: Dict[int, sympy.Expr] = {}
_NVAR = sympy.Symbol('n')


def _power_sum(k: int, n: sympy.Expr) -> sympy.Expr:
    """``sum_{x=0}^{n-1} x**k`` (Faulhaber, via Bernoulli polynomials)."""
    if k not in _FAULHABER:
        b = sympy.bernoulli(k + 1, _NVAR)
        _FAULHABER[k] = sympy.expand((b - b.subs(_NVAR, 0)) / (k + 1))
    return _FAULHABER[k].xreplace({_NVAR: n})


def _sum(expr: sympy.Expr, x: sympy.Symbol, lo: sympy.Expr, hi: sympy.Expr) -> sympy.Expr:
    """``sum_{x=lo}^{hi} expr`` for ``expr`` polynomial in ``x`` (sympy's summation otherwise)."""
    poly = sympy.Poly(expr, x) if expr.is_polynomial(x) else None
    if poly is None:
        return sympy.summation(expr, (x, lo, hi))
    total = sympy.Integer(0)
    for (k, ), c in poly.terms():
        total += c * (_power_sum(k, hi + 1) - _power_sum(k, lo))
    return sympy.expand(total)


def count_points(dims: Sequence[Dim]) -> sympy.Expr:
    """``|V|``: number of points of the (possibly triangular) iteration domain."""
    expr = sympy.Integer(1)
    for d in reversed(list(dims)):
        if d.sym not in expr.free_symbols:
            expr = expr * d.extent
        elif d.step == 1:
            expr = _sum(expr, d.sym, d.start, d.stop - 1)
        else:
            expr = _sum(expr.xreplace({d.sym: d.start + d.step * d.sym}), d.sym, 0, d.extent - 1)
    return sympy.expand(expr)


def leading_terms(expr: sympy.Expr, keep: Set[sympy.Symbol] = frozenset()) -> sympy.Expr:
    """The dominant terms of ``expr`` when all its symbols except ``keep`` grow together."""
    if expr.is_number:
        return expr
    lam = sympy.Dummy('lam', positive=True)
    syms = [s for s in expr.free_symbols if s not in keep]
    if not syms:
        return expr
    scaled = sympy.expand(expr.xreplace({s: lam * s for s in syms}))
    terms = sympy.Add.make_args(scaled)
    best, acc = None, []
    for t in terms:
        _, deg = t.as_coeff_exponent(lam)
        if not deg.is_number or lam in _.free_symbols:
            return expr
        if best is None or deg > best:
            best, acc = deg, [t]
        elif deg == best:
            acc.append(t)
    return sympy.Add(*acc).xreplace({lam: 1})
