"""``sdfgsparse_vecmath.h``: loops that call ``exp`` / ``log`` / ``tanh`` run glibc's vector
versions (libmvec) where the ``cpu`` environment links it, with libm's results within
4 ulp and its special values (NaN, infinities, overflow, underflow, denormals) kept; and
the programs that use them agree with NumPy either way."""
import os
import shlex
import shutil
import subprocess
import sys

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.targets.cpu.environment import INCLUDE, SdfgsparseCPU, libmvec

needs_libmvec = pytest.mark.skipif(not libmvec() or shutil.which('c++') is None,
                                   reason='glibc libmvec on x86-64 and a C++ compiler')

# A vectorised loop (the declarations of the header, -O3) against the same functions called
# through volatile pointers (libm, one value at a time); prints the largest distance in ulp
# and how many special values differ.
PROGRAM = r'''
#include "sdfgsparse_vecmath.h"
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <limits>
#include <vector>
template <typename T> __attribute__((noinline)) void run(int which, const T* __restrict x, T* __restrict y, int n) {
  if (which == 0) for (int i = 0; i < n; ++i) y[i] = std::exp(x[i]);
  if (which == 1) for (int i = 0; i < n; ++i) y[i] = std::log(x[i]);
  if (which == 2) for (int i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
}
template <typename T, typename U> long long ulps(T a, T b) {
  if (a == b || (a != a && b != b)) return 0;
  if (a != a || b != b || (a - a) != (a - a) || (b - b) != (b - b)) return 1LL << 40;  // NaN or inf on one side only
  U ia, ib; std::memcpy(&ia, &a, sizeof a); std::memcpy(&ib, &b, sizeof b);
  if ((ia < 0) != (ib < 0)) return 1LL << 40;
  return ia > ib ? (long long)(ia - ib) : (long long)(ib - ia);
}
template <typename T, typename U> void check(const char* name, int which, T (*volatile f)(T), T lo, T hi) {
  std::vector<T> x;
  const T inf = std::numeric_limits<T>::infinity();
  const T special[] = {T(0), -T(0), inf, -inf, std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::denorm_min(),
                       -std::numeric_limits<T>::denorm_min(), std::numeric_limits<T>::min(), std::numeric_limits<T>::max(),
                       T(1), T(-1), T(88.8), T(-104), T(709.8), T(-745.2), T(1e-30), T(20), T(-20)};
  for (T s : special) x.push_back(s);
  for (int i = 0; i < 100000; ++i) x.push_back(lo + (hi - lo) * T(i) / T(100000));
  std::vector<T> y(x.size()), z(x.size());
  run<T>(which, x.data(), y.data(), (int)x.size());
  for (size_t i = 0; i < x.size(); ++i) z[i] = f(x[i]);
  long long worst = 0, special_bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    long long u = ulps<T, U>(y[i], z[i]);
    if (i < sizeof(special) / sizeof(T) && u > 4) ++special_bad;
    if (u > worst) worst = u;
  }
  std::printf("%s %lld %lld\n", name, worst, special_bad);
}
int main() {
  check<double, int64_t>("exp", 0, ::exp, -750.0, 710.0);
  check<double, int64_t>("log", 1, ::log, 1e-300, 1e300);
  check<double, int64_t>("tanh", 2, ::tanh, -30.0, 30.0);
  check<float, int32_t>("expf", 0, ::expf, -105.f, 89.f);
  check<float, int32_t>("logf", 1, ::logf, 1e-38f, 3e38f);
  check<float, int32_t>("tanhf", 2, ::tanhf, -12.f, 12.f);
}
'''


