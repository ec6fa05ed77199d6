"""Shared fixtures of the analysis tests: kernel SDFGs (built once), seeded sparse matrices."""
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).parent))
import soap_kernels  # noqa: E402  (the dense kernel programs)

_SDFGS = {}


@pytest.fixture(scope='session')
def kernel_sdfg():
    """``kernel_sdfg('gemm')`` -> the kernel's SDFG, converted once per session."""

    def get(name):
        if name not in _SDFGS:
            with warnings.catch_warnings():
                warnings.simplefilter('ignore')  # DaCe's memlet-propagation warnings
                _SDFGS[name] = getattr(soap_kernels, name).to_sdfg()
        return _SDFGS[name]

    return get


@pytest.fixture
def rng():
    return np.random.default_rng(20241129)


def _power_law(rng, rows, cols, avg):
    """Rows with power-law lengths (a few long rows, many short or empty ones)."""
    lengths = np.minimum(cols, (rng.pareto(1.5, rows) * avg / 2).astype(int))
    r = np.repeat(np.arange(rows), lengths)
    c = np.concatenate([rng.choice(cols, n, replace=False) for n in lengths]) if lengths.sum() else np.zeros(0, int)
    return sp.csr_matrix((np.ones(len(r)), (r, c)), shape=(rows, cols))


@pytest.fixture
def matrix_zoo(rng):
    """Genuinely sparse matrices: random, banded, power-law rows, empty rows, rectangular,
    a dense block, a single column and nnz = 0."""
    random = sp.random(40, 30, density=0.08, random_state=np.random.RandomState(7), format='csr')
    banded = sp.diags([np.ones(47), np.ones(48), np.ones(47)], [-1, 0, 1], format='csr')
    empty_rows = sp.random(36, 36, density=0.1, random_state=np.random.RandomState(3), format='lil')
    empty_rows[::3, :] = 0
    dense_block = sp.csr_matrix(np.ones((24, 24)))
    single_col = sp.csr_matrix(np.ones((20, 1)))
    return {
        'random': random,
        'banded': banded,
        'power_law': _power_law(rng, 50, 40, 4),
        'empty_rows': sp.csr_matrix(empty_rows),
        'rectangular': sp.random(12, 45, density=0.2, random_state=np.random.RandomState(11), format='csr'),
        'dense_block': dense_block,
        'single_col': single_col,
        'zero': sp.csr_matrix((16, 16)),
    }
