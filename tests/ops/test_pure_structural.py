"""The ``pure`` expansions of the nodes whose result has a data-dependent number of entries
against scipy / NumPy: ``Convert`` (to CSR and CSC, of A and of A.T), ``SparseAdd``
(``A + B``, ``A - B``, ``A - A``: cancellation kept, ``A.T + B.T``: a CSC result),
``SparseMul`` (``A * B``, ``A.T * B.T``) and ``SpGEMM`` (``A @ B.T``, ``A.T @ A``), and
an intermediate sum read by an SpMV.

One program per (format, value dtype, index dtype) computes every op at once: all formats
in (float64, int32), CSR and COO also in (float32, int64) (the other dtype pairs
run under ``pure`` in the pure suite's zoos, ``make test``), plus one program of
mixed formats. Results must be canonical (sorted, no duplicates), of the format scipy's
rule gives, with the operands' index width, explicit zeros from cancellation stored. A
structural check proves the pure expansions ran: every node of ours in the program has
implementation ``pure`` and the expanded SDFG holds Python tasklets only.
"""

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.formats import sparse_type_of
from sdfgsparse.lowering.graph import Operand
from sdfgsparse.lowering.graph_compress import row_major
from sdfgsparse.ops.add import SparseAdd
from sdfgsparse.ops.convert import Convert
from sdfgsparse.ops.mul import SparseMul
from sdfgsparse.ops.spgemm import SpGEMM
from sdfgsparse.runtime.container import SparseMatrix
from sdfgsparse.runtime.convert import scipy_members, storage_to_coo
from sparse_zoo import FORMATS, as_format, dense, expanded_pure, tol, zoo

M, N = dace.symbol('M'), dace.symbol('N')
OURS = (Convert, SparseAdd, SparseMul, SpGEMM)

#: (format, value dtype, index dtype): every format in f64/i32, CSR and COO also in f32/i64
SIGNATURES = [(f, dace.float64, dace.int32) for f in FORMATS] + [(f, dace.float32, dace.int64)
                                                                  for f in ('CSR', 'COO')]

#: the results of :func:`program`, in order: (name, expected format or None for dense)
OPS = [('A+B', None), ('A-B', None), ('A-A', None), ('A*B', None), ('A@B.T', 'csr'), ('A.T@A', 'csr'),
       ('convert(A,CSR)', 'csr'), ('convert(A,CSC)', 'csc'), ('convert(A.T,CSR)', 'csr'),
       ('convert(A.T,CSC)', 'csc'), ('A.T+B.T', None), ('A.T*B.T', None), ('(A+B)@x', 'dense')]

_PROGRAMS = {}


def _fmt(fmt):
    return ss.BSR.with_block(2, 2) if fmt == 'BSR' else getattr(ss, fmt)


def program(fmt, vt, it):
    """Every op of this file for one signature (parsed under the pure implementation)."""
    key = (fmt, vt, it)
    if key not in _PROGRAMS:
        TA = _fmt(fmt)[vt, M, N, it]
        TB = _fmt(fmt)[vt, M, N, it]

        @dace.program
        def structural(A: TA, B: TB, x: vt[N]):
            return (A + B, A - B, A - A, A * B, A @ B.T, A.T @ A, ss.convert(A, ss.CSR), ss.convert(A, ss.CSC),
                    ss.convert(A.T, ss.CSR), ss.convert(A.T, ss.CSC), A.T + B.T, A.T * B.T, (A + B) @ x)

        _PROGRAMS[key] = structural
    return _PROGRAMS[key]


@dace.program
def mixed(Ar: ss.CSR[dace.float64, M, N], Bc: ss.CSC[dace.float64, M, N], Co: ss.COO[dace.float64, N, M],
          Dd: ss.DIA[dace.float64, M, N], El: ss.ELL[dace.float64, N, M, dace.int64]):
    return (Ar + Bc, Bc - Ar, Bc * Ar, Ar * Dd, Dd + El.T, Co @ Ar, El @ Bc, Ar @ Co, Bc.T @ Ar, Ar @ Bc.T,
            ss.convert(El, ss.CSC), Bc * Co.T, ss.convert(Ar + Bc, ss.CSC))


# ---------------------------------------------------------------------- checks
def result_format(fmt):
    """scipy's rule for sparse +, -, * (ops/add.py result_format): CSC when A, as the
    operation sees it, is CSC, else CSR."""
    return lambda transposed: 'csc' if (fmt, transposed) in (('CSC', False), ('CSR', True)) else 'csr'


