"""The distributed cases (mpi_cases.py) under ``mpiexec -n 1, 2, 3, 4``: results equal
scipy's on every format and partition, bytes at the partition's lower bound, an error on
one process raises on all. On two cores 3 and 4 processes are oversubscribed (the waits
then yield the core). A hang is a failure: each run has a timeout. Also ``sdfgsparse bench
--distributed`` on 2 processes."""
import os
import shutil
import subprocess
import sys

import pytest

pytest.importorskip('mpi4py', reason="the [mpi] extra (mpi4py, mpich) is not installed")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MPIEXEC = shutil.which('mpiexec', path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get('PATH', ''))

pytestmark = [pytest.mark.skipif(MPIEXEC is None, reason='no mpiexec next to this Python or on PATH'),
              pytest.mark.xdist_group('mpi')]


def run_cases(processes: int, *args, timeout=600):
    env = dict(os.environ, OMP_NUM_THREADS='1', DACE_cache='hash')
    # python -m mpi4py: an uncaught exception on one process aborts all (MPI_Abort) instead
    # of leaving the others in a collective
    return subprocess.run([MPIEXEC, '-n', str(processes), sys.executable, '-m', 'mpi4py',
                           os.path.join(HERE, 'mpi_cases.py'), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize('processes', [1, 2, 3, 4])
def test_cases_under_mpiexec(processes):
    done = run_cases(processes)
    out = done.stdout + done.stderr
    assert done.returncode == 0 and 'CASES OK 10' in done.stdout, out[-6000:]


def test_a_failing_case_fails_the_run():
    """The harness itself: a run whose case fails must not pass (an unknown case name
    runs nothing and says so; a process that exits or raises ends the whole run with a
    non-zero status, not a hang)."""
    done = run_cases(2, 'no_such_case', timeout=300)
    assert 'CASES OK 0' in done.stdout
    env = dict(os.environ, OMP_NUM_THREADS='1')
    script = 'from mpi4py import MPI\nimport sys\nif MPI.COMM_WORLD.rank == 1: sys.exit(3)\nMPI.COMM_WORLD.Barrier()\n'
    failed = subprocess.run([MPIEXEC, '-n', '2', sys.executable, '-m', 'mpi4py', '-c', script], env=env,
                            capture_output=True, text=True, timeout=120)
    assert failed.returncode != 0
    script = 'from mpi4py import MPI\nif MPI.COMM_WORLD.rank == 1: raise AssertionError("boom")\nMPI.COMM_WORLD.Barrier()\n'
    failed = subprocess.run([MPIEXEC, '-n', '2', sys.executable, '-m', 'mpi4py', '-c', script], env=env,
                            capture_output=True, text=True, timeout=120)
    assert failed.returncode != 0 and 'boom' in failed.stderr


def test_bench_distributed_under_mpiexec(tmp_path):
    """``sdfgsparse bench --distributed`` on 2 processes: every row sends its bound, has a
    model with every process's inputs, and a second measurement; exit status 0."""
    import json
    os.symlink(os.path.join(ROOT, 'tests', 'data', 'cora_A.mtx.gz'), tmp_path / 'cora_A.mtx.gz')
    out = tmp_path / 'bench.json'
    env = dict(os.environ, OMP_NUM_THREADS='1', DACE_cache='hash')
    done = subprocess.run([MPIEXEC, '-n', '2', sys.executable, '-m', 'mpi4py', '-m', 'sdfgsparse', 'bench',
                           '--distributed', '--matrices', str(tmp_path), '--kernels', 'spmv,spmm:4,cg', '--repeat', '3',
                           '--json', str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    assert 'ping-pong rank 0 <-> 1' in done.stdout
    report = json.loads(out.read_text())
    rows = [r for r in report['rows'] if 'model_seconds' in r]
    assert {(r['partition'], r['kernel']) for r in rows} == {(p, k) for p in ('rows', '2d', 'arrow')
                                                             for k in ('spmv', 'spmm:4', 'cg')}
    for r in rows:
        assert r['bytes_total'] == r['bound_bytes'] and r['processes'] == 2
        assert 0 < r['model_seconds'] < 1 and 0 < r['seconds'] < 1 and 0 < r['again_seconds'] < 1
        inputs = r['model_inputs']
        assert len(inputs['compute']) == 2 and len(inputs['choices']) == 2 and inputs['progress'] == 0.0
        assert all(v >= 0 for v in inputs['compute'] + inputs['beta_pack'] + inputs['beta_copy'])
    assert len(report['beta_table']) == 8
