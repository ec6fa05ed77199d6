"""The benchmarked kernels: inputs, scipy reference, work and compulsory traffic.

=========  ==============================  =======================  =================
kernel     computes                        inputs (seeded)          result
=========  ==============================  =======================  =================
spmv       ``A @ x``                       x (N,)                   dense (M,)
spmm:K     ``A @ B``                       B (N, K); K = 16/64/256  dense (M, K)
sddmm:K    ``A ∘ (X @ Y)`` on A's pattern  X (M, K), Y (K, N)       CSR, A's pattern
spgemm     ``A @ A``                       (square A)               CSR
add        ``A + A.T``                     (square A)               CSR
gcn:K      ``relu(A @ (X @ W))``, float32  X (N, K), W (K, K)       dense (N, K)
atb:K      ``A.T @ B``                     B (M, K)                 dense (N, K)
=========  ==============================  =======================  =================

``spmm`` alone means ``spmm:64``; ``sddmm``, ``gcn`` and ``atb`` default to K = 64.

Composed kernels (:data:`COMPOSED`: several operations in one program, what ``ss.optimize``
works on; ``--optimize`` runs ``gcn`` as ``gcn+bias``). They are run only when asked for:

============  ==================================  ==============================  ===============
kernel        computes                            inputs (seeded)                 result
============  ==================================  ==============================  ===============
gcn+bias:K    ``relu(A @ (X @ W) + b)``, float32  X (N, K), W (K, K), b (K,)      dense (N, K)
attention:K   ``softmax(S ∘ (Q @ K.T)) @ V`` over  S = A's pattern (values 1),     dense (M, K)
              the stored entries of each row      Q (M, K) / sqrt(K), K (N, K),
                                                  V (N, K)
cg            one conjugate-gradient iteration    A -> SPD (``spd``)              (x, r, p, rs)
              (``samples/cg.py``)                 x, r = b - A x, p = r, r·r
============  ==================================  ==============================  ===============

``cg`` runs on the symmetric positive definite ``S / ||S||_inf + 1.1 I``, ``S = A + A.T``
(as ``samples/cg.py``; at most 2·nnz + N entries); the reported nnz is that matrix's.

Work and traffic, used for GFLOP/s and effective GB/s:

- ``flops``: 2 per multiply-add (spmv 2·nnz, spmm/sddmm/atb 2·nnz·K, spgemm 2·(number of
  products a_ik·a_kj), gcn 2·N·K·K + 2·nnz·K); ``add`` counts one per stored input entry.
- ``bytes``: the compulsory traffic of the kernel — every distinct input array read once
  and the result written once (CSR: values, indices and row pointers), no write-allocate,
  intermediates (gcn's X @ W) not counted. A matrix used twice (``A @ A``, ``A + A.T``)
  is counted once. This is what a perfect cache would leave; a kernel whose working set
  exceeds the cache moves more.
- composed kernels: ``gcn+bias`` as gcn plus N·K (the bias additions; max is not counted,
  as in gcn); ``attention`` 4·nnz·K (SDDMM and SpMM, 2 each per entry and column) plus
  4·nnz for the softmax (subtract the row maximum, exp, sum, divide: one each per entry);
  ``cg`` 2·nnz + 10·N (SpMV; the dots p·Ap and r·r, the updates of x, r and p: 2·N each).
  Their bytes follow the same rule: attention reads S (with its values), Q, K, V and
  writes the result; cg reads A, x, r, p and writes x, r, p (its scalars are 8 bytes).
"""
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import scipy.sparse as sp

from sdfgsparse.bench.errors import KernelSpecError

__all__ = [
    'Kernel', 'KERNELS', 'COMPOSED', 'ALL_KERNELS', 'DEFAULT_FULL', 'DEFAULT_QUICK', 'DEFAULT_OPTIMIZE',
    'parse_kernels', 'check_result', 'csr_bytes', 'sddmm_numpy', 'attention_numpy', 'cg_step_numpy', 'spd'
]

