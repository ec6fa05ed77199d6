"""``sdfgsparse bench --optimize`` and the composed kernels (gcn+bias, attention, cg):
the CLI end to end on tiny matrices (sdfgsparse-opt rows, the ss.optimize records), a wrong
optimised result is caught, the composed kernels also run without --optimize, their
references agree with dense NumPy, the peers agree with the references, and
samples/cg.py follows NumPy's CG. No timing is asserted."""
import ast
import inspect
import json
import os
import sys
import textwrap

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from sdfgsparse.bench import cli
from sdfgsparse.bench.kernels import (COMPOSED, KERNELS, Kernel, attention_numpy, cg_step_numpy, check_result,
                                      parse_kernels, spd)
from sdfgsparse.bench.matrices import canonical, from_folder
from sdfgsparse.bench.peers import PEER_NAMES, ScipyPeer, TorchPeer, make_peers
from sdfgsparse.bench.programs import PROGRAMS, OptimizedSystem, SdfgsparseSystem
from sdfgsparse.bench.report import format_report
from sdfgsparse.bench.runner import BenchConfig, run_benchmark

pytestmark = pytest.mark.xdist_group('bench')  # one worker: compiled programs are shared

SAMPLES = os.path.join(os.path.dirname(__file__), '..', '..', 'samples')


def _tiny(m, n, density, seed):
    A = sp.random_array((m, n), density=density, format='lil', rng=np.random.default_rng(seed))
    A[1, :] = 0  # an empty row
    return canonical(A)


@pytest.fixture(scope='module')
def mtx_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp('mtx_opt')
    scipy.io.mmwrite(str(d / 'square.mtx'), sp.coo_matrix(_tiny(40, 40, 0.1, 1)))
    scipy.io.mmwrite(str(d / 'rect.mtx'), sp.coo_matrix(_tiny(30, 20, 0.15, 2)))
    return d


def _bench(mtx_dir, kernels, *extra):
    return cli.main([
        'bench', '--matrices', str(mtx_dir), '--kernels', kernels, '--repeat', '1', '--threads',
        os.environ['OMP_NUM_THREADS'], '--no-progress', '--stream-mib', '1', '--peers', 'scipy,torch', *extra
    ])


# ---------------------------------------------------------------- --optimize end to end
def test_optimize_cli_reports_both_systems_and_the_heuristics_time(mtx_dir, tmp_path, capsys):
    out_json = tmp_path / 'opt.json'
    rc = _bench(mtx_dir, 'gcn:4,attention:4', '--optimize', '--json', str(out_json))
    printed = capsys.readouterr().out
    assert rc == 0, printed
    assert 'sdfgsparse-opt' in printed and 'opt gain' in printed and 'opt speedup' in printed
    assert 'ss.optimize per kernel' in printed and 'SparseEpilogueFusion' in printed and 'SparseFusion' in printed

    data = json.loads(out_json.read_text())
    assert data['machine']['optimize'] is True
    rows = {(r['kernel'], r['matrix'], r['system']): r for r in data['results']}
    expected = {('gcn+bias:4', 'square'), ('attention:4', 'square'), ('attention:4', 'rect')}
    for kernel, matrix in expected:
        for system in ('sdfgsparse-opt', 'sdfgsparse', 'scipy'):
            r = rows[kernel, matrix, system]
            assert r['correct'] is True and r['runs'] == 1 and r['median_s'] > 0, r
    assert {(k, m) for k, m, s in rows if s == 'sdfgsparse-opt'} == expected
    assert data['skipped'] == [{'kernel': 'gcn+bias:4', 'matrix': 'rect', 'reason': 'needs a square matrix, got 30x20'}]

    records = {(o['kernel'], o['matrix']): o for o in data['optimize']}
    assert set(records) == expected
    for o in records.values():
        assert o['error'] is None and o['heuristics_ms'] > 0 and o['build_s'] >= 0
        assert o['optimize_s'] * 1e3 >= o['heuristics_ms']
    assert records['gcn+bias:4', 'square']['steps']['SparseEpilogueFusion'] == 2  # bias and relu
    assert records['attention:4', 'rect']['steps']['SparseFusion'] == 1
    assert [c['kernel'] for c in data['compile']] == ['gcn+bias', 'attention']


_REAL_OPTIMIZE = OptimizedSystem.optimize


