"""The ``pure`` expansions of the element-wise nodes, reductions and softmax against NumPy:
``SparseMulDense`` (``A * D``), ``SparseAddDense`` (``A + D``, ``D - A``, ``A - D``),
``MapValues`` (scaling by a constant, a symbol and a data scalar, every function of
``map_values.FUNCTIONS``, ``ss.spones`` among them), ``SparseSum`` (total, per column,
per row, the entry count of ``A.nnz``) and ``SparseSoftmax`` (rows, columns, ``A.T``), plus the transposed views.

One program per (format, value dtype, index dtype) computes every op at once: all formats
in (float64, int32), CSR and COO also in (float32, int64) (the other dtype pairs
run under ``pure`` in the pure suite's zoos, ``make test``). Each runs the zoo and a
matrix of special values (NaN, +-inf, a row of -inf only, an explicit zero, an empty row).

Results are checked slot by slot against the argument's storage (A's pattern kept: index
arrays equal, ELL padding and out-of-range DIA slots 0, or ``f(0)`` for ``MapValues``,
which maps every slot as the ``cpu`` expansion does) and densely against NumPy. A
structural check proves the pure expansions ran: every node of the program has
implementation ``pure`` and the expanded SDFG holds Python tasklets only.
"""

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.ops.add_dense import SparseAddDense
from sdfgsparse.ops.map_values import MapValues
from sdfgsparse.ops.mul_dense import SparseMulDense
from sdfgsparse.ops.reduce import SparseSum
from sdfgsparse.ops.softmax import SparseSoftmax
from sdfgsparse.runtime.container import SparseMatrix
from sdfgsparse.runtime.convert import scipy_members, storage_to_coo
from sparse_zoo import FORMATS, as_format, dense, expanded_pure, softmax_reference, tol, zoo

M, N = dace.symbol('M'), dace.symbol('N')
OURS = (SparseMulDense, SparseAddDense, MapValues, SparseSum, SparseSoftmax)

#: (format, value dtype, index dtype): every format in f64/i32, CSR and COO also in f32/i64
SIGNATURES = [(f, dace.float64, dace.int32) for f in FORMATS] + [(f, dace.float32, dace.int64)
                                                                  for f in ('CSR', 'COO')]

#: the functions of the MapValues results, in program order (host twins, applied to every slot)
SLOT_FUNCTIONS = [
    ('2*A', lambda v, al, n: 2 * v),
    ('-A', lambda v, al, n: -v),
    ('al*A', lambda v, al, n: al * v),
    ('A/4', lambda v, al, n: v * 0.25),
    ('N*A', lambda v, al, n: n * v),
    ('relu', lambda v, al, n: np.maximum(v, 0)),
    ('abs', lambda v, al, n: np.abs(v)),
    ('sqrt(abs)', lambda v, al, n: np.sqrt(np.abs(v))),
    ('sin', lambda v, al, n: np.sin(v)),
    ('tanh', lambda v, al, n: np.tanh(v)),
    ('square', lambda v, al, n: np.square(v)),
    ('exp', lambda v, al, n: np.exp(v)),
    ('sigmoid', lambda v, al, n: 1 / (1 + np.exp(-v))),
    ('spones', lambda v, al, n: np.ones_like(v)),
]

_PROGRAMS = {}


def program(fmt, vt, it):
    """The program of every op for one signature (parsed under the pure implementation at
    its first call)."""
    key = (fmt, vt, it)
    if key in _PROGRAMS:
        return _PROGRAMS[key]
    F = ss.BSR.with_block(2, 2) if fmt == 'BSR' else getattr(ss, fmt)
    T = F[vt, M, N, it]

    @dace.program
    def elementwise(A: T, D: vt[M, N], Dt: vt[N, M], al: vt):
        return (A * D, A + D, D - A, A - D,
                2 * A, -A, al * A, A / 4, N * A,
                ss.relu(A), ss.abs(A), ss.sqrt(ss.abs(A)), ss.sin(A), ss.tanh(A), ss.square(A), ss.exp(A),
                ss.sigmoid(A), ss.spones(A),
                A.sum(), A.sum(axis=0), A.sum(axis=1),
                ss.softmax(A), ss.softmax(A, axis=0),
                A.T * Dt, Dt - A.T, A.T.sum(axis=1), ss.softmax(A.T))

    @dace.program
    def elementwise_count(A: T, D: vt[M, N], Dt: vt[N, M], al: vt):
        return (A * D, A + D, D - A, A - D,
                2 * A, -A, al * A, A / 4, N * A,
                ss.relu(A), ss.abs(A), ss.sqrt(ss.abs(A)), ss.sin(A), ss.tanh(A), ss.square(A), ss.exp(A),
                ss.sigmoid(A), ss.spones(A),
                A.sum(), A.sum(axis=0), A.sum(axis=1),
                ss.softmax(A), ss.softmax(A, axis=0),
                A.T * Dt, Dt - A.T, A.T.sum(axis=1), ss.softmax(A.T), A.nnz)

    _PROGRAMS[key] = elementwise_count if fmt in ('ELL', 'DIA') else elementwise
    return _PROGRAMS[key]


