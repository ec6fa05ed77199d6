"""Programs over CSF tensors in every mode order of rank 3 (``ss.CSF[dt, I, J, K, order]``) and
over ``ss.BatchedCSR`` tensors: arguments in (ss.SparseTensor, torch's batched CSR; pydata,
scipy and torch COO converted with ``ss.convert``), results out (ss.SparseTensor, torch batched
CSR or COO, pydata COO), einsum (MTTKRP ``ijk,jr,kr->ir``, TTV ``ijk,k->i`` and ``ijk,k->ij``,
batched SpMM ``bij,bjk->bik``, ``bij,bj->bi``), sums and element-wise operations against NumPy on
the dense tensor; typed errors naming the argument before any call."""
import itertools
import os
import subprocess
import sys
import textwrap
import warnings

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse import errors
from sdfgsparse.runtime.marshal import marshal_sparse
from sparse_zoo import dense

torch = pytest.importorskip('torch')
try:
    import sparse as pydata_sparse  # optional: CI has no pydata/sparse (its cases skip there)
except ImportError:
    pydata_sparse = None

I, J, K, R = (dace.symbol(s) for s in 'IJKR')
B, M, N = (dace.symbol(s) for s in 'BMN')

ORDERS = list(itertools.permutations(range(3)))
#: the value and index dtypes of each order's program (both of each, alternating)
DTYPES = {order: [(dace.float64, dace.int32), (dace.float32, dace.int64)][k % 2] for k, order in enumerate(ORDERS)}


def _order_program(order, vt, it):
    """MTTKRP, TTV (to a vector and to a matrix), a sum and an element-wise operation of a
    tensor in CSF of mode ``order``."""

    @dace.program
    def tensor_order(T: ss.CSF[vt, I, J, K, it, order], Bm: vt[J, R], C: vt[K, R], v: vt[K]):
        return (np.einsum('ijk,jr,kr->ir', T, Bm, C), np.einsum('ijk,k->i', T, v), np.einsum('ijk,k->ij', T, v),
                T.sum(axis=(0, 2)), 2.0 * T)

    return tensor_order


PROGRAMS = {order: _order_program(order, *DTYPES[order]) for order in ORDERS}


@dace.program
def scale_pair(T: ss.CSF[dace.float64, I, J, K, (2, 0, 1)], U: ss.COO[dace.float64, I, J, K]):
    return 2.0 * T, -U


@dace.program
def batched64(T: ss.BatchedCSR[dace.float64, B, M, N], D: dace.float64[B, N, R], x: dace.float64[B, N]):
    return np.einsum('bij,bjk->bik', T, D), np.einsum('bij,bj->bi', T, x), T * 3.0, T.sum(axis=(0, 2))


@dace.program
def batched32(T: ss.BatchedCSR[dace.float32, B, M, N, dace.int64], D: dace.float32[B, N, R], x: dace.float32[B, N]):
    return np.einsum('bij,bjk->bik', T, D), np.einsum('bij,bj->bi', T, x), T * 3.0, T.sum(axis=(0, 2))


BATCHED = {np.float64: (batched64, np.int32), np.float32: (batched32, np.int64)}


@dace.program
def views_of_orders(T: ss.CSF[dace.float64, I, J, K, (2, 0, 1)], v: dace.float64[I]):
    return np.einsum('jik,i->jk', T.transpose((1, 0, 2)), v), T.transpose((2, 0, 1)), T[1:3]


@dace.program
def views_of_batches(T: ss.BatchedCSR[dace.float64, B, M, N], X: dace.float64[B, N, R]):
    return T @ X, np.transpose(T, (0, 2, 1)), T[1]


# ---------------------------------------------------------------------- values
def random_tensor(rng, shape, density=0.15, dtype=np.float64):
    """A dense tensor with about ``density`` nonzeros, the second slice of every dimension empty
    (and the whole tensor empty where ``density`` is 0)."""
    D = np.where(rng.random(shape) < density, rng.standard_normal(shape), 0.0).astype(dtype)
    for d in range(len(shape)):
        if shape[d] > 1:
            D[(slice(None), ) * d + (1, )] = 0
    return D


def _tol(dtype):
    return dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)


