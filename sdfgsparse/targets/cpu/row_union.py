"""Row-parallel ``A + B`` / ``A - B`` of two compressed operands, a CSR result (a CSC
result is the CSR storage of ``A.T + B.T``: the caller passes the transposed views). The
row steps are C++ in ``include/sdfgsparse_row_union.h``; this module builds the kernel
around them.

The generic lowering (:mod:`sdfgsparse.targets.cpu.compress`) appends both operands' entries
to one list, sorts and compresses it sequentially (slower than scipy; docs/performance.md).
When each operand, as the operation sees it, is CSR or CSC (a CSR
matrix, a transposed CSC one, or the other way round), this lowering:

0. stores a column-major operand by rows first — a counting sort by row, walking the
   columns in order so that every row comes out sorted (what scipy's ``tocsr`` does for
   ``A.T``), in parallel over up to 16 chunks of consecutive columns with equal entry
   counts: each chunk counts its entries per row, a pass over the rows turns the counts
   into each chunk's offset within the row, and each chunk places its entries;
1. *count* — per row, in parallel, the size of the union of the two sorted rows
   (a two-pointer merge);
2. *positions* — ``pos`` as the prefix sum of the counts;
3. *fill* — per row, in parallel, the same merge writing columns and ``a + sign * b``.

Rows of a valid CSR/CSC operand are sorted and free of duplicates (the call checks it),
so the merged rows are too. Explicit zeros from cancellation are kept, as in the generic
lowering. Each per-row step is a one-line tasklet inside a generated map.
"""
import dace

from sdfgsparse._symbolic import pyexpr
from sdfgsparse.targets.cpu.kernel import KernelBuilder, cpp_tasklet
from sdfgsparse.targets.cpu.rowwise import emit_count_fill

__all__ = ['emit_rows_of_columns', 'emit_row_union']

def emit_rows_of_columns(kb: KernelBuilder, tag: str, rows, cols, src: dict, nnz, idtype: str, vdtype: str) -> dict:
    """Emit the row-major copy of a column-major operand (``src``: connector names of its
    ``pos1`` / ``crd1`` / ``vals``; ``rows x cols`` as the operation sees it). Returns the
    names of the copy's arrays, keyed like ``src``."""
    kb.globals['np'] = __import__('numpy')
    kb.symbols_of(rows, cols, nnz)
    R, C, n = pyexpr(rows), pyexpr(cols), pyexpr(nnz)
    names = {'pos1': f'{tag}_pos', 'crd1': f'{tag}_crd', 'vals': f'{tag}_vals'}
    L = kb.line
    L(f'{names["pos1"]} = np.empty(({R} + 1,), dtype={idtype})')
    L(f'{names["crd1"]} = np.empty(({n},), dtype={idtype})')
    L(f'{names["vals"]} = np.empty(({n},), dtype={vdtype})')
    L(f'{tag}_rows = dace.int64({R})')
    L(f'{tag}_cols = dace.int64({C})')
    ins = [('_trows', f'{tag}_rows'), ('_tcols', f'{tag}_cols'), ('_sp', src['pos1']), ('_sc', src['crd1']),
           ('_sv', src['vals'])]
    for l in cpp_tasklet(ins, [('_tp', names['pos1']), ('_tc', names['crd1']), ('_tv', names['vals'])],
                         'sdfgsparse::rows_of_columns(_tp, _tc, _tv, _sp, _sc, _sv, _trows, _tcols);'):
        L(l)
    return names


def emit_row_union(kb: KernelBuilder, rows, cap, a: dict, b: dict, out: dict, sign: int, vt: dace.typeclass):
    """Emit count, positions and fill of ``out = a + sign * b`` over ``rows`` rows (``a``,
    ``b``, ``out``: names of ``pos1`` / ``crd1`` / ``vals``, all row-major; ``cap``: the
    result's capacity, ``nnz(A) + nnz(B)``), by
    :func:`~sdfgsparse.targets.cpu.rowwise.emit_count_fill`."""
    ins = [('_ap', a['pos1']), ('_ac', a['crd1']), ('_bp', b['pos1']), ('_bc', b['crd1'])]
    fill = ins + [('_av', a['vals']), ('_bv', b['vals']), ('_op', out['pos1'])]
    emit_count_fill(kb, 'un', rows, cap, ins, fill, out, '_tcnt = sdfgsparse::union_count(_ap, _ac, _bp, _bc, _ti);',
                    f'sdfgsparse::union_fill<{vt.ctype}>(_oc, _ov, _ap, _ac, _av, _bp, _bc, _bv, _op, _ti, {int(sign)});')
