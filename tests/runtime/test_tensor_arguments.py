"""Sparse tensors of any rank as arguments and in ``ss.convert``: pydata/sparse, scipy's N-D
``coo_array``, torch sparse COO tensors and ``SparseMatrix`` of rank n are coordinate lists
(``COO<n>``) or CSF storage, checked before any compilation with typed errors naming the
argument; ``ss.convert`` stores them in ``CSF<n>`` / ``COO<n>`` (compared with dense NumPy)."""
import warnings

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse import errors
from sdfgsparse.formats import sparse_type_of
from sdfgsparse.formats.catalogue import coo_of_rank, csf_of_rank
from sdfgsparse.runtime import slots
from sdfgsparse.runtime.arguments import marshal_arguments
from sdfgsparse.runtime.convert import slot_coordinates
from sdfgsparse.runtime.fastcheck import StorageCheck
from sdfgsparse.runtime.marshal import check_value, format_of_value, is_sparse_value, marshal_sparse
from sdfgsparse.runtime.tensors import csf_storage

torch = pytest.importorskip('torch')
try:
    import sparse as pydata_sparse  # optional: CI has no pydata/sparse (its parameters skip there)
except ImportError:
    pydata_sparse = None

I, J, K, L = (dace.symbol(s) for s in 'IJKL')
M, N = dace.symbol('M'), dace.symbol('N')
DIMS = (I, J, K, L)


@dace.program
def tensor_nnz(T: ss.COO[dace.float64, I, J, K, dace.int64]):
    return T.nnz


@dace.program
def csf_nnz(T: ss.CSF[dace.float64, I, J, K, dace.int64]):
    return T.nnz


@dace.program
def matrix_nnz(A: ss.COO[dace.float64, M, N, dace.int64]):
    return A.nnz


