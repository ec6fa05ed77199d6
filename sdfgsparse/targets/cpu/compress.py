"""Expand–sort–compress: the lowering of every operation whose result has a data-dependent
number of entries (conversion to CSR/CSC, sparse ± sparse, sparse ∘ sparse, SpGEMM).

1. *Expand*: the operation appends its candidate entries ``(row, col, value)`` to a list
   (``T_r, T_c, T_v``, at most ``cap`` long; ``cur[0]`` counts them). Any format can feed
   it through :class:`~sdfgsparse.targets.cpu.entries.Entries`.
2. *Sort*: two stable counting sorts, by column then by row, give row-major order with
   sorted columns — O(n + rows + cols), no comparisons.
3. *Compress*: per row (in parallel), equal columns are merged — summed (``mode='sum'``)
   or, for an intersection of two canonical operands, multiplied pairwise
   (``mode='intersect'``) — and written to the CSR result (``pos``, ``crd``, ``vals``).

The result arrays are ``cap`` long; ``pos[rows]`` holds the real count (the runtime trims
returned results to it). Explicit zeros produced by cancellation are kept.
"""
from typing import Callable, Sequence

import dace

from sdfgsparse._symbolic import pyexpr
from sdfgsparse.targets.cpu.entries import kernel_for_node
from sdfgsparse.targets.cpu.kernel import KernelBuilder

__all__ = ['emit_buffers', 'emit_append', 'emit_sort_compress', 'compress_kernel']


def emit_buffers(kb: KernelBuilder, cap, vdtype: str, idtype: str = 'dace.int64'):
    """Declare the expansion list of capacity ``cap`` and its counter."""
    kb.globals['np'] = __import__('numpy')
    kb.symbols_of(cap)
    c = pyexpr(cap)
    kb.line(f'T_r = np.zeros(({c},), dtype={idtype})')
    kb.line(f'T_c = np.zeros(({c},), dtype={idtype})')
    kb.line(f'T_v = np.zeros(({c},), dtype={vdtype})')
    kb.line('cur = np.zeros((1,), dtype=dace.int64)')


def emit_append(row: str, col: str, value: str) -> Sequence[str]:
    """Lines appending one entry to the expansion list."""
    return ['d = cur[0]', f'T_r[d] = {row}', f'T_c[d] = {col}', f'T_v[d] = {value}', 'cur[0] = d + 1']


