"""Every op x every format x both value dtypes x both index widths, against scipy, on the
generated zoo and on the small real matrices in tests/data.

One program per (format, value dtype, index dtype) computes all ops at once, so each
signature compiles once; every matrix then runs through the same binary.
"""
import os

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sparse_zoo import REAL, as_format, dense, format_of, real_matrix, signatures, tol, zoo

M, N, K = dace.symbol('M'), dace.symbol('N'), dace.symbol('K')

OPS = ['A@x', 'A@B', 'x@A', 'P@A', 'sum0', 'sum1', 'sum', 'A*D', 'D-A', 'A+D', 'sddmm', '2*A', 'relu(A)', 'A.T@x']

_PROGRAMS = {}


def allops_program(fmt, vt, it):
    key = (fmt, vt, it)
    if key not in _PROGRAMS:
        T = format_of(fmt)[vt, M, N, it]

        @dace.program
        def allops(A: T, x: vt[N], xt: vt[M], B: vt[N, K], P: vt[K, M], D: vt[M, N], X: vt[M, K], Y: vt[K, N]):
            return (A @ x, A @ B, xt @ A, P @ A, A.sum(axis=0), A.sum(axis=1), A.sum(), A * D, D - A, A + D,
                    ss.sddmm(A, X, Y), 2 * A, ss.relu(A), A.T @ xt)

        _PROGRAMS[key] = allops
    return _PROGRAMS[key]


def reference(A, x, xt, B, P, D, X, Y):
    Ad = A.toarray()
    return [
        Ad @ x, Ad @ B, xt @ Ad, P @ Ad,
        Ad.sum(axis=0), Ad.sum(axis=1), np.array([Ad.sum()]), Ad * D, D - Ad, Ad + D,
        Ad * (X @ Y), 2 * Ad, np.maximum(Ad, 0), Ad.T @ xt
    ]


def run_case(fmt, vt, it, A, seed=0):
    npv = np.dtype(vt.type)
    rng = np.random.default_rng(seed)
    m, n = A.shape
    k = 3
    arrays = dict(x=rng.standard_normal(n), xt=rng.standard_normal(m), B=rng.standard_normal((n, k)),
                  P=rng.standard_normal((k, m)), D=rng.standard_normal((m, n)), X=rng.standard_normal((m, k)),
                  Y=rng.standard_normal((k, n)))
    arrays = {name: v.astype(npv) for name, v in arrays.items()}
    arg = as_format(A, fmt, np.dtype(it.type), rng)
    prog = allops_program(fmt, vt, it)
    out = prog(arg, **arrays)
    ref = reference(A, **arrays)
    for name, got, want in zip(OPS, out, ref):
        got = dense(got)
        assert got.shape == want.shape or got.size == want.size, f'{fmt} {name}: shape {got.shape} != {want.shape}'
        np.testing.assert_allclose(got.reshape(want.shape), want, **tol(npv), err_msg=f'{fmt} {vt} {it}: {name}')


def _zoo_for(fmt, dtype):
    mats = zoo(dtype)
    if fmt == 'BSR':
        mats = {k: v for k, v in mats.items() if v.shape[0] % 2 == 0 and v.shape[1] % 2 == 0}
    return mats


def _real_for(fmt):
    """The real matrices a format can hold without absurd padding (DIA: banded only)."""
    for name in REAL:
        if fmt == 'DIA' and name != 'cryg2500':
            continue  # DIA of a non-banded graph stores millions of padding slots
        A = real_matrix(name)
        if fmt == 'BSR' and (A.shape[0] % 2 or A.shape[1] % 2):
            A = sp.csr_array(A[:A.shape[0] // 2 * 2, :A.shape[1] // 2 * 2])
        yield name, A


# every format in every signature; the pure suite (SDFGSPARSE_IMPLEMENTATION=pure, whose
# expansions are built with DaCe's SDFG API, no dtype-specific C++) takes the pairs of
# sparse_zoo.signatures for formats other than CSR
@pytest.mark.parametrize('fmt,vt,it', list(signatures(all_formats=os.environ.get('SDFGSPARSE_IMPLEMENTATION') != 'pure')))
def test_all_ops(fmt, vt, it):
    """The zoo in every signature; the real matrices too in float64 / int32 (one compiled
    program per signature, so no two test workers build the same program)."""
    npv = np.dtype(vt.type)
    cases = list(_zoo_for(fmt, npv).items())
    if vt == dace.float64 and it == dace.int32:
        cases += list(_real_for(fmt))
    for name, A in cases:
        try:
            run_case(fmt, vt, it, A)
        except AssertionError as ex:
            raise AssertionError(f'matrix {name}: {ex}') from ex
