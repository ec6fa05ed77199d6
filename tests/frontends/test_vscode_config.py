"""vscode-config: the loader file, imported the way the DaCe VS Code extension's backend
imports custom transformations, makes a saved sparse SDFG load and lists the Sparse
transformations that match it."""
import json
import os
import subprocess
import sys
import textwrap

import dace
import numpy as np

import sdfgsparse as ss

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOADER = os.path.join(ROOT, 'vscode-config', 'sdfgsparse_transformations.py')

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


def test_settings_point_at_the_project_environment():
    with open(os.path.join(ROOT, 'vscode-config', 'settings.json')) as f:
        settings = json.load(f)
    assert settings['python.defaultInterpreterPath'].endswith('.venv/bin/python')
