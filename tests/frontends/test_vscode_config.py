"""The VS Code set-up: the loader file, imported the way the DaCe VS Code extension's
backend imports custom transformations, makes a saved sparse SDFG load and lists the Sparse
transformations that match it; ``sdfgsparse vscode-setup`` writes absolute settings and
keeps the user's own."""
import json
import os
import subprocess
import sys
import textwrap

import dace
import numpy as np
import pytest

import sdfgsparse as ss

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOADER = os.path.join(ROOT, 'vscode-config', 'sdfgsparse_transformations.py')  # (re-exports the package's)

N, K, F = (dace.symbol(s) for s in 'NKF')


@dace.program
def gcn_layer(A: ss.CSR[dace.float64, N, N], X: dace.float64[N, K], W: dace.float64[K, F], b: dace.float64[F]):
    return np.maximum(A @ (X @ W) + b, 0)


def test_extension_lists_sparse_transformations(tmp_path):
    path = tmp_path / 'gcn.sdfg'
    gcn_layer.to_sdfg().save(str(path))
    # a fresh interpreter, as the extension's backend: load the custom file by path, then
    # deserialise the SDFG and ask DaCe's optimizer for pattern matches
    script = textwrap.dedent(f'''
        import importlib.util, json, sys
        spec = importlib.util.spec_from_file_location({LOADER!r}, {LOADER!r})
        mod = importlib.util.module_from_spec(spec)
        sys.modules[{LOADER!r}] = mod
        spec.loader.exec_module(mod)
        import dace
        from dace.transformation.optimizer import SDFGOptimizer
        sdfg = dace.SDFG.from_json(json.load(open({str(path)!r})))
        names = sorted({{type(m).__name__ for m in SDFGOptimizer(sdfg).get_pattern_matches()}})
        cats = {{type(m).__name__: getattr(type(m), 'CATEGORY', '') for m in SDFGOptimizer(sdfg).get_pattern_matches()}}
        print(json.dumps({{'names': names, 'cats': cats, 'exported': list(mod.TRANSFORMATIONS)}}))
    ''')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get('PYTHONPATH', '')]))
    out = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert 'SparseEpilogueFusion' in res['names'] and res['cats']['SparseEpilogueFusion'] == 'Sparse'
    assert {'SparseFormatInference', 'SparseLoopOrdering', 'SparseFusion', 'SparseEpilogueFusion',
            'SparseDenseTiling'} <= set(res['exported'])


def test_vscode_setup_writes_absolute_settings_and_keeps_others(tmp_path, capsys):
    from sdfgsparse import cli, vscode
    folder = tmp_path / '.vscode'
    folder.mkdir()
    mine = str(tmp_path / 'my_xforms.py')
    (folder / 'settings.json').write_text(json.dumps({'editor.tabSize': 2, 'terminal.integrated.env.linux': {'A': '1'},
                                                      'dace.optimization.customTransformationsPaths': [mine]}))
    assert cli.main(['vscode-setup', str(tmp_path)]) == 0
    assert cli.main(['vscode-setup', str(tmp_path)]) == 0  # twice: no duplicate entries
    s = json.loads((folder / 'settings.json').read_text())
    assert s['editor.tabSize'] == 2 and s['terminal.integrated.env.linux'] == {'A': '1', 'DACE_cache': 'hash'}
    assert s['dace.optimization.customTransformationsPaths'] == [mine, vscode.LOADER]
    assert s['dace.backend.interpreterPath'] == os.path.abspath(sys.executable) and os.path.isabs(vscode.LOADER)
    assert 'wrote' in capsys.readouterr().out


def test_vscode_setup_refuses_what_it_cannot_merge(tmp_path, capsys):
    from sdfgsparse import cli, vscode
    (tmp_path / '.vscode').mkdir()
    text = '{\n  // a comment\n  "editor.tabSize": 2\n}\n'
    (tmp_path / '.vscode' / 'settings.json').write_text(text)
    assert cli.main(['vscode-setup', str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert 'not plain JSON' in err and len(err.strip().splitlines()) == 1
    assert (tmp_path / '.vscode' / 'settings.json').read_text() == text  # untouched
    assert cli.main(['vscode-setup', str(tmp_path / 'missing')]) == 2
    assert 'no such folder' in capsys.readouterr().err
    with pytest.raises(vscode.VSCodeSetupError, match='not an executable'):
        vscode.write_settings(str(tmp_path), python=str(tmp_path / 'nopython'))
    assert cli.main(['vscode-setup', '--print']) == 0
    assert json.loads(capsys.readouterr().out)['dace.optimization.customTransformationsPaths'] == [vscode.LOADER]
