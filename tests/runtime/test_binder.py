"""The compiled binder of warm calls (runtime/_binder.c): its integer expressions, its reading
of NumPy arrays, threads, and garbage where arrays belong."""
import threading

import dace
import numpy as np
import pytest
import scipy.sparse as sp
import sympy

import sdfgsparse as ss
from sdfgsparse import errors
from sdfgsparse._symbolic import integer_code, integer_function
from sdfgsparse.runtime import _binder
from sdfgsparse.runtime import plan as plan_mod

M, N = (dace.symbol(s) for s in 'MN')


@dace.program
def binder_spmv(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


@dace.program
def binder_axpy(A: ss.CSR[dace.float64, M, N], x: dace.float64[N], y: dace.float64[M], alpha: dace.float64):
    return alpha * (A @ x) + y


def test_expressions_agree_with_integer_function():
    """The binder's reverse Polish code computes what :func:`integer_function` computes:
    sums, products, a rational coefficient, powers, floor / ceiling divisions and Mod with
    negative operands, Min and Max; past 64 bits or by zero it answers None (a MISS)."""
    a, b, c = sympy.symbols('a b c', integer=True)
    exprs = [a + 1, a * b - 3, a * b / 2 + c, a**3 - b, sympy.Min(a, b) + sympy.Max(b, c),
             sympy.Mod(a, b), sympy.Function('int_floor')(a, b),
             sympy.Function('int_ceil')(a, b), (a + b) * (c - 1) / 3, sympy.ceiling(a / b), sympy.floor((a + c) / b)]
    names = {'a': 0, 'b': 1, 'c': 2}
    rng = np.random.default_rng(0)
    for e in exprs:
        code = integer_code(e, names.get)
        assert code is not None, e
        fn = integer_function(e)
        if isinstance(e, (sympy.ceiling, sympy.floor)):  # (DaCe's slice lengths: ceiling(N/2))
            rnd = sympy.ceiling if isinstance(e, sympy.ceiling) else sympy.floor
            assert fn({'a': 7, 'b': 2, 'c': 0}) == int(rnd(sympy.Rational(7, 2)))
            assert fn({'a': -7, 'b': 2, 'c': 0}) == int(rnd(sympy.Rational(-7, 2)))
        for _ in range(50):
            vals = [int(v) for v in rng.integers(-40, 40, 3)]
            if vals[1] == 0:
                vals[1] = 7
            want = fn(dict(zip('abc', vals)))  # (Python's floor semantics: the binder's too)
            assert _binder.evaluate(code, vals) == want, (e, vals)
    assert _binder.evaluate(integer_code(a * b, names.get), [2**62, 4, 0]) is None  # overflow: MISS
    assert _binder.evaluate(integer_code(sympy.Mod(a, b), names.get), [5, 0, 0]) is None
    assert integer_code(a + sympy.Symbol('unknown'), names.get) is None  # (evaluated in Python instead)
    assert integer_code(sympy.sqrt(a), names.get) is None


def test_the_binder_reads_arrays_as_numpy_does():
    assert plan_mod.ENABLED
    for a in (np.arange(7.0)[2:], np.ones((3, 4), order='F'), np.ones((2, 3, 4), np.int32)[:, ::2],
              np.empty((0, 5)), np.zeros(3, dtype='>f8')):
        data, nd, shape, c_order, descr = _binder.probe(a)
        assert (data, nd, shape, c_order) == (a.__array_interface__['data'][0], a.ndim, a.shape,
                                              a.flags.c_contiguous) and descr is a.dtype


def _random(rng, m, n, density=0.2):
    return sp.random_array((m, n), density=density, format='csr', rng=rng)


def test_threads_call_one_binder(rng):
    """Eight threads, each its own matrix and vector, calling one program's binder: every
    result is its own (the binder keeps nothing of a call and runs the program without the
    GIL)."""
    A, x = _random(rng, 50, 40), rng.standard_normal(40)
    binder_spmv(A, x)
    binder_spmv(A, x)
    cases = [(_random(rng, 30 + 7 * k, 40), rng.standard_normal(40)) for k in range(8)]
    wrong = []

    def work(k):
        B, v = cases[k]
        want = B @ v
        for _ in range(300):
            if not np.allclose(binder_spmv(B, v), want, rtol=1e-12, atol=1e-12):
                wrong.append(k)
                return

    threads = [threading.Thread(target=work, args=(k, )) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong
    plans = [p for ps in binder_spmv._ss_plans.values() for p in ps]
    assert sum(p.run.done for p in plans) >= 8 * 300


def test_garbage_where_arrays_belong(rng):
    """None, strings, lists, other dtypes, Fortran order, strided views, byte-swapped and
    0-d arrays, bools and huge integers where scalars belong: the binder hands each call to
    the full path (MISS), which converts it or raises the typed error; nothing crashes,
    nothing the caller passed changes."""
    A, x, y = _random(rng, 20, 10), rng.standard_normal(10), rng.standard_normal(20)
    for _ in range(2):
        binder_axpy(A, x, y, 1.5)
    plan = next(p for ps in binder_axpy._ss_plans.values() for p in ps)
    assert plan.steps == {'A': 'sparse', 'x': 'numpy', 'y': 'numpy', 'alpha': 'scalar'}
    want = 1.5 * (A @ x) + y
    bad = [(None, x, y, 1.5), ('A', x, y, 1.5), (A, None, y, 1.5), (A, 'x', y, 1.5), (A, list(x), y, 1.5),
           (A, x.astype(np.float32), y, 1.5), (A, np.repeat(x, 2)[::2], y, 1.5), (A, x.astype('>f8'), y, 1.5),
           (A, x, y, True), (A, x, y, 2**70), (A, x, y, 'a'), (A, x, y, None), (A, x[:5], y, 1.5),
           (A, x.reshape(1, -1), y, 1.5), (A, np.float64(1.0), y, 1.5), (A.tocoo(), x, y, 1.5)]
    for args in bad:
        keep = [a.copy() if hasattr(a, 'copy') else a for a in args]
        assert plan.run(args) is plan_mod.MISS, args
        try:
            got = binder_axpy(*args)
        except errors.SparseError:
            pass
        except (TypeError, ValueError):  # (DaCe's own words for a value it cannot take)
            pass
        else:  # converted: the result of the converted values
            alpha = float(args[3])
            np.testing.assert_allclose(got, alpha * (args[0] @ np.asarray(args[1], np.float64).ravel()) + args[2],
                                       rtol=1e-6)
        for a, k in zip(args, keep):
            if isinstance(a, np.ndarray):
                np.testing.assert_array_equal(a, k)
    assert plan.run((A, x, y)) is plan_mod.MISS  # too few arguments
    with pytest.raises(TypeError):
        plan.run((A, x, y, 1.5), None, None)
    np.testing.assert_allclose(plan.run((A, x, y, 1.5)), want, rtol=1e-12)


def test_a_fortran_ordered_matrix_argument_and_a_column_view(rng):
    """Dense arguments that are not C-ordered take the full path (a copy), results equal."""
    A = _random(rng, 12, 9)
    X = np.asfortranarray(rng.standard_normal((9, 4)))
    for _ in range(2):
        binder_spmv(A, X[:, 0].copy())
    np.testing.assert_allclose(binder_spmv(A, X[:, 1]), A @ X[:, 1], rtol=1e-12)


def test_row_length_sum_counts_the_products_of_an_spgemm(rng):
    """``row_length_sum(pos, idx)`` (SpGEMM's capacity, runtime/capacity.py) is NumPy's
    ``np.diff(pos)[idx].sum()`` for every pair of int32 / int64 arrays, and None (NumPy's
    path then reports) for an index outside [0, rows), arrays it does not read, or garbage."""
    A = sp.random_array((300, 200), density=0.05, format='csr', rng=rng)
    B = sp.random_array((200, 150), density=0.05, format='csr', rng=rng)
    want = int(np.diff(B.indptr)[A.indices].sum())
    for pt in (np.int32, np.int64):
        for it in (np.int32, np.int64):
            assert _binder.row_length_sum(B.indptr.astype(pt), A.indices.astype(it)) == want
    pos = B.indptr.astype(np.int32)
    assert _binder.row_length_sum(pos, np.array([199], np.int32)) == int(pos[200] - pos[199])
    assert _binder.row_length_sum(pos, np.zeros(0, np.int64)) == 0
    assert _binder.row_length_sum(np.zeros(1, np.int32), np.zeros(0, np.int32)) == 0
    for bad in (np.array([200], np.int32), np.array([-1], np.int64), np.array([2**40], np.int64)):
        assert _binder.row_length_sum(pos, bad) is None  # out of range: never read
    assert _binder.row_length_sum(np.zeros(0, np.int32), np.array([0], np.int32)) is None  # no rows
    for garbage in (pos.astype(np.float64), pos.astype(np.int16), pos[::2], 'abc', b'abcd', None, 3, [0, 1]):
        assert _binder.row_length_sum(garbage, A.indices) is None
        assert _binder.row_length_sum(pos, garbage) is None


def test_spgemm_with_a_column_index_out_of_range_raises(rng):
    """An index past B's rows reaches the capacity step before the storage checks: the
    typed error, not a read outside pos, and the arguments untouched."""
    N = dace.symbol('N')

    @dace.program
    def binder_spgemm(A: ss.CSR[dace.float64, N, N]):
        return A @ A

    A = sp.random_array((40, 40), density=0.2, format='csr', rng=rng)
    A.sort_indices()
    got = binder_spgemm(A)
    assert abs(got - A @ A).max() < 1e-12
    for bad in (40, -1, 2**31 - 1):
        B = A.copy()
        B.indices[3] = bad
        before = B.indices.copy()
        with pytest.raises(errors.InvalidIndexError):
            binder_spgemm(B)
        np.testing.assert_array_equal(B.indices, before)


def _level_verdict(pos, crd, extent, ordered, unique):
    """NumPy's verdict on one compressed level (the checks level_ok replaces)."""
    from sdfgsparse.formats.levels import Compressed
    arrays = {'crd1': crd} if pos is None else {'pos1': pos, 'crd1': crd}
    k = 0 if pos is None else 1
    if pos is None:
        arrays = {'crd0': crd}
    try:
        Compressed(ordered=ordered, unique=unique).validate(k, arrays, 0 if pos is None else pos.size - 1, extent,
                                                            'A', {f'n{k}': crd.size})
    except errors.SparseError:
        return False
    return True


@pytest.mark.parametrize('pt,ct', [(np.int32, np.int32), (np.int32, np.int64), (np.int64, np.int32),
                                   (np.int64, np.int64)])
def test_level_ok_agrees_with_numpys_checks(pt, ct, rng):
    """``_binder.level_ok`` (the C pass that lets validate_storage skip a level's NumPy checks)
    gives NumPy's verdict on valid levels and on each kind of damage, with and without a
    position array, ordered or not."""
    seen = {True: 0, False: 0}
    for trial in range(300):
        rows, extent = int(rng.integers(0, 6)), int(rng.integers(1, 8))
        A = sp.random_array((max(rows, 1), extent), density=0.5, format='csr', rng=rng)
        pos, crd = A.indptr.astype(pt), A.indices.astype(ct)
        damage = trial % 6
        if damage == 1 and crd.size:
            crd[rng.integers(crd.size)] = rng.choice([-1, extent, extent + 5])
        elif damage == 2 and crd.size > 1:
            crd = crd[::-1].copy()
        elif damage == 3 and pos.size > 2:
            pos[1], pos[2] = pos[2], pos[1]
        elif damage == 4:
            pos = pos.copy()
            pos[-1] += 1
        elif damage == 5 and crd.size > 1:
            crd[1] = crd[0]
        for ordered, unique in ((True, True), (True, False), (False, False)):
            for p in (pos, None):
                want = _level_verdict(p, crd, extent, ordered, unique)
                assert _binder.level_ok(p, crd, extent, ordered, unique) is want, (trial, p, crd, ordered, unique)
                seen[want] += 1
    assert seen[True] > 100 and seen[False] > 100
    # not an index buffer: None (the NumPy checks then run)
    assert _binder.level_ok(None, np.zeros(3), 4, True, True) is None
    assert _binder.level_ok(np.zeros(2, dtype=np.int64), np.zeros(3, dtype=np.int64)[::2], 4, True, True) is None
    assert _binder.level_ok('abc', np.zeros(3, dtype=np.int64), 4, True, True) is None