def check_result(got, want, fmt, itype, dtype, what):
    if fmt == 'dense':
        np.testing.assert_allclose(np.asarray(got), want, **tol(dtype), err_msg=what)
        return
    assert sp.issparse(got), f'{what}: got {type(got)}'
    assert got.format == fmt, f'{what}: format {got.format}, expected {fmt}'
    assert got.shape == want.shape, f'{what}: shape {got.shape}'
    assert got.has_canonical_format, f'{what}: not canonical'
    assert got.indices.dtype == np.dtype(itype) and got.indptr.dtype == np.dtype(itype), \
        f'{what}: index dtype {got.indices.dtype}'
    assert got.dtype == np.dtype(dtype), f'{what}: value dtype {got.dtype}'
    np.testing.assert_allclose(dense(got), want, **tol(dtype), err_msg=what)


def stored(X, transposed=False):
    """The coordinates an argument or result stores (explicit zeros included: BSR blocks,
    DIA diagonals), as a set."""
    if isinstance(X, SparseMatrix):
        fmt, arrays, shape = X.format, X.arrays, X.shape
    else:
        fmt = ss.BSR.with_block(*X.blocksize) if X.format == 'bsr' else getattr(ss, X.format.upper())
        arrays, shape = scipy_members(X, fmt), X.shape
    r, c, _ = storage_to_coo(fmt, arrays, shape)
    return set(zip(c.tolist(), r.tolist())) if transposed else set(zip(r.tolist(), c.tolist()))


def run_case(fmt, vt, it, A, B, seed=0):
    npv, npi = np.dtype(vt.type), np.dtype(it.type)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(A.shape[1]).astype(npv)
    a = as_format(A, fmt, npi, rng)
    b = as_format(B, fmt, npi, rng)
    with ss.targets.use_implementation('pure'):
        out = program(fmt, vt, it)(a, b, x)
    assert len(out) == len(OPS)
    Ad, Bd = A.toarray().astype(np.float64), B.toarray().astype(np.float64)
    rule = result_format(fmt)
    want = [Ad + Bd, Ad - Bd, Ad - Ad, Ad * Bd, Ad @ Bd.T, Ad.T @ Ad, Ad, Ad, Ad.T, Ad.T, Ad.T + Bd.T, Ad.T * Bd.T,
            (Ad + Bd) @ x.astype(np.float64)]
    for (name, f), got, w in zip(OPS, out, want):
        if f is None:
            f = rule('.T' in name)
        check_result(got, w, f, npi, npv, f'{fmt} {vt} {it}: {name}')
    # the union of the stored patterns is stored, cancellation included (A - A: A's pattern,
    # zeros); the intersection for A * B
    for name, got, pattern in (('A+B', out[0], stored(a) | stored(b)), ('A-A', out[2], stored(a)),
                               ('A*B', out[3], stored(a) & stored(b)),
                               ('A.T+B.T', out[10], stored(a, True) | stored(b, True))):
        assert stored(got) == pattern, f'{fmt} {vt} {it}: {name} stores {len(stored(got))} entries, ' \
            f'expected {len(pattern)}'
    assert not out[2].data.any(), 'A-A: values'


def check_pure_sdfg(prog, classes=OURS):
    """Every node of ours in the program takes ``pure``; expanded, the SDFG holds Python
    tasklets only (no C++ text) and no library node."""
    with ss.targets.use_implementation('pure'):
        sdfg = prog.to_sdfg()
    ours = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, OURS)]
    assert {type(n) for n in ours} >= set(classes), {type(n).__name__ for n in ours}
    assert all(n.implementation == 'pure' for n in ours), [(n.label, n.implementation) for n in ours]
    expanded = expanded_pure(sdfg)
    # the data-dependent steps are stable scatters (state-machine loops) and prefix sums in
    # pieces (maps and a tasklet with a loop inside: no loop of states, on a GPU a kernel each)
    assert any(isinstance(e.data, dace.InterstateEdge) and e.data.assignments
               for g in expanded.all_sdfgs_recursive() for e in g.edges())
    codes = [n.code.as_string for n, _ in expanded.all_nodes_recursive() if isinstance(n, dace.nodes.Tasklet)]
    assert any('while (u_j <' in c for c in codes), 'no prefix sum in pieces'


