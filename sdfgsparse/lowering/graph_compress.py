"""Building blocks of the portable kernels (:mod:`sdfgsparse.lowering.graph`) whose result
has a data-dependent number of entries: conversion to CSR / CSC, sparse ± sparse, sparse ∘
sparse, SpGEMM.

The result is a CSR storage (a CSC result is the CSR storage of the transposed matrix)
whose ``crd`` and ``vals`` have a capacity; ``pos[rows]`` holds the real count and the
runtime trims returned results to it. Everything here is built with DaCe's SDFG API on
top of :class:`~sdfgsparse.lowering.graph.Kernel`: maps (with dynamic ranges), state
machine loops, write-conflict resolutions and Python tasklets (DaCe's tasklet language:
``while``, ``if`` and indexing of whole-array connectors), no C++ text.

Pieces, each a few states appended to the kernel:

* :func:`row_major` — an operand whose loop nest *is* a canonical row walk (a dense row
  level over an ordered, unique compressed level: CSR, or CSC seen transposed), asked of
  its :class:`~sdfgsparse.formats.levels.LevelLoop` objects, as :class:`Rows`.
* :func:`expand_entries` — the stored entries of any operand as lists ``(row, col, value)``
  indexed by the entry's value slot (a parallel map, no cursor); slots that hold no entry
  (ELL padding, out-of-range DIA slots, an intermediate result's capacity beyond its
  count) keep the *sentinel* ``(rows, cols)``.
* :func:`scan` — a prefix sum in three steps (pieces' sums in parallel, their prefix,
  pieces' positions in parallel), where a kernel class has no own (the cpu kernels' is
  :func:`sequential_scan`).
* :func:`counting_sort` — a stable counting sort of lists by a key in ``[0, extent]``
  (``extent``: the sentinels' bucket, last): a map counting with atomic ``wcr``, a
  :func:`scan`, a sequential scatter loop.
* :func:`compress_lists` — lists sorted by column, then by row (two counting sorts:
  O(n + rows + cols), no comparisons), duplicates summed into a CSR storage.
* :func:`count_fill` — the two-pass row-parallel shape: a parallel map counting each
  result row (a Python tasklet per row), a prefix sum into ``pos`` (:func:`scan`), a parallel
  map filling each row at ``pos[row]``. :func:`dedupe_rows` (sum equal columns of sorted
  rows) and :func:`merge_rows` (union or intersection of two canonical row sets) use it
  through :func:`row_step`, where a kernel class may put its own steps (the cpu leaves).
* :func:`canonical_rows` — :func:`row_major` where it applies, else the operand
  expanded, sorted and compressed into transient CSR arrays.
* :func:`product_lists` — the products of SpGEMM (every stored ``A[i, k]`` times row
  ``k`` of a CSR ``B``) as entry lists, for :func:`compress_lists`.

Explicit zeros (stored ones, or from cancellation) are kept.
"""
import contextlib
import contextvars
import itertools
from typing import Dict, Optional, Sequence, Tuple

import dace
import sympy
from dace import dtypes

from sdfgsparse._symbolic import pyexpr
from sdfgsparse.formats.levels import COUNTED, SEGMENT
from sdfgsparse.lowering.graph import SUM, Kernel, Operand, Scope, read

__all__ = ['Rows', 'EntryLists', 'row_major', 'tasklet', 'scan', 'sequential_scan', 'sequential_scans', 'SCAN_CHUNK', 'new_lists', 'sentinel_fill', 'expand_entries',
           'counting_sort', 'compress_lists', 'count_fill', 'row_step', 'dedupe_rows', 'merge_rows', 'canonical_rows',
           'product_lists', 'ROW']

#: The row parameter of the row maps of :func:`count_fill`; its tasklets' code reads it.
ROW = 'ss_row'

_SEQ = dtypes.ScheduleType.Sequential
_PAR = dtypes.ScheduleType.Default


class Rows:
    """A CSR storage inside a kernel: the names of its ``pos`` (``rows + 1`` entries),
    ``crd`` and ``vals`` arrays and its (symbolic) number of rows. Row ``r`` holds the
    entries ``pos[r]:pos[r + 1]``."""

    def __init__(self, pos: str, crd: str, vals: str, rows):
        self.pos, self.crd, self.vals, self.rows = pos, crd, vals, rows

    def __repr__(self):
        return f'Rows({self.pos}, {self.crd}, {self.vals}, rows={self.rows})'


