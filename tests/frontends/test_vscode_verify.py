"""The editor applies a transformation only when its result is proven unchanged
(:mod:`sdfgsparse.vscode.verified_apply`): a backend started from the settings
``sdfgsparse vscode-setup`` writes (the model of dace-vscode's, or the real one with
``SDFGSPARSE_VSCODE_BACKEND``, as in ``test_vscode_protocol.py``) loads the loader, and
``/apply_transformations`` then runs the SDFG before and after on random inputs:
``MapTiling`` with ``tile_sizes=[-1]`` (it validates, writes nothing and was saved) comes
back as an error naming the transformation, the output and the difference, without an
SDFG for the editor to write; ``tile_sizes=[4]`` is applied. The wrapped function itself
is tested directly too: installation, the switch ``SDFGSPARSE_VSCODE_VERIFY``, garbage
requests, threads."""
import copy
import json
import os
import subprocess
import sys
import threading
import types

import dace
import numpy as np
import pytest
import scipy.sparse as sp
from dace.transformation.dataflow import MapTiling

import sdfgsparse as ss
from sdfgsparse import vscode
from sdfgsparse.vscode import verified_apply
from test_vscode_protocol import _find, _run, _saved, _start_backend

pytest.importorskip('flask')

N = dace.symbol('N')


@dace.program
def relu_spmv(A: ss.CSR[dace.float64, N, N], x: dace.float64[N]):
    return np.maximum(A @ x, 0)


def _request(sdfg_json, xform):
    return {'sdfg': sdfg_json, 'transformations': [xform], 'permissive': False}


@pytest.fixture(scope='module')
def editor(tmp_path_factory):
    """A backend as the extension starts it, verification on whatever the caller's
    environment says."""
    ws = tmp_path_factory.mktemp('workspace')
    vscode.write_settings(str(ws))
    with open(ws / '.vscode' / 'settings.json') as f:
        settings = json.load(f)
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', verified_apply.ENV)}
    with open(str(ws / 'backend.log'), 'w') as log:
        proc, ext = _start_backend(settings['dace.backend.interpreterPath'], ws, log, env)
        try:
            ext.ok('/add_transformations', {'paths': settings['dace.optimization.customTransformationsPaths']})
            yield ext, ws
        finally:
            proc.kill()
            proc.wait()


@pytest.fixture(scope='module')
def tiling(editor):
    """The document and its MapTiling match, as the Transformations panel lists it."""
    ext, ws = editor
    doc = _saved(relu_spmv, ws)
    return doc, _find(ext.transformations(doc), 'MapTiling')


def test_editor_refuses_a_transformation_that_changes_the_result(editor, tiling):
    ext, _ = editor
    doc, match = tiling
    sent = copy.deepcopy(doc)
    status, res = ext.request('/apply_transformations', _request(doc, dict(match, tile_sizes=[-1])))
    assert status == 200 and 'sdfg' not in res  # nothing for the editor to write: the document stays
    message, details = res['error']['message'], res['error']['details']
    assert message == 'MapTiling not applied: it changes the output result (by up to inf)'
    assert details.startswith('MapTiling changes the result: output result differs by up to inf: ')
    assert 'entries are NaN or never written on one side only (random inputs, seed 0, N=' in details
    assert details.endswith("(SDFGSPARSE_VSCODE_VERIFY=0 in the backend's environment applies without this check)")
    assert (message + details).isascii() and doc == sent


def test_editor_applies_a_transformation_that_keeps_the_result(editor, tiling):
    ext, _ = editor
    doc, match = tiling
    tiled = ext.apply(doc, dict(match, tile_sizes=[4]))
    hist = dace.SDFG.from_json(copy.deepcopy(tiled)).transformation_hist
    assert [(type(h).__name__, list(h.tile_sizes)) for h in hist] == [('MapTiling', [4])]
    A = sp.random_array((30, 30), density=0.2, format='csr', random_state=4)
    x = np.random.default_rng(4).standard_normal(30)
    np.testing.assert_allclose(_run(tiled, A=A, x=x), np.maximum(A @ x, 0), rtol=1e-12, atol=1e-14)


def test_editor_passes_the_backends_own_errors_through(editor, tiling):
    ext, _ = editor
    doc, _ = tiling
    status, res = ext.request('/apply_transformations', {'sdfg': doc, 'transformations': ['garbage'],
                                                         'permissive': False})
    assert status == 200 and res['error']['message'] == 'Failed to apply the transformation to the SDFG'


# -- the wrapped function, without a backend ---------------------------------------------


@pytest.fixture(scope='module')
def documents():
    """``(before, wrong)``: the program and its MapTiling with tile size -1, as JSON (a
    right result here is ``before`` itself: built once)."""
    before = relu_spmv.to_sdfg()
    wrong = copy.deepcopy(before)
    assert wrong.apply_transformations(MapTiling, options={'tile_sizes': [-1]}) == 1
    return tuple(json.loads(json.dumps(d.to_json())) for d in (before, wrong))


def _backend(result):
    """A stand-in for dace-vscode's ``dace_vscode.transformations`` answering ``result``."""
    module = types.ModuleType('fake_backend')
    module.calls = []

    def apply_transformations(sdfg_json, transformation_json_list):
        module.calls.append(transformation_json_list)
        return result

    module.apply_transformations = apply_transformations
    return module


def test_install_wraps_once_and_needs_the_function():
    module = _backend({'error': {'message': 'x', 'details': 'y'}})
    original = module.apply_transformations
    assert not verified_apply.installed(module)
    verified_apply.install(module)
    verified_apply.install(module)
    assert verified_apply.installed(module) and module.apply_transformations.__wrapped__ is original
    with pytest.raises(verified_apply.VSCodeVerifyError, match="'empty' has no function apply_transformations"):
        verified_apply.install(types.ModuleType('empty'))


