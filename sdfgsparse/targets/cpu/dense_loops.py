"""The row tasklets of the cpu kernels: one-line calls of the C++ leaves in
``include/sdfgsparse_rows.h`` (and ``sdfgsparse_kernel_checks.h`` for the checked SpMV row).

Each function returns the generated-source lines of one tasklet (its scalar inputs first)
for the kernel's loop nest; the algorithms, their constants and the measurements behind
them are documented beside the C++ in the header. Why C++ here at all: DaCe 1.0.2's
frontend lowers ``for k in range(K): Y[i, k] += a * B[j, k]`` with a data-dependent ``j``
into an indirection tasklet and element copies per iteration, which the C++ compiler does
not vectorise; the leaves hold the SIMD row walks, register panels and gathers.

Tasklets that walk a whole row (``spmv_row``, ``spmv_row_chunks``, ``spmm_row``,
``sddmm_row``) read the index and value arrays through dynamic memlets: they touch the
row's entries ``[pos[i], pos[i + 1])`` only, a data-dependent part of the arrays, and the
SOAP analysis (``analysis/sdfg_extract.py``) treats them as such.
"""
from typing import List

from sdfgsparse.targets.cpu.kernel import cpp_tasklet

__all__ = [
    'axpy_row', 'axpy_tile', 'dot_rows', 'transposed_rows', 'spmm_row', 'contiguous_rows', 'gemm_row_block',
    'GEMM_ROWS', 'SPMM_PANEL', 'sddmm_row', 'SDDMM_GROUP', 'spmv_row', 'spmv_row_chunks', 'regular_rows',
    'REGULAR_SAMPLE', 'REGULAR_MAX_MEAN'
]

#: Vectors of ``y`` held in registers by one panel of :func:`spmm_row`.
SPMM_PANEL = 4
#: Rows sampled by :func:`regular_rows` (pairs of a row and the one before it).
REGULAR_SAMPLE = 64
#: Mean entries per row up to which regular rows take the one-entry walk.
REGULAR_MAX_MEAN = 16
#: Stored entries whose dot products :func:`sddmm_row` computes together.
SDDMM_GROUP = 4
#: Rows of ``C`` per register block of :func:`gemm_row_block`.
GEMM_ROWS = 4


def contiguous_rows(*descs) -> bool:
    """Whether each 2-D array stores its rows contiguously (unit stride along columns)."""
    return all(len(d.shape) == 2 and str(d.strides[1]) == '1' for d in descs)


def _rows_of(connector: str, ctype: str, address: bool) -> str:
    """The C++ expression of a dense operand's rows: the array behind ``connector``, or (with
    ``address``) the rows at the int64 address it holds (:func:`transposed_rows`)."""
    return f'sdfgsparse::address<{ctype}>({connector})' if address else f'ss_in({connector})'


def axpy_row(y: str, i: str, b: str, j: str, a: str, k: str, b_stride: str, ctype: str) -> List[str]:
    """``y[i, 0:k] += a * b[j, 0:k]`` (``axpy_row``).

    :param y, b: array names (rows contiguous); ``i``: a row expression usable in a memlet
                 (a loop variable or symbol); ``j``, ``a``: any expressions (read into
                 scalars first); ``k``: the column count; ``b_stride``: elements between
                 rows of ``b``; ``ctype``: the C type of the values.
    """
    return [
        f'_aa = {a}',
        f'_jj = dace.int64({j})',
        *cpp_tasklet([('_ta', '_aa'), ('_tj', '_jj'), ('_tb', b), ('_tyi', f'{y}[{i}, :]')], [('_ty', f'{y}[{i}, :]')],
                     f'sdfgsparse::axpy_row<{ctype}>(_ty, ss_in(_tb), _tj, {b_stride}, _ta, {k});'),
    ]


def axpy_tile(y: str, i: str, b: str, j: str, a: str, c0: str, c1: str, y_stride: str, b_stride: str,
              ctype: str) -> List[str]:
    """``y[i, c0:c1] += a * b[j, c0:c1]`` where ``i`` may be data-dependent (a scatter;
    ``axpy_tile``): ``y`` is passed whole, so the caller must guarantee that concurrent
    tasklets touch disjoint columns (tiles)."""
    ins = [('_ta', '_aa'), ('_ti', '_ii'), ('_tj', '_jj'), ('_tc0', '_c0'), ('_tc1', '_c1'), ('_tb', b), ('_tyi', y)]
    return [
        f'_aa = {a}', f'_ii = dace.int64({i})', f'_jj = dace.int64({j})', f'_c0 = dace.int64({c0})',
        f'_c1 = dace.int64({c1})',
        *cpp_tasklet(ins, [('_ty', y)],
                     f'sdfgsparse::axpy_tile<{ctype}>(_ty, _ti, {y_stride}, ss_in(_tb), _tj, {b_stride}, _ta, _tc0, '
                     '_tc1);'),
    ]


