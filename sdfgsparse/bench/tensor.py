"""``sdfgsparse bench --suite tensor``: contractions of sparse 3-D tensors (issue 62).

Generated tensors (nothing downloaded): the issue's 20000 x 4000 x 3000 tensor of 480,000
entries, power-law along the first mode (weights ``(rank + 1) ** -1.2``, labels shuffled;
the other modes uniform), and, without ``--quick``, one of NELL-2's shape (12092 x 9184 x
28818, FROSTT; 1,000,000 entries, power-law along the first two modes). On each:

* **MTTKRP** ``ijk,jr,kr->ir`` (rank R = 16): ours on the tensor in CSF and in COO, against
  pydata/sparse's ``einsum`` (its COO; where installed) and NumPy's gather-scatter
  (``np.add.at(out, i, v[:, None] * B[j] * C[k])``);
* **TTV** ``ijk,k->ij``: ours (a sparse result on the tensor's (i, j) fibers) in CSF and COO,
  against pydata's ``einsum`` (a sparse result too);
* **T+U**, **T*U** of the tensor and a second one of the same kind (another seed), and
  **permute**, ``T.transpose((2, 0, 1))`` returned: ours (coordinate lists, unsorted) against
  pydata's ``+``, ``*`` and ``transpose`` (sorted COO, its canonical form).

TTM (``ijk,kr->ijr``) is left out: our result is dense, and I x J x R of these tensors does not
fit in memory. Every program is built once; results are checked against NumPy's (MTTKRP) or
pydata's / scipy's (TTV); calls are interleaved (:mod:`.timing`), medians reported with the
storage checks on, as a user calls.
"""
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import scipy.sparse as sp

from sdfgsparse.bench.shape import load_pydata
from sdfgsparse.bench.timing import interleaved

__all__ = ['TensorResult', 'run_tensor', 'format_tensor', 'power_law_tensor', 'TENSORS', 'RANK']

RANK = 16
#: name -> (shape, entries, modes drawn from the power law)
TENSORS = {
    'powerlaw-20000x4000x3000': ((20000, 4000, 3000), 480_000, (0, )),
    'nell2-like': ((12092, 9184, 28818), 1_000_000, (0, 1)),
}
QUICK = ('powerlaw-20000x4000x3000', )


@dataclass
class TensorResult:
    kernel: str
    tensor: str
    seconds: Dict[str, float] = field(default_factory=dict)  # system -> median
    errors: Dict[str, str] = field(default_factory=dict)
    correct: Optional[bool] = None

    def ratio(self, peer: str, ours: str = 'ours-csf') -> Optional[float]:
        """``peer``'s time over ours (> 1: ours faster)."""
        a, b = self.seconds.get(ours), self.seconds.get(peer)
        return b / a if a and b else None


def power_law_tensor(shape: Tuple[int, ...], entries: int, skewed=(0, ), alpha: float = 1.2,
                     seed: int = 0) -> sp.coo_array:
    """A scipy N-D COO tensor of ``entries`` distinct coordinates (canonical order), the modes
    in ``skewed`` drawn with weights ``(rank + 1) ** -alpha`` (labels shuffled), the others
    uniformly; values uniform in [0, 1)."""
    rng = np.random.default_rng(seed)
    flat = np.zeros(0, dtype=np.int64)
    draw = int(entries * 1.2) + 16
    while flat.size < entries:
        coords = []
        for d, n in enumerate(shape):
            if d in skewed:
                w = (np.arange(n) + 1.0) ** -alpha
                coords.append(rng.permutation(n)[rng.choice(n, size=draw, p=w / w.sum())])
            else:
                coords.append(rng.integers(0, n, draw))
        flat = np.unique(np.concatenate([flat, np.ravel_multi_index(coords, shape)]))
        draw *= 2
    flat = np.sort(rng.choice(flat, size=entries, replace=False))
    coords = tuple(np.ascontiguousarray(c) for c in np.unravel_index(flat, shape))  # (views of stride 3 otherwise)
    return sp.coo_array((rng.random(entries), coords), shape=shape)


