"""Row-parallel SpGEMM (targets/cpu/gustavson.py) at sizes where its choices matter: a mid-size
random product in scipy's canonical format (every way of ordering a row: every word of the
bitmap, its non-empty words only, the sort of a wide, sparse row), the workspaces freed
after each call (the process keeps no buffer proportional to B's columns, per thread),
and two OpenMP threads with calls from several Python threads at once (in a child
process: the suite runs one OpenMP thread). No timing is asserted."""
import gc
import os
import subprocess
import sys
import textwrap

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss

M, K, N = (dace.symbol(s) for s in 'MKN')

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dace.program
def spgemm_sm(A: ss.CSR[dace.float64, M, K], B: ss.CSR[dace.float64, K, N]):
    return A @ B


def _canonical(A, B):
    want = sp.csr_array(A @ B)
    want.sort_indices()
    return want


def _canonical_equal(got, A, B, want=None):
    want = _canonical(A, B) if want is None else want
    assert got.format == 'csr' and got.shape == want.shape
    assert got.has_sorted_indices and got.has_canonical_format
    got.check_format(full_check=True)
    np.testing.assert_array_equal(got.indptr, want.indptr)
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_allclose(got.data, want.data, rtol=1e-12, atol=1e-12)


def _rss_mib():
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) / 1024
    raise RuntimeError('no VmRSS in /proc/self/status')


def test_mid_size_random_product_is_canonical(rng):
    """Every way of ordering a row: ~120 columns per row over 6000 (through the bitmap of
    non-empty words), power-law rows (long ones: every word of the range; many empty),
    and a B with 300000 columns (few columns over a wide range: sorted) — the exact
    structure of scipy's product, sorted."""
    A = sp.random_array((3000, 2500), density=4e-3, format='csr', rng=rng)
    B = sp.random_array((2500, 6000), density=2e-3, format='csr', rng=rng)
    _canonical_equal(spgemm_sm(A, B), A, B)
    deg = np.minimum(rng.zipf(1.5, 2000), 2500) * (rng.random(2000) < 0.7)
    rows = np.repeat(np.arange(2000), deg)
    P = sp.csr_array((rng.standard_normal(rows.size), (rows, rng.integers(0, 2500, rows.size))), shape=(2000, 2500))
    P.sum_duplicates()
    _canonical_equal(spgemm_sm(P, B), P, B)
    W = sp.random_array((2500, 300000), density=1e-5, format='csr', rng=rng)
    _canonical_equal(spgemm_sm(A, W), A, W)
    A1 = sp.random_array((3000, 2500), density=4e-4, format='csr', rng=rng)
    _canonical_equal(spgemm_sm(A1, W), A1, W)


@pytest.mark.skipif(not os.path.exists('/proc/self/status'), reason='reads VmRSS from /proc')
def test_workspaces_are_freed(rng):
    """B with 2^22 + 7 columns: workspaces of ~16 bytes per column (64 MiB) exist during the
    call only; per-thread buffers kept between calls held 96 MiB per thread here."""
    A = sp.random_array((256, 64), density=0.1, format='csr', rng=rng)
    B = sp.random_array((64, (1 << 22) + 7), density=4e-6, format='csr', rng=rng)
    T = sp.random_array((40, 40), density=0.2, format='csr', rng=rng)
    spgemm_sm(T, T)  # compiled and loaded before measuring
    want = _canonical(A, B)  # scipy's temporaries (12 bytes per column) gone before measuring
    assert want.nnz > 1000
    gc.collect()
    before = _rss_mib()
    for _ in range(3):
        C = spgemm_sm(A, B)
        _canonical_equal(C, A, B, want)
        del C
    gc.collect()
    held = _rss_mib() - before
    assert held < 16, f'{held:.1f} MiB more resident after the calls'