class EntryLists:
    """Three arrays of one length: the rows, columns and values of candidate entries."""

    def __init__(self, row: str, col: str, val: str):
        self.row, self.col, self.val = row, col, val


def _name(k: Kernel, hint: str) -> str:
    """A name for a map parameter or loop variable, unused in ``k``."""
    counter = k.__dict__.setdefault('_compress_names', itertools.count())
    return f'{hint}{next(counter)}'


# ---------------------------------------------------------------------- recognising rows
def row_major(A: Operand) -> Optional[Rows]:
    """A's storage as :class:`Rows` when A's loop nest is a canonical row walk: a counted
    root level over ``[0, rows)`` whose loop variable is the row, then a segment level
    ``pos[row]:pos[row + 1]`` of an ordered, unique level whose coordinate ``crd[p]`` is
    the column and whose position is the value slot, no guards (CSR, or CSC seen as its
    transpose). Else None."""
    lv = A.levels
    if len(lv) != 2:
        return None
    root, seg = lv
    stored = A.type.fmt.levels[1]
    if root.kind != COUNTED or seg.kind != SEGMENT or root.guard is not None or seg.guard is not None:
        return None
    if not (stored.ordered and stored.unique) or root.var is None or seg.var is None:
        return None
    if sympy.sympify(root.begin) != 0 or sympy.simplify(sympy.sympify(root.end) - A.type.rows) != 0:
        return None
    if A.row != root.var or root.pos != root.var or A.pos != seg.var or seg.pos != seg.var:
        return None
    b, e, c = seg.begin, seg.end, A.col
    undef = sympy.core.function.AppliedUndef
    if not all(isinstance(x, undef) and len(x.args) == 1 for x in (b, e, c)):
        return None
    if b.func != e.func or b.args[0] != root.var or sympy.simplify(e.args[0] - root.var - 1) != 0:
        return None
    if c.args[0] != seg.var:
        return None
    return Rows(b.func.__name__, c.func.__name__, A.vals, A.type.rows)


# ---------------------------------------------------------------------- graph helpers
def tasklet(k: Kernel, scope: Scope, label: str, code: str, inputs: Dict[str, str], outputs: Dict[str, str],
            wcr: Optional[str] = None):
    """A Python tasklet running ``code`` inside ``scope``. ``inputs`` and ``outputs`` map
    connectors to an array name (the whole array, a dynamic memlet: the code indexes it)
    or to one element (``'arr[i]'``). ``wcr`` applies to the element outputs."""
    state = scope.state
    t = state.add_tasklet(label, set(inputs), set(outputs), code, language=dtypes.Language.Python)

    def memlet(spec: str, out: bool) -> dace.Memlet:
        if '[' in spec:
            return dace.Memlet(spec, wcr=wcr if out else None)
        return dace.Memlet(data=spec, subset=dace.subsets.Range.from_array(k.sdfg.arrays[spec]), dynamic=True)

    reads = {}
    for conn, spec in inputs.items():
        arr = spec.split('[')[0]
        if arr not in reads:
            reads[arr] = state.add_read(arr)
        state.add_memlet_path(reads[arr], *scope.entries, t, dst_conn=conn, memlet=memlet(spec, False))
    if not inputs and scope.entries:
        state.add_nedge(scope.entries[-1], t, dace.Memlet())
    writes = {}
    for conn, spec in outputs.items():
        arr = spec.split('[')[0]
        if arr not in writes:
            writes[arr] = state.add_write(arr)
        state.add_memlet_path(t, *reversed(scope.exits), writes[arr], src_conn=conn, memlet=memlet(spec, True))
    return t


#: Entries per piece of :func:`scan`'s chunked prefix sum.
SCAN_CHUNK = 1024

_SEQUENTIAL_SCANS = contextvars.ContextVar('sdfgsparse_sequential_scans', default=False)


@contextlib.contextmanager
def sequential_scans():
    """Within: :func:`scan` builds :func:`sequential_scan` for every kernel (the FPGA target:
    its loops pipeline, and its lowering reads sparse results through member views only,
    which the pieces' whole-array writes of positions are not)."""
    token = _SEQUENTIAL_SCANS.set(True)
    try:
        yield
    finally:
        _SEQUENTIAL_SCANS.reset(token)


