"""Every bad-input path raises a typed error naming the argument, before compiling and
without touching the caller's data."""
import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse import errors

M, N = dace.symbol('M'), dace.symbol('N')


@dace.program
def spmv_err(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


@dace.program
def spmv_fixed(A: ss.CSR[dace.float64, 5, 4], x: dace.float64[4]):
    return A @ x


@dace.program
def spmv_square(A: ss.CSR[dace.float64, N, N], x: dace.float64[N]):
    return A @ x


def _csr(rng):
    return sp.random_array((5, 4), density=0.5, format='csr', rng=rng)


def _raw(data, indices, indptr, shape=(5, 4)):
    """A csr_array holding exactly these arrays (scipy does not check them)."""
    A = sp.csr_array(shape)
    A.data, A.indices, A.indptr = (np.asarray(data, np.float64), np.asarray(indices, np.int32),
                                   np.asarray(indptr, np.int32))
    return A


def test_dense_length_mismatch(rng):
    with pytest.raises(errors.ShapeError, match=r'x: has shape \(3,\).*N = 4 \(from A\)'):
        spmv_err(_csr(rng), np.ones(3))


def test_dense_dtype(rng):
    """DaCe alone only warns and reads the float32 bytes as float64 (a wrong result)."""
    A = _csr(rng)
    with pytest.raises(errors.DTypeError, match=r'x: dtype is float32, the program expects float64; '
                       r'pass x.astype\(np.float64\)'):
        spmv_err(A, np.ones(4, np.float32))
    spmv_err(A, np.ones(4))
    with pytest.raises(errors.DTypeError, match='x: dtype is int64'):  # also on a warm call
        spmv_err(A, np.ones(4, np.int64))


def test_sparse_shape_against_constant_annotation(rng):
    with pytest.raises(errors.ShapeError, match='A: has rows = 6, the program expects 5'):
        spmv_fixed(sp.random_array((6, 4), density=0.5, format='csr', rng=rng), np.ones(4))


def test_non_square_matrix_for_a_square_annotation(rng):
    """``ss.CSR[.., N, N]`` with a 6 x 4 matrix: its columns silently set N, and the result
    had 4 rows instead of an error (first call and after a square one)."""
    x = np.ones(4)
    A = sp.random_array((6, 4), density=0.5, format='csr', rng=rng)
    for _ in range(2):
        with pytest.raises(errors.ShapeError, match=r'A: its rows \(6\) and cols \(4\) differ, but the program '
                           r'declares both as N'):
            spmv_square(A, x)
        S = sp.random_array((4, 4), density=0.5, format='csr', rng=rng)
        np.testing.assert_allclose(spmv_square(S, x), S @ x)


def test_value_dtype(rng):
    A = _csr(rng).astype(np.float32)
    with pytest.raises(errors.DTypeError, match=r'A: values are float32, the program expects float64; '
                       r'pass A.astype\(np.float64\)'):
        spmv_err(A, np.ones(4))


def test_out_of_range_index():
    A = _raw([1.0, 2.0], [1, 4], [0, 1, 2, 2, 2, 2])
    with pytest.raises(errors.InvalidIndexError, match=r'A: crd1\[1\] = 4 is out of range for a dimension of size 4'):
        spmv_err(A, np.ones(4))


def test_negative_index():
    A = _raw([1.0, 2.0], [1, -2], [0, 1, 2, 2, 2, 2])
    with pytest.raises(errors.InvalidIndexError, match=r'A: crd1\[1\] = -2 is negative'):
        spmv_err(A, np.ones(4))


def test_unsorted_indices():
    A = _raw([1.0, 2.0, 3.0], [2, 0, 1], [0, 2, 3, 3, 3, 3])
    with pytest.raises(errors.UnsortedIndicesError, match='A: crd1 .* not sorted .* sort_indices'):
        spmv_err(A, np.ones(4))


def test_duplicate_indices():
    A = _raw([1.0, 2.0], [3, 3], [0, 2, 2, 2, 2, 2])
    with pytest.raises(errors.DuplicateIndicesError, match='A: crd1 .* twice .* sum_duplicates'):
        spmv_err(A, np.ones(4))


def test_indptr_inconsistent_with_nnz():
    A = _raw([1.0, 2.0], [0, 1], [0, 1, 2, 2, 2, 3])
    with pytest.raises(errors.IndptrError, match=r'A: pos1\[-1\] \(indptr\[-1\]\) = 3 is not the number of stored'):
        spmv_err(A, np.ones(4))


def test_indptr_decreasing():
    A = _raw([1.0, 2.0], [0, 1], [0, 2, 1, 2, 2, 2])
    with pytest.raises(errors.IndptrError, match=r'A: pos1 \(indptr\) decreases at position 2'):
        spmv_err(A, np.ones(4))


def test_indptr_wrong_length():
    A = _raw([1.0], [0], [0, 1, 1])
    A._shape = (5, 4)
    with pytest.raises(errors.IndptrError, match=r'A: pos1 \(indptr\) has 3 entries, expected 6'):
        spmv_err(A, np.ones(4))


def test_int32_overflow():
    big = 2**31 + 4
    A = sp.csr_array((np.ones(1), np.array([big - 1], np.int64), np.array([0, 1], np.int64)), shape=(1, big))
    with pytest.raises(errors.IndexOverflowError, match='A: shape .* does not fit int32 indices; annotate with '
                       'dace.int64'):
        spmv_err(A, np.ones(3))


def test_format_mismatch(rng):
    with pytest.raises(errors.FormatMismatchError, match=r'A: the program expects CSR but got CSC .*ss.convert\(A, '
                       r'ss.CSR\)'):
        spmv_err(_csr(rng).tocsc(), np.ones(4))


def test_the_format_mismatch_hint_works_for_torch_tensors(rng):
    """A torch COO (or CSC, BSR) tensor where CSR is annotated: the error says to convert,
    and ss.convert takes the tensor (it raised a bare TypeError from np.asarray)."""
    torch = pytest.importorskip('torch')
    A = _csr(rng)
    dense = torch.from_numpy(A.toarray())
    for t in (dense.to_sparse_coo(), dense.to_sparse_csc(), dense.to_sparse_bsr((1, 1))):
        with pytest.raises(errors.FormatMismatchError, match=r'ss.convert\(A, ss.CSR\)'):
            spmv_err(t, np.ones(4))
        np.testing.assert_allclose(spmv_err(ss.convert(t, ss.CSR), np.ones(4)), A @ np.ones(4), atol=1e-12)
    B = ss.convert(dense.requires_grad_(), ss.ELL)  # a dense tensor that records gradients
    np.testing.assert_array_equal(B.to_scipy().toarray(), A.toarray())


def test_dense_where_sparse_expected(rng):
    with pytest.raises(errors.FormatMismatchError, match='A: the program expects a sparse matrix'):
        spmv_err(_csr(rng).toarray(), np.ones(4))


def test_sparse_where_dense_expected(rng):
    with pytest.raises(errors.FormatMismatchError, match=r'x: a sparse matrix was passed .* x.toarray\(\)'):
        spmv_err(_csr(rng), _csr(rng))


def test_shared_symbols_conflict(rng):

    @dace.program
    def two(A: ss.CSR[dace.float64, M, N], B: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
        return A @ x + B @ x

    with pytest.raises(errors.ShapeError, match='B: symbol M is 7, but A fixed M = 5'):
        two(_csr(rng), sp.random_array((7, 4), density=0.5, format='csr', rng=rng), np.ones(4))


def test_index_widening_warns_and_copies(rng):
    A = _csr(rng)
    A64 = sp.csr_array((A.data, A.indices.astype(np.int64), A.indptr.astype(np.int64)), shape=A.shape)
    if A64.indices.dtype != np.int64:
        pytest.skip('scipy narrowed the index arrays')
    x = rng.standard_normal(4)
    with pytest.warns(errors.CopyWarning, match='A: index arrays are int64'):
        y = spmv_err(A64, x)
    np.testing.assert_allclose(y, A @ x)
    assert A64.indices.dtype == np.int64


def test_errors_subclass_builtins():
    assert issubclass(errors.ShapeError, ValueError)
    assert issubclass(errors.DTypeError, TypeError)
    assert issubclass(errors.FormatMismatchError, TypeError)
    assert issubclass(errors.UnsortedIndicesError, ValueError)
    assert issubclass(errors.IndexOverflowError, ValueError)


def test_bad_input_is_untouched():
    A = _raw([1.0, 2.0, 3.0], [2, 0, 1], [0, 2, 3, 3, 3, 3])
    before = (A.data.copy(), A.indices.copy(), A.indptr.copy())
    with pytest.raises(errors.UnsortedIndicesError):
        spmv_err(A, np.ones(4))
    for got, want in zip((A.data, A.indices, A.indptr), before):
        np.testing.assert_array_equal(got, want)


def test_symbol_keyword_contradicting_the_arguments(rng):
    """``M=2`` where A has 5 rows: refused (the compiled program would have written 2 rows, or
    read past A's row pointers for a larger value); the agreeing value is accepted."""
    prog = ss.compile(spmv_err)
    A, x = _csr(rng), rng.standard_normal(4)
    with pytest.raises(errors.ShapeError, match='M: given as 2, but A fixed M = 5'):
        prog(A=A, x=x, M=2)
    np.testing.assert_allclose(prog(A=A, x=x, M=5), A @ x)
