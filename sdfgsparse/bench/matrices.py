"""The matrices a benchmark runs on: Matrix Market files and seeded generators.

A :class:`MatrixSource` is a name plus a loader, so that a run holds one large matrix in
memory at a time. Every loader returns a canonical ``scipy.sparse.csr_array``: float64
values, int32 indices (where they fit), sorted, duplicates summed.

- :func:`from_folder` — every ``*.mtx`` / ``*.mtx.gz`` in a folder (``--matrices DIR``).
  Pattern matrices (no stored values) get seeded values in [0.5, 1.5), so that a wrong
  result cannot hide behind all-ones.
- :func:`rmat` — R-MAT power-law graph (Chakrabarti et al. 2004; Graph500 parameters
  a, b, c = 0.57, 0.19, 0.19), vertex labels randomly permuted as Graph500 does.
- :func:`banded` — a band of ``2 * half_width + 1`` diagonals (FEM / stencil-like).
- :func:`default_matrices` — the three small real matrices shipped in ``tests/data``
  plus generated ones up to ~20M nonzeros, so that the DRAM-bound regime is covered
  (``quick``: the shipped ones plus one small R-MAT).
"""
import glob
import os
from dataclasses import dataclass, field
from typing import Callable, List, Optional

import numpy as np
import scipy.io
import scipy.sparse as sp

from sdfgsparse.bench.errors import MatrixError

__all__ = ['MatrixSource', 'canonical', 'load_mtx', 'from_folder', 'rmat', 'banded', 'default_matrices', 'shipped_folder']

SEED = 20240601


@dataclass
class MatrixSource:
    """A named matrix, loaded on demand by :meth:`load`.

    ``kind`` is ``'file'`` or ``'generated'``; ``description`` says where it comes from.
    """
    name: str
    loader: Callable[[], sp.csr_array] = field(repr=False)
    kind: str = 'file'
    description: str = ''

    def load(self) -> sp.csr_array:
        return self.loader()


def canonical(A, dtype=np.float64) -> sp.csr_array:
    """``A`` as a canonical CSR array: ``dtype`` values, sorted, duplicates summed, int32
    indices when the matrix fits (scipy's default for these sizes)."""
    A = sp.csr_array(A, dtype=dtype)
    A.sum_duplicates()
    A.sort_indices()
    if max(A.shape + (A.nnz, )) < np.iinfo(np.int32).max:
        A.indices = A.indices.astype(np.int32, copy=False)
        A.indptr = A.indptr.astype(np.int32, copy=False)
    return A


def _stem(path: str) -> str:
    base = os.path.basename(path)
    return base[:-len('.mtx.gz')] if base.endswith('.mtx.gz') else base[:-len('.mtx')]


#: What the errors about ``--matrices`` suggest.
_FOLDER_HINT = 'give a folder of .mtx / .mtx.gz files, or leave --matrices out for the bundled ones'
_FILE_HINT = 'fix or remove the file, or give another folder'


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _header(path: str) -> tuple:
    """``scipy.io.mminfo`` of ``path`` (its header only), or :class:`MatrixError` naming the
    file when that is not the header of a real (or integer / pattern) Matrix Market matrix."""
    try:
        info = scipy.io.mminfo(path)
    except (OSError, ValueError, IndexError, EOFError) as exc:
        raise MatrixError(f'--matrices: {path}: not a readable Matrix Market file ({_first_line(exc)}); '
                          f'{_FILE_HINT}') from exc
    if info[4] == 'complex':
        raise MatrixError(f'--matrices: {path}: complex matrices are not benchmarked; give a real one')
    return info


def load_mtx(path: str, seed: int = SEED) -> sp.csr_array:
    """Read a Matrix Market file (``.mtx`` or gzip-compressed ``.mtx.gz``) as canonical CSR.

    Raises :class:`MatrixError` naming the file when it is not a readable real (or
    integer / pattern) sparse matrix."""
    # By file name: scipy opens .gz itself. (Passing an open binary file to mminfo aborts
    # the process in scipy 1.17's fast_matrix_market when the file is then closed.)
    fieldtype = _header(path)[4]
    try:
        A = scipy.io.mmread(path)
    except (OSError, ValueError, IndexError, EOFError) as exc:
        raise MatrixError(f'--matrices: {path}: not a readable Matrix Market file ({_first_line(exc)}); '
                          f'{_FILE_HINT}') from exc
    A = canonical(sp.coo_array(A) if not sp.issparse(A) else A)
    if fieldtype == 'pattern':
        A.data = np.random.default_rng(seed).uniform(0.5, 1.5, A.nnz)
    return A


