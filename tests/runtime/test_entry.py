"""The warm call's single entry into a program's library (targets/cpu/entry.py): the plans
of CSR / CSC programs call it, with every kind of argument it passes; it checks the
storage before the program runs; a library without the entry of the compiled arguments
keeps the three calls; concurrent warm calls do not share a record."""
import threading

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse import errors
from sdfgsparse.runtime import plan as plan_mod
from sdfgsparse.runtime.call import _raw_key
from sdfgsparse.targets.cpu import entry

M, N, K = (dace.symbol(s) for s in 'MNK')


@dace.program
def entry_spmv(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


@dace.program
def entry_scaled(A: ss.CSC[dace.float32, M, N], X: dace.float32[N, K], alpha: dace.float32, shift: dace.int64):
    return alpha * (A @ X) + shift


@dace.program
def entry_two(A: ss.CSR[dace.float64, M, N], B: ss.CSR[dace.float64, M, N, dace.int64], x: dace.float64[N]):
    return A @ x + B @ x


def _random(rng, m, n, density, dtype=np.float64, index=np.int32):
    A = sp.random_array((m, n), density=density, format='csr', rng=rng, dtype=dtype)
    A.indices, A.indptr = A.indices.astype(index), A.indptr.astype(index)
    return A


def _plan(prog, *args):
    prog(*args)
    prog(*args)
    return next(p for p in prog._ss_plans[_raw_key(args)] if p.run(args) is not plan_mod.MISS)


def test_warm_spmv_goes_through_the_entry(rng, plan_calls):
    A, x = _random(rng, 60, 50, 0.1), rng.standard_normal(50)
    plan = _plan(entry_spmv, A, x)
    assert plan.entry is not None and plan.entry.sparse == ['A']
    assert plan.steps == {'A': 'sparse', 'x': 'numpy'}  # (read in C, checked by the entry)
    for m, n, d in [(60, 50, 0.1), (1, 1, 1.0), (9, 6, 0.0), (300, 20, 0.3)]:
        A, x = _random(rng, m, n, d), rng.standard_normal(n)
        done = plan_calls['done']
        np.testing.assert_allclose(entry_spmv(A, x), A @ x, rtol=1e-12, atol=1e-12)
        assert plan_calls['done'] == done + 1


def test_scalars_other_dtypes_and_csc_through_the_entry(rng):
    A = sp.random_array((30, 20), density=0.2, format='csc', rng=rng, dtype=np.float32)
    X = rng.standard_normal((20, 5)).astype(np.float32)
    plan = _plan(entry_scaled, A, X, np.float32(1.5), 3)
    assert plan.entry is not None and plan.steps == {'A': 'sparse', 'X': 'numpy', 'alpha': 'scalar',
                                                     'shift': 'scalar'}
    for alpha, shift in [(np.float32(-2.25), -7), (np.float32(0.0), 2**40)]:
        got = plan.run((A, X, alpha, shift))
        np.testing.assert_allclose(got, alpha * (A @ X) + np.float32(shift), rtol=1e-5)


def test_two_sparse_arguments_each_checked(rng):
    A = _random(rng, 40, 30, 0.2)
    B = _random(rng, 40, 30, 0.2, index=np.int64)
    x = rng.standard_normal(30)
    plan = _plan(entry_two, A, B, x)
    assert plan.entry is not None and plan.entry.sparse == ['A', 'B']
    np.testing.assert_allclose(entry_two(A, B, x), A @ x + B @ x, rtol=1e-12)
    for which in (0, 1):  # a broken index in either: the entry refuses, the full path names it
        bad = [A.copy(), B.copy()]
        bad[which].indices[0] = 30
        assert plan.run((bad[0], bad[1], x)) is plan_mod.MISS
        with pytest.raises(errors.InvalidIndexError, match='AB'[which]):
            entry_two(bad[0], bad[1], x)


def test_the_entry_checks_before_the_program_runs(rng):
    A, x = _random(rng, 50, 40, 0.2), rng.standard_normal(40)
    plan = _plan(entry_spmv, A, x)
    row = int(np.flatnonzero(np.diff(A.indptr) >= 2)[0])
    unsorted = A.copy()
    lo = unsorted.indptr[row]
    unsorted.indices[lo], unsorted.indices[lo + 1] = unsorted.indices[lo + 1], unsorted.indices[lo]
    negative = A.copy()
    negative.indices[-1] = -1
    decreasing = A.copy()
    decreasing.indptr[5] = decreasing.indptr[6] + 1
    for bad, error in [(unsorted, errors.UnsortedIndicesError), (negative, errors.InvalidIndexError),
                       (decreasing, errors.IndptrError)]:
        keep = bad.copy()
        assert plan.run((bad, x)) is plan_mod.MISS
        with pytest.raises(error):
            entry_spmv(bad, x)
        for a, b in [(bad.data, keep.data), (bad.indices, keep.indices), (bad.indptr, keep.indptr)]:
            np.testing.assert_array_equal(a, b)
    ss.set_validation(False)
    try:  # not checked: the unsorted rows still sum right
        np.testing.assert_allclose(plan.run((unsorted, x)), unsorted @ x, rtol=1e-12)
    finally:
        ss.set_validation(True)


def test_a_library_without_the_entry_of_its_arguments(rng, monkeypatch):
    """Another parameter list than the one the library was generated with: no entry, and the
    binder takes the sparse argument by its slot's Python step (check, struct) and calls the
    program's own function."""
    A, x = _random(rng, 20, 20, 0.3), rng.standard_normal(20)
    plan = _plan(entry_spmv, A, x)
    monkeypatch.setattr(entry, '_key', lambda layout: 'f' * 16)
    assert entry.find(plan.csdfg) is None
    for cache in ('_ss_plans', '_ss_by_type', '_ss_warm', '_ss_plan_built'):  # plans are built again
        monkeypatch.setitem(entry_spmv.__dict__, cache, {})
    again = _plan(entry_spmv, A, x)
    assert again is not plan and again.entry is None
    assert again.steps == {'A': 'python', 'x': 'numpy'}
    np.testing.assert_allclose(again.run((A, x)), A @ x, rtol=1e-12)
    bad = A.copy()
    bad.indices[0] = 20
    assert again.run((bad, x)) is plan_mod.MISS


def test_torch_arguments_through_the_entry(rng):
    torch = pytest.importorskip('torch')
    A, x = _random(rng, 30, 25, 0.2), rng.standard_normal(25)
    At = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.copy()), torch.from_numpy(A.indices.copy()),
                                 torch.from_numpy(A.data.copy()), size=A.shape)
    xt = torch.from_numpy(x.copy())
    plan = _plan(entry_spmv, At, xt)
    assert plan.entry is not None and plan.steps == {'A': 'sparse', 'x': 'torch'}
    got = entry_spmv(At, xt)
    assert isinstance(got, torch.Tensor)
    np.testing.assert_allclose(got.numpy(), A @ x, rtol=1e-12)


def test_concurrent_warm_calls(rng):
    mats = [(_random(rng, 40 + 7 * i, 30 + i, 0.2), rng.standard_normal(30 + i)) for i in range(8)]
    _plan(entry_spmv, *mats[0])
    failures = []

    def worker(i):
        A, x = mats[i]
        want = A @ x
        for _ in range(300):
            got = entry_spmv(A, x)
            if not np.allclose(got, want, rtol=1e-12, atol=1e-12):
                failures.append(i)
                return

    threads = [threading.Thread(target=worker, args=(i, )) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
