"""``io_lower_bound``: the SOAP I/O lower bound of an SDFG, dense and sparse.

The bound counts words moved between a fast memory of ``S`` words and slow memory in the
red-blue pebble game (loads and stores; recomputation allowed). For every group of
statements (:mod:`~sdfgsparse.analysis.soap_groups`) the SOAP argument splits any schedule
into subcomputations that each move ``X - S`` words; each computes at most ``chi(X)``
vertices, so ``Q >= |V| (X - S) / chi(X) = |V| / rho`` with ``rho`` minimised over ``X``
(:mod:`~sdfgsparse.analysis.soap_solver`). Only leading terms are kept: ``|V|`` is reduced to
its dominant terms as the program's sizes grow, the dominator set to its leading
monomials, and the ``- (X0 - S)`` correction of the argument is dropped.

Groups that share no input add up (SOAP). Groups that share an input but could not be
analysed together are combined by the maximum of their bounds (the dominant one when
their growth differs), which stays a lower bound. Sparse library nodes contribute the
models of :mod:`~sdfgsparse.analysis.sparse_models`.
"""
import json
import warnings
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Tuple, Union

import dace
import sympy

from sdfgsparse.analysis.user_symbols import readable, user_symbol_names
from sdfgsparse.analysis.errors import (InvalidCacheSizeError, SkippedNodeWarning, StatsError, SymbolClashError,
                                        UnboundSymbolError, UnsupportedProgramError)
from sdfgsparse.analysis.program_model import LibraryCall, ProgramModel
from sdfgsparse.analysis.sdfg_extract import extract
from sdfgsparse.analysis.soap_groups import count_points, dominator_poly, form_groups, leading_terms
from sdfgsparse.analysis.soap_solver import poly_to_sympy, solve_tiles
from sdfgsparse.analysis import sparse_models as sm
from sdfgsparse.analysis.symbols import S, S_POS, X

__all__ = ['StatementBound', 'GroupBound', 'SparseOpBound', 'IOBoundResult', 'io_lower_bound', 'analyse_model']


def _pretty(e) -> str:
    return sympy.sstr(e) if isinstance(e, sympy.Basic) else str(e)


@dataclass
class StatementBound:
    """One statement: its domain, access functions and its share of the group's bound.

    :ivar domain: ``(variable, start, stop)`` per loop/map, outermost first (``stop`` exclusive).
    :ivar accesses: array -> access functions (``'A[i, k] read'``).
    :ivar volume: ``|V|``, the number of executions (exact).
    :ivar bound: ``leading(|V|) / rho`` — this statement's share of its group's bound.
    :ivar tiles: optimal tile extent per variable as expressions of ``S`` (the whole
        domain for streaming groups, None when unbounded).
    :ivar intensity: ``rho``, the bound on the computational intensity ``|V| / Q``.
    """
    name: str
    domain: List[Tuple[str, sympy.Expr, sympy.Expr]]
    accesses: Dict[str, List[str]]
    volume: sympy.Expr
    bound: sympy.Expr
    tiles: Optional[Dict[str, sympy.Expr]]
    intensity: sympy.Expr
    group: int
    notes: List[str] = field(default_factory=list)


@dataclass
class GroupBound:
    """A SOAP group: ``dominator`` is ``|Dom(H)|`` in the tile extents ``t_<var>``."""
    index: int
    statements: List[str]
    dims: List[str]
    dominator: sympy.Expr
    gamma: Optional[sympy.Expr]
    X0: sympy.Expr
    chi: sympy.Expr
    intensity: sympy.Expr
    volume: sympy.Expr
    bound: sympy.Expr
    tiles: Optional[Dict[str, sympy.Expr]]
    notes: List[str] = field(default_factory=list)


@dataclass
class SparseOpBound:
    """A sparse library node and the model that bounds it."""
    name: str
    op: str
    model: sm.SparseBound
    bound: sympy.Expr
    notes: List[str] = field(default_factory=list)


