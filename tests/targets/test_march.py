"""Generated CPU code built for x86-64-v2, -v3 and -v4 (:mod:`sdfgsparse.targets.cpu.march`).

The kernels size their vectors by the compile target (``SS_VECTOR_BYTES``: 16, 32 and 64
bytes for these three), so each target compiles other code paths: SpMV (float64 and
float32), SpMM and SDDMM with K = 64 and an odd K = 19 (vector tails), and the dense GEMM
of a GCN layer (``relu(A @ (X @ W))``, float32). Each runs on a seeded 300 x 200 matrix
with empty rows and is checked against scipy; each build is checked to be one for its
target (the ``-march`` in its CMake cache; three targets, three build folders). A target
this CPU cannot run is skipped, as :func:`march.check_target` says. Programs are made
afresh per target (DaCe keeps a compiled program inside its ``@dace.program`` object).
"""
import os

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.errors import DeviceError
from sdfgsparse.targets.cpu import march

pytestmark = pytest.mark.xdist_group('march')

M, N, K, J, F, H = (dace.symbol(s) for s in 'MNKJFH')

TARGETS = {'x86-64-v2': 16, 'x86-64-v3': 32, 'x86-64-v4': 64}


def _programs():
    """Three fresh programs (fresh ``@dace.program`` objects: no compiled copy inside)."""

    @dace.program
    def march_spmv(A: ss.CSR[dace.float64, M, N], x: dace.float64[N], A32: ss.CSR[dace.float32, M, N],
                   x32: dace.float32[N]):
        return A @ x, A32 @ x32

    @dace.program
    def march_spmm(A: ss.CSR[dace.float64, M, N], B: dace.float64[N, K], B19: dace.float64[N, J]):
        return A @ B, A @ B19

    @dace.program
    def march_sddmm_gcn(A: ss.CSR[dace.float64, M, N], U: dace.float64[M, K], V: dace.float64[K, N],
                        U19: dace.float64[M, J], V19: dace.float64[J, N], G: ss.CSR[dace.float32, N, N],
                        X: dace.float32[N, F], W: dace.float32[F, H]):
        return ss.sddmm(A, U, V), ss.sddmm(A, U19, V19), np.maximum(G @ (X @ W), 0)

    return march_spmv, march_spmm, march_sddmm_gcn


@pytest.fixture(scope='module')
def data():
    rng = np.random.default_rng(34)
    A = sp.random_array((300, 200), density=0.03, format='csr', rng=rng).tolil()
    A[[0, 7, 150, 299], :] = 0  # empty rows, first and last among them
    A = sp.csr_array(A)
    G = sp.random_array((200, 200), density=0.03, format='csr', dtype=np.float32, rng=rng).tolil()
    G[[3, 199], :] = 0
    G = sp.csr_array(G)
    assert A.nnz > 1000 and np.diff(A.indptr).min() == 0
    return {
        'A': A, 'A32': A.astype(np.float32), 'G': G,
        'x': rng.standard_normal(200), 'x32': rng.standard_normal(200).astype(np.float32),
        'B': rng.standard_normal((200, 64)), 'B19': rng.standard_normal((200, 19)),
        'U': rng.standard_normal((300, 64)), 'V': rng.standard_normal((64, 200)),
        'U19': rng.standard_normal((300, 19)), 'V19': rng.standard_normal((19, 200)),
        'X': rng.standard_normal((200, 37)).astype(np.float32),
        'W': rng.standard_normal((37, 19)).astype(np.float32),
    }


@pytest.fixture(params=sorted(TARGETS))
def target(request, monkeypatch):
    """Build for ``request.param`` (skipped where this CPU cannot run it); DaCe's compiler
    flags (and ``DACE_compiler_cpu_args``, where set) are restored afterwards."""
    arch = request.param
    try:
        march.check_target(arch)
    except DeviceError as exc:
        pytest.skip(str(exc))
    before = dace.Config.get('compiler', 'cpu', 'args')
    if 'DACE_compiler_cpu_args' in os.environ:
        monkeypatch.setenv('DACE_compiler_cpu_args', before)
    march.set_target(arch)
    try:
        yield arch
    finally:
        dace.Config.set('compiler', 'cpu', 'args', value=before)


def _build_folder(program) -> str:
    """The build folder of ``program``'s one compiled signature."""
    entries = list(program._cache.cache.values())
    assert len(entries) == 1
    return os.path.dirname(os.path.dirname(entries[0].compiled_sdfg.filename))


def _cxx_flags(folder: str) -> str:
    with open(os.path.join(folder, 'build', 'CMakeCache.txt')) as f:
        return next(line for line in f if line.startswith('CMAKE_CXX_FLAGS:'))


FOLDERS = {}


