"""I/O lower bounds of sparse operations, where the iteration domain is the nonzero set.

Model
-----
A sparse operation is a CDAG whose vertices are the multiply-adds, one per nonzero and
per dense column: ``|V| = nnz * k`` for SpMM/SDDMM (``nnz`` for SpMV) and ``|V| = flops =
sum_k nnz(A[:, k]) * nnz(B[k, :])`` for SpGEMM. Two lower bounds hold for every
structure and we return their maximum (``SparseBound.total``):

* **compulsory** — every stored input value, every dense operand entry that meets a
  nonzero, and every output entry moves at least once;
* **reuse** (SOAP / red-blue pebbling) ``|V| / rho``, where ``rho`` bounds the
  computational intensity of any tile of ``X`` dominator words minus ``S`` cached ones.
  A tile with nonzero set ``P`` (``r`` rows, ``c`` columns) and ``J`` dense columns does
  ``|P| J`` multiply-adds and needs ``|P| + r J + c J`` inputs/partial sums; since
  ``|P| <= r c`` this is the dense matrix-multiplication problem, so ``rho <= sqrt(S)/2``
  (Loomis-Whitney for SpGEMM). The structure lowers it further: ``|P| J <= max_row * (r J)``
  and ``r J <= X`` give ``rho <= max_row`` (likewise ``max_col``), every nonzero is used
  at most ``k`` times so ``rho <= k``, and a bandwidth ``b`` caps rows and columns at
  ``2 b + 1`` entries. Statistics the caller does not give are not used, which keeps the
  bound valid (only weaker).

Both terms count words the best known algorithms also move (a row-wise CSR kernel with a
``sqrt(S)``-blocked dense operand reaches ``|V| / (sqrt(S)/2)`` on dense blocks and the
compulsory term on banded matrices), so the bound never exceeds what such an algorithm
moves; tests check it against an LRU simulation of concrete schedules.

Statistics (``stats``), all optional: ``nnz``, ``rows``, ``cols``, ``max_row``, ``max_col``,
``avg_row`` (reported, not used: averages do not bound tiles), ``bandwidth``,
``nonempty_rows``, ``nonempty_cols``. :func:`structure_stats` computes them from a
``scipy.sparse`` matrix.
"""
from dataclasses import dataclass, field
from typing import Dict, Mapping, Optional, Sequence

import numpy as np
import sympy

from sdfgsparse.analysis.errors import StatsError
from sdfgsparse.analysis.symbols import S as S_SYM

__all__ = ['STAT_KEYS', 'SparseBound', 'structure_stats', 'spmv_model', 'spmm_model', 'sddmm_model',
           'spgemm_model', 'spgemm_counts', 'einsum_model', 'einsum_distinct', 'dense_mm_model', 'spmv_bound',
           'spmm_bound', 'sddmm_bound', 'spgemm_bound', 'chain_bound']

STAT_KEYS = ('nnz', 'rows', 'cols', 'max_row', 'max_col', 'avg_row', 'bandwidth', 'nonempty_rows', 'nonempty_cols')


def _s(v):
    return sympy.sympify(v)


def check_stats(stats: Optional[Mapping], arg: str = 'stats') -> Dict[str, sympy.Expr]:
    """Validate a statistics mapping; returns it with sympy values."""
    if stats is None:
        return {}
    if not isinstance(stats, Mapping):
        raise StatsError(f'{arg} must be a mapping of statistic name -> value, got {type(stats).__name__}')
    out = {}
    for k, v in stats.items():
        if k not in STAT_KEYS:
            raise StatsError(f'{arg}: unknown statistic {k!r}; expected one of {", ".join(STAT_KEYS)}')
        try:
            e = _s(v)
        except (sympy.SympifyError, TypeError) as exc:
            raise StatsError(f'{arg}[{k!r}] = {v!r} is not a number or expression') from exc
        if e.is_number and e < 0:
            raise StatsError(f'{arg}[{k!r}] = {v!r} is negative; statistics count entries')
        out[k] = e
    return out


