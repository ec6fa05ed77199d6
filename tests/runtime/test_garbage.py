"""Garbage where arrays, numbers or sparse matrices belong, wrong arity, sparse objects
whose own arrays have the wrong dimensions, shapes only a call can compare, and messages
that name the right argument and array. Each raises an ``ss.errors`` error, on the first
call and on warm calls alike, and leaves the inputs as they were.

Before: ``spmv(A, 'abcd')`` returned zeros, an extra positional argument was ignored, CSR
``data`` of shape (nnz, 1) and DIA with 1-D ``data`` were accepted, an unannotated
``A @ x`` with a vector of the wrong length read past its end; None, numbers and tuples,
a missing argument (``KeyError``) and a ``SparseMatrix`` made of lists
(``AttributeError``) escaped ``ss.errors``.
"""
import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse import errors

M, N, K = dace.symbol('M'), dace.symbol('N'), dace.symbol('K')


@dace.program
def gb_spmv(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


@dace.program
def gb_scaled(A: ss.CSR[dace.float64, M, N], x: dace.float64[N], alpha: dace.float64):
    return alpha * (A @ x)


@dace.program
def gb_any(A, x):
    return A @ x


@dace.program
def gb_add_any(A, B):
    return A + B


@dace.program
def gb_dia(A: ss.DIA[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


@dace.program
def gb_bsr(A: ss.BSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


@dace.program
def gb_two_symbols(A: ss.CSR[dace.float64, M, N], x: dace.float64[K]):
    return A @ x


@pytest.fixture
def A(rng):
    return sp.random_array((6, 4), density=0.5, format='csr', rng=rng)


def _twice(fn, *args, **kwargs):
    """Both calls raise (the second one after a good call made the signature warm)."""
    for _ in range(2):
        fn(*args, **kwargs)


@pytest.mark.parametrize('bad, shown', [('abcd', "a str \\('abcd'\\)"), (None, 'None'), (3.0, 'a float'),
                                        ((1.0, 2.0, 3.0, 4.0), 'a tuple'), ([1.0] * 4, 'a list'),
                                        ({'x': 1}, 'a dict')])
def test_not_an_array_where_an_array_belongs(A, bad, shown):
    gb_spmv(A, np.ones(4))
    with pytest.raises(errors.ArgumentError, match=f'x: expected a NumPy array or torch tensor of float64 with '
                       f'shape \\(N\\), got {shown}'):
        gb_spmv(A, bad)
    if not isinstance(bad, float):  # a number is a valid unannotated argument (a scalar)
        gb_any(A, np.ones(4))
        with pytest.raises(errors.ArgumentError, match=f'x: expected a NumPy array, a torch tensor or a number, '
                           f'got {shown}'):
            gb_any(A, bad)


def test_not_a_number_where_a_number_belongs(A):
    np.testing.assert_allclose(gb_scaled(A, np.ones(4), 2.0), 2 * (A @ np.ones(4)))
    for bad in ('2', None, np.ones(2), [2.0]):
        with pytest.raises(errors.ArgumentError, match='alpha: expected a number'):
            gb_scaled(A, np.ones(4), bad)


def test_arity(A):
    x = np.ones(4)
    gb_spmv(A, x)
    with pytest.raises(errors.ArgumentError, match=r'gb_spmv\(\) takes 2 arguments \(A, x\), 3 were given'):
        gb_spmv(A, x, x)
    with pytest.raises(errors.ArgumentError, match=r'gb_spmv\(\): missing argument x'):
        gb_spmv(A)
    with pytest.raises(errors.ArgumentError, match=r'gb_spmv\(\): missing arguments A, x'):
        gb_spmv()
    with pytest.raises(errors.ArgumentError, match=r'gb_spmv\(\): argument A given by position and by name'):
        gb_spmv(A, x, A=A)
    np.testing.assert_allclose(gb_spmv(x=x, A=A), A @ x)
    f = ss.compile(gb_spmv.to_sdfg())
    with pytest.raises(errors.ArgumentError, match='missing argument x'):
        f(A=A)
    with pytest.raises(errors.ArgumentError, match='takes 2 arguments'):
        f(A, x, x)


def test_sparse_arrays_of_the_wrong_dimensions(A, rng):
    flat = A.copy()
    flat.data = flat.data.reshape(-1, 1)
    with pytest.raises(errors.ShapeError, match=r'A: data has shape \(\d+, 1\); a scipy csr matrix keeps it in 1 '):
        _twice(gb_spmv, flat, np.ones(4))
    D = sp.dia_array(A.toarray())
    np.testing.assert_allclose(gb_dia(D, np.ones(4)), A @ np.ones(4))
    one_d = sp.dia_array(A.toarray())
    one_d.data = one_d.data.reshape(-1)
    with pytest.raises(errors.ShapeError, match=r'A: data has shape \(\d+,\); a scipy dia matrix keeps it in 2 '):
        _twice(gb_dia, one_d, np.ones(4))
    two_d = sp.dia_array(A.toarray())
    two_d.offsets = two_d.offsets.reshape(-1, 1)
    with pytest.raises(errors.ShapeError, match=r'A: offsets has shape \(\d+, 1\)'):
        _twice(gb_dia, two_d, np.ones(4))
    B = sp.bsr_array(A.toarray(), blocksize=(2, 2))
    B.sort_indices()
    gb_bsr(B, np.ones(4))
    B.data = B.data.reshape(-1, 2)
    with pytest.raises(errors.ShapeError, match='A: data has shape .*in 3 dimensions'):
        _twice(gb_bsr, B, np.ones(4))


def test_torch_hybrid_tensor(A):
    torch = pytest.importorskip('torch')
    T = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)),
                                torch.from_numpy(A.indices.astype(np.int64)),
                                torch.from_numpy(np.repeat(A.data[:, None], 2, axis=1)), size=(6, 4, 2))
    with pytest.raises(errors.ShapeError, match='A: values have shape .*hybrid tensors'):
        gb_any(T, np.ones(4))


def test_sparse_matrix_from_lists_and_bad_members():
    S = ss.SparseMatrix(ss.CSR, {'pos1': [0, 1, 1, 1, 1, 1, 2], 'crd1': [0, 3], 'vals': [1.0, 2.0]}, (6, 4))
    want = np.zeros(6)
    want[[0, 5]] = [1.0, 2.0]
    with pytest.warns(errors.CopyWarning):  # lists become int64 arrays; the program has int32 indices
        np.testing.assert_allclose(gb_spmv(S, np.ones(4)), want)
    with pytest.raises(errors.ShapeError, match=r'member vals has shape \(2, 1\)'):
        ss.SparseMatrix(ss.CSR, {'pos1': [0, 2], 'crd1': [0, 1], 'vals': [[1.0], [2.0]]}, (1, 4))
    with pytest.raises(errors.ArgumentError, match='member crd1 is NoneType'):
        ss.SparseMatrix(ss.CSR, {'pos1': [0, 2], 'crd1': None, 'vals': [1.0, 2.0]}, (1, 4))
    with pytest.raises(errors.ShapeError, match='missing member arrays'):
        ss.SparseMatrix(ss.CSR, {'pos1': [0, 2]}, (1, 4))
    with pytest.raises(errors.ShapeError, match=r'shape must be \(rows, cols\)'):
        ss.SparseMatrix(ss.CSR, {'pos1': [0, 0], 'crd1': [], 'vals': []}, 'wide')
    with pytest.raises(errors.ShapeError, match='unknown member arrays'):
        ss.SparseMatrix(ss.CSR, {'pos1': [0, 0], 'crd1': [], 'vals': [], 'data': []}, (1, 4))


def test_messages_name_the_right_array(A):
    wrapped = A.copy()
    wrapped.indices, wrapped.indptr = wrapped.indices.astype(np.int64), wrapped.indptr.astype(np.int64)
    wrapped.indices[1] = -2**32 + 3  # 3 once cut to 32 bits
    with pytest.raises(errors.InvalidIndexError, match=r'A: crd1\[1\] = -4294967293 is negative'):
        gb_spmv(wrapped, np.ones(4))
    big = A.copy()
    big.indices, big.indptr = big.indices.astype(np.int64), big.indptr.astype(np.int64)
    big.indices[2] = 2**40
    with pytest.raises(errors.IndexOverflowError, match=r'A: crd1\[2\] = 1099511627776 does not fit int32'):
        gb_spmv(big, np.ones(4))
    short = A.copy()
    short.indices = short.indices[:-1]
    with pytest.raises(errors.IndptrError, match=r'A: crd1 \(indices\) has \d+ entries, but vals \(data\) and '
                       r'pos1\[-1\] \(indptr\[-1\]\) say'):
        _twice(gb_spmv, short, np.ones(4))
    short_data = A.copy()
    short_data.data = short_data.data[:-1]
    with pytest.raises(errors.IndptrError, match=r'A: vals \(data\) has \d+ entries, expected'):
        gb_spmv(short_data, np.ones(4))
    bad = A.copy()
    bad.indices = bad.indices.copy()
    bad.indices[0] = 9
    for prog in (gb_spmv, gb_any):  # annotated or not: the argument's name
        with pytest.raises(errors.InvalidIndexError, match=r'^A: crd1\[0\] = 9 is out of range'):
            prog(bad, np.ones(4))


def test_shapes_only_a_call_can_compare(A, rng):
    """Unannotated operands (their sizes are symbols of their own, or constants of the
    first call) and annotations with two different symbols: the call compares them."""
    x = np.ones(4)
    np.testing.assert_allclose(gb_any(A, x), A @ x)
    for n in (3, 5):  # shorter: a read past the end before; longer: a silently wrong product
        with pytest.raises(errors.ShapeError, match=f'A @ x: inner dimensions differ \\(A_cols = 4 vs {n}\\)'):
            _twice(gb_any, A, np.ones(n))
    # a signature compiled, refused by the call, then asked again after another one (the
    # fuzzer found the program of the other length answering)
    gb_any(A[:, :3], np.ones(3))
    for _ in range(2):
        with pytest.raises(errors.ShapeError, match=r'A_cols = 4 vs 3'):
            gb_any(A, np.ones(3))
    B = sp.random_array((6, 3), density=0.5, format='csr', rng=rng)
    with pytest.raises(errors.ShapeError, match=r'A \+ B: columns differ \(A_cols = 4 vs B_cols = 3\)'):
        _twice(gb_add_any, A, B)
    np.testing.assert_allclose(gb_two_symbols(A, x), A @ x)
    with pytest.raises(errors.ShapeError, match=r'A @ x: inner dimensions differ \(N = 4 vs K = 5\)'):
        _twice(gb_two_symbols, A, np.ones(5))


def test_host_functions_check_their_arguments(A):
    bad = A.copy()
    bad.indices = bad.indices.copy()
    bad.indices[0] = 7
    for fn, args, name in ((ss.relu, (bad, ), 'A'), (ss.convert, (bad, ss.ELL), 'A'),
                           (ss.sddmm, (bad, np.ones((6, 2)), np.ones((2, 4))), 'S'), (ss.softmax, (bad, ), 'S')):
        with pytest.raises(errors.InvalidIndexError, match=f'{name}: crd1\\[0\\] = 7 is out of range'):
            fn(*args)
    with pytest.raises(errors.ShapeError, match=r'ss.sddmm\(S, X, Y\): S \(6, 4\), X \(6, 2\) and Y \(3, 4\)'):
        ss.sddmm(A, np.ones((6, 2)), np.ones((3, 4)))
    with pytest.raises(errors.ArgumentError, match='X: expected an array, got str'):
        ss.sddmm(A, 'abc', np.ones((3, 4)))
    with pytest.raises(errors.ArgumentError, match='S: expected a sparse matrix'):
        ss.sddmm(np.ones((6, 4)), np.ones((6, 2)), np.ones((2, 4)))


def test_matmul_with_a_number(A):
    """``A @ 3.5`` (an unannotated argument that is a number): a typed error as in scipy,
    not DaCe's syntax error (found by the fuzzer)."""
    with pytest.raises(errors.UnsupportedOperationError, match=r"A @ x: the right operand is a scalar; use '\*'"):
        gb_any(A, 3.5)


def test_unannotated_messages_name_the_argument(A):
    """Unannotated parameters take the value's own format and dtypes; what is refused
    then is refused under the argument's name (it said 'CSR: value dtype ...')."""
    with pytest.raises(errors.DTypeError, match=r'^A: value dtype complex128 is not supported'):
        gb_any(A.astype(np.complex128), np.ones(4))
    with pytest.raises(errors.DTypeError, match=r'^A: value dtype bool is not supported'):
        gb_any(A.astype(bool), np.ones(4))
    with pytest.raises(errors.FormatMismatchError, match=r"^A: scipy format 'lil' is not supported"):
        gb_any(A.tolil(), np.ones(4))


_SECOND_PROCESS = '''
import sys
import dace, numpy as np, scipy.sparse as sp
import sdfgsparse as ss
from sdfgsparse import errors


@dace.program
def gb_warm(A, x):
    return A @ x


A = sp.random_array((6, 4), density=0.5, format='csr', rng=1)
assert np.allclose(gb_warm(A, np.ones(4)), A @ np.ones(4))
try:
    gb_warm(A, np.ones(int(sys.argv[1])))
except errors.ShapeError as e:
    print('raised:', e)
'''


def test_shape_rules_survive_a_save_and_a_build_loaded_by_another_process(tmp_path):
    """The rules a call checks live in the SDFG's notes: a saved and loaded SDFG keeps them,
    and a second process, which loads the first one's build from the cache (the SDFG as the
    build folder stored it), still refuses a vector of the wrong length instead of reading
    past its end (it did before: the rules were kept on the SDFG object only)."""
    import os
    import subprocess
    import sys
    from sdfgsparse.ops import shape_checks
    sdfg = gb_two_symbols.to_sdfg()
    assert shape_checks.rules(sdfg)
    path = tmp_path / 'gb_any.sdfg'
    sdfg.save(str(path))
    from sdfgsparse.scripting import files
    assert shape_checks.rules(files.load_sdfg(str(path))) == shape_checks.rules(sdfg)  # through the safe loader
    script = tmp_path / 'warm.py'
    script.write_text(_SECOND_PROCESS)
    env = dict(os.environ, OMP_NUM_THREADS='1')
    outs = [subprocess.run([sys.executable, str(script), '3'], capture_output=True, text=True, env=env, check=True,
                           cwd=os.getcwd()).stdout for _ in range(2)]  # built, then loaded from the cache
    assert all('raised: A @ x: inner dimensions differ (A_cols = 4 vs 3)' in o for o in outs), outs