def _order_reference(D, Bm, C, v):
    D = D.astype(np.float64)
    return (np.einsum('ijk,jr,kr->ir', D, Bm, C), np.einsum('ijk,k->i', D, v), np.einsum('ijk,k->ij', D, v),
            D.sum(axis=(0, 2)), 2.0 * D)


def _order_operands(rng, order, shape=(6, 5, 7), density=0.15):
    vt, it = DTYPES[order]
    dt = vt.type
    D = random_tensor(rng, shape, density, dt)
    T = ss.convert(sp.coo_array(D), ss.CSF[vt, I, J, K, it, order])
    Bm, C = rng.standard_normal((shape[1], 3)).astype(dt), rng.standard_normal((shape[2], 3)).astype(dt)
    return D, T, Bm, C, rng.standard_normal(shape[2]).astype(dt)


def _batched_torch(rng, shape, k, dtype=np.float64, index=torch.int64):
    """A torch batched CSR tensor of ``shape`` (B, M, N) with ``k`` entries per batch (rows
    left empty at random), and its dense array."""
    Bn, Mn, Nn = shape
    D = np.zeros(shape, dtype=dtype)
    for b in range(Bn):
        flat = rng.choice(Mn * Nn, size=k, replace=False)
        D[b].flat[flat] = rng.standard_normal(k)
    crow = np.zeros((Bn, Mn + 1), dtype=np.int64)
    col, vals = np.zeros((Bn, k), dtype=np.int64), np.zeros((Bn, k), dtype=dtype)
    for b in range(Bn):
        A = sp.csr_array(D[b])
        crow[b], col[b], vals[b] = A.indptr, A.indices, A.data
    t = torch.sparse_csr_tensor(torch.from_numpy(crow).to(index), torch.from_numpy(col).to(index),
                                torch.from_numpy(vals), size=shape, check_invariants=True)
    return t, D


def _batched_reference(D, X, x):
    D = D.astype(np.float64)
    return np.einsum('bij,bjk->bik', D, X), np.einsum('bij,bj->bi', D, x), 3.0 * D, D.sum(axis=(0, 2))


# ---------------------------------------------------------------------- CSF in every mode order
@pytest.mark.parametrize('order', ORDERS, ids=lambda o: ''.join(map(str, o)))
def test_einsum_sums_and_elementwise_in_every_order(rng, order):
    fmt = ss.CSF.with_order(*order)
    prog = PROGRAMS[order]
    for shape, density in (((6, 5, 7), 0.15), ((4, 1, 3), 0.6), ((5, 4, 3), 0.0)):
        D, T, Bm, C, v = _order_operands(rng, order, shape, density)
        assert T.format is fmt and T.arrays['vals'].size == np.count_nonzero(D)
        got = prog(T=T, Bm=Bm, C=C, v=v)
        for k, (g, want) in enumerate(zip(got, _order_reference(D, Bm, C, v))):
            np.testing.assert_allclose(dense(g).reshape(want.shape), want, **_tol(D.dtype),
                                       err_msg=f'{fmt.name} {shape}: result {k}')
        # TTV to a matrix is sparse on the outer levels of CSF3 only; dense for another order
        assert isinstance(got[2], ss.SparseMatrix) == (order == (0, 1, 2))
        scaled = got[4]
        assert isinstance(scaled, ss.SparseTensor) and scaled.format is fmt and scaled.dtype == D.dtype
        for m in T.arrays:  # the same pattern, member by member
            if m != 'vals':
                np.testing.assert_array_equal(scaled.arrays[m], T.arrays[m])


@pytest.mark.parametrize('order', [(0, 1, 2), (2, 0, 1)], ids=lambda o: ''.join(map(str, o)))
def test_pure_expansions_agree(rng, order):
    D, T, Bm, C, v = _order_operands(rng, order)
    with ss.targets.use_implementation('pure'):
        got = PROGRAMS[order](T=T, Bm=Bm, C=C, v=v)
    for k, (g, want) in enumerate(zip(got, _order_reference(D, Bm, C, v))):
        np.testing.assert_allclose(dense(g).reshape(want.shape), want, **_tol(D.dtype), err_msg=f'result {k}')


