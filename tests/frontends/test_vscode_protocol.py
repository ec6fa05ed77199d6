"""The DaCe VS Code extension on first open, replayed over HTTP: ``sdfgsparse vscode-setup``
writes the settings, a fresh backend (``vscode_backend.py``, a model of dace-vscode
1.9.0's) is started with the interpreter they name and gets the custom-transformation
paths they list (the extension's ``onDeamonConnected``), and every request is framed as the
extension frames it: ``JSON.stringify`` (no ASCII escapes) with ``Content-Length`` set to
the string's *UTF-16 length*. The Sparse transformations and the SparseIOLowerBound pass are
listed, applied, expanded and replayed through it, and the returned SDFGs agree with
scipy.

The same requests go to the extension's real backend when ``SDFGSPARSE_VSCODE_BACKEND``
names its ``run_dace.py`` (``backend/run_dace.py`` of a spcl/dace-vscode checkout; not
shipped here): it is started as the extension starts it (``python run_dace.py -p PORT``,
listening on ``::1``) with the interpreter the settings name."""
import copy
import http.client
import json
import os
import socket
import subprocess
import sys
import time

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse import vscode

pytest.importorskip('flask')

HERE = os.path.dirname(os.path.abspath(__file__))
N, M, K, F = (dace.symbol(s) for s in 'NMKF')


@dace.program
def gcn_layer(A: ss.CSR[dace.float64, N, N], X: dace.float64[N, K], W: dace.float64[K, F], b: dace.float64[F]):
    return np.maximum(A @ (X @ W) + b, 0)


@dace.program
def power(A: ss.CSR[dace.float64, N, N], x: dace.float64[N]):
    y = np.copy(x)
    for it in range(40):
        y = A @ y
    return y


@dace.program
def atb(A: ss.CSR[dace.float64, N, M], B: dace.float64[N, K]):
    return A.T @ B


def _stringify(data) -> str:
    """What JavaScript's ``JSON.stringify`` gives: no spaces, non-ASCII characters kept."""
    return json.dumps(data, ensure_ascii=False, separators=(',', ':'))


class Extension:
    """The extension's side of the connection (``sendDaCeRequest``)."""

    def __init__(self, port, host='127.0.0.1'):
        self.port = port
        self.host = host

    def request(self, path, data=None):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=300)
        if data is None:
            conn.request('GET', path)
        else:
            text = _stringify(data)
            length = len(text.encode('utf-16-le')) // 2  # JavaScript's String.length
            conn.putrequest('POST', path)
            conn.putheader('Content-Type', 'application/json')
            conn.putheader('Content-Length', str(length))
            conn.endheaders()
            conn.send(text.encode('utf-8'))
        resp = conn.getresponse()
        body = resp.read().decode('utf-8')
        conn.close()
        return resp.status, (json.loads(body) if resp.status == 200 else body)

    def ok(self, path, data=None):
        status, res = self.request(path, data)
        assert status == 200, f'{path}: HTTP {status}: {str(res)[:300]}'
        assert 'error' not in res, res['error']
        return res

    def transformations(self, sdfg_json):
        res = self.ok('/transformations', {'sdfg': sdfg_json, 'selected_elements': [], 'permissive': False})
        for x in res['transformations']:  # as loadTransformations does before the list shows them
            x['docstring'] = res['docstrings'].get(x['transformation'], '')
        return res['transformations']

    def apply(self, sdfg_json, xform):
        return self.ok('/apply_transformations', {'sdfg': sdfg_json, 'transformations': [xform],
                                                  'permissive': False})['sdfg']


def _free_port(family) -> int:
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind(('::1' if family == socket.AF_INET6 else '127.0.0.1', 0))
        return s.getsockname()[1]


def _answers(port) -> bool:
    """The real backend listens (its ``GET /`` says 'success!')."""
    conn = http.client.HTTPConnection('::1', port, timeout=10)
    try:
        conn.request('GET', '/')
        return conn.getresponse().status == 200
    except OSError:  # not listening yet
        return False
    finally:
        conn.close()


def _start_backend(python, ws, log, env):
    """``(process, Extension)``: the real backend when ``SDFGSPARSE_VSCODE_BACKEND`` names its
    ``run_dace.py``, else the model; returns once the backend answers."""
    real = os.environ.get('SDFGSPARSE_VSCODE_BACKEND')
    portfile = str(ws / 'port')
    if real:
        port = _free_port(socket.AF_INET6)
        proc = subprocess.Popen([python, real, '-p', str(port)], cwd=str(ws), env=env, stdout=log, stderr=log)
        ready = lambda: _answers(port)
    else:
        proc = subprocess.Popen([python, os.path.join(HERE, 'vscode_backend.py'), portfile], cwd=str(ws), env=env,
                                stdout=subprocess.DEVNULL, stderr=log)
        ready = lambda: os.path.exists(portfile)
    deadline = time.time() + 120
    while not ready():
        assert proc.poll() is None, open(log.name).read()[-2000:]
        assert time.time() < deadline, 'backend did not start'
        time.sleep(0.1)
    return proc, Extension(port, host='::1') if real else Extension(int(open(portfile).read()))