def scan(k: Kernel, label: str, counts: str, positions: str, n):
    """``positions[0] = 0; positions[i + 1] = positions[i] + counts[i]`` for ``i < n``, by
    the kernel class's own ``scan`` where it has one (the cpu kernels: :func:`sequential_scan`;
    every kernel within :func:`sequential_scans`), else in pieces of :data:`SCAN_CHUNK` entries:

    1. a parallel map over the pieces, each summing its counts (a Python tasklet's loop);
    2. one tasklet: the pieces' sums' prefix (``ceil(n / SCAN_CHUNK)`` steps) and
       ``positions[n]`` (an exact write: with only the pieces' whole-array writes, the GPU
       lowering's member views of a sparse result's positions broke the generated code);
    3. a parallel map over the pieces, each writing its positions from its start.

    Three steps whatever ``n``: on a GPU three kernels (a loop of states would launch one
    kernel per entry), on a CPU parallel pieces."""
    own = getattr(type(k), 'scan', None)
    if own is not None:
        return own(k, label, counts, positions, n)
    n = sympy.sympify(n)
    if _SEQUENTIAL_SCANS.get() or (n.is_Number and n < 2):  # (an array of one element reaches a tasklet as a scalar)
        return sequential_scan(k, label, counts, positions, n)
    pieces = dace.symbolic.int_ceil(n, SCAN_CHUNK)
    # (one more slot than pieces: never an array of one element)
    sums = k.transient(f'{label}_sums', [pieces + 1], dace.int64)
    starts = k.transient(f'{label}_starts', [pieces + 1], dace.int64)
    c = _name(k, f'{label}_c')
    bounds = f'u_i = {c} * {SCAN_CHUNK}\nu_e = u_i + {SCAN_CHUNK}\nif u_e > {pyexpr(n)}:\n    u_e = {pyexpr(n)}\n'
    sc = k.scope(k.add_state(f'{label}_sums'), [(c, 0, pieces)], [_PAR])
    tasklet(k, sc, f'{label}_sums', bounds + 'u_s = 0\nwhile u_i < u_e:\n    u_s = u_s + _cnt[u_i]\n'
            '    u_i = u_i + 1\n_sum = u_s\n', {'_cnt': counts}, {'_sum': f'{sums}[{c}]'})
    tasklet(k, Scope.at(k.add_state(f'{label}_starts')), f'{label}_starts',
            f'u_acc = 0\nu_j = 0\nwhile u_j < {pyexpr(pieces)}:\n    _st[u_j] = u_acc\n'
            '    u_acc = u_acc + _sum[u_j]\n    u_j = u_j + 1\n_total = u_acc\n', {'_sum': sums},
            {'_st': starts, '_total': f'{positions}[{pyexpr(n)}]'})
    sc = k.scope(k.add_state(f'{label}_positions'), [(c, 0, pieces)], [_PAR])
    tasklet(k, sc, f'{label}_positions', bounds + 'u_acc = _st\nwhile u_i < u_e:\n    _pos[u_i] = u_acc\n'
            '    u_acc = u_acc + _cnt[u_i]\n    u_i = u_i + 1\n', {'_cnt': counts, '_st': f'{starts}[{c}]'},
            {'_pos': positions})


def sequential_scan(k: Kernel, label: str, counts: str, positions: str, n):
    """:func:`scan` as one sequential loop of states (a state per entry)."""
    k.compute(Scope.at(k.add_state(f'{label}_start')), (positions, [0]), 0, label=f'{label}_start')
    i = sympy.Symbol(_name(k, f'{label}_i'))
    body = k.loop(f'{label}_scan', str(i), 0, n)
    k.compute(Scope.at(body), (positions, [i + 1]), read(positions, i) + read(counts, i), label=f'{label}_scan')


def new_lists(k: Kernel, label: str, n, vdtype) -> EntryLists:
    """Transient entry lists of length ``n`` (int64 rows and columns, ``vdtype`` values)."""
    return EntryLists(k.transient(f'{label}_r', [n], dace.int64), k.transient(f'{label}_c', [n], dace.int64),
                      k.transient(f'{label}_v', [n], vdtype))