@pytest.mark.parametrize('order', [(1, 2, 0), (2, 1, 0)], ids=lambda o: ''.join(map(str, o)))
def test_torch_caller_gets_torch_results(rng, order):
    D, T, Bm, C, v = _order_operands(rng, order)
    got = PROGRAMS[order](T=T, Bm=torch.from_numpy(Bm), C=torch.from_numpy(C), v=torch.from_numpy(v))
    assert all(isinstance(g, torch.Tensor) for g in got)
    assert got[4].layout == torch.sparse_coo and tuple(got[4].shape) == D.shape
    for k, (g, want) in enumerate(zip(got, _order_reference(D, Bm, C, v))):
        np.testing.assert_allclose(g.to_dense().numpy().reshape(want.shape), want, **_tol(D.dtype),
                                   err_msg=f'result {k}')


@pytest.mark.parametrize('lib', ['pydata', 'scipy', 'torch'])
def test_a_second_argument_decides_the_result_library(rng, lib):
    D = random_tensor(rng, (5, 4, 6))
    T = ss.convert(D, ss.CSF.with_order(2, 0, 1))
    if lib == 'pydata':
        if pydata_sparse is None:
            pytest.skip('pydata/sparse is not installed')
        U = pydata_sparse.COO.from_numpy(D)
    elif lib == 'scipy':
        U = sp.coo_array(D)
    else:
        U = torch.from_numpy(D).to_sparse()
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', errors.CopyWarning)  # (U's int64 coordinates where int32 are annotated)
        scaled, negated = scale_pair(T=T, U=U)
    kind = {'pydata': pydata_sparse.COO if pydata_sparse else None, 'scipy': ss.SparseTensor,
            'torch': torch.Tensor}[lib]
    assert isinstance(scaled, kind) and isinstance(negated, kind)
    todense = {'pydata': lambda x: x.todense(), 'scipy': lambda x: x.toarray(),
               'torch': lambda x: x.to_dense().numpy()}[lib]
    np.testing.assert_array_equal(todense(scaled), 2.0 * D)  # the coordinates of each level's dimension
    np.testing.assert_array_equal(todense(negated), -D)


def test_values_converted_from_every_library(rng):
    D = random_tensor(rng, (6, 5, 7))
    values = [sp.coo_array(D), torch.from_numpy(D).to_sparse(), ss.convert(D, ss.COO), ss.convert(D, ss.CSF),
              ss.convert(D, ss.BatchedCSR)]
    if pydata_sparse is not None:
        values += [pydata_sparse.COO.from_numpy(D), pydata_sparse.GCXS.from_numpy(D)]
    for value in values:
        for order in ORDERS:
            T = ss.convert(value, ss.CSF.with_order(*order))
            assert T.format.level_dims == order
            np.testing.assert_array_equal(T.toarray(), D, err_msg=f'{type(value).__name__} {order}')


@pytest.mark.parametrize('lib', ['pydata', 'scipy', 'torch', 'COO3', 'CSF3', 'CSF3_210'])
def test_other_formats_where_an_order_is_annotated(rng, lib):
    D = random_tensor(rng, (6, 5, 7))
    D64 = D.astype(np.float64)
    value = {'scipy': lambda: sp.coo_array(D64), 'torch': lambda: torch.from_numpy(D64).to_sparse(),
             'pydata': lambda: (pydata_sparse or pytest.skip('pydata/sparse is not installed')).COO.from_numpy(D64),
             'COO3': lambda: ss.convert(D64, ss.COO), 'CSF3': lambda: ss.convert(D64, ss.CSF),
             'CSF3_210': lambda: ss.convert(D64, ss.CSF.with_order(2, 1, 0))}[lib]()
    got = 'CSF3_210' if lib == 'CSF3_210' else 'CSF3' if lib == 'CSF3' else 'COO3'
    Bm, C, v = np.ones((5, 3)), np.ones((7, 3)), np.ones(7)
    with pytest.raises(errors.FormatMismatchError, match=rf'T: the program expects CSF3_102 but got {got} .*'
                       r'convert explicitly with ss.convert\(T, ss.CSF.with_order\(1, 0, 2\)\)'):
        PROGRAMS[(1, 0, 2)](T=value, Bm=Bm, C=C, v=v)
    if lib == 'CSF3_210':
        with pytest.raises(errors.FormatMismatchError, match=r'T: the program expects CSF3 but got CSF3_210 .*'
                           r'convert explicitly with ss.convert\(T, ss.CSF\)'):
            PROGRAMS[(0, 1, 2)](T=value, Bm=Bm, C=C, v=v)


