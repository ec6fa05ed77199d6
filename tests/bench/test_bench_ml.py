"""``sdfgsparse bench --suite ml``: every row checked against torch, ratios and compile
times reported, the option parsed and passed on."""
import argparse

import numpy as np
import pytest
import scipy.sparse as sp

from sdfgsparse.bench import cli
from sdfgsparse.bench.matrices import MatrixSource

torch = pytest.importorskip('torch')
pytestmark = [pytest.mark.filterwarnings('ignore::UserWarning'), pytest.mark.xdist_group('torch_frontend')]


def test_ml_suite_rows_are_checked_and_reported():
    from sdfgsparse.bench.ml import format_ml, run_ml
    graph = sp.random_array((300, 300), density=0.02, format='csr', rng=np.random.default_rng(0)) + sp.eye_array(300)
    rect = sp.random_array((30, 20), density=0.2, format='csr', rng=np.random.default_rng(1))
    lines = []
    results = run_ml([MatrixSource('g300', lambda: graph.tocsr(), 'generated'),
                      MatrixSource('rect', lambda: rect, 'generated')], repeat=2, log=lines.append,
                     seqs=(160, 200), attention_layers=1, sparsities=(0.9, 0.99),
                     autoencoder=((96, 64, 32, 96), 16))
    mlp = [('mlp', f'{p}% sparse', mode) for p in (90, 99) for mode in ('inference', 'train step')]
    assert [(r.task, r.data, r.mode) for r in results] == [
        ('gcn', 'g300', 'inference'), ('gcn', 'g300', 'train step'), *mlp,  # rect: not a graph
        ('attention', 'seq 160', 'inference'), ('attention', 'seq 200', 'inference')]
    for r in results:
        assert r.correct, r
        assert set(r.seconds) == {'torch-dense', 'torch-sparse', 'sdfgsparse'} and not r.errors, r
        assert r.ratio() == pytest.approx(min(r.seconds['torch-dense'], r.seconds['torch-sparse']) /
                                          r.seconds['sdfgsparse'])
        assert (r.compile_s is None) == (r.data == 'seq 200'), r  # one build for every sequence length
    table = format_ml(results)
    assert 'geomean vs the best torch system' in table and table.count(' yes') == 8
    assert len(lines) == 9 and lines[0].startswith('scorch: ')


def test_scorch_is_a_peer_where_installed(monkeypatch):
    """A module named ``scorch`` with Scorch's API is timed on GCN inference and counts as
    a peer; PyPI's unrelated ``scorch`` (no ``from_csr``) is named, not run."""
    import sys
    import types

    from sdfgsparse.bench import ml
    fake = types.ModuleType('scorch')
    fake.__file__ = '<fake scorch>'
    used = []
    fake.from_csr = lambda A: A
    fake.matmul = lambda A, X, format: used.append(format) or torch.sparse.mm(A, X)
    monkeypatch.setitem(sys.modules, 'scorch', fake)
    graph = sp.random_array((120, 120), density=0.05, format='csr', rng=np.random.default_rng(2)) + sp.eye_array(120)
    lines = []
    results = ml.run_ml([MatrixSource('g120', lambda: graph.tocsr(), 'generated')], repeat=2, log=lines.append,
                        seqs=(), sparsities=())
    assert lines[0] == 'scorch: <fake scorch>'
    inference = results[0]
    assert inference.mode == 'inference' and set(inference.seconds) == {'torch-dense', 'torch-sparse', 'scorch',
                                                                        'sdfgsparse'}, inference
    assert inference.ratio() == pytest.approx(min(v for k, v in inference.seconds.items() if k != 'sdfgsparse') /
                                              inference.seconds['sdfgsparse'])
    assert set(used) == {'dd'}
    fake.matmul = lambda A, X, format: 2 * torch.sparse.mm(A, X)  # a wrong peer is reported, not timed
    results = ml.run_ml([MatrixSource('g120', lambda: graph.tocsr(), 'generated')], repeat=1, log=lines.append,
                        seqs=(), sparsities=())
    assert 'scorch' not in results[0].seconds and 'differs' in results[0].errors['scorch']
    del fake.from_csr
    mod, why = ml.scorch()
    assert mod is None and 'not the sparse tensor library' in why and 'CoNLL' in why


def test_suite_option_is_parsed_and_passed_to_the_child():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    cli.add_parser(sub)
    args = parser.parse_args(['bench', '--suite', 'ml', '--quick'])
    assert args.suite == 'ml'
    assert cli.to_argv(args)[-2:] == ['--suite', 'ml']
    assert '--suite' not in cli.to_argv(parser.parse_args(['bench', '--quick']))
    with pytest.raises(SystemExit):
        parser.parse_args(['bench', '--suite', 'gpu'])


def test_structured_tasks_are_checked_and_reported():
    """The pointwise, mlp-block and rigl tasks (bench/ml_structured.py) at toy sizes: every
    row timed for its systems, the products checked against torch-dense."""
    from sdfgsparse.bench.ml import MLResult, format_ml
    from sdfgsparse.bench.ml_structured import StructuredTasks, run_structured
    tasks = StructuredTasks(pointwise=((8, 16, 6), (16, 16, 3)), batches=(1, 2), conv_sparsities=(0.9, ),
                            block=(32, 64, 4), layouts=('2:4', 'g8:2:4'), rigl_hidden=32, rigl_epochs=1)
    lines = []
    results = run_structured(tasks, 2, lines.append, MLResult)
    assert [(r.task, r.data, r.mode) for r in results[:6]] == [
        ('pointwise', '90% b1', 'inference'), ('pointwise', '90% b2', 'inference'),
        ('mlp-block', '2:4', 'inference'), ('mlp-block', '2:4', 'train step'),
        ('mlp-block', 'g8:2:4', 'inference'), ('mlp-block', 'g8:2:4', 'train step')]
    for r in results[:6]:
        assert r.correct and not r.errors, r
        want = {'torch-dense', 'sdfgsparse'} | ({'torch-sparse'} if r.task == 'mlp-block' else set())
        assert set(r.seconds) == want, r
    rigl = results[6]
    assert rigl.task == 'rigl' and set(rigl.seconds) == {'torch-dense', 'sdfgsparse'} and not rigl.errors
    assert rigl.data.count('%') == 2  # the two test accuracies (one epoch: not compared here)
    assert 'vs dense' in format_ml(results) and len(lines) == 7
