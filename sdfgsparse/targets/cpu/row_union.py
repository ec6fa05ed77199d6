"""Row-parallel ``A + B`` / ``A - B`` (union) and ``A * B`` (intersection) of two sparse
operands, a CSR result (a CSC result is the CSR storage of ``A.T + B.T``: the caller passes
the transposed views). The row steps are leaves of ``include/sdfgsparse_row_union.h``;
this module builds the kernel around them on a
:class:`~sdfgsparse.targets.cpu.builder.CpuKernel`.

Each operand, as the operation sees it, becomes sorted rows (:func:`operand_rows`): its
own storage when it walks as CSR (a CSR matrix, a transposed CSC one), else

0. a column-major operand (CSC, a transposed CSR) stored by rows — a counting sort by
   row, walking the columns in order so that every row comes out sorted (what scipy's ``tocsr`` does for
   ``A.T``), in parallel over up to 16 chunks of consecutive columns with equal entry
   counts: each chunk counts its entries per row, a pass over the rows turns the counts
   into each chunk's offset within the row, and each chunk places its entries; any other
   format expanded, sorted and compressed
   (:func:`~sdfgsparse.lowering.graph_compress.canonical_rows`);
1. *count* — per row, in parallel, the size of the union (intersection) of the two
   sorted rows (a two-pointer merge);
2. *positions* — ``pos`` as the prefix sum of the counts;
3. *fill* — per row, in parallel, the same merge writing columns and ``a + sign * b``
   (``a * b``).

Rows of a valid CSR/CSC operand are sorted and free of duplicates (the call checks it),
so the merged rows are too. Explicit zeros from cancellation are kept, as in ``pure``.
"""
import dace
import sympy

from sdfgsparse._symbolic import pyexpr
from sdfgsparse.lowering.graph import Operand, Scope, read
from sdfgsparse.lowering.graph_compress import Rows, canonical_rows, row_major
from sdfgsparse.targets.cpu.builder import CpuKernel, leaf
from sdfgsparse.ops.add import merge_into

__all__ = ['operand_rows', 'merge_kernel']


def operand_rows(k: CpuKernel, label: str, A: Operand) -> Rows:
    """``A`` (as the operation sees it) as sorted rows: its storage when it walks as CSR,
    a row-major copy of a column-major operand (``rows_of_columns``), else its entries
    sorted and compressed (duplicates summed)."""
    rows = row_major(A)
    if rows is not None:
        return rows
    col_major = row_major(Operand(A.type.T, A.conns)) if A.type.fmt.name == 'CSC' else None
    if col_major is None:
        return canonical_rows(k, label, A)
    st = A.type
    src = {m: k.sdfg.arrays[c] for m, c in (('crd1', col_major.crd), ('vals', col_major.vals))}
    n = src['crd1'].shape[0]
    it, vt = src['crd1'].dtype, src['vals'].dtype
    out = Rows(k.transient(f'{label}_pos', [sympy.sympify(st.rows) + 1], it), k.transient(f'{label}_crd', [n], it),
               k.transient(f'{label}_vals', [n], vt), st.rows)
    state = k.add_state(f'{label}_dims')
    dims = {}
    for conn, e in (('_trows', st.rows), ('_tcols', st.cols)):  # (as values: symbols in C++ text are not passed)
        dims[conn] = read(k.scalar(f'{label}{conn}', dace.int64), 0)
        k.set_scalar(state, dims[conn].func.__name__, pyexpr(sympy.sympify(e)))
    leaf(k, Scope.at(k.add_state(f'{label}_rows')), f'{label}_rows',
         'sdfgsparse::rows_of_columns(_tp, _tc, _tv, _sp, _sc, _sv, _trows, _tcols);',
         scalars=dims, arrays={'_sp': col_major.pos, '_sc': col_major.crd, '_sv': col_major.vals},
         outs={'_tp': (out.pos, None), '_tc': (out.crd, None), '_tv': (out.vals, None)})
    return out


def merge_kernel(node, state, sdfg, mode: str, sign: int = 1) -> dace.SDFG:
    """``A ± B`` / ``A ∘ B`` in a cpu kernel: both operands as sorted rows
    (:func:`operand_rows`), then the row-parallel merge (:func:`~sdfgsparse.ops.add.merge_into`,
    whose steps the kernel's leaves do: :meth:`~sdfgsparse.targets.cpu.builder.CpuKernel.row_step`)."""
    k = CpuKernel(node, state, sdfg)
    merge_into(k, node, state, mode, sign, rows_of=operand_rows)
    return k.build()
