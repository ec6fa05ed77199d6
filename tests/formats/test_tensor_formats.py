"""Tensor formats beyond ``COO<n>`` / ``CSF<n>``: CSF in any mode order (``ss.CSF.with_order(2,
0, 1)``, format ``CSF3_201``: level k stores dimension order[k]) and ``ss.BatchedCSR`` (dense
batch, dense rows, compressed columns; global positions). Exact storage arrays of small
examples for every order of rank 3, a rank-4 order and BatchedCSR (TACO's
``test/tests-format.cpp`` style), their loop nests' coordinates, the format names' round trip
(the registry's families, an SDFG's JSON), the host conversions (``level_storage`` against the
matrix formats' own), torch's batched CSR arrays, and the annotation errors."""
import itertools

import dace
import numpy as np
import pytest
import scipy.sparse as sp
import sympy

import sdfgsparse as ss
from sdfgsparse import errors
from sdfgsparse.formats import get_format, sparse_type_of
from sdfgsparse.formats.catalogue import csf_of_order, csf_of_rank
from sdfgsparse.formats.levels import member
from sdfgsparse.runtime.container import SparseTensor
from sdfgsparse.runtime.convert import storage_to_coo, to_storage
from sdfgsparse.runtime.marshal import validate_storage, _sizes
from sdfgsparse.runtime.tensors import batched_csr_members, batched_csr_parts, csf_storage, level_storage

I, J, K, L = (dace.symbol(s) for s in 'IJKL')

# A 3 x 2 x 4 tensor: slice i = 1 empty, fibers (i, j) of one and two entries. Its entries in
# an order no level sorts (F = 6 stored as 2.5 + 3.5: a duplicate, summed).
#      i  j  k  value
EX3 = [(2, 1, 3, 2.5), (0, 1, 3, 3.0), (2, 0, 1, 4.0), (0, 0, 2, 2.0), (2, 1, 3, 3.5), (0, 0, 0, 1.0),
       (2, 1, 1, 5.0)]
SHAPE3 = (3, 2, 4)

#: per mode order: the CSF members of EX3 (levels outermost first; TACO's mode ordering)
EXACT3 = {
    (0, 1, 2): {'crd0': [0, 2], 'pos1': [0, 2, 4], 'crd1': [0, 1, 0, 1], 'pos2': [0, 2, 3, 4, 6],
                'crd2': [0, 2, 3, 1, 1, 3], 'vals': [1, 2, 3, 4, 5, 6]},
    (0, 2, 1): {'crd0': [0, 2], 'pos1': [0, 3, 5], 'crd1': [0, 2, 3, 1, 3], 'pos2': [0, 1, 2, 3, 5, 6],
                'crd2': [0, 0, 1, 0, 1, 1], 'vals': [1, 2, 3, 4, 5, 6]},
    (1, 0, 2): {'crd0': [0, 1], 'pos1': [0, 2, 4], 'crd1': [0, 2, 0, 2], 'pos2': [0, 2, 3, 4, 6],
                'crd2': [0, 2, 1, 3, 1, 3], 'vals': [1, 2, 4, 3, 5, 6]},
    (1, 2, 0): {'crd0': [0, 1], 'pos1': [0, 3, 5], 'crd1': [0, 1, 2, 1, 3], 'pos2': [0, 1, 2, 3, 4, 6],
                'crd2': [0, 2, 0, 2, 0, 2], 'vals': [1, 4, 2, 5, 3, 6]},
    (2, 0, 1): {'crd0': [0, 1, 2, 3], 'pos1': [0, 1, 2, 3, 5], 'crd1': [0, 2, 0, 0, 2], 'pos2': [0, 1, 3, 4, 5, 6],
                'crd2': [0, 0, 1, 0, 1, 1], 'vals': [1, 4, 5, 2, 3, 6]},
    (2, 1, 0): {'crd0': [0, 1, 2, 3], 'pos1': [0, 1, 3, 4, 5], 'crd1': [0, 0, 1, 0, 1], 'pos2': [0, 1, 2, 3, 4, 6],
                'crd2': [0, 2, 2, 0, 0, 2], 'vals': [1, 4, 5, 2, 3, 6]},
}
ORDERS3 = sorted(EXACT3)