def sentinel_fill(k: Kernel, lists: EntryLists, rows, cols):
    """Every entry of ``lists`` the sentinel ``(rows, cols)`` (no entry), in parallel."""
    st = k.add_state('sentinel')
    k.fill(st, lists.row, rows)
    k.fill(st, lists.col, cols)


def expand_entries(k: Kernel, label: str, A: Operand, vdtype, lists: Optional[EntryLists] = None) -> EntryLists:
    """A's stored entries as lists indexed by value slot (``A.nvals`` long): every slot
    first the sentinel ``(rows, cols)``, then a parallel map over A's entries writing
    ``(row, col, value)`` at the entry's slot. Slots that hold no entry keep the
    sentinel: padding (ELL, DIA) and the capacity of an intermediate result beyond its
    count (a ``Convert`` of a COO with duplicates)."""
    st = A.type
    n = A.nvals
    lists = lists or new_lists(k, label, n, vdtype)
    sentinel_fill(k, lists, st.rows, st.cols)
    state = k.add_state(f'{label}_expand')
    sc = k.entries(state, A)
    k.compute(sc, (lists.row, [A.pos]), A.row, guard=A.guard, label=f'{label}_expand',
              more=[((lists.col, [A.pos]), A.col), ((lists.val, [A.pos]), A.value)])
    return lists


def counting_sort(k: Kernel, label: str, n, key: str, extent, moves: Sequence[Tuple[str, str]],
                  starts: Optional[str] = None):
    """A stable counting sort of ``n``-entry lists by ``key`` (values in ``[0, extent]``):
    each ``(src, dst)`` of ``moves`` is copied in key order. ``starts`` (``extent + 1``
    entries), if given, receives where each key's run begins (``starts[extent]``: the
    number of keys below ``extent``).

    Counting is a parallel map (atomic ``wcr``), the prefix sum a :func:`scan`, the
    scatter a sequential loop of states (it keeps equal keys in list order; on a GPU a
    kernel per entry)."""
    hist = k.transient(f'{label}_hist', [sympy.sympify(extent) + 1], dace.int64)
    k.fill(k.add_state(f'{label}_zero'), hist)
    state = k.add_state(f'{label}_count')
    q = sympy.Symbol(_name(k, f'{label}_q'))
    sc = k.scope(state, [(str(q), 0, n)], [_PAR])
    k.compute(sc, (hist, [read(key, q)]), 1, wcr=SUM, label=f'{label}_count')
    cnt = k.transient(f'{label}_cnt', [sympy.sympify(extent) + 2], dace.int64)
    scan(k, f'{label}_prefix', hist, cnt, sympy.sympify(extent) + 1)  # cnt[c]: the keys below c
    if starts is not None:
        state = k.add_state(f'{label}_starts')
        s = sympy.Symbol(_name(k, f'{label}_s'))
        sc = k.scope(state, [(str(s), 0, sympy.sympify(extent) + 1)], [_PAR])
        k.compute(sc, (starts, [s]), read(cnt, s), label=f'{label}_starts')
    # a loop of states (the cursors live across iterations; as one tasklet's loop the cursors
    # would be a transient written and never read afterwards, whose removal by DaCe 1.0.2's
    # dead-dataflow pass fails on a Python tasklet's array connector); the slot into a local
    # first: DaCe 1.0.2 garbles an array read inside an output's index
    p = _name(k, f'{label}_p')
    body = k.loop(f'{label}_scatter', p, 0, n)
    code = ['u_d = _cin[_key]'] + [f'_o{j}[u_d] = _s{j}' for j in range(len(moves))] + ['_cout[_key] = u_d + 1']
    inputs = {'_key': f'{key}[{p}]', '_cin': cnt}
    inputs.update({f'_s{j}': f'{src}[{p}]' for j, (src, _) in enumerate(moves)})
    outputs = {f'_o{j}': dst for j, (_, dst) in enumerate(moves)}
    outputs['_cout'] = cnt
    tasklet(k, Scope.at(body), f'{label}_scatter', '\n'.join(code), inputs, outputs)


