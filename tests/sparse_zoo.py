"""Test helpers: a seeded matrix zoo, the small real matrices in tests/data, and
conversion of a reference scipy CSR matrix into any catalogue format's argument; programs
from source text and calls from several threads."""
import gzip
import importlib.util
import os
import threading

import numpy as np
import scipy.io
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.runtime.container import SparseMatrix
from sdfgsparse.runtime.convert import to_scipy_twin, to_storage

DATA = os.path.join(os.path.dirname(__file__), 'data')

FORMATS = ['CSR', 'CSC', 'COO', 'DCSR', 'BSR', 'ELL', 'DIA']


def signatures(all_formats: bool = False, one_pair: bool = False):
    """``(format, value dtype, index dtype)`` test parameters: CSR in all four dtype pairs,
    every other format in all four when ``all_formats``, else in two pairs that still
    cover both value dtypes and both index widths ((float64, int32), scipy's default, and
    (float32, int64)); with ``one_pair``, in one of those two, alternating along
    :data:`FORMATS` (so each pair still meets formats of every kind). Each parameter
    compiles one program of many kernels (20-70 s): the pairs keep CI under its time limit."""
    import dace
    import pytest
    two = [(dace.float64, dace.int32), (dace.float32, dace.int64)]
    four = two + [(dace.float64, dace.int64), (dace.float32, dace.int32)]
    for k, fmt in enumerate(FORMATS):
        pairs = four if all_formats or fmt == 'CSR' else [two[k % 2]] if one_pair else two
        for vt, it in pairs:
            yield pytest.param(fmt, vt, it, id=f'{fmt}-{vt.to_string()}-{it.to_string()}')


def _random(m, n, density, rng, dtype):
    return sp.random_array((m, n), density=density, format='csr', rng=rng, dtype=dtype,
                           data_sampler=lambda size: rng.standard_normal(size))


def zoo(dtype=np.float64, seed=7):
    """Named small CSR matrices covering the shapes and structures sparse code gets wrong.
    Even dimensions where possible so that 2x2 BSR applies."""
    rng = np.random.default_rng(seed)
    mats = {}
    mats['empty'] = sp.csr_array((6, 4), dtype=dtype)
    mats['row_1xN'] = _random(1, 9, 0.5, rng, dtype)
    mats['col_Nx1'] = _random(9, 1, 0.5, rng, dtype)
    mats['rect'] = _random(14, 8, 0.2, rng, dtype)
    e = _random(12, 10, 0.3, rng, dtype).tolil()
    e[3, :] = 0
    e[7, :] = 0
    e[:, 2] = 0
    e[:, 9] = 0
    mats['empty_rows_cols'] = sp.csr_array(e)
    # power-law row lengths
    rows = []
    for i in range(20):
        k = min(16, int(16 / (i + 1)**1.2) + (1 if i % 3 else 0))
        cols = rng.choice(16, size=k, replace=False)
        rows += [(i, c) for c in cols]
    r, c = np.array(rows).T
    mats['power_law'] = sp.csr_array((rng.standard_normal(r.size).astype(dtype), (r, c)), shape=(20, 16))
    band = sp.diags_array([rng.standard_normal(16 - abs(k)) for k in (-2, -1, 0, 1, 3)], offsets=[-2, -1, 0, 1, 3],
                          shape=(16, 16))
    mats['banded'] = sp.csr_array(band, dtype=dtype)
    mats['dense_50'] = _random(10, 12, 0.5, rng, dtype)
    for A in mats.values():
        A.sort_indices()
    return mats


def real_matrix(name, dtype=np.float64):
    with gzip.open(os.path.join(DATA, f'{name}.mtx.gz')) as f:
        A = scipy.io.mmread(f)
    A = sp.csr_array(A, dtype=dtype)
    A.sum_duplicates()
    return A


REAL = ['cora_A', 'adder_dcop_05', 'cryg2500']


def format_of(name: str):
    """The format a test names: ``'BSR'`` is 2x2 BSR, ``'NM2_4'`` is ``ss.NM[2, 4]``, ..."""
    return ss.BSR.with_block(2, 2) if name == 'BSR' else ss.formats.get_format(name)


