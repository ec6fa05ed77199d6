"""Which storage format a matrix should have for the operations that read it: a
data-movement cost model over structure statistics.

Each operation that walks the stored entries of a matrix (SpMV, SpMM with ``k`` dense
columns, SDDMM, element-wise and reductions) moves, per call, the matrix's storage once,
touches the dense operands once per *slot* (stored entry or padding) and dense column, and
writes its ``rows x k`` result. For a format with ``slots`` value slots, ``idx`` index words
per slot and ``meta`` other index words (positions, offsets), one use with ``k`` dense
columns costs

    bytes = slots * (v + idx * i) + meta * i + slots * k * v + rows * k * v

in words of ``v`` (value) and ``i`` (index) bytes: padding slots hold zeros that are
multiplied all the same. The result's write is the same for every format (it does not
change a choice), but without it the count fell below the operation's SOAP lower bound on
matrices with few entries per row (``tests/analysis/test_model_bounds.py``). Per format,
from the statistics (``nnz``, ``rows``, ``cols``,
``max_row`` — ELL's width, ``ndiags`` — DIA's diagonals, ``nonempty_rows``, ``blocks_RxC``
— the number of nonzero ``R x C`` blocks):

=====  ==================  =========  ============================  =======================
fmt    slots               idx/slot   meta                          parallel over rows
=====  ==================  =========  ============================  =======================
CSR    nnz                 1          rows + 1                      yes
CSC    nnz                 1          cols + 1                      no (scatter)
COO    nnz                 2          0                             no (scatter)
DCSR   nnz                 1          2 nonempty_rows + 2           yes
ELL    rows * max_row      1          0                             yes
DIA    ndiags * rows       0          ndiags                        yes
BSR    blocks * R * C      1 / (RC)   rows / R + 1                  yes
=====  ==================  =========  ============================  =======================

A scatter walk runs sequentially for vector operands; its cost is multiplied by the
thread count (it forgoes the other threads). Converting the caller's matrix to another
format reads the source storage and writes the target storage, about three passes
(count, place, write): ``3 * (source bytes + target bytes)`` per call of the program
(``calls`` calls share a conversion only when the caller converts once outside).

:func:`format_costs` returns the cost of every candidate; :func:`choose_format` the
cheapest, ties going to the given format.
"""
from typing import Dict, Iterable, Mapping, Optional, Sequence, Tuple

import numpy as np

__all__ = ['matrix_format_stats', 'format_costs', 'choose_format', 'storage_bytes', 'CANDIDATES']

#: formats :func:`choose_format` considers (BSR with the block shapes measured by
#: :func:`matrix_format_stats`)
CANDIDATES = ('CSR', 'CSC', 'COO', 'DCSR', 'ELL', 'DIA', 'BSR2x2', 'BSR4x4')

_SCATTER = {'CSC', 'COO'}


def matrix_format_stats(matrix) -> Dict[str, float]:
    """Structure statistics of a scipy sparse matrix for :func:`format_costs`."""
    import scipy.sparse as sp
    A = sp.csr_array(matrix)
    A.sum_duplicates()
    rows, cols = A.shape
    row_len = np.diff(A.indptr)
    r = np.repeat(np.arange(rows, dtype=np.int64), row_len)
    c = A.indices.astype(np.int64)
    stats = {
        'nnz': float(A.nnz),
        'rows': float(rows),
        'cols': float(cols),
        'max_row': float(row_len.max()) if rows else 0.0,
        'nonempty_rows': float(np.count_nonzero(row_len)),
        'ndiags': float(np.unique(c - r).size) if A.nnz else 0.0,
    }
    for R, C in ((2, 2), (4, 4)):
        if rows % R or cols % C:
            continue  # BSR needs the shape to be a multiple of the block
        nb = np.unique((r // R) * ((cols + C - 1) // C) + c // C).size if A.nnz else 0
        stats[f'blocks_{R}x{C}'] = float(nb)
    return stats


def _layout(fmt: str, s: Mapping[str, float]) -> Optional[Tuple[float, float, float]]:
    """(slots, index words per slot, meta index words) of ``fmt``; None if not applicable."""
    nnz, rows, cols = s['nnz'], s['rows'], s['cols']
    if fmt == 'CSR':
        return nnz, 1.0, rows + 1
    if fmt == 'CSC':
        return nnz, 1.0, cols + 1
    if fmt == 'COO':
        return nnz, 2.0, 0.0
    if fmt == 'DCSR':
        return nnz, 1.0, 2 * s.get('nonempty_rows', rows) + 2
    if fmt == 'ELL':
        return rows * s['max_row'], 1.0, 0.0
    if fmt == 'DIA':
        if 'ndiags' not in s:
            return None
        return s['ndiags'] * rows, 0.0, s['ndiags']
    if fmt.startswith('BSR'):
        R, C = (int(x) for x in fmt[3:].split('x'))
        key = f'blocks_{R}x{C}'
        if key not in s:
            return None
        return s[key] * R * C, 1.0 / (R * C), rows / R + 1
    raise ValueError(f'unknown format {fmt!r}')


def storage_bytes(fmt: str, s: Mapping[str, float], v: float, i: float) -> Optional[float]:
    """Bytes of a matrix with statistics ``s`` stored as ``fmt`` (values of ``v`` bytes,
    indices of ``i``); None where ``s`` lacks a statistic the layout needs."""
    lay = _layout(fmt, s)
    if lay is None:
        return None
    slots, idx, meta = lay
    return slots * (v + idx * i) + meta * i


def format_costs(stats: Mapping[str, float], uses: Sequence[int], given: str = 'CSR', value_bytes: int = 8,
                 index_bytes: int = 4, threads: int = 1, candidates: Iterable[str] = CANDIDATES) -> Dict[str, float]:
    """Bytes-equivalent cost per program call of storing the matrix in each candidate
    format; ``uses`` lists the dense width ``k`` of each operation reading it (1 for a
    vector, 0 for an operation without a dense operand), ``given`` is the caller's format."""
    v, i = float(value_bytes), float(index_bytes)
    src = storage_bytes(given, stats, v, i)
    costs = {}
    for fmt in candidates:
        store = storage_bytes(fmt, stats, v, i)
        if store is None:
            continue
        slots = _layout(fmt, stats)[0]
        total = 0.0
        for k in uses:
            one = store + slots * max(k, 0) * v
            if fmt in _SCATTER and k <= 1:
                one *= max(threads, 1)
            total += one + stats['rows'] * max(k, 0) * v  # the write, equal for every format
        if fmt != given:
            total += 3.0 * ((src or 0.0) + store)
        costs[fmt] = total
    return costs


def choose_format(stats: Mapping[str, float], uses: Sequence[int], given: str = 'CSR', **kw) -> Tuple[str, Dict]:
    """(cheapest format, all costs); the given format wins ties."""
    costs = format_costs(stats, uses, given, **kw)
    best = min(costs, key=lambda f: (costs[f], f != given))
    return best, costs
