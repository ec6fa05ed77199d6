"""Partitions of a sparse matrix over ``p`` processes, as
:class:`~sdfgsparse.analysis.communication.Assignment` objects (who owns each entry of
``y`` and ``x``, who multiplies each stored entry). Pure NumPy: no communicator needed, so
the same partition can be evaluated for 1,000 processes on one machine.

- ``'rows'``: contiguous row blocks balanced by stored entries (each row also counts one,
  for its result); ``x`` follows the rows for square matrices, else contiguous column blocks
  balanced the same way.
- ``'2d'``: a ``pr x pc`` process grid (``pr`` the largest divisor of ``p`` up to
  ``sqrt(p)``); row blocks balanced by entries, column blocks by entries per column; block
  ``(I, J)`` on process ``I * pc + J``; ``y``'s row block ``I`` split among the processes
  of grid row ``I`` (``x`` the same for square matrices, else column block ``J`` split along
  grid column ``J``).
- ``'arrow'``: :func:`sdfgsparse.distributed.arrow.arrow_assignment`.
"""
import math

import numpy as np
import scipy.sparse as sp

from sdfgsparse.analysis.communication import Assignment
from sdfgsparse.distributed.arrow import arrow_assignment

__all__ = ['PARTITIONS', 'balanced_offsets', 'rows_assignment', 'grid_shape', 'grid_assignment', 'assignment']

PARTITIONS = ('rows', '2d', 'arrow')


def balanced_offsets(weights: np.ndarray, p: int) -> np.ndarray:
    """``p + 1`` offsets cutting ``len(weights)`` items into ``p`` contiguous blocks of
    about equal total weight (blocks may be empty)."""
    n = int(weights.size)
    cum = np.concatenate([[0], np.cumsum(weights, dtype=np.float64)])
    targets = cum[-1] * np.arange(p + 1) / p
    offsets = np.searchsorted(cum, targets, side='left').astype(np.int64)
    offsets[0], offsets[-1] = 0, n
    return np.maximum.accumulate(np.minimum(offsets, n))


def _owner_of(offsets: np.ndarray, n: int) -> np.ndarray:
    return (np.searchsorted(offsets, np.arange(n), side='right') - 1).astype(np.int32)


def _row_of_entries(A: sp.csr_array) -> np.ndarray:
    return np.repeat(np.arange(A.shape[0], dtype=np.int64), np.diff(A.indptr))


def rows_assignment(A: sp.csr_array, p: int) -> Assignment:
    m, n = A.shape
    row_w = np.diff(A.indptr) + 1
    row_owner = _owner_of(balanced_offsets(row_w, p), m)
    if m == n:
        col_owner = row_owner
    else:
        col_w = np.bincount(A.indices, minlength=n) + 1
        col_owner = _owner_of(balanced_offsets(col_w, p), n)
    return Assignment(p, row_owner, col_owner, row_owner[_row_of_entries(A)].astype(np.int32), 'rows')


def grid_shape(p: int) -> tuple:
    """``(pr, pc)``: ``pr`` the largest divisor of ``p`` not above ``sqrt(p)``."""
    pr = max(d for d in range(1, math.isqrt(p) + 1) if p % d == 0)
    return pr, p // pr


def _split_blocks(offsets: np.ndarray, weights: np.ndarray, parts: int, owners_of_part) -> np.ndarray:
    """Owner of each item when block ``b`` (items ``offsets[b]:offsets[b+1]``) is cut into
    ``parts`` balanced pieces owned by ``owners_of_part(b, piece)``."""
    owner = np.empty(weights.size, np.int32)
    for b in range(offsets.size - 1):
        lo, hi = int(offsets[b]), int(offsets[b + 1])
        sub = balanced_offsets(weights[lo:hi], parts) + lo
        for piece in range(parts):
            owner[sub[piece]:sub[piece + 1]] = owners_of_part(b, piece)
    return owner


def grid_assignment(A: sp.csr_array, p: int) -> Assignment:
    m, n = A.shape
    pr, pc = grid_shape(p)
    row_w = np.diff(A.indptr) + 1
    col_w = np.bincount(A.indices, minlength=n) + 1
    row_off = balanced_offsets(row_w, pr)
    col_off = balanced_offsets(col_w, pc)
    row_block = _owner_of(row_off, m)
    col_block = _owner_of(col_off, n)
    entry_rank = (row_block[_row_of_entries(A)] * pc + col_block[A.indices]).astype(np.int32)
    row_owner = _split_blocks(row_off, row_w, pc, lambda I, J: I * pc + J)
    col_owner = row_owner if m == n else _split_blocks(col_off, col_w, pr, lambda J, I: I * pc + J)
    return Assignment(p, row_owner, col_owner, entry_rank, '2d', grid=(pr, pc))


def assignment(A: sp.csr_array, p: int, partition: str, **options) -> Assignment:
    """The :class:`Assignment` of ``partition`` (one of :data:`PARTITIONS`) for canonical
    CSR ``A`` over ``p`` processes."""
    if partition in ('rows', '2d') and options:
        raise ValueError(f'{", ".join(sorted(options))}: options of the arrow decomposition, not of '
                         f'partition={partition!r}')
    if partition == 'rows':
        return rows_assignment(A, p)
    if partition == '2d':
        return grid_assignment(A, p)
    if partition == 'arrow':
        return arrow_assignment(A, p, **options)
    raise ValueError(f'partition={partition!r}: expected one of {", ".join(map(repr, PARTITIONS))}')