def padded_to_block(A, fmt):
    """``A`` (scipy) with zero rows and columns appended up to a multiple of ``fmt``'s block."""
    R, C = fmt.block
    m, n = A.shape
    B = sp.lil_array((m + -m % R, n + -n % C), dtype=A.dtype)
    B[:m, :n] = A
    return sp.csr_array(B)


def as_format(A, fmt: str, index_dtype=np.int32, rng=None, duplicates=True):
    """The argument for format ``fmt`` holding the same matrix as scipy CSR ``A``.

    COO gets unsorted entries and (if ``duplicates``) some entries split in two.
    int32 arguments use scipy objects where a twin exists; int64 ones use SparseMatrix
    (scipy may narrow index arrays on its own)."""
    if fmt == 'COO':
        C = A.tocoo()
        r, c, v = C.row.astype(index_dtype), C.col.astype(index_dtype), C.data.copy()
        if duplicates and v.size:
            k = max(1, v.size // 4)
            r = np.concatenate([r, r[:k]])
            c = np.concatenate([c, c[:k]])
            half = v[:k] / 2
            v = np.concatenate([v, half]).astype(A.dtype)
            v[:k] = half
        perm = (rng or np.random.default_rng(0)).permutation(v.size)
        r, c, v = r[perm], c[perm], v[perm]
        if index_dtype == np.int32:
            return sp.coo_array((v, (r, c)), shape=A.shape)
        return SparseMatrix(ss.COO, {'crd0': r, 'crd1': c, 'vals': v}, A.shape)
    f = format_of(fmt)
    arrays, shape = to_storage(A, f, index_dtype)
    m = SparseMatrix(f, arrays, shape)
    if index_dtype == np.int32 and f.scipy_format:
        return to_scipy_twin(m)
    return m


def dense(X):
    """Dense NumPy array of a result (scipy, SparseMatrix or ndarray)."""
    if isinstance(X, SparseMatrix):
        return X.toarray()
    if sp.issparse(X):
        return X.toarray()
    return np.asarray(X)


def tol(dtype):
    return dict(rtol=1e-4, atol=1e-4) if np.dtype(dtype) == np.float32 else dict(rtol=1e-10, atol=1e-10)


def softmax_reference(lines, vals):
    """Softmax of ``vals`` within each group of equal ``lines`` (float64, stable)."""
    vals = vals.astype(np.float64)
    out = np.zeros_like(vals)
    for l in np.unique(lines):
        sel = lines == l
        e = np.exp(vals[sel] - vals[sel].max())
        out[sel] = e / e.sum()
    return out


def expanded_pure(sdfg):
    """A copy of ``sdfg`` with every library node expanded, after checking that it holds
    no sparse node any more and Python tasklets only (no C++ text): what a ``pure``
    expansion must give."""
    import copy

    import dace
    from sdfgsparse.ops.base import SparseLibraryNode
    expanded = copy.deepcopy(sdfg)
    expanded.expand_library_nodes()
    nodes = [n for n, _ in expanded.all_nodes_recursive()]
    assert not [n for n in nodes if isinstance(n, SparseLibraryNode)]
    tasklets = [n for n in nodes if isinstance(n, dace.nodes.Tasklet)]
    assert tasklets and all(t.language == dace.dtypes.Language.Python for t in tasklets), \
        sorted({t.label for t in tasklets if t.language != dace.dtypes.Language.Python})
    return expanded


def program_from_source(tmp_path, src: str, name: str = 'prog'):
    """The object ``name`` of module source ``src`` (written to a file under ``tmp_path``
    and imported: DaCe's frontend reads a program's source from its file)."""
    path = tmp_path / f'src_{abs(hash(src))}.py'
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, name)


def from_threads(work, n: int = 8):
    """Run ``work(t)`` for ``t`` in ``range(n)``, each in a thread of its own, and wait for all."""
    threads = [threading.Thread(target=work, args=(t, )) for t in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
