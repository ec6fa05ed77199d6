"""``sdfgsparse bench --check`` (:mod:`sdfgsparse.bench.check`): the check over synthetic
results, and one end-to-end run whose exit status and printed verdict must agree (the
timing outcome itself is never asserted)."""
import os

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from sdfgsparse.bench import cli
from sdfgsparse.bench.check import check_against_scipy
from sdfgsparse.bench.results import BenchResult, Result

pytestmark = pytest.mark.xdist_group('bench')


def _r(kernel, matrix, system, ms, correct=True, error=None):
    t = None if ms is None else ms / 1e3
    return Result(kernel, matrix, system, median_s=t, min_s=t, max_s=t, correct=correct, error=error,
                  runs=0 if t is None else 3)


def test_a_slower_kernel_is_listed_and_fails():
    res = BenchResult(results=[
        _r('spmv', 'a', 'sdfgsparse', 1.0), _r('spmv', 'a', 'scipy', 2.0), _r('spmv', 'a', 'torch', 0.5),
        _r('spmm:64', 'a', 'sdfgsparse', 3.0), _r('spmm:64', 'a', 'scipy', 1.5),
        _r('spmm:64', 'b', 'sdfgsparse-opt', 0.9), _r('spmm:64', 'b', 'sdfgsparse', 1.2),
        _r('spmm:64', 'b', 'scipy', 1.0),
    ])
    check = check_against_scipy(res)
    assert not check.ok and check.passed == 2 and check.unchecked == []
    assert [(s.kernel, s.matrix, s.system) for s in check.slower] == [('spmm:64', 'a', 'sdfgsparse'),
                                                                      ('spmm:64', 'b', 'sdfgsparse')]
    assert check.slower[0].ratio == pytest.approx(2.0)
    text = check.format()
    assert 'FAIL: 2 sdfgsparse result(s) SLOWER THAN SCIPY' in text
    assert any(line.split()[:3] == ['spmm:64', 'a', 'sdfgsparse'] and line.split()[-1] == '2.00x'
               for line in text.splitlines())
    assert 'spmv' not in text  # faster than scipy there (slower than torch does not count)


def test_all_faster_passes_and_a_missing_scipy_result_is_unchecked():
    res = BenchResult(results=[
        _r('spmv', 'a', 'sdfgsparse', 1.0), _r('spmv', 'a', 'scipy', 1.0),  # as fast: passes
        _r('spmv', 'b', 'sdfgsparse', 1.0),  # scipy not in the run
        _r('spmm:8', 'a', 'sdfgsparse', 1.0), _r('spmm:8', 'a', 'scipy', None, correct=False, error='failed: boom'),
        _r('spmm:8', 'b', 'sdfgsparse', None, correct=False, error='wrong result (not timed): x'),
        _r('spmm:8', 'b', 'scipy', 9.0),
    ])
    check = check_against_scipy(res, label='busy run')
    assert check.ok and check.passed == 1 and check.slower == []
    assert check.unchecked == [('spmv', 'b', 'sdfgsparse', 'no scipy result'),
                               ('spmm:8', 'a', 'sdfgsparse', 'scipy not timed (failed: boom)'),
                               ('spmm:8', 'b', 'sdfgsparse', 'sdfgsparse not timed (wrong result (not timed): x)')]
    text = check.format()
    assert text.splitlines()[0].startswith('check (busy run): PASS')
    assert 'check (busy run): unchecked: sdfgsparse spmv on b: no scipy result' in text
    assert check_against_scipy(BenchResult()).ok


def test_cli_check_exit_status_agrees_with_the_verdict(tmp_path, capsys):
    A = sp.random_array((60, 50), density=0.08, format='coo', rng=np.random.default_rng(7)).tolil()
    A[3, :] = 0
    scipy.io.mmwrite(str(tmp_path / 'tiny.mtx'), sp.coo_matrix(A))
    rc = cli.main(['bench', '--matrices', str(tmp_path), '--kernels', 'spmv', '--repeat', '2', '--peers', 'scipy',
                   '--check', '--no-progress', '--stream-mib', '1', '--threads', os.environ['OMP_NUM_THREADS']])
    printed = capsys.readouterr().out
    assert rc in (0, 3), printed
    passed = 'check: PASS: every sdfgsparse result is at least as fast as scipy (1 kernel x matrix pairs checked)'
    failed = 'check: FAIL: 1 sdfgsparse result(s) SLOWER THAN SCIPY'
    assert (passed in printed, failed in printed) == ((True, False) if rc == 0 else (False, True)), printed


def test_a_run_without_check_ends_with_one_line_and_exit_status_0(tmp_path, capsys):
    """Without ``--check`` a pair slower than scipy is reported (the closing line), not an
    exit status: ``make demo`` ends 0 whenever every result is right."""
    res = BenchResult(results=[_r('spmv', 'a', 'sdfgsparse', 2.0), _r('spmv', 'a', 'scipy', 1.0),
                               _r('spmv', 'b', 'sdfgsparse', 1.0), _r('spmv', 'b', 'scipy', 3.0)])
    assert check_against_scipy(res).summary() == ('against scipy: 1 of 2 kernel x matrix pairs at least as fast; '
                                                  'slower: spmv on a (2.00x)')
    assert check_against_scipy(BenchResult()).summary() == 'against scipy: no pair timed on both sides'
    scipy.io.mmwrite(str(tmp_path / 'tiny.mtx'), sp.random_array((40, 30), density=0.1, format='coo',
                                                                 rng=np.random.default_rng(3)))
    rc = cli.main(['bench', '--matrices', str(tmp_path), '--kernels', 'spmv', '--repeat', '2', '--peers', 'scipy',
                   '--no-progress', '--stream-mib', '1', '--threads', os.environ['OMP_NUM_THREADS']])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    last = [line for line in printed.splitlines() if line.startswith('against scipy: ')]
    assert len(last) == 1 and 'of 1 kernel x matrix pairs at least as fast' in last[0], printed
    assert 'sdfgsparse-mkl' not in printed  # (only with --with-mkl)