def test_storage_errors_name_the_argument(rng):
    order = (2, 0, 1)  # level 0 stores dimension 2 (K = 7), level 1 dimension 0 (I = 6), level 2 J = 5
    D, T, Bm, C, v = _order_operands(rng, order)
    prog = PROGRAMS[order]
    st = ss.CSF.type(DTYPES[order][0], I, J, K, DTYPES[order][1], order=order)
    assert T.arrays['crd0'][-1] == 6  # (the last slice of dimension 2 stores entries)
    marshal_sparse('T', T, st)  # 6 < K: in range for level 0, whose extent is K, not I

    def broken(member, at, value):
        arrays = {m: a.copy() for m, a in T.arrays.items()}
        arrays[member][at] = value
        return ss.SparseTensor(T.format, arrays, T.shape)

    with pytest.raises(errors.InvalidIndexError, match=r'T: crd0\[\d+\] = 7 is out of range for a dimension of '
                       'size 7'):
        prog(T=broken('crd0', -1, 7), Bm=Bm, C=C, v=v)
    with pytest.raises(errors.InvalidIndexError, match=r'T: crd1\[0\] = 6 is out of range for a dimension of size 6'):
        prog(T=broken('crd1', 0, 6), Bm=Bm, C=C, v=v)
    seg = np.flatnonzero(np.diff(T.arrays['pos2']) >= 2)[0]  # a fiber of two entries or more
    p = T.arrays['pos2'][seg]
    swapped = broken('crd2', p, T.arrays['crd2'][p + 1])
    swapped.arrays['crd2'][p + 1] = T.arrays['crd2'][p]
    with pytest.raises(errors.UnsortedIndicesError, match=r'T: crd2 \(indices\) is not sorted within its segment'):
        prog(T=swapped, Bm=Bm, C=C, v=v)
    with pytest.raises(errors.DuplicateIndicesError, match=r'T: crd2 \(indices\) stores coordinate \d+ twice'):
        prog(T=broken('crd2', p + 1, T.arrays['crd2'][p]), Bm=Bm, C=C, v=v)
    with pytest.raises(errors.ShapeError, match=r'T: SparseMatrix of shape \(2, 3, 4, 5\) is a rank-4 tensor; the '
                       r'program expects a rank-3 tensor'):
        prog(T=ss.convert(np.ones((2, 3, 4, 5)), ss.CSF.with_order(3, 1, 0, 2)), Bm=Bm, C=C, v=v)
    with pytest.raises(errors.DTypeError, match='T: values are'):
        prog(T=ss.convert(D.astype(np.float32 if D.dtype == np.float64 else np.float64), ss.CSF.with_order(*order)),
             Bm=Bm, C=C, v=v)


# ---------------------------------------------------------------------- BatchedCSR
@pytest.mark.parametrize('dtype', [np.float64, np.float32])
def test_batched_einsum_from_sparse_tensors(rng, dtype):
    prog, index = BATCHED[dtype]
    vt = dace.float64 if dtype == np.float64 else dace.float32
    for shape, density in (((4, 6, 5), 0.2), ((1, 3, 2), 0.5), ((3, 4, 5), 0.0), ((2, 0, 3), 0.5)):
        D = random_tensor(rng, shape, density, dtype)  # batch 1 (and row 1 of each batch) empty
        T = ss.convert(D, ss.BatchedCSR[vt, B, M, N, dace.int64 if index == np.int64 else dace.int32])
        assert T.format is ss.BatchedCSR and T.arrays['pos2'].size == shape[0] * shape[1] + 1
        assert T.arrays['pos2'].dtype == index
        X, x = rng.standard_normal((shape[0], shape[2], 3)).astype(dtype), rng.standard_normal(shape[::2]).astype(dtype)
        got = prog(T=T, D=X, x=x)
        for k, (g, want) in enumerate(zip(got, _batched_reference(D, X, x))):
            np.testing.assert_allclose(dense(g).reshape(want.shape), want, **_tol(dtype), err_msg=f'{shape}: {k}')
        assert isinstance(got[2], ss.SparseTensor) and got[2].format is ss.BatchedCSR
        np.testing.assert_array_equal(got[2].arrays['pos2'], T.arrays['pos2'])
        np.testing.assert_array_equal(got[2].arrays['crd2'], T.arrays['crd2'])


