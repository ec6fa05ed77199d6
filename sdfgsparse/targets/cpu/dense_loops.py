"""The C++ calls of the row leaves in ``include/sdfgsparse_rows.h`` and their constants.

:mod:`sdfgsparse.targets.cpu.row_leaves` adds the tasklets to the kernels; the call text of
a leaf is written once here (``*_call``). The algorithms, their constants and the
measurements behind them are documented beside the C++ in the header.
"""

__all__ = [
    'contiguous_rows', 'GEMM_ROWS', 'SPMM_PANEL', 'SDDMM_GROUP',
    'REGULAR_SAMPLE', 'REGULAR_MAX_MEAN', 'regular_rows_call', 'axpy_row_call', 'dot_rows_call', 'spmm_row_call', 'rows_of'
]

#: Vectors of ``y`` held in registers by one panel of ``spmm_row``.
SPMM_PANEL = 4
#: Rows sampled by ``regular_rows`` (pairs of a row and the one before it).
REGULAR_SAMPLE = 64
#: Mean entries per row up to which regular rows take the one-entry walk.
REGULAR_MAX_MEAN = 16
#: Stored entries whose dot products ``sddmm_row`` computes together.
SDDMM_GROUP = 4
#: Rows of ``C`` per register block of ``gemm_row_block``.
GEMM_ROWS = 4


def contiguous_rows(*descs) -> bool:
    """Whether each 2-D array stores its rows contiguously (unit stride along columns)."""
    return all(len(d.shape) == 2 and str(d.strides[1]) == '1' for d in descs)


def rows_of(connector: str, ctype: str, address: bool) -> str:
    """The C++ expression of a dense operand's rows: the array behind ``connector``, or (with
    ``address``) the rows at the int64 address it holds (``transposed_rows``)."""
    return f'sdfgsparse::address<{ctype}>({connector})' if address else f'ss_in({connector})'


def regular_rows_call(out: str, pos: str, rows: str) -> str:
    """``out = 1`` when the rows of the positions ``pos`` look regular, else 0: the C++
    statement (``rows``: C++ text of the row count)."""
    return f'{out} = sdfgsparse::regular_rows<{REGULAR_SAMPLE}, {REGULAR_MAX_MEAN}>({pos}, {rows});'


def axpy_row_call(y: str, b: str, j: str, b_stride: str, a: str, k: str, ctype: str) -> str:
    """``y[0:k] += a * b[j, 0:k]``: the C++ statement (connector names and C++ sizes)."""
    return f'sdfgsparse::axpy_row<{ctype}>({y}, ss_in({b}), {j}, {b_stride}, {a}, {k});'


def dot_rows_call(out: str, x: str, i: str, x_stride: str, y_rows: str, j: str, y_stride: str, k: str,
                  ctype: str) -> str:
    """``out = dot(x[i, 0:k], rows[j, 0:k])``: the C++ statement (``y_rows`` from :func:`rows_of`)."""
    return f'{out} = sdfgsparse::dot_rows<{ctype}>(ss_in({x}), {i}, {x_stride}, {y_rows}, {j}, {y_stride}, {k});'


def spmm_row_call(y: str, b: str, crd: str, vals: str, lo: str, hi: str, k: str, b_stride: str, ctype: str) -> str:
    """``y[0:k] = sum_p vals[p] * b[crd[p], 0:k]`` over ``[lo, hi)``: the C++ statement."""
    return (f'sdfgsparse::spmm_row<{SPMM_PANEL}, {ctype}>(ss_out({y}), ss_in({b}), {b_stride}, {crd}, {vals}, '
            f'{lo}, {hi}, {k});')