# ---------------------------------------------------------------------- storage helpers
def storage(X):
    """(format, member arrays, shape) of a scipy matrix or SparseMatrix."""
    if isinstance(X, SparseMatrix):
        return X.format, X.arrays, X.shape
    fmt = ss.BSR.with_block(*X.blocksize) if X.format == 'bsr' else getattr(ss, X.format.upper())
    return fmt, scipy_members(X, fmt), X.shape


def entries(fmt, arrays, shape):
    """(rows, cols, value positions) of the stored entries, in storage order."""
    slots = dict(arrays, vals=np.arange(arrays['vals'].size))
    return storage_to_coo(fmt, slots, shape)


def special(dtype):
    """NaN, +-inf, a row of -inf only, an explicit zero, an empty row (6 x 4: BSR fits)."""
    nan, inf = np.nan, np.inf
    indptr = np.array([0, 3, 5, 5, 7, 9, 11])
    indices = np.array([0, 1, 2, 0, 1, 0, 2, 1, 3, 0, 3])
    data = np.array([nan, 0.0, 1.0, -inf, -inf, inf, -2.0, 3.0, -inf, 0.5, 2.0], dtype=dtype)
    return sp.csr_array((data, indices, indptr), shape=(6, 4))


def cases(fmt, dtype):
    mats = dict(zoo(dtype))
    mats['special'] = special(dtype)
    if fmt == 'BSR':
        mats = {k: v for k, v in mats.items() if v.shape[0] % 2 == 0 and v.shape[1] % 2 == 0}
    return mats


# ---------------------------------------------------------------------- checks
def check_same_pattern(got, fmt, arrays, what):
    """``got`` has the argument's storage layout: same index members; returns its values."""
    gf, ga, _ = storage(got)
    kinds = [l.describe() for l in fmt.levels]
    assert [l.describe() for l in gf.levels] == kinds, f'{what}: format {gf.name}, levels {gf.levels}'
    for m, a in arrays.items():
        if m != 'vals':
            np.testing.assert_array_equal(ga[m], a, err_msg=f'{what}: index member {m} changed')
    assert ga['vals'].size == arrays['vals'].size, f'{what}: {ga["vals"].size} value slots'
    return ga['vals']


def check_entries(gvals, r, c, q, want, nslots, dtype, what):
    """Values at the entry slots ``q`` are ``want``; every other slot holds 0."""
    assert gvals.dtype == np.dtype(dtype), f'{what}: dtype {gvals.dtype}'
    np.testing.assert_allclose(gvals[q], want.astype(dtype), **tol(dtype), err_msg=what)
    pad = np.ones(nslots, dtype=bool)
    pad[q] = False
    np.testing.assert_array_equal(gvals[pad], 0, err_msg=f'{what}: padding slots')


def check_dense(got, want, dtype, what):
    got = dense(got)
    np.testing.assert_allclose(got.reshape(want.shape), want, **tol(dtype), err_msg=what)


