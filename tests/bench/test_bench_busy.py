"""``sdfgsparse bench --busy`` (:mod:`sdfgsparse.bench.busy`): the spinner is a live
process pinned to its core and gone when its block ends, also when the block raises; the
busy summary over synthetic results."""
import os

import pytest

from sdfgsparse.bench.busy import (GOAL_PEER, GOAL_SINGLE, busy_summary, format_busy_summary, spin_core, spin_cores,
                                   spinners, spinning)
from sdfgsparse.bench.results import BenchResult, Result

pytestmark = pytest.mark.skipif(not hasattr(os, 'sched_getaffinity'), reason='core affinity is Linux-only')


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie counts as gone)."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except OSError:
        return False


def test_spinner_is_pinned_alive_and_gone_afterwards():
    core = spin_core()
    assert core == max(os.sched_getaffinity(0))
    with spinning() as spinner:
        assert spinner.core == core and spinner.pid != os.getpid()
        assert _alive(spinner.pid)
        assert os.sched_getaffinity(spinner.pid) == {core}
    assert not _alive(spinner.pid)


def test_spinner_is_gone_when_the_block_raises():
    first = min(os.sched_getaffinity(0))
    with pytest.raises(KeyboardInterrupt, match='stop'):
        with spinning(core=first) as spinner:
            assert os.sched_getaffinity(spinner.pid) == {first} and _alive(spinner.pid)
            raise KeyboardInterrupt('stop')
    assert not _alive(spinner.pid)


def _r(kernel, matrix, system, ms):
    t = None if ms is None else ms / 1e3
    return Result(kernel, matrix, system, median_s=t, min_s=t, max_s=t, correct=t is not None, runs=3)


def test_busy_summary_compares_with_our_single_thread_time_and_the_fastest_busy_peer():
    busy = BenchResult(results=[
        _r('spmv', 'a', 'sdfgsparse', 2.0), _r('spmv', 'a', 'scipy', 3.0), _r('spmv', 'a', 'torch', 1.0),
        _r('spmm:64', 'a', 'sdfgsparse', 4.0), _r('spmm:64', 'a', 'scipy', 8.0),
        _r('spmm:64', 'b', 'sdfgsparse', None), _r('spmm:64', 'b', 'scipy', 1.0),
    ])
    single = BenchResult(results=[_r('spmv', 'a', 'sdfgsparse', 1.9), _r('spmm:64', 'a', 'sdfgsparse', 3.0)])
    rows = busy_summary(busy, single)
    assert [(r.kernel, r.matrix, r.system) for r in rows] == [('spmv', 'a', 'sdfgsparse'),
                                                              ('spmm:64', 'a', 'sdfgsparse'),
                                                              ('spmm:64', 'b', 'sdfgsparse')]
    spmv, spmm, untimed = rows
    assert (spmv.peer, spmv.vs_single, spmv.vs_peer) == ('torch', pytest.approx(0.95), pytest.approx(0.5))
    assert (spmm.peer, spmm.vs_single, spmm.vs_peer) == ('scipy', pytest.approx(0.75), pytest.approx(2.0))
    assert untimed.vs_single is None and untimed.vs_peer is None
    text = format_busy_summary(rows, core=1)
    assert f'goal >= {GOAL_SINGLE}' in text and f'goal >= {GOAL_PEER}' in text and 'spinning on core 1' in text
    lines = {tuple(line.split()[:2]): line for line in text.splitlines()[2:5]}
    assert '0.95 ' in lines['spmv', 'a'] and lines['spmv', 'a'].endswith('0.50 BELOW')
    assert '0.75 BELOW' in lines['spmm:64', 'a'] and lines['spmm:64', 'a'].endswith('2.00')
    assert text.splitlines()[-1] == 'busy goals: own 1-thread below 0.9: 1 of 2; vs peer below 0.8: 1 of 2'
    assert busy_summary(busy, None)[0].single_s is None  # the single-thread child failed


def test_busy_takes_a_count_of_spinners_that_reaches_the_child_arguments():
    import argparse

    from sdfgsparse.bench import cli
    parser = argparse.ArgumentParser(prog='sdfgsparse')
    cli.add_parser(parser.add_subparsers(dest='command', required=True))
    assert parser.parse_args(['bench']).busy == 0
    assert parser.parse_args(['bench', '--busy']).busy == 1
    args = parser.parse_args(['bench', '--busy', '3', '--peers', 'scipy'])
    assert args.busy == 3
    argv = cli.to_argv(args)
    assert argv[argv.index('--busy') + 1] == '3' and vars(parser.parse_args(argv)) == vars(args)
    for bad in ('0', 'many'):
        with pytest.raises(SystemExit):
            parser.parse_args(['bench', '--busy', bad])


def test_several_spinners_on_the_named_cores_all_gone_afterwards():
    n = len(os.sched_getaffinity(0)) + 1
    with spinners(n) as running:
        assert [s.core for s in running] == spin_cores(n)
        assert all(_alive(s.pid) and os.sched_getaffinity(s.pid) == {s.core} for s in running)
    assert not any(_alive(s.pid) for s in running)
    text = format_busy_summary([], core=[1, 0, 1])
    assert text.startswith('busy summary (3 other processes spinning on cores 1, 0, 1): ')