# ---------------------------------------------------------------------- values
def _entries(rng, shape, nnz, duplicates=False):
    """(coords (ndim, nnz) int64 in random order, vals, the dense tensor with duplicates
    summed); distinct coordinates unless ``duplicates`` (then the first entries repeat)."""
    size = int(np.prod(shape))
    flat = rng.choice(size, size=min(nnz, size), replace=False) if size else np.zeros(0, np.int64)
    if duplicates and flat.size:
        flat = np.concatenate([flat, flat[:max(1, flat.size // 3)]])
        rng.shuffle(flat)
    coords = np.array(np.unravel_index(flat, shape), dtype=np.int64).reshape(len(shape), -1)
    vals = rng.standard_normal(coords.shape[1])
    dense = np.zeros(shape)
    np.add.at(dense, tuple(coords), vals)
    return coords, vals, dense


def _pydata(coords, vals, shape):
    """A pydata COO of these entries (pydata may sort them, in a copy: :func:`_coords_of`
    gives the arrays it keeps)."""
    if pydata_sparse is None:
        pytest.skip('pydata/sparse is not installed')
    return pydata_sparse.COO(coords, vals, shape=shape, has_duplicates=False, sorted=False)


def _coords_of(value):
    """The coordinate arrays ``value`` keeps (its own memory: edits reach it)."""
    if isinstance(value, sp.coo_array):
        return value.coords
    if isinstance(value, ss.SparseMatrix):
        return [value.arrays[f'crd{k}'] for k in range(value.ndim)]
    if isinstance(value, torch.Tensor):
        return value._indices().numpy()
    return value.coords


def _value(lib, coords, vals, shape):
    """The entries as a value of ``lib`` (duplicates kept as stored)."""
    if lib == 'pydata':
        return _pydata(coords, vals, shape)
    if lib == 'scipy':
        return sp.coo_array((vals, tuple(coords)), shape=shape)
    if lib == 'torch':
        return torch.sparse_coo_tensor(torch.from_numpy(coords), torch.from_numpy(vals), size=shape,
                                       check_invariants=False)
    arrays = {f'crd{k}': c for k, c in enumerate(coords)}
    arrays['vals'] = vals
    return ss.SparseMatrix(coo_of_rank(len(shape)), arrays, shape)


def _type(rank, index=dace.int64, fmt=ss.COO, dtype=dace.float64):
    return sparse_type_of(fmt[(dtype, *DIMS[:rank], index)])


LIBS = ['pydata', 'scipy', 'torch', 'matrix']
#: The libraries of this machine
HERE = [lib for lib in LIBS if lib != 'pydata' or pydata_sparse is not None]
SHAPES = [(7, ), (3, 4, 5), (2, 3, 4, 5), (3, 0, 2)]


# ---------------------------------------------------------------------- marshalling
@pytest.mark.parametrize('lib', LIBS)
@pytest.mark.parametrize('shape', SHAPES, ids=lambda s: 'x'.join(map(str, s)))
def test_marshal_each_library(rng, lib, shape):
    coords, vals, _ = _entries(rng, shape, 6)
    value = _value(lib, coords, vals, shape)
    st = _type(len(shape))
    assert is_sparse_value(value) and format_of_value(value) is coo_of_rank(len(shape))
    arg = marshal_sparse('T', value, st)
    assert arg.shape == shape and arg.type.fmt.name == f'COO{len(shape)}'
    assert set(arg.arrays) == {f'crd{k}' for k in range(len(shape))} | {'vals'}
    assert all(arg.arrays[f'crd{k}'].dtype == np.int64 for k in range(len(shape)))
    got = np.array([arg.arrays[f'crd{k}'] for k in range(len(shape))]).reshape(len(shape), -1)
    np.testing.assert_array_equal(got, np.array(_coords_of(value)).reshape(len(shape), -1))  # the value's own
    order, want = np.lexsort(got[::-1]), np.lexsort(coords[::-1])  # the entries given
    np.testing.assert_array_equal(got[:, order], coords[:, want])
    np.testing.assert_array_equal(arg.arrays['vals'][order], vals[want])
    n = coords.shape[1]
    assert arg.sizes == {'n0': n}
    want = {str(d): s for d, s in zip(DIMS, shape)}
    want[str(st.sizes['n0'])] = n
    assert arg.symbol_values() == want
    # the struct carries the dimensions as its dim<d> members
    obj = arg.make_struct(st.structure())
    assert [getattr(obj, f'dim{d}') for d in range(len(shape))] == list(shape)


@pytest.mark.parametrize('lib', ['pydata', 'scipy', 'torch'])
def test_zero_copy_where_the_index_dtype_matches(rng, lib):
    coords, vals, _ = _entries(rng, (3, 4, 5), 8)
    order = np.lexsort(coords[::-1])  # (sorted already: pydata keeps the C-ordered coords given)
    coords, vals = np.ascontiguousarray(coords[:, order]), vals[order]
    value = _value(lib, coords, vals, (3, 4, 5))
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        arg = marshal_sparse('T', value, _type(3, dace.int64))
    for k in range(3):
        assert np.shares_memory(arg.arrays[f'crd{k}'], coords)
        assert arg.arrays[f'crd{k}'].flags.c_contiguous
    assert np.shares_memory(arg.arrays['vals'], vals)


@pytest.mark.parametrize('lib', ['pydata', 'torch', 'matrix'])
def test_int32_annotation_copies_with_a_warning(rng, lib):
    coords, vals, _ = _entries(rng, (3, 4, 5), 8)
    value = _value(lib, coords, vals, (3, 4, 5))
    with pytest.warns(errors.CopyWarning, match='T: index arrays are int64, the program uses int32'):
        arg = marshal_sparse('T', value, _type(3, dace.int32))
    for k, c in enumerate(_coords_of(value)):
        assert arg.arrays[f'crd{k}'].dtype == np.int32
        np.testing.assert_array_equal(arg.arrays[f'crd{k}'], c)


def test_unannotated_takes_the_values_own_types(rng):
    coords, vals, _ = _entries(rng, (2, 3, 4, 5), 5)
    arg = marshal_sparse('T', _value('torch', coords, vals, (2, 3, 4, 5)), None)
    st = arg.type
    assert st.fmt.name == 'COO4' and st.index_dtype == dace.int64 and st.dtype == dace.float64
    assert arg.symbol_values() == {'T_dim0': 2, 'T_dim1': 3, 'T_dim2': 4, 'T_dim3': 5, 'T_n0': 5}


def test_constant_dimensions_are_checked(rng):
    coords, vals, _ = _entries(rng, (3, 4, 6), 5)
    st = sparse_type_of(ss.COO[dace.float64, 3, J, 5, dace.int64])
    assert st.dim_keys == ('dim0', 'dim1', 'dim2') and 'dim0' not in st.structure().members
    with pytest.raises(errors.ShapeError, match=r'T: has shape \(3, 4, 6\): dimension 2 is 6, the program expects 5'):
        marshal_sparse('T', _value('scipy', coords, vals, (3, 4, 6)), st)
    coords, vals, _ = _entries(rng, (3, 4, 5), 5)
    arg = marshal_sparse('T', _value('scipy', coords, vals, (3, 4, 5)), st)
    assert arg.symbol_values() == {'J': 4, str(st.sizes['n0']): 5}
    assert arg.make_struct(st.structure()).dim1 == 4


def test_one_symbol_for_two_dimensions(rng):
    coords, vals, _ = _entries(rng, (3, 4, 5), 5)
    st = sparse_type_of(ss.COO[dace.float64, I, I, K, dace.int64])
    with pytest.raises(errors.ShapeError, match=r'T: its dim0 \(3\) and dim1 \(4\) differ'):
        marshal_sparse('T', _value('pydata', coords, vals, (3, 4, 5)), st).symbol_values()


def test_torch_uncoalesced_keeps_its_duplicates(rng):
    coords, vals, dense = _entries(rng, (3, 4, 5), 6, duplicates=True)
    t = _value('torch', coords, vals, (3, 4, 5))
    assert not t.is_coalesced()
    arg = marshal_sparse('T', t, _type(3))
    assert arg.sizes == {'n0': coords.shape[1]}
    np.testing.assert_array_equal(arg.arrays['crd0'], coords[0])
    np.testing.assert_allclose(ss.convert(t, ss.CSF).toarray(), dense)


def test_pydata_gcxs_and_matrix(rng):
    sparse = pydata_sparse or pytest.skip('pydata/sparse is not installed')
    coords, vals, dense = _entries(rng, (3, 4, 5), 9)
    g = sparse.GCXS.from_coo(_pydata(coords, vals, (3, 4, 5)))
    arg = marshal_sparse('T', g, _type(3))
    assert arg.type.fmt.name == 'COO3'
    got = np.zeros((3, 4, 5))
    np.add.at(got, tuple(arg.arrays[f'crd{k}'] for k in range(3)), arg.arrays['vals'])
    np.testing.assert_allclose(got, dense)
    # a 2-D pydata COO is the matrix format COO
    coords, vals, dense = _entries(rng, (4, 6), 7)
    P = _pydata(coords, vals, (4, 6))
    assert format_of_value(P) is ss.COO
    arg = marshal_sparse('A', P, sparse_type_of(ss.COO[dace.float64, M, N, dace.int64]))
    assert arg.shape == (4, 6) and arg.symbol_values()['M'] == 4
    np.testing.assert_allclose(ss.convert(P, ss.CSR).toarray(), dense)


def test_csf_argument(rng):
    coords, vals, dense = _entries(rng, (3, 4, 5), 10)
    T = ss.convert(_value('scipy', coords, vals, (3, 4, 5)), ss.CSF, index_dtype=np.int64)
    st = _type(3, fmt=ss.CSF)
    arg = marshal_sparse('T', T, st)
    n = {k: T.arrays[f'crd{k}'].size for k in range(3)}
    assert arg.sizes == {'n0': n[0], 'n1': n[1], 'n2': n[2]}
    assert arg.symbol_values() == {'I': 3, 'J': 4, 'K': 5, **{str(st.sizes[f'n{k}']): n[k] for k in range(3)}}
    assert all(arg.arrays[m] is T.arrays[m] for m in T.arrays)  # zero-copy


# ---------------------------------------------------------------------- errors
def test_matrix_where_a_tensor_is_annotated_and_the_reverse(rng):
    A = sp.random_array((4, 5), density=0.5, format='coo', rng=rng)
    with pytest.raises(errors.ShapeError, match=r'T: coo_array of shape \(4, 5\) is a matrix \(rank 2\); the '
                       r'program expects a rank-3 tensor'):
        marshal_sparse('T', A, _type(3))
    coords, vals, _ = _entries(rng, (3, 4, 5), 5)
    for lib in HERE:
        with pytest.raises(errors.ShapeError, match=r'A: \w+ of shape \(3, 4, 5\) is a rank-3 tensor; the program '
                           r'expects a matrix \(rank 2\)'):
            marshal_sparse('A', _value(lib, coords, vals, (3, 4, 5)), sparse_type_of(ss.CSR[dace.float64, M, N]))
    with pytest.raises(errors.ShapeError, match='a rank-4 tensor; the program expects a rank-3 tensor'):
        marshal_sparse('T', _value('torch', *_entries(rng, (2, 3, 4, 5), 3)[:2], (2, 3, 4, 5)), _type(3))


def test_coo_where_csf_is_annotated(rng):
    coords, vals, _ = _entries(rng, (3, 4, 5), 5)
    for lib in HERE:
        with pytest.raises(errors.FormatMismatchError, match=r'T: the program expects CSF3 but got COO3 .*'
                           r'convert explicitly with ss.convert\(T, ss.CSF\)'):
            marshal_sparse('T', _value(lib, coords, vals, (3, 4, 5)), _type(3, fmt=ss.CSF))


@pytest.mark.parametrize('lib', LIBS)
def test_coordinates_out_of_range_or_negative(lib):
    coords = np.array([[0, 1, 2, 1], [1, 3, 0, 2], [4, 0, 3, 1]], dtype=np.int64)
    value = _value(lib, coords.copy(), np.ones(4), (3, 4, 5))
    marshal_sparse('T', value, _type(3))
    _coords_of(value)[2][2] = 9  # (after construction: no library checks it then)
    with pytest.raises(errors.InvalidIndexError, match=r'T: crd2\[2\] = 9 is out of range for a dimension of '
                       r'size 5'):
        marshal_sparse('T', value, _type(3))
    _coords_of(value)[2][2] = 3
    _coords_of(value)[1][3] = -1
    with pytest.raises(errors.InvalidIndexError, match=r'T: crd1\[3\] = -1 is negative'):
        marshal_sparse('T', value, _type(3, dace.int64))
    with pytest.warns(errors.CopyWarning), \
            pytest.raises(errors.InvalidIndexError, match=r'T: crd1\[3\] = -1 is negative'):  # while narrowing
        marshal_sparse('T', value, _type(3, dace.int32))


def _csf3(crd0, pos1, crd1, pos2, crd2, shape=(3, 4, 5)):
    arrays = {'crd0': crd0, 'pos1': pos1, 'crd1': crd1, 'pos2': pos2, 'crd2': crd2}
    arrays = {k: np.asarray(v, dtype=np.int64) for k, v in arrays.items()}
    arrays['vals'] = np.arange(len(crd2), dtype=np.float64)
    return ss.SparseTensor(csf_of_rank(3), arrays, shape)


def test_csf_storage_checks():
    st = _type(3, fmt=ss.CSF)
    good = _csf3([0, 2], [0, 2, 3], [1, 3, 0], [0, 2, 3, 5], [0, 4, 1, 2, 3])
    marshal_sparse('T', good, st)
    with pytest.raises(errors.UnsortedIndicesError, match=r'T: crd2 \(indices\) is not sorted within its segment '
                       r'at position 2 \(4 then 1\)'):
        marshal_sparse('T', _csf3([0, 2], [0, 2, 3], [1, 3, 0], [0, 3, 4, 5], [0, 4, 1, 2, 3]), st)
    with pytest.raises(errors.DuplicateIndicesError, match=r'T: crd1 \(indices\) stores coordinate 1 twice'):
        marshal_sparse('T', _csf3([0, 2], [0, 2, 3], [1, 1, 0], [0, 2, 3, 5], [0, 4, 1, 2, 3]), st)
    with pytest.raises(errors.UnsortedIndicesError, match=r'T: crd0 .* not sorted'):
        marshal_sparse('T', _csf3([2, 0], [0, 2, 3], [1, 3, 0], [0, 2, 3, 5], [0, 4, 1, 2, 3]), st)
    with pytest.raises(errors.IndptrError, match=r'T: pos2\[-1\] .* is not the number of stored entries \(5\)'):
        marshal_sparse('T', _csf3([0, 2], [0, 2, 3], [1, 3, 0], [0, 2, 3, 4], [0, 4, 1, 2, 3]), st)
    with pytest.raises(errors.InvalidIndexError, match=r'T: crd1\[1\] = 4 is out of range'):
        marshal_sparse('T', _csf3([0, 2], [0, 2, 3], [1, 4, 0], [0, 2, 3, 5], [0, 4, 1, 2, 3]), st)


def test_value_dtype(rng):
    coords, vals, _ = _entries(rng, (3, 4, 5), 5)
    with pytest.raises(errors.DTypeError, match=r'T: values are float32, the program expects float64; '
                       r'pass T.astype\(np.float64\)'):
        marshal_sparse('T', _value('scipy', coords, vals.astype(np.float32), (3, 4, 5)), _type(3))
    with pytest.raises(errors.DTypeError, match='T: value dtype complex128 is not supported'):
        marshal_sparse('T', _value('torch', coords, vals.astype(np.complex128), (3, 4, 5)), None)


@pytest.mark.parametrize('garbage', ['T', None, [[0, 1], [1, 2]], np.ones((3, 4, 5))], ids=lambda g: type(g).__name__)
def test_garbage_where_a_tensor_belongs(garbage):
    desc = ss.COO[dace.float64, I, J, K]
    with pytest.raises(errors.FormatMismatchError, match=r'T: the program expects a sparse tensor \(ss.COO3'):
        marshal_arguments({'T': garbage}, {'T': desc})
    with pytest.raises(errors.ArgumentError, match='T: expected a sparse matrix or tensor'):
        check_value('T', garbage)


def test_layouts_refused(rng):
    h = torch.sparse_coo_tensor(torch.tensor([[0, 1]]), torch.ones(2, 3), size=(2, 3), check_invariants=True)
    with pytest.raises(errors.ShapeError, match=r'T: values have shape \(2, 3\): hybrid tensors'):
        marshal_sparse('T', h, None)
    t0 = torch.sparse_coo_tensor(torch.zeros(0, 1, dtype=torch.long), torch.tensor([1.]), size=(),
                                 check_invariants=True)
    with pytest.raises(errors.ShapeError, match='T: a 0-D torch tensor'):
        marshal_sparse('T', t0, None)
    with pytest.raises(errors.FormatMismatchError, match=r'T: a 1-D scipy csr array.*pass .tocoo\(\)'):
        marshal_sparse('T', sp.csr_array(np.array([0., 1., 0.])), None)
    S = sp.coo_array((np.ones(2), (np.array([0, 1]), np.array([1, 2]), np.array([2, 0]))), shape=(2, 3, 4))
    S.data = S.data.reshape(2, 1)
    with pytest.raises(errors.ShapeError, match=r'T: data has shape \(2, 1\)'):
        marshal_sparse('T', S, None)


def test_pydata_fill_value_and_coords():
    sparse = pydata_sparse or pytest.skip('pydata/sparse is not installed')
    P = sparse.COO(np.array([[0, 1]]), np.array([1., 2.]), shape=(5, ), fill_value=1.0)
    with pytest.raises(errors.UnsupportedOperationError, match='T: a pydata/sparse array whose fill value is 1.0'):
        marshal_sparse('T', P, None)
    P = sparse.COO(np.array([[0, 1], [1, 2]]), np.array([1., 2.]), shape=(2, 3))
    P.coords = P.coords[:1]
    with pytest.raises(errors.ShapeError, match=r'T: coords has shape \(1, 2\), expected \(ndim, nnz\) = \(2, 2\)'):
        marshal_sparse('T', P, None)


# ---------------------------------------------------------------------- ss.convert
def _csf_reference(dense):
    """CSF arrays of a dense tensor, level by level from its sorted nonzeros (plain loops)."""
    nz = sorted(zip(*np.nonzero(dense)))
    rank = dense.ndim
    arrays = {f'crd{k}': [] for k in range(rank)}
    arrays.update({f'pos{k}': [0] for k in range(1, rank)})
    for i, c in enumerate(nz):
        prev = nz[i - 1] if i else None
        for k in range(rank):
            if prev is None or c[:k + 1] != prev[:k + 1]:
                arrays[f'crd{k}'].append(c[k])
                if k + 1 < rank:
                    arrays[f'pos{k + 1}'].append(arrays[f'pos{k + 1}'][-1])
                if k:
                    arrays[f'pos{k}'][-1] += 1
    return arrays, np.array([dense[c] for c in nz])


@pytest.mark.parametrize('lib', LIBS)
@pytest.mark.parametrize('shape', [(9, ), (3, 4), (3, 4, 5), (2, 3, 4, 5), (0, 3, 2)], ids=str)
def test_convert_to_csf_and_back(rng, lib, shape):
    coords, vals, dense = _entries(rng, shape, 12, duplicates=True)  # unsorted, duplicates summed
    C = ss.convert(_value(lib, coords, vals, shape), ss.CSF)
    assert isinstance(C, ss.SparseTensor) and C.format is csf_of_rank(len(shape)) and C.shape == shape
    np.testing.assert_allclose(C.toarray(), dense)
    # (normal values: no sum of duplicates is exactly zero, so the stored entries are the nonzeros)
    ref, ref_vals = _csf_reference(dense)
    assert set(C.arrays) == set(ref) | {'vals'}
    for m, a in ref.items():
        assert C.arrays[m].dtype == np.int32
        np.testing.assert_array_equal(C.arrays[m], a, err_msg=m)
    np.testing.assert_allclose(C.arrays['vals'], ref_vals)
    marshal_sparse('C', C, None)  # valid CSF storage
    O = ss.convert(C, ss.COO)
    if len(shape) == 2:
        assert sp.issparse(O) and O.format == 'coo'
        np.testing.assert_allclose(O.toarray(), dense)
    else:
        assert O.format is coo_of_rank(len(shape))
        np.testing.assert_allclose(O.toarray(), dense)
        again = ss.convert(O, ss.CSF)
        for m in C.arrays:
            np.testing.assert_array_equal(again.arrays[m], C.arrays[m])


def test_convert_exact_csf_storage():
    """The storage arrays of a small rank-3 tensor, written out (duplicates summed)."""
    coords = np.array([[2, 0, 0, 2, 0, 2], [1, 3, 0, 1, 3, 0], [4, 0, 2, 4, 1, 3]])
    vals = np.array([1., 2., 3., 4., 5., 6.])
    C = ss.convert(_value('scipy', coords, vals, (3, 4, 5)), ss.CSF)
    got = {m: a.tolist() for m, a in C.arrays.items()}
    assert got == {'crd0': [0, 2], 'pos1': [0, 2, 4], 'crd1': [0, 3, 0, 1], 'pos2': [0, 1, 3, 4, 5],
                   'crd2': [2, 0, 1, 3, 4], 'vals': [3., 2., 5., 6., 5.]}
    assert C.nnz == 5 and C.ndim == 3
    arrays = csf_storage(list(coords), vals, np.int64)
    assert all(arrays[m].tolist() == got[m] for m in got) and arrays['crd0'].dtype == np.int64


def test_convert_to_coo_keeps_the_entries(rng):
    coords, vals, dense = _entries(rng, (3, 4, 5), 7, duplicates=True)
    O = ss.convert(_value('torch', coords, vals, (3, 4, 5)), ss.COO, index_dtype=np.int64)
    assert O.format.name == 'COO3' and O.arrays['crd0'].dtype == np.int64
    for k in range(3):
        np.testing.assert_array_equal(O.arrays[f'crd{k}'], coords[k])
    np.testing.assert_allclose(O.toarray(), dense)


def test_convert_dense_and_torch_dense(rng):
    _, _, dense = _entries(rng, (2, 3, 4), 6)
    for value in (dense, torch.from_numpy(dense)):
        C = ss.convert(value, ss.CSF)
        assert C.format.name == 'CSF3'
        np.testing.assert_allclose(C.toarray(), dense)
    C = ss.convert(np.zeros((2, 3, 4)), ss.CSF)
    assert {m: a.tolist() for m, a in C.arrays.items()} == {'crd0': [], 'pos1': [0], 'crd1': [], 'pos2': [0],
                                                             'crd2': [], 'vals': []}


def test_convert_to_an_annotation(rng):
    coords, vals, dense = _entries(rng, (3, 4, 5), 8)
    C = ss.convert(_value('torch', coords, vals, (3, 4, 5)), ss.CSF[dace.float32, I, J, K, dace.int64])
    assert C.format.name == 'CSF3' and C.dtype == np.float32
    assert all(a.dtype == np.int64 for m, a in C.arrays.items() if m != 'vals')
    np.testing.assert_allclose(C.toarray(), dense.astype(np.float32))
    with pytest.raises(errors.ShapeError, match='convert: A is a rank-3 tensor, the annotation .* a rank-4 tensor'):
        ss.convert(C, ss.CSF[dace.float32, I, J, K, L])


def test_convert_errors(rng):
    coords, vals, _ = _entries(rng, (3, 4, 5), 8)
    T = _value('scipy', coords, vals, (3, 4, 5))
    with pytest.raises(errors.ShapeError, match='convert: A is a rank-3 tensor: ss.CSR stores tensors of 2 '
                       'dimensions, not 3; ss.COO and ss.CSF store tensors of any rank'):
        ss.convert(T, ss.CSR)
    with pytest.raises(errors.ArgumentError, match='convert: A must be a sparse matrix or an array, got NoneType'):
        ss.convert(None, ss.CSF)
    with pytest.raises(errors.ArgumentError, match='prune=True needs a structured format'):
        ss.convert(T, ss.CSF, prune=True)
    bad = _value('matrix', coords, vals, (3, 4, 5))
    bad.arrays['crd1'] = bad.arrays['crd1'].copy()
    bad.arrays['crd1'][0] = 7
    with pytest.raises(errors.InvalidIndexError, match=r'A: crd1\[0\] = 7 is out of range'):
        ss.convert(bad, ss.CSF)
    big = sp.coo_array((np.ones(1), (np.array([2**31 + 1]), )), shape=(2**31 + 5, ))
    with pytest.raises(errors.IndexOverflowError, match=r'crd0 holds 2147483649, which does not fit int32'):
        ss.convert(big, ss.CSF)
    assert ss.convert(big, ss.CSF, index_dtype=np.int64).arrays['crd0'].tolist() == [2**31 + 1]


def test_convert_a_matrix_to_csf_is_dcsr(rng):
    A = sp.random_array((6, 5), density=0.3, format='csr', rng=rng)
    C = ss.convert(A, ss.CSF)
    D = ss.convert(A, ss.DCSR)
    assert C.format.name == 'CSF2' and C.shape == (6, 5)
    for m in D.arrays:
        np.testing.assert_array_equal(C.arrays[m], D.arrays[m])
    assert sp.issparse(ss.convert(A, ss.COO))  # the matrix COO keeps its scipy twin


# ---------------------------------------------------------------------- SparseTensor
def test_sparse_tensor_behaviour(rng):
    coords, vals, dense = _entries(rng, (3, 4, 5), 6, duplicates=True)
    T = _value('matrix', coords, vals, (3, 4, 5))
    assert ss.SparseTensor is ss.SparseMatrix and T.ndim == 3 and T.nnz == coords.shape[1]
    *got, v = T.to_coo_arrays()
    assert len(got) == 3 and all(np.array_equal(a, c) for a, c in zip(got, coords))
    np.testing.assert_allclose(T.toarray(), dense)
    S = T.to_scipy()
    assert S.format == 'coo' and S.shape == (3, 4, 5)
    np.testing.assert_allclose(S.toarray(), dense)
    assert repr(T) == f'<SparseTensor COO3 3x4x5, float64, {coords.shape[1]} stored values>'
    with pytest.raises(errors.UnsupportedOperationError, match=r"to_scipy: scipy has no 'csr' array of 3 dimensions"):
        T.to_scipy('csr')
    one = ss.SparseTensor('COO1', {'crd0': np.array([4, 1]), 'vals': np.array([2., 3.])}, (6, ))
    np.testing.assert_array_equal(one.toarray(), [0, 3, 0, 0, 2, 0])
    assert one.to_scipy('csr').format == 'csr'  # (scipy's 1-D csr)


def test_sparse_tensor_shape_errors():
    arrays = {'crd0': np.zeros(1, np.int32), 'crd1': np.zeros(1, np.int32), 'crd2': np.zeros(1, np.int32),
              'vals': np.ones(1)}
    with pytest.raises(errors.ShapeError, match=r'SparseMatrix\(COO3\): shape must be 3 sizes \(a rank-3 tensor\), '
                       r'got \(3, 4\)'):
        ss.SparseTensor('COO3', arrays, (3, 4))
    with pytest.raises(errors.ShapeError, match=r'SparseMatrix\(CSR\): shape must be \(rows, cols\), got \(3, 4, 5\)'):
        ss.SparseMatrix('CSR', {'pos1': [0, 0, 0, 0], 'crd1': [], 'vals': []}, (3, 4, 5))
    with pytest.raises(errors.ShapeError, match=r'missing member arrays \[.crd2.\]'):
        ss.SparseTensor('COO3', {k: v for k, v in arrays.items() if k != 'crd2'}, (3, 4, 5))


def test_slot_coordinates_any_rank():
    C = _csf3([0, 2], [0, 2, 3], [1, 3, 0], [0, 2, 3, 5], [0, 4, 1, 2, 3])
    c0, c1, c2, slot = slot_coordinates(C.format, C.arrays, C.shape)
    assert list(zip(c0.tolist(), c1.tolist(), c2.tolist())) == [(0, 1, 0), (0, 1, 4), (0, 3, 1), (2, 0, 2), (2, 0, 3)]
    assert slot.tolist() == [0, 1, 2, 3, 4]
    with pytest.raises(errors.ShapeError, match=r'CSF3: a shape of 2 dimensions \(3, 4\) for a rank-3 format'):
        slot_coordinates(C.format, C.arrays, (3, 4))


# ---------------------------------------------------------------------- warm paths
def test_warm_paths_refuse_tensors(rng):
    with pytest.raises(errors.UnsupportedOperationError, match='StorageCheck: COO3 stores rank-3 tensors'):
        StorageCheck(coo_of_rank(3))
    coords, vals, _ = _entries(rng, (3, 4, 5), 5)
    arg = marshal_sparse('T', _value('scipy', coords, vals, (3, 4, 5)), _type(3))
    with pytest.raises(slots.NoPlan, match='T is a rank-3 tensor'):
        slots.SparseSlot(0, 'T', arg, None, arg.value)


def _count(result) -> int:
    """The one number a ``.nnz`` program returns (a NumPy array or torch tensor of one entry)."""
    return np.asarray(result).item()


def test_programs_take_tensors(rng, plan_calls):
    """A rank-3 COO program called with each library's tensor, twice (no warm plan: the full
    path each time); a CSF program; a matrix program's warm plan misses on a tensor of the
    same type, and the full path names the rank."""
    coords, vals, _ = _entries(rng, (3, 4, 5), 9, duplicates=True)
    for lib in HERE * 2:
        assert _count(tensor_nnz(_value(lib, coords, vals, (3, 4, 5)))) == coords.shape[1]
    assert not tensor_nnz.__dict__.get('_ss_plans')
    C = ss.convert(_value('scipy', coords, vals, (3, 4, 5)), ss.CSF, index_dtype=np.int64)
    assert _count(csf_nnz(C)) == C.arrays['vals'].size
    with pytest.raises(errors.FormatMismatchError, match=r'ss.convert\(T, ss.CSF\)'):
        csf_nnz(_value('torch', coords, vals, (3, 4, 5)))
    A = torch.tensor(sp.random_array((4, 6), density=0.4, rng=rng).toarray()).to_sparse()
    assert _count(matrix_nnz(A)) == _count(matrix_nnz(A)) == A._nnz()
    assert matrix_nnz.__dict__.get('_ss_plans') and plan_calls['done'] >= 1
    missed = plan_calls['missed']
    with pytest.raises(errors.ShapeError, match=r'A: Tensor of shape \(3, 4, 5\) is a rank-3 tensor; the program '
                       r'expects a matrix'):
        matrix_nnz(_value('torch', coords, vals, (3, 4, 5)))
    assert plan_calls['missed'] == missed + 1
    S = sp.coo_array(sp.random_array((4, 6), density=0.4, rng=rng))
    S.coords = tuple(c.astype(np.int64) for c in S.coords)
    assert _count(matrix_nnz(S)) == _count(matrix_nnz(S)) == S.nnz
    with pytest.raises(errors.ShapeError, match=r'A: coo_array of shape \(3, 4, 5\) is a rank-3 tensor'):
        matrix_nnz(_value('scipy', coords, vals, (3, 4, 5)))
