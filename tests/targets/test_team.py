"""The thread count of a kernel's row loop, chosen per call (:mod:`sdfgsparse.targets.cpu.team`).

The choice itself is checked on the header's own functions, driven with given timings
(a small C++ program: no clock, no machine load in the outcome); the generated kernels
are checked to agree with scipy under every policy, to restore the caller's OpenMP
thread count, and to carry the begin and end states.
"""
import ctypes
import json
import os
import shutil
import subprocess
import sys
import textwrap

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.targets.cpu import team

pytestmark = pytest.mark.skipif(not sys.platform.startswith('linux'), reason='GNU OpenMP on Linux')

M, N, K = (dace.symbol(s) for s in 'MNK')

# Each phase: calls, seconds per unit of work with one thread and with the team, work per call.
DRIVER = r'''
#include "sdfgsparse_team.h"
#include <cstdio>
using namespace sdfgsparse;
int main() {
    static TeamSite site;
    struct Phase { int calls; double one, team; long long work; int available; bool nested; } phases[] = {
        {200, 2e-9, 1e-9, 1 << 20, 2, false},   // quiet: the team twice as fast
        {100, 2e-9, 5e-9, 1 << 20, 2, false},   // another process busy: the team slower than one thread
        {600, 2e-9, -1, 1 << 20, 2, false},     // busy, the team now fast, now 25x slower (its thread descheduled)
        {1500, 2e-9, 1e-9, 1 << 20, 2, false},  // quiet again
        {50, 2e-9, 1e-9, 30000, 2, false},       // little work
        {50, 2e-9, 1e-9, 1 << 20, 2, true},      // inside a parallel region
        {50, 2e-9, 5e-9, 1LL << 27, 2, false},   // a large loop: the team, unmeasured, even when slower
        {50, 2e-9, 1e-9, 1 << 20, 1, false},     // one thread available
    };
    std::printf("[");
    bool first = true;
    for (const Phase& p : phases) {
        std::printf(first ? "[" : ",[");
        first = false;
        for (int i = 0; i < p.calls; ++i) {
            TeamCall c = team_choose(site, p.work, p.available, p.nested, TEAM_ADAPTIVE);
            const double team = p.team >= 0 ? p.team : (i % 3 == 0 ? 1e-9 : 5e-8);
            team_record(c, (c.threads > 1 ? team : p.one) * (double)p.work);
            std::printf(i ? ",%d" : "%d", c.threads);
        }
        std::printf("]");
    }
    TeamSite other;
    TeamCall a = team_choose(other, 10, 4, false, TEAM_ALWAYS), o = team_choose(other, 1 << 30, 4, false, TEAM_ONE);
    std::printf(",[%d,%d]", a.threads, o.threads);
    // two shapes through one loop, alternating (the layers of a network): the team is 1.7x
    // faster for each, but the second costs 4x more per unit of work than the first
    static TeamSites sites;
    std::printf(",[");
    for (int i = 0; i < 400; ++i) {
        const bool wide = i % 2;
        TeamCall c = team_choose(team_site(sites, wide ? 5000 : 400, wide ? 196 : 12544, wide ? 512 : 64),
                                 1 << 22, 2, false, TEAM_ADAPTIVE);
        team_record(c, (c.threads > 1 ? 0.6e-9 : 1e-9) * (wide ? 4 : 1) * (double)(1 << 22));
        std::printf(i ? ",%d" : "%d", c.threads);
    }
    std::printf("],[%d,%d]]\n", &team_site(sites, 400, 12544, 64) == &team_site(sites, 400, 12544, 64),
                &team_site(sites, 400, 12544, 64) != &team_site(sites, 5000, 196, 512));
}
'''


@pytest.fixture(scope='module')
def choices(tmp_path_factory):
    cxx = shutil.which('g++') or shutil.which('c++')
    if cxx is None:
        pytest.skip('no C++ compiler')
    d = tmp_path_factory.mktemp('team')
    (d / 'driver.cpp').write_text(DRIVER)
    subprocess.run([cxx, '-std=c++14', '-O1', '-fopenmp', f'-I{os.path.dirname(team.HEADER)}', str(d / 'driver.cpp'),
                    '-o', str(d / 'driver')], check=True)
    return json.loads(subprocess.run([str(d / 'driver')], check=True, capture_output=True, text=True).stdout)


