"""Arguments that share memory (runtime/aliasing.py): a written argument overlapping another
gives NumPy's result ("the right-hand side is computed, then assigned") on every call path
(first call, warm plan, ``ss.compile``, torch tensors, threads); overlaps no copy makes
exact are an ``ArgumentError`` that leaves the caller's arrays untouched; calls without
overlap stay on the zero-copy plan."""
import threading

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse import errors
from sdfgsparse.runtime.aliasing import access_of, memory_of, overlap

N = dace.symbol('N')


@dace.program
def alias_spmv_out(A: ss.CSR[dace.float64, N, N], x: dace.float64[N], y: dace.float64[N]):
    y[:] = A @ x


@dace.program
def alias_spmv_acc(A: ss.CSR[dace.float64, N, N], x: dace.float64[N], y: dace.float64[N]):
    y[:] += A @ x


@dace.program
def alias_two_statements(A: ss.CSR[dace.float64, N, N], x: dace.float64[N], y: dace.float64[N]):
    y[:] = A @ x
    y[:] += A @ x


@dace.program
def alias_in_a_loop(A: ss.CSR[dace.float64, N, N], x: dace.float64[N], y: dace.float64[N]):
    for _ in range(2):
        y[:] = A @ x


def _matrix(rng, n, density=0.3):
    return sp.random_array((n, n), density=density, format='csr', rng=rng)


def test_output_is_the_input(rng, plan_calls):
    A = _matrix(rng, 40)
    for _ in range(3):  # the first call (DaCe), then warm ones
        y = rng.standard_normal(40)
        want = A @ y
        alias_spmv_out(A, y, y)
        np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)
    assert plan_calls['missed'] >= 1  # the plan saw the overlap and handed the call on
    y, x = np.zeros(40), rng.standard_normal(40)
    done = plan_calls['done']
    alias_spmv_out(A, x, y)  # no overlap: the zero-copy plan
    assert plan_calls['done'] == done + 1
    np.testing.assert_allclose(y, A @ x, rtol=1e-12, atol=1e-12)


def test_read_write_output_is_the_input(rng):
    A = _matrix(rng, 30)
    for _ in range(2):
        y = rng.standard_normal(30)
        want = y + A @ y
        alias_spmv_acc(A, y, y)
        np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('views', ['shifted', 'reversed', 'strided', 'adjacent'])
def test_overlapping_views(rng, views, plan_calls):
    A = _matrix(rng, 40)
    alias_spmv_out(A, np.ones(40), np.zeros(40))  # warm
    for _ in range(2):
        buf = rng.standard_normal(81)
        if views == 'shifted':
            x, y = buf[1:41], buf[:40]
        elif views == 'reversed':
            x, y = buf[:40], buf[39::-1]
        elif views == 'strided':
            x, y = buf[0:80:2], buf[1:41]
        else:  # touching, not overlapping
            x, y = buf[:40], buf[40:80]
        want_x = x.copy()
        rest = buf.copy()
        alias_spmv_out(A, x, y)
        np.testing.assert_allclose(y, A @ want_x, rtol=1e-12, atol=1e-12)
        idx = np.arange(81)
        y_idx = {'shifted': idx[:40], 'reversed': idx[39::-1], 'strided': idx[1:41], 'adjacent': idx[40:80]}[views]
        others = np.setdiff1d(idx, y_idx)
        np.testing.assert_array_equal(buf[others], rest[others])  # nothing else written


def test_output_is_a_member_of_the_sparse_argument(rng):
    """``y`` passed as ``A.data`` (A has exactly N stored entries): NumPy computes A @ x
    with the old values, then assigns them into A.data."""
    n = 25
    A = sp.csr_array((rng.standard_normal(n), rng.permutation(n).astype(np.int32), np.arange(n + 1, dtype=np.int32)),
                    shape=(n, n))
    for _ in range(2):
        x = rng.standard_normal(n)
        want = A.copy() @ x
        alias_spmv_out(A, x, A.data)
        np.testing.assert_allclose(A.data, want, rtol=1e-12, atol=1e-12)


