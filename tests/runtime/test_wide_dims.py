"""Dimensions past 2**31 with int64 indices reach the kernels whole.

Before: DaCe typed the size symbols by the annotation's ``dace.symbol('N')`` (int32), so a
matrix of 1000 x 5e9 reached the kernels with N cut to 32 bits; once the kernels checked
their own indices (from 64 MiB of them on) every index was out of that range and SpMV
returned zeros. Here the kernels check from any size on, and x is a float32 vector of
2**32 + 1000 entries (16 GiB of address space, touched only where A has columns).
"""
import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.targets.cpu import kernel_checks

M, N = dace.symbol('M'), dace.symbol('N')
COLS = 2**32 + 1000


def _matrix(rng, rows=40, nnz=300):
    r = np.sort(rng.integers(0, rows, nnz))
    c = rng.integers(2**32 - 500, COLS, nnz)
    A = sp.csr_array((rng.random(nnz).astype(np.float32), (r, c)), shape=(rows, COLS))
    A.sum_duplicates()
    A.indices, A.indptr = A.indices.astype(np.int64), A.indptr.astype(np.int64)
    return A


def _vector(rng):
    try:
        x = np.zeros(COLS, np.float32)  # calloc: only the pages written below are backed
    except MemoryError:
        pytest.skip('no 16 GiB of address space for x')
    x[2**32 - 500:] = rng.random(1500).astype(np.float32)
    return x


def test_symbols_of_int64_types_are_int64():
    def wide_types(A: ss.CSR[dace.float32, M, N, dace.int64], x: dace.float32[N]):
        return A @ x

    sdfg = dace.program(wide_types).to_sdfg()
    ss.formats.format.widen_size_symbols(sdfg)
    assert sdfg.symbols['N'] == dace.int64 and sdfg.symbols['M'] == dace.int64
    sdfg.expand_library_nodes()
    for g in sdfg.all_sdfgs_recursive():
        for name in ('M', 'N'):
            if name in g.symbols:
                assert g.symbols[name] == dace.int64, (g.name, name)


def test_spmv_past_2_to_the_32_columns(rng, monkeypatch):
    monkeypatch.setattr(kernel_checks, 'IN_KERNEL_FROM', 0)

    def wide_spmv(A: ss.CSR[dace.float32, M, N, dace.int64], x: dace.float32[N]):
        return A @ x

    prog = dace.program(wide_spmv)
    A, x = _matrix(rng), _vector(rng)
    want = A @ x
    assert np.abs(want).max() > 0
    for _ in range(3):  # first call, then the warm plan
        np.testing.assert_allclose(prog(A, x), want, rtol=1e-5)
    bad = A.copy()
    bad.indices = bad.indices.copy()
    bad.indices[5] = COLS  # one past the end: the kernels' check must still see it
    with pytest.raises(ss.errors.InvalidIndexError, match=f'A: crd1\\[5\\] = {COLS} is out of range'):
        prog(bad, x)
