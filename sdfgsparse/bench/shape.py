"""``sdfgsparse bench --suite shape``: shape operators on sparse matrices (issue 37).

Slices, concatenation and reshape of 2-D matrices (N-D tensors are not built yet). On each
matrix of the set (CSR, float64), with bounds that cut about a quarter off each end, and
reshapes of its first ``2 * (N // 2)`` columns into ``2 M x N // 2`` (each row in two):

* **alone, materialised** — ``A[a:b]`` (rows), ``A[:, c:d]`` (columns; scipy slices a
  CSR's columns through a conversion), ``A[::2]``, ``np.vstack((A, A))`` and
  ``np.hstack((A, A))`` (scipy concatenates CSR columns through COO): our program returns
  the result as a canonical CSR; ``A.reshape((2 * M, N // 2))`` too (scipy reshapes
  through COO and gives COO; its time includes the conversion to CSR); peers scipy
  (``A[a:b]``, ``sp.vstack(..., format='csr')``) and pydata/sparse (GCXS, where installed);
* **fused** — ``A[a:b] @ x``, ``A[:, c:d] @ X`` (16 columns), ``A[a:b].sum(axis=1)``,
  ``np.vstack((A, A)) @ x``, ``np.hstack((A, A)) @ x``, ``A.reshape((2 * M, N // 2)) @ x``
  and its ``.sum(axis=1)``: our program iterates the view
  (no copy), against the same program with the view materialised first
  (``ss.convert(A[a:b], ss.CSR) @ x``) and against scipy (which slices or stacks, then
  multiplies).

Each program is built once (the bounds are symbols) and its result checked against
scipy's; calls are interleaved (:mod:`.timing`), medians reported. After every timing,
each system's peak memory is measured on one more call (:func:`peak_bytes`: Linux's
resident high-water mark, reset before the call, above the resident size before it, so the
inputs, resident already, do not count), with glibc told to map every block of 64 KiB or
more afresh (its default reuses freed blocks, which then never show), beside the size of
the result.
"""
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

import numpy as np
import scipy.sparse as sp

from sdfgsparse.bench.timing import interleaved

__all__ = ['ShapeResult', 'run_shape', 'format_shape', 'TASKS']

#: task -> what it computes (NumPy spelling)
TASKS = {
    'rows': 'A[a:b]',
    'cols': 'A[:, c:d]',
    'rows-step': 'A[::2]',
    'rows@x': 'A[a:b] @ x',
    'cols@X': 'A[:, c:d] @ X',
    'rows.sum': 'A[a:b].sum(axis=1)',
    'vstack': 'np.vstack((A, A))',
    'hstack': 'np.hstack((A, A))',
    'vstack@x': 'np.vstack((A, A)) @ x',
    'hstack@x': 'np.hstack((A, A)) @ x',
    'reshape': 'A.reshape((2M, N/2))',
    'reshape@x': 'A.reshape((2M, N/2)) @ x',
    'reshape.sum': 'A.reshape((2M, N/2)).sum(1)',
}
K = 16


@dataclass
class ShapeResult:
    task: str
    matrix: str
    seconds: Dict[str, float] = field(default_factory=dict)  # system -> median
    errors: Dict[str, str] = field(default_factory=dict)
    correct: Optional[bool] = None
    peak: Dict[str, Optional[int]] = field(default_factory=dict)  # system -> bytes above the inputs (peak_bytes)
    out_bytes: Optional[int] = None  # our result's size

    def ratio(self, peer: str) -> Optional[float]:
        """``peer``'s time over ours (> 1: ours faster)."""
        ours, other = self.seconds.get('sdfgsparse'), self.seconds.get(peer)
        return other / ours if ours and other else None


