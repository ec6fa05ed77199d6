"""STREAM triad (``a[i] = b[i] + s * c[i]``, McCalpin): the machine's attainable memory
bandwidth, measured in the same run and with the same OpenMP threads as sdfgsparse.

The kernel is a DaCe map compiled like any sdfgsparse program (one OpenMP-parallel loop,
one pass over the arrays). Bandwidth counts 24 bytes per element (read b and c, write a;
no write-allocate), as STREAM does, and the best of ``repeat`` passes is reported. Each
array should be several times the last-level cache (default 2**26 doubles = 512 MiB,
1.5 GiB for the three; this machine's L3 is 300 MiB). If DaCe cannot build the kernel,
NumPy is used instead (two passes: ``a = c * s``, ``a += b``, 40 bytes per element
counted) and ``method`` says so.
"""
import time
from typing import Any, Dict

import dace
import numpy as np

from sdfgsparse.formats import mark_ours

__all__ = ['stream_triad', 'DEFAULT_ELEMENTS']

DEFAULT_ELEMENTS = 1 << 26

n_stream = dace.symbol('n_stream')


@dace.program
def _triad(a: dace.float64[n_stream], b: dace.float64[n_stream], c: dace.float64[n_stream], s: dace.float64):
    for i in dace.map[0:n_stream]:
        a[i] = b[i] + s * c[i]


_COMPILED: Dict[str, Any] = {}


def _compiled_triad():
    if 'sdfg' not in _COMPILED:
        sdfg = mark_ours(_triad.to_sdfg())  # (built with our flags: no flush-to-zero for the peers after it)
        _COMPILED['sdfg'] = sdfg.compile()
    return _COMPILED['sdfg']


def stream_triad(elements: int = DEFAULT_ELEMENTS, repeat: int = 10) -> Dict[str, Any]:
    """Measure the triad; returns ``{"GBps", "method", "elements", "array_MiB", "best_s"}``.

    ``GBps`` is 1e9 bytes per second (as STREAM prints)."""
    if elements < 1 or repeat < 1:
        raise ValueError(f'stream_triad: elements={elements}, repeat={repeat}: both must be positive')
    a = np.zeros(elements)
    b = np.full(elements, 1.0)
    c = np.full(elements, 2.0)
    s = 3.0
    try:
        triad = _compiled_triad()
        method, bytes_per_elem = 'dace-openmp', 24

        def once():
            triad(a=a, b=b, c=c, s=s, n_stream=elements)
    except Exception:  # no compiler: fall back to NumPy, and say so
        method, bytes_per_elem = 'numpy-2-pass', 40

        def once():
            np.multiply(c, s, out=a)
            np.add(a, b, out=a)

    once()
    if not np.allclose(a[:: max(1, elements // 1000)], 7.0):
        raise RuntimeError('stream_triad: the triad kernel computed a wrong result')
    best = float('inf')
    for _ in range(repeat):
        t0 = time.perf_counter()
        once()
        best = min(best, time.perf_counter() - t0)
    return {
        'GBps': bytes_per_elem * elements / best / 1e9,
        'method': method,
        'elements': elements,
        'array_MiB': elements * 8 / 2**20,
        'best_s': best,
    }