class IOBoundResult:
    """The I/O lower bound of a program.

    :ivar total: lower bound on the words moved (sympy, program symbols and ``S``).
    :ivar statements: :class:`StatementBound` per statement.
    :ivar groups: :class:`GroupBound` per SOAP group.
    :ivar sparse_ops: :class:`SparseOpBound` per sparse library node.
    :ivar skipped: library nodes / scopes that were not analysed.
    :ivar notes: approximations made while reading the program.
    :ivar cache_size: the fast-memory size (the symbol ``S`` or an integer).
    """

    def __init__(self, label, total, statements, groups, sparse_ops, skipped, notes, cache_size):
        self.label = label
        self.total: sympy.Expr = total
        self.statements: List[StatementBound] = statements
        self.groups: List[GroupBound] = groups
        self.sparse_ops: List[SparseOpBound] = sparse_ops
        self.skipped: List[str] = skipped
        self.notes: List[str] = notes
        self.cache_size = cache_size
        #: internal size symbol -> the user's name (``nnz(A)``), used in the text and dict
        #: forms (:attr:`total` and :meth:`evaluate` keep the program's symbols)
        self.names: Dict[str, str] = {}

    @property
    def leading(self) -> sympy.Expr:
        """The dominant terms of :attr:`total` as all program sizes grow (``S`` fixed)."""
        return leading_terms(self.total, keep={S})

    def evaluate(self, **values) -> float:
        """:attr:`total` as a number, given values for its symbols by name (``N=64, S=1024``)."""
        by_name = {s.name: s for s in self.total.free_symbols}
        missing = sorted(set(by_name) - set(values))
        if missing:
            raise UnboundSymbolError(f'evaluate: no value for symbol(s) {", ".join(missing)}; pass them by name, '
                                     f'e.g. evaluate({missing[0]}=64)')
        return float(self.total.xreplace({by_name[k]: sympy.sympify(v) for k, v in values.items() if k in by_name}))

    def to_dict(self) -> dict:
        """A JSON-serialisable summary (expressions as strings, sizes by the user's names)."""

        def show(o):
            if isinstance(o, str):
                return readable(o, self.names)
            if isinstance(o, dict):
                return {k: show(v) for k, v in o.items()}
            if isinstance(o, list):
                return [show(v) for v in o]
            return o

        return show(self._dict())

    def _dict(self) -> dict:
        return {
            'program': self.label,
            'cache_size': _pretty(self.cache_size),
            'total': _pretty(self.total),
            'leading': _pretty(self.leading),
            'statements': [{
                'name': s.name,
                'group': s.group,
                'domain': [[v, _pretty(a), _pretty(b)] for v, a, b in s.domain],
                'accesses': s.accesses,
                'volume': _pretty(s.volume),
                'bound': _pretty(s.bound),
                'tiles': None if s.tiles is None else {k: _pretty(v) for k, v in s.tiles.items()},
                'intensity': _pretty(s.intensity),
                'notes': s.notes
            } for s in self.statements],
            'sparse_ops': [{
                'name': o.name,
                'op': o.op,
                'bound': _pretty(o.bound),
                'volume': _pretty(o.model.volume),
                'intensity': _pretty(o.model.intensity),
                'notes': o.notes
            } for o in self.sparse_ops],
            'skipped': self.skipped,
            'notes': self.notes,
        }

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)

    def table(self) -> str:
        """A readable table: one row per statement, then sparse operations and notes."""
        lines = [f'I/O lower bound (SOAP) of {self.label}: fast memory {_pretty(self.cache_size)} words',
                 f'  Q >= {_pretty(self.total)}']
        if self.leading != self.total:
            lines.append(f'  leading: {_pretty(self.leading)}')
        if self.statements:
            head = ('statement', 'grp', 'domain', '|V|', 'Q >=', 'tiles', '|V|/Q')
            rows = []
            for s in self.statements:
                dom = ' '.join(f'{v}:[{_pretty(a)},{_pretty(b)})' for v, a, b in s.domain)
                tiles = '-' if s.tiles is None else ' '.join(f'{k}={_pretty(v)}' for k, v in s.tiles.items())
                rows.append((s.name, str(s.group), dom, _pretty(s.volume), _pretty(s.bound), tiles,
                             _pretty(s.intensity)))
            widths = [min(40, max(len(r[i]) for r in rows + [head])) for i in range(len(head))]
            lines.append('  ' + '  '.join(h.ljust(w) for h, w in zip(head, widths)))
            for r, s in zip(rows, self.statements):
                lines.append('  ' + '  '.join(c.ljust(w) for c, w in zip(r, widths)))
                acc = '; '.join(f'{", ".join(v)}' for v in s.accesses.values())
                lines.append(f'      accesses: {acc}')
                for n in s.notes:
                    lines.append(f'      note: {n}')
        for o in self.sparse_ops:
            lines.append(f'  sparse {o.op} {o.name}: Q >= {_pretty(o.bound)}  (|V| = {_pretty(o.model.volume)}, '
                         f'|V|/Q <= {_pretty(o.model.intensity)})')
            for n in o.notes:
                lines.append(f'      note: {n}')
        if self.skipped:
            lines.append('  skipped (not analysed): ' + ', '.join(self.skipped))
        for n in self.notes:
            lines.append(f'  note: {n}')
        return readable('\n'.join(lines), self.names)

    def __str__(self):
        return self.table()

    def __repr__(self):
        return readable(f'IOBoundResult({self.label}: Q >= {_pretty(self.total)})', self.names)