#: BatchedCSR of EX3 read as 3 batches of 2 x 4 matrices (batch 1 empty): pos2 has 3 * 2 + 1
#: global positions
EXACT_BATCHED = {'pos2': [0, 2, 3, 3, 3, 4, 6], 'crd2': [0, 2, 3, 1, 1, 3], 'vals': [1, 2, 3, 4, 5, 6]}

# A 2 x 2 x 2 x 3 tensor in mode order (3, 1, 0, 2): levels d, b, a, c.
EX4 = [(0, 1, 0, 2, 1.0), (1, 0, 1, 0, 2.0), (1, 1, 0, 2, 3.0)]
SHAPE4 = (2, 2, 2, 3)
ORDER4 = (3, 1, 0, 2)
EXACT4 = {'crd0': [0, 2], 'pos1': [0, 1, 2], 'crd1': [0, 1], 'pos2': [0, 1, 3], 'crd2': [1, 0, 1],
          'pos3': [0, 1, 2, 3], 'crd3': [1, 0, 0], 'vals': [2, 1, 3]}


def _coo(entries, shape, dtype=np.float64):
    *coords, vals = (np.array(c) for c in zip(*entries))
    return sp.coo_array((vals.astype(dtype), tuple(c.astype(np.int64) for c in coords)), shape=shape)


def _dense(entries, shape):
    D = np.zeros(shape)
    for *c, v in entries:
        D[tuple(c)] += v
    return D


def _name(order):
    return f'CSF{len(order)}' if list(order) == sorted(order) else f'CSF{len(order)}_' + ''.join(map(str, order))


def _check_exact(T, want, name):
    assert set(T.arrays) == set(want), name
    for member_name, arr in want.items():
        np.testing.assert_array_equal(T.arrays[member_name], arr, err_msg=f'{name}.{member_name}')


# ---------------------------------------------------------------------- exact storage
@pytest.mark.parametrize('index_dtype', [np.int32, np.int64])
@pytest.mark.parametrize('order', ORDERS3, ids=lambda o: ''.join(map(str, o)))
def test_exact_storage_of_every_order_of_rank_3(order, index_dtype):
    fmt = ss.CSF.with_order(*order)
    T = ss.convert(_coo(EX3, SHAPE3), fmt, index_dtype=index_dtype)
    assert isinstance(T, SparseTensor) and T.format is fmt and fmt.name == _name(order) and T.shape == SHAPE3
    assert fmt.level_dims == order and (fmt is csf_of_rank(3)) == (order == (0, 1, 2))
    _check_exact(T, EXACT3[order], fmt.name)
    assert all(a.dtype == index_dtype for m, a in T.arrays.items() if m != 'vals')
    np.testing.assert_array_equal(T.toarray(), _dense(EX3, SHAPE3))
    validate_storage(fmt, T.arrays, T.shape, _sizes(fmt, T.arrays, T.shape), 'T')


def test_exact_storage_of_a_rank_4_order():
    fmt = ss.CSF.with_order(ORDER4)
    assert fmt.name == 'CSF4_3102' and fmt.level_dims == ORDER4
    T = ss.convert(_coo(EX4, SHAPE4), fmt)
    _check_exact(T, EXACT4, fmt.name)
    np.testing.assert_array_equal(T.toarray(), _dense(EX4, SHAPE4))


@pytest.mark.parametrize('index_dtype', [np.int32, np.int64])
def test_exact_storage_of_batched_csr(index_dtype):
    T = ss.convert(_coo(EX3, SHAPE3), ss.BatchedCSR, index_dtype=index_dtype)
    assert T.format is ss.BatchedCSR and T.shape == SHAPE3
    _check_exact(T, EXACT_BATCHED, 'BatchedCSR')
    assert T.arrays['pos2'].dtype == T.arrays['crd2'].dtype == index_dtype
    np.testing.assert_array_equal(T.toarray(), _dense(EX3, SHAPE3))
    # a CSR matrix per batch: batch b's rows are rows b * M .. b * M + M - 1 of one CSR matrix
    flat = sp.csr_array((T.arrays['vals'], T.arrays['crd2'], T.arrays['pos2']), shape=(6, 4))
    np.testing.assert_array_equal(flat.toarray().reshape(SHAPE3), _dense(EX3, SHAPE3))


