"""The benchmark harness end to end on tiny matrices: the CLI, the JSON schema, the
plot, a wrong or failing peer is reported and not timed, every sdfgsparse kernel runs.
No timing is asserted."""
import json
import os

import dace
import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from sdfgsparse.bench import cli
from sdfgsparse.bench.kernels import Kernel, parse_kernels
from sdfgsparse.bench.matrices import MatrixSource, canonical, from_folder
from sdfgsparse.bench.peers import ScipyPeer
from sdfgsparse.bench.programs import SdfgsparseSystem
from sdfgsparse.bench.report import format_report
from sdfgsparse.bench.results import RESULT_KEYS, SYSTEMS, BenchResult
from sdfgsparse.bench.runner import BenchConfig, run_benchmark
from sdfgsparse.errors import DeviceError
from sdfgsparse.targets.cpu import march

pytestmark = pytest.mark.xdist_group('bench')  # one worker: compiled programs are shared


def _tiny(m, n, density, seed):
    A = sp.random_array((m, n), density=density, format='csr', rng=np.random.default_rng(seed))
    A = A.tolil()
    A[1, :] = 0  # an empty row
    return canonical(A)


@pytest.fixture(scope='module')
def mtx_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp('mtx')
    scipy.io.mmwrite(str(d / 'square.mtx'), sp.coo_matrix(_tiny(40, 40, 0.1, 1)))
    scipy.io.mmwrite(str(d / 'rect.mtx'), sp.coo_matrix(_tiny(30, 20, 0.15, 2)))
    return d


class WrongPeer(ScipyPeer):
    """scipy with every dense result off by one in its first entry."""
    name = 'torch'

    def prepare(self, kernel, inp):
        fn = super().prepare(kernel, inp)

        def wrong():
            out = np.array(fn(), copy=True)
            out.flat[0] += 1.0
            return out

        return wrong


class RaisingPeer(ScipyPeer):
    name = 'graphblas'

    def prepare(self, kernel, inp):

        def boom():
            raise RuntimeError('peer exploded')

        return boom


class MissingPeer(ScipyPeer):
    name = 'mkl'

    def available(self):
        return 'not installed (pip install sparse_dot_mkl)'


def _config(mtx_dir, kernels, **kw):
    kw.setdefault('repeat', 2)
    kw.setdefault('warmup', 0)
    kw.setdefault('stream_elements', 1 << 16)
    kw.setdefault('measure_warm_cache', False)
    kw.setdefault('progress', False)
    kw.setdefault('warm_call_rounds', 1)
    return BenchConfig(kernels=parse_kernels(kernels), matrices=from_folder(str(mtx_dir)), **kw)


def test_cli_end_to_end_json_schema_and_plot(mtx_dir, tmp_path, capsys):
    out_json, out_png = tmp_path / 'r.json', tmp_path / 'r.png'
    rc = cli.main([
        'bench', '--matrices', str(mtx_dir), '--kernels', 'spmv', '--repeat', '2', '--threads',
        os.environ['OMP_NUM_THREADS'], '--json', str(out_json), '--plot', str(out_png), '--no-progress',
        '--stream-mib', '1'
    ])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    assert 'spmv' in printed and 'sdfgsparse' in printed and 'geomean' in printed
    target = march.describe()
    assert (f'target: {target["cpu"]}; compiler {target["compiler"]} ({target["compiler_version"]}); '
            f'-march={target["march"]} (native here: {target["native"]}), {target["vector_bytes"]}-byte vectors; '
            f'threads {os.environ["OMP_NUM_THREADS"]}') in printed
    assert printed.index('target: ') < printed.index('spmv  (median ms')

    data = json.loads(out_json.read_text())
    assert set(data) >= {'machine', 'results', 'compile', 'skipped'}
    machine = data['machine']
    assert machine['threads'] == int(os.environ['OMP_NUM_THREADS'])
    assert machine['stream_triad_GBps'] > 0
    assert {'cpu', 'cores', 'versions', 'peers_skipped', 'repeat', 'target'} <= set(machine)
    assert machine['target'] == target
    assert [c['kernel'] for c in data['compile']] == ['spmv']
    assert data['compile'][0]['cold_s'] > 0 and data['compile'][0]['warm_cache_s'] > 0
    results = data['results']
    assert {(r['matrix'], r['system']) for r in results if r['system'] in ('sdfgsparse', 'scipy')} == {
        ('rect', 'sdfgsparse'), ('rect', 'scipy'), ('square', 'sdfgsparse'), ('square', 'scipy')}
    for r in results:
        assert set(RESULT_KEYS) <= set(r)
        assert r['kernel'] == 'spmv'
        assert r['system'] in SYSTEMS
        assert r['correct'] is True, r
        assert r['min_s'] <= r['median_s'] <= r['max_s']
        assert r['gflops'] > 0 and r['gbps'] > 0 and r['runs'] == 2
    # every peer is either measured or skipped with its reason (sdfgsparse-mkl: only with --with-mkl)
    measured = {r['system'] for r in results}
    assert measured | set(machine['peers_skipped']) == set(SYSTEMS) - {'sdfgsparse-mkl'}

    pytest.importorskip('matplotlib')
    assert out_png.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