# ---------------------------------------------------------------------- helpers
def _as_sdfg(obj) -> dace.SDFG:
    if isinstance(obj, dace.SDFG):
        return obj
    if hasattr(obj, 'to_sdfg'):
        try:
            return obj.to_sdfg()
        except Exception as exc:
            raise UnsupportedProgramError(f'sdfg_or_program: {obj!r}.to_sdfg() failed ({exc}); pass a dace.SDFG or '
                                          'a @dace.program whose arguments are annotated') from exc
    raise UnsupportedProgramError(f'sdfg_or_program: expected a dace.SDFG or a @dace.program, got '
                                  f'{type(obj).__name__}')


def _check_cache(cache_size) -> Union[int, None]:
    if cache_size is None:
        return None
    if isinstance(cache_size, bool) or not isinstance(cache_size, (int, sympy.Integer)) and not (
            hasattr(cache_size, 'dtype') and getattr(cache_size.dtype, 'kind', '') in 'iu'):
        raise InvalidCacheSizeError(f'cache_size={cache_size!r}: expected a positive integer number of words '
                                    '(or None for the symbol S)')
    if int(cache_size) <= 0:
        raise InvalidCacheSizeError(f'cache_size={cache_size!r}: the fast memory must hold at least one word')
    return int(cache_size)


def _degree(e: sympy.Expr) -> Optional[sympy.Expr]:
    """Growth degree of ``e`` as all symbols but ``S`` scale together, or None if unknown."""
    if e.has(sympy.Max, sympy.Min, sympy.floor, sympy.ceiling):
        return None
    lam = sympy.Dummy('lam', positive=True)
    syms = [s for s in e.free_symbols if s.name != 'S']
    scaled = sympy.expand(e.xreplace({s: lam * s for s in syms}))
    degs = []
    for t in sympy.Add.make_args(scaled):
        coeff, d = t.as_coeff_exponent(lam)
        if lam in coeff.free_symbols or not d.is_number:
            return None
        degs.append(d)
    return max(degs) if degs else sympy.Integer(0)


def _dominant(exprs: List[sympy.Expr]) -> sympy.Expr:
    exprs = [e for e in exprs if e != 0]
    if not exprs:
        return sympy.Integer(0)
    if len(exprs) == 1:
        return exprs[0]
    degs = [_degree(e) for e in exprs]
    if any(d is None for d in degs):
        return sympy.Max(*exprs)
    top = max(degs)
    keep = [e for e, d in zip(exprs, degs) if d == top]
    return keep[0] if len(keep) == 1 else sympy.Max(*keep)


_SWAP = {'rows': 'cols', 'cols': 'rows', 'max_row': 'max_col', 'max_col': 'max_row', 'nonempty_rows': 'nonempty_cols',
         'nonempty_cols': 'nonempty_rows'}