def test_empty_tensors_and_empty_dimensions():
    for fmt in (ss.CSF.with_order(2, 0, 1), ss.BatchedCSR):
        for shape in ((3, 2, 4), (0, 2, 4), (3, 0, 4), (3, 2, 0)):
            T = ss.convert(np.zeros(shape), fmt)
            assert T.nnz == 0 and T.toarray().shape == shape, (fmt, shape)
            validate_storage(fmt, T.arrays, T.shape, _sizes(fmt, T.arrays, T.shape), 'T')
    T = ss.convert(np.zeros((3, 2, 4)), ss.BatchedCSR)
    np.testing.assert_array_equal(T.arrays['pos2'], np.zeros(7))


# ---------------------------------------------------------------------- the formats
def test_levels_extents_and_coordinates_follow_the_order():
    fmt = ss.CSF.with_order(2, 0, 1)
    assert [lvl.kind for lvl in fmt.levels] == ['compressed'] * 3
    assert fmt.extents(3, 2, 4) == [4, 3, 2]
    assert fmt.level_dims == (2, 0, 1) and fmt.outer_dim == 2 and fmt.rank == 3
    st = sparse_type_of(ss.CSF[dace.float64, I, J, K, (2, 0, 1)])
    nest = fmt.loops(st.shape, st.sizes)
    p = [sympy.Symbol(f'p{k}', integer=True, nonnegative=True) for k in range(3)]
    assert nest.coords == (member('crd1', p[1]), member('crd2', p[2]), member('crd0', p[0]))
    shapes = st.member_shapes()
    assert shapes['pos1'] == st.sizes['n0'] + 1 and shapes['pos2'] == st.sizes['n1'] + 1
    # rank 4: the coordinates of dimension d come from level order.index(d)
    nest = ss.CSF.with_order(ORDER4).loops((I, J, K, L), sparse_type_of(ss.CSF[dace.float64, I, J, K, L,
                                                                                ORDER4]).sizes)
    assert [c.func.__name__ for c in nest.coords] == [f'crd{ORDER4.index(d)}' for d in range(4)]


def test_batched_csr_levels_and_members():
    fmt = ss.BatchedCSR
    assert [lvl.kind for lvl in fmt.levels] == ['dense', 'dense', 'compressed']
    assert fmt.level_dims == (0, 1, 2) and fmt.outer_dim == 0 and fmt.member_names == ['pos2', 'crd2', 'vals']
    desc = ss.BatchedCSR[dace.float32, I, J, K, dace.int64]
    st = sparse_type_of(desc)
    assert st.fmt is fmt and st.dtype == dace.float32 and st.index_dtype == dace.int64
    assert desc.members['pos2'].shape[0] == I * J + 1 and desc.members['pos2'].dtype == dace.int64
    assert desc.members['crd2'].shape[0] == desc.members['vals'].shape[0] == st.sizes['n2']
    nest = fmt.loops(st.shape, st.sizes)
    c0, c1 = (sympy.Symbol(f'c{k}', integer=True, nonnegative=True) for k in range(2))
    assert nest.coords[:2] == (c0, c1)
    assert nest.levels[2].begin == member('pos2', c0 * J + c1)  # global positions: batch * M + row


def test_level_dims_of_the_catalogue():
    assert ss.CSR.level_dims == (0, 1) and ss.CSC.level_dims == (1, 0) and ss.DCSR.level_dims == (0, 1)
    assert ss.ELL.level_dims is None and ss.BSR.with_block(2, 2).level_dims is None and ss.DIA.level_dims == (0, 1)
    assert csf_of_rank(3).level_dims == (0, 1, 2)