def from_folder(folder: str) -> List[MatrixSource]:
    """One source per ``*.mtx`` / ``*.mtx.gz`` file in ``folder`` (sorted by name).

    Raises :class:`MatrixError` when ``folder`` is not a folder, holds no such file, or one
    of them does not start with a Matrix Market header of a real matrix (only the headers
    are read here; :meth:`MatrixSource.load` reads the rest)."""
    if not os.path.isdir(folder):
        raise MatrixError(f'--matrices {folder!r}: no such folder; {_FOLDER_HINT}')
    files = sorted(glob.glob(os.path.join(folder, '*.mtx')) + glob.glob(os.path.join(folder, '*.mtx.gz')))
    if not files:
        raise MatrixError(f'--matrices {folder!r}: the folder holds no .mtx or .mtx.gz file; {_FOLDER_HINT}')
    for f in files:
        _header(f)
    return [MatrixSource(_stem(f), (lambda f=f: load_mtx(f)), 'file', f) for f in files]


def rmat(scale: int, edge_factor: int = 16, seed: int = SEED, probs=(0.57, 0.19, 0.19)) -> sp.csr_array:
    """R-MAT graph with ``2**scale`` vertices and ``edge_factor * 2**scale`` generated edges.

    Each edge picks, level by level, one quadrant of the adjacency matrix with
    probabilities ``a, b, c, 1 - a - b - c``; duplicate edges are summed, so the final nnz
    is somewhat lower than the number of edges. Values are standard normal. Deterministic
    for a given ``seed``."""
    if not 1 <= scale <= 30:
        raise MatrixError(f'rmat: scale={scale}: expected 1..30')
    a, b, c = probs
    if min(a, b, c) < 0 or a + b + c > 1:
        raise MatrixError(f'rmat: probs={probs}: expected non-negative a, b, c with a + b + c <= 1')
    rng = np.random.default_rng(seed)
    n, m = 1 << scale, edge_factor << scale
    row = np.zeros(m, np.int32)
    col = np.zeros(m, np.int32)
    for level in range(scale):
        r = rng.random(m, dtype=np.float32)
        bit = np.int32(1 << level)
        row += bit * (r >= a + b)
        col += bit * (((r >= a) & (r < a + b)) | (r >= a + b + c))
    perm = rng.permutation(n).astype(np.int32)
    vals = rng.standard_normal(m)
    A = sp.coo_array((vals, (perm[row], perm[col])), shape=(n, n))
    del row, col
    return canonical(A)


def banded(n: int, half_width: int = 4, seed: int = SEED) -> sp.csr_array:
    """``n x n`` band matrix with every diagonal from ``-half_width`` to ``+half_width``
    stored (about ``n * (2 * half_width + 1)`` nonzeros), standard-normal values."""
    if n < 1 or half_width < 0:
        raise MatrixError(f'banded: n={n}, half_width={half_width}: expected n >= 1 and half_width >= 0')
    rng = np.random.default_rng(seed)
    offsets = list(range(-half_width, half_width + 1))
    diagonals = [rng.standard_normal(n - abs(k)) for k in offsets if n - abs(k) > 0]
    offsets = [k for k in offsets if n - abs(k) > 0]
    return canonical(sp.diags_array(diagonals, offsets=offsets, shape=(n, n), format='csr'))


def shipped_folder() -> Optional[str]:
    """``tests/data`` of the source tree (the small real matrices the project ships), or None."""
    here = os.path.dirname(os.path.abspath(__file__))
    folder = os.path.normpath(os.path.join(here, '..', '..', 'tests', 'data'))
    return folder if glob.glob(os.path.join(folder, '*.mtx*')) else None


def _generated(name, fn, *args, description='') -> MatrixSource:
    return MatrixSource(name, lambda: fn(*args), 'generated', description)


def default_matrices(quick: bool = False) -> List[MatrixSource]:
    """The default set: the shipped real matrices, then generated ones (small to ~20M nnz).

    Full: R-MAT scale 16 (~1M nnz) and 20 (~15M nnz), banded 200k rows (~1.8M nnz) and
    2M rows (~18M nnz). ``quick``: the shipped ones plus R-MAT scale 12 (~30k nnz)."""
    folder = shipped_folder()
    out = from_folder(folder) if folder else []
    if quick:
        return out + [_generated('rmat-s12', rmat, 12, 8, description='R-MAT scale 12, edge factor 8')]
    return out + [
        _generated('rmat-s16', rmat, 16, 16, description='R-MAT scale 16, edge factor 16'),
        _generated('banded-200k', banded, 200_000, 4, description='band of 9 diagonals, 200k rows'),
        _generated('rmat-s20', rmat, 20, 16, description='R-MAT scale 20, edge factor 16'),
        _generated('banded-2M', banded, 2_000_000, 4, description='band of 9 diagonals, 2M rows'),
    ]