def structure_stats(matrix) -> Dict[str, object]:
    """Statistics of a ``scipy.sparse`` matrix (stored entries after summing duplicates).

    >>> import scipy.sparse as sp
    >>> structure_stats(sp.identity(3, format='csr'))['bandwidth']
    0
    """
    import scipy.sparse as sp
    if not sp.issparse(matrix):
        raise StatsError(f'matrices: expected a scipy.sparse matrix, got {type(matrix).__name__}')
    A = sp.csr_matrix(matrix, copy=True)
    A.sum_duplicates()
    rows, cols = A.shape
    row_len = np.diff(A.indptr)
    col_len = np.bincount(A.indices, minlength=cols) if A.nnz else np.zeros(cols, dtype=np.int64)
    r_idx = np.repeat(np.arange(rows), row_len)
    band = int(np.max(np.abs(r_idx - A.indices))) if A.nnz else 0
    return {
        'nnz': int(A.nnz),
        'rows': int(rows),
        'cols': int(cols),
        'max_row': int(row_len.max()) if rows else 0,
        'max_col': int(col_len.max()) if cols else 0,
        'avg_row': sympy.Rational(int(A.nnz), rows) if rows else 0,
        'bandwidth': band,
        'nonempty_rows': int(np.count_nonzero(row_len)),
        'nonempty_cols': int(np.count_nonzero(col_len)),
    }


@dataclass
class SparseBound:
    """An operation's bound: ``total = Max(reuse, compulsory)`` with ``reuse = volume / intensity``.

    ``inputs`` / ``outputs`` give the words of each named operand counted in
    ``compulsory``; :func:`chain_bound` uses them to drop intermediates of a chain.
    """
    op: str
    volume: sympy.Expr
    intensity: sympy.Expr
    compulsory: sympy.Expr
    inputs: Dict[str, sympy.Expr] = field(default_factory=dict)
    outputs: Dict[str, sympy.Expr] = field(default_factory=dict)
    sparse_operands: tuple = ()
    formula: str = ''

    @property
    def reuse(self) -> sympy.Expr:
        if self.volume == 0 or self.intensity == 0:  # no work (an empty matrix caps rho at 0)
            return sympy.Integer(0)
        return self.volume / self.intensity

    @property
    def total(self) -> sympy.Expr:
        reuse, comp = self.reuse, self.compulsory
        diff = sympy.expand(comp - reuse)
        pos = {s: sympy.Dummy(s.name, positive=True) for s in diff.free_symbols}
        if diff.xreplace(pos).is_nonnegative:
            return comp
        if diff.xreplace(pos).is_nonpositive:
            return reuse
        return sympy.Max(reuse, comp)


def _caps(st: Dict[str, sympy.Expr], prefix_row='max_row', prefix_col='max_col'):
    caps = []
    band = st.get('bandwidth')
    for key in (prefix_row, prefix_col):
        if key in st:
            caps.append(st[key])
    if band is not None:
        caps.append(2 * band + 1)
    return caps


def _intensity(S, k, caps) -> sympy.Expr:
    return sympy.Min(sympy.sqrt(S) / 2, k, *caps) if caps or k is not None else sympy.sqrt(S) / 2


def spmm_model(nnz, rows, cols, k, S=S_SYM, stats: Optional[Mapping] = None,
               names=('A', 'B', 'Y')) -> SparseBound:
    """``Y = A @ B``, ``A`` sparse ``rows x cols`` with ``nnz`` entries, ``B`` dense ``cols x k``.

    ``|V| = nnz k``; ``rho = min(sqrt(S)/2, k, max_row, max_col, 2 bandwidth + 1)``;
    compulsory ``nnz + k (nonempty_cols + rows)`` (``A``'s values, the rows of ``B`` that
    meet a nonzero, all of ``Y``).
    """
    st = check_stats(stats)
    nnz, rows, cols, k = _s(st.get('nnz', nnz)), _s(st.get('rows', rows)), _s(st.get('cols', cols)), _s(k)
    rho = _intensity(S, k, _caps(st))
    c_ne = st.get('nonempty_cols', cols)
    a, b, y = names
    return SparseBound('SpMM', nnz * k, rho, nnz + k * (c_ne + rows), {a: nnz, b: k * c_ne}, {y: k * rows}, (a, ),
                       'max(nnz*k / min(sqrt(S)/2, k, max_row, max_col), nnz + k*(cols + rows))')