def _wrong_optimize(self, program, examples):
    """ss.optimize whose program returns a result off by one in its first entry."""
    real = _REAL_OPTIMIZE(self, program, examples)

    class Wrong:
        heuristics_s, steps = real.heuristics_s, real.steps

        def compile(self):
            real.compile()

        def __call__(self, *args):
            out = np.array(real(*args), copy=True)
            out.flat[0] += 1.0
            return out

    return Wrong()


class WrongOptimizer(OptimizedSystem):
    optimize = _wrong_optimize


def test_a_wrong_optimised_result_is_caught(mtx_dir, monkeypatch, capsys):
    config = BenchConfig(kernels=parse_kernels('gcn:4', optimize=True), matrices=from_folder(str(mtx_dir))[1:],
                         repeat=1, warmup=0, stream_elements=1 << 12, measure_warm_cache=False, progress=False,
                         optimize=True)
    res = run_benchmark(config, systems=[WrongOptimizer(), SdfgsparseSystem(), ScipyPeer()])
    by = {r.system: r for r in res.results}
    assert by['sdfgsparse'].correct and by['scipy'].correct
    wrong = by['sdfgsparse-opt']
    assert not wrong.correct and wrong.median_s is None and wrong.error.startswith('wrong result (not timed)')
    assert 'sdfgsparse-opt gcn+bias:4 on square: wrong result' in format_report(res)
    # the command fails when the optimised system is wrong
    monkeypatch.setattr(OptimizedSystem, 'optimize', _wrong_optimize)
    assert _bench(mtx_dir, 'gcn:4', '--optimize', '--peers', 'scipy') == 1
    assert 'WRONG' in capsys.readouterr().out


def test_composed_kernels_run_without_optimize(mtx_dir):
    config = BenchConfig(kernels=parse_kernels('attention:4,cg'), matrices=from_folder(str(mtx_dir)), repeat=1,
                         warmup=0, stream_elements=1 << 12, measure_warm_cache=False, progress=False)
    res = run_benchmark(config, systems=[SdfgsparseSystem(), ScipyPeer(), TorchPeer()])
    assert not [c for c in res.compile if c['error']] and res.optimize == []
    assert 'optimize' not in res.to_dict() and 'optimize' not in res.machine
    ran = {(r.kernel, r.matrix, r.system) for r in res.results if r.correct}
    systems = ('sdfgsparse', 'scipy') + (('torch', ) if TorchPeer().available() is None else ())
    want = {(k, m) for k in ('attention:4', 'cg') for m in ('square', 'rect')} - {('cg', 'rect')}
    assert ran == {(k, m, s) for k, m in want for s in systems}, [r.error for r in res.results if not r.correct]
    cg_row = next(r for r in res.results if r.kernel == 'cg' and r.system == 'sdfgsparse')
    assert cg_row.nnz == spd(from_folder(str(mtx_dir))[1].load()).nnz  # the SPD matrix's nnz
    assert 'opt gain' not in format_report(res)


# ---------------------------------------------------------------- kernels, references, peers
def test_kernel_names_and_optimize_mapping():
    assert set(COMPOSED).isdisjoint(KERNELS)
    assert [k.label for k in parse_kernels('gcn,attention,atb,cg', optimize=True)] == [
        'gcn+bias:64', 'attention:64', 'atb:64', 'cg']
    assert [k.label for k in parse_kernels('gcn,gcn+bias:8,attention:16')] == ['gcn:64', 'gcn+bias:8', 'attention:16']
    assert set(PROGRAMS) == set(KERNELS) | set(COMPOSED)
    args = cli_args(['bench', '--optimize', '--quick'])
    assert [k.label for k in cli.config_from_args(args).kernels] == ['gcn+bias:64', 'attention:64', 'atb:64', 'cg']
    assert cli.config_from_args(args).optimize and '--optimize' in cli.to_argv(args)
    with pytest.raises(ValueError, match='cg takes no dense width'):
        parse_kernels('cg:4')


def cli_args(argv):
    import argparse
    parser = argparse.ArgumentParser(prog='sdfgsparse')
    cli.add_parser(parser.add_subparsers(dest='command', required=True))
    return parser.parse_args(argv)


def _dense_attention(S, Q, K, V):
    scores = np.where(S.toarray() != 0, Q @ K.T, -np.inf)
    out = np.zeros((S.shape[0], V.shape[1]))
    for i, row in enumerate(scores):
        if np.isfinite(row).any():
            w = np.exp(row - row.max())
            out[i] = (w / w.sum()) @ V
    return out


