"""``out=`` (runtime/outputs.py): results written into the caller's arrays, NumPy's way."""
import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse import errors

M, N = dace.symbol('M'), dace.symbol('N')


@dace.program
def out_spmv(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


@dace.program
def out_three(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x, A.T @ np.ones(M), 2 * A


@dace.program
def out_dense(X: dace.float64[M, N], v: dace.float64[N]):
    return X @ v


@dace.program
def out_named(A: ss.CSR[dace.float64, M, N], x: dace.float64[N], out: dace.float64[M]):
    out[:] = A @ x


@dace.program
def out_none(A: ss.CSR[dace.float64, M, N], x: dace.float64[N], y: dace.float64[M]):
    y[:] = A @ x


A = sp.random(30, 20, density=0.3, format='csr', random_state=0)
S = sp.random(20, 20, density=0.3, format='csr', random_state=1)


@pytest.mark.parametrize('call', ['program', 'compiled'])
def test_out_is_written_and_returned_on_every_call(call, rng):
    prog = out_spmv if call == 'program' else ss.compile(out_spmv)
    y = np.full(30, np.nan)
    for _ in range(3):  # the first call (DaCe's build, then a copy), then the direct ones
        x = rng.standard_normal(20)
        assert prog(A, x, out=y) is y
        np.testing.assert_allclose(y, A @ x, rtol=1e-12)
    fresh = prog(A, x)  # without out: a new array, out untouched
    assert fresh is not y and not np.shares_memory(fresh, y)
    before = y.copy()
    prog(A, 2 * x)
    np.testing.assert_array_equal(y, before)


@pytest.mark.parametrize('call', ['program', 'compiled'])
def test_calls_that_always_pass_out_take_the_warm_plan(call, rng, monkeypatch):
    """A loop that always passes out= reaches the warm plan from its second call: no
    argument marshalling, and out written in place (no copy)."""
    from sdfgsparse.runtime import call as call_module
    from sdfgsparse.runtime import outputs
    fresh = dace.program(out_spmv.f)  # (no plans from other tests)
    prog = fresh if call == 'program' else ss.compile(fresh)
    y = np.empty(30)
    prog(A, rng.standard_normal(20), out=y)
    prog(A, rng.standard_normal(20), out=y)  # (a compiled program's second call builds its plan)
    marshalled, copied = [], []
    orig = call_module.marshal_arguments
    monkeypatch.setattr(call_module, 'marshal_arguments', lambda *a: marshalled.append(1) or orig(*a))
    monkeypatch.setattr(outputs.np, 'copyto', lambda *a, **k: copied.append(1))
    for _ in range(3):
        x = rng.standard_normal(20)
        assert prog(A, x, out=y) is y
        np.testing.assert_allclose(y, A @ x, rtol=1e-12)
    assert marshalled == [] and copied == []
    assert prog(A, x, out=(y, )) == (y, )  # a 1-tuple gives a 1-tuple, as NumPy's ufuncs do


def test_out_tuple_with_none_and_a_torch_tensor(rng):
    torch = pytest.importorskip('torch')
    a, b = np.empty(30), torch.empty(20, dtype=torch.float64)
    x = rng.standard_normal(20)
    for _ in range(2):
        r = out_three(A, x, out=(a, b, None))
        assert r[0] is a and r[1] is b and sp.issparse(r[2])
        np.testing.assert_allclose(a, A @ x, rtol=1e-12)
        np.testing.assert_allclose(b.numpy(), A.T @ np.ones(30), rtol=1e-12)
        np.testing.assert_allclose(r[2].toarray(), 2 * A.toarray())


def test_out_overlapping_an_argument_gives_the_result_without_out(rng):
    """``y = S @ y`` through out=: the program reads x while it writes; out is filled by a
    copy after the run (NumPy's ufuncs do the same)."""
    for _ in range(3):
        x = rng.standard_normal(20)
        want = S @ x
        assert out_spmv(S, x, out=x) is x
        np.testing.assert_allclose(x, want, rtol=1e-12)


def test_out_that_is_a_sparse_arguments_own_values():
    """``out`` = the values array of the sparse argument (scipy's ``data``, a CPU torch
    tensor's ``values()``): row 1 reads entries 0 and 1 after row 0's result would have
    been written over entry 0. Filled by a copy; a warm torch call wrote over it (error 1.0)."""
    torch = pytest.importorskip('torch')
    indptr, indices, data = np.array([0, 0, 2, 3, 4, 5, 6]), np.arange(6), np.arange(1.0, 7.0)
    want = sp.csr_matrix((data, indices, indptr), shape=(6, 6)) @ np.ones(6)
    for _ in range(3):
        T = torch.sparse_csr_tensor(torch.from_numpy(indptr), torch.from_numpy(indices), torch.from_numpy(data.copy()),
                                    size=(6, 6))
        out = T.values().numpy()
        out_spmv(T, torch.ones(6, dtype=torch.float64), out=out)
        np.testing.assert_array_equal(out, want)
        S6 = sp.csr_matrix((data.copy(), indices, indptr), shape=(6, 6))
        out_spmv(S6, np.ones(6), out=S6.data)
        np.testing.assert_array_equal(S6.data, want)


def test_out_and_an_argument_viewing_one_buffer(rng):
    """Views of one buffer: apart, out is written directly; overlapping, by a copy; both
    give the result without out."""
    for _ in range(3):
        buf = rng.standard_normal(80)
        x, apart, over = buf[:20], buf[40:60], buf[10:30]
        want = S @ x
        assert out_spmv(S, x, out=apart) is apart
        np.testing.assert_allclose(apart, want, rtol=1e-12)
        assert out_spmv(S, x, out=over) is over
        np.testing.assert_allclose(over, want, rtol=1e-12)


def test_out_of_a_program_without_sparse_arguments(rng):
    X, v, y = rng.standard_normal((5, 4)), rng.standard_normal(4), np.empty(5)
    for _ in range(2):
        assert out_dense(X, v, out=y) is y
        np.testing.assert_allclose(y, X @ v, rtol=1e-12)


def test_a_parameter_named_out_is_the_programs_own(rng):
    x, y = rng.standard_normal(20), np.zeros(30)
    assert out_named(A, x, out=y) is None
    np.testing.assert_allclose(y, A @ x, rtol=1e-12)


@pytest.mark.parametrize('bad,error,match', [
    (np.zeros(29), errors.ShapeError, r'out: has shape \(29,\), the result has shape \(30,\)'),
    (np.zeros(30, np.float32), errors.DTypeError, 'out: dtype is float32, the result is float64'),
    (np.zeros((30, 2))[:, 0], errors.ArgumentError, 'out: not C-ordered'),
    (np.zeros(30).astype('>f8'), errors.DTypeError, 'out: dtype is >f8'),
    ('y', errors.ArgumentError, 'out: expected a NumPy array or a CPU torch tensor, got str'),
    ([0.0] * 30, errors.ArgumentError, 'got list'),
])
def test_bad_out_is_named_before_anything_is_written(bad, error, match, rng):
    x = rng.standard_normal(20)
    out_spmv(A, x)  # (built: the checks below run on the warm path too)
    snapshot = bad.copy() if isinstance(bad, np.ndarray) else bad
    with pytest.raises(error, match=match):
        out_spmv(A, x, out=bad)
    if isinstance(bad, np.ndarray):
        np.testing.assert_array_equal(bad, snapshot)


def test_read_only_out_and_results_that_take_none():
    y = np.zeros(30)
    y.flags.writeable = False
    with pytest.raises(errors.ArgumentError, match='out: the array is read-only'):
        out_spmv(A, np.ones(20), out=y)
    with pytest.raises(errors.UnsupportedOperationError, match=r'out\[2\]: the result is sparse'):
        out_three(A, np.ones(20), out=(None, None, np.zeros(3)))
    with pytest.raises(errors.ArgumentError, match='out= holds 2 arrays, the program returns 3 values'):
        out_three(A, np.ones(20), out=(None, None))
    for _ in range(2):
        with pytest.raises(errors.ArgumentError, match=r'out_none\(\): out= was given, but the program returns nothing'):
            out_none(A, np.ones(20), np.zeros(30), out=np.zeros(30))


def test_out_from_threads(rng):
    import threading
    prog = ss.compile(out_spmv)
    xs = [rng.standard_normal(20) for _ in range(8)]
    ys = [np.empty(30) for _ in range(8)]
    prog(A, xs[0], out=ys[0])
    threads = [threading.Thread(target=lambda k=k: [prog(A, xs[k], out=ys[k]) for _ in range(20)]) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for x, y in zip(xs, ys):
        np.testing.assert_allclose(y, A @ x, rtol=1e-12)


@dace.program
def out_two(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x, 2.0 * (A @ x)


def test_results_sharing_memory_are_refused():
    """out=(z, z) (or overlapping views of one array) would leave the first result
    overwritten by the second without a word: refused before the call, nothing written."""
    z = np.full(30, 7.0)
    for prog in (out_two, ss.compile(out_two)):
        with pytest.raises(errors.ArgumentError, match=r'out\[1\] shares memory with out\[0\]; each result needs'):
            prog(A, np.ones(20), out=(z, z))
        big = np.full(45, 7.0)
        with pytest.raises(errors.ArgumentError, match=r'out\[1\] shares memory with out\[0\]'):
            prog(A, np.ones(20), out=(big[:30], big[15:]))
        np.testing.assert_array_equal(z, 7.0)
        np.testing.assert_array_equal(big, 7.0)
        y1, y2 = np.empty(30), np.empty(30)
        r = prog(A, np.ones(20), out=(y1, y2))
        assert r[0] is y1 and r[1] is y2
        np.testing.assert_allclose(y2, 2 * (A @ np.ones(20)))
        np.testing.assert_allclose(y1, A @ np.ones(20))
        with pytest.raises(errors.ArgumentError, match=r'out\[1\] shares memory'):  # warm calls too
            prog(A, np.ones(20), out=(y1, y1))