@pytest.fixture(scope='module')
def editor(tmp_path_factory):
    ws = tmp_path_factory.mktemp('workspace')
    vscode.write_settings(str(ws))
    with open(ws / '.vscode' / 'settings.json') as f:
        settings = json.load(f)
    python = settings['dace.backend.interpreterPath']
    paths = settings['dace.optimization.customTransformationsPaths']
    assert os.path.isabs(python) and all(os.path.isabs(p) for p in paths)
    env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
    with open(str(ws / 'backend.log'), 'w') as log:
        proc, ext = _start_backend(python, ws, log, env)
        try:
            ext.ok('/add_transformations', {'paths': paths})  # onDeamonConnected, before anything else
            yield ext, ws
        finally:
            proc.kill()
            proc.wait()


def _saved(prog, ws, examples=None, **kw):
    sdfg = prog.to_sdfg()
    if examples:
        ss.record_examples(sdfg, examples, **kw)
    path = ws / f'{prog.name}.sdfg'
    sdfg.save(str(path))
    with open(path) as f:  # the document's text, as the editor holds it
        return json.load(f)


def _find(xforms, name):
    found = [x for x in xforms if x['transformation'] == name]
    assert found, f'{name} not listed; listed: {sorted({x["transformation"] for x in xforms})}'
    return found[0]


def _run(sdfg_json, **args):
    sdfg = dace.SDFG.from_json(copy.deepcopy(sdfg_json))
    sdfg.validate()
    return ss.compile(sdfg)(**args)


def test_metadata_knows_sparse_properties(editor):
    ext, _ = editor
    meta = ext.ok('/get_metadata')['metaDict']
    assert 'sizes' in meta['SparseDenseTiling'] and 'stats' in meta['SparseFormatSelection']
    assert 'sparse_notes' in meta['SDFG']
    assert 'io_lower_bound' in meta['sdfgsparse.ops.spmm.SpMM']


def test_epilogue_fusion_applies_and_agrees(editor, rng):
    ext, ws = editor
    doc = _saved(gcn_layer, ws)
    xforms = ext.transformations(doc)
    names = {x['transformation'] for x in xforms}
    assert 'SparseIOLowerBound' in names
    assert not {'NestSDFG', 'FPGATransformSDFG', 'RedundantArrayCopying'} & names  # they would corrupt it
    new = ext.apply(doc, _find(xforms, 'SparseEpilogueFusion'))
    A = sp.random_array((60, 60), density=0.1, format='csr', random_state=3)
    X, W, b = rng.standard_normal((60, 8)), rng.standard_normal((8, 5)), rng.standard_normal(5)
    ref = np.maximum(A @ (X @ W) + b, 0)
    np.testing.assert_allclose(_run(new, A=A, X=X, W=W, b=b), ref, rtol=1e-10, atol=1e-12)
    # history replay (the history panel) and library-node expansion (right click) on the result
    replayed = ext.ok('/reapply_history_until', {'sdfg': new, 'index': 0})['sdfg']
    np.testing.assert_allclose(_run(replayed, A=A, X=X, W=W, b=b), ref, rtol=1e-10, atol=1e-12)
    expanded = ext.ok('/expand_library_node', {'sdfg': doc})['sdfg']
    np.testing.assert_allclose(_run(expanded, A=A, X=X, W=W, b=b), ref, rtol=1e-10, atol=1e-12)


def test_format_selection_from_recorded_examples(editor):
    ext, ws = editor
    n, offs = 300, range(-3, 4)
    A = sp.csr_array(sp.diags([np.full(n - abs(o), 0.1 * (o + 4)) for o in offs], list(offs), format='csr'))
    x = np.linspace(0, 1, n)
    plain = ext.transformations(_saved(power, ws))
    assert 'SparseFormatSelection' not in {t['transformation'] for t in plain}  # no statistics: not listed
    doc = _saved(power, ws, {'A': A, 'x': x})
    new = ext.apply(doc, _find(ext.transformations(doc), 'SparseFormatSelection'))
    sdfg = dace.SDFG.from_json(copy.deepcopy(new))
    from sdfgsparse.formats import sparse_type_of
    assert sparse_type_of(sdfg.arrays['A']).fmt.name == 'DIA'
    ref = x.copy()
    for _ in range(40):
        ref = A @ ref
    np.testing.assert_allclose(_run(new, A=ss.convert(A, ss.DIA), x=x), ref, rtol=1e-10)