def test_the_loader_wraps_the_backend_that_imports_it(tmp_path):
    """As dace-vscode loads custom transformations: by path, from the module that also holds
    ``apply_transformations``, in a fresh interpreter: the re-exporting ``vscode-config`` file
    from a module of another name (as the model backend, ``__main__``), then the loader from
    one named as dace-vscode's."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    config = os.path.join(root, 'vscode-config', 'sdfgsparse_transformations.py')
    backend = ('import importlib.util, sys\n'
               'def apply_transformations(sdfg_json, transformation_json_list):\n'
               '    return {"sdfg": sdfg_json}\n'
               'def add_custom_transformations(paths):\n'
               '    for p in paths:\n'
               '        spec = importlib.util.spec_from_file_location(p, p)\n'
               '        m = importlib.util.module_from_spec(spec); sys.modules[p] = m; spec.loader.exec_module(m)\n')
    (tmp_path / 'dace_vscode').mkdir()
    (tmp_path / 'dace_vscode' / '__init__.py').write_text('')
    (tmp_path / 'dace_vscode' / 'transformations.py').write_text(backend)
    (tmp_path / 'other_backend.py').write_text(backend)
    script = ('import sys; sys.path.insert(0, sys.argv[1])\n'
              'from sdfgsparse.vscode import verified_apply as v\n'
              'import other_backend as o\n'
              'print(v.installed(o)); o.add_custom_transformations([sys.argv[2]]); print(v.installed(o))\n'
              'from dace_vscode import transformations as t\n'
              'print(v.installed(t)); t.add_custom_transformations([sys.argv[3]]); print(v.installed(t))\n')
    proc = subprocess.run([sys.executable, '-c', script, str(tmp_path), config, vscode.LOADER], capture_output=True,
                          text=True, timeout=300, env={**os.environ, 'PYTHONPATH': root})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ['False', 'True', 'False', 'True']


@pytest.mark.parametrize('value, checks', [('0', False), ('off', False), (' False ', False), ('no', False),
                                           ('1', True), ('', True), ('yes', True), ('flase', True)])
def test_switch(monkeypatch, value, checks):
    monkeypatch.setenv(verified_apply.ENV, value)
    assert verified_apply.enabled() is checks


def test_turned_off_applies_unchecked(documents, monkeypatch):
    before, wrong = documents
    monkeypatch.setenv(verified_apply.ENV, '0')
    monkeypatch.setattr(verified_apply, 'check', lambda *a: pytest.fail('checked while turned off'))
    apply = verified_apply.verified(_backend({'sdfg': wrong}).apply_transformations)
    assert apply(before, [{'transformation': 'MapTiling'}]) == {'sdfg': wrong}


@pytest.mark.parametrize('sdfg_json, xforms', [(None, None), ('not an SDFG', [1, 'x']), ({'type': 'SDFG'}, 'x')])
def test_garbage_reaches_the_backend_unchanged(monkeypatch, sdfg_json, xforms):
    """What the backend answers to garbage is its own answer (here: its error)."""
    monkeypatch.delenv(verified_apply.ENV, raising=False)
    answer = {'error': {'message': 'Failed to parse the provided SDFG', 'details': 'KeyError'}}
    backend = _backend(answer)
    assert verified_apply.verified(backend.apply_transformations)(sdfg_json, xforms) == answer
    assert backend.calls == [xforms]


def test_a_result_that_cannot_be_checked_is_refused(documents, monkeypatch):
    """An SDFG the check cannot load or run is not applied (unverified is not verified)."""
    before, _ = documents
    monkeypatch.delenv(verified_apply.ENV, raising=False)
    broken = copy.deepcopy(before)
    broken['nodes'] = 'not a list of states'
    res = verified_apply.verified(_backend({'sdfg': broken}).apply_transformations)(before, ['?'])
    assert set(res) == {'error'}
    assert res['error']['message'] == '? not applied: its result could not be verified'
    assert res['error']['details'].startswith('?: cannot check the result (')


def test_threads_get_their_own_answers(documents, monkeypatch):
    """Requests verified from 4 threads at once (a threaded backend): each gets its answer,
    the wrong result refused and the right one (here the SDFG unchanged) kept."""
    before, wrong = documents
    right = before
    monkeypatch.delenv(verified_apply.ENV, raising=False)
    answers = [None] * 4
    applies = [verified_apply.verified(_backend({'sdfg': wrong if i % 2 else right}).apply_transformations)
               for i in range(4)]

    def work(i):
        answers[i] = applies[i](copy.deepcopy(before), [{'transformation': f'T{i}'}])

    threads = [threading.Thread(target=work, args=(i, )) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, res in enumerate(answers):
        if i % 2:
            assert res['error']['message'] == f'T{i} not applied: it changes the output result (by up to inf)'
        else:
            assert res == {'sdfg': right}


def test_editor_applies_the_io_bound_and_reads_the_result_back(editor, tiling):
    """SparseIOLowerBound is verified like any pass, and the document it writes (its report
    names sizes as 'nnz(A)', its bound reads 'Q >= ...') goes back through the backend's
    grammar check on the next request (it was refused)."""
    ext, _ = editor
    doc, _ = tiling
    noted = ext.apply(doc, _find(ext.transformations(doc), 'SparseIOLowerBound'))
    assert 'io_lower_bound' in noted['attributes']['sparse_notes']
    assert 'MapTiling' in {t['transformation'] for t in ext.transformations(noted)}
