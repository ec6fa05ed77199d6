"""The bytes a perfect CSR SpMV moves on a machine: its streams once, and the reads of ``x``
that miss a last-level cache.

``y = A @ x`` over CSR ``A`` streams the values, the column indices and the row pointers
once and writes ``y`` once, whatever the schedule. Its reads of ``x`` follow the column
pattern: each entry reads the cache line of ``x`` holding its column, and a line that is
still cached costs nothing. :func:`spmv_traffic` counts those line misses with an LRU
model of the last-level cache (``cache_bytes``, ``line`` bytes per line, ``ways``-way sets,
rows in order):

* when all of ``x`` fits in the cache, the misses are the compulsory ones: the distinct
  lines the pattern touches;
* otherwise the cache's sets are simulated one by one on a sample of them (every
  ``stride``-th set; set sampling, as cache simulators estimate miss rates) and the
  misses scaled by the sampled fraction. ``sample_sets=None`` simulates every set.

This is the denominator of the benchmark's SpMV bandwidth (``sdfgsparse bench``):
achieved = modelled bytes / time, against the STREAM triad. Random gathers of a large ``x``
cost whole lines, so this model, not the compulsory bytes, says how far a kernel is from
what the memory system allows.
"""
from dataclasses import dataclass
from typing import Optional

import numpy as np

__all__ = ['SpMVTraffic', 'spmv_traffic', 'x_line_misses']


@dataclass(frozen=True)
class SpMVTraffic:
    """Bytes of one SpMV: ``streams`` (values, indices, row pointers, y written),
    ``x_bytes`` (missed lines of x times the line size) and their sum ``total``;
    ``x_fits``: all of x fits in the modelled cache; ``sampled_sets``: sets simulated (0
    when x fits)."""
    streams: int
    x_bytes: int
    x_fits: bool
    sampled_sets: int

    @property
    def total(self) -> int:
        return self.streams + self.x_bytes


def x_line_misses(indices: np.ndarray, cols: int, value_bytes: int, cache_bytes: int, line: int = 64,
                  ways: int = 16, sample_sets: Optional[int] = 64):
    """``(misses, x_fits, sampled_sets)``: cache-line misses of reading ``x[indices[q]]``
    for ``q`` in order through an LRU cache of ``cache_bytes`` (see the module)."""
    if cache_bytes < line * ways:
        raise ValueError(f'cache_bytes={cache_bytes}: expected at least one set ({line * ways} bytes)')
    per_line = max(1, line // value_bytes)
    lines = np.asarray(indices, dtype=np.int64) // per_line
    n_lines = -(-cols // per_line)
    if n_lines * line <= cache_bytes:  # x stays: each touched line is loaded once
        if lines.size == 0:
            return 0, True, 0
        return int(np.count_nonzero(np.bincount(lines, minlength=n_lines))), True, 0
    sets = cache_bytes // (line * ways)
    stride = 1 if sample_sets is None else max(1, sets // sample_sets)
    set_of = lines % sets
    chosen = np.flatnonzero(set_of % stride == 0)
    misses = 0
    sampled = len(range(0, sets, stride))
    sampled_sets_of = set_of[chosen]
    order = np.argsort(sampled_sets_of, kind='stable')  # each set's accesses, in program order
    seq_sets, seq_lines = sampled_sets_of[order], lines[chosen][order]
    bounds = np.flatnonzero(np.diff(seq_sets)) + 1
    for part in np.split(seq_lines, bounds):
        lru: list = []
        for ln in part.tolist():
            try:
                lru.remove(ln)
            except ValueError:
                misses += 1
                if len(lru) == ways:
                    lru.pop(0)
            lru.append(ln)
    return int(round(misses * sets / sampled)), False, sampled


def spmv_traffic(A, cache_bytes: int, line: int = 64, ways: int = 16, sample_sets: Optional[int] = 64) -> SpMVTraffic:
    """:class:`SpMVTraffic` of ``A @ x`` for a scipy CSR ``A`` (``x`` and ``y`` of A's value
    type) with a last-level cache of ``cache_bytes`` (see the module)."""
    import scipy.sparse as sp
    if not sp.issparse(A) or A.format != 'csr':
        raise TypeError(f'A: expected a scipy CSR matrix, got {type(A).__name__}')
    vb = A.data.dtype.itemsize
    streams = A.data.nbytes + A.indices.nbytes + A.indptr.nbytes + A.shape[0] * vb
    misses, fits, sampled = x_line_misses(A.indices, A.shape[1], vb, cache_bytes, line, ways, sample_sets)
    return SpMVTraffic(int(streams), int(misses * line), fits, sampled)