def _programs():
    import dace

    import sdfgsparse as ss
    I, J, K, R = (dace.symbol(s) for s in ('tI', 'tJ', 'tK', 'tR'))

    def mttkrp_csf(T: ss.CSF[dace.float64, I, J, K, dace.int64], B: dace.float64[J, R], C: dace.float64[K, R]):
        return np.einsum('ijk,jr,kr->ir', T, B, C)

    def mttkrp_coo(T: ss.COO[dace.float64, I, J, K, dace.int64], B: dace.float64[J, R], C: dace.float64[K, R]):
        return np.einsum('ijk,jr,kr->ir', T, B, C)

    def ttv_csf(T: ss.CSF[dace.float64, I, J, K, dace.int64], v: dace.float64[K]):
        return np.einsum('ijk,k->ij', T, v)

    def ttv_coo(T: ss.COO[dace.float64, I, J, K, dace.int64], v: dace.float64[K]):
        return np.einsum('ijk,k->ij', T, v)

    def add_csf(T: ss.CSF[dace.float64, I, J, K, dace.int64], U: ss.CSF[dace.float64, I, J, K, dace.int64]):
        return T + U

    def add_coo(T: ss.COO[dace.float64, I, J, K, dace.int64], U: ss.COO[dace.float64, I, J, K, dace.int64]):
        return T + U

    def mul_csf(T: ss.CSF[dace.float64, I, J, K, dace.int64], U: ss.CSF[dace.float64, I, J, K, dace.int64]):
        return T * U

    def mul_coo(T: ss.COO[dace.float64, I, J, K, dace.int64], U: ss.COO[dace.float64, I, J, K, dace.int64]):
        return T * U

    def permute_csf(T: ss.CSF[dace.float64, I, J, K, dace.int64]):
        return T.transpose((2, 0, 1))

    def permute_coo(T: ss.COO[dace.float64, I, J, K, dace.int64]):
        return T.transpose((2, 0, 1))

    return {f.__name__: dace.program(f) for f in (mttkrp_csf, mttkrp_coo, ttv_csf, ttv_coo, add_csf, add_coo, mul_csf,
                                                   mul_coo, permute_csf, permute_coo)}


def _entries(x, shape) -> Tuple[np.ndarray, np.ndarray]:
    """A sparse tensor result (ours, pydata's) as (sorted linear keys, values): duplicates
    summed, zeros dropped."""
    if hasattr(x, 'to_coo_arrays'):
        *coords, vals = x.to_coo_arrays()
    else:  # pydata COO
        coords, vals = list(x.coords), np.asarray(x.data)
    keys = np.ravel_multi_index([np.asarray(c, dtype=np.int64) for c in coords], shape) if len(vals) else \
        np.zeros(0, np.int64)
    u, inv = np.unique(keys, return_inverse=True)
    sums = np.zeros(u.size)
    np.add.at(sums, inv, vals)
    keep = sums != 0
    return u[keep], sums[keep]


def _same_entries(got, want, shape) -> bool:
    (kg, vg), (kw, vw) = _entries(got, shape), want
    return kg.size == kw.size and bool(np.all(kg == kw)) and bool(np.allclose(vg, vw, rtol=1e-12, atol=1e-12))


def _matrix(x) -> sp.csr_array:
    """A 2-D sparse result (ours, scipy's or pydata's) as scipy CSR, duplicates summed."""
    if hasattr(x, 'to_scipy'):
        x = x.to_scipy('coo')
    elif hasattr(x, 'tocsr') and not sp.issparse(x):  # pydata
        x = x.tocsr()
    return sp.csr_array(x)