def spmv_model(nnz, rows, cols, S=S_SYM, stats: Optional[Mapping] = None, names=('A', 'x', 'y')) -> SparseBound:
    """``y = A @ x``: SpMM with ``k = 1``; every nonzero is used once so ``rho = 1`` and the
    bound is the compulsory traffic ``nnz + nonempty_cols + rows``."""
    st = check_stats(stats)
    nnz, rows, cols = _s(st.get('nnz', nnz)), _s(st.get('rows', rows)), _s(st.get('cols', cols))
    c_ne = st.get('nonempty_cols', cols)
    a, x, y = names
    return SparseBound('SpMV', nnz, sympy.Integer(1), nnz + c_ne + rows, {a: nnz, x: c_ne}, {y: rows}, (a, ),
                       'nnz + cols + rows')


def sddmm_model(nnz, rows, cols, k, S=S_SYM, stats: Optional[Mapping] = None,
                names=('A', 'X', 'Y', 'C')) -> SparseBound:
    """``C = A * (X @ Y.T)`` sampled at ``A``'s nonzeros; ``X`` is ``rows x k``, ``Y`` ``cols x k``.

    ``|V| = nnz k``; the tile argument of SpMM with the partial sums on the nonzeros, so
    ``rho = min(sqrt(S)/2, k, max_row, max_col, 2 bandwidth + 1)``; compulsory
    ``2 nnz + k (nonempty_rows + nonempty_cols)`` (read ``A``, write ``C``, the rows of
    ``X`` and ``Y`` that meet a nonzero).
    """
    st = check_stats(stats)
    nnz, rows, cols, k = _s(st.get('nnz', nnz)), _s(st.get('rows', rows)), _s(st.get('cols', cols)), _s(k)
    rho = _intensity(S, k, _caps(st))
    r_ne, c_ne = st.get('nonempty_rows', rows), st.get('nonempty_cols', cols)
    a, x, y, c = names
    return SparseBound('SDDMM', nnz * k, rho, 2 * nnz + k * (r_ne + c_ne), {a: nnz, x: k * r_ne, y: k * c_ne},
                       {c: nnz}, (a, ), 'max(nnz*k / min(sqrt(S)/2, k, max_row, max_col), 2*nnz + k*(rows + cols))')


def spgemm_model(nnz_a, nnz_b, rows, inner, cols, S=S_SYM, flops=None, nnz_c=None,
                 stats_a: Optional[Mapping] = None, stats_b: Optional[Mapping] = None,
                 names=('A', 'B', 'C')) -> SparseBound:
    """``C = A @ B`` with both operands sparse (``A`` is ``rows x inner``, ``B`` ``inner x cols``).

    ``|V| = flops`` (the symbol ``flops`` unless given); Loomis-Whitney on the
    (i, k, j) triples gives ``rho <= sqrt(S)/2``, and each ``A`` entry meets at most
    ``max_row(B)`` entries, each ``B`` entry ``max_col(A)``, each ``C`` entry
    ``min(max_row(A), max_col(B))``; compulsory ``nnz_A + nnz_B + nnz_C`` (``nnz_C`` the
    symbol ``nnz_C`` unless given). ``nnz_a`` / ``nnz_b`` must count the entries that meet a
    partner (an entry of ``A`` in a column whose row of ``B`` is empty is never read);
    :func:`spgemm_counts` computes them, with ``flops`` and ``nnz_C``, from scipy matrices.
    """
    sa, sb = check_stats(stats_a, 'stats_a'), check_stats(stats_b, 'stats_b')
    nnz_a, nnz_b = _s(sa.get('nnz', nnz_a)), _s(sb.get('nnz', nnz_b))
    flops = sympy.Symbol('flops', nonnegative=True) if flops is None else _s(flops)
    nnz_c = sympy.Symbol(f'nnz_{names[2]}', nonnegative=True) if nnz_c is None else _s(nnz_c)
    caps = []
    if 'max_row' in sb:
        caps.append(sb['max_row'])
    if 'max_col' in sa:
        caps.append(sa['max_col'])
    if 'max_row' in sa and 'max_col' in sb:
        caps.append(sympy.Min(sa['max_row'], sb['max_col']))
    rho = sympy.Min(sympy.sqrt(S) / 2, *caps) if caps else sympy.sqrt(S) / 2
    a, b, c = names
    return SparseBound('SpGEMM', flops, rho, nnz_a + nnz_b + nnz_c, {a: nnz_a, b: nnz_b}, {c: nnz_c}, (a, b),
                       'max(flops / min(sqrt(S)/2, max_row(B), max_col(A)), nnz_A + nnz_B + nnz_C)')


