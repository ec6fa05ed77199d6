"""Concrete schedules of sparse kernels, run through the LRU simulator.

These are the "best known algorithm" side of the sparse models' validation: each
function executes a standard kernel over a CSR matrix access by access (values, index
and pointer arrays, dense operands) and returns the words it moves in a fast memory of
``cache_words`` words. Blocking parameters select among schedules.

* :func:`spmm_csr` — row-wise CSR SpMM (SpMV for ``k = 1``), optionally blocking the dense
  columns (``col_block``) and the rows (``row_block``: a block of rows per column block).
* :func:`sddmm_csr` — row-wise CSR SDDMM with the dense width blocked.
* :func:`spgemm_gustavson` — Gustavson's row-by-row SpGEMM with a dense accumulator.
"""
from typing import Optional


from sdfgsparse.analysis.cache_sim import LRUCache, SimResult

__all__ = ['spmm_csr', 'sddmm_csr', 'spgemm_gustavson']


def _csr(matrix):
    import scipy.sparse as sp
    A = sp.csr_matrix(matrix, copy=True)
    A.sum_duplicates()
    return A


def spmm_csr(matrix, k: int, cache_words: int, col_block: Optional[int] = None,
             row_block: Optional[int] = None) -> SimResult:
    """``Y = A @ B`` over CSR ``A`` (``B`` dense ``cols x k``, ``Y`` dense ``rows x k``)."""
    A = _csr(matrix)
    rows = A.shape[0]
    cache = LRUCache(cache_words)
    kb = col_block or k
    rb = row_block or rows or 1
    for j0 in range(0, k, kb):
        js = range(j0, min(j0 + kb, k))
        for i0 in range(0, rows, rb):
            for i in range(i0, min(i0 + rb, rows)):
                cache.read(('A.pos', i))
                cache.read(('A.pos', i + 1))
                for j in js:
                    cache.write(('Y', i, j))
                for p in range(A.indptr[i], A.indptr[i + 1]):
                    cache.read(('A.crd', p))
                    cache.read(('A.vals', p))
                    c = int(A.indices[p])
                    for j in js:
                        cache.read(('B', c, j))
                        cache.read(('Y', i, j))
                        cache.write(('Y', i, j))
    cache.flush()
    return cache.result()


def sddmm_csr(matrix, k: int, cache_words: int, col_block: Optional[int] = None) -> SimResult:
    """``C = A * (X @ Y.T)`` at ``A``'s nonzeros (``X`` is ``rows x k``, ``Y`` is ``cols x k``)."""
    A = _csr(matrix)
    cache = LRUCache(cache_words)
    kb = col_block or k
    for j0 in range(0, k, kb):
        js = range(j0, min(j0 + kb, k))
        first = j0 == 0
        for i in range(A.shape[0]):
            cache.read(('A.pos', i))
            cache.read(('A.pos', i + 1))
            for p in range(A.indptr[i], A.indptr[i + 1]):
                cache.read(('A.crd', p))
                c = int(A.indices[p])
                if not first:
                    cache.read(('C', p))
                for j in js:
                    cache.read(('X', i, j))
                    cache.read(('Y', c, j))
                if j0 + kb >= k:
                    cache.read(('A.vals', p))
                cache.write(('C', p))
    cache.flush()
    return cache.result()


def spgemm_gustavson(a, b, cache_words: int) -> SimResult:
    """Row-by-row ``C = A @ B`` with a dense accumulator (a transient, never stored)."""
    A, B = _csr(a), _csr(b)
    cache = LRUCache(cache_words)
    nnz_c = 0
    for i in range(A.shape[0]):
        touched = []
        seen = set()
        for p in range(A.indptr[i], A.indptr[i + 1]):
            cache.read(('A.crd', p))
            cache.read(('A.vals', p))
            kk = int(A.indices[p])
            cache.read(('B.pos', kk))
            cache.read(('B.pos', kk + 1))
            for q in range(B.indptr[kk], B.indptr[kk + 1]):
                cache.read(('B.crd', q))
                cache.read(('B.vals', q))
                j = int(B.indices[q])
                if j not in seen:
                    seen.add(j)
                    touched.append(j)
                    cache.write(('acc', j))
                else:
                    cache.read(('acc', j))
                    cache.write(('acc', j))
        for j in sorted(touched):
            cache.read(('acc', j))
            cache.write(('C.crd', nnz_c))
            cache.write(('C.vals', nnz_c))
            nnz_c += 1
        cache.write(('C.pos', i + 1))
    cache.flush(lambda key: key[0] == 'acc')
    return cache.result()
