"""Operations with data-dependent results (sparse ± sparse, sparse ∘ sparse, SpGEMM,
conversions inside programs) x every format, against scipy."""
import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sparse_zoo import REAL, as_format, dense, format_of, real_matrix, signatures, tol, zoo

M, N = dace.symbol('M'), dace.symbol('N')

OPS = ['A+B', 'A-B', 'A*B', 'A@B.T', 'A.T@A', 'convert(A,CSR)', 'convert(A,CSC)', '(A+B)@x']

_PROGRAMS = {}


def _fmt(fmt):
    return format_of(fmt)


def program(fmt, vt, it):
    key = (fmt, vt, it)
    if key not in _PROGRAMS:
        TA = _fmt(fmt)[vt, M, N, it]
        TB = _fmt(fmt)[vt, M, N, it]

        @dace.program
        def sparse_ops(A: TA, B: TB, x: vt[N]):
            return (A + B, A - B, A * B, A @ B.T, A.T @ A, ss.convert(A, ss.CSR), ss.convert(A, ss.CSC), (A + B) @ x)

        _PROGRAMS[key] = sparse_ops
    return _PROGRAMS[key]


def run_case(fmt, vt, it, A, B, seed=0):
    npv = np.dtype(vt.type)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(A.shape[1]).astype(npv)
    a = as_format(A, fmt, np.dtype(it.type), rng)
    b = as_format(B, fmt, np.dtype(it.type), rng)
    out = program(fmt, vt, it)(a, b, x)
    Ad, Bd = A.toarray(), B.toarray()
    ref = [Ad + Bd, Ad - Bd, Ad * Bd, Ad @ Bd.T, Ad.T @ Ad, Ad, Ad, (Ad + Bd) @ x]
    for name, got, want in zip(OPS, out, ref):
        if name.startswith('convert'):
            assert sp.issparse(got) and got.format == name[-4:-1].lower(), f'{name}: got {type(got)}'
            assert got.has_canonical_format, f'{name}: result is not canonical'
        np.testing.assert_allclose(dense(got), want, **tol(npv), err_msg=f'{fmt} {vt} {it}: {name}')


def _pairs(fmt, dtype):
    mats = zoo(dtype)
    other = zoo(dtype, seed=99)
    pairs = {k: (mats[k], other[k]) for k in mats}
    if fmt == 'BSR':
        pairs = {k: v for k, v in pairs.items() if v[0].shape[0] % 2 == 0 and v[0].shape[1] % 2 == 0}
    return pairs


@pytest.mark.parametrize('fmt,vt,it', list(signatures(one_pair=True)))
def test_sparse_sparse(fmt, vt, it):
    """The zoo in :func:`sparse_zoo.signatures` (CSR in all four dtype pairs, the other
    formats in one, alternating; ``test_openmp_threads`` runs the same programs on four threads);
    real matrices (A and A.T) with CSR float64 / int32."""
    cases = list(_pairs(fmt, np.dtype(vt.type)).items())
    if fmt == 'CSR' and vt == dace.float64 and it == dace.int32:
        cases += [(name, (A, sp.csr_array(A.T))) for name, A in ((n, real_matrix(n)) for n in REAL)]
    for name, (A, B) in cases:
        try:
            run_case(fmt, vt, it, A, B)
        except AssertionError as ex:
            raise AssertionError(f'matrix {name}: {ex}') from ex


def test_spgemm_capacity_is_exact_flops(rng):
    from sdfgsparse.runtime.capacity import spgemm_flops
    from sdfgsparse.runtime.marshal import marshal_sparse
    A = sp.random_array((9, 7), density=0.3, format='csr', rng=rng)
    B = sp.random_array((7, 5), density=0.3, format='csr', rng=rng)
    a = marshal_sparse('A', A, None)
    b = marshal_sparse('B', B, None)
    expected = sum(B[[k], :].nnz for k in A.tocoo().col)
    assert spgemm_flops(a, False, b, False) == expected
    # row-major operands (CSR, or the transpose of CSC) are read directly, others through
    # their coordinates: every combination counts the same
    S = sp.random_array((8, 8), density=0.3, format='csr', rng=rng)
    T = sp.random_array((8, 8), density=0.4, format='csr', rng=rng)
    for fa, ta in (('csr', False), ('csc', True), ('csc', False), ('coo', True), ('csr', True)):
        for fb, tb in (('csr', False), ('csc', True), ('coo', False), ('csc', False)):
            Ae, Be = (S.T if ta else S), (T.T if tb else T)
            want = sum(sp.csr_array(Be)[[k], :].nnz for k in sp.coo_array(Ae).col)
            a = marshal_sparse('A', S.asformat(fa), None)
            b = marshal_sparse('B', T.asformat(fb), None)
            assert spgemm_flops(a, ta, b, tb) == want, (fa, ta, fb, tb)
