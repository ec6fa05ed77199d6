"""One OpenMP runtime per process (:mod:`sdfgsparse.targets.cpu.openmp`).

Binding is process-wide, so each case runs in a child process. A library's private
runtime (python-graphblas's wheel ships one) is made here by copying the system's
libgomp with its soname renamed. Which runtime runs a parallel region is observed, not
assumed: the runtime's thread count is set to 1 through one runtime's own handle, and a
generated (or user) library reports the team size it got.
"""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import sdfgsparse  # noqa: F401  (binds this process)
from sdfgsparse.targets.cpu import openmp

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith('linux'), reason='the OpenMP binding is Linux-only'),
    pytest.mark.xdist_group('openmp'),
]

RENAMED = b'libgomp-t1.1'  # as long as b'libgomp.so.1', so the dynamic string table keeps its layout


@pytest.fixture(scope='module')
def system_runtime():
    rec = openmp.describe()
    path = rec['runtime']
    if not path or not os.path.isabs(path):
        pytest.skip(f'no system libgomp found ({rec})')
    return path


@pytest.fixture(scope='module')
def renamed_runtime(tmp_path_factory, system_runtime):
    """A copy of the system libgomp whose soname is ``libgomp-t1.1`` (a private runtime)."""
    data = open(system_runtime, 'rb').read()
    if data.count(b'libgomp.so.1\0') != 1:
        pytest.skip('the soname string of the system libgomp is not unique')
    path = tmp_path_factory.mktemp('gomp') / RENAMED.decode()
    path.write_bytes(data.replace(b'libgomp.so.1\0', RENAMED + b'\0'))
    return str(path)


@pytest.fixture(scope='module')
def user_library(tmp_path_factory, renamed_runtime):
    """A user's OpenMP library linked against the renamed runtime, reporting its team size."""
    gcc = shutil.which('gcc')
    if gcc is None:
        pytest.skip('no gcc')
    d = tmp_path_factory.mktemp('user')
    (d / 'user.c').write_text(
        '#include <omp.h>\nint team(void) { int n = 0;\n#pragma omp parallel\n{\n#pragma omp single\n'
        'n = omp_get_num_threads();\n}\nreturn n; }\n')
    subprocess.run([gcc, '-fopenmp', '-fPIC', '-c', str(d / 'user.c'), '-o', str(d / 'user.o')], check=True)
    rpath = f'-Wl,-rpath,{os.path.dirname(renamed_runtime)}'
    subprocess.run([gcc, '-shared', str(d / 'user.o'), renamed_runtime, rpath, '-o', str(d / 'libuser.so')], check=True)
    return str(d / 'libuser.so')


TEAM_PROGRAM = '''
import ctypes, json, os, sys
import dace, numpy as np
{before}
import sdfgsparse as ss
from sdfgsparse.targets.cpu import openmp
{after}

@dace.program
def team(out: dace.int32[8]):
    for i in dace.map[0:8]:
        with dace.tasklet(dace.Language.CPP):
            o >> out[i]
            """o = omp_get_num_threads();"""

sdfg = team.to_sdfg()
sdfg.append_global_code('#include <omp.h>')
compiled = ss.compile(sdfg)
out = np.zeros(8, np.int32)
compiled(out=out)
rec = openmp.describe()
print(json.dumps({{'action': rec['action'], 'why': rec.get('why'), 'runtime': rec['runtime'],
                  'competing': rec['competing'],
                  'refused': rec.get('refused', {{}}), 'team': int(out.max()), 'extra': extra}}))
'''