def spgemm_counts(a, b) -> Dict[str, int]:
    """``flops``, structural ``nnz_c`` and the participating ``nnz_a`` / ``nnz_b`` of ``a @ b``."""
    import scipy.sparse as sp
    if not (sp.issparse(a) and sp.issparse(b)):
        raise StatsError('spgemm_counts: expected two scipy.sparse matrices')
    pa, pb = sp.csr_matrix(a, copy=True), sp.csr_matrix(b, copy=True)
    pa.sum_duplicates()
    pb.sum_duplicates()
    if pa.shape[1] != pb.shape[0]:
        raise StatsError(f'spgemm_counts: inner dimensions differ ({pa.shape[1]} vs {pb.shape[0]})')
    col_a = np.bincount(pa.indices, minlength=pa.shape[1]).astype(np.int64)
    row_b = np.diff(pb.indptr).astype(np.int64)
    pa.data[:] = 1
    pb.data[:] = 1
    return {
        'flops': int(col_a @ row_b),
        'nnz_c': int((pa @ pb).nnz),
        'nnz_a': int(np.count_nonzero(row_b[pa.indices])) if pa.nnz else 0,
        'nnz_b': int(col_a[np.repeat(np.arange(pb.shape[0]), row_b)].astype(bool).sum()) if pb.nnz else 0,
    }


def einsum_model(spec: str, nnz, extents: Mapping[str, object], S=S_SYM, distinct: Optional[Mapping[str, object]] = None,
                 names: Optional[Sequence[str]] = None) -> SparseBound:
    """A contraction with one sparse operand, ``np.einsum(spec, ...)`` (the sparse operand's
    subscripts first in ``spec``; ``ijk,jr,kr->ir``: MTTKRP), ``nnz`` stored entries (no two
    of equal coordinates), ``extents`` each index's size.

    ``|V| = nnz * prod(extents of the indices the sparse operand lacks)``. Each stored value
    takes part in that product of multiply-adds and nothing else, so ``rho <= prod`` and
    the reuse term is ``nnz``: the bound is the compulsory traffic ``nnz + sum over dense
    operands and the result of distinct(X) * prod(their other extents)``, where ``X`` is the
    operand's indices shared with the sparse one and ``distinct(X)`` the number of distinct
    projections of the entries onto them: from ``distinct`` (keyed by the index letters in
    the sparse operand's order, e.g. ``'j'``, ``'ik'``; :func:`einsum_distinct` counts them),
    else its lower bound ``nnz / prod(extents of the sparse indices outside X)``. Dense
    operands that share no index with the sparse one move whole.
    """
    text = spec.replace(' ', '')
    lhs, _, out = text.partition('->')
    subs = lhs.split(',')
    sparse, dense = subs[0], subs[1:]
    nnz = _s(nnz)
    ext = {c: _s(v) for c, v in extents.items()}
    missing = sorted({c for c in text if c.isalpha()} - set(ext))
    if missing:
        raise StatsError(f'einsum_model {spec!r}: no extent for {", ".join(missing)}')
    given = {k: _s(v) for k, v in (distinct or {}).items()}
    inner = [c for c in dict.fromkeys(out + ''.join(dense)) if c not in sparse]
    per_value = sympy.Mul(*(ext[c] for c in inner))

    def words(op: str) -> sympy.Expr:
        shared = ''.join(c for c in sparse if c in op)
        rest = sympy.Mul(*(ext[c] for c in op if c not in sparse))
        if not shared:
            return rest if nnz != 0 else sympy.Integer(0)
        if shared in given:
            d = given[shared]
        else:
            d = nnz / sympy.Mul(*(ext[c] for c in sparse if c not in shared))
        return d * rest

    names = list(names or ['A'] + [f'D{k}' for k in range(len(dense))] + ['out'])
    inputs = {names[0]: nnz}
    inputs.update({names[1 + k]: words(op) for k, op in enumerate(dense)})
    outputs = {names[-1]: words(out) if out else sympy.Integer(1)}
    comp = sympy.Add(*inputs.values(), *outputs.values())
    return SparseBound('Einsum', nnz * per_value, per_value, comp, inputs, outputs, (names[0], ),
                       'nnz + sum over dense operands and the result of distinct(shared indices) * other extents')