# name -> (default K or None, needs square A, value dtype)
KERNELS: Dict[str, Tuple[Optional[int], bool, Any]] = {
    'spmv': (None, False, np.float64),
    'spmm': (64, False, np.float64),
    'sddmm': (64, False, np.float64),
    'spgemm': (None, True, np.float64),
    'add': (None, True, np.float64),
    'gcn': (64, True, np.float32),
    'atb': (64, False, np.float64),
}
# The composed kernels (same layout). Kept apart from KERNELS, which every peer implements.
COMPOSED: Dict[str, Tuple[Optional[int], bool, Any]] = {
    'gcn+bias': (64, True, np.float32),
    'attention': (64, False, np.float64),
    'cg': (None, True, np.float64),
}
ALL_KERNELS: Dict[str, Tuple[Optional[int], bool, Any]] = {**KERNELS, **COMPOSED}
DEFAULT_FULL = 'spmv,spmm:16,spmm:64,spmm:256,sddmm,spgemm,add,gcn,atb'
DEFAULT_QUICK = 'spmv,spmm'
DEFAULT_OPTIMIZE = 'gcn,attention,atb,cg'  # with --optimize and no --kernels

# SpGEMM is skipped above this many products (result and expand-sort-compress buffers).
SPGEMM_MAX_PRODUCTS = 100_000_000


def csr_bytes(A) -> int:
    """Bytes of a CSR matrix's arrays (values, column indices, row pointers)."""
    return int(A.data.nbytes + A.indices.nbytes + A.indptr.nbytes)


def _products(A) -> int:
    """Number of scalar products of ``A @ A``: sum over k of nnz(column k) * nnz(row k)."""
    col_counts = np.bincount(A.indices, minlength=A.shape[1]).astype(np.int64)
    return int(col_counts[:A.shape[0]] @ np.diff(A.indptr).astype(np.int64))