_CHILD = '''
import gc, threading
import dace, numpy as np, scipy.sparse as sp
import sdfgsparse as ss

M, K, N = (dace.symbol(s) for s in 'MKN')


@dace.program
def spgemm_sm_threads(A: ss.CSR[dace.float64, M, K], B: ss.CSR[dace.float64, K, N]):
    return A @ B


def rss():
    with open('/proc/self/status') as f:
        return next(int(l.split()[1]) / 1024 for l in f if l.startswith('VmRSS:'))


def canonical(A, B):
    W = sp.csr_array(A @ B)
    W.sort_indices()
    return W


def same(C, A, B, W=None):
    W = canonical(A, B) if W is None else W
    C.check_format(full_check=True)
    return (C.has_sorted_indices and np.array_equal(C.indptr, W.indptr) and np.array_equal(C.indices, W.indices)
            and np.allclose(C.data, W.data, rtol=1e-12, atol=1e-12))


rng = np.random.default_rng(5)
mats = [(sp.random_array((1500 + 100 * t, 1200), density=6e-3, format='csr', rng=rng),
         sp.random_array((1200, 4000 + 1000 * t), density=3e-3, format='csr', rng=rng)) for t in range(4)]
bad = []
assert same(spgemm_sm_threads(*mats[0]), *mats[0])


def worker(t):
    for _ in range(5):
        if not same(spgemm_sm_threads(*mats[t]), *mats[t]):
            bad.append(t)


threads = [threading.Thread(target=worker, args=(t, )) for t in range(4)]
for th in threads:
    th.start()
for th in threads:
    th.join()
A = sp.random_array((256, 64), density=0.1, format='csr', rng=rng)
B = sp.random_array((64, (1 << 22) + 7), density=4e-6, format='csr', rng=rng)
W = canonical(A, B)
gc.collect()
before = rss()
for _ in range(3):
    C = spgemm_sm_threads(A, B)
    bad += [] if same(C, A, B, W) else ['wide']
    del C
gc.collect()
print('BAD', bad, 'HELD', rss() - before)
'''


@pytest.mark.skipif(not os.path.exists('/proc/self/status'), reason='reads VmRSS from /proc')
def test_two_openmp_threads_and_concurrent_calls(tmp_path):
    """Two OpenMP threads: a workspace per thread of each call (4 Python threads calling at
    once with products of different sizes), results equal to scipy's, and nothing kept
    after the calls (2 x 64 MiB during them)."""
    script = tmp_path / 'spgemm_threads_child.py'
    script.write_text(textwrap.dedent(_CHILD))
    env = dict(os.environ, OMP_NUM_THREADS='2')
    res = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    line = [l for l in res.stdout.splitlines() if l.startswith('BAD')][-1]
    assert line.startswith('BAD [] '), line
    held = float(line.split('HELD')[1])
    assert held < 16, f'{held:.1f} MiB more resident after the calls'


def test_results_far_below_their_capacity_are_not_copied(rng, monkeypatch):
    """A product whose entries are far fewer than its products (the capacity bound) comes
    back without a copy: its members are shrunk in place (runtime/results.py), so scipy's
    constructor, which copies a view of less than half its base, keeps them. Then the
    same product once more (the warm plan's path) and against scipy."""
    import scipy.sparse._compressed as compressed
    copied = []
    prune = compressed._prune_array
    monkeypatch.setattr(compressed, '_prune_array', lambda a: (lambda r: copied.append(r is not a) or r)(prune(a)))
    A = sp.random_array((60, 60), density=0.5, format='csr', rng=rng)  # ~1800 entries, ~54000 products
    B = sp.random_array((60, 60), density=0.5, format='csr', rng=rng)
    for _ in range(2):
        copied.clear()
        got = spgemm_sm(A, B)
        _canonical_equal(got, A, B)
        assert copied and not any(copied)
    empty = sp.csr_array((60, 60))
    _canonical_equal(spgemm_sm(empty, B), empty, B)  # (no entries: shrunk to none)