def einsum_distinct(tensor, subscripts: str) -> Dict[str, int]:
    """For a sparse tensor (scipy N-D ``coo_array``, pydata ``COO``, ``ss.SparseTensor``) with
    ``subscripts`` (one letter per dimension): the number of distinct projections of its
    entries onto every nonempty subset of its indices (:func:`einsum_model`'s ``distinct``),
    duplicates counted once (``nnz`` under the whole subscripts)."""
    import itertools
    if hasattr(tensor, 'to_coo_arrays'):
        *coords, _ = tensor.to_coo_arrays()
    elif hasattr(tensor, 'coords'):
        coords = list(tensor.coords)
    else:
        raise StatsError(f'einsum_distinct: expected a sparse tensor, got {type(tensor).__name__}')
    if len(coords) != len(subscripts):
        raise StatsError(f'einsum_distinct: {len(coords)} dimensions, subscripts {subscripts!r}')
    shape = tuple(int(s) for s in tensor.shape)
    res = {}
    for r in range(1, len(subscripts) + 1):
        for dims in itertools.combinations(range(len(subscripts)), r):
            keys = np.ravel_multi_index([np.asarray(coords[d], dtype=np.int64) for d in dims],
                                        [shape[d] for d in dims]) if len(coords[0]) else np.zeros(0, np.int64)
            res[''.join(subscripts[d] for d in dims)] = int(np.unique(keys).size)
    res['nnz'] = res[subscripts]
    return res


def dense_mm_model(n, m, k, S=S_SYM, names=('A', 'B', 'C')) -> SparseBound:
    """Dense ``C (n x m) = A (n x k) @ B (k x m)`` (SOAP: ``2 n m k / sqrt(S)``), for chains."""
    n, m, k = _s(n), _s(m), _s(k)
    a, b, c = names
    return SparseBound('MatMul', n * m * k, sympy.sqrt(S) / 2, n * k + k * m + n * m, {a: n * k, b: k * m}, {c: n * m},
                       (), '2*n*m*k/sqrt(S)')


def spmv_bound(nnz, rows, cols, S=S_SYM, stats=None) -> sympy.Expr:
    """Words moved by any SpMV schedule at least (see :func:`spmv_model`)."""
    return spmv_model(nnz, rows, cols, S, stats).total


def spmm_bound(nnz, rows, cols, k, S=S_SYM, stats=None) -> sympy.Expr:
    """Words moved by any SpMM schedule at least (see :func:`spmm_model`)."""
    return spmm_model(nnz, rows, cols, k, S, stats).total


def sddmm_bound(nnz, rows, cols, k, S=S_SYM, stats=None) -> sympy.Expr:
    """Words moved by any SDDMM schedule at least (see :func:`sddmm_model`)."""
    return sddmm_model(nnz, rows, cols, k, S, stats).total


def spgemm_bound(nnz_a, nnz_b, rows, inner, cols, S=S_SYM, flops=None, nnz_c=None, stats_a=None,
                 stats_b=None) -> sympy.Expr:
    """Words moved by any SpGEMM schedule at least (see :func:`spgemm_model`)."""
    return spgemm_model(nnz_a, nnz_b, rows, inner, cols, S, flops, nnz_c, stats_a, stats_b).total


def chain_bound(parts: Sequence[SparseBound]) -> sympy.Expr:
    """Bound of a chain of operations (e.g. a GCN layer ``A @ (X @ W)``).

    Reuse terms add up over operations with different sparse operands (SOAP sums
    statements that share no input); operations that share a sparse operand may be fused
    (matrix-powers kernels), so only the largest of their reuse terms counts. The
    compulsory term counts the chain's inputs (operands no earlier part produces) and its
    outputs (results no later part consumes) once; intermediates are free.
    """
    if not parts:
        return sympy.Integer(0)
    by_operand: Dict[object, list] = {}
    for i, p in enumerate(parts):
        key = p.sparse_operands[0] if p.sparse_operands else ('__dense', i)
        by_operand.setdefault(key, []).append(p.reuse)
    reuse = sympy.Add(*(terms[0] if len(terms) == 1 else sympy.Max(*terms) for terms in by_operand.values()))
    produced, counted = set(), set()
    words = sympy.Integer(0)
    for p in parts:
        for name, w in p.inputs.items():
            if name not in produced and name not in counted:
                words += w
                counted.add(name)
        produced |= set(p.outputs)
    for i, p in enumerate(parts):
        later = set().union(*(set(q.inputs) for q in parts[i + 1:])) if i + 1 < len(parts) else set()
        for name, w in p.outputs.items():
            if name not in later:
                words += w
    return sympy.Max(reuse, words)
