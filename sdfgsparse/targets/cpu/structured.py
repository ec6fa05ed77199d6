"""The cpu kernels of the structured layouts (``ss.NM``, ``ss.GNM``, ``ss.VNM``): SpMM, SpMV and SDDMM.

Every group of a structured row stores exactly ``n`` slots, so a row's work is known
without row pointers: the rows (GNM: the row blocks, whose rows share offsets) run in a
parallel map, each one tasklet calling a leaf of ``include/sdfgsparse_structured.h`` with
the row's slots (``i * G * n`` onward) and the matrix's ``m``. The SIMD is over the dense
columns (SpMM: register panels of ``y``'s row; GNM: each vector of ``b``'s row multiplied
into the ``g`` rows of the block) and over a group's ``n`` slots (independent chains).

:func:`applies` says whether a node's sparse operand takes these kernels: a plain
structured format (not a view of one), dense operands with contiguous rows, no tiling.
The functions add one state each to a :class:`~sdfgsparse.targets.cpu.builder.CpuKernel`;
C++ sizes are printed by :func:`~sdfgsparse.targets.cpu.builder.cpp`.
"""
from typing import Optional

from sdfgsparse.formats import get_format
from sdfgsparse.formats.structured import pattern_of
import sympy

from sdfgsparse.targets.cpu.builder import cpp, leaf
from sdfgsparse.targets.cpu.row_leaves import index
from sdfgsparse.targets.cpu.dense_loops import SDDMM_GROUP, SPMM_PANEL

__all__ = ['applies', 'transposed', 'emit_spmm', 'emit_spmm_t', 'emit_spmv', 'emit_sddmm', 'TRANSPOSED_RANGE']


def applies(st) -> Optional[object]:
    """The pattern of ``st`` when its structured kernels apply, else None."""
    return pattern_of(st.fmt)


def transposed(st) -> Optional[object]:
    """The pattern of the structured format ``st`` is the transposed view of (``A.T``), else None."""
    name = st.fmt.transpose_name
    if not name or pattern_of(st.fmt) is not None:
        return None
    try:
        base = get_format(name)
    except KeyError:
        return None
    return pattern_of(base) if base.T is st.fmt else None


#: dense columns of ``A.T @ B`` per parallel range (two vectors of float32 at AVX-512)
TRANSPOSED_RANGE = 32


def _itype(st) -> str:
    return 'int64_t' if st.index_dtype.bytes == 8 else 'int'


def _groups(st, pat) -> str:
    """The C++ count of groups per row."""
    return f'(({cpp(st.cols)}) / {pat.m})'


