"""The cpu kernels of the structured layouts (``ss.NM``, ``ss.GNM``, ``ss.VNM``): SpMM and SpMV.

Every group of a structured row stores exactly ``n`` slots, so a row's work is known
without row pointers: the rows (GNM: the row blocks, whose rows share offsets) run in a
parallel map, each one tasklet calling a leaf of ``include/sdfgsparse_structured.h`` with
the row's slots (``i * G * n`` onward) and the matrix's ``m``. The SIMD is over the dense
columns (SpMM: register panels of ``y``'s row; GNM: each vector of ``b``'s row multiplied
into the ``g`` rows of the block) and over a group's ``n`` slots (independent chains).

:func:`applies` says whether a node's sparse operand takes these kernels: a plain
structured format (not a view of one), dense operands with contiguous rows, no tiling.
"""
from typing import Optional

from sdfgsparse._symbolic import pyexpr
from sdfgsparse.formats import get_format
from sdfgsparse.formats.structured import pattern_of
from sdfgsparse.targets.cpu.dense_loops import SPMM_PANEL
from sdfgsparse.targets.cpu.kernel import cpp_tasklet

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


def emit_spmm_t(kb, st, conns, y: str, b: str, k: str, b_stride: str, ctype: str, y_stride: str):
    """``y = A.T @ b`` for the transposed view ``st`` of a structured ``A``: ranges of
    :data:`TRANSPOSED_RANGE` dense columns in parallel, each walking all of A's slots."""
    pat = transposed(st)
    off, sel, vals = _members(_base_type(st), conns)
    rows, cols = pyexpr(st.cols), pyexpr(st.rows)  # A's own rows and columns
    G = f'(({cols}) / {pat.m})'  # (C++)
    itype = 'int64_t' if st.index_dtype.bytes == 8 else 'int'
    R = pat.rows if pat.kind == 'gnm' else 1
    kb.symbols_of(st.rows, st.cols, *st.sizes.values())
    n = f'(({k}) + {TRANSPOSED_RANGE - 1}) // {TRANSPOSED_RANGE}'
    kb.line(f'for t in dace.map[0:{n}]:')
    kb.line('    _tt = dace.int64(t)')
    ins = [('_tk', '_tt'), ('_to', f'{off}(-1)'), ('_tv', f'{vals}(-1)'), ('_tb', b)]
    table = f'({itype}*)nullptr'
    if pat.kind == 'vnm':
        ins.append(('_ts', f'{sel}(-1)'))
        table = '_ts'
    code = (f'sdfgsparse::structured_spmm_t<{R}, {pat.n}, {str(pat.kind == "vnm").lower()}, {ctype}, {itype}>('
            f'ss_out(_ty), {y_stride}, ss_in(_tb), {b_stride}, _to, {table}, {pat.rows}, _tv, {rows}, {G}, {pat.m}, '
            f'_tk * {TRANSPOSED_RANGE}, std::min<long>({k}, (_tk + 1) * {TRANSPOSED_RANGE}));')
    for line in cpp_tasklet(ins, [('_ty', f'{y}(-1)')], code):  # (disjoint column ranges per t)
        kb.line(line, 1)


def _base_type(st):
    """The type of the matrix ``st`` is the transposed view of."""
    from sdfgsparse.formats import SparseType
    return SparseType(get_format(st.fmt.transpose_name), st.dtype, st.cols, st.rows, st.index_dtype, st.sizes, uid=-1)


def _members(st, conns):
    """(offset connector, table connector or None, the value connector) of the operand."""
    pat = pattern_of(st.fmt)
    k = len(st.fmt.levels) - 1 if pat.kind != 'gnm' else 3
    return conns[f'crd{k}'], conns.get(f'sel{k}') if pat.kind == 'vnm' else None, conns['vals']


def _rows_map(kb, st, pat, var: str):
    """Open the parallel map over the rows (GNM: row blocks); returns its extent."""
    kb.symbols_of(st.rows, st.cols, *st.sizes.values())
    n = pyexpr(st.rows) if pat.kind != 'gnm' else f'({pyexpr(st.rows)}) // {pat.rows}'
    kb.line(f'for {var} in dace.map[0:{n}]:')
    return n


