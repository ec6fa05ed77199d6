"""Building blocks of the portable kernels of shape operators that produce storage: the
concatenation of canonical row sets (:func:`concat_rows`).

Like :mod:`sdfgsparse.lowering.graph_compress`, everything is built with DaCe's SDFG API
on :class:`~sdfgsparse.lowering.graph.Kernel` (maps, a prefix sum, Python
tasklets), no C++ text.
"""
from typing import Sequence, Tuple

import dace
import sympy
from dace import dtypes

from sdfgsparse._symbolic import pyexpr
from sdfgsparse.lowering.graph import Kernel, Scope, read
from sdfgsparse.lowering.graph_compress import Rows, _name, scan, tasklet

__all__ = ['concat_rows']

_PAR = dtypes.ScheduleType.Default

#: copy one row of a part (entries ``_ap[r]:_ap[r + 1]``) to the result at the row's
#: cursor, its columns moved by the part's offset; ``{row}`` is the map parameter
_COPY_ROW = '''u_cap = {cap}
u_q = _ap[{row}]
u_e = _ap[{row} + 1]
u_d = _cur_in
u_o = _co
while u_q < u_e:
    _oc[u_d] = _ac[u_q] + u_o
    _ov[u_d] = _av[u_q]
    u_q += 1
    u_d += 1
_cur_out = u_d
'''


def concat_rows(k: Kernel, label: str, parts: Sequence[Tuple[Rows, object, object]], rows, out: Rows):
    """``out`` (a CSR storage of ``rows`` rows) holding the canonical row sets ``parts``,
    each ``(rows, row offset, column offset)``, at their offsets: a concatenation along the
    rows (offsets ``(R_p, 0)``) or the columns (``(0, C_p)``, parts in increasing column
    order, so that each result row stays sorted). Canonical parts that do not overlap give
    a canonical result; no sort.

    1. *count*: a parallel map per part writes (or adds) its row lengths at its rows;
    2. *positions*: ``out.pos`` as their prefix sum (:func:`~sdfgsparse.lowering.graph_compress.scan`);
    3. *fill*: a parallel map per part copies each of its rows at the row's cursor
       (``out.pos`` of the row, advanced past what an earlier part wrote there); a
       kernel class may build this step itself (``concat_fill(k, label, parts, cur,
       offsets, out)``: the cpu kernels copy rows with a leaf)."""
    cnt = k.transient(f'{label}_cnt', [rows], dace.int64)
    k.fill(k.add_state(f'{label}_zero'), cnt)
    offs = k.transient(f'{label}_coff', [len(parts)], dace.int64)
    sc = Scope.at(k.add_state(f'{label}_offsets'))
    for p, (_, _, c0) in enumerate(parts):
        k.compute(sc, (offs, [p]), sympy.sympify(c0), label=f'{label}_coff{p}')
    for p, (src, r0, _) in enumerate(parts):
        state = k.add_state(f'{label}_count{p}')
        r = sympy.Symbol(_name(k, f'{label}_r'))
        sc = k.scope(state, [(str(r), 0, src.rows)], [_PAR])
        at = sympy.sympify(r0) + r
        k.compute(sc, (cnt, [at]), read(cnt, at) + read(src.pos, r + 1) - read(src.pos, r), label=f'{label}_count{p}')
    scan(k, f'{label}_pos', cnt, out.pos, rows)
    cur = k.transient(f'{label}_cur', [rows], dace.int64)
    state = k.add_state(f'{label}_cursor')
    r = sympy.Symbol(_name(k, f'{label}_r'))
    sc = k.scope(state, [(str(r), 0, rows)], [_PAR])
    k.compute(sc, (cur, [r]), read(out.pos, r), label=f'{label}_cursor')
    own = getattr(type(k), 'concat_fill', None)
    if own is not None:  # the kernel's own row copies (the cpu kernels' leaves)
        return own(k, label, parts, cur, offs, out)
    cap = pyexpr(k.sdfg.arrays[out.crd].shape[0])
    for p, (src, r0, _) in enumerate(parts):
        state = k.add_state(f'{label}_fill{p}')
        r = _name(k, f'{label}_r')
        sc = k.scope(state, [(r, 0, src.rows)], [_PAR])
        sc.entries[0].map.omp_schedule = dtypes.OMPScheduleType.Guided
        at = pyexpr(sympy.sympify(r0) + sympy.Symbol(r))
        tasklet(k, sc, f'{label}_fill{p}', _COPY_ROW.format(cap=cap, row=r), {
            '_ap': src.pos,
            '_ac': src.crd,
            '_av': src.vals,
            '_cur_in': f'{cur}[{at}]',
            '_co': f'{offs}[{p}]'
        }, {
            '_oc': out.crd,
            '_ov': out.vals,
            '_cur_out': f'{cur}[{at}]'
        })