def test_kernels_built_for_each_target_agree_with_scipy(target, data):
    d = data
    assert march.current() == target and march.vector_bytes() == TARGETS[target] == march.vector_bytes(target)
    spmv, spmm, sddmm_gcn = _programs()

    y, y32 = spmv(d['A'], d['x'], d['A32'], d['x32'])
    np.testing.assert_allclose(y, d['A'] @ d['x'], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(y32, d['A32'] @ d['x32'], rtol=1e-5, atol=1e-5)
    assert y32.dtype == np.float32

    C, C19 = spmm(d['A'], d['B'], d['B19'])
    np.testing.assert_allclose(C, d['A'] @ d['B'], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(C19, d['A'] @ d['B19'], rtol=1e-12, atol=1e-12)

    S, S19, Y = sddmm_gcn(d['A'], d['U'], d['V'], d['U19'], d['V19'], d['G'], d['X'], d['W'])
    for got, u, v in ((S, d['U'], d['V']), (S19, d['U19'], d['V19'])):
        ref = d['A'].multiply(u @ v)
        np.testing.assert_allclose(sp.csr_array(got).toarray(), ref.toarray(), rtol=1e-12, atol=1e-12)
    ref = np.maximum(d['G'] @ (d['X'] @ d['W']), 0)
    np.testing.assert_allclose(Y, ref, rtol=1e-4, atol=1e-4)
    assert (Y == 0).any() and (Y > 0).any()

    folders = {_build_folder(p) for p in (spmv, spmm, sddmm_gcn)}
    assert len(folders) == 3
    for folder in folders:
        flags = _cxx_flags(folder)
        assert f'-march={target}' in flags.split() and '-march=native' not in flags, flags
    FOLDERS[target] = folders
    others = [f for t, fs in FOLDERS.items() if t != target for f in fs]
    assert not folders & set(others), 'a build folder was shared between targets'


def test_set_target_refuses_unknown_targets_and_what_this_cpu_lacks(monkeypatch):
    before = dace.Config.get('compiler', 'cpu', 'args')
    with pytest.raises(DeviceError, match=r"-march=no-such-cpu: the compiler \(.*\) refuses it"):
        march.set_target('no-such-cpu')
    with pytest.raises(DeviceError, match=r"-march '-O3': expected a target name"):
        march.set_target('-O3')
    if march.target_macros('x86-64-v4') is None or march.cpu_flags() is None:
        pytest.skip('the compiler does not know x86-64-v4 or /proc/cpuinfo is not readable')
    monkeypatch.setattr(march, 'cpu_flags', lambda: frozenset({'sse4_2', 'sse4_1', 'ssse3', 'popcnt'}))
    with pytest.raises(DeviceError, match=r'-march=x86-64-v3: this CPU \(.*\) cannot run code built for it: it lacks '
                       r'avx, avx2, .*fma.*; choose a target it can run'):
        march.set_target('x86-64-v3')
    assert dace.Config.get('compiler', 'cpu', 'args') == before


def test_describe_names_cpu_compiler_and_target():
    d = march.describe()
    assert set(d) == {'cpu', 'compiler', 'compiler_version', 'march', 'native', 'vector_bytes', 'flags'}
    assert d['march'] == march.current()
    if d['march'] is not None:
        assert f'-march={d["march"]}' in d['flags'].split()
    assert d['vector_bytes'] in (16, 32, 64)
    if 'Free Software Foundation' in (march._output(d['compiler'], '--version') or ''):  # GCC resolves native
        assert d['native'] not in ('', 'unknown', 'native') and d['compiler_version'] != 'unknown'


def test_flags_from_the_environment_name_their_own_build_folder(monkeypatch):
    """``sdfgsparse bench --march`` hands its flags to child processes through
    ``DACE_compiler_cpu_args``; the build folder's name must see them (it read DaCe's
    section dict, which ignores the variable: two targets shared a folder)."""
    from sdfgsparse.build.naming import content_hash

    @dace.program
    def march_env_probe(x: dace.float64[N]):
        return x + 1

    sdfg = march_env_probe.to_sdfg()
    names = set()
    for arch in ('x86-64-v2', 'x86-64-v3'):
        monkeypatch.setenv('DACE_compiler_cpu_args', f'-O3 -march={arch}')
        assert dace.Config.get('compiler', 'cpu', 'args') == f'-O3 -march={arch}'
        names.add(content_hash(sdfg))
    assert len(names) == 2


def test_set_target_also_changes_the_flags_of_the_environment(monkeypatch):
    """Where ``DACE_compiler_cpu_args`` is set, DaCe reads it before its settings."""
    monkeypatch.delenv('DACE_compiler_cpu_args', raising=False)
    before = dace.Config.get('compiler', 'cpu', 'args')
    monkeypatch.setenv('DACE_compiler_cpu_args', '-O3 -march=native -fPIC')
    try:
        assert march.set_target('x86-64-v2') == 'native'
        flags = '-O3 -march=x86-64-v2 -fPIC'
        assert os.environ['DACE_compiler_cpu_args'] == flags == dace.Config.get('compiler', 'cpu', 'args')
    finally:
        dace.Config.set('compiler', 'cpu', 'args', value=before)