def test_the_team_when_it_is_faster(choices):
    quiet = choices[0]
    assert quiet[0] == 2  # the first call: the team, not measured
    singles = quiet.count(1)
    # one thread: the first measure, then only the tries, ever rarer (intervals 16, 32, 64, 128)
    assert 1 <= singles <= 6, quiet
    assert quiet[-40:].count(1) <= 1


def test_one_thread_while_the_team_is_slower_and_back(choices):
    busy, erratic, quiet_again = choices[1], choices[2], choices[3]
    # falls back once most of the recent team calls were slow (5 of 8); tries stay rare
    assert busy.index(1) <= 5 and busy[6:].count(2) <= 4, busy
    # a try that won by chance is undone at the next call, and the tries get rarer
    assert erratic.count(2) <= 20 and erratic[300:].count(2) <= 4, erratic
    assert quiet_again.index(2) <= 1024 and quiet_again[-100:].count(1) <= 2, quiet_again


def test_shapes_through_one_loop_are_compared_each_with_its_own(choices):
    """Before: one site for every call of a loop; the wide shape's team times against the
    narrow one's single-thread times made the team look 2.4x slower, and both ran alone."""
    alternating, (same, apart) = choices[9], choices[10]
    assert alternating[40:].count(1) <= 6, alternating
    assert same and apart


def test_little_work_nested_or_one_thread_available_run_alone_a_large_loop_with_the_team(choices):
    little, nested, large, alone, (always, never) = choices[4], choices[5], choices[6], choices[7], choices[8]
    assert set(little) == {1} and set(nested) == {1} and set(alone) == {1} and set(large) == {2}
    assert (always, never) == (4, 1)


@dace.program
def team_spmv(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


@dace.program
def team_spmm(A: ss.CSR[dace.float64, M, N], B: dace.float64[N, K]):
    return A @ B


def _matrix(seed=3, m=900, n=700):
    rng = np.random.default_rng(seed)
    A = sp.random(m, n, density=0.05, format='csr', random_state=rng)
    A = A.tolil()
    A[5:40] = 0  # empty rows
    return A.tocsr()


def _gomp():
    return ctypes.CDLL('libgomp.so.1')


def test_kernels_carry_the_team_and_restore_the_callers_thread_count():
    A = _matrix()
    x = np.random.default_rng(1).random(A.shape[1])
    B = np.random.default_rng(2).random((A.shape[1], 24))
    sdfg = team_spmm.to_sdfg(A, B)
    sdfg.expand_library_nodes()
    labels = {s.label for g in sdfg.all_sdfgs_recursive() for s in g.all_states()}
    assert any(l.endswith('_team_begin') for l in labels) and any(l.endswith('_team_end') for l in labels)
    gomp = _gomp()
    before = gomp.omp_get_max_threads()
    for _ in range(40):  # the first calls measure the team and one thread; the tries follow
        np.testing.assert_allclose(team_spmv(A, x), A @ x, rtol=1e-12)
        np.testing.assert_allclose(team_spmm(A, B), A @ B, rtol=1e-12)
        assert gomp.omp_get_max_threads() == before


SCRIPT = textwrap.dedent('''
    import sys, numpy as np, scipy.sparse as sp
    sys.path.insert(0, {tests!r})
    from targets.test_team import team_spmv, team_spmm, _matrix
    A = _matrix(seed=7)
    x = np.random.default_rng(1).random(A.shape[1])
    B = np.random.default_rng(2).random((A.shape[1], 19))
    for _ in range(30):
        np.testing.assert_allclose(team_spmv(A, x), A @ x, rtol=1e-12)
        np.testing.assert_allclose(team_spmm(A, B), A @ B, rtol=1e-12)
    print('ok')
''')


@pytest.mark.parametrize('policy', ['team', 'one', 'adaptive'])
def test_every_policy_computes_the_same(policy):
    env = dict(os.environ, SDFGSPARSE_TEAM=policy, OMP_NUM_THREADS='2')
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, '-c', SCRIPT.format(tests=tests)], env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0 and out.stdout.strip().endswith('ok'), out.stderr[-3000:]