def test_batched_pure_expansion_agrees(rng):
    D = random_tensor(rng, (3, 5, 4), 0.3)
    T = ss.convert(D, ss.BatchedCSR)
    X, x = rng.standard_normal((3, 4, 2)), rng.standard_normal((3, 4))
    with ss.targets.use_implementation('pure'):
        got = batched64(T=T, D=X, x=x)
    for g, want in zip(got, _batched_reference(D, X, x)):
        np.testing.assert_allclose(dense(g).reshape(want.shape), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('dtype', [np.float64, np.float32])
@pytest.mark.parametrize('index', [torch.int32, torch.int64], ids=['int32', 'int64'])
def test_torch_batched_csr_in_and_out(rng, dtype, index):
    prog, annotated = BATCHED[dtype]
    t, D = _batched_torch(rng, (4, 5, 6), 7, dtype, index)
    X, x = rng.standard_normal((4, 6, 3)).astype(dtype), rng.standard_normal((4, 6)).astype(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter('error' if np.dtype(annotated) == t.col_indices().numpy().dtype else 'ignore')
        got = prog(T=t, D=torch.from_numpy(X), x=torch.from_numpy(x))  # the same index width: no copy warning
    for k, (g, want) in enumerate(zip(got, _batched_reference(D, X, x))):
        assert isinstance(g, torch.Tensor)
        np.testing.assert_allclose(g.to_dense().numpy().reshape(want.shape), want, **_tol(dtype), err_msg=f'{k}')
    scaled = got[2]  # every batch has 7 entries: torch's batched CSR, the argument's pattern
    assert scaled.layout == torch.sparse_csr and tuple(scaled.shape) == (4, 5, 6)
    np.testing.assert_array_equal(scaled.crow_indices().numpy(), t.crow_indices().numpy())
    np.testing.assert_array_equal(scaled.col_indices().numpy(), t.col_indices().numpy())
    np.testing.assert_allclose(scaled.values().numpy(), 3.0 * t.values().numpy(), rtol=1e-6)


def test_torch_batched_csr_members_are_zero_copy(rng):
    t, D = _batched_torch(rng, (3, 4, 5), 4, np.float32, torch.int64)
    st = ss.BatchedCSR.type(dace.float32, B, M, N, dace.int64)
    arg = marshal_sparse('T', t, st)
    assert np.shares_memory(arg.arrays['crd2'], t.col_indices().numpy())
    assert np.shares_memory(arg.arrays['vals'], t.values().numpy())
    np.testing.assert_array_equal(arg.arrays['pos2'], (t.crow_indices().numpy()[:, :-1] +
                                                       4 * np.arange(3)[:, None]).ravel().tolist() + [12])
    assert arg.symbol_values() == {'B': 3, 'M': 4, 'N': 5, str(st.sizes['n2']): 12}


def test_batches_of_different_counts_come_back_to_torch_as_coo(rng):
    D = random_tensor(rng, (3, 4, 5), 0.3)
    T = ss.convert(D, ss.BatchedCSR)
    counts = np.diff(T.arrays['pos2'][::4])
    assert len(set(counts.tolist())) > 1  # (batch 1 is empty)
    X, x = rng.standard_normal((3, 5, 2)), rng.standard_normal((3, 5))
    got = batched64(T=T, D=torch.from_numpy(X), x=torch.from_numpy(x))  # a torch caller
    assert got[2].layout == torch.sparse_coo
    np.testing.assert_allclose(got[2].to_dense().numpy(), 3.0 * D, rtol=1e-12)


def test_batched_values_converted_from_every_library(rng):
    t, D = _batched_torch(rng, (3, 4, 5), 3)
    values = [sp.coo_array(D), torch.from_numpy(D).to_sparse(), t, ss.convert(D, ss.CSF.with_order(1, 2, 0))]
    if pydata_sparse is not None:
        values.append(pydata_sparse.COO.from_numpy(D))
    X, x = rng.standard_normal((3, 5, 2)), rng.standard_normal((3, 5))
    want = _batched_reference(D, X, x)
    for value in values:
        T = ss.convert(value, ss.BatchedCSR)
        assert T.format is ss.BatchedCSR
        got = batched64(T=T, D=X, x=x)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-12, err_msg=type(value).__name__)
    # and a torch batched CSR into CSF and COO
    np.testing.assert_array_equal(ss.convert(t, ss.CSF.with_order(2, 1, 0)).toarray(), D)
    np.testing.assert_array_equal(ss.convert(t, ss.COO).toarray(), D)


def _bad_batched(crow, col, vals, shape):
    return torch.sparse_csr_tensor(torch.tensor(crow), torch.tensor(col), torch.tensor(vals, dtype=torch.float64),
                                   size=shape, check_invariants=False)


def test_batched_errors_name_the_argument(rng):
    X, x = np.ones((2, 4, 2)), np.ones((2, 4))

    def call(T, prog=batched64, **kw):
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', errors.CopyWarning)  # (torch's int64 indices where int32 are annotated)
            return prog(T=T, D=kw.get('D', X), x=kw.get('x', x))

    # 2 batches of 3 x 4 matrices, 2 entries each
    crow, col = [[0, 1, 2, 2], [0, 0, 2, 2]], [[1, 3], [0, 2]]
    call(_bad_batched(crow, col, [[1., 2.], [3., 4.]], (2, 3, 4)))  # (a valid one)
    with pytest.raises(errors.ShapeError, match=r'T: Tensor of shape \(3, 4\) is a matrix \(rank 2\); the program '
                       'expects a rank-3 tensor'):
        call(torch.eye(3, 4, dtype=torch.float64).to_sparse_csr())
    with pytest.raises(errors.ShapeError, match=r'T: a torch CSR tensor of 4 dimensions \(2 batch dimensions\); of '
                       r"torch's batched layouts CSR with one batch dimension is taken \(ss.BatchedCSR\)"):
        call(_bad_batched([crow, crow], [col, col], [[[1., 2.], [3., 4.]]] * 2, (2, 2, 3, 4)))
    with pytest.raises(errors.ShapeError, match=r'T: values have shape \(2, 2, 3\): hybrid tensors'):
        call(_bad_batched(crow, col, [[[1.] * 3] * 2] * 2, (2, 3, 4, 3)))  # a batch and a dense dimension
    with pytest.raises(errors.ShapeError, match=r'T: a torch CSC tensor of 3 dimensions \(1 batch dimension\)'):
        call(torch.sparse_csc_tensor(torch.tensor([[0, 1, 1, 2, 2]] * 2), torch.tensor([[0, 2]] * 2),
                                     torch.ones(2, 2, dtype=torch.float64), size=(2, 3, 4), check_invariants=False))
    with pytest.raises(errors.UnsortedIndicesError, match=r'T: crd2 \(indices\) is not sorted within its segment at '
                       r'position 3 \(2 then 0\)'):
        call(_bad_batched(crow, [[1, 3], [2, 0]], [[1., 2.], [3., 4.]], (2, 3, 4)))
    with pytest.raises(errors.InvalidIndexError, match=r'T: crd2\[1\] = 4 is out of range for a dimension of size 4'):
        call(_bad_batched(crow, [[1, 4], [0, 2]], [[1., 2.], [3., 4.]], (2, 3, 4)))
    with pytest.raises(errors.IndptrError, match=r'T: crow_indices\[1, 0\] = 1, expected 0'):
        call(_bad_batched([[0, 1, 2, 2], [1, 1, 2, 2]], col, [[1., 2.], [3., 4.]], (2, 3, 4)))
    with pytest.raises(errors.IndptrError, match=r'T: crow_indices\[0, 3\] = 1 is not the number of entries'):
        call(_bad_batched([[0, 1, 1, 1], [0, 0, 2, 2]], col, [[1., 2.], [3., 4.]], (2, 3, 4)))
    with pytest.raises(errors.IndptrError, match=r'T: pos2 \(indptr\) decreases'):
        call(_bad_batched([[0, 2, 1, 2], [0, 0, 2, 2]], col, [[1., 2.], [3., 4.]], (2, 3, 4)))
    with pytest.raises(errors.DTypeError, match='T: values are float64, the program expects float32'):
        call(_bad_batched(crow, col, [[1., 2.], [3., 4.]], (2, 3, 4)), batched32,
             D=X.astype(np.float32), x=x.astype(np.float32))
    D = random_tensor(rng, (2, 3, 4))
    for value in [sp.coo_array(D), torch.from_numpy(D).to_sparse(), ss.convert(D, ss.CSF)] + \
            ([pydata_sparse.COO.from_numpy(D)] if pydata_sparse is not None else []):
        with pytest.raises(errors.FormatMismatchError, match=r'T: the program expects BatchedCSR but got (COO3|CSF3) '
                           r'.*ss.convert\(T, ss.BatchedCSR\)'):
            call(value)