@dataclass(frozen=True)
class Kernel:
    """One benchmarked kernel, with its dense width ``k`` where it has one."""
    name: str
    k: Optional[int] = None

    @property
    def label(self) -> str:
        """``spmv`` or ``spmm:64``: the kernel's name in tables and JSON."""
        return self.name if self.k is None else f'{self.name}:{self.k}'

    @property
    def dtype(self):
        return np.dtype(ALL_KERNELS[self.name][2])

    def skip_reason(self, A, mem_budget: int) -> Optional[str]:
        """Why this kernel is not run on ``A`` (None: it is run).

        Square-only kernels skip rectangular matrices; a kernel whose dense operands and
        result would exceed ``mem_budget`` bytes, or an SpGEMM with more than
        ``SPGEMM_MAX_PRODUCTS`` products, is skipped too."""
        m, n = A.shape
        if ALL_KERNELS[self.name][1] and m != n:
            return f'needs a square matrix, got {m}x{n}'
        item = self.dtype.itemsize
        k = self.k or 1
        dense = {
            'spmv': (m + n) * item,
            'spmm': (m + n) * k * item,
            'sddmm': (m + n) * k * item + csr_bytes(A),
            'gcn': 3 * n * k * item,
            'gcn+bias': 3 * n * k * item,
            'atb': (m + n) * k * item,
            'add': 2 * csr_bytes(A),
            'spgemm': 0,
            'attention': 2 * (m + n) * k * item + 2 * csr_bytes(A),
            'cg': 8 * n * item + 4 * csr_bytes(A),
        }[self.name]
        if self.name == 'spgemm':
            products = _products(A)
            if products > SPGEMM_MAX_PRODUCTS:
                return f'A @ A needs {products / 1e6:.0f}M products (limit {SPGEMM_MAX_PRODUCTS / 1e6:.0f}M)'
            dense = 16 * products
        if dense > mem_budget:
            return f'needs ~{dense / 2**30:.1f} GiB of operands and result (budget {mem_budget / 2**30:.1f} GiB)'
        return None

    def inputs(self, A, seed: int = 0) -> Dict[str, Any]:
        """The kernel's arguments: ``A`` (cast to the kernel's dtype) and seeded dense operands."""
        rng = np.random.default_rng(seed)
        m, n = A.shape
        dt = self.dtype
        A = A if A.dtype == dt else A.astype(dt)

        def dense(*shape):
            return rng.standard_normal(shape).astype(dt)

        if self.name == 'spmv':
            return {'A': A, 'x': dense(n)}
        if self.name == 'spmm':
            return {'A': A, 'B': dense(n, self.k)}
        if self.name == 'sddmm':
            return {'A': A, 'X': dense(m, self.k), 'Y': dense(self.k, n)}
        if self.name == 'gcn':
            return {'A': A, 'X': dense(n, self.k), 'W': dense(self.k, self.k) / np.sqrt(self.k).astype(dt)}
        if self.name == 'gcn+bias':
            return {'A': A, 'X': dense(n, self.k), 'W': dense(self.k, self.k) / np.sqrt(self.k).astype(dt),
                    'b': dense(self.k)}
        if self.name == 'atb':
            return {'A': A, 'B': dense(m, self.k)}
        if self.name == 'attention':
            S = sp.csr_array((np.ones(A.nnz, dt), A.indices, A.indptr), shape=A.shape)
            return {'A': S, 'Q': dense(m, self.k) / np.sqrt(self.k).astype(dt), 'K': dense(n, self.k),
                    'V': dense(n, self.k)}
        if self.name == 'cg':
            A = spd(A)
            x = dense(n)
            r = dense(n) - A @ x  # r = b - A x for a random b
            return {'A': A, 'x': x, 'r': r, 'p': r.copy(), 'rs_old': np.float64(r @ r)}
        return {'A': A}

    def reference(self, inp: Dict[str, Any]):
        """The result computed with scipy.sparse / NumPy (what every system is checked against)."""
        A = inp['A']
        if self.name == 'spmv':
            return A @ inp['x']
        if self.name == 'spmm':
            return A @ inp['B']
        if self.name == 'sddmm':
            return sddmm_numpy(A, inp['X'], inp['Y'])
        if self.name == 'spgemm':
            return sp.csr_array(A @ A)
        if self.name == 'add':
            return sp.csr_array(A + A.T)
        if self.name == 'gcn':
            return np.maximum(A @ (inp['X'] @ inp['W']), 0)
        if self.name == 'gcn+bias':
            return np.maximum(A @ (inp['X'] @ inp['W']) + inp['b'], 0)
        if self.name == 'atb':
            return A.T @ inp['B']
        if self.name == 'attention':
            return attention_numpy(A, inp['Q'], inp['K'], inp['V'])
        if self.name == 'cg':
            return cg_step_numpy(A, inp['x'], inp['r'], inp['p'], inp['rs_old'])
        raise KernelSpecError(f'--kernels: no reference for {self.name!r}')

    def flops(self, inp: Dict[str, Any]) -> float:
        """Floating-point operations of one call (see the module docstring)."""
        A = inp['A']
        k = self.k or 1
        if self.name == 'spgemm':
            return 2.0 * _products(A)
        if self.name == 'add':
            return 2.0 * A.nnz
        if self.name == 'gcn':
            return 2.0 * A.shape[0] * k * k + 2.0 * A.nnz * k
        if self.name == 'gcn+bias':
            return 2.0 * A.shape[0] * k * k + 2.0 * A.nnz * k + 1.0 * A.shape[0] * k
        if self.name == 'attention':
            return 4.0 * A.nnz * k + 4.0 * A.nnz
        if self.name == 'cg':
            return 2.0 * A.nnz + 10.0 * A.shape[0]
        return 2.0 * A.nnz * k

    def bytes(self, inp: Dict[str, Any], ref, cache_bytes: Optional[int] = None) -> float:
        """Compulsory bytes of one call: distinct inputs read once, result written once.
        SpMV with the last-level cache's size ``cache_bytes``: the bytes a perfect SpMV
        moves, x's reads counted by an LRU model of that cache over the column pattern
        (:func:`sdfgsparse.analysis.spmv_traffic.spmv_traffic`)."""
        if self.name == 'spmv' and cache_bytes:
            from sdfgsparse.analysis.spmv_traffic import spmv_traffic
            return float(spmv_traffic(inp['A'], cache_bytes).total)
        seen, total = set(), 0
        for v in inp.values():
            if id(v) not in seen:
                seen.add(id(v))
                total += csr_bytes(v) if sp.issparse(v) else np.asarray(v).nbytes
        outs = ref if isinstance(ref, tuple) else (ref, )
        return float(total + sum(csr_bytes(o) if sp.issparse(o) else np.asarray(o).nbytes for o in outs))