@needs_libmvec
@pytest.mark.parametrize('march', ['x86-64-v3', 'x86-64-v4'])
def test_vector_exp_log_tanh_match_libm(march, tmp_path):
    src = tmp_path / 'vm.cpp'
    src.write_text(PROGRAM)
    exe = tmp_path / 'vm'
    # the flags sdfgsparse gives DaCe for generated code, for this target, and the environment's
    dace_flags = [f for f in shlex.split(dace.Config.get('compiler', 'cpu', 'args')) if not f.startswith('-march=')]
    flags = [*dace_flags, f'-march={march}', f'-I{INCLUDE}', *SdfgsparseCPU.cmake_compile_flags]
    done = subprocess.run(['c++', *flags, str(src), '-o', str(exe), '-lmvec'], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    listed = subprocess.run(['nm', str(exe)], capture_output=True, text=True).stdout
    assert '_ZGV' in listed, 'no vector function was called: the declarations did not reach the vectoriser'
    ran = subprocess.run([str(exe)], capture_output=True, text=True)
    if ran.returncode == -4:  # SIGILL: the CPU lacks the target's instructions
        pytest.skip(f'this CPU cannot run -march={march}')
    assert ran.returncode == 0, ran.stderr
    for line in ran.stdout.split('\n'):
        if line:
            name, worst, special_bad = line.split()
            assert int(special_bad) == 0, f'{name}: special values differ from libm'
            assert int(worst) <= 4, f'{name}: {worst} ulp from libm'


M, N = dace.symbol('M'), dace.symbol('N')


@dace.program
def vm_functions32(A: ss.CSR[dace.float32, M, N]):
    return ss.exp(A), ss.sigmoid(A), ss.tanh(A), ss.softmax(A)


@dace.program
def vm_functions64(A: ss.CSR[dace.float64, M, N]):
    return ss.exp(A), ss.sigmoid(A), ss.tanh(A), ss.softmax(A)


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_vectorised_functions_of_sparse_values_match_numpy(dtype, rng):
    """exp, sigmoid, tanh and softmax of stored values: long rows (vector loops with tails),
    special values among them, against NumPy in the values' dtype."""
    A = sp.random_array((60, 300), density=0.3, format='csr', rng=rng, dtype=np.float64)
    A.data = A.data * 200 - 100
    A.data[:6] = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-310]
    A = A.astype(dtype)
    prog = vm_functions32 if dtype == np.float32 else vm_functions64
    with np.errstate(all='ignore'):  # in the values' dtype, as the kernels compute (exp(100) is inf in float32)
        v = A.data
        want = [np.exp(v), 1 / (1 + np.exp(-v)), np.tanh(v)]
        got = prog(A)
    rtol = 1e-5 if dtype == np.float32 else 1e-13
    for name, g, w in zip(['exp', 'sigmoid', 'tanh'], got[:3], want):
        assert g.dtype == dtype
        np.testing.assert_allclose(g.data, w, rtol=rtol, atol=np.finfo(dtype).tiny, err_msg=name)
    # softmax against the dense row-wise reference on the finite rows
    S = got[3].toarray()
    for i in range(A.shape[0]):
        lo, hi = A.indptr[i], A.indptr[i + 1]
        vals = A.data[lo:hi].astype(np.float64)
        if hi == lo or not np.all(np.isfinite(vals)):
            continue
        e = np.exp(vals - vals.max())
        np.testing.assert_allclose(S[i, A.indices[lo:hi]], e / e.sum(), rtol=rtol * 10, atol=1e-30, err_msg=f'row {i}')


def test_the_switch_is_part_of_the_build_key(monkeypatch):
    """Builds with and without libmvec have different keys, so different folders."""
    from sdfgsparse.build import naming
    sdfg = vm_functions64.to_sdfg()
    monkeypatch.setattr(naming, 'LIBMVEC', False)
    off = naming.content_hash(sdfg)
    monkeypatch.setattr(naming, 'LIBMVEC', True)
    assert naming.content_hash(sdfg) != off


def test_the_switch_is_read_once_at_import():
    """``SDFGSPARSE_LIBMVEC=0`` in the environment of a new process turns it off there; the
    decision and the environment's flags agree."""
    code = ('from sdfgsparse.build import naming; from sdfgsparse.targets.cpu.environment import SdfgsparseCPU as E; '
            'print(naming.LIBMVEC, E.cmake_libraries, E.cmake_compile_flags)')
    for value, want in (('0', 'False [] []'), ('off', 'False [] []')):
        done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                              env=dict(os.environ, SDFGSPARSE_LIBMVEC=value))
        assert done.returncode == 0, done.stderr
        assert done.stdout.split('\n')[-2] == want
    if libmvec():
        assert SdfgsparseCPU.cmake_libraries == ['mvec'] and SdfgsparseCPU.cmake_compile_flags == ['-DSS_LIBMVEC']