def emit_sort_compress(kb: KernelBuilder, rows, cols, cap, pos: str, crd: str, vals: str, vdtype: str,
                       mode: str = 'sum', row_list: str = 'T_r', col_list: str = 'T_c'):
    """Sort the expansion list and compress it into CSR arrays ``pos``/``crd``/``vals``
    (a CSC result is the CSR of the transposed list: ``row_list='T_c', col_list='T_r'``
    and the dimensions swapped)."""
    if mode not in ('sum', 'intersect'):
        raise ValueError(f'unknown compress mode {mode!r}')
    kb.globals['np'] = __import__('numpy')
    kb.symbols_of(rows, cols, cap)
    R, C, n = pyexpr(rows), pyexpr(cols), pyexpr(cap)
    L = kb.line
    RL, CL = row_list, col_list
    # counting sort by column (stable)
    L(f'ccnt = np.zeros(({C} + 1,), dtype=dace.int64)')
    L('for q in range(0, cur[0]):')
    L(f'    ccnt[{CL}[q] + 1] = ccnt[{CL}[q] + 1] + 1')
    L(f'for c in range(0, {C}):')
    L('    ccnt[c + 1] = ccnt[c + 1] + ccnt[c]')
    L(f'S_r = np.zeros(({n},), dtype=dace.int64)')
    L(f'S_c = np.zeros(({n},), dtype=dace.int64)')
    L(f'S_v = np.zeros(({n},), dtype={vdtype})')
    L('for q in range(0, cur[0]):')
    L(f'    d = ccnt[{CL}[q]]')
    L(f'    S_r[d] = {RL}[q]')
    L(f'    S_c[d] = {CL}[q]')
    L('    S_v[d] = T_v[q]')
    L(f'    ccnt[{CL}[q]] = d + 1')
    # counting sort by row (stable): row r occupies [rpos[r], rpos[r + 1])
    L(f'rpos = np.zeros(({R} + 1,), dtype=dace.int64)')
    L('for q in range(0, cur[0]):')
    L('    rpos[S_r[q] + 1] = rpos[S_r[q] + 1] + 1')
    L(f'for r in range(0, {R}):')
    L('    rpos[r + 1] = rpos[r + 1] + rpos[r]')
    L(f'nxt = np.zeros(({R} + 1,), dtype=dace.int64)')
    L(f'for r in dace.map[0:{R} + 1]:')
    L('    nxt[r] = rpos[r]')
    L(f'U_c = np.zeros(({n},), dtype=dace.int64)')
    L(f'U_v = np.zeros(({n},), dtype={vdtype})')
    L('for q in range(0, cur[0]):')
    L('    d = nxt[S_r[q]]')
    L('    U_c[d] = S_c[q]')
    L('    U_v[d] = S_v[q]')
    L('    nxt[S_r[q]] = d + 1')
    # flags of the entries that start an output entry, counted per row
    L(f'flag = np.zeros(({n},), dtype=dace.int64)')
    L(f'ucnt = np.zeros(({R},), dtype=dace.int64)')
    L(f'for r in dace.map[0:{R}]:')
    L('    cnt = dace.int64(0)')
    L('    for q in range(rpos[r], rpos[r + 1]):')
    if mode == 'sum':
        L('        if q == rpos[r] or U_c[q] != U_c[q - 1]:')
    else:
        L('        if q + 1 < rpos[r + 1] and U_c[q + 1] == U_c[q]:')
    L('            flag[q] = 1')
    L('        cnt += flag[q]')
    L('    ucnt[r] = cnt')
    L(f'{pos}[0] = 0')
    L(f'for r in range(0, {R}):')
    L(f'    {pos}[r + 1] = {pos}[r] + ucnt[r]')
    L(f'for z in dace.map[0:{n}]:')
    L(f'    {crd}[z] = 0')
    L(f'    {vals}[z] = 0')
    L(f'for r in dace.map[0:{R}]:')
    L(f'    acc = dace.int64({pos}[r] - 1)')
    L('    for q in range(rpos[r], rpos[r + 1]):')
    L('        acc += flag[q]')
    if mode == 'sum':
        L(f'        {crd}[acc] = U_c[q]')
        L(f'        {vals}[acc] = {vals}[acc] + U_v[q]')
    else:
        L('        if flag[q] == 1:')
        L(f'            {crd}[acc] = U_c[q]')
        L(f'            {vals}[acc] = U_v[q] * U_v[q + 1]')


def compress_kernel(node, state, sdfg, expand: Callable[[KernelBuilder, str], None], rows, cols,
                    mode: str = 'sum') -> dace.SDFG:
    """The whole kernel of a compress-based node whose CSR or CSC result members are
    ``_out_*``: buffers of the result's capacity, ``expand(kb, value_dtype)`` appending the
    candidate entries ``(row, col, value)`` of the ``rows x cols`` result, then sort and
    compress into the result (by columns when the result is CSC)."""
    kb = kernel_for_node(node, state, sdfg)
    out = node.member_arrays(state, 'out')
    cap = out['crd1'].shape[0]
    vt = kb.dtype(out['vals'].dtype)
    emit_buffers(kb, cap, vt)
    expand(kb, vt)
    if node.sparse_type(state, 'out').fmt.name == 'CSC':  # column-major result: compress the transposed list
        emit_sort_compress(kb, cols, rows, cap, '_out_pos1', '_out_crd1', '_out_vals', vt, mode, 'T_c', 'T_r')
    else:
        emit_sort_compress(kb, rows, cols, cap, '_out_pos1', '_out_crd1', '_out_vals', vt, mode)
    return kb.build()
