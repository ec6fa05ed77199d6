"""The result format of sparse ± sparse and sparse ∘ sparse in a plain program follows scipy
(ops/add.py ``result_format``: CSC when the left operand, as the operation sees it, is CSC,
else CSR) for every pair of formats scipy shares with us, with canonical storage and the
values of scipy's result, over zoo matrices (empty, single row, rectangular, empty rows and
columns, power-law rows; COO operands unsorted with duplicates) and both index widths."""
import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.formats import sparse_type_of
from sdfgsparse.ops.add import result_format
from sparse_zoo import as_format, zoo

M, N = dace.symbol('M'), dace.symbol('N')

#: (format of A, format of B, ops): pairs of formats with a scipy twin; + and - share a
#: kernel, * has its own (and converts a COO operand first)
CASES = {
    dace.int32: [('CSC', 'CSC', '+-*'), ('CSC', 'CSR', '+*'), ('CSR', 'CSC', '+*'), ('COO', 'COO', '+*'),
                 ('COO', 'CSC', '+'), ('CSC', 'COO', '*')],
    dace.int64: [('CSC', 'CSC', '+-*'), ('CSC', 'CSR', '*'), ('CSR', 'CSC', '+')],
}

CSC32, CSR32, COO32 = (getattr(ss, f)[dace.float64, M, N] for f in ('CSC', 'CSR', 'COO'))
CSC64, CSR64, COO64 = (getattr(ss, f)[dace.float64, M, N, dace.int64] for f in ('CSC', 'CSR', 'COO'))


# One program per index width for all its cases (parsing a program costs more than running
# it); each returns the results of CASES[it] in order.
@dace.program
def elementwise32(Acsc: CSC32, Acsr: CSR32, Acoo: COO32, Bcsc: CSC32, Bcsr: CSR32, Bcoo: COO32):
    return (Acsc + Bcsc, Acsc - Bcsc, Acsc * Bcsc, Acsc + Bcsr, Acsc * Bcsr, Acsr + Bcsc, Acsr * Bcsc, Acoo + Bcoo,
            Acoo * Bcoo, Acoo + Bcsc, Acsc * Bcoo)


@dace.program
def elementwise64(Acsc: CSC64, Acsr: CSR64, Acoo: COO64, Bcsc: CSC64, Bcsr: CSR64, Bcoo: COO64):
    return Acsc + Bcsc, Acsc - Bcsc, Acsc * Bcsc, Acsc * Bcsr, Acsr + Bcsc


PROGRAMS = {dace.int32: elementwise32, dace.int64: elementwise64}


@dace.program
def transposed_csr_plus_csc(A: ss.CSR[dace.float64, N, M], B: ss.CSC[dace.float64, M, N]):
    return A.T + B, A.T * B


def _check(got, want, what):
    assert sp.issparse(got), f'{what}: got {type(got)}'
    assert got.format == want.format, f'{what}: format {got.format}, scipy gives {want.format}'
    assert got.shape == want.shape and got.has_canonical_format, f'{what}: not canonical'
    np.testing.assert_allclose(got.toarray(), want.toarray(), rtol=1e-12, atol=1e-12, err_msg=what)


def test_rule():
    csr, csc = (sparse_type_of(getattr(ss, f)[dace.float64, 4, 5]) for f in ('CSR', 'CSC'))
    assert result_format(csc).name == 'CSC' and result_format(csr.T).name == 'CSC'
    assert result_format(csr).name == 'CSR' and result_format(csc.T).name == 'CSR'
    coo, dcsr = (sparse_type_of(getattr(ss, f)[dace.float64, 4, 5]) for f in ('COO', 'DCSR'))
    assert result_format(coo).name == 'CSR' and result_format(dcsr.T).name == 'CSR'


@pytest.mark.parametrize('it', [dace.int32, dace.int64], ids=['i32', 'i64'])
def test_format_follows_scipy(it):
    mats, other = zoo(), zoo(seed=99)
    for name in ('rect', 'empty_rows_cols', 'empty', 'row_1xN', 'power_law'):
        A, B = mats[name], other[name]
        args = [as_format(X, f, np.dtype(it.type)) for X in (A, B) for f in ('CSC', 'CSR', 'COO')]  # COO: duplicates
        got = iter(PROGRAMS[it](*args))
        for fa, fb, ops in CASES[it]:
            sa, sb = A.asformat(fa.lower()), B.asformat(fb.lower())  # scipy's own objects decide
            for op in ops:
                want = sa + sb if op == '+' else sa - sb if op == '-' else sa * sb
                _check(next(got), want, f'{name}: {fa} {op} {fb} ({it})')


def test_transposed_view_is_column_major(rng):
    A = sp.random_array((30, 40), density=0.2, format='csr', rng=rng)
    B = sp.random_array((40, 30), density=0.2, format='csc', rng=rng)
    plus, times = transposed_csr_plus_csc(A, B)
    _check(plus, A.T + B, 'A.T + B')
    _check(times, A.T * B, 'A.T * B')