def _child(code: str, **env):
    import json
    import tempfile
    full = dict(os.environ, **{'OMP_NUM_THREADS': '2', **env})
    with tempfile.TemporaryDirectory() as d:  # in a file: DaCe reads a program's source
        script = os.path.join(d, 'child.py')
        with open(script, 'w') as f:
            f.write(code)
        proc = subprocess.run([sys.executable, script], capture_output=True, text=True, env=full, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _team_program(before: str = '', after: str = 'extra = None') -> str:
    return TEAM_PROGRAM.format(before=textwrap.dedent(before), after=textwrap.dedent(after))


def test_alone_loads_the_system_runtime_and_uses_every_thread(system_runtime):
    got = _child(_team_program())
    assert got['action'] == 'loaded' and got['runtime'] == system_runtime
    assert got['team'] == 2 and got['competing'] == []


def test_a_private_runtime_loaded_first_runs_our_parallel_regions(renamed_runtime):
    # The private runtime is told to use one thread through its own handle; our
    # generated library then gets a team of one: its regions run on that runtime.
    before = f'''
        private = ctypes.CDLL({renamed_runtime!r}, mode=os.RTLD_LOCAL)
        private.omp_set_num_threads(1)
    '''
    got = _child(_team_program(before))
    assert got['action'] == 'bound' and got['runtime'] == renamed_runtime, got
    assert got['team'] == 1, got
    assert got['competing'] == []


def test_without_binding_the_private_runtime_competes(renamed_runtime):
    before = f'''
        private = ctypes.CDLL({renamed_runtime!r}, mode=os.RTLD_LOCAL)
        private.omp_set_num_threads(1)
    '''
    got = _child(_team_program(before), SDFGSPARSE_OPENMP='private')
    assert got['action'] == 'none' and got['why'] == 'SDFGSPARSE_OPENMP=private'
    assert got['team'] == 2  # our regions ran on a second runtime
    assert renamed_runtime in got['competing']


def test_a_library_loaded_later_runs_on_our_runtime(user_library):
    # The user's library names its private runtime; loaded after sdfgsparse, it binds to
    # ours (told through our handle to use one thread), and that runtime stays idle.
    after = f'''
        ours = ctypes.CDLL('libgomp.so.1', mode=os.RTLD_NOLOAD)
        user = ctypes.CDLL({user_library!r})
        ours.omp_set_num_threads(1)
        extra = user.team()
        ours.omp_set_num_threads(2)
    '''
    got = _child(_team_program(after=after))
    assert got['action'] == 'loaded'
    assert got['extra'] == 1, got  # the user's region ran on our runtime
    assert got['team'] == 2 and got['competing'] == []


def test_a_runtime_without_our_entry_points_is_not_bound(tmp_path):
    gcc = shutil.which('gcc')
    if gcc is None:
        pytest.skip('no gcc')
    (tmp_path / 'fake.c').write_text('int omp_get_num_threads(void) { return 1; }\n')
    fake = str(tmp_path / 'libgomp-fake.so')
    subprocess.run([gcc, '-shared', '-fPIC', str(tmp_path / 'fake.c'), '-o', fake], check=True)
    got = _child(_team_program(f'ctypes.CDLL({fake!r}, mode=os.RTLD_LOCAL)'))
    assert got['action'] == 'loaded' and got['team'] == 2
    assert 'lacks omp_get_max_threads@OMP_1.0' in got['refused'][fake]


def test_generated_libraries_call_only_the_listed_entry_points():
    """A new OpenMP construct in a kernel must be added to ENTRY_POINTS (the check that a
    runtime can run our libraries before it is bound)."""
    readelf = shutil.which('readelf')
    if readelf is None:
        pytest.skip('no readelf')
    import sdfgsparse as ss
    from sdfgsparse.bench.programs import bench_add, bench_spgemm, bench_spmv
    listed = {f'{n}@{v}' for n, v in openmp.ENTRY_POINTS}
    seen = set()
    for prog in (bench_spmv, bench_spgemm, bench_add):
        lib = ss.compile(prog.to_sdfg()).compiled.filename
        out = subprocess.run([readelf, '--dyn-syms', '-W', lib], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) >= 8 and parts[6] == 'UND' and parts[7].split('@')[0].startswith(('GOMP_', 'omp_')):
                seen.add(parts[7].replace('@@', '@').split(' ')[0])
    assert {'GOMP_parallel@GOMP_4.0', 'omp_get_thread_num@OMP_1.0'} <= seen  # the scan sees them at all
    assert seen <= listed, seen - listed


def test_row_maps_are_scheduled_dynamically_and_agree_with_scipy():
    """SpMV, SpMM and A + A.T take their rows in dynamic chunks (power-law rows would leave
    a static half's thread idle); with 3 threads on a power-law matrix of many chunks
    they agree with scipy."""
    from sdfgsparse.targets.cpu.builder import ROW_CHUNK
    code = f'''
import glob, json, os
import numpy as np, scipy.sparse as sp
import sdfgsparse as ss
from sdfgsparse.bench.matrices import rmat
from sdfgsparse.bench.programs import bench_add, bench_spmm, bench_spmv
A = rmat(13, 8)  # 8192 rows, power-law
rng = np.random.default_rng(0)
x, B = rng.standard_normal(A.shape[1]), rng.standard_normal((A.shape[1], 5))
errors, dynamic = [], {{}}
for rep in range(3):
    errors.append(float(np.abs(bench_spmv(A, x) - A @ x).max()))
    errors.append(float(np.abs(bench_spmm(A, B) - A @ B).max()))
    errors.append(float(abs(bench_add(A) - (A + A.T)).max()))
for prog in (bench_spmv, bench_spmm, bench_add):
    lib = ss.compile(prog.to_sdfg()).compiled.filename
    src = glob.glob(os.path.join(os.path.dirname(os.path.dirname(lib)), 'src', 'cpu', '*.cpp'))
    dynamic[prog.name] = sum(open(f).read().count('schedule(dynamic, {ROW_CHUNK})') for f in src)
print(json.dumps({{'error': max(errors), 'dynamic': dynamic, 'extra': None}}))
'''
    got = _child(code, OMP_NUM_THREADS='3')
    assert got['error'] < 1e-9, got
    assert all(n >= 1 for n in got['dynamic'].values()), got