def compress_lists(k: Kernel, label: str, lists: EntryLists, n, rows, cols, out: Rows):
    """The ``n`` entries of ``lists`` (``rows x cols``; sentinels ``(rows, cols)`` are no
    entries) into the CSR storage ``out``: sorted by column, then by row (stable), equal
    coordinates summed in list order."""
    vdtype = k.sdfg.arrays[lists.val].dtype
    srt = new_lists(k, f'{label}_bycol', n, vdtype)
    counting_sort(k, f'{label}_bycol', n, lists.col, cols,
                  [(lists.row, srt.row), (lists.col, srt.col), (lists.val, srt.val)])
    byrow = new_lists(k, f'{label}_byrow', n, vdtype)
    starts = k.transient(f'{label}_rowpos', [sympy.sympify(rows) + 1], dace.int64)
    counting_sort(k, f'{label}_byrow', n, srt.row, rows, [(srt.col, byrow.col), (srt.val, byrow.val)], starts)
    dedupe_rows(k, label, Rows(starts, byrow.col, byrow.val, rows), out)


# ---------------------------------------------------------------------- row passes
def count_fill(k: Kernel, label: str, rows, out: Rows, count_code: str, fill_code: str, inputs: Dict[str, str],
               fill_inputs: Dict[str, str] = None):
    """The two-pass row-parallel shape of a result with data-dependent rows.

    1. *count*: a parallel map over ``rows`` (parameter :data:`ROW`) whose Python tasklet
       runs ``count_code`` with ``inputs`` (connector -> whole array) and writes the row's
       count to ``_cnt``;
    2. *positions*: ``out.pos`` as the prefix sum of the counts (:func:`scan`);
    3. *fill*: a parallel map over ``rows`` running ``fill_code`` with ``inputs`` and
       ``fill_inputs`` (the values, which counting does not read), ``_op``
       (``out.pos``) and the outputs ``_oc`` / ``_ov`` (``out.crd`` / ``out.vals``), which
       it writes at ``_op[ROW]`` onwards.

    Both row maps ask OpenMP for its guided schedule (a hint other targets ignore): row
    lengths of sparse results differ by orders of magnitude (power-law rows).

    Locals of the codes must not be named like a symbol of the kernel (prefix them). The
    fill code also names the result's capacity (``u_cap``, unused): DaCe 1.0.2 passes a
    symbol that only sizes arrays neither into the kernel nor into the enclosing program,
    which allocates an intermediate result from it."""
    cap = k.sdfg.arrays[out.crd].shape[0]
    fill_code = f'u_cap = {pyexpr(cap)}\n{fill_code}'
    cnt = k.transient(f'{label}_rowcnt', [rows], dace.int64)
    state = k.add_state(f'{label}_count')
    sc = k.scope(state, [(ROW, 0, rows)], [_PAR])
    sc.entries[0].map.omp_schedule = dtypes.OMPScheduleType.Guided
    tasklet(k, sc, f'{label}_count', count_code, inputs, {'_cnt': f'{cnt}[{ROW}]'})
    scan(k, f'{label}_pos', cnt, out.pos, rows)
    state = k.add_state(f'{label}_fill')
    sc = k.scope(state, [(ROW, 0, rows)], [_PAR])
    sc.entries[0].map.omp_schedule = dtypes.OMPScheduleType.Guided
    tasklet(k, sc, f'{label}_fill', fill_code, dict(inputs, **(fill_inputs or {}), _op=out.pos),
            {'_oc': out.crd, '_ov': out.vals})


_DEDUPE_COUNT = f'''
u_q = _ap[{ROW}]
u_e = _ap[{ROW} + 1]
u_n = 0
while u_q < u_e:
    u_c = _ac[u_q]
    u_q += 1
    while u_q < u_e and _ac[u_q] == u_c:
        u_q += 1
    u_n += 1
_cnt = u_n
'''

_DEDUPE_FILL = f'''
u_q = _ap[{ROW}]
u_e = _ap[{ROW} + 1]
u_d = _op[{ROW}]
while u_q < u_e:
    u_c = _ac[u_q]
    u_v = _av[u_q]
    u_q += 1
    while u_q < u_e and _ac[u_q] == u_c:
        u_v = u_v + _av[u_q]
        u_q += 1
    _oc[u_d] = u_c
    _ov[u_d] = u_v
    u_d += 1
'''


