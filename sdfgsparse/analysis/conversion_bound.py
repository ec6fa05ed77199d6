"""How large a matrix becomes when converted to another storage format, found cheaply and
before anything is allocated.

A format chosen for one matrix (DIA for a band, ELL for even rows) can be ruinous for
another: DIA stores ``ndiags x rows`` slots, ELL ``rows x max_row``, BSR every touched
block in full. :func:`converted_bytes` answers "how many bytes would ``matrix`` take as
``fmt``" with the storage model of :mod:`sdfgsparse.analysis.format_cost` (the same
layouts the format choice was costed with), reading the cheapest statistics first:

* ``O(rows)`` from the row pointers: ``nnz``, ``max_row`` -- exact for ELL, and a lower
  bound for DIA (each entry of a row lies on its own diagonal, so ``ndiags >= max_row``)
  and BSR (``blocks >= nnz / (R C)``);
* ``O(nnz)`` only when that lower bound is within ``limit``: DIA's distinct diagonals (a
  count over ``rows + cols`` offsets), BSR's distinct blocks.

Formats that store one slot per entry (CSR, CSC, COO, DCSR) are never larger than the
matrix as CSR plus its row pointers.
"""
from typing import Optional, Tuple

import numpy as np

from sdfgsparse.analysis.format_cost import storage_bytes

__all__ = ['converted_bytes', 'csr_bytes']


def _csr_view(matrix):
    """(indptr, indices, shape) of a scipy sparse matrix (its own arrays for CSR)."""
    import scipy.sparse as sp
    A = matrix if matrix.format == 'csr' else sp.csr_array(matrix)
    return A.indptr, A.indices, A.shape


def csr_bytes(matrix, value_bytes: int, index_bytes: int) -> float:
    """Bytes of a scipy sparse ``matrix`` stored as CSR (values, column indices, row pointers)."""
    rows, _ = matrix.shape
    return float(matrix.nnz * (value_bytes + index_bytes) + (rows + 1) * index_bytes)


def converted_bytes(matrix, fmt: str, value_bytes: int, index_bytes: int,
                    limit: Optional[float] = None) -> Tuple[float, bool]:
    """``(bytes, exact)``: the storage of the scipy sparse ``matrix`` in format ``fmt`` (a
    cost-model name: ``'DIA'``, ``'ELL'``, ``'BSR4x4'``, ...). When the ``O(rows)`` lower
    bound already exceeds ``limit``, returns that bound with ``exact=False`` without
    reading the column indices."""
    indptr, indices, (rows, cols) = _csr_view(matrix)
    row_len = np.diff(indptr)
    nnz = int(indptr[-1]) if len(indptr) else 0
    stats = {'nnz': float(nnz), 'rows': float(rows), 'cols': float(cols),
             'max_row': float(row_len.max()) if rows else 0.0, 'nonempty_rows': float(np.count_nonzero(row_len))}
    if fmt in ('CSR', 'CSC', 'COO', 'DCSR', 'ELL'):
        return storage_bytes(fmt, stats, value_bytes, index_bytes), True
    if fmt == 'DIA':
        stats['ndiags'] = stats['max_row']
        bound = storage_bytes(fmt, stats, value_bytes, index_bytes)
        if limit is not None and bound > limit:
            return bound, False
        if nnz:
            offsets = indices[:nnz].astype(np.int64) - np.repeat(np.arange(rows, dtype=np.int64), row_len) + rows
            stats['ndiags'] = float(np.count_nonzero(np.bincount(offsets, minlength=rows + cols + 1)))
        return storage_bytes(fmt, stats, value_bytes, index_bytes), True
    if fmt.startswith('BSR'):
        R, C = (int(x) for x in fmt[3:].split('x'))
        key = f'blocks_{R}x{C}'
        stats[key] = float(-(-nnz // (R * C)))
        bound = storage_bytes(fmt, stats, value_bytes, index_bytes)
        if limit is not None and bound > limit:
            return bound, False
        if nnz:
            r = np.repeat(np.arange(rows, dtype=np.int64), row_len) // R
            stats[key] = float(np.unique(r * ((cols + C - 1) // C) + indices[:nnz].astype(np.int64) // C).size)
        return storage_bytes(fmt, stats, value_bytes, index_bytes), True
    raise ValueError(f'converted_bytes: unknown format {fmt!r}')
