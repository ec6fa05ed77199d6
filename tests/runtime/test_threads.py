"""Every call path from 8 Python threads at once: the warm plans, the full path (index
arrays of the other width, dense arguments in another layout, torch's int64 CSR), sparse
results, the kernels' own index checks, ``ss.compile`` programs, errors interleaved with
good calls, and the first call of a program made by all threads together.

Before the fix, calls that took the full path shared DaCe's compiled-program object (its
last arguments and return arrays) without a lock: 402 of 800 results wrong on 8 threads,
another thread's shape, once a 2-tuple; and 8 threads making the same first call each
parsed the program.
"""
import threading
import warnings

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse import errors
from sdfgsparse.targets.cpu import kernel_checks

M, N, K = dace.symbol('M'), dace.symbol('N'), dace.symbol('K')
THREADS = 8


@dace.program
def thr_spmv(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


@dace.program
def thr_spmm(A: ss.CSR[dace.float64, M, N], B: dace.float64[N, K]):
    return A @ B


@dace.program
def thr_add(A: ss.CSR[dace.float64, M, N], B: ss.CSR[dace.float64, M, N]):
    return A + B


@dace.program
def thr_any(A, x):
    return A @ x


def _matrix(seed, m=None, n=30, density=0.2, index=np.int32):
    rng = np.random.default_rng(seed)
    A = sp.random_array((m or 20 + seed % 7, n), density=density, format='csr', rng=rng)
    A.indices, A.indptr = A.indices.astype(index), A.indptr.astype(index)
    return A


def _run_threads(work, threads=THREADS):
    """Run ``work(t)`` on ``threads`` threads started together; the list of what each
    returned (a problem description or None), exceptions included."""
    start = threading.Barrier(threads)
    found = [None] * threads

    def run(t):
        start.wait()
        try:
            found[t] = work(t)
        except Exception as ex:  # reported, not lost in the thread
            found[t] = f'thread {t}: {type(ex).__name__}: {ex}'

    pool = [threading.Thread(target=run, args=(t, )) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    return [f for f in found if f]


def _check(got, want, what):
    if not isinstance(got, np.ndarray) or got.shape != want.shape:
        return f'{what}: got {type(got).__name__} {getattr(got, "shape", None)}, expected {want.shape}'
    if not np.allclose(got, want, rtol=1e-12, atol=1e-12):
        return f'{what}: wrong values'
    return None


@pytest.fixture(autouse=True)
def _quiet_copies():
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', errors.CopyWarning)
        yield


def test_warm_and_copy_paths_interleaved():
    """Threads alternate between the warm plan (int32 indices), the full path with
    index copies (int64 indices into the int32 program) and dense operands in Fortran
    order or strided views (copied); each thread has its own shapes."""
    thr_spmv(_matrix(0), np.ones(30))
    thr_spmm(_matrix(0), np.ones((30, 3)))

    def work(t):
        rng = np.random.default_rng(t)
        for i in range(25):
            A = _matrix(t, index=np.int64 if i % 2 else np.int32)
            x = rng.standard_normal(60)[::2] if i % 3 == 0 else rng.standard_normal(30)
            bad = _check(thr_spmv(A, x), A @ x, f'spmv t{t} i{i}')
            if bad:
                return bad
            B = np.asfortranarray(rng.standard_normal((30, 3))) if i % 2 == 0 else rng.standard_normal((30, 3))
            bad = _check(thr_spmm(A, B), A @ B, f'spmm t{t} i{i}')
            if bad:
                return bad
        return None

    assert _run_threads(work) == []


def test_sparse_results_and_errors_interleaved():
    """Sparse results (A + B) and calls that raise, between good calls on other threads:
    each good call gets its own correct result, each bad one its typed error."""
    A0 = _matrix(0)
    thr_add(A0, A0)

    def work(t):
        for i in range(20):
            A, B = _matrix(t, m=20 + t, index=np.int64 if i % 4 == 1 else np.int32), _matrix(t + 50, m=20 + t)
            if (t + i) % 3 == 0:
                bad = A.copy()
                bad.indices = bad.indices.copy()
                bad.indices[0] = 10**6
                try:
                    thr_add(bad, B)
                except errors.InvalidIndexError as ex:
                    if 'A: crd1[0] = 1000000' not in str(ex):
                        return f'wrong error: {ex}'
                else:
                    return 'an out-of-range index was accepted'
                continue
            C = thr_add(A, B)
            want = (A + B).toarray()
            if not sp.issparse(C) or C.shape != want.shape or not np.allclose(C.toarray(), want):
                return f'add t{t} i{i}: wrong result {type(C).__name__} {getattr(C, "shape", None)}'
        return None

    assert _run_threads(work) == []


def test_torch_default_csr_from_threads():
    """torch's CSR has int64 indices: an unannotated program takes them as they are (a
    warm plan), the int32 program copies them (full path)."""
    torch = pytest.importorskip('torch')

    def tensor(A):
        A = A.astype(np.float64)
        return torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)),
                                       torch.from_numpy(A.indices.astype(np.int64)), torch.from_numpy(A.data),
                                       size=A.shape)

    thr_spmv(tensor(_matrix(0)), torch.ones(30, dtype=torch.float64))
    thr_any(tensor(_matrix(0)), torch.ones(30, dtype=torch.float64))

    def work(t):
        for i in range(20):
            A = _matrix(t)
            x = np.random.default_rng(t * 100 + i).standard_normal(30)
            for prog in (thr_spmv, thr_any):
                y = prog(tensor(A), torch.from_numpy(x))
                bad = _check(y.numpy() if isinstance(y, torch.Tensor) else y, A @ x, f'{prog.name} t{t} i{i}')
                if bad:
                    return bad
        return None

    assert _run_threads(work) == []