def emit_spmm_t(k, st, A, y: str, b: str, ctype: str):
    """``y = A.T @ b`` for the transposed view ``st`` of a structured ``A``: ranges of
    :data:`TRANSPOSED_RANGE` dense columns in parallel, each walking all of A's slots."""
    pat = transposed(st)
    off, sel, vals = _members(_base_type(st), A.conns)
    rows, cols = cpp(st.cols), cpp(st.rows)  # A's own rows and columns
    G = f'(({cols}) / {pat.m})'
    kcols, ys, bs = (cpp(e) for e in (k.sdfg.arrays[y].shape[1], k.sdfg.arrays[y].strides[0],
                                      k.sdfg.arrays[b].strides[0]))
    R = pat.rows if pat.kind == 'gnm' else 1
    state = k.add_state('structured_spmm_t')
    sc = k.scope(state, [('t', 0, (k.sdfg.arrays[y].shape[1] + TRANSPOSED_RANGE - 1) // TRANSPOSED_RANGE)])
    arrays = {'_to': off, '_tv': vals, '_tb': b}
    table = f'({_itype(st)}*)nullptr'
    if pat.kind == 'vnm':
        arrays['_ts'] = sel
        table = '_ts'
    code = (f'sdfgsparse::structured_spmm_t<{R}, {pat.n}, {str(pat.kind == "vnm").lower()}, {ctype}, {_itype(st)}>('
            f'ss_out(_ty), {ys}, ss_in(_tb), {bs}, _to, {table}, {pat.rows}, _tv, {rows}, {G}, {pat.m}, '
            f'_tt * {TRANSPOSED_RANGE}, std::min<long>({kcols}, (_tt + 1) * {TRANSPOSED_RANGE}));')
    leaf(k, sc, 'spmm_t_columns', code, arrays=arrays, locals_in={'_tt': index(k, sc, sympy.Symbol('t'), 't')},
         outs={'_ty': (y, None)})  # (disjoint column ranges per t)


def _base_type(st):
    """The type of the matrix ``st`` is the transposed view of."""
    from sdfgsparse.formats import SparseType
    return SparseType(get_format(st.fmt.transpose_name), st.dtype, (st.cols, st.rows), st.index_dtype, st.sizes, uid=-1)


def _members(st, conns):
    """(offset connector, table connector or None, the value connector) of the operand."""
    pat = pattern_of(st.fmt)
    k = len(st.fmt.levels) - 1 if pat.kind != 'gnm' else 3
    return conns[f'crd{k}'], conns.get(f'sel{k}') if pat.kind == 'vnm' else None, conns['vals']


def _rows_map(k, st, pat, label: str):
    """A new state with the parallel map over the rows (GNM: row blocks), variable ``i``."""
    n = st.rows if pat.kind != 'gnm' else st.rows // pat.rows
    state = k.add_state(label)
    return k.scope(state, [('i', 0, n)])


#: rows of an n:m or V:N:M SpMM per tasklet (:func:`emit_spmm`)
SPMM_ROWS = 4


def emit_spmm(k, st, A, y: str, b: str, ctype: str):
    """``y = A @ b`` (``y`` written whole, no zero fill) for a structured ``A``: GNM one row
    block per tasklet (register-blocked over its rows); n:m and V:N:M :data:`SPMM_ROWS` rows
    per tasklet, group by group (a group's window of ``b`` stays in L1 for the rows), and
    the rows left over one by one."""
    pat = pattern_of(st.fmt)
    off, sel, vals = _members(st, A.conns)
    G = _groups(st, pat)
    itype = _itype(st)
    slots = f'{G} * {pat.n}'  # per row
    ydesc = k.sdfg.arrays[y]
    kcols, ys, bs = cpp(ydesc.shape[1]), cpp(ydesc.strides[0]), cpp(k.sdfg.arrays[b].strides[0])
    if pat.kind == 'gnm':
        R = pat.rows
        sc = _rows_map(k, st, pat, 'structured_spmm')
        code = (f'sdfgsparse::grouped_spmm_block<{R}, {pat.n}, {ctype}, {itype}>(ss_out(_ty) + _ti * {R} * '
                f'{ys}, {ys}, ss_in(_tb), {bs}, _to + _ti * {slots}, _tv + _ti * {slots} * {R}, '
                f'{G}, {pat.m}, {kcols});')
        leaf(k, sc, 'spmm_block', code, arrays={'_to': off, '_tv': vals, '_tb': b},
             locals_in={'_ti': index(k, sc, sympy.Symbol('i'), 'i')}, outs={'_ty': (y, None)})  # the block's rows (disjoint per i)
        return
    table = pat.kind == 'vnm'
    R = SPMM_ROWS if not table or pat.rows % SPMM_ROWS == 0 else 1
    panel = f'(SS_VECTOR_BYTES == 64 ? {SPMM_PANEL} : {max(1, SPMM_PANEL // 2)})' if R > 1 else str(SPMM_PANEL)

    def rows_tasklet(sc, scale: int, count: int):
        arrays = {'_to': off, '_tv': vals, '_tb': b}
        sel_at = f'({itype}*)nullptr'
        if table:
            arrays['_ts'] = sel
            sel_at = f'_ts + (_ti / {pat.rows}) * {G} * 4'
        code = (f'sdfgsparse::structured_spmm_rows<{count}, {panel}, {pat.n}, {str(table).lower()}, {ctype}, '
                f'{itype}>(ss_out(_ty) + _ti * {ys}, {ys}, ss_in(_tb), {bs}, _to + _ti * {slots}, '
                f'{sel_at}, _tv + _ti * {slots}, {slots}, {G}, {pat.m}, {kcols});')
        first = index(k, sc, scale * sympy.Symbol('i'), 'i')  # the tasklet's first row
        leaf(k, sc, 'spmm_rows', code, arrays=arrays, locals_in={'_ti': first},
             outs={'_ty': (y, None)})  # the tasklet's rows (disjoint)

    if R > 1:
        rows_tasklet(k.scope(k.add_state('structured_spmm'), [('i', 0, st.rows // R)]), R, R)
        # the rows beyond the last block
        rows_tasklet(k.scope(k.add_state('structured_spmm_rest'), [('i', st.rows // R * R, st.rows)]), 1, 1)
    else:
        rows_tasklet(k.scope(k.add_state('structured_spmm'), [('i', 0, st.rows)]), 1, 1)


def emit_spmv(k, st, A, y: str, x: str, ctype: str):
    """``y = A @ x`` for a structured ``A`` (NM, VNM: one row per tasklet; GNM: a block)."""
    pat = pattern_of(st.fmt)
    off, sel, vals = _members(st, A.conns)
    G = _groups(st, pat)
    itype = _itype(st)
    slots = f'{G} * {pat.n}'
    sc = _rows_map(k, st, pat, 'structured_spmv')
    arrays = {'_to': off, '_tv': vals, '_tx': x}
    if pat.kind == 'gnm':
        R = pat.rows
        # the block's R rows: one pass over its slots (b = x as a matrix of one column)
        code = (f'sdfgsparse::grouped_spmm_block<{R}, {pat.n}, {ctype}, {itype}>(ss_out(_ty) + _ti * {R}, 1, '
                f'ss_in(_tx), 1, _to + _ti * {slots}, _tv + _ti * {slots} * {R}, {G}, {pat.m}, 1);')
        leaf(k, sc, 'spmv_block', code, arrays=arrays, locals_in={'_ti': index(k, sc, sympy.Symbol('i'), 'i')},
             outs={'_ty': (y, None)})  # the block's rows (disjoint per i)
        return
    if pat.kind == 'vnm':
        arrays['_ts'] = sel
        table = f'_ts + (_ti / {pat.rows}) * {G} * 4'
    else:
        table = f'({itype}*)nullptr'
    code = (f'_ty = sdfgsparse::structured_spmv_row<{pat.n}, {str(pat.kind == "vnm").lower()}>(_to + _ti * '
            f'{slots}, {table}, _tv + _ti * {slots}, ss_in(_tx), {G}, {pat.m});')
    leaf(k, sc, 'spmv_row', code, arrays=arrays, locals_in={'_ti': index(k, sc, sympy.Symbol('i'), 'i')},
         outs={'_ty': (y, ['i'])})


def emit_sddmm(k, st, A, out_vals: str, x: str, y: str, kd, x_stride: str, y_stride: str, ctype: str,
               y_pointer: bool):
    """``out_vals[p] = vals[p] * dot(x[row(p), :], y[col(p), :])`` for a structured ``S``
    (``y``: rows of ``Y.T``, an array or with ``y_pointer`` an int64 scalar holding the
    address of a buffer): one tasklet per row (GNM: per row block), several slots' dot
    products at a time. ``kd``, ``x_stride``, ``y_stride``: C++ text."""
    pat = pattern_of(st.fmt)
    off, sel, vals = _members(st, A.conns)
    G = _groups(st, pat)
    itype = _itype(st)
    R = pat.rows if pat.kind == 'gnm' else 1
    slots = f'{G} * {pat.n}'
    sc = _rows_map(k, st, pat, 'structured_sddmm')
    arrays = {'_to': off, '_tv': vals, '_tx': x, '_ty': y}
    table = f'({itype}*)nullptr'
    if pat.kind == 'vnm':
        arrays['_ts'] = sel
        table = f'_ts + (_ti / {pat.rows}) * {G} * 4'
    rows_of_y = f'sdfgsparse::address<{ctype}>(_ty)' if y_pointer else 'ss_in(_ty)'
    code = (f'sdfgsparse::structured_sddmm_rows<{SDDMM_GROUP}, {R}, {pat.n}, {str(pat.kind == "vnm").lower()}>('
            f'_tout + _ti * {slots} * {R}, ss_in(_tx) + _ti * {R} * ({x_stride}), {x_stride}, {rows_of_y}, '
            f'{y_stride}, _to + _ti * {slots}, {table}, _tv + _ti * {slots} * {R}, {G}, {pat.m}, {kd});')
    leaf(k, sc, 'sddmm_rows', code, arrays=arrays, locals_in={'_ti': index(k, sc, sympy.Symbol('i'), 'i')}, outs={'_tout': (out_vals, None)})  # (the rows' slots: disjoint per i)
