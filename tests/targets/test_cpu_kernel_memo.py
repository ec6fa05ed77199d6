"""Kernels parsed once per process (``targets/cpu/kernel.py``: the memo by source and the
globals it names): a repeated kernel is not parsed again and computes the same, a
different dtype or descriptor is a different kernel, and what a caller does to one SDFG
does not reach the next."""
import dace
import numpy as np
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.targets.cpu import kernel

_DISK_GET = kernel._disk_get
M, N = dace.symbol('M'), dace.symbol('N')


def _count_parses(monkeypatch):
    calls = []
    orig = kernel.KernelBuilder._parse

    def parse(self, src):
        calls.append(self.name)
        return orig(self, src)

    monkeypatch.setattr(kernel.KernelBuilder, '_parse', parse)
    monkeypatch.setattr(kernel, '_MEMO', type(kernel._MEMO)())
    monkeypatch.setattr(kernel, '_disk_get', lambda key: None)  # this process's memo only (unless a test says)
    return calls


def _scale(dtype, n=10):
    kb = kernel.KernelBuilder('scale')
    x = kb.param('x', dace.data.Array(dtype, [n]))
    kb.line('for i in dace.map[0:%d]:' % n)
    kb.line(f'    {x}[i] = 2 * {x}[i]')
    return kb.build()


def test_repeated_kernel_is_parsed_once(monkeypatch):
    calls = _count_parses(monkeypatch)
    a, b = _scale(dace.float64), _scale(dace.float64)
    assert calls == ['scale']
    assert a is not b and a.to_json() == b.to_json()
    a.add_symbol('changed', dace.int32)  # one use's changes stay in it
    assert 'changed' not in _scale(dace.float64).symbols
    _scale(dace.float32)
    _scale(dace.float64, n=11)
    assert calls == ['scale'] * 3, 'another dtype or size is another kernel'


def test_programs_sharing_kernels_agree_with_scipy(monkeypatch, rng, tmp_path):
    calls = _count_parses(monkeypatch)
    T = ss.CSR[dace.float64, M, N, dace.int32]

    @dace.program
    def add_then_spmv(A: T, B: T, x: dace.float64[N]):
        return (A + B) @ x, A + B

    A = sp.random_array((30, 20), density=0.2, format='csr', rng=rng)
    B = sp.random_array((30, 20), density=0.2, format='csr', rng=rng)
    x = rng.standard_normal(20)
    with dace.config.set_temporary('default_build_folder', value=str(tmp_path)):  # built here, not loaded
        y, S = add_then_spmv(A, B, x)
    assert calls.count('sparse_add') == 1, calls
    np.testing.assert_allclose(y, (A + B) @ x)
    np.testing.assert_allclose(S.toarray(), (A + B).toarray())


_CHILD = """
import sys, warnings
import dace
warnings.simplefilter('ignore')
from sdfgsparse.targets.cpu import kernel
if sys.argv[2] == 'no-parse':
    def refuse(self, src):
        raise AssertionError('parsed again')
    kernel.KernelBuilder._parse = refuse
kb = kernel.KernelBuilder('scale_disk')
x = kb.param('x', dace.data.Array(dace.float64, [12]))
kb.line('for i in dace.map[0:12]:')
kb.line(f'    {x}[i] = 3 * {x}[i]')
with dace.config.set_temporary('default_build_folder', value=sys.argv[1]):
    sdfg = kb.build()
print('OK', len(sdfg.nodes()))
"""


def test_next_process_reads_the_parsed_kernel(tmp_path):
    """A kernel parsed by one process is read by the next (``sdfgsparse-kernels`` beside
    the build folders); pruning removes the files of another sdfgsparse source."""
    import os
    import subprocess
    import sys

    from sdfgsparse.build import cache as buildcache
    script = tmp_path / 'child.py'
    script.write_text(_CHILD)
    cache = tmp_path / 'cache'
    for mode in ('parse', 'no-parse'):
        done = subprocess.run([sys.executable, str(script), str(cache), mode], capture_output=True, text=True,
                              timeout=300, env=dict(os.environ, DACE_cache='hash'))
        assert done.returncode == 0 and 'OK' in done.stdout, f'{mode}: {done.stdout}{done.stderr[-3000:]}'
    kernels = cache / buildcache.KERNELS
    files = os.listdir(kernels)
    assert len(files) == 1
    assert [f.path for f in buildcache.scan(str(cache))] == [], 'not a build folder'
    (kernels / ('0' * 12 + '-stale.json')).write_text('{}')
    assert buildcache.prune_kernels(str(cache)) == 1
    assert os.listdir(kernels) == files
    assert buildcache.prune_kernels(str(cache), older_than_days=0) == 1 and os.listdir(kernels) == []


def test_unreadable_kernel_file_is_parsed_again(monkeypatch, tmp_path):
    calls = _count_parses(monkeypatch)
    monkeypatch.setattr(kernel, '_disk_get', _DISK_GET)
    monkeypatch.setattr(kernel, '_disk_path', lambda key: str(tmp_path / f'{key}.json'))
    a = _scale(dace.float64, n=13)
    assert calls == ['scale']
    (path, ) = tmp_path.iterdir()
    path.write_text('{"not": "an SDFG"')  # cut short
    monkeypatch.setattr(kernel, '_MEMO', type(kernel._MEMO)())
    b = _scale(dace.float64, n=13)
    from sdfgsparse.build.naming import content_hash
    assert calls == ['scale', 'scale'] and content_hash(a) == content_hash(b)  # (new node GUIDs)
    monkeypatch.setattr(kernel, '_MEMO', type(kernel._MEMO)())
    _scale(dace.float64, n=13)
    assert calls == ['scale', 'scale'], 'written again whole, then read'