def sddmm_numpy(A, X, Y, chunk: int = 1 << 18) -> sp.csr_array:
    """``A ∘ (X @ Y)`` on A's pattern with NumPy, in chunks of ``chunk`` entries (so that
    the gathered rows of X and columns of Y stay small)."""
    rows = np.repeat(np.arange(A.shape[0], dtype=A.indices.dtype), np.diff(A.indptr))
    Yt = np.ascontiguousarray(Y.T)
    dots = np.empty(A.nnz, dtype=np.result_type(X, Y))
    for s in range(0, A.nnz, chunk):
        e = min(A.nnz, s + chunk)
        dots[s:e] = np.einsum('ij,ij->i', X[rows[s:e]], Yt[A.indices[s:e]])
    return sp.csr_array((A.data * dots, A.indices, A.indptr), shape=A.shape)


def spd(A) -> sp.csr_array:
    """A symmetric positive definite matrix with ``A``'s pattern, its transpose's and the
    diagonal: ``S / ||S||_inf + 1.1 I`` with ``S = A + A.T`` (eigenvalues in [0.1, 2.1]: the
    spectral radius is at most the largest absolute row sum), canonical CSR of ``A``'s dtype,
    int32 indices where they fit. The matrix of ``samples/cg.py``."""
    S = sp.csr_array(A + A.T)
    S = sp.csr_array(S / max(float(abs(S).sum(axis=1).max()) if S.nnz else 0.0, 1e-300) +
                     1.1 * sp.eye_array(A.shape[0], format='csr'), dtype=A.dtype)
    S.sum_duplicates()
    S.sort_indices()
    if max(S.shape + (S.nnz, )) < np.iinfo(np.int32).max:
        S.indices, S.indptr = S.indices.astype(np.int32), S.indptr.astype(np.int32)
    return S


def attention_numpy(S, Q, K, V, chunk: int = 1 << 18) -> np.ndarray:
    """``softmax(S ∘ (Q @ K.T)) @ V``, the softmax over the stored entries of each row
    (a row without entries gives zeros), with scipy and NumPy: SDDMM by chunked gathers
    (:func:`sddmm_numpy`), a segmented softmax (``np.maximum.reduceat`` /
    ``np.add.reduceat`` over the non-empty rows), then CSR @ V."""
    P = sddmm_numpy(S, Q, K.T, chunk)
    if P.nnz:
        counts = np.diff(P.indptr)
        starts = P.indptr[:-1][counts > 0]
        e = np.exp(P.data - np.repeat(np.maximum.reduceat(P.data, starts), counts[counts > 0]))
        sums = np.add.reduceat(e, starts)
        P.data = e / np.repeat(sums, counts[counts > 0])
    return P @ V


def cg_step_numpy(A, x, r, p, rs_old):
    """One conjugate-gradient iteration with scipy / NumPy; returns ``(x, r, p, rs_new)``
    as new arrays (the inputs are not changed), ``rs_new`` a NumPy scalar."""
    Ap = A @ p
    alpha = rs_old / (p @ Ap)
    x = x + alpha * p
    r = r - alpha * Ap
    rs_new = r @ r
    p = r + (rs_new / rs_old) * p
    return x, r, p, rs_new


