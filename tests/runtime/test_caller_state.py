"""The caller's process is not ours: loading and running compiled programs leaves the
floating-point state alone, results keep IEEE semantics (NaN, infinity, subnormals), and
calls give back the memory they take.

Before: DaCe's default flags built every library with ``-ffast-math``, which links
``crtfastmath.o``; loading the first program set flush-to-zero for the whole process, and
afterwards ``np.array([1e-310]) * 2`` was 0 and ``1e-310 > 0`` was False in user code.
"""
import os
import subprocess
import sys
import textwrap

import dace
import numpy as np
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.build import policy

M, N = dace.symbol('M'), dace.symbol('N')

SUBNORMAL = 1e-310


@dace.program
def fp_spmv(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


@dace.program
def fp_ops(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return ss.relu(A) @ x, ss.softmax(A, axis=1) @ x, A.sum(axis=1)


def _subnormals_survive() -> bool:
    return bool((np.array([SUBNORMAL]) * 2)[0] != 0 and SUBNORMAL > 0 and SUBNORMAL / 2 > 0)


def test_our_builds_have_no_fast_math():
    """Our programs build without -ffast-math (its crtfastmath.o would set flush-to-zero for
    the process); DaCe's own setting is left for other programs."""
    with policy.applied():
        args = dace.Config.get('compiler', 'cpu', 'args').split()
    assert '-ffast-math' not in args and '-Ofast' not in args
    assert policy.without_fast_math('-O3 -ffast-math -march=native') == \
        '-O3 -fno-math-errno -fno-trapping-math -fno-signed-zeros -fassociative-math -march=native'
    assert policy.without_fast_math('-Ofast -fno-math-errno').split()[:2] == ['-O3', '-fno-trapping-math']


def test_subnormals_after_loading_programs_in_a_new_process(tmp_path):
    """A fresh process that builds (or loads from the cache) and runs a program, then
    computes with subnormal numbers in NumPy and in plain Python."""
    script = textwrap.dedent('''
        import numpy as np, scipy.sparse as sp, dace, sdfgsparse as ss
        M, N = dace.symbol('M'), dace.symbol('N')
        @dace.program
        def fp_fresh(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
            return A @ x
        A = sp.random_array((20, 10), density=0.3, format='csr', rng=np.random.default_rng(0))
        assert np.allclose(fp_fresh(A, np.ones(10)), A @ np.ones(10))
        print(float((np.array([1e-310]) * 2)[0]), 1e-310 > 0)
    ''')
    path = tmp_path / 'fresh.py'
    path.write_text(script)  # (DaCe reads a program's source from its file)
    env = dict(os.environ, DACE_default_build_folder=str(tmp_path / 'build'))
    env.pop('DACE_compiler_cpu_args', None)
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    value, positive = out.stdout.split()
    assert float(value) == 2e-310 and positive == 'True'


def test_subnormals_and_ieee_values_in_results(rng):
    """In this process too, after calls; and the kernels keep NaN, infinity and
    subnormal values as scipy does (no finite-math or flush-to-zero inside)."""
    A = sp.random_array((30, 20), density=0.3, format='csr', rng=rng)
    x = rng.standard_normal(20)
    np.testing.assert_allclose(fp_spmv(A, x), A @ x, rtol=1e-12)
    assert _subnormals_survive()
    B = A.copy()
    B.data = B.data.copy()
    B.data[:3] = [np.nan, np.inf, -np.inf]
    B.data[3:6] = SUBNORMAL
    y = fp_spmv(B, np.ones(20))
    np.testing.assert_array_equal(np.isnan(y), np.isnan(B @ np.ones(20)))
    np.testing.assert_allclose(y, B @ np.ones(20), rtol=1e-12)
    tiny = sp.csr_array((np.array([SUBNORMAL, SUBNORMAL]), np.array([0, 1]), np.array([0, 2])), shape=(1, 2))
    assert fp_spmv(tiny, np.ones(2))[0] == 2 * SUBNORMAL  # not flushed to zero
    relu_x, soft_x, rows = fp_ops(B, np.ones(20))
    Bd = B.toarray()
    np.testing.assert_array_equal(np.isnan(rows), np.isnan(Bd.sum(axis=1)))
    np.testing.assert_array_equal(np.isnan(relu_x), np.isnan(np.maximum(Bd, 0) @ np.ones(20)))
    assert _subnormals_survive()


@dace.program
def leak_intermediate(A: ss.CSR[dace.float64, M, N], B: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return (A + B) @ x


def _rss_bytes() -> int:
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')


def test_intermediate_sparse_results_are_freed():
    """``(A + B) @ x`` holds ``A + B`` in a transient structure. Before ``_dace_compat``
    patch 15 its members were never freed: each call here leaked ~4.8 MB (values and
    column indices at the sum's capacity, 400,000 entries), 240 MB over 50 calls."""
    if not os.path.exists('/proc/self/statm'):
        import pytest
        pytest.skip('no /proc/self/statm on this system')
    A = sp.random(2000, 2000, density=0.05, format='csr', random_state=1)
    B = sp.random(2000, 2000, density=0.05, format='csr', random_state=2)
    x = np.random.default_rng(0).standard_normal(2000)
    want = (A + B) @ x
    for _ in range(5):
        np.testing.assert_allclose(leak_intermediate(A, B, x), want, rtol=1e-12, atol=1e-12)
    before = _rss_bytes()
    for _ in range(50):
        leak_intermediate(A, B, x)
    grown = _rss_bytes() - before
    assert grown < 40 * 2**20, f'50 calls kept {grown / 2**20:.0f} MB'