def test_annotation_spellings_agree():
    a = sparse_type_of(ss.CSF[dace.float64, I, J, K, (2, 0, 1)])
    b = sparse_type_of(ss.CSF.with_order(2, 0, 1)[dace.float64, I, J, K])
    c = ss.CSF.type(dace.float64, I, J, K, order=[2, 0, 1])
    d = sparse_type_of(ss.CSF[dace.float64, I, J, K, dace.int64, (2, 0, 1)])
    assert a.fmt is b.fmt is c.fmt is d.fmt is csf_of_order((2, 0, 1)) is get_format('CSF3_201')
    assert d.index_dtype == dace.int64 and a.name.startswith('ss_CSF3_201_float64_int32')
    assert csf_of_order((0, 1, 2)) is csf_of_rank(3) is ss.CSF.with_order(0, 1, 2)
    assert ss.CSF.with_order(0) is csf_of_rank(1)
    assert repr(ss.CSF.with_order(2, 0, 1)) == 'ss.CSF.with_order(2, 0, 1)'


@pytest.mark.parametrize('order', list(itertools.permutations(range(3))) + [ORDER4, (1, 0)],
                         ids=lambda o: ''.join(map(str, o)))
def test_names_round_trip(order):
    fmt = csf_of_order(order)
    assert get_format(fmt.name) is fmt and fmt.name == _name(order)
    dims = (I, J, K, L)[:len(order)]
    sdfg = dace.SDFG('orders_json')
    sdfg.add_datadesc('T', ss.CSF[(dace.float32, *dims, dace.int64, order)])
    sdfg.add_datadesc('B', ss.BatchedCSR[dace.float64, I, J, K])
    again = dace.SDFG.from_json(sdfg.to_json())
    st = sparse_type_of(again.arrays['T'])
    assert st.fmt is fmt and st.shape == dims and st.dtype == dace.float32 and st.index_dtype == dace.int64
    assert sparse_type_of(again.arrays['B']).fmt is ss.BatchedCSR


def test_a_name_never_made_is_made_by_its_family():
    # (an order no other test makes: the family of CSF<n>_<order> names makes it on lookup)
    fmt = get_format('CSF5_42031')
    assert fmt.order == (4, 2, 0, 3, 1) and fmt.level_dims == (4, 2, 0, 3, 1) and fmt is csf_of_order((4, 2, 0, 3, 1))
    wide = csf_of_order(tuple(range(11))[::-1])
    assert wide.name == 'CSF11_10x9x8x7x6x5x4x3x2x1x0' and get_format(wide.name) is wide
    assert csf_of_order(range(11)) is csf_of_rank(11)


@pytest.mark.parametrize('name', ['CSF3_012', 'CSF3_211', 'CSF4_201', 'CSF3_2x0x1', 'CSF3_301'])
def test_names_that_are_no_format(name):
    with pytest.raises(KeyError, match=f'unknown sparse format {name!r}'):
        get_format(name)


def test_bad_orders_and_ranks():
    with pytest.raises(errors.ArgumentError, match=r'mode order \(0, 2, 2\) is not a permutation of the dimensions'):
        ss.CSF.with_order(0, 2, 2)
    with pytest.raises(errors.ArgumentError, match=r'mode order \(1, 2, 3\) is not a permutation'):
        ss.CSF[dace.float64, I, J, K, (1, 2, 3)]
    with pytest.raises(errors.ArgumentError, match='must be a tuple of dimensions'):
        ss.CSF.with_order('a', 'b')
    with pytest.raises(errors.ArgumentError, match='must be a tuple of dimensions'):
        ss.CSF.with_order(True, False)
    with pytest.raises(errors.ArgumentError, match=r'must be a tuple of dimensions \(integers\), got \(\)'):
        ss.CSF.with_order()
    with pytest.raises(errors.ShapeError, match=r'the mode order \(1, 0\) has 2 dimensions, the annotation 3'):
        ss.CSF[dace.float64, I, J, K, (1, 0)]
    with pytest.raises(errors.ArgumentError, match='two mode orders'):
        ss.CSF.type(dace.float64, I, J, K, (2, 0, 1), order=(1, 0, 2))
    with pytest.raises(errors.ShapeError, match=r'ss.CSF.with_order\(2, 0, 1\) stores tensors of 3 dimensions, not 4'):
        ss.CSF.with_order(2, 0, 1)[dace.float64, I, J, K, L]
    with pytest.raises(errors.ShapeError, match='ss.BatchedCSR stores tensors of 3 dimensions, not 2'):
        ss.BatchedCSR[dace.float64, I, J]
    with pytest.raises(errors.ShapeError, match='A is a rank-4 tensor: ss.CSF.with_order'):
        ss.convert(np.ones((2, 2, 2, 2)), ss.CSF.with_order(1, 0, 2))
    with pytest.raises(errors.ShapeError, match=r'A is a matrix \(rank 2\): ss.BatchedCSR stores tensors of 3'):
        ss.convert(sp.eye(3, format='csr'), ss.BatchedCSR)