def _stats_for(info: dict, stats: Optional[Mapping], matrices: Optional[Mapping]) -> Dict:
    """Statistics of a sparse operand as the operation sees it (transposed views swap them)."""
    name = info['name']
    res = {}
    if matrices and name in matrices:
        res.update(sm.structure_stats(matrices[name]))
    if stats and name in stats:
        res.update(sm.check_stats(stats[name], f'stats[{name!r}]'))
    if info.get('transposed'):
        res = {_SWAP.get(k, k): v for k, v in res.items() if k != 'avg_row'}
    return res


def _check_operands(model: ProgramModel, stats, matrices):
    """Statistics and matrices are for the program's sparse operands: those of the analysed
    sparse calls and the program's sparse arguments (an argument read only by nodes the
    analysis skips, such as ``S`` of ``S * (X @ Y.T)`` before SparseLoopOrdering, keeps its
    statistics unused); any other name is a ``StatsError``."""
    known = sorted({i['name'] for c in model.library_calls for i in c.sparse.values()} | set(model.sparse_arguments))
    for arg, mapping in (('stats', stats), ('matrices', matrices)):
        if mapping is None:
            continue
        if not isinstance(mapping, Mapping):
            what = 'statistics' if arg == 'stats' else 'scipy.sparse matrices'
            raise StatsError(f'{arg} must map sparse operand names to {what}, got {type(mapping).__name__}')
        for key in mapping:
            if key not in known:
                have = ', '.join(known) if known else 'none'
                raise StatsError(f'{arg}[{key!r}]: the program has no sparse operand {key!r} (its sparse operands: '
                                 f'{have})')


def _width(call: LibraryCall, direction: str) -> Optional[sympy.Expr]:
    """Second dimension of the first 2-D dense operand in ``direction`` ('in' / 'out')."""
    for _, (_, shape, d) in sorted(call.dense.items()):
        if d == direction and len(shape) == 2:
            return shape[1]
    return None