def test_wrong_and_failing_peers_are_reported_not_timed(mtx_dir):
    logged = []
    config = _config(mtx_dir, 'spmv,spmm:4')
    res = run_benchmark(config, systems=[ScipyPeer(), WrongPeer(), RaisingPeer(), MissingPeer()], log=logged.append)
    assert logged == ['peer mkl: MISSING, not installed (pip install sparse_dot_mkl); the best-peer ratios leave it '
                      'out']
    assert res.machine['peers_skipped'] == {'mkl': 'not installed (pip install sparse_dot_mkl)'}
    by = {(r.kernel, r.matrix, r.system): r for r in res.results}
    assert len(by) == 2 * 2 * 3
    for kernel in ('spmv', 'spmm:4'):
        for matrix in ('rect', 'square'):
            good, wrong, bad = (by[kernel, matrix, s] for s in ('scipy', 'torch', 'graphblas'))
            assert good.correct and good.runs == 2 and good.median_s is not None
            assert not wrong.correct and wrong.median_s is None and wrong.runs == 0
            assert wrong.error.startswith('wrong result (not timed): max abs error')
            assert not bad.correct and bad.median_s is None
            assert 'peer exploded' in bad.error
    text = format_report(res)
    assert 'WRONG' in text and 'FAIL' in text and 'torch spmv on square: wrong result' in text


def test_every_sdfgsparse_kernel_runs_and_agrees_with_scipy(mtx_dir):
    config = _config(mtx_dir, 'spmv,spmm:3,sddmm:5,spgemm,add,gcn:4,atb:6', repeat=1)
    res = run_benchmark(config, systems=[SdfgsparseSystem(), ScipyPeer()])
    assert not [c for c in res.compile if c['error']]
    ours = [r for r in res.results if r.system == 'sdfgsparse']
    assert [r for r in ours if not r.correct] == []
    ran = {(r.kernel, r.matrix) for r in ours}
    square = {'spmv', 'spmm:3', 'sddmm:5', 'spgemm', 'add', 'gcn:4', 'atb:6'}
    assert ran == {(k, 'square') for k in square} | {(k, 'rect') for k in ('spmv', 'spmm:3', 'sddmm:5', 'atb:6')}
    assert {(s['kernel'], s['matrix']) for s in res.skipped} == {('spgemm', 'rect'), ('add', 'rect'), ('gcn:4', 'rect')}
    assert all(r.peak_mem_bytes is not None and r.peak_mem_bytes >= 0 for r in ours)
    again = BenchResult.from_dict(json.loads(json.dumps(res.to_dict())))
    assert again.results == res.results