#: rows of an n:m or V:N:M SpMM per tasklet (:func:`emit_spmm`)
SPMM_ROWS = 4


def emit_spmm(kb, st, conns, y: str, b: str, k: str, b_stride: str, ctype: str, y_stride: str):
    """``y = A @ b`` (``y`` written whole, no zero fill) for a structured ``A``: GNM one row
    block per tasklet (register-blocked over its rows); n:m and V:N:M :data:`SPMM_ROWS` rows
    per tasklet, group by group (a group's window of ``b`` stays in L1 for the rows), and
    the rows left over one by one."""
    pat = pattern_of(st.fmt)
    off, sel, vals = _members(st, conns)
    G = f'(({pyexpr(st.cols)}) / {pat.m})'  # (C++)
    itype = 'int64_t' if st.index_dtype.bytes == 8 else 'int'
    slots = f'{G} * {pat.n}'  # per row
    kb.symbols_of(st.rows, st.cols, *st.sizes.values())
    rows = pyexpr(st.rows)
    if pat.kind == 'gnm':
        R = pat.rows
        kb.line(f'for i in dace.map[0:({rows}) // {R}]:')
        kb.line('    _ii = dace.int64(i)')
        ins = [('_ti', '_ii'), ('_to', f'{off}(-1)'), ('_tv', f'{vals}(-1)'), ('_tb', b)]
        code = (f'sdfgsparse::grouped_spmm_block<{R}, {pat.n}, {ctype}, {itype}>(ss_out(_ty) + _ti * {R} * '
                f'{y_stride}, {y_stride}, ss_in(_tb), {b_stride}, _to + _ti * {slots}, _tv + _ti * {slots} * {R}, '
                f'{G}, {pat.m}, {k});')
        for line in cpp_tasklet(ins, [('_ty', f'{y}(-1)')], code):  # the block's rows (disjoint per i)
            kb.line(line, 1)
        return
    table = pat.kind == 'vnm'
    R = SPMM_ROWS if not table or pat.rows % SPMM_ROWS == 0 else 1
    panel = f'(SS_VECTOR_BYTES == 64 ? {SPMM_PANEL} : {max(1, SPMM_PANEL // 2)})' if R > 1 else str(SPMM_PANEL)

    def rows_tasklet(first: str, count: int, indent: int):
        kb.line(f'_ii = dace.int64({first})', indent)
        ins = [('_ti', '_ii'), ('_to', f'{off}(-1)'), ('_tv', f'{vals}(-1)'), ('_tb', b)]
        sel_at = f'({itype}*)nullptr'
        if table:
            ins.append(('_ts', f'{sel}(-1)'))
            sel_at = f'_ts + (_ti / {pat.rows}) * {G} * 4'
        code = (f'sdfgsparse::structured_spmm_rows<{count}, {panel}, {pat.n}, {str(table).lower()}, {ctype}, '
                f'{itype}>(ss_out(_ty) + _ti * {y_stride}, {y_stride}, ss_in(_tb), {b_stride}, _to + _ti * {slots}, '
                f'{sel_at}, _tv + _ti * {slots}, {slots}, {G}, {pat.m}, {k});')
        for line in cpp_tasklet(ins, [('_ty', f'{y}(-1)')], code):  # the tasklet's rows (disjoint)
            kb.line(line, indent)

    if R > 1:
        kb.line(f'for i in dace.map[0:({rows}) // {R}]:')
        rows_tasklet(f'{R} * i', R, 1)
        kb.line(f'for i in dace.map[({rows}) // {R} * {R}:{rows}]:')  # the rows beyond the last block
        rows_tasklet('i', 1, 1)
    else:
        kb.line(f'for i in dace.map[0:{rows}]:')
        rows_tasklet('i', 1, 1)


