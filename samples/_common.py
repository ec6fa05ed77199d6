"""Helpers shared by the samples: load the bundled matrices, time and check a call."""
import glob
import gzip
import os
import time

import numpy as np
import scipy.io
import scipy.sparse as sp

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MATRICES = os.path.join(HERE, '..', 'tests', 'data')


def load(path, dtype=np.float64):
    opener = gzip.open if path.endswith('.gz') else open
    with opener(path, 'rb') as f:
        A = sp.csr_array(scipy.io.mmread(f), dtype=dtype)
    A.sum_duplicates()
    A.sort_indices()
    return A


def matrices(folder=None):
    folder = folder or DEFAULT_MATRICES
    files = sorted(glob.glob(os.path.join(folder, '*.mtx')) + glob.glob(os.path.join(folder, '*.mtx.gz')))
    for f in files:
        yield os.path.basename(f).split('.mtx')[0], f


def timed(fn, *args, repeat=5):
    """(result, first call seconds, median warm call seconds)."""
    t0 = time.perf_counter()
    res = fn(*args)
    first = time.perf_counter() - t0
    warm = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(*args)
        warm.append(time.perf_counter() - t0)
    return res, first, float(np.median(warm))


def max_error(got, want):
    g = got.toarray() if sp.issparse(got) else np.asarray(got)
    w = want.toarray() if sp.issparse(want) else np.asarray(want)
    scale = max(1.0, float(np.abs(w).max()) if w.size else 1.0)
    return float(np.abs(g - w).max() / scale) if w.size else 0.0
