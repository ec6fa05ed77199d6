"""Kernels parsed once per process (``targets/cpu/kernel.py``: the memo by source and the
globals it names): a repeated kernel is not parsed again and computes the same, a
different dtype or descriptor is a different kernel, and what a caller does to one SDFG
does not reach the next."""
import dace
import numpy as np
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.targets.cpu import kernel

M, N = dace.symbol('M'), dace.symbol('N')


def _count_parses(monkeypatch):
    calls = []
    orig = kernel.KernelBuilder._parse

    def parse(self, src):
        calls.append(self.name)
        return orig(self, src)

    monkeypatch.setattr(kernel.KernelBuilder, '_parse', parse)
    monkeypatch.setattr(kernel, '_MEMO', type(kernel._MEMO)())
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


def test_programs_sharing_kernels_agree_with_scipy(monkeypatch, rng):
    calls = _count_parses(monkeypatch)
    T = ss.CSR[dace.float64, M, N, dace.int32]

    @dace.program
    def add_then_spmv(A: T, B: T, x: dace.float64[N]):
        return (A + B) @ x, A + B

    A = sp.random_array((30, 20), density=0.2, format='csr', rng=rng)
    B = sp.random_array((30, 20), density=0.2, format='csr', rng=rng)
    x = rng.standard_normal(20)
    y, S = add_then_spmv(A, B, x)
    assert calls.count('sparse_add') == 1, calls
    np.testing.assert_allclose(y, (A + B) @ x)
    np.testing.assert_allclose(S.toarray(), (A + B).toarray())