def _sparse_bound(call: LibraryCall, stats, matrices, S_) -> SparseOpBound:
    notes = []
    infos = list(call.sparse.values())
    if not infos:
        infos = [{'name': 'A', 'rows': None, 'cols': None, 'nnz': None}]
        notes.append('sparse operand not found; its sizes are symbols')
    a = infos[0]
    name = a['name']
    rows = a['rows'] if a['rows'] is not None else sympy.Symbol(f'rows_{name}', positive=True)
    cols = a['cols'] if a['cols'] is not None else sympy.Symbol(f'cols_{name}', positive=True)
    nnz = a['nnz'] if a['nnz'] is not None else sympy.Symbol(f'nnz_{name}', nonnegative=True)
    if 'spec' in a:  # a contraction with one sparse operand
        model = _einsum_bound(call, a, nnz, stats, matrices, S_)
        notes.append('a contraction: the compulsory traffic (each stored value takes part in a fixed number of '
                     'multiply-adds)')
        if call.dims:
            notes.append('enclosing loops are not multiplied in: operands may stay in fast memory across iterations')
        return SparseOpBound(call.name, call.cls_name, model, model.total, notes)
    st = _stats_for(a, stats, matrices)
    dense_in = [n for n, (_, _, d) in sorted(call.dense.items()) if d == 'in']
    dense_out = [n for n, (_, _, d) in sorted(call.dense.items()) if d == 'out']

    def dname(conns, i, default):
        return call.dense[conns[i]][0] if len(conns) > i else default
    op = call.cls_name
    if op == 'DenseSpMM':  # C = B @ A is C.T = A.T @ B.T: an SpMM over A's transposed view
        a = dict(a, transposed=not a.get('transposed'))
        st = _stats_for(a, stats, matrices)
        rows, cols = cols, rows
        b_shape = next((shape for _, shape, d in call.dense.values() if d == 'in'), ())
        op = 'SpMM' if len(b_shape) == 2 else 'SpMV'
        if op == 'SpMM':
            model = sm.spmm_model(nnz, rows, cols, b_shape[0], S_, st,
                                  (name, dname(dense_in, 0, 'B'), dname(dense_out, 0, 'C')))
        else:
            model = sm.spmv_model(nnz, rows, cols, S_, st, (name, dname(dense_in, 0, 'x'), dname(dense_out, 0, 'y')))
        notes.append('dense @ sparse: analysed as the SpMM of the transposed operands')
    elif op == 'SpMV':
        model = sm.spmv_model(nnz, rows, cols, S_, st, (name, dname(dense_in, 0, 'x'), dname(dense_out, 0, 'y')))
    elif op in ('SpMM', 'SDDMM'):
        k = _width(call, 'out' if op == 'SpMM' else 'in')
        if k is None:
            k = _width(call, 'in') or sympy.Symbol('k', positive=True)
            notes.append('dense width not found in the operands; using their second dimension or the symbol k')
        if op == 'SpMM':
            model = sm.spmm_model(nnz, rows, cols, k, S_, st,
                                  (name, dname(dense_in, 0, 'B'), dname(dense_out, 0, 'Y')))
        else:
            out = infos[1]['name'] if len(infos) > 1 else dname(dense_out, 0, 'C')
            model = sm.sddmm_model(nnz, rows, cols, k, S_, st,
                                   (name, dname(dense_in, 0, 'X'), dname(dense_in, 1, 'Y'), out))
    else:  # SpGEMM
        b = infos[1] if len(infos) > 1 else {'name': 'B', 'rows': None, 'cols': None, 'nnz': None}
        c_name = infos[2]['name'] if len(infos) > 2 else 'C'
        nnz_b = b['nnz'] if b['nnz'] is not None else sympy.Symbol(f'nnz_{b["name"]}', nonnegative=True)
        out_cols = b['cols'] if b['cols'] is not None else sympy.Symbol(f'cols_{b["name"]}', positive=True)
        sb = _stats_for(b, stats, matrices)
        flops = nnz_c = None
        if matrices and name in matrices and b['name'] in matrices and not (a.get('transposed') or
                                                                            b.get('transposed')):
            counts = sm.spgemm_counts(matrices[name], matrices[b['name']])
            flops, nnz_c, nnz, nnz_b = counts['flops'], counts['nnz_c'], counts['nnz_a'], counts['nnz_b']
            st.pop('nnz', None)
            sb.pop('nnz', None)
        model = sm.spgemm_model(nnz, nnz_b, rows, cols, out_cols, S_, flops, nnz_c, st, sb,
                                (name, b['name'], c_name))
    if call.dims:
        notes.append('enclosing loops are not multiplied in: operands may stay in fast memory across iterations')
    return SparseOpBound(call.name, call.cls_name, model, model.total, notes)


def _einsum_bound(call: LibraryCall, a: dict, nnz, stats, matrices, S_) -> sm.SparseBound:
    """:func:`~sdfgsparse.analysis.sparse_models.einsum_model` of an einsum node: its spec with
    the sparse operand first, each index's extent from the operands' shapes, the distinct
    projections from ``matrices[name]`` (a sparse tensor) or ``stats[name]`` where given."""
    lhs, _, out = a['spec'].partition('->')
    subs = lhs.split(',')
    sparse = subs.pop(a['position'])
    ext = dict(zip(sparse, a.get('shape') or ()))
    dense = sorted((c for c in call.dense if c.startswith('_D')), key=lambda c: int(c[2:]))
    for c, s in zip(dense, subs):
        for letter, size in zip(s, call.dense[c][1]):
            ext.setdefault(letter, size)
    for letter in set(sparse + ''.join(subs) + out) - set(ext):
        ext[letter] = sympy.Symbol(f'n_{letter}', positive=True)
    name = a['name']
    distinct = {}
    if matrices and name in matrices:
        distinct.update(sm.einsum_distinct(matrices[name], sparse))
    if stats and name in stats:
        distinct.update({k: v for k, v in stats[name].items() if k != 'nnz'})
    if 'nnz' in distinct:
        nnz = distinct.pop('nnz')
    outs = [v[0] for c, v in sorted(call.dense.items()) if v[2] == 'out']
    sparse_out = [i['name'] for i in call.sparse.values() if i.get('output')]
    names = [name] + [call.dense[c][0] for c in dense] + [(outs or sparse_out or ['out'])[0]]
    return sm.einsum_model(f'{",".join([sparse] + subs)}->{out}', nnz, ext, S_, distinct, names)