def run_tensor(quick: bool = False, repeat: int = 5, log: Callable[[str], None] = print,
               tensors: Optional[Dict[str, tuple]] = None) -> List[TensorResult]:
    """MTTKRP, TTV, T+U, T*U and permute on each generated tensor (:data:`QUICK` with ``quick``;
    ``tensors``: others, as :data:`TENSORS`)."""
    import sdfgsparse as ss
    progs = _programs()
    pydata = load_pydata()
    results = []
    rng = np.random.default_rng(1)
    chosen = tensors or {n: TENSORS[n] for n in (QUICK if quick else TENSORS)}
    for name, (shape, entries, skewed) in chosen.items():
        t0 = time.perf_counter()
        T = power_law_tensor(shape, entries, skewed)
        coo = T  # (scipy's N-D COO, int64 coordinates: zero-copy)
        csf = ss.convert(T, ss.CSF, index_dtype=np.int64)
        P = pydata.COO(np.array(T.coords), T.data, shape=shape) if pydata is not None else None
        log(f'{name}: {entries} entries generated and converted in {time.perf_counter() - t0:.1f} s')
        B, C, v = rng.random((shape[1], RANK)), rng.random((shape[2], RANK)), rng.random(shape[2])
        i, j, k = (c.astype(np.intp) for c in T.coords)
        T2 = power_law_tensor(shape, entries, skewed, seed=1)
        csf2 = ss.convert(T2, ss.CSF, index_dtype=np.int64)
        P2 = pydata.COO(np.array(T2.coords), T2.data, shape=shape) if pydata is not None else None
        k1, k2 = (np.ravel_multi_index([c.astype(np.int64) for c in X.coords], shape) for X in (T, T2))
        both, at1, at2 = np.intersect1d(k1, k2, return_indices=True)
        union = np.union1d(k1, k2)
        usum = np.zeros(union.size)
        np.add.at(usum, np.searchsorted(union, k1), T.data)
        np.add.at(usum, np.searchsorted(union, k2), T2.data)
        perm = (2, 0, 1)
        pshape = tuple(shape[d] for d in perm)
        pkeys = np.ravel_multi_index([T.coords[d].astype(np.int64) for d in perm], pshape)
        porder = np.argsort(pkeys)
        expected = {'T+U': (union, usum), 'T*U': (both, T.data[at1] * T2.data[at2]),
                    'permute': (pkeys[porder], T.data[porder])}

        def gather_scatter():
            out = np.zeros((shape[0], RANK))
            np.add.at(out, i, T.data[:, None] * B[j] * C[k])
            return out

        kernels = {
            'MTTKRP': ({'ours-csf': lambda: progs['mttkrp_csf'](T=csf, B=B, C=C),
                        'ours-coo': lambda: progs['mttkrp_coo'](T=coo, B=B, C=C),
                        'pydata': (lambda: pydata.einsum('ijk,jr,kr->ir', P, B, C)) if P is not None else None,
                        'numpy': gather_scatter}, 'numpy'),
            'TTV': ({'ours-csf': lambda: progs['ttv_csf'](T=csf, v=v),
                     'ours-coo': lambda: progs['ttv_coo'](T=coo, v=v),
                     'pydata': (lambda: pydata.einsum('ijk,k->ij', P, v)) if P is not None else None}, None),
            'T+U': ({'ours-csf': lambda: progs['add_csf'](T=csf, U=csf2),
                     'ours-coo': lambda: progs['add_coo'](T=coo, U=T2),
                     'pydata': (lambda: P + P2) if P is not None else None}, None),
            'T*U': ({'ours-csf': lambda: progs['mul_csf'](T=csf, U=csf2),
                     'ours-coo': lambda: progs['mul_coo'](T=coo, U=T2),
                     'pydata': (lambda: P * P2) if P is not None else None}, None),
            'permute': ({'ours-csf': lambda: progs['permute_csf'](T=csf),
                         'ours-coo': lambda: progs['permute_coo'](T=coo),
                         'pydata': (lambda: P.transpose(perm)) if P is not None else None}, None),
        }
        for kernel, (calls, reference) in kernels.items():
            calls = {n: c for n, c in calls.items() if c is not None}
            res = TensorResult(kernel, name)
            try:
                if kernel == 'MTTKRP':
                    want = calls[reference]()
                    got = [calls[n]() for n in ('ours-csf', 'ours-coo')]
                    res.correct = all(np.allclose(g, want, rtol=1e-10, atol=1e-10) for g in got)
                elif kernel in expected:
                    res.correct = all(_same_entries(calls[n](), expected[kernel], pshape if kernel == 'permute' else
                                                    shape) for n in ('ours-csf', 'ours-coo'))
                else:
                    want = sp.csr_array(sp.coo_array((T.data * v[k], (i, j)), shape=shape[:2]))
                    got = [_matrix(calls[n]()) for n in ('ours-csf', 'ours-coo')]
                    res.correct = all(np.abs((g - want).data).max(initial=0) <= 1e-10 for g in got)
            except Exception as exc:  # reported, the run goes on
                res.errors['ours'] = f'{type(exc).__name__}: {exc}'.splitlines()[0][:200]
                res.correct = False
            slow = {n: c for n, c in calls.items() if n == 'pydata' and kernel == 'MTTKRP'}
            stats = interleaved({n: c for n, c in calls.items() if n not in slow}, repeat)
            stats.update(interleaved(slow, max(1, min(repeat, 3))))  # (pydata's MTTKRP: seconds per call)
            for n, s in stats.items():
                if s.error:
                    res.errors[n] = s.error
                else:
                    res.seconds[n] = s.median
            results.append(res)
            log(f'{kernel} on {name}: ' + ', '.join(f'{n} {t * 1e3:.2f} ms' for n, t in res.seconds.items()))
    return results


def format_tensor(results: List[TensorResult]) -> str:
    """The table: per kernel and tensor, medians (ms) and the peers' time over ours (CSF)."""
    lines = [f'{"kernel":7} {"tensor":26} {"ours CSF":>9} {"ours COO":>9} {"pydata":>10} {"numpy":>9} '
             f'{"pydata/ours":>11} {"numpy/ours":>10} ok']
    for r in results:

        def ms(n):
            t = r.seconds.get(n)
            return f'{t * 1e3:.2f}' if t else '-'

        def ratio(n):
            v = r.ratio(n)
            return f'{v:.0f}x' if v and v >= 10 else f'{v:.2f}x' if v else '-'

        lines.append(f'{r.kernel:7} {r.tensor[:26]:26} {ms("ours-csf"):>9} {ms("ours-coo"):>9} {ms("pydata"):>10} '
                     f'{ms("numpy"):>9} {ratio("pydata"):>11} {ratio("numpy"):>10} {"yes" if r.correct else "NO"}')
        for n, e in r.errors.items():
            lines.append(f'    {n}: {e}')
    if not any('pydata' in r.seconds for r in results):
        lines.append('(pydata/sparse not installed: pip install sparse, or the [bench] extra)')
    return '\n'.join(lines)