def emit_spmv(kb, st, conns, y: str, x: str, ctype: str):
    """``y = A @ x`` for a structured ``A`` (NM, VNM: one row per tasklet; GNM: a block)."""
    pat = pattern_of(st.fmt)
    off, sel, vals = _members(st, conns)
    G = f'(({pyexpr(st.cols)}) / {pat.m})'  # (C++)
    itype = 'int64_t' if st.index_dtype.bytes == 8 else 'int'
    slots = f'{G} * {pat.n}'
    _rows_map(kb, st, pat, 'i')
    kb.line('    _ii = dace.int64(i)')
    ins = [('_ti', '_ii'), ('_to', f'{off}(-1)'), ('_tv', f'{vals}(-1)'), ('_tx', x)]
    if pat.kind == 'gnm':
        R = pat.rows
        # the block's R rows: one pass over its slots (b = x as a matrix of one column)
        code = (f'sdfgsparse::grouped_spmm_block<{R}, {pat.n}, {ctype}, {itype}>(ss_out(_ty) + _ti * {R}, 1, '
                f'ss_in(_tx), 1, _to + _ti * {slots}, _tv + _ti * {slots} * {R}, {G}, {pat.m}, 1);')
        for line in cpp_tasklet(ins, [('_ty', f'{y}(-1)')], code):  # the block's rows (disjoint per i)
            kb.line(line, 1)
        return
    if pat.kind == 'vnm':
        ins.append(('_ts', f'{sel}(-1)'))
        table = f'_ts + (_ti / {pat.rows}) * {G} * 4'
    else:
        table = f'({itype}*)nullptr'
    code = (f'_ty = sdfgsparse::structured_spmv_row<{pat.n}, {str(pat.kind == "vnm").lower()}>(_to + _ti * '
            f'{slots}, {table}, _tv + _ti * {slots}, ss_in(_tx), {G}, {pat.m});')
    for line in cpp_tasklet(ins, [('_ty', f'{y}[i]')], code):
        kb.line(line, 1)


def emit_sddmm(kb, st, conns, out_vals: str, x: str, y: str, k: str, x_stride: str, y_stride: str, ctype: str,
               y_pointer: bool):
    """``out_vals[p] = vals[p] * dot(x[row(p), :], y[col(p), :])`` for a structured ``S``
    (``y``: rows of ``Y.T``, an array or with ``y_pointer`` the int64 address of a buffer):
    one tasklet per row (GNM: per row block), several slots' dot products at a time."""
    from sdfgsparse.targets.cpu.dense_loops import SDDMM_GROUP
    pat = pattern_of(st.fmt)
    off, sel, vals = _members(st, conns)
    G = f'(({pyexpr(st.cols)}) / {pat.m})'  # (C++)
    itype = 'int64_t' if st.index_dtype.bytes == 8 else 'int'
    R = pat.rows if pat.kind == 'gnm' else 1
    slots = f'{G} * {pat.n}'
    _rows_map(kb, st, pat, 'i')
    kb.line('    _ii = dace.int64(i)')
    ins = [('_ti', '_ii'), ('_to', f'{off}(-1)'), ('_tv', f'{vals}(-1)'), ('_tx', x), ('_ty', y)]
    table = f'({itype}*)nullptr'
    if pat.kind == 'vnm':
        ins.append(('_ts', f'{sel}(-1)'))
        table = f'_ts + (_ti / {pat.rows}) * {G} * 4'
    rows_of_y = f'sdfgsparse::address<{ctype}>(_ty)' if y_pointer else 'ss_in(_ty)'
    code = (f'sdfgsparse::structured_sddmm_rows<{SDDMM_GROUP}, {R}, {pat.n}, {str(pat.kind == "vnm").lower()}>('
            f'_tout + _ti * {slots} * {R}, ss_in(_tx) + _ti * {R} * ({x_stride}), {x_stride}, {rows_of_y}, '
            f'{y_stride}, _to + _ti * {slots}, {table}, _tv + _ti * {slots} * {R}, {G}, {pat.m}, {k});')
    for line in cpp_tasklet(ins, [('_tout', f'{out_vals}(-1)')], code):  # (the rows' slots: disjoint per i)
        kb.line(line, 1)
