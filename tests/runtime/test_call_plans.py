"""Warm calls through per-signature plans: same results as the full path, a new plan for
a new signature, the typed errors on bad input, the caller's data untouched."""
import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse import errors
from sdfgsparse.formats import COO, CSC, CSR
from sdfgsparse.runtime import plan as plan_mod
from sdfgsparse.runtime.fastcheck import SMALL, StorageCheck
from sdfgsparse.runtime.marshal import validate_storage

M, N, K = (dace.symbol(s) for s in 'MNK')


@dace.program
def plan_spmv(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


@dace.program
def plan_spmm(A: ss.CSR[dace.float64, M, N], X: dace.float64[N, K]):
    return A @ X


@dace.program
def plan_scale(A: ss.CSR[dace.float64, M, N]):
    return 2 * A


@dace.program
def plan_add(A: ss.CSR[dace.float64, M, N], B: ss.CSR[dace.float64, M, N]):
    return A + B


@dace.program
def plan_any(A, x):
    return A @ x


@dace.program
def plan_spmv64(A: ss.CSR[dace.float64, M, N, dace.int64], x: dace.float64[N]):
    return A @ x


@dace.program
def plan_axpy(A: ss.CSR[dace.float64, M, N], x: dace.float64[N], y: dace.float64[M], alpha: dace.float64):
    return alpha * (A @ x) + y


def _random(rng, m, n, density, dtype=np.float64):
    return sp.random_array((m, n), density=density, format='csr', rng=rng, dtype=dtype)


def _shapes():  # tiny (Python checks) and larger (vectorised checks), empty rows, nnz = 0
    return [(1, 1, 1.0), (7, 5, 0.4), (40, 30, 0.3), (200, 150, 0.05), (9, 6, 0.0), (1, 300, 0.5)]


def test_warm_spmv_new_sizes_each_call(rng, plan_calls):
    for m, n, d in _shapes() * 2:
        A = _random(rng, m, n, d)
        x = rng.standard_normal(n)
        np.testing.assert_allclose(plan_spmv(A, x), A @ x, rtol=1e-12, atol=1e-12)
    assert plan_calls['done'] >= len(_shapes()) * 2 - 1
    plans = {p for ps in plan_spmv._ss_plans.values() for p in ps}
    assert len(plans) == 1


def test_warm_spmm_and_keyword_call(rng, plan_calls):
    for m, n, d in _shapes():
        A = _random(rng, m, n, d)
        X = rng.standard_normal((n, 8))
        np.testing.assert_allclose(plan_spmm(A, X), A @ X, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(plan_spmm(X=X, A=A), A @ X, rtol=1e-12, atol=1e-12)
    assert plan_calls['missed'] == 0 and plan_calls['done'] >= 2 * len(_shapes()) - 1


def test_warm_sparse_results(rng, plan_calls):
    for m, n, d in _shapes():
        A, B = _random(rng, m, n, d), _random(rng, m, n, d)
        S = plan_scale(A)
        assert S.format == 'csr' and S.shape == (m, n)
        np.testing.assert_allclose(S.toarray(), 2 * A.toarray())
        T = plan_add(A, B)
        np.testing.assert_allclose(T.toarray(), A.toarray() + B.toarray())
    assert plan_calls['missed'] == 0 and plan_calls['done'] >= 2 * (len(_shapes()) - 1)


def test_results_are_fresh_arrays(rng):
    A = _random(rng, 6, 4, 0.5)
    x = rng.standard_normal(4)
    y1, y2 = plan_spmv(A, x), plan_spmv(A, x)
    assert y1 is not y2 and not np.shares_memory(y1, y2)
    S1, S2 = plan_scale(A), plan_scale(A)
    assert not np.shares_memory(S1.data, S2.data) and not np.shares_memory(S1.data, A.data)


def test_warm_calls_with_a_scalar_argument(rng, plan_calls):
    """Scalars pass by value. An int or NumPy float is another signature: its first call
    takes the full path (which converts it), later ones its own plan."""
    for m, n, d in _shapes():
        A = _random(rng, m, n, d)
        x, y = rng.standard_normal(n), rng.standard_normal(m)
        for alpha in (2.5, -0.75, 0.0):
            np.testing.assert_allclose(plan_axpy(A, x, y, alpha), alpha * (A @ x) + y, rtol=1e-12, atol=1e-12)
    assert plan_calls['missed'] == 0 and plan_calls['done'] >= 3 * len(_shapes()) - 1
    A = _random(rng, 30, 20, 0.2)
    x, y = rng.standard_normal(20), rng.standard_normal(30)
    done = plan_calls['done']
    for alpha in (3, np.float64(1.5), 4, np.float64(-2.0)):
        np.testing.assert_allclose(plan_axpy(A, x, y, alpha), alpha * (A @ x) + y, rtol=1e-12, atol=1e-12)
    assert plan_calls['missed'] == 0 and plan_calls['done'] == done + 2


def test_changed_signature_takes_a_new_plan(rng, plan_calls):
    A = _random(rng, 12, 9, 0.3)
    x = rng.standard_normal(9)
    for _ in range(2):
        np.testing.assert_allclose(plan_any(A, x), A @ x, rtol=1e-12)
    A32, x32 = A.astype(np.float32), x.astype(np.float32)
    for _ in range(2):  # value dtype
        np.testing.assert_allclose(plan_any(A32, x32), A32 @ x32, rtol=1e-5)
    C = A.tocsc()
    for _ in range(2):  # format
        np.testing.assert_allclose(plan_any(C, x), A @ x, rtol=1e-12)
    Am = sp.csr_matrix(A)
    for _ in range(2):  # another scipy class of the same format shares the compiled program
        np.testing.assert_allclose(plan_any(Am, x), A @ x, rtol=1e-12)
    assert len(plan_any._ss_fast) == 3  # compiled signatures: csr_array and csr_matrix share one
    assert len(plan_any._ss_plans) == 4 and all(len(ps) == 1 for ps in plan_any._ss_plans.values())
    # the first call of the float32 signature tried the one plan of its argument types (the
    # float64 one: runtime/hooks.py); from then on each signature finds its own plan
    assert plan_calls['missed'] <= 1
    missed, done = plan_calls['missed'], plan_calls['done']
    for args, want, tol in [((A, x), A @ x, 1e-12), ((A32, x32), A32 @ x32, 1e-5), ((C, x), A @ x, 1e-12),
                            ((Am, x), A @ x, 1e-12)] * 2:
        np.testing.assert_allclose(plan_any(*args), want, rtol=tol)
    assert plan_calls['missed'] == missed and plan_calls['done'] == done + 8


def test_index_dtype_change_goes_through_the_full_path(rng, plan_calls):
    A = _random(rng, 10, 7, 0.4)
    x = rng.standard_normal(7)
    A64 = sp.csr_array((A.data, A.indices.astype(np.int64), A.indptr.astype(np.int64)), shape=A.shape)
    if A64.indices.dtype != np.int64:
        pytest.skip('scipy narrowed the index arrays')
    for _ in range(2):
        np.testing.assert_allclose(plan_spmv64(A64, x), A @ x, rtol=1e-12)
    done = plan_calls['done']
    for _ in range(2):  # int32 indices into an int64 program: copied with a warning, every call
        with pytest.warns(errors.CopyWarning, match='A: index arrays are int32'):
            np.testing.assert_allclose(plan_spmv64(A, x), A @ x, rtol=1e-12)
    assert plan_calls['done'] == done
    np.testing.assert_allclose(plan_spmv64(A64, 2 * x), A @ (2 * x), rtol=1e-12)
    assert plan_calls['done'] == done + 1


def _raw(data, indices, indptr, shape):
    A = sp.csr_array(shape)
    A.data, A.indices, A.indptr = (np.asarray(data, np.float64), np.asarray(indices, np.int32),
                                   np.asarray(indptr, np.int32))
    return A


@pytest.mark.parametrize('big', [False, True], ids=['small', 'large'])
def test_bad_input_on_a_warm_call(rng, big):
    m, n = (200, 150) if big else (5, 4)
    good = _random(rng, m, n, 0.1 if big else 0.5)
    good.sum_duplicates()
    x = np.ones(n)
    plan_spmv(good, x)
    plan_spmv(good, x)

    def bad(edit):
        A = good.copy()
        edit(A)
        return A

    row = int(np.flatnonzero(np.diff(good.indptr) >= 2)[0])  # a row with two entries
    p = int(good.indptr[row])
    cases = [
        (bad(lambda A: A.indices.__setitem__(0, n)), errors.InvalidIndexError, rf'A: crd1\[0\] = {n} is out of range'),
        (bad(lambda A: A.indices.__setitem__(0, -1)), errors.InvalidIndexError, r'A: crd1\[0\] = -1 is negative'),
        (bad(lambda A: A.indices.__setitem__(p, good.indices[p + 1])), errors.DuplicateIndicesError,
         f'A: crd1 .* twice at positions {p} and {p + 1}'),
        (bad(lambda A: A.indices.__setitem__(slice(p, p + 2), good.indices[p:p + 2][::-1].copy())),
         errors.UnsortedIndicesError, f'A: crd1 .* not sorted within its segment at position {p + 1}'),
        (bad(lambda A: A.indptr.__setitem__(-1, good.nnz + 1)), errors.IndptrError, r'A: pos1\[-1\]'),
        (bad(lambda A: A.indptr.__setitem__(1, good.nnz + 5)), errors.IndptrError, 'A: pos1 .* decreases'),
    ]
    for A, err, msg in cases:
        with pytest.raises(err, match=msg):
            plan_spmv(A, x)
    with pytest.raises(errors.ShapeError, match=rf'x: has shape \({n + 1},\).*N = {n} \(from A\)'):
        plan_spmv(good, np.ones(n + 1))
    with pytest.raises(errors.DTypeError, match='A: values are float32'):
        plan_spmv(good.astype(np.float32), x)
    with pytest.raises(errors.FormatMismatchError, match='A: the program expects CSR but got CSC'):
        plan_spmv(good.tocsc(), x)
    with pytest.raises(errors.ShapeError, match=f'B: symbol M is {m + 1}, but A fixed M = {m}'):
        plan_add(good, _random(rng, m + 1, n, 0.1))
    np.testing.assert_allclose(plan_spmv(good, x), good @ x, rtol=1e-12)  # and still fine afterwards


def test_numpy_views_on_a_warm_call(rng):
    """DaCe refuses NumPy views and reads other layouts as C-ordered; a C-ordered view is
    now passed as it is by the plan, any other layout copied by the full path."""
    A = _random(rng, 6, 4, 0.5)
    plan_spmv(A, np.ones(4))
    plan_spmv(A, np.ones(4))
    base = rng.standard_normal(12)
    kept = base.copy()
    for x in (base[::3], base[2:6], base[::-3], base.reshape(4, 3)[:, 1], np.asfortranarray(base.reshape(4, 3))[:, 0]):
        np.testing.assert_allclose(plan_spmv(A, x), A @ x, rtol=1e-12)
    np.testing.assert_array_equal(base, kept)


def test_validation_switch_still_applies(rng, plan_calls):
    A = _random(rng, 6, 4, 0.5)
    plan_spmv(A, np.ones(4))
    bad = _raw([1.0, 2.0, 3.0], [2, 0, 1], [0, 2, 3, 3, 3, 3], (5, 4))
    ss.set_validation(False)
    try:
        plan_spmv(bad, np.ones(4))  # unsorted but in range: runs unchecked
    finally:
        ss.set_validation(True)
    with pytest.raises(errors.UnsortedIndicesError):
        plan_spmv(bad, np.ones(4))


def test_arguments_are_not_modified(rng):
    for m, n, d in _shapes():
        A, B = _random(rng, m, n, d), _random(rng, m, n, d)
        x = rng.standard_normal(n)
        before = [a.copy() for a in (A.data, A.indices, A.indptr, B.data, B.indices, B.indptr, x)]
        for _ in range(2):
            plan_spmv(A, x)
            plan_scale(A)
            plan_add(A, B)
        for got, want in zip((A.data, A.indices, A.indptr, B.data, B.indices, B.indptr, x), before):
            np.testing.assert_array_equal(got, want)


def test_torch_warm_calls(rng):
    torch = pytest.importorskip('torch')
    for m, n in ((8, 6), (30, 20), (8, 6)):
        D = rng.standard_normal((m, n))
        D[rng.random((m, n)) < 0.6] = 0
        A = torch.from_numpy(D).to_sparse_csr().to(torch.float64)
        A = torch.sparse_csr_tensor(A.crow_indices().to(torch.int32), A.col_indices().to(torch.int32),
                                    A.values(), size=A.shape)
        x = rng.standard_normal(n)
        y = plan_spmv(A, x)
        assert isinstance(y, torch.Tensor)
        np.testing.assert_allclose(y.numpy(), D @ x, rtol=1e-12)


def _storage(A, fmt):
    if fmt is COO:
        return {'crd0': A.row, 'crd1': A.col, 'vals': A.data}, {'n0': A.row.size}
    return {'pos1': A.indptr, 'crd1': A.indices, 'vals': A.data}, {'n1': A.indices.size}


def _spec_ok(fmt, arrays, shape, sizes):
    try:
        validate_storage(fmt, arrays, shape, sizes, 'A')
    except errors.SparseError:
        return False
    return True


@pytest.fixture(scope='module')
def native_checks():
    """The compiled storage checks of a kernel library, per index dtype (from the plans of
    two compiled programs)."""
    A = sp.random_array((4, 3), density=0.5, format='csr', rng=0)
    x = np.ones(3)
    found = {}
    for prog, idt in ((plan_spmv, np.int32), (plan_spmv64, np.int64)):
        B = sp.csr_array((A.data, A.indices.astype(idt), A.indptr.astype(idt)), shape=A.shape)
        prog(B, x)
        prog(B, x)
        plan = next(p for ps in prog._ss_plans.values() for p in ps)
        found[np.dtype(idt)] = plan.sparse_slots[0].check.native
    assert all(f is not None for f in found.values())
    return found


@pytest.mark.parametrize('fmt', [CSR, CSC, COO], ids=lambda f: f.name)
@pytest.mark.parametrize('kind', ['numpy', 'native32', 'native64'])
def test_storage_check_agrees_with_validation(rng, fmt, kind, request):
    """The fast check (NumPy, or the compiled checks of the kernel library for int32 and
    int64 indices) answers as the full validation does, on valid and broken storage (chosen
    and random edits), below and above the sizes where it switches to vectorised or
    parallel checks."""
    idt = np.int64 if kind == 'native64' else np.int32
    check = StorageCheck(fmt, None if kind == 'numpy' else request.getfixturevalue('native_checks')[np.dtype(idt)])
    convert = {'CSR': sp.csr_array, 'CSC': sp.csc_array, 'COO': sp.coo_array}[fmt.name]
    shapes = [(1, 1, 1.0), (6, 5, 0.4), (4 * SMALL, 3 * SMALL, 0.05), (5, 5, 0.0), (SMALL, 2, 0.5)]
    if kind != 'numpy':
        shapes.append((700, 600, 0.2))  # 84k entries: above storage_check.PARALLEL
    for m, n, d in shapes:
        A = convert(_random(rng, m, n, d))
        arrays, sizes = _storage(A, fmt)
        arrays = {k: v if k == 'vals' else v.astype(idt) for k, v in arrays.items()}
        shape = A.shape
        assert check(arrays, *shape, sizes) and _spec_ok(fmt, arrays, shape, sizes)
        nnz = arrays['vals'].size
        crd = 'crd1'
        edits = [(crd, 0, -1), (crd, nnz - 1, 10**6), (crd, nnz // 2, int(np.iinfo(idt).min))]
        if nnz >= 2:
            edits += [(crd, 1, int(arrays[crd][0]))]  # duplicate or unsorted where the format cares
        if 'pos1' in arrays:
            edits += [('pos1', -1, nnz + 1), ('pos1', 0, 1), ('pos1', len(arrays['pos1']) // 2, nnz + 3)]
        members = [k for k in arrays if k != 'vals']
        for _ in range(20):  # random edits: a member, a position, a value near the valid range
            member = members[rng.integers(len(members))]
            if arrays[member].size:
                top = max(shape) if member.startswith('crd') else nnz
                edits.append((member, int(rng.integers(arrays[member].size)), int(rng.integers(-2, top + 2))))
        for member, at, value in edits:
            if arrays[member].size == 0:
                continue
            broken = {k: v.copy() for k, v in arrays.items()}
            broken[member][at] = value
            assert check(broken, *shape, sizes) == _spec_ok(fmt, broken, shape, sizes), (m, n, member, at, value)


@pytest.mark.parametrize('fmt', ['coo', 'bsr', 'dia', 'ELL', 'DCSR'])
def test_warm_calls_other_formats(rng, plan_calls, fmt):
    """scipy twins and ``SparseMatrix`` arguments run through plans too."""
    # (x is unannotated: DaCe compiles its length in, each length is a signature of its own)
    for m, n in ((8, 6), (12, 6), (12, 10), (8, 10)):
        D = _random(rng, m, n, 0.4).toarray()
        if fmt == 'bsr':
            A = sp.bsr_array(D, blocksize=(2, 2))
            A.sort_indices()
        elif fmt in ('coo', 'dia'):
            A = sp.coo_array(D) if fmt == 'coo' else sp.dia_array(D)
        else:
            A = ss.convert(sp.csr_array(D), getattr(ss, fmt))
        x = rng.standard_normal(n)
        np.testing.assert_allclose(plan_any(A, x), D @ x, rtol=1e-12, atol=1e-12)
    # (ELL and DCSR matrices share type and dtype: each call may first try the other's plan)
    assert plan_calls['done'] >= 2


def _plan_of(prog, *args):
    prog(*args)
    prog(*args)
    return next(p for ps in prog._ss_plans.values() for p in ps if p.run(args) is not plan_mod.MISS)


_TWINS = {}


def _same_outcome(plan, args):
    """The binder's C reading of CSR / CSC arguments and its twin with the slots' Python
    steps agree: both MISS, or equal results."""
    twin = _TWINS.get(id(plan))
    if twin is None or twin[0] is not plan:
        twin = _TWINS[id(plan)] = (plan, plan.python_twin())
    fast, slow = plan.run(args), twin[1](args)
    assert (fast is plan_mod.MISS) == (slow is plan_mod.MISS), plan.steps
    if fast is not plan_mod.MISS:
        np.testing.assert_array_equal(fast, slow)
    return fast is not plan_mod.MISS


def test_compiled_binder_agrees_with_the_python_steps(rng):
    """The compiled binder's own reading of CSR / CSC arguments takes and refuses exactly
    the calls the slots' Python steps do, with the same results: CSR and CSC (scipy and
    SparseMatrix), scalars, dense arguments with fixed dimensions; broken storage, other
    dtypes, formats, views and sizes, validation off."""
    m, n = 40, 30
    A = _random(rng, m, n, 0.2)
    A.sum_duplicates()
    x, y, X = rng.standard_normal(n), rng.standard_normal(m), rng.standard_normal((n, 8))
    spmv, spmm = _plan_of(plan_spmv, A, x), _plan_of(plan_spmm, A, X)
    axpy = _plan_of(plan_axpy, A, x, y, 1.5)
    csc = _plan_of(plan_any, A.tocsc(), x)
    Am = ss.convert(A, CSR)
    matrix = _plan_of(plan_any, Am, x)
    for plan in (spmv, spmm, axpy, csc, matrix):
        assert plan.entry is not None and plan.steps['A'] == 'sparse'
    scale = _plan_of(plan_scale, A)  # a sparse result: allocated and converted by its Python steps
    assert scale.steps == {'A': 'sparse'} and isinstance(scale.run((A,)), sp.csr_array)

    def broken(edit, B=A):
        B = B.copy()
        edit(B)
        return B

    p = int(np.flatnonzero(np.diff(A.indptr) >= 2)[0])
    p = int(A.indptr[p])
    bad = [
        broken(lambda B: B.indices.__setitem__(0, n)),
        broken(lambda B: B.indices.__setitem__(0, -1)),
        broken(lambda B: B.indices.__setitem__(p, A.indices[p + 1])),
        broken(lambda B: B.indptr.__setitem__(-1, A.nnz - 1)),
        broken(lambda B: B.indptr.__setitem__(3, A.nnz + 2)),
        _raw(A.data[:-1], A.indices, A.indptr, A.shape),
        A.astype(np.float32),
        sp.csr_array((A.data, A.indices.astype(np.int64), A.indptr.astype(np.int64)), shape=A.shape),
        A.tocsc(),
        _random(rng, m, n + 1, 0.2),  # x is too short for it
    ]
    assert _same_outcome(spmv, (A, x)) and _same_outcome(spmv, (_random(rng, m + 7, n, 0.2), x))
    for B in bad:
        assert not _same_outcome(spmv, (B, x))
    for v in (np.ones(2 * n)[::2], np.ones(n + 1), np.ones(n, np.float32), np.ones((n, 1))):
        assert not _same_outcome(spmv, (A, v))
    assert _same_outcome(spmm, (A, X)) and not _same_outcome(spmm, (A, X[:-1]))
    assert not _same_outcome(spmm, (A, np.asfortranarray(X)))
    assert _same_outcome(axpy, (A, x, y, -2.0))
    assert not _same_outcome(axpy, (A, x, y, 2)) and not _same_outcome(axpy, (A, x, np.ones(m + 1), 2.0))
    C = A.tocsc()
    assert _same_outcome(csc, (C, x)) and not _same_outcome(csc, (A, x))
    assert not _same_outcome(csc, (broken(lambda B: B.indices.__setitem__(0, m), C), x))
    assert _same_outcome(matrix, (Am, x)) and not _same_outcome(matrix, (ss.convert(A, CSC), x))
    unsorted = _raw([1.0, 2.0, 3.0], [2, 0, 1], [0, 2, 3, 3, 3, 3], (5, 4))
    small = _plan_of(plan_spmv, _random(rng, 5, 4, 0.5), np.ones(4))
    assert not _same_outcome(small, (unsorted, np.ones(4)))
    ss.set_validation(False)
    try:
        assert _same_outcome(small, (unsorted, np.ones(4)))
    finally:
        ss.set_validation(True)


@pytest.mark.parametrize('how', ['compile', 'optimize'])
def test_compiled_programs_take_the_plan_by_type(how, rng, monkeypatch):
    """``ss.compile`` and ``ss.optimize`` callables reach their warm plan as a program does:
    by the arguments' types alone where those have one plan (no dtype read, no marshalling),
    with the names of the compiled SDFG kept once."""
    from sdfgsparse.runtime import call as call_module
    fresh = dace.program(plan_axpy.f)
    A0 = _random(rng, 40, 30, 0.2)
    prog = ss.compile(fresh) if how == 'compile' else ss.optimize(fresh, matrices={'A': A0})
    for _ in range(2):
        prog(A0, rng.standard_normal(30), rng.standard_normal(40), 1.5)
    counted = {'raw': 0, 'marshal': 0}
    raw, marshal = call_module._raw_key, call_module.marshal_arguments
    monkeypatch.setattr(call_module, '_raw_key', lambda a: counted.__setitem__('raw', counted['raw'] + 1) or raw(a))
    monkeypatch.setattr(call_module, 'marshal_arguments',
                        lambda *a: counted.__setitem__('marshal', counted['marshal'] + 1) or marshal(*a))
    for m, n, d in _shapes():
        A, x, y = _random(rng, m, n, d), rng.standard_normal(n), rng.standard_normal(m)
        np.testing.assert_allclose(prog(A, x, y, -0.5), -0.5 * (A @ x) + y, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(prog(A=A, x=x, y=y, alpha=2.0), 2.0 * (A @ x) + y, rtol=1e-12, atol=1e-12)
    assert counted == {'raw': 0, 'marshal': 0}
    with pytest.raises(errors.ArgumentError):  # a call the plan cannot bind: the full path's error
        prog(A0, rng.standard_normal(30), y=rng.standard_normal(40))
