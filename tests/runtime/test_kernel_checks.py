"""Storage checks inside the kernels (sdfgsparse.targets.cpu.kernel_checks): which arguments a
program's kernels may check themselves, and, where they do, the same results and the same
typed errors on warm calls as when the call checks first.

The kernels check from ``IN_KERNEL_FROM`` bytes of indices on (64 MiB by default); these
tests lower it to 0 while their own programs compile and run, so small matrices take the
in-kernel path. The library says from which size its kernels check (the plan follows
it), and each program here is compiled under one setting only."""
import threading

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse import errors
from sdfgsparse.formats import CSR
from sdfgsparse.ops.spmv import SpMV
from sdfgsparse.targets.cpu import kernel_checks
from sdfgsparse.runtime import plan as plan_mod
from sdfgsparse.runtime.marshal import validate_storage

M, N, K = (dace.symbol(s) for s in 'MNK')

# one worker: the programs are compiled under the lowered size
pytestmark = pytest.mark.xdist_group('kernel_checks')


@dace.program
def kc_spmv(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


@dace.program
def kc_spmv_default(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


@dace.program
def kc_spmv64(A: ss.CSR[dace.float32, M, N, dace.int64], x: dace.float32[N]):
    return A @ x


@dace.program
def kc_csc_t(A: ss.CSC[dace.float64, M, N], x: dace.float64[M]):
    return A.T @ x  # CSC seen as A.T: a row walk


@dace.program
def kc_two_spmv(A: ss.CSR[dace.float64, M, N], x: dace.float64[N], z: dace.float64[N]):
    return A @ x + 2.0 * (A @ z)


@dace.program
def kc_spmv_and_spmm(A: ss.CSR[dace.float64, M, N], x: dace.float64[N], X: dace.float64[N, K]):
    return A @ x, A @ X


@dace.program
def kc_into_argument(A: ss.CSR[dace.float64, M, N], x: dace.float64[N], y: dace.float64[M]):
    y[:] = A @ x


@pytest.fixture
def in_kernel(monkeypatch):
    """Kernels check every argument they claim, whatever its size."""
    monkeypatch.setattr(kernel_checks, 'IN_KERNEL_FROM', 0)


def _plan(prog):
    return next(p for ps in prog._ss_plans.values() for p in ps)


def _random(rng, m, n, density, dtype=np.float64, idt=np.int32):
    A = sp.random_array((m, n), density=density, format='csr', rng=rng, dtype=dtype)
    A.sum_duplicates()
    return sp.csr_array((A.data, A.indices.astype(idt), A.indptr.astype(idt)), shape=A.shape)


def _spec_error(A, fmt=CSR):
    """The typed error the full validation raises for A's storage (None when valid)."""
    arrays = {'pos1': A.indptr, 'crd1': A.indices, 'vals': A.data}
    try:
        validate_storage(fmt, arrays, A.shape, {'n1': A.indices.size}, 'A')
    except errors.SparseError as ex:
        return type(ex), str(ex)
    return None


def _edits(rng, A):
    """Broken copies of A: chosen edits (every kind of problem) and random ones."""
    m, n = A.shape
    nnz = A.nnz
    row = int(np.flatnonzero(np.diff(A.indptr) >= 2)[0])
    p = int(A.indptr[row])
    idt = A.indices.dtype
    chosen = [('indices', 0, n), ('indices', 0, -1), ('indices', nnz - 1, int(np.iinfo(idt).min)),
              ('indices', p + 1, int(A.indices[p])), ('indices', p, int(A.indices[p + 1])),
              ('indptr', m, nnz + 1), ('indptr', m, nnz - 1), ('indptr', 1, nnz + 5), ('indptr', 0, 1),
              ('indptr', m // 2, -3)]
    last = int(np.flatnonzero(np.diff(A.indptr) >= 2)[-1])  # in the last rows
    q = int(A.indptr[last])
    chosen += [('indices', q + 1, int(A.indices[q])), ('indices', q, int(A.indices[q + 1])),
               ('indptr', m - 1, int(A.indptr[m - 2]) - 1)]
    for _ in range(12):
        member = ['indices', 'indptr'][rng.integers(2)]
        top = n if member == 'indices' else nnz
        size = getattr(A, member).size
        chosen.append((member, int(rng.integers(size)), int(rng.integers(-2, top + 2))))
    for member, at, value in chosen:
        B = sp.csr_array((A.data.copy(), A.indices.copy(), A.indptr.copy()), shape=A.shape)
        getattr(B, member)[at] = value
        yield (member, at, value), B


@pytest.mark.parametrize('prog,dtype,idt', [(kc_spmv, np.float64, np.int32), (kc_spmv64, np.float32, np.int64)],
                         ids=['f64-i32', 'f32-i64'])
def test_kernel_checks_agree_with_validation(rng, in_kernel, prog, dtype, idt):
    """Valid storage gives scipy's result; every broken one raises exactly the error of the
    full validation, and the next valid call is right again."""
    # a few rows; many rows, some empty, in more than one block per thread
    for m, n, density in [(120, 90, 0.08), (785, 300, 0.01)]:
        _agree(rng, prog, m, n, density, dtype, idt)


@pytest.mark.parametrize('prog,dtype,idt', [(kc_spmv, np.float64, np.int32), (kc_spmv64, np.float32, np.int64)],
                         ids=['f64-i32', 'f32-i64'])
def test_kernel_checks_on_regular_rows(rng, in_kernel, prog, dtype, idt):
    """A band (regular rows, which the unchecked walk takes one entry per step): the same
    results and errors through the checked walk."""
    band = sp.diags([np.ones(400 - abs(d)) for d in range(-3, 4)], list(range(-3, 4)), format='csr')
    _agree(rng, prog, 400, 400, None, dtype, idt, A=band)


def _agree(rng, prog, m, n, density, dtype, idt, A=None):
    if A is None:
        A = _random(rng, m, n, density, dtype, idt)
    else:
        A = sp.csr_array((rng.standard_normal(A.nnz).astype(dtype), A.indices.astype(idt), A.indptr.astype(idt)),
                         shape=A.shape)
    if A.indices.dtype != idt:
        pytest.skip('scipy narrowed the index arrays')
    x = rng.standard_normal(n).astype(dtype)
    tol = 1e-12 if dtype == np.float64 else 1e-4
    for _ in range(2):
        np.testing.assert_allclose(prog(A, x), A @ x, rtol=tol, atol=tol)
    plan = _plan(prog)
    assert plan.sparse_slots[0].in_kernel_from == 0 and plan.failures is not None
    checked = []
    for what, B in _edits(rng, A):
        want = _spec_error(B)
        if want is None:
            np.testing.assert_allclose(prog(B, x), B @ x, rtol=tol, atol=tol, err_msg=str(what))
            continue
        before = plan.failures()
        with pytest.raises(want[0]) as info:
            prog(B, x)
        assert str(info.value) == want[1], what
        if what[0] == 'indices' or what[1] not in (0, A.shape[0]):  # not an end of pos: the kernel's part
            checked.append(plan.failures() > before)
        np.testing.assert_allclose(prog(A, x), A @ x, rtol=tol, atol=tol)
    assert len(checked) >= 6 and all(checked)  # each of them was caught by the kernel


def test_kernel_checks_csc_as_transpose(rng, in_kernel):
    A = _random(rng, 70, 50, 0.1).tocsc()
    A.sort_indices()
    x = rng.standard_normal(70)
    for _ in range(2):
        np.testing.assert_allclose(kc_csc_t(A, x), A.T @ x, rtol=1e-12)
    assert _plan(kc_csc_t).sparse_slots[0].in_kernel_from == 0
    B = A.copy()
    B.indices[3] = 70
    with pytest.raises(errors.InvalidIndexError, match=r'A: crd1\[3\] = 70 is out of range'):
        kc_csc_t(B, x)


def test_no_check_in_kernel_below_the_size(rng):
    """At the default size the call checks first: the kernel never counts a failure."""
    A = _random(rng, 40, 30, 0.2)
    x = rng.standard_normal(30)
    for _ in range(2):
        np.testing.assert_allclose(kc_spmv_default(A, x), A @ x, rtol=1e-12)
    plan = _plan(kc_spmv_default)
    assert plan.sparse_slots[0].in_kernel_from == kernel_checks.IN_KERNEL_FROM
    before = plan.failures()
    B = A.copy()
    B.indices[0] = 30
    with pytest.raises(errors.InvalidIndexError):
        kc_spmv_default(B, x)
    assert plan.failures() == before


def test_every_reader_must_check(rng, in_kernel):
    """Two SpMVs of A: both kernels check it. SpMV and SpMM of A: SpMM does not check, so
    the call checks A first. A program that writes into an argument: the error must come
    before, so nothing is checked in a kernel."""
    A = _random(rng, 50, 40, 0.15)
    x, z = rng.standard_normal(40), rng.standard_normal(40)
    X = rng.standard_normal((40, 3))
    B = A.copy()
    B.indices[1] = -1
    for _ in range(2):
        np.testing.assert_allclose(kc_two_spmv(A, x, z), A @ x + 2.0 * (A @ z), rtol=1e-12)
    assert _plan(kc_two_spmv).sparse_slots[0].in_kernel_from == 0
    with pytest.raises(errors.InvalidIndexError, match='is negative'):
        kc_two_spmv(B, x, z)

    for _ in range(2):
        y, Y = kc_spmv_and_spmm(A, x, X)
        np.testing.assert_allclose(y, A @ x, rtol=1e-12)
        np.testing.assert_allclose(Y, A @ X, rtol=1e-12)
    assert _plan(kc_spmv_and_spmm).sparse_slots[0].in_kernel_from is None
    with pytest.raises(errors.InvalidIndexError, match='is negative'):
        kc_spmv_and_spmm(B, x, X)

    y = np.zeros(50)
    for _ in range(2):
        kc_into_argument(A, x, y)
    np.testing.assert_allclose(y, A @ x, rtol=1e-12)
    assert _plan(kc_into_argument).failures is None
    y0 = y.copy()
    with pytest.raises(errors.InvalidIndexError, match='is negative'):
        kc_into_argument(B, x, y)
    np.testing.assert_array_equal(y, y0)  # the caller's output untouched


def test_arguments_untouched_and_threads(rng, in_kernel):
    """Calls from two threads at once, one with broken storage: the valid calls always get
    the right result (a failure counted by the other thread only sends them down the full
    path); nothing the caller passed is modified."""
    A = _random(rng, 300, 200, 0.05)
    x = rng.standard_normal(200)
    want = A @ x
    kc_spmv(A, x)
    kc_spmv(A, x)
    B = A.copy()
    B.indices[B.nnz // 2] = 200
    before = [a.copy() for a in (A.data, A.indices, A.indptr, B.data, B.indices, B.indptr, x)]
    wrong, missed = [], []

    def good():
        for _ in range(200):
            y = kc_spmv(A, x)
            if not np.allclose(y, want, rtol=1e-12):
                wrong.append(y)

    def bad():
        for _ in range(100):
            try:
                kc_spmv(B, x)
                missed.append(1)
            except errors.InvalidIndexError:
                pass

    threads = [threading.Thread(target=good), threading.Thread(target=bad)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong and not missed
    for a, b in zip((A.data, A.indices, A.indptr, B.data, B.indices, B.indptr, x), before):
        np.testing.assert_array_equal(a, b)


def test_validation_off_skips_the_counter(rng, in_kernel):
    """With validation off the plan does not look at the counter: a broken argument runs
    (reads clamped into range) and returns without an error, as it does when the call
    checks first."""
    A = _random(rng, 30, 20, 0.3)
    x = rng.standard_normal(20)
    kc_spmv(A, x)
    kc_spmv(A, x)
    B = A.copy()
    B.indices[0] = 10**6
    ss.set_validation(False)
    try:
        y = kc_spmv(B, x)
    finally:
        ss.set_validation(True)
    assert y.shape == (30, ) and np.isfinite(y).all()
    with pytest.raises(errors.InvalidIndexError):
        kc_spmv(B, x)


def test_claims_survive_a_copy_of_the_sdfg():
    """The decision is made once per SDFG and copied with it (the copy's nodes)."""
    sdfg = kc_two_spmv.to_sdfg()
    nodes = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, SpMV)]
    assert len(nodes) == 2
    assert all(kernel_checks.claims(n, sdfg) == 'A' for n in nodes)
    import copy
    clone = copy.deepcopy(sdfg)
    cnodes = [n for n, _ in clone.all_nodes_recursive() if isinstance(n, SpMV)]
    assert len(cnodes) == 2
    assert all(kernel_checks.claims(n, clone) == 'A' for n in cnodes)
    assert not any(n in clone.__dict__['_ss_kernel_checks'] for n in nodes)


@dace.program
def kc_spmv_relu(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return np.maximum(2.0 * (A @ x), 0)


def test_checked_rows_apply_a_fused_epilogue(rng, in_kernel):
    """SparseEpilogueFusion on a program compiled with ss.compile: the checking row
    tasklet applies the epilogue, agrees with the unfused SDFG, and catches bad storage."""
    from sdfgsparse.transformations import SparseEpilogueFusion
    sdfg = kc_spmv_relu.to_sdfg()
    assert sdfg.apply_transformations_repeated(SparseEpilogueFusion) == 2
    fused = ss.compile(sdfg)
    A = sp.random_array((60, 45), density=0.15, format='csr', rng=rng, data_sampler=rng.standard_normal)
    x = rng.standard_normal(45)
    for _ in range(2):
        np.testing.assert_allclose(fused(A=A, x=x), np.maximum(2 * (A @ x), 0), rtol=1e-12)
    plan = next(p for ps in fused._ss_plans.values() for p in ps)
    assert plan.sparse_slots[0].in_kernel_from == 0
    B = A.copy()
    B.indices[2] = 45
    with pytest.raises(errors.InvalidIndexError, match=r'A: crd1\[2\] = 45 is out of range'):
        fused(A=B, x=x)