def test_compiled_program_and_torch(rng):
    torch = pytest.importorskip('torch')
    prog = ss.compile(alias_spmv_out.to_sdfg())
    A = _matrix(rng, 30)
    for _ in range(3):
        y = rng.standard_normal(30)
        want = A @ y
        prog(A, y, y)
        np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)
    for _ in range(2):
        t = torch.from_numpy(rng.standard_normal(30))
        want = A @ t.numpy()
        alias_spmv_out(A, t, t)
        np.testing.assert_allclose(t.numpy(), want, rtol=1e-12, atol=1e-12)
        t = torch.from_numpy(rng.standard_normal(31))
        want = A @ t[1:].numpy()
        prog(A=A, x=t[1:], y=t[:30])
        np.testing.assert_allclose(t[:30].numpy(), want, rtol=1e-12, atol=1e-12)


def test_threads(rng):
    A = _matrix(rng, 40)
    alias_spmv_out(A, np.ones(40), np.zeros(40))
    ys = [rng.standard_normal(40) for _ in range(8)]
    wants = [A @ y for y in ys]
    failures = []

    def work(k):
        try:
            for _ in range(50):
                y = ys[k].copy()
                alias_spmv_out(A, y, y)
                np.testing.assert_allclose(y, wants[k], rtol=1e-12, atol=1e-12)
        except Exception as ex:  # reported below
            failures.append(ex)

    threads = [threading.Thread(target=work, args=(k, )) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


def test_read_after_write_is_an_error(rng):
    """``y[:] = A @ x; y[:] += A @ x`` with x is y reads x after writing y: NumPy reads the
    new y, a copy cannot; the caller's array is left as it was."""
    A = _matrix(rng, 20)
    x = rng.standard_normal(20)
    y = np.zeros(20)
    alias_two_statements(A, x, y)
    np.testing.assert_allclose(y, 2 * (A @ x), rtol=1e-12, atol=1e-12)
    for _ in range(2):  # the full path, then the warm one hands it on
        y = rng.standard_normal(20)
        before = y.copy()
        with pytest.raises(errors.ArgumentError, match=r'y and x share memory and the program reads x after writing y'):
            alias_two_statements(A, y, y)
        np.testing.assert_array_equal(y, before)


def test_read_after_write_through_views_is_an_error(rng):
    """Views are passed as copies: the copy must not hide that x and y overlap."""
    A = _matrix(rng, 20)
    for _ in range(2):
        buf = rng.standard_normal(21)
        before = buf.copy()
        with pytest.raises(errors.ArgumentError, match=r'y and x share memory and the program reads x after writing y'):
            alias_two_statements(A, buf[1:], buf[:20])
        np.testing.assert_array_equal(buf, before)
    buf = rng.standard_normal(40)  # views that do not overlap: as before
    alias_two_statements(A, buf[20:], buf[:20])
    np.testing.assert_allclose(buf[:20], 2 * (A @ buf[20:]), rtol=1e-12, atol=1e-12)


def test_read_in_the_next_iteration_is_an_error(rng):
    """In a loop, the second ``y[:] = A @ x`` reads the y the first one wrote (NumPy: A @ (A @ y))."""
    A = _matrix(rng, 20)
    y = rng.standard_normal(20)
    before = y.copy()
    with pytest.raises(errors.ArgumentError, match=r'y and x share memory and the program reads x after writing y'):
        alias_in_a_loop(A, y, y)
    np.testing.assert_array_equal(y, before)
    x = rng.standard_normal(20)
    alias_in_a_loop(A, x, y)  # (no overlap: as before)
    np.testing.assert_allclose(y, A @ x, rtol=1e-12, atol=1e-12)


def test_what_programs_write_and_read_after():
    one = access_of(alias_spmv_acc.to_sdfg())
    assert one.written == {'y'} and one.read_after['y'] == frozenset()
    two = access_of(alias_two_statements.to_sdfg())
    assert two.written == {'y'} and two.read_after['y'] == {'A', 'x'}
    loop = access_of(alias_in_a_loop.to_sdfg())
    assert loop.written == {'y'} and loop.read_after['y'] == {'A', 'x'}


def test_memory_ranges():
    buf = np.arange(10.0)
    assert overlap(memory_of(buf[:5]), memory_of(buf[4:]))
    assert not overlap(memory_of(buf[:5]), memory_of(buf[5:]))
    assert overlap(memory_of(buf[::-1][:3]), memory_of(buf[9:]))
    assert not overlap(memory_of(buf[0::2]), memory_of(buf[:0]))  # empty
    assert memory_of(3.0) == [] and memory_of(None) == []