def test_views_of_the_new_formats(rng):
    D = random_tensor(rng, (4, 5, 6), 0.3)
    v, X = rng.standard_normal(4), rng.standard_normal((4, 6, 2))
    contracted, moved, sliced = views_of_orders(T=ss.convert(D, ss.CSF.with_order(2, 0, 1)), v=v)
    np.testing.assert_allclose(contracted, np.einsum('jik,i->jk', D.transpose(1, 0, 2), v), rtol=1e-12)
    np.testing.assert_array_equal(dense(moved), D.transpose(2, 0, 1))
    np.testing.assert_array_equal(dense(sliced), D[1:3])
    product, transposed, batch = views_of_batches(T=ss.convert(D, ss.BatchedCSR), X=X)
    np.testing.assert_allclose(product, D @ X, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(dense(transposed), D.transpose(0, 2, 1))
    np.testing.assert_array_equal(dense(batch), D[1])


# ---------------------------------------------------------------------- two OpenMP threads
SCRIPT = textwrap.dedent('''
    import sys
    sys.path[:0] = [{tests!r}, {here!r}]
    import numpy as np, scipy.sparse as sp
    import sdfgsparse as ss
    import test_tensor_orders as t

    rng = np.random.default_rng(5)
    for order in t.ORDERS:
        vt, it = t.DTYPES[order]
        for rep in range(3):
            D = t.random_tensor(rng, (60, 40, 50), 0.05, vt.type)
            D[7] = rng.standard_normal(D.shape[1:])  # a long slice
            T = ss.convert(sp.coo_array(D), ss.CSF[vt, t.I, t.J, t.K, it, order])
            Bm, C = rng.standard_normal((40, 8)).astype(vt.type), rng.standard_normal((50, 8)).astype(vt.type)
            v = rng.standard_normal(50).astype(vt.type)
            for g, want in zip(t.PROGRAMS[order](T=T, Bm=Bm, C=C, v=v), t._order_reference(D, Bm, C, v)):
                np.testing.assert_allclose(t.dense(g).reshape(want.shape), want, **t._tol(D.dtype))
        print(''.join(map(str, order)), 'ok', flush=True)
    D = t.random_tensor(rng, (8, 60, 50), 0.05)
    X, x = rng.standard_normal((8, 50, 4)), rng.standard_normal((8, 50))
    for g, want in zip(t.batched64(T=ss.convert(D, ss.BatchedCSR), D=X, x=x), t._batched_reference(D, X, x)):
        np.testing.assert_allclose(t.dense(g).reshape(want.shape), want, rtol=1e-12, atol=1e-12)
    print('batched ok', flush=True)
''')


def test_two_openmp_threads():
    here = os.path.dirname(os.path.abspath(__file__))
    script = SCRIPT.format(tests=os.path.dirname(here), here=here)
    env = dict(os.environ, OMP_NUM_THREADS='2')
    out = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, env=env, timeout=1200,
                         cwd=os.getcwd())
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    assert out.stdout.split() == [w for o in ORDERS for w in (''.join(map(str, o)), 'ok')] + ['batched', 'ok']