def _version(model: ProgramModel, array: str, readers, order: Optional[int] = None) -> int:
    """How many statements outside ``readers`` write ``array`` before ``readers`` first read it
    (program order): two groups share an input only if they read the same version."""
    own = {id(s) for s in readers}
    first = order if order is not None else min(s.order for s in readers)
    n = sum(1 for s in model.statements if id(s) not in own and s.order < first and any(
        a.array == array and a.kind in ('write', 'update') for a in s.accesses))
    for c in model.library_calls:
        outputs = {i['name'] for i in c.sparse.values() if i.get('output')}
        outputs |= {v[0] for v in c.dense.values() if v[2] == 'out'}
        if c.order < first and array in outputs:
            n += 1
    return n


# ---------------------------------------------------------------------- main entry points
def analyse_model(model: ProgramModel, cache_size=None, stats=None, matrices=None, label='program') -> IOBoundResult:
    """SOAP analysis of an extracted :class:`~sdfgsparse.analysis.program_model.ProgramModel`."""
    _check_operands(model, stats, matrices)
    S_ = S_POS
    statements, groups_out, items = [], [], []
    for gi, g in enumerate(form_groups([st for st in model.statements if not st.data_dependent])):
        dom, notes = dominator_poly(g)
        n = len(g.dims)
        volumes = [count_points(st.dims) for st in g.statements]
        leads = [leading_terms(v) for v in volumes]
        tile_syms = [sympy.Symbol(f't_{d.sym}', positive=True) for d in g.dims]
        if n == 0:
            sol = None
            notes.append('no iteration variables: nothing to tile')
        else:
            sol = solve_tiles(dom, (1, ) * n, len(g.statements), S_, X)
        if sol is None or sol.unbounded:
            rho, tiles, gamma, X0, chi = sympy.oo, None, None, sympy.oo, sympy.oo
            bounds = [sympy.Integer(0)] * len(g.statements)
            if n:
                notes.append('the inputs do not bound the tile (no reads, or a variable no read depends on): '
                             'no SOAP bound')
        else:
            rho, gamma, X0, chi = sol.rho, sol.gamma, sol.X0, sol.chi
            bounds = [sympy.powsimp(v / rho) for v in leads]
            if sol.tiles is None:
                tiles = {str(d.sym): d.extent for d in g.dims}
            else:
                tiles = {str(d.sym): t for d, t in zip(g.dims, sol.tiles)}
        gbound = sympy.Add(*bounds)
        groups_out.append(
            GroupBound(gi, [st.name for st in g.statements], [str(d.sym) for d in g.dims], poly_to_sympy(dom, tile_syms),
                       gamma, X0, chi, rho, sympy.Add(*volumes), gbound, tiles, notes))
        reads = set()
        for st, vol, b in zip(g.statements, volumes, bounds):
            rep = g.subs(st)
            acc: Dict[str, List[str]] = {}
            for a in st.accesses:
                idx = ', '.join('?' if i is None else sympy.sstr(i.xreplace(rep)) for i in a.index)
                acc.setdefault(a.array, []).append(f'{a.array}[{idx}] {a.kind}')
                if a.kind != 'write':
                    reads.add((a.array, _version(model, a.array, g.statements)))
            dom_desc = [(str(rep[d.sym]), d.start.xreplace(rep), d.stop.xreplace(rep)) for d in st.dims]
            statements.append(StatementBound(st.name, dom_desc, acc, vol, b, tiles, rho, gi, st.notes + notes))
        items.append((reads, gbound))
    sparse_ops = []
    for call in model.library_calls:
        op = _sparse_bound(call, stats, matrices, S_)
        sparse_ops.append(op)
        names = {i['name'] for i in call.sparse.values() if not i.get('output')}
        names |= {v[0] for v in call.dense.values() if v[2] == 'in'}
        items.append(({(a, _version(model, a, [], call.order)) for a in names}, op.bound))
    # components of items that share an input: maximum, otherwise sum
    parent = list(range(len(items)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(items)):
        for j in range(i + 1, len(items)):
            if items[i][0] & items[j][0]:
                parent[find(i)] = find(j)
    comps: Dict[int, List[sympy.Expr]] = {}
    for i, (_, b) in enumerate(items):
        comps.setdefault(find(i), []).append(b)
    total = sympy.Add(*(_dominant(bs) if len(bs) > 1 else bs[0] for bs in comps.values()))
    target = S if cache_size is None else sympy.Integer(cache_size)

    def fix(e):
        return e.xreplace({S_: target}) if isinstance(e, sympy.Basic) else e

    for s in statements:
        s.volume, s.bound, s.intensity = fix(s.volume), fix(s.bound), fix(s.intensity)
        s.tiles = None if s.tiles is None else {k: fix(v) for k, v in s.tiles.items()}
    for g in groups_out:
        g.X0, g.chi, g.intensity, g.bound = fix(g.X0), fix(g.chi), fix(g.intensity), fix(g.bound)
        g.tiles = None if g.tiles is None else {k: fix(v) for k, v in g.tiles.items()}
    for o in sparse_ops:
        o.bound = fix(o.bound)
    return IOBoundResult(label, fix(total), statements, groups_out, sparse_ops, list(model.skipped), list(model.notes),
                         target)


def io_lower_bound(sdfg_or_program, cache_size: Optional[int] = None, stats: Optional[Mapping] = None,
                   matrices: Optional[Mapping] = None) -> IOBoundResult:
    """Lower bound on the words an execution of a program moves between fast and slow memory.

    :param sdfg_or_program: a ``dace.SDFG`` or a ``@dace.program`` (converted with ``to_sdfg()``).
    :param cache_size: fast-memory size in words; None keeps it as the symbol ``S``.
    :param stats: sparse operand name -> structure statistics (see
        :mod:`~sdfgsparse.analysis.sparse_models`), e.g. ``{'A': {'nnz': 1000, 'max_row': 8}}``.
    :param matrices: sparse operand name -> ``scipy.sparse`` matrix; statistics (and SpGEMM
        ``flops``/``nnz_C``) are computed from it; ``stats`` entries take precedence.
    :returns: :class:`IOBoundResult` (``.total``, ``.statements``, ``.leading``, a table as ``str``).
    :raises UnsupportedProgramError: for objects that are not SDFGs or programs.
    :raises InvalidCacheSizeError: for a ``cache_size`` that is not a positive integer.
    :raises SymbolClashError: when the program has its own symbol ``S`` and ``cache_size`` is None.

    Example::

        N, M, K = (dace.symbol(s) for s in 'NMK')

        @dace.program
        def mm(A: dace.float64[N, K], B: dace.float64[K, M], C: dace.float64[N, M]):
            for i, j, k in dace.map[0:N, 0:M, 0:K]:
                C[i, j] += A[i, k] * B[k, j]

        io_lower_bound(mm).total   # 2*K*M*N/sqrt(S)
    """
    cache = _check_cache(cache_size)
    sdfg = _as_sdfg(sdfg_or_program)
    model = extract(sdfg)
    model.skipped.extend(f'{st.name} (data-dependent iteration domain)' for st in model.statements
                         if st.data_dependent)
    if cache is None and any(s.name == 'S' for s in model.symbols) or (cache is None and 'S' in sdfg.symbols):
        raise SymbolClashError(f'{sdfg.label} has its own symbol S, which names the fast-memory size in the '
                               'result; pass cache_size=<words> or rename the symbol')
    if model.skipped:
        warnings.warn(f'{sdfg.label}: not analysed (their traffic is not in the bound): {", ".join(model.skipped)}',
                      SkippedNodeWarning, stacklevel=2)
    result = analyse_model(model, cache, stats, matrices, sdfg.label)
    result.names = user_symbol_names(sdfg)
    return result
