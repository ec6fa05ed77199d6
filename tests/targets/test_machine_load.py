"""How many threads the machine can give a call now (``include/sdfgsparse_load.h``): the
tasks of other processes that run or wait to run take cores from a call's team, the
process's own running threads do not, ``SDFGSPARSE_LOAD=ignore`` and ``SDFGSPARSE_TEAM=team``
turn the count off, and programs called beside busy processes compute the same and leave the
caller's OpenMP thread count as it was."""
import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from sdfgsparse.bench.busy import spin_cores, spinners
from sdfgsparse.targets.cpu.environment import INCLUDE

pytestmark = [pytest.mark.skipif(not sys.platform.startswith('linux'), reason='/proc and affinity are Linux-only'),
              pytest.mark.skipif(shutil.which('g++') is None, reason='needs g++')]

CORES = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else 1

DRIVER = r'''
#include "sdfgsparse_load.h"
#include <cstdio>
#include <cstdlib>
int main(int argc, char** argv) {
    const int wanted = std::atoi(argv[1]);
    long here = 0;
    // a region whose workers then spin (OMP_WAIT_POLICY=active): they are this process's
    #pragma omp parallel num_threads(wanted)
    { if (omp_get_thread_num() == 0) here = 0; }
    here = sdfgsparse::load_running_here(wanted);
    std::printf("%d %d %ld %d\n", sdfgsparse::machine_threads(wanted), sdfgsparse::load_cores(), here,
                sdfgsparse::machine_threads(1));
    return 0;
}
'''


@pytest.fixture(scope='module')
def driver(tmp_path_factory):
    d = tmp_path_factory.mktemp('load')
    src, exe = d / 'load.cpp', d / 'load'
    src.write_text(DRIVER)
    subprocess.run(['g++', '-O1', '-std=c++14', '-fopenmp', f'-I{INCLUDE}', str(src), '-o', str(exe)], check=True,
                   capture_output=True, timeout=120)
    return str(exe)


def _run(exe, wanted, **env):
    e = {k: v for k, v in os.environ.items() if k not in ('SDFGSPARSE_LOAD', 'SDFGSPARSE_TEAM')}
    e.update(OMP_WAIT_POLICY='active', GOMP_SPINCOUNT='infinite', **env)
    out = subprocess.run([exe, str(wanted)], env=e, capture_output=True, text=True, timeout=60, check=True)
    threads, cores, here, one = (int(v) for v in out.stdout.split())
    return threads, cores, here, one


def _settle(spinning):
    """Wait until every spinner runs its loop (state R), at most a few seconds."""
    for _ in range(100):
        states = []
        for s in spinning:
            with open(f'/proc/{s.pid}/stat') as f:
                states.append(f.read().rsplit(')', 1)[1].split()[0])
        if all(st == 'R' for st in states):
            return
        time.sleep(0.05)


def test_the_callers_team_spinning_after_a_region_is_not_load(driver):
    threads, cores, here, one = _run(driver, 2)
    assert cores == CORES and one == 1
    assert here == 2  # the calling thread and its worker, spinning (OMP_WAIT_POLICY=active)
    assert 1 <= threads <= 2


@pytest.mark.skipif(CORES < 2, reason='one core: one thread either way')
def test_other_processes_running_take_the_cores_of_a_team(driver):
    with spinners(CORES) as spinning:
        _settle(spinning)
        threads, _, _, _ = _run(driver, CORES)
        assert threads == 1
        # turned off: the count asked for
        assert _run(driver, CORES, SDFGSPARSE_LOAD='ignore')[0] == CORES
        assert _run(driver, CORES, SDFGSPARSE_TEAM='team')[0] == CORES


def test_spinners_go_from_the_last_core_downwards_and_round_again():
    cores = sorted(os.sched_getaffinity(0), reverse=True)
    assert spin_cores(1) == cores[:1]
    assert spin_cores(len(cores) + 1) == cores + cores[:1]
    with pytest.raises(ValueError, match='at least 1'):
        spin_cores(0)


SCRIPT = textwrap.dedent('''
    import ctypes, ctypes.util, numpy as np, scipy.sparse as sp, dace
    import sdfgsparse as ss
    M, N = dace.symbol('M'), dace.symbol('N')

    @dace.program
    def load_spmv(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
        return A @ x

    @dace.program
    def load_add(A: ss.CSR[dace.float64, N, N]):
        return A + A.T

    A = sp.random(3000, 3000, density=0.02, format='csr', random_state=3)
    x = np.random.default_rng(1).random(3000)
    gomp = ctypes.CDLL('libgomp.so.1')
    before = gomp.omp_get_max_threads()
    for _ in range(50):
        np.testing.assert_allclose(load_spmv(A, x), A @ x, rtol=1e-12)
        assert abs(load_add(A) - (A + A.T)).max() < 1e-12
        assert gomp.omp_get_max_threads() == before
    print('ok', before)
''')


@pytest.mark.skipif(CORES < 2, reason='one core: one thread either way')
def test_programs_beside_busy_processes_compute_the_same_and_restore_the_thread_count(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS=str(CORES), DACE_cache='hash')
    env.pop('SDFGSPARSE_LOAD', None)
    env.pop('SDFGSPARSE_TEAM', None)
    script = tmp_path / 'busy_programs.py'  # (DaCe reads a program's source from its file)
    script.write_text(SCRIPT)
    with spinners(CORES + 1) as spinning:
        _settle(spinning)
        out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=900,
                             cwd=str(tmp_path))
    assert out.returncode == 0 and out.stdout.split()[:2] == ['ok', str(CORES)], out.stderr[-3000:]
