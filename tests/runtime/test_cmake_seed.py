"""The build cache (:mod:`sdfgsparse.build.folder`, :mod:`sdfgsparse.build.cmake_seed`): build
folders named by the SDFG's content, and new build folders that start from a CMake seed.

Each test builds into its own DaCe build folder with its own seed folder, so the builds
are real cold builds (code generation, CMake, g++)."""
import os
import re

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.build import cmake_seed

M, N = dace.symbol('M'), dace.symbol('N')


def _spmv_program():
    # a new program object per call: DaCe's in-memory cache must not answer

    @dace.program
    def seed_spmv(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
        return A @ x

    return seed_spmv


def _scaled_program():

    @dace.program
    def seed_scaled(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
        return 2.0 * (A @ x)

    return seed_scaled


@pytest.fixture
def folders(tmp_path, monkeypatch):
    seeds = tmp_path / 'seeds'
    monkeypatch.setenv('SDFGSPARSE_CMAKE_SEEDS', str(seeds))
    with dace.config.set_temporary('default_build_folder', value=str(tmp_path / 'build')):
        yield seeds, tmp_path / 'build'


def _matrix():
    A = sp.random(30, 20, density=0.2, format='csr', random_state=3)
    return A, np.random.default_rng(3).random(20)


def _build_dirs(build):
    return sorted(p / 'build' for p in build.iterdir() if (p / 'build').is_dir())


def test_second_program_starts_from_the_seed_of_the_first(folders):
    seeds, build = folders
    A, x = _matrix()
    planted = cmake_seed.SEEDS['planted']
    np.testing.assert_allclose(_spmv_program()(A, x), A @ x)
    # the first build configured from scratch and left one seed, without its own path
    assert cmake_seed.SEEDS['planted'] == planted
    (seed, ) = list(seeds.iterdir())
    (first, ) = _build_dirs(build)
    assert not (first / '.ss-seeded').exists()
    text = (seed / 'CMakeCache.txt').read_text()
    assert str(first) not in text and '@SS_BUILD_DIR@' in text
    assert list((seed / 'CMakeFiles').iterdir())

    np.testing.assert_allclose(_scaled_program()(A, x), 2.0 * (A @ x))
    assert cmake_seed.SEEDS['planted'] == planted + 1
    second = next(d for d in _build_dirs(build) if d != first)
    # started from the seed, and CMake detected nothing (CMake < 3.26 logs detection here)
    assert (second / '.ss-seeded').is_file()
    assert not (second / 'CMakeFiles' / 'CMakeOutput.log').exists()
    cache = (second / 'CMakeCache.txt').read_text()
    assert f'CMAKE_CACHEFILE_DIR:INTERNAL={second}' in cache and '@SS_BUILD_DIR@' not in cache
    assert re.search(r'^DACE_PROGRAM_NAME:STRING=\w*seed_scaled$', cache, re.M)
    assert len(list(seeds.iterdir())) == 1


def test_a_broken_seed_falls_back_to_a_full_configure_and_is_replaced(folders):
    seeds, build = folders
    A, x = _matrix()
    np.testing.assert_allclose(_spmv_program()(A, x), A @ x)
    (seed, ) = list(seeds.iterdir())
    good = (seed / 'CMakeCache.txt').read_text()
    broken = '\n'.join('CMAKE_CXX_COMPILER:FILEPATH=/nonexistent/c++' if l.startswith('CMAKE_CXX_COMPILER:') else l
                       for l in good.splitlines())
    assert broken != good
    (seed / 'CMakeCache.txt').write_text(broken)

    planted = cmake_seed.SEEDS['planted']
    np.testing.assert_allclose(_scaled_program()(A, x), 2.0 * (A @ x))
    assert cmake_seed.SEEDS['planted'] == planted + 1
    # DaCe's retry configured from scratch; that configuration is the seed now
    assert '/nonexistent/c++' not in (seed / 'CMakeCache.txt').read_text()


def test_seeds_switched_off(folders, monkeypatch):
    seeds, build = folders
    monkeypatch.setenv('SDFGSPARSE_CMAKE_SEEDS', '')
    A, x = _matrix()
    np.testing.assert_allclose(_spmv_program()(A, x), A @ x)
    assert not seeds.exists()


def test_the_key_ignores_the_program_but_not_the_flags():
    cmd = ('cmake "/dace/codegen" -DDACE_SRC_DIR="/a/prog1_x/src" -DDACE_FILES="cpu/prog1.cpp" '
           '-DDACE_PROGRAM_NAME=prog1 -DCMAKE_CXX_FLAGS="-O3 -march=native" -DCMAKE_BUILD_TYPE=Release')
    other = cmd.replace('prog1', 'other2')
    assert other != cmd
    assert cmake_seed.cmake_seed_key(other) == cmake_seed.cmake_seed_key(cmd)
    assert cmake_seed.cmake_seed_key(cmd.replace('-O3', '-O2')) != cmake_seed.cmake_seed_key(cmd)
    assert cmake_seed.cmake_seed_key(cmd.replace('Release', 'Debug')) != cmake_seed.cmake_seed_key(cmd)


_REUSED = """
import sys, dace, numpy as np, scipy.sparse as sp
import sdfgsparse as ss
M, N = dace.symbol('M'), dace.symbol('N')
if len(sys.argv) > 2:  # this process makes other sparse types first
    OTHERS = [ss.CSR[dace.float32, 3, 3], ss.CSC[dace.float64, M, N], ss.COO[dace.float64, N, N]]


@dace.program
def seed_reused(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


@dace.program
def seed_sum(A: ss.CSR[dace.float64, N, N]):
    return A + A.T


if __name__ == '__main__':
    A = sp.random(30, 20, density=0.2, format='csr', random_state=3)
    x = np.random.default_rng(1).random(20)
    S = sp.random(25, 25, density=0.2, format='csr', random_state=4)
    with dace.config.set_temporary('default_build_folder', value=sys.argv[1]):
        assert np.allclose(seed_reused(A, x), A @ x)
        assert np.allclose(seed_sum(S).toarray(), (S + S.T).toarray())
"""


def _libraries(build):
    return {p: p.stat().st_mtime_ns for p in build.rglob('*.so')}


def test_a_second_process_reuses_the_build_folder(folders, tmp_path):
    """The folder is named by the SDFG's content, not by its random GUIDs, so a
    second process running the same programs finds their builds: no new folder, no library
    built again. The processes hash strings differently (``PYTHONHASHSEED``): ``A + A.T``
    had its edges (simplify) and its two structs (code generation) in a per-process order
    before the content-named folders (sdfgsparse.build) and _dace_compat patch 10 fixed both
    orders. The last process makes other sparse types
    before defining the programs: their size symbols are named by where they are made, not
    by how many types the process made before."""
    import subprocess
    import sys
    seeds, build = folders
    script = tmp_path / 'reused_program.py'
    script.write_text(_REUSED)
    run = lambda seed, *extra: subprocess.run([sys.executable, str(script), str(build), *extra], cwd=tmp_path,
                                              check=True, capture_output=True,
                                              env=dict(os.environ, OMP_NUM_THREADS='1', PYTHONHASHSEED=str(seed)))
    run(1)
    first = _build_dirs(build)
    libs = _libraries(build)
    assert len(first) == 2 and len(libs) == 4  # each program and its DaCe stub
    for seed, extra in ((2, ()), (3, ()), (1, ('others', ))):
        run(seed, *extra)
        assert _build_dirs(build) == first, extra
        assert _libraries(build) == libs  # make found them up to date