def test_runner_uses_loaded_matrices_in_order():
    seen = []

    def load(name, A):
        seen.append(name)
        return A

    sources = [MatrixSource(n, (lambda n=n: load(n, _tiny(12, 12, 0.2, 3))), 'generated') for n in ('b', 'a')]
    config = BenchConfig(kernels=[Kernel('spmv')], matrices=sources, repeat=1, warmup=0, stream_elements=1 << 12,
                         progress=False)
    res = run_benchmark(config, systems=[ScipyPeer()])
    assert seen == ['b', 'a']
    assert [r.matrix for r in res.results] == ['b', 'a']


def test_a_slow_system_gets_its_checking_call_as_only_run(mtx_dir):
    config = _config(mtx_dir, 'spmv', repeat=3, slow_call_s=0.0)
    res = run_benchmark(config, systems=[ScipyPeer()])
    assert len(res.results) == 2
    for r in res.results:
        assert r.correct and r.runs == 1 and r.median_s == r.min_s == r.max_s
        assert r.note.startswith('one run only: the call took') and r.peak_mem_bytes is not None
    assert 'note: scipy spmv on rect: one run only' in format_report(res)


def _with_flags_restored(monkeypatch, fn, *args):
    """``fn(*args)``, then this process's compiler flags as before (``--march`` sets them
    and exports them to child processes through ``DACE_compiler_cpu_args``)."""
    before = dace.Config.get('compiler', 'cpu', 'args')
    monkeypatch.setenv('DACE_compiler_cpu_args', before)  # undone after the test
    try:
        return fn(*args)
    finally:
        dace.Config.set('compiler', 'cpu', 'args', value=before)


def _lower_target():
    """A -march this CPU runs other than native (x86-64-v2), or None (then the default)."""
    try:
        march.check_target('x86-64-v2')
    except DeviceError:
        return None
    return 'x86-64-v2'


def test_isolation_separate_runs_a_process_per_system_and_merges(mtx_dir, tmp_path, capsys, monkeypatch):
    out_json = tmp_path / 'sep.json'
    arch = _lower_target()
    rc = _with_flags_restored(monkeypatch, cli.main, [
        'bench', '--matrices', str(mtx_dir), '--kernels', 'spmv', '--repeat', '2', '--threads',
        os.environ['OMP_NUM_THREADS'], '--json', str(out_json), '--no-progress', '--stream-mib', '1', '--peers',
        'scipy', '--isolation', 'separate'
    ] + (['--march', arch] if arch else []))
    printed = capsys.readouterr().out
    assert rc == 0, printed
    assert 'sdfgsparse: its own process' in printed and 'scipy: its own process' in printed
    assert 'isolation: separate (a process per system)' in printed
    data = json.loads(out_json.read_text())
    m = data['machine']
    systems = {'sdfgsparse', 'scipy'}  # (sdfgsparse-mkl only with --with-mkl)
    assert m['isolation'] == 'separate' and set(m['openmp_by_system']) == systems
    assert set(m['warm_call']['min_us']) == systems  # each measured in its own process, merged
    assert m['stream_triad_GBps'] > 0 and set(m['versions']) >= systems
    assert [c['kernel'] for c in data['compile']] == ['spmv']  # compiled in sdfgsparse's process only
    got = {(r['matrix'], r['system']) for r in data['results']}
    assert got == {(matrix, s) for matrix in ('rect', 'square') for s in systems}
    assert all(r['correct'] and r['runs'] == 2 for r in data['results'])
    if arch:  # the children built for the target (their machine record says so)
        assert m['target']['march'] == arch and m['target']['vector_bytes'] == 16