def _programs():
    import dace

    import sdfgsparse as ss
    M, N, Kd = (dace.symbol(s) for s in ('M', 'N', 'Kd'))
    a, b, c, d = (dace.symbol(s) for s in ('sa', 'sb', 'sc', 'sd'))

    def rows(A: ss.CSR[dace.float64, M, N]):
        return A[a:b]

    def cols(A: ss.CSR[dace.float64, M, N]):
        return A[:, c:d]

    def rows_step(A: ss.CSR[dace.float64, M, N]):
        return A[::2]

    def rows_x(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
        return A[a:b] @ x

    def rows_x_copy(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
        return ss.convert(A[a:b], ss.CSR) @ x

    def cols_X(A: ss.CSR[dace.float64, M, N], X: dace.float64[Kd, 16]):
        return A[:, c:d] @ X

    def cols_X_copy(A: ss.CSR[dace.float64, M, N], X: dace.float64[Kd, 16]):
        return ss.convert(A[:, c:d], ss.CSR) @ X

    def rows_sum(A: ss.CSR[dace.float64, M, N]):
        return A[a:b].sum(axis=1)

    def rows_sum_copy(A: ss.CSR[dace.float64, M, N]):
        return ss.convert(A[a:b], ss.CSR).sum(axis=1)

    def vstack(A: ss.CSR[dace.float64, M, N], B: ss.CSR[dace.float64, M, N]):
        return np.vstack((A, B))

    def hstack(A: ss.CSR[dace.float64, M, N], B: ss.CSR[dace.float64, M, N]):
        return np.hstack((A, B))

    def vstack_x(A: ss.CSR[dace.float64, M, N], B: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
        return np.vstack((A, B)) @ x

    def vstack_x_copy(A: ss.CSR[dace.float64, M, N], B: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
        return ss.convert(np.vstack((A, B)), ss.CSR) @ x

    def hstack_x(A: ss.CSR[dace.float64, M, N], B: ss.CSR[dace.float64, M, N], x: dace.float64[2 * N]):
        return np.hstack((A, B)) @ x

    def hstack_x_copy(A: ss.CSR[dace.float64, M, N], B: ss.CSR[dace.float64, M, N], x: dace.float64[2 * N]):
        return ss.convert(np.hstack((A, B)), ss.CSR) @ x

    def reshape(A: ss.CSR[dace.float64, M, N]):
        return A.reshape((2 * M, N // 2))

    def reshape_x(A: ss.CSR[dace.float64, M, N], x: dace.float64[N // 2]):
        return A.reshape((2 * M, N // 2)) @ x

    def reshape_x_copy(A: ss.CSR[dace.float64, M, N], x: dace.float64[N // 2]):
        return ss.convert(A.reshape((2 * M, N // 2)), ss.CSR) @ x

    def reshape_sum(A: ss.CSR[dace.float64, M, N]):
        return A.reshape((2 * M, N // 2)).sum(axis=1)

    def reshape_sum_copy(A: ss.CSR[dace.float64, M, N]):
        return ss.convert(A.reshape((2 * M, N // 2)), ss.CSR).sum(axis=1)

    made = {}
    for f in (rows, cols, rows_step, rows_x, rows_x_copy, cols_X, cols_X_copy, rows_sum, rows_sum_copy, vstack, hstack,
              vstack_x, vstack_x_copy, hstack_x, hstack_x_copy, reshape, reshape_x, reshape_x_copy, reshape_sum,
              reshape_sum_copy):
        f.__name__ = f'shape_{f.__name__}'
        made[f.__name__[6:]] = dace.program(f)
    return made


def load_pydata():
    """pydata/sparse (the [bench] extra), or None where it is not installed."""
    try:
        import sparse
    except ImportError:
        return None
    return sparse


def _status_kib(key: str) -> int:
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith(key + ':'):
                return int(line.split()[1])
    raise OSError(f'no {key} in /proc/self/status')


def peak_bytes(fn: Callable[[], object]) -> Optional[int]:
    """Resident memory at the peak of one call of ``fn`` above the resident size before it
    (Linux: the high-water mark ``VmHWM``, reset by writing 5 to ``/proc/self/clear_refs``);
    None where the system does not offer that. Memory the allocator already holds and
    reuses does not show: small temporaries may read as 0, a large one (an ``mmap``-ed
    block) shows in full."""
    try:
        with open('/proc/self/clear_refs', 'w') as f:
            f.write('5')
        before = _status_kib('VmRSS')
        result = fn()
        peak = _status_kib('VmHWM')
    except OSError:
        return None
    del result
    return max(0, peak - before) * 1024


def _fresh_large_blocks() -> bool:
    """Make glibc's malloc map each block of 64 KiB or more afresh and unmap it when freed
    (``mallopt(M_MMAP_THRESHOLD)``; the default raises the threshold as blocks are freed and
    keeps them resident, so a repeated call's temporaries cost no new resident memory).
    False where there is no glibc. It slows allocation: only after the timings."""
    import ctypes
    import ctypes.util
    try:
        libc = ctypes.CDLL(ctypes.util.find_library('c') or 'libc.so.6')
        M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
        return bool(libc.mallopt(M_MMAP_THRESHOLD, 64 * 1024)) and bool(libc.mallopt(M_TRIM_THRESHOLD, 64 * 1024))
    except (OSError, AttributeError):
        return False


def _nbytes(value) -> Optional[int]:
    if sp.issparse(value):
        value = sp.csr_array(value)
        return int(value.data.nbytes + value.indices.nbytes + value.indptr.nbytes)
    try:
        return int(np.asarray(value).nbytes)
    except Exception:  # not an array: no size
        return None


def _same(ours, ref, scale: float) -> bool:
    """Equal up to rounding: ``scale`` bounds the sum of the magnitudes behind one result
    entry (bcsstk16's row sums cancel values of 2e9 down to 1e-5)."""
    if sp.issparse(ref):
        ours = sp.csr_array(ours)
        return bool(ours.shape == ref.shape and (abs(ours - ref).max() <= 1e-12 * scale if ref.nnz else
                                                 ours.count_nonzero() == 0))
    ours, ref = np.asarray(ours).ravel(), np.asarray(ref).ravel()
    return bool(ours.shape == ref.shape and np.allclose(ours, ref, rtol=1e-9, atol=1e-12 * scale))  # (JSON)


def _tasks(src, progs, pydata, rng):
    """Every task on one matrix: ``{task: ({system: call}, reference)}`` and the scale of
    its results (for :func:`_same`). The calls close over this call's locals, one matrix
    each (they run again after the whole suite, for the peak memory)."""
    A = sp.csr_array(src.load(), dtype=np.float64)
    A.sort_indices()
    m, n = A.shape
    lo, hi, clo, chi = m // 4, m - m // 4, n // 4, n - n // 4
    x = rng.standard_normal(n)
    x2 = rng.standard_normal(2 * n)
    E = sp.csr_array(A[:, :2 * (n // 2)])  # an even number of columns, to reshape
    E.sort_indices()
    xh = rng.standard_normal(n // 2)
    GE = pydata.GCXS.from_scipy_sparse(E) if pydata is not None else None
    shape2 = (2 * m, n // 2)
    X = rng.standard_normal((chi - clo, K))
    G = pydata.GCXS.from_scipy_sparse(A) if pydata is not None else None
    bounds = dict(sa=lo, sb=hi, sc=clo, sd=chi)
    longest = int(np.diff(A.indptr).max()) if A.nnz else 0
    scale = max(1.0, float(abs(A).max()) * longest * max(1.0, float(np.abs(X).max())) if A.nnz else 1.0)
    tasks = {
        'rows': ({'sdfgsparse': lambda: progs['rows'](A, **bounds), 'scipy': lambda: A[lo:hi],
                  'pydata': (lambda: G[lo:hi]) if G is not None else None}, lambda: A[lo:hi]),
        'cols': ({'sdfgsparse': lambda: progs['cols'](A, **bounds), 'scipy': lambda: A[:, clo:chi],
                  'pydata': (lambda: G[:, clo:chi]) if G is not None else None}, lambda: A[:, clo:chi]),
        'rows-step': ({'sdfgsparse': lambda: progs['rows_step'](A), 'scipy': lambda: A[::2],
                       'pydata': (lambda: G[::2]) if G is not None else None}, lambda: A[::2]),
        'rows@x': ({'sdfgsparse': lambda: progs['rows_x'](A, x, **bounds),
                    'materialised': lambda: progs['rows_x_copy'](A, x, **bounds),
                    'scipy': lambda: A[lo:hi] @ x}, lambda: A[lo:hi] @ x),
        'cols@X': ({'sdfgsparse': lambda: progs['cols_X'](A, X, **bounds),
                    'materialised': lambda: progs['cols_X_copy'](A, X, **bounds),
                    'scipy': lambda: A[:, clo:chi] @ X}, lambda: A[:, clo:chi] @ X),
        'rows.sum': ({'sdfgsparse': lambda: progs['rows_sum'](A, **bounds),
                      'materialised': lambda: progs['rows_sum_copy'](A, **bounds),
                      'scipy': lambda: A[lo:hi].sum(axis=1)}, lambda: A[lo:hi].sum(axis=1)),
        'vstack': ({'sdfgsparse': lambda: progs['vstack'](A, A), 'scipy': lambda: sp.vstack((A, A), format='csr'),
                    'pydata': (lambda: pydata.concatenate([G, G], axis=0)) if G is not None else None},
                   lambda: sp.vstack((A, A), format='csr')),
        'hstack': ({'sdfgsparse': lambda: progs['hstack'](A, A), 'scipy': lambda: sp.hstack((A, A), format='csr'),
                    'pydata': (lambda: pydata.concatenate([G, G], axis=1)) if G is not None else None},
                   lambda: sp.hstack((A, A), format='csr')),
        'vstack@x': ({'sdfgsparse': lambda: progs['vstack_x'](A, A, x),
                      'materialised': lambda: progs['vstack_x_copy'](A, A, x),
                      'scipy': lambda: sp.vstack((A, A), format='csr') @ x}, lambda: np.concatenate((A @ x, A @ x))),
        'hstack@x': ({'sdfgsparse': lambda: progs['hstack_x'](A, A, x2),
                      'materialised': lambda: progs['hstack_x_copy'](A, A, x2),
                      'scipy': lambda: sp.hstack((A, A), format='csr') @ x2}, lambda: A @ x2[:n] + A @ x2[n:]),
        'reshape': ({'sdfgsparse': lambda: progs['reshape'](E), 'scipy': lambda: E.reshape(shape2).tocsr(),
                     'pydata': (lambda: GE.reshape(shape2)) if GE is not None else None},
                    lambda: E.reshape(shape2).tocsr()),
        'reshape@x': ({'sdfgsparse': lambda: progs['reshape_x'](E, xh),
                       'materialised': lambda: progs['reshape_x_copy'](E, xh),
                       'scipy': lambda: E.reshape(shape2).tocsr() @ xh}, lambda: E.reshape(shape2).tocsr() @ xh),
        'reshape.sum': ({'sdfgsparse': lambda: progs['reshape_sum'](E),
                         'materialised': lambda: progs['reshape_sum_copy'](E),
                         'scipy': lambda: E.reshape(shape2).tocsr().sum(axis=1)},
                        lambda: E.reshape(shape2).tocsr().sum(axis=1)),
    }
    return tasks, scale


def run_shape(matrices, repeat: int = 20, log: Callable[[str], None] = print) -> List[ShapeResult]:
    """Run every task on every matrix (:class:`~sdfgsparse.bench.matrices.MatrixSource`)."""
    progs = _programs()
    pydata = load_pydata()
    results = []
    measured = []  # (result, its calls): peak memory once every timing is done
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    for src in matrices:
        tasks, scale = _tasks(src, progs, pydata, rng)
        for task, (calls, reference) in tasks.items():
            calls = {k: v for k, v in calls.items() if v is not None}
            res = ShapeResult(task, src.name)
            try:
                ours = calls['sdfgsparse']()
                res.out_bytes = _nbytes(ours)
                res.correct = _same(ours, reference(), scale)
                del ours
            except Exception as exc:  # reported, the run goes on
                res.errors['sdfgsparse'] = f'{type(exc).__name__}: {exc}'.splitlines()[0][:200]
                res.correct = False
            stats = interleaved(calls, repeat)
            for name, s in stats.items():
                if s.error:
                    res.errors[name] = s.error
                else:
                    res.seconds[name] = s.median
            measured.append((res, calls))
            results.append(res)
            log(f'{task} on {src.name}: ' + ', '.join(f'{k} {v * 1e3:.3f} ms' for k, v in res.seconds.items()))
    fresh = _fresh_large_blocks()
    for res, calls in measured:
        for name in res.seconds:
            res.peak[name] = peak_bytes(calls[name]) if fresh else None
    log(f'shape suite: {time.perf_counter() - t0:.1f} s')
    return results


def _geomean(values) -> Optional[float]:
    values = [v for v in values if v]
    return float(np.exp(np.mean(np.log(values)))) if values else None


def format_shape(results: List[ShapeResult]) -> str:
    """The table: per task and matrix, medians and ratios; geometric means per task."""
    lines = [f'{"task":10} {"matrix":26} {"ours ms":>9} {"scipy/ours":>10} {"mat./ours":>9} {"pydata/ours":>11} ok '
             f'{"peak KiB ours/mat./out":>23}']
    for r in results:

        def ratio(p):
            v = r.ratio(p)
            return f'{v:.2f}x' if v else '-'

        def kib(v):
            return '-' if v is None else f'{v / 1024:.0f}'

        ours = r.seconds.get('sdfgsparse')
        peak = f'{kib(r.peak.get("sdfgsparse"))}/{kib(r.peak.get("materialised"))}/{kib(r.out_bytes)}'
        lines.append(f'{r.task:10} {r.matrix[:26]:26} {ours * 1e3 if ours else float("nan"):9.3f} {ratio("scipy"):>10} '
                     f'{ratio("materialised"):>9} {ratio("pydata"):>11} {"yes" if r.correct else "NO ":3} {peak:>23}')
    lines.append('geomean (ours faster above 1):')
    for task in TASKS:
        rs = [r for r in results if r.task == task]
        parts = []
        for peer in ('scipy', 'materialised', 'pydata'):
            g = _geomean(r.ratio(peer) for r in rs)
            if g:
                parts.append(f'{peer} {g:.2f}x')
        lines.append(f'  {task:10} {TASKS[task]:22} ' + ', '.join(parts))
    fused = [r for r in results if 'materialised' in r.seconds and r.out_bytes and r.peak.get('sdfgsparse') is not None]
    if fused:
        worst = max(fused, key=lambda r: r.peak['sdfgsparse'] - r.out_bytes)
        over = worst.peak['sdfgsparse'] - worst.out_bytes
        lines.append(f'peak memory of a fused call above its inputs: at most its output + {over / 1024:.0f} KiB '
                     f'({worst.task} on {worst.matrix})')
    return '\n'.join(lines)