# ---------------------------------------------------------------------- host conversions
@pytest.mark.parametrize('fmt', ['CSR', 'CSC', 'DCSR'])
def test_level_storage_agrees_with_the_matrix_formats(fmt, rng):
    A = sp.random_array((9, 7), density=0.25, format='coo', rng=rng)
    A = sp.coo_array((np.concatenate([A.data, A.data[:3]]), (np.concatenate([A.row, A.row[:3]]),
                                                                np.concatenate([A.col, A.col[:3]]))), shape=A.shape)
    want, _ = to_storage(A, getattr(ss, fmt))
    got = level_storage(getattr(ss, fmt), (A.row, A.col), A.data, A.shape, np.int32)
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], err_msg=f'{fmt}.{name}')


def test_a_matrix_in_column_order(rng):
    A = sp.random_array((9, 7), density=0.2, format='csr', rng=rng)
    A = sp.csr_array(A.toarray() * (np.arange(7) != 3))  # column 3 empty
    T = ss.convert(A, ss.CSF.with_order(1, 0))  # doubly compressed columns
    assert T.format.name == 'CSF2_10' and T.shape == (9, 7)
    want, _ = to_storage(A.T, ss.DCSR)  # the same arrays as DCSR of the transpose
    for name in want:
        np.testing.assert_array_equal(T.arrays[name], want[name], err_msg=name)
    np.testing.assert_array_equal(T.toarray(), A.toarray())


def test_formats_made_from_threads():
    from sparse_zoo import from_threads
    made = [None] * 8
    from_threads(lambda t: made.__setitem__(t, get_format('CSF6_504132')))
    assert all(f is made[0] for f in made) and made[0] is csf_of_order((5, 0, 4, 1, 3, 2))


def test_level_storage_refuses_formats_it_cannot_store():
    with pytest.raises(errors.FormatMismatchError, match='no conversion of a coordinate list into ELL'):
        level_storage(ss.ELL, (np.zeros(1, np.int64), np.zeros(1, np.int64)), np.ones(1), (2, 2), np.int32)
    with pytest.raises(errors.InvalidIndexError, match='coordinate 5 of dimension 1 is out of range for its size 2'):
        level_storage(ss.BatchedCSR, [np.zeros(1, np.int64), np.array([5]), np.zeros(1, np.int64)], np.ones(1),
                      (1, 2, 2), np.int32)
    with pytest.raises(errors.IndexOverflowError, match='crd2 holds 200, which does not fit int8'):
        level_storage(ss.BatchedCSR, [np.zeros(1, np.int64)] * 2 + [np.array([200])], np.ones(1), (1, 1, 201),
                      np.int8)


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('order', ORDERS3 + [(1, 3, 0, 2)], ids=lambda o: ''.join(map(str, o)))
def test_convert_random_tensors_every_order(order, dtype, rng):
    shape = (7, 5, 6, 4)[:len(order)]
    D = np.where(rng.random(shape) < 0.15, rng.standard_normal(shape), 0).astype(dtype)
    D[2] = 0  # an empty slice of the first dimension
    D[..., 1] = 0  # and of the last
    for value in (D, sp.coo_array(D)):
        T = ss.convert(value, ss.CSF.with_order(*order))
        assert T.dtype == dtype and T.nnz == np.count_nonzero(D)
        np.testing.assert_array_equal(T.toarray(), D)
        *coords, vals = storage_to_coo(T.format, T.arrays, T.shape)
        np.testing.assert_array_equal(D[tuple(coords)], vals)
    # CSF of one order into another and into BatchedCSR, through the coordinates
    other = ss.convert(T, ss.CSF.with_order(*order[::-1]))
    np.testing.assert_array_equal(other.toarray(), D)
    if len(shape) == 3:
        np.testing.assert_array_equal(ss.convert(T, ss.BatchedCSR).toarray(), D)