def test_attention_reference_agrees_with_dense_numpy():
    A = _tiny(30, 20, 0.15, 5)
    k = Kernel('attention', 6)
    inp = k.inputs(A, seed=3)
    S = inp['A']
    assert S.nnz == A.nnz and np.all(S.data == 1.0) and np.diff(S.indptr).min() == 0  # pattern, an empty row
    want = _dense_attention(S, inp['Q'], inp['K'], inp['V'])
    np.testing.assert_allclose(k.reference(inp), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(attention_numpy(S, inp['Q'], inp['K'], inp['V'], chunk=7), want, rtol=1e-12,
                               atol=1e-12)
    empty = sp.csr_array((4, 3))
    assert not attention_numpy(empty, np.ones((4, 2)), np.ones((3, 2)), np.ones((3, 5))).any()
    assert k.flops(inp) == 4 * A.nnz * 6 + 4 * A.nnz


def test_cg_reference_agrees_with_dense_numpy_and_check_handles_tuples():
    A = _tiny(25, 25, 0.1, 6)
    k = Kernel('cg')
    inp = k.inputs(A, seed=2)
    M = inp['A'].toarray()
    assert np.allclose(M, M.T) and np.linalg.eigvalsh(M).min() >= 0.1 - 1e-12
    np.testing.assert_allclose(inp['r'], inp['r'] + 0)  # r = b - A x: any vector; p = r to start
    x, r, p, rs = (inp[n] for n in ('x', 'r', 'p', 'rs_old'))
    alpha = rs / (p @ M @ p)
    x1, r1 = x + alpha * p, r - alpha * (M @ p)
    want = (x1, r1, r1 + (r1 @ r1) / rs * p, r1 @ r1)
    ref = k.reference(inp)
    for got, w in zip(ref, want):
        np.testing.assert_allclose(got, w, rtol=1e-12, atol=1e-12)
    assert check_result(ref, want, np.float64)[0]
    assert check_result(tuple(ref[:3]) + (np.array([ref[3]]), ), want, np.float64)[0]  # rs as a 1-element array
    bad = (ref[0], ref[1] + 1e-3, ref[2], ref[3])
    ok, detail = check_result(bad, want, np.float64)
    assert not ok and detail.startswith('result 1: max abs error')
    assert not check_result(ref[0], want, np.float64)[0]
    assert k.flops(inp) == 2 * inp['A'].nnz + 10 * 25
    assert k.bytes(inp, ref) == inp['A'].data.nbytes + inp['A'].indices.nbytes + inp['A'].indptr.nbytes + 6 * 25 * 8 + 16


@pytest.mark.parametrize('peer_name', PEER_NAMES)
def test_peers_of_the_composed_kernels_agree_with_the_references(peer_name):
    peer = make_peers([peer_name])[0]
    why = peer.available()
    if why:
        pytest.skip(f'{peer_name}: {why}')
    peer.setup(1)
    has = {'scipy': COMPOSED, 'torch': COMPOSED}.get(peer_name, {'gcn+bias'})
    for name in COMPOSED:
        kernel = Kernel(name, 5 if COMPOSED[name][0] else None)
        inp = kernel.inputs(_tiny(24, 24, 0.2, 7), seed=4)
        fn = peer.prepare(kernel, inp)
        if name not in has:
            assert fn is None
            continue
        for _ in range(2):  # callable twice, inputs unchanged
            ok, detail = check_result(peer.to_host(fn()), kernel.reference(inp), kernel.dtype)
            assert ok, (name, detail)


# ---------------------------------------------------------------- samples/cg.py
def _body(fn):
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    return [ast.dump(stmt) for stmt in tree.body[0].body if not isinstance(stmt, ast.Expr)]


def test_cg_sample_follows_numpy_and_is_the_benchmarked_program(rng):
    sys.path.insert(0, os.path.abspath(SAMPLES))
    try:
        import cg as sample
    finally:
        sys.path.remove(os.path.abspath(SAMPLES))
    assert _body(sample.cg_step.f) == _body(PROGRAMS["cg"].f)
    A = sample.make_spd(_tiny(30, 30, 0.1, 8))
    assert np.linalg.eigvalsh(A.toarray()).min() > 0.09
    b = rng.standard_normal(30)
    x, norms = sample.cg(sample.cg_step, A, b, 3)
    x_np, want = sample.cg(sample.numpy_step, A, b, 3)
    np.testing.assert_allclose(norms, want, rtol=1e-10)
    np.testing.assert_allclose(x, x_np, rtol=1e-10, atol=1e-12)
    assert norms[-1] < norms[0]