def parse_kernels(text: str, optimize: bool = False) -> List[Kernel]:
    """``'spmv,spmm:16,spmm'`` -> kernels, in order, without repeats.

    Names come from :data:`KERNELS` and :data:`COMPOSED`. ``optimize`` (``--optimize``):
    ``gcn`` means ``gcn+bias`` (the layer with its bias, whose epilogue ``ss.optimize``
    fuses). Raises :class:`KernelSpecError` naming the entry when the name is unknown or K
    is not a positive integer (or is given to a kernel without a dense width)."""
    out: List[Kernel] = []
    for item in (s.strip() for s in text.split(',')):
        if not item:
            continue
        name, _, kpart = item.partition(':')
        if name not in ALL_KERNELS:
            raise KernelSpecError(f'--kernels: unknown kernel {name!r}; choose from {", ".join(ALL_KERNELS)}')
        if optimize and name == 'gcn':
            name = 'gcn+bias'
        default_k = ALL_KERNELS[name][0]
        if kpart:
            if default_k is None:
                raise KernelSpecError(f'--kernels: {item!r}: {name} takes no dense width; write {name!r}')
            if not kpart.isdigit() or int(kpart) <= 0:
                raise KernelSpecError(f'--kernels: {item!r}: K must be a positive integer, e.g. {name}:64')
        kernel = Kernel(name, int(kpart) if kpart else default_k)
        if kernel not in out:
            out.append(kernel)
    if not out:
        raise KernelSpecError(f'--kernels {text!r}: no kernel given; choose from {", ".join(ALL_KERNELS)}')
    return out


def _to_host(x):
    if sp.issparse(x):
        return sp.csr_array(x)
    return np.asarray(x)


def _dense_error(got: np.ndarray, ref: np.ndarray, block: int = 1 << 20) -> Tuple[float, float]:
    """(max |got - ref|, max |ref|), in blocks so that no temporary of the full size is made."""
    g, r = got.reshape(-1), ref.reshape(-1)
    err = scale = 0.0
    for s in range(0, r.size, block):
        gb, rb = g[s:s + block].astype(np.float64), r[s:s + block].astype(np.float64)
        e = float(np.max(np.abs(gb - rb)))
        if not np.isfinite(e):
            return e, scale  # NaN / inf: wrong, whatever the rest holds
        err = max(err, e)
        scale = max(scale, float(np.max(np.abs(rb))))
    return err, scale


def check_result(got, ref, dtype) -> Tuple[bool, str]:
    """Compare a system's result with the scipy reference.

    Returns ``(ok, detail)``: ok when shapes agree and the largest absolute difference is
    at most ``rtol * max(1, max |ref|)`` (rtol 1e-8 for float64, 1e-4 for float32). Sparse
    results are compared as sparse matrices (explicit zeros do not matter). A tuple result
    (cg's ``(x, r, p, rs)``) is compared item by item, the first wrong item reported; a
    scalar item may come back as a one-element array."""
    if isinstance(ref, tuple):
        if not isinstance(got, (tuple, list)) or len(got) != len(ref):
            return False, f'expected a tuple of {len(ref)} results, got {type(got).__name__}'
        details = []
        for i, (g, r) in enumerate(zip(got, ref)):
            if np.ndim(r) == 0 and not sp.issparse(g) and np.size(g) == 1:
                g = np.reshape(np.asarray(g), ())
            ok, detail = check_result(g, r, dtype)
            if not ok:
                return False, f'result {i}: {detail}'
            details.append(detail)
        return True, '; '.join(details)
    rtol = 1e-4 if np.dtype(dtype) == np.float32 else 1e-8
    try:
        got = _to_host(got)
    except Exception as exc:  # a peer returned something we cannot read
        return False, f'unreadable result ({type(exc).__name__}: {exc})'
    ref = _to_host(ref)
    if got.shape != ref.shape:
        return False, f'shape {got.shape}, expected {ref.shape}'
    if sp.issparse(ref) or sp.issparse(got):
        diff = sp.csr_array(got, dtype=np.float64) - sp.csr_array(ref, dtype=np.float64)
        err = float(np.abs(diff.data).max()) if diff.nnz else 0.0
        scale = float(np.abs(ref.data).max()) if sp.issparse(ref) and ref.nnz else 0.0
    else:
        if got.size == 0:
            return True, 'max abs error 0'
        err, scale = _dense_error(got, ref)
    if not np.isfinite(err) or err > rtol * max(1.0, scale):
        return False, f'max abs error {err:.3g} (tolerance {rtol * max(1.0, scale):.3g})'
    return True, f'max abs error {err:.3g}'