def test_csf_storage_is_level_storage_of_csf():
    got = csf_storage([np.array(c) for c in zip(*EX3)][:3], np.array([e[3] for e in EX3]), np.int32)
    for name, want in EXACT3[(0, 1, 2)].items():
        np.testing.assert_array_equal(got[name], want)


# ---------------------------------------------------------------------- torch's batched CSR
@pytest.mark.parametrize('index_dtype', [np.int32, np.int64])
def test_batched_csr_members_and_parts(index_dtype):
    # 3 batches of 2 x 4 matrices, 2 entries each (torch's batched CSR needs one count)
    crow = np.array([[0, 2, 2], [0, 0, 2], [0, 1, 2]], dtype=index_dtype)
    col = np.array([[1, 3], [0, 2], [3, 0]], dtype=index_dtype)
    values = np.array([[1., 2.], [3., 4.], [5., 6.]])
    m = batched_csr_members(crow, col, values)
    np.testing.assert_array_equal(m['pos2'], [0, 2, 2, 2, 4, 5, 6])
    assert m['pos2'].dtype == index_dtype
    assert np.shares_memory(m['crd2'], col) and np.shares_memory(m['vals'], values)  # zero-copy
    back = batched_csr_parts(m, (3, 2, 4))
    for got, want in zip(back, (crow, col, values)):
        np.testing.assert_array_equal(got, want)
    assert np.shares_memory(back[1], col)
    # batches of different counts have no torch batched CSR
    T = ss.convert(_coo(EX3, SHAPE3), ss.BatchedCSR)
    assert batched_csr_parts(T.arrays, T.shape) is None
    assert batched_csr_parts(ss.convert(np.zeros((2, 0, 3)), ss.BatchedCSR).arrays, (2, 0, 3))[0].shape == (2, 1)


def test_batched_csr_members_errors():
    col, values = np.zeros((2, 1), np.int64), np.ones((2, 1))
    with pytest.raises(errors.IndptrError, match=r'crow_indices\[1, 0\] = 1, expected 0'):
        batched_csr_members(np.array([[0, 1], [1, 1]]), col, values)
    with pytest.raises(errors.IndptrError, match=r'crow_indices\[0, 1\] = 0 is not the number of entries of each '
                       r'batch \(1, col_indices.shape\[1\]\)'):
        batched_csr_members(np.array([[0, 0], [0, 1]]), col, values)
    with pytest.raises(errors.ShapeError, match='expected \\(B, M \\+ 1\\), \\(B, nnz\\) and \\(B, nnz\\)'):
        batched_csr_members(np.array([[0, 1], [0, 1]]), col, np.ones((2, 2)))
    with pytest.raises(errors.ShapeError, match='of 2 dimensions'):
        batched_csr_members(np.array([0, 1]), col, values)
    # positions that overflow the index dtype of crow come out as int64
    m = batched_csr_members(np.array([[0, 1]] * 3, np.int8), np.zeros((3, 1), np.int8), np.ones((3, 1)))
    assert m['pos2'].dtype == np.int8
    big = np.zeros((200, 1), np.int8)
    m = batched_csr_members(np.array([[0, 1]] * 200, np.int8), big, np.ones((200, 1)))
    assert m['pos2'].dtype == np.int64 and m['pos2'][-1] == 200