def row_step(k: Kernel, label: str, kind: str, rows, out: Rows, inputs: Dict[str, str], fill_inputs: Dict[str, str],
             sign: int = 1):
    """The count and fill of ``kind`` (``'dedupe'``, ``'union'``, ``'intersect'``) by
    :func:`count_fill` with this module's Python tasklets, or by the kernel itself where its
    class builds them (``row_step``: the cpu kernels call C++ leaves). ``inputs`` /
    ``fill_inputs``: ``_ap``, ``_ac`` (and ``_bp``, ``_bc``) / ``_av`` (and ``_bv``)."""
    own = getattr(type(k), 'row_step', None)
    if own is not None:
        return own(k, label, kind, rows, out, inputs, fill_inputs, sign)
    if kind == 'dedupe':
        count, fill = _DEDUPE_COUNT, _DEDUPE_FILL
    elif kind == 'union':
        count = _UNION_COUNT
        fill = _UNION_FILL.format(neg='' if sign > 0 else '-', op='+' if sign > 0 else '-')
    elif kind == 'intersect':
        count, fill = _INTERSECT_COUNT, _INTERSECT_FILL
    else:
        raise ValueError(f'row_step: unknown kind {kind!r}; use "dedupe", "union" or "intersect"')
    return count_fill(k, label, rows, out, count, fill, inputs, fill_inputs)


def dedupe_rows(k: Kernel, label: str, src: Rows, out: Rows):
    """``out`` = ``src`` (rows with sorted, possibly repeated columns) with each run of
    equal columns summed into one entry (in order), by :func:`row_step`."""
    row_step(k, f'{label}_dedupe', 'dedupe', src.rows, out, {'_ap': src.pos, '_ac': src.crd}, {'_av': src.vals})


#: the row's segments of both operands in the merges below: ``[u_a, u_ae)`` and ``[u_b, u_be)``
_TWO_ROWS = f'''
u_a = _ap[{ROW}]
u_ae = _ap[{ROW} + 1]
u_b = _bp[{ROW}]
u_be = _bp[{ROW} + 1]
'''
#: where the fill of a row writes its first entry
_WRITE_AT = f'''u_d = _op[{ROW}]
'''

_UNION_COUNT = _TWO_ROWS + '''u_n = 0
while u_a < u_ae and u_b < u_be:
    u_ca = _ac[u_a]
    u_cb = _bc[u_b]
    if u_ca <= u_cb:
        u_a += 1
    if u_cb <= u_ca:
        u_b += 1
    u_n += 1
_cnt = u_n + (u_ae - u_a) + (u_be - u_b)
'''

_UNION_FILL = _TWO_ROWS + _WRITE_AT + '''while u_a < u_ae and u_b < u_be:
    u_ca = _ac[u_a]
    u_cb = _bc[u_b]
    if u_ca < u_cb:
        _oc[u_d] = u_ca
        _ov[u_d] = _av[u_a]
        u_a += 1
    elif u_cb < u_ca:
        _oc[u_d] = u_cb
        _ov[u_d] = {neg}_bv[u_b]
        u_b += 1
    else:
        _oc[u_d] = u_ca
        _ov[u_d] = _av[u_a] {op} _bv[u_b]
        u_a += 1
        u_b += 1
    u_d += 1
while u_a < u_ae:
    _oc[u_d] = _ac[u_a]
    _ov[u_d] = _av[u_a]
    u_a += 1
    u_d += 1
while u_b < u_be:
    _oc[u_d] = _bc[u_b]
    _ov[u_d] = {neg}_bv[u_b]
    u_b += 1
    u_d += 1
'''

_INTERSECT_COUNT = _TWO_ROWS + '''u_n = 0
while u_a < u_ae and u_b < u_be:
    u_ca = _ac[u_a]
    u_cb = _bc[u_b]
    if u_ca == u_cb:
        u_n += 1
    if u_ca <= u_cb:
        u_a += 1
    if u_cb <= u_ca:
        u_b += 1
_cnt = u_n
'''

_INTERSECT_FILL = _TWO_ROWS + _WRITE_AT + '''while u_a < u_ae and u_b < u_be:
    u_ca = _ac[u_a]
    u_cb = _bc[u_b]
    if u_ca == u_cb:
        _oc[u_d] = u_ca
        _ov[u_d] = _av[u_a] * _bv[u_b]
        u_d += 1
    if u_ca <= u_cb:
        u_a += 1
    if u_cb <= u_ca:
        u_b += 1
'''