def test_the_warm_call_is_measured_and_reported(mtx_dir):
    """A run with SpMV times a call on a 100 x 100 matrix for every system whose result is
    right (a wrong peer is left out), and the report prints it against the fastest peer."""
    res = run_benchmark(_config(mtx_dir, 'spmv', warm_call_rounds=3),
                        systems=[SdfgsparseSystem(), ScipyPeer(), WrongPeer()])
    w = res.machine['warm_call']
    assert w['matrix'] == '100 x 100, 500 entries' and w['rounds'] == 3
    assert set(w['min_us']) == set(w['median_us']) == {'sdfgsparse', 'scipy'}
    assert all(0 < w['min_us'][k] <= w['median_us'][k] for k in w['min_us'])
    text = format_report(res)
    ratio = w['min_us']['sdfgsparse'] / w['min_us']['scipy']
    assert 'warm call: SpMV of a 100 x 100, 500 entries matrix' in text
    assert f'sdfgsparse / fastest peer (scipy): {ratio:.2f}' in text
    assert BenchResult.from_dict(json.loads(json.dumps(res.to_dict()))).machine['warm_call'] == w
    none = run_benchmark(_config(mtx_dir, 'spmm:3', warm_call_rounds=3), systems=[ScipyPeer()])
    assert 'warm_call' not in none.machine and 'warm call' not in format_report(none)


def test_isolation_same_is_the_default_and_reports_the_openmp_runtime(mtx_dir):
    res = run_benchmark(_config(mtx_dir, 'spmv', peers=['scipy']))
    rec = res.machine['openmp']
    assert rec['action'] in ('loaded', 'shared', 'bound') and rec['runtime']
    assert res.machine['isolation'] == 'same'
    text = format_report(res)
    assert 'isolation: same (all systems in one process' in text and 'OpenMP: ours libgomp' in text


def test_only_must_name_a_system_of_the_run(mtx_dir, capsys):
    rc = cli.main(['bench', '--matrices', str(mtx_dir), '--kernels', 'spmv', '--peers', 'scipy', '--only', 'torch',
                   '--no-progress', '--threads', os.environ['OMP_NUM_THREADS']])
    assert rc == 2
    assert "--only torch: not one of this run's systems (sdfgsparse, scipy)" in capsys.readouterr().err


def test_march_is_checked_and_reaches_the_child_arguments(mtx_dir, capsys):
    rc = cli.main(['bench', '--matrices', str(mtx_dir), '--kernels', 'spmv', '--peers', 'scipy', '--march',
                   'no-such-cpu', '--no-progress', '--threads', os.environ['OMP_NUM_THREADS']])
    assert rc == 2
    assert '--march: -march=no-such-cpu: the compiler' in capsys.readouterr().err
    parser = __import__('argparse').ArgumentParser(prog='sdfgsparse')
    cli.add_parser(parser.add_subparsers(dest='command', required=True))
    args = parser.parse_args(['bench', '--march', 'x86-64-v3', '--check', '--busy', '--with-mkl', '--peers', 'scipy'])
    assert vars(parser.parse_args(cli.to_argv(args))) == vars(args)
    assert {'--march', 'x86-64-v3', '--check', '--busy', '--with-mkl'} <= set(cli.to_argv(args))


def test_sdfgsparse_mkl_is_timed_only_with_with_mkl(mtx_dir):
    """``sdfgsparse-mkl`` (our programs with MKL's products, slower than the default ones
    today) is a system of the run only where asked (``--with-mkl`` / ``with_mkl``)."""
    from sdfgsparse.bench.isolation import system_names
    from sdfgsparse.bench.programs import MKLSystem
    plain = run_benchmark(_config(mtx_dir, 'spmv', peers=['scipy'], warm_call_rounds=0))
    assert {r.system for r in plain.results} == {'sdfgsparse', 'scipy'}
    assert system_names(_config(mtx_dir, 'spmv', peers=['scipy'])) == ['sdfgsparse', 'scipy']
    asked = _config(mtx_dir, 'spmv', peers=['scipy'], with_mkl=True, warm_call_rounds=0)
    res = run_benchmark(asked)
    if MKLSystem().available() is None:  # the [mkl] extra
        assert {r.system for r in res.results} == {'sdfgsparse', 'sdfgsparse-mkl', 'scipy'}
        assert all(r.correct for r in res.results)
        assert system_names(asked) == ['sdfgsparse', 'sdfgsparse-mkl', 'scipy']
    else:
        assert 'sdfgsparse-mkl' in res.machine['peers_skipped']