def dot_rows(out: str,
             x: str,
             i: str,
             y: str,
             j: str,
             k: str,
             x_stride: str,
             y_stride: str,
             ctype: str,
             y_pointer: bool = False) -> List[str]:
    """The scalar ``out = dot(x[i, 0:k], y[j, 0:k])`` (rows contiguous; ``i`` and ``j`` any
    expressions; ``dot_rows``). ``y_pointer``: ``y`` names an int64 scalar holding the address
    of the rows (from :func:`transposed_rows`) instead of an array."""
    return [
        f'_ii = dace.int64({i})',
        f'_jj = dace.int64({j})',
        *cpp_tasklet([('_ti', '_ii'), ('_tj', '_jj'), ('_tx', x), ('_ty', y)], [('_to', out)],
                     f'_to = sdfgsparse::dot_rows<{ctype}>(ss_in(_tx), _ti, {x_stride}, '
                     f'{_rows_of("_ty", ctype, y_pointer)}, _tj, {y_stride}, {k});'),
    ]


def transposed_rows(ptr: str, src: str, rows: str, cols: str, src_stride: str, ctype: str) -> List[str]:
    """Set the int64 scalar ``ptr`` to the address of ``src.T`` (``src``: ``rows x cols``,
    ``src_stride`` elements between rows) stored by contiguous rows in a buffer of the
    calling thread (``transposed_rows``), for :func:`dot_rows` / :func:`sddmm_row` with
    ``y_pointer``."""
    return [
        f'{ptr} = dace.int64(0)',
        *cpp_tasklet([('_ts', src)], [('_tp', ptr)],
                     f'_tp = sdfgsparse::transposed_rows<{ctype}>(ss_in(_ts), {rows}, {cols}, {src_stride});'),
    ]


def spmm_row(y: str, i: str, b: str, crd: str, vals: str, lo: str, hi: str, k: str, b_stride: str,
             ctype: str) -> List[str]:
    """One whole row ``y[i, 0:k] = sum_p vals[p] * b[crd[p], 0:k]`` over the stored entries
    ``p`` in ``[lo, hi)`` of a row-major operand (``spmm_row``: register panels of
    :data:`SPMM_PANEL` vectors, ``y`` written once)."""
    return [
        f'_lo = dace.int64({lo})',
        f'_hi = dace.int64({hi})',
        *cpp_tasklet(
            [
                ('_tlo', '_lo'),
                ('_thi', '_hi'),
                ('_tc', f'{crd}(-1)'),  # the row's entries: a data-dependent part (dynamic)
                ('_tv', f'{vals}(-1)'),
                ('_tb', b),
            ],
            [('_ty', f'{y}[{i}, :]')],
            f'sdfgsparse::spmm_row<{SPMM_PANEL}, {ctype}>(ss_out(_ty), ss_in(_tb), {b_stride}, _tc, _tv, _tlo, _thi, '
            f'{k});'),
    ]


def spmv_row(y: str, i: str, x: str, crd: str, vals: str, lo: str, hi: str, ctype: str, check) -> List[str]:
    """``y[i] = sum_p vals[p] * x[crd[p]]`` over the stored entries ``p`` in ``[lo, hi)`` of
    one row, checking that part of the storage as it reads it (``spmv_row_checked``;
    ``check``: a :class:`sdfgsparse.targets.cpu.kernel_checks.RowCheck`). ``ctype``: the
    result's (and sum's) C type."""
    return check.inputs() + [
        f'_lo = dace.int64({lo})',
        f'_hi = dace.int64({hi})',
        *cpp_tasklet(
            [('_tlo', '_lo'), ('_thi', '_hi')] + list(check.CONNECTORS) + [
                ('_tc', f'{crd}(-1)'),  # the row's entries: a data-dependent part (dynamic)
                ('_tv', f'{vals}(-1)'),
                ('_tx', x),
            ],
            [('_ty', f'{y}[{i}]')],
            f'_ty = sdfgsparse::spmv_row_checked<{ctype}, {check.order}>(_tc, _tv, ss_in(_tx), _tlo, _thi, _tknnz, '
            '_tkext);'),
    ]