def test_dense_tiling_from_recorded_sizes_and_io_bound(editor, rng):
    ext, ws = editor
    A = sp.random_array((1000, 1000), density=0.05, format="csr", random_state=5)
    B = rng.standard_normal((1000, 64))
    assert 'SparseDenseTiling' not in {t['transformation'] for t in ext.transformations(_saved(atb, ws))}
    doc = _saved(atb, ws, {'A': A, 'B': B}, threads=1, cache_bytes=2000 * 8 * 8)
    xforms = ext.transformations(doc)
    tiled = ext.apply(doc, _find(xforms, 'SparseDenseTiling'))
    (tile, ) = [n['attributes']['dense_tile'] for s in tiled['nodes'] for n in s['nodes']
                if n['type'] == 'LibraryNode' and n['attributes'].get('dense_tile')]
    assert 0 < tile < 64
    np.testing.assert_allclose(_run(tiled, A=A, B=B), A.T @ B, rtol=1e-10, atol=1e-12)
    bound = _find(xforms, 'SparseIOLowerBound')
    bound['cache_words'] = 4096  # the property edited in the panel before applying
    noted = ext.apply(doc, bound)
    notes = noted['attributes']['sparse_notes']['io_lower_bound']
    assert notes['sparse_ops'][0]['op'] == 'SpMM' and notes['at_examples']['words'] > A.nnz
    assert [n['attributes']['io_lower_bound'] for s in noted['nodes'] for n in s['nodes']
            if n['type'] == 'LibraryNode'][0].startswith('Q >= ')


@dace.program
def ab(A: ss.CSR[dace.float64, N, M], B: dace.float64[M, K]):
    return A @ B


def test_listing_from_recorded_examples_matches_optimize(editor, rng):
    """The editor lists the steered transformations exactly where ``ss.optimize`` with the
    same examples applies them: ``A.T @ B`` (random and banded ``A``) and a banded SpMM,
    examples recorded with one cache size for every machine (the defaults are this machine's:
    with a 32 MiB last-level cache nothing tiles, and the test would prove nothing)."""
    ext, ws = editor
    cache = 1 << 18
    n = 2000
    offs = range(-3, 4)
    band = sp.csr_array(sp.diags([np.full(n - abs(o), 1.0 + 0.1 * o) for o in offs], list(offs)))
    rand = sp.random_array((n, n), density=0.01, format='csr', random_state=9)
    steered = ('SparseFormatSelection', 'SparseDenseTiling')
    seen = {}
    for name, prog, A in (('atb', atb, rand), ('atb', atb, band), ('ab', ab, band)):
        examples = {'A': A, 'B': rng.standard_normal((n, 64))}
        listed = {t['transformation'] for t in ext.transformations(_saved(prog, ws, examples, cache_bytes=cache))
                  } & set(steered)
        opt = ss.optimize(prog, matrices=examples, cache_size=cache)
        applied = {s.name for s in opt.steps if s.name in steered and s.applied}
        assert listed == applied, (name, listed, applied)
        seen[name, A is band] = listed
    assert 'SparseDenseTiling' in seen['atb', True]  # the banded A.T @ B tiles (as ss.optimize does)


def test_non_ascii_docstring_breaks_the_framing(editor):
    """The control: with a docstring holding an em dash, the extension's Content-Length cuts
    the body short and the backend answers 400, as it did for four Sparse transformations."""
    ext, ws = editor
    doc = _saved(gcn_layer, ws)
    x = dict(_find(ext.transformations(doc), 'SparseEpilogueFusion'))
    x['docstring'] = x['docstring'] + ' \u2014'
    status, _ = ext.request('/apply_transformations', {'sdfg': doc, 'transformations': [x], 'permissive': False})
    assert status == 400


def test_everything_sent_is_ascii():
    """Docstrings and property descriptions of every sdfgsparse transformation and pass (the
    editor echoes them back in requests)."""
    from dace.transformation.pass_pipeline import Pass
    from dace.transformation.transformation import PatternTransformation
    ours = [c for c in list(PatternTransformation.subclasses_recursive()) + list(Pass.subclasses_recursive())
            if c.__module__.startswith('sdfgsparse')]
    assert len(ours) >= 9
    for cls in ours:
        texts = [cls.__doc__ or ''] + [p.desc or '' for p in getattr(cls, '__properties__', {}).values()]
        for t in texts:
            assert t.isascii(), f'{cls.__name__}: non-ASCII {sorted({c for c in t if not c.isascii()})}'
