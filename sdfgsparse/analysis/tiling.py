"""Tile sizes of the dense loop of sparse-dense products, from a data-movement model.

SpMM ``Y = A @ B`` (``A``: rows x cols with ``nnz`` entries, ``B``: cols x K) runs a walk
over ``A``'s entries around a dense loop over the ``K`` columns. Strip-mining that loop
into tiles of ``J`` columns and hoisting the tile loop outward (Scorch's sparse-dense
tiling) makes ``ceil(K / J)`` walks over ``A``. With a fast memory of ``S`` words the
schedule moves about

    Q(J) = ceil(K / J) * nnz * w_A + (cols + rows) * K

words, where ``w_A`` is the words per stored entry (value and index) — provided the tile's
working set stays resident; otherwise the gathered rows of ``B`` come from memory once
per entry, ``nnz * K``, which is the untiled cost when ``B`` does not fit. That working
set is, as in the SOAP tile of the SpMM CDAG (``|P| J`` multiply-adds fed by ``r J + c J``
dense words, see :mod:`~sdfgsparse.analysis.sparse_models`):

- row-owned walk (CSR): the ``B[:, tile]`` slice, ``cols * J`` words (one output row is in
  flight per thread);
- scatter walk (CSC, ``A.T``, COO): ``B[:, tile]`` and ``Y[:, tile]``, ``(rows + cols) * J``.

``Q`` decreases in ``J``, so the best tile is the largest whose working set fits:
``J = S / cols`` (row-owned) or ``S / (rows + cols)`` (scatter), rounded down to a multiple
of the vector width so the innermost loop vectorises. A row-owned walk needs no tiling
when all of ``B`` fits (``J >= K``) and gains nothing when not even one vector of columns
fits. A scatter walk always profits (even ``J = K``, a single walk): untiled it walks ``A``
once per column (``J = 1``) with strided updates; its tiles are also its parallel units,
so ``J`` is capped at ``ceil(K / units)`` with two units per thread when there are several
threads (one unit per thread left no slack: with ``J = 32`` for ``K = 64`` on two threads
the optimised ``A.T @ B`` ran 5-13% slower than the default 16-column tiles on three of
the four quick matrices, 2026-11-30; a thread that falls behind now leaves a tile for
the other).

Measured (cora_A, 2708 x 2708, 10.5K entries, 1 thread, 2026-11-30): a scatter walk of
``A.T @ B`` with ``K = 64`` went from 3.12 ms untiled to 2.76 ms with ``J = 24``; a
row-owned walk with ``K = 256`` and ``J = 48`` went from 4.6 ms to 12.1 ms — the tile loop
around the parallel row loop costs more than the smaller ``B`` slice saves while ``B``
still fits the 300 MB L3. So the model does not tile row-owned walks
(``ROW_OWNED_TILING``); the expansion still supports it for a ``dense_tile`` set by hand.
"""
import math
import os
__all__ = ['machine_cache_bytes', 'machine_threads', 'spmm_dense_tile']

_FALLBACK_CACHE = 1 << 20
#: whether the model tiles row-owned walks (see the measurement in the module docstring)
ROW_OWNED_TILING = False


def machine_cache_bytes(level: int = 2) -> int:
    """Size of one core's cache of the given level (Linux sysfs); 1 MiB if unknown."""
    base = '/sys/devices/system/cpu/cpu0/cache'
    try:
        for entry in sorted(os.listdir(base)):
            d = os.path.join(base, entry)
            with open(os.path.join(d, 'level')) as f:
                if int(f.read()) != level:
                    continue
            with open(os.path.join(d, 'type')) as f:
                if f.read().strip() == 'Instruction':
                    continue
            with open(os.path.join(d, 'size')) as f:
                text = f.read().strip().upper()
            scale = {'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30}.get(text[-1], 1)
            return int(text.rstrip('KMG')) * scale
    except (OSError, ValueError):
        pass
    return _FALLBACK_CACHE


def machine_threads() -> int:
    """Threads the generated code runs with: ``OMP_NUM_THREADS`` if set, else the CPU count."""
    env = os.environ.get('OMP_NUM_THREADS', '')
    return int(env) if env.isdigit() and int(env) > 0 else (os.cpu_count() or 1)


def _round_down(x: int, step: int) -> int:
    return (x // step) * step


def spmm_dense_tile(rows: int, cols: int, k: int, cache_words: int, scatter: bool, threads: int = 1,
                    vector: int = 8) -> int:
    """Columns per tile of SpMM's dense loop; 0 when the untiled loop is as good.

    :param rows, cols: the sparse operand's shape as the product sees it.
    :param k: columns of the dense operand.
    :param cache_words: fast-memory size ``S`` in elements of the dense operand.
    :param scatter: whether the walk scatters rows (see the module docstring).
    :param threads: parallel workers (the scatter walk's tiles are its parallel units).
    :param vector: the tile is a multiple of this (elements per SIMD register).
    """
    if k <= vector or cache_words <= 0:
        return 0
    if not scatter:
        if not ROW_OWNED_TILING:
            return 0
        fit = cache_words // max(1, cols)
        if fit >= k or fit < vector:
            return 0
        return _round_down(fit, vector)
    fit = cache_words // max(1, rows + cols)
    units = 2 * threads if threads > 1 else 1
    balanced = math.ceil(k / units)
    tile = max(vector, _round_down(min(fit, balanced), vector))
    return min(tile, k)