def run_case(fmt, vt, it, A, seed=0):
    npv = np.dtype(vt.type)
    rng = np.random.default_rng(seed)
    m, n = A.shape
    D = rng.standard_normal((m, n)).astype(npv)
    Dt = rng.standard_normal((n, m)).astype(npv)
    al = npv.type(-1.5)
    arg = as_format(A, fmt, np.dtype(it.type), rng)
    with ss.targets.use_implementation('pure'):
        out = list(program(fmt, vt, it)(arg, D, Dt, al))
    sfmt, arrays, shape = storage(arg)
    r, c, q = entries(sfmt, arrays, shape)
    v = arrays['vals'][q]
    nslots = arrays['vals'].size
    Ad = np.zeros((m, n), dtype=np.float64)
    with np.errstate(invalid='ignore', over='ignore'):
        np.add.at(Ad, (r, c), v.astype(np.float64))
        # A * D: on A's pattern, one product per stored entry
        got = check_same_pattern(out[0], sfmt, arrays, 'A*D')
        check_entries(got, r, c, q, v * D[r, c], nslots, npv, 'A*D')
        prod = np.zeros((m, n))
        np.add.at(prod, (r, c), (v * D[r, c]).astype(np.float64))
        check_dense(out[0], prod, npv, 'A*D (dense)')
        for name, got, want in zip(['A+D', 'D-A', 'A-D'], out[1:4], [Ad + D, D - Ad, Ad - D]):
            check_dense(got, want, npv, name)
        # every value slot mapped (padding too, as the cpu expansion does)
        for (name, f), got in zip(SLOT_FUNCTIONS, out[4:18]):
            gvals = check_same_pattern(got, sfmt, arrays, name)
            want = f(arrays['vals'], al, n).astype(npv)
            assert gvals.dtype == npv, f'{name}: dtype {gvals.dtype}'
            np.testing.assert_allclose(gvals, want, **tol(npv), err_msg=name)
            dref = np.zeros((m, n))
            np.add.at(dref, (r, c), want[q].astype(np.float64))
            check_dense(got, dref, npv, f'{name} (dense)')
        check_dense(out[18], np.array([Ad.sum()]), npv, 'A.sum()')
        check_dense(out[19], Ad.sum(axis=0), npv, 'A.sum(axis=0)')
        check_dense(out[20], Ad.sum(axis=1), npv, 'A.sum(axis=1)')
        for k, (axis, lines) in enumerate(((1, r), (0, c))):
            got = check_same_pattern(out[21 + k], sfmt, arrays, f'softmax axis={axis}')
            check_entries(got, r, c, q, softmax_reference(lines, v), nslots, npv, f'softmax axis={axis}')
        # transposed views: the same storage seen as A.T
        got = check_same_pattern(out[23], sfmt, arrays, 'A.T*Dt')
        check_entries(got, r, c, q, v * Dt[c, r], nslots, npv, 'A.T*Dt')
        check_dense(out[24], Dt - Ad.T, npv, 'Dt-A.T')
        check_dense(out[25], Ad.T.sum(axis=1), npv, 'A.T.sum(axis=1)')
        got = check_same_pattern(out[26], sfmt, arrays, 'softmax(A.T)')
        check_entries(got, r, c, q, softmax_reference(c, v), nslots, npv, 'softmax(A.T)')
    if fmt in ('ELL', 'DIA'):
        check_dense(out[27], np.array([r.size]), np.int64, 'A.nnz')
    assert len(out) == (28 if fmt in ('ELL', 'DIA') else 27)


def check_pure_sdfg(fmt, vt, it):
    """Every node of ours in the program takes ``pure``; expanded, the SDFG holds Python
    tasklets only (no C++ text) and no library node."""
    with ss.targets.use_implementation('pure'):
        sdfg = program(fmt, vt, it).to_sdfg()
    ours = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, OURS)]
    assert {type(n) for n in ours} == set(OURS)
    assert all(n.implementation == 'pure' for n in ours), [(n.label, n.implementation) for n in ours]
    expanded_pure(sdfg)


@pytest.mark.parametrize('fmt,vt,it', SIGNATURES,
                         ids=[f'{f}-{"f64" if vt == dace.float64 else "f32"}-{"i64" if it == dace.int64 else "i32"}'
                              for f, vt, it in SIGNATURES])
def test_pure_elementwise(fmt, vt, it):
    """Every op of this file in one signature over the zoo and the special values."""
    check_pure_sdfg(fmt, vt, it)
    for name, A in cases(fmt, np.dtype(vt.type)).items():
        try:
            run_case(fmt, vt, it, A)
        except AssertionError as ex:
            raise AssertionError(f'{fmt} {vt} {it}, matrix {name}: {ex}') from ex


def test_nodes_keep_cpu_default():
    """Outside ``use_implementation('pure')`` the nodes keep their default, ``cpu``."""
    for cls in OURS:
        assert cls.default_implementation == 'cpu' and set(cls.implementations) >= {'pure', 'cpu'}


def test_constant_scale_factor_spelling():
    """A scale factor that is not an integer is written with floats (tasklet division of
    integers truncates); its symbols become symbols of the kernel."""
    from types import SimpleNamespace

    from sdfgsparse.ops.map_values import _constant_alpha
    k = SimpleNamespace(sdfg=dace.SDFG('kernel'), parent=dace.SDFG('parent'))
    assert _constant_alpha(k, '2') == '(2)'
    assert _constant_alpha(k, '1/N') == '(1.0/N)' and 'N' in k.sdfg.symbols
    assert float(_constant_alpha(k, '0.25')[1:-1]) == 0.25