def spmv_row_chunks(y: str, i: str, x: str, crd: str, vals: str, lo: str, hi: str, end: str, width: int) -> List[str]:
    """``y[i] = sum_p vals[p] * x[crd[p]]`` over the stored entries ``[lo, hi)`` of one row
    (A, x and y of one dtype), ``width`` entries at a time (``spmv_row_chunks``; ``width`` 1:
    one entry per step). ``end``: the end of the last row (no chunk reads past it)."""
    return [
        f'_lo = dace.int64({lo})',
        f'_hi = dace.int64({hi})',
        f'_end = dace.int64({end})',
        *cpp_tasklet(
            [
                ('_tlo', '_lo'),
                ('_thi', '_hi'),
                ('_tend', '_end'),
                ('_tc', f'{crd}(-1)'),  # the row's entries: a data-dependent part (dynamic)
                ('_tv', f'{vals}(-1)'),
                ('_tx', x),
            ],
            [('_ty', f'{y}[{i}]')],
            f'_ty = sdfgsparse::spmv_row_chunks<{max(width, 1)}>(_tc, _tv, ss_in(_tx), _tlo, _thi, _tend);'),
    ]


def regular_rows(out: str, pos: str, rows: str) -> List[str]:
    """Set ``out[0]`` (a new array of one int) to 1 when the rows look regular
    (``regular_rows``: a sample of :data:`REGULAR_SAMPLE` rows, at most
    :data:`REGULAR_MAX_MEAN` entries per row on average); O(1) per call."""
    return [
        f'{out} = np.empty((1,), dtype=np.int64)',
        f'{out}_m = dace.int64({rows})',
        *cpp_tasklet([('_trows', f'{out}_m'), ('_tpos', pos)], [('_treg', f'{out}[0]')],
                     f'_treg = sdfgsparse::regular_rows<{REGULAR_SAMPLE}, {REGULAR_MAX_MEAN}>(_tpos, _trows);'),
    ]


def sddmm_row(out: str, out_crd: str, i: str, x: str, y: str, crd: str, vals: str, lo: str, hi: str, k: str,
              x_stride: str, y_stride: str, ctype: str, y_pointer: bool = False) -> List[str]:
    """One whole row of SDDMM: for the stored entries ``p`` in ``[lo, hi)``, ``out[p] =
    vals[p] * dot(x[i, 0:k], y[crd[p], 0:k])`` and ``out_crd[p] = crd[p]`` (``sddmm_row``:
    :data:`SDDMM_GROUP` entries' dot products at a time). ``y_pointer`` as in
    :func:`dot_rows`."""
    return [
        f'_ii = dace.int64({i})',
        f'_lo = dace.int64({lo})',
        f'_hi = dace.int64({hi})',
        *cpp_tasklet(
            [
                ('_ti', '_ii'),
                ('_tlo', '_lo'),
                ('_thi', '_hi'),
                ('_tx', x),
                ('_ty', y),
                ('_tc', f'{crd}(-1)'),  # the row's entries: a data-dependent part (dynamic)
                ('_tv', f'{vals}(-1)'),
            ],
            [('_to', out), ('_toc', out_crd)],
            f'sdfgsparse::sddmm_row<{SDDMM_GROUP}, {ctype}>(_to, _toc, ss_in(_tx) + _ti * ({x_stride}), '
            f'{_rows_of("_ty", ctype, y_pointer)}, {y_stride}, _tc, _tv, _tlo, _thi, {k});'),
    ]


def gemm_row_block(c: str, a: str, b: str, ib: str, m: str, k: str, n: str, lda: str, ldb: str, ldc: str,
                   ctype: str) -> List[str]:
    """Rows ``GEMM_ROWS*ib ...`` (at most :data:`GEMM_ROWS`, fewer at the end) of the dense
    product ``c = a @ b`` (``m x k`` times ``k x n``, rows contiguous, ``ld*`` elements
    between rows; ``gemm_row_block``: register blocks). ``c`` is passed whole; blocks write
    disjoint rows."""
    return [
        f'_ib = dace.int64({ib})',
        *cpp_tasklet([('_tib', '_ib'), ('_ta', a), ('_tb', b)], [('_tc', c)],
                     f'sdfgsparse::gemm_row_block<{GEMM_ROWS}, {ctype}>(_tc, ss_in(_ta), ss_in(_tb), _tib, {m}, {k}, '
                     f'{n}, {lda}, {ldb}, {ldc});'),
    ]