def test_kernel_checks_from_threads(monkeypatch):
    """A program whose kernels check their own indices (here from any size on): a bad
    call's failure counter moves while good calls run; the good calls still return their
    own results, the bad ones the typed error."""
    monkeypatch.setattr(kernel_checks, 'IN_KERNEL_FROM', 0)

    def thr_checked(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
        return A @ x

    prog = dace.program(thr_checked)
    A0 = _matrix(0)
    prog(A0, np.ones(30))
    monkeypatch.setattr(kernel_checks, 'IN_KERNEL_FROM', 64 << 20)

    def work(t):
        for i in range(30):
            A = _matrix(t)
            x = np.random.default_rng(i).standard_normal(30)
            if (t + i) % 4 == 0:
                A.indices = A.indices.copy()
                A.indices[-1] = 31
                try:
                    prog(A, x)
                except errors.InvalidIndexError:
                    continue
                return 'an out-of-range index was accepted'
            bad = _check(prog(A, x), A @ x, f't{t} i{i}')
            if bad:
                return bad
        return None

    assert _run_threads(work) == []


def test_first_call_from_threads_parses_once():
    """Eight threads making the same first call: one parse and build, the others wait
    and take its plan."""

    def thr_first(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
        return A @ x

    prog = dace.program(thr_first)
    parses = []
    parse = prog._parse

    def counting(*args, **kwargs):
        parses.append(threading.get_ident())
        return parse(*args, **kwargs)

    prog._parse = counting

    def work(t):
        A = _matrix(t)
        x = np.ones(30)
        return _check(prog(A, x), A @ x, f't{t}')

    assert _run_threads(work) == []
    assert len(parses) == 1


def test_compiled_sdfg_from_threads():
    """``ss.compile(sdfg)``: compiled once whichever thread calls first; calls by name
    from every thread, warm and with copies."""
    f = ss.compile(thr_spmv.to_sdfg())

    def work(t):
        for i in range(15):
            A = _matrix(t, index=np.int64 if i % 3 == 0 else np.int32)
            x = np.random.default_rng(i).standard_normal(30)
            bad = _check(f(A=A, x=x), A @ x, f't{t} i{i}')
            if bad:
                return bad
        return None

    assert _run_threads(work) == []