def merge_rows(k: Kernel, label: str, a: Rows, b: Rows, out: Rows, mode: str = 'union', sign: int = 1):
    """``out`` from two canonical row sets of the same shape (sorted, unique columns per
    row), row by row (a two-pointer merge per row, :func:`row_step`):
    ``mode='union'``: ``a + sign * b`` on the union of the patterns (cancellation kept);
    ``mode='intersect'``: ``a * b`` on the intersection."""
    if mode not in ('union', 'intersect'):
        raise ValueError(f'merge_rows: unknown mode {mode!r}; use "union" or "intersect"')
    row_step(k, f'{label}_{mode}', mode, a.rows, out, {'_ap': a.pos, '_ac': a.crd, '_bp': b.pos, '_bc': b.crd},
             {'_av': a.vals, '_bv': b.vals}, sign)


def canonical_rows(k: Kernel, label: str, A: Operand) -> Rows:
    """A as canonical rows (sorted, unique columns; rows of A as the operation sees it):
    its own storage when :func:`row_major` recognises it, else A's entries expanded,
    sorted and compressed (duplicates summed) into transient CSR arrays of ``A.nvals``
    entries (:func:`compress_lists`), values in A's value type."""
    rows = row_major(A)
    if rows is not None:
        return rows
    st = A.type
    n = A.nvals
    vdtype = k.sdfg.arrays[A.vals].dtype
    out = Rows(k.transient(f'{label}_pos', [sympy.sympify(st.rows) + 1], dace.int64),
               k.transient(f'{label}_crd', [n], dace.int64), k.transient(f'{label}_vals', [n], vdtype), st.rows)
    lists = expand_entries(k, label, A, vdtype)
    compress_lists(k, label, lists, n, st.rows, st.cols, out)
    return out


def product_lists(k: Kernel, label: str, A: Operand, B: Rows, n, vdtype, cols) -> EntryLists:
    """The products ``A[i, k] * B[k, j]`` of every stored ``A[i, k]`` (any format) with
    every entry of row ``k`` of ``B`` as entry lists of capacity ``n`` (at least their
    number; the rest sentinels ``(A.rows, cols)``), in the order of A's value slots, then
    of B's row: Gustavson's row-wise product in expand form.

    1. a parallel map over A's entries records, per value slot, the length and start of
       the row of B it meets, its row and its value (slots without an entry: length 0);
    2. a prefix sum (:func:`scan`) of the lengths gives each slot's first product;
    3. a parallel map over the slots, with a map over the slot's products inside (a
       dynamic range), writes them."""
    na = A.nvals
    plen = k.transient(f'{label}_len', [na], dace.int64)
    start = k.transient(f'{label}_bstart', [na], dace.int64)
    arow = k.transient(f'{label}_arow', [na], dace.int64)
    aval = k.transient(f'{label}_aval', [na], vdtype)
    k.fill(k.add_state(f'{label}_nolen'), plen, 0)
    state = k.add_state(f'{label}_rows')
    sc = k.entries(state, A)
    k.compute(sc, (plen, [A.pos]), read(B.pos, A.col + 1) - read(B.pos, A.col), guard=A.guard, label=f'{label}_rows',
              more=[((start, [A.pos]), read(B.pos, A.col)), ((arow, [A.pos]), A.row), ((aval, [A.pos]), A.value)])
    first = k.transient(f'{label}_first', [sympy.sympify(na) + 1], dace.int64)
    scan(k, f'{label}_first', plen, first, na)
    lists = new_lists(k, label, n, vdtype)
    sentinel_fill(k, lists, A.type.rows, cols)
    state = k.add_state(f'{label}_products')
    q, t = sympy.Symbol(_name(k, f'{label}_q')), sympy.Symbol(_name(k, f'{label}_t'))
    sc = k.scope(state, [(str(q), 0, na), (str(t), read(first, q), read(first, q + 1))], [_PAR, _SEQ])
    qb = read(start, q) + t - read(first, q)
    k.compute(sc, (lists.row, [t]), read(arow, q), label=f'{label}_products',
              more=[((lists.col, [t]), read(B.crd, qb)), ((lists.val, [t]), read(aval, q) * read(B.vals, qb))])
    return lists