def _pairs(fmt, dtype):
    mats, other = zoo(dtype), zoo(dtype, seed=99)
    pairs = {k: (mats[k], other[k]) for k in mats}
    if fmt == 'BSR':
        pairs = {k: v for k, v in pairs.items() if v[0].shape[0] % 2 == 0 and v[0].shape[1] % 2 == 0}
    return pairs


@pytest.mark.parametrize('fmt,vt,it', SIGNATURES,
                         ids=[f'{f}-{"f64" if vt == dace.float64 else "f32"}-{"i64" if it == dace.int64 else "i32"}'
                              for f, vt, it in SIGNATURES])
def test_pure_structural(fmt, vt, it):
    """Every op of this file in one signature over the zoo."""
    check_pure_sdfg(program(fmt, vt, it))
    for name, (A, B) in _pairs(fmt, np.dtype(vt.type)).items():
        try:
            run_case(fmt, vt, it, A, B)
        except AssertionError as ex:
            raise AssertionError(f'matrix {name}: {ex}') from ex


def test_pure_mixed_formats(rng):
    """Operands of different formats meet: a column-major operand stored by rows first,
    DIA and ELL (padding) with a transposed view, COO and CSC into SpGEMM (converted
    first), a transposed CSC as either SpGEMM operand, an int64 ELL into a CSC result, and
    intermediate results whose capacity exceeds their count (a COO with duplicates
    converted, then stored by columns; a sum converted) as operands."""
    check_pure_sdfg(mixed)
    A = sp.random_array((11, 7), density=0.3, format='csr', rng=rng)
    B = sp.random_array((11, 7), density=0.3, format='csr', rng=rng)
    C = sp.random_array((7, 11), density=0.3, format='csr', rng=rng)
    D = sp.csr_array(sp.diags_array([rng.standard_normal(7), rng.standard_normal(6)], offsets=[0, 1], shape=(11, 7)))
    E = sp.random_array((7, 11), density=0.25, format='csr', rng=rng)
    args = (as_format(A, 'CSR'), as_format(B, 'CSC'), as_format(C, 'COO', rng=rng), as_format(D, 'DIA'),
            as_format(E, 'ELL', np.int64))
    with ss.targets.use_implementation('pure'):
        out = mixed(*args)
    Ad, Bd, Cd, Dd, Ed = (M_.toarray() for M_ in (A, B, C, D, E))
    want = [('A+B', Ad + Bd, 'csr'), ('B-A', Bd - Ad, 'csc'), ('B*A', Bd * Ad, 'csc'), ('A*D', Ad * Dd, 'csr'),
            ('D+E.T', Dd + Ed.T, 'csr'), ('C@A', Cd @ Ad, 'csr'), ('E@B', Ed @ Bd, 'csr'), ('A@C', Ad @ Cd, 'csr'),
            ('B.T@A', Bd.T @ Ad, 'csr'), ('A@B.T', Ad @ Bd.T, 'csr'), ('convert(E,CSC)', Ed, 'csc'),
            ('B*C.T', Bd * Cd.T, 'csc'), ('convert(A+B,CSC)', Ad + Bd, 'csc')]
    itypes = [np.int32] * 4 + [np.int64, np.int32, np.int64, np.int32, np.int32, np.int32, np.int64, np.int32, np.int32]
    assert len(out) == len(want)
    for (name, w, f), got, itype in zip(want, out, itypes):
        check_result(got, w, f, itype, np.float64, f'mixed: {name}')


def test_row_major_recognises_row_walks():
    """:func:`row_major` asks the loop nest: CSR and a transposed CSC walk rows directly;
    CSC, COO, DCSR, BSR, ELL, DIA (and their views) do not."""
    conns = lambda st: {m: f'_A_{m}' for m in st.fmt.member_names}
    for name in FORMATS:
        st = sparse_type_of(_fmt(name)[dace.float64, M, N])
        for view in (st, st.T):
            rows = row_major(Operand(view, conns(view)))
            direct = view.fmt.name == 'CSR'
            assert (rows is not None) == direct, (name, view.fmt.name, rows)
            if direct:
                assert (rows.pos, rows.crd, rows.vals) == ('_A_pos1', '_A_crd1', '_A_vals')
                assert rows.rows == view.rows


def test_cpu_stays_default():
    """Outside ``use_implementation('pure')`` the nodes keep their default, ``cpu``."""
    for cls in OURS:
        assert cls.default_implementation == 'cpu' and set(cls.implementations) >= {'pure', 'cpu'}
