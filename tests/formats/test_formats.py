"""The format layer: levels, structures (member dtypes and symbolic sizes), the type
registry, host conversions with exact storage arrays, and validation."""
import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse import errors
from sdfgsparse.formats import sparse_type_of
from sdfgsparse.runtime.container import SparseMatrix
from sdfgsparse.runtime.convert import storage_to_coo, to_storage
from sdfgsparse.runtime.marshal import marshal_sparse

from sparse_zoo import FORMATS, zoo

M, N = dace.symbol('M'), dace.symbol('N')

# 4 x 4 example:  [[1 0 2 0], [0 0 0 0], [3 0 0 4], [0 5 0 0]]
EX = sp.csr_array(np.array([[1., 0, 2, 0], [0, 0, 0, 0], [3, 0, 0, 4], [0, 5, 0, 0]]))

EXACT = {
    'CSR': {'pos1': [0, 2, 2, 4, 5], 'crd1': [0, 2, 0, 3, 1], 'vals': [1, 2, 3, 4, 5]},
    'CSC': {'pos1': [0, 2, 3, 4, 5], 'crd1': [0, 2, 3, 0, 2], 'vals': [1, 3, 5, 2, 4]},
    'DCSR': {'crd0': [0, 2, 3], 'pos1': [0, 2, 4, 5], 'crd1': [0, 2, 0, 3, 1], 'vals': [1, 2, 3, 4, 5]},
    'ELL': {'crd2': [0, 2, -1, -1, 0, 3, 1, -1], 'vals': [1, 2, 0, 0, 3, 4, 5, 0]},
    'BSR': {'pos1': [0, 2, 4], 'crd1': [0, 1, 0, 1], 'vals': [1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 5, 0, 4, 0, 0]},
}


@pytest.mark.parametrize('fmt', sorted(EXACT))
def test_exact_storage_arrays(fmt):
    f = ss.BSR.with_block(2, 2) if fmt == 'BSR' else getattr(ss, fmt)
    arrays, shape = to_storage(EX, f)
    assert shape == (4, 4)
    assert set(arrays) == set(EXACT[fmt])
    for name, want in EXACT[fmt].items():
        np.testing.assert_array_equal(arrays[name], want, err_msg=f'{fmt}.{name}')


@pytest.mark.parametrize('itype', [dace.int32, dace.int64])
@pytest.mark.parametrize('vtype', [dace.float32, dace.float64, dace.int32, dace.int64])
@pytest.mark.parametrize('fmt', FORMATS)
def test_structure_members(fmt, vtype, itype):
    f = ss.BSR.with_block(2, 2) if fmt == 'BSR' else getattr(ss, fmt)
    desc = f[vtype, M, N, itype]
    assert isinstance(desc, dace.data.Structure)
    for name, member in desc.members.items():
        if name in ('rows', 'cols'):
            continue
        assert member.dtype == (vtype if name == 'vals' else itype), name
    st = sparse_type_of(desc)
    assert st.fmt is f and st.dtype == vtype and st.index_dtype == itype
    assert (st.rows, st.cols) == (M, N)
    shapes = {k: v.shape[0] for k, v in desc.members.items() if k not in ('rows', 'cols')}
    if fmt in ('CSR', 'CSC'):
        assert shapes['pos1'] == (M if fmt == 'CSR' else N) + 1
        assert shapes['crd1'] == shapes['vals'] == st.sizes['n1']
    if fmt == 'BSR':
        assert shapes['vals'] == 4 * st.sizes['n1']
    if fmt == 'ELL':
        assert shapes['vals'] == M * st.sizes['K']
    if fmt == 'DIA':
        assert shapes['vals'] == st.sizes['nd'] * st.sizes['L']


def test_each_annotation_gets_its_own_size_symbols():
    a, b = sparse_type_of(ss.CSR[dace.float64, M, N]), sparse_type_of(ss.CSR[dace.float64, M, N])
    assert a.sizes['n1'] != b.sizes['n1']

    def make():
        return sparse_type_of(ss.CSR[dace.float64, M, N])

    # the names come from where a type is made, not from how many types were made before:
    # the same site in a fresh count gives the same names (another process, another order)
    from sdfgsparse.formats import format as format_module
    saved = dict(format_module._SITE_COUNTS)
    first = make().sizes['n1']
    assert make().sizes['n1'] != first  # made again by the same line: a new name
    sparse_type_of(ss.COO[dace.float32, N, N])  # other types in between
    format_module._SITE_COUNTS.clear()
    format_module._SITE_COUNTS.update({k: v for k, v in saved.items()})
    assert make().sizes['n1'] == first


def test_a_line_that_makes_several_types_names_each_alike_in_every_order():
    """A factory line (``F[vt, M, N, it]`` for each format, as the zoo tests make their
    programs) gives a type the same size symbols whatever it made before in this process:
    another order of tests, or another process, builds the same program, not another one."""
    from sdfgsparse.formats import format as format_module

    def make(fmt, vt=dace.float64):
        return sparse_type_of(getattr(ss, fmt)[vt, M, N]).sizes

    saved = dict(format_module._SITE_COUNTS)
    try:
        format_module._SITE_COUNTS.clear()
        alone = make('ELL')
        format_module._SITE_COUNTS.clear()
        make('DCSR'), make('CSR'), make('ELL', dace.float32)
        assert make('ELL') == alone
        assert make('ELL') != alone  # the same type made again by the line: new names
    finally:
        format_module._SITE_COUNTS.clear()
        format_module._SITE_COUNTS.update(saved)


T_ALIAS = ss.CSR[dace.float64, M, N]
D_ALIAS = ss.DIA[dace.float64, M, N]


@dace.program
def _alias_twice(A: T_ALIAS, B: T_ALIAS, C: D_ALIAS, D: D_ALIAS, x: dace.float64[N]):
    return (A - B) @ x + C @ x - D @ x


def test_one_alias_for_two_parameters_gives_each_its_own_sizes():
    """``T = ss.CSR[...]``; ``def f(A: T, B: T)``: the entry counts (and DIA's diagonal
    counts) are per parameter; a call with different counts was refused (ShapeError)."""
    rng = np.random.default_rng(3)
    A, B = (sp.random(7, 5, density=d, format='csr', random_state=s) for d, s in ((0.5, 1), (0.2, 2)))
    C, D = sp.dia_matrix(sp.diags([1.0, 2.0], [0, 1], shape=(7, 5))), sp.dia_matrix(sp.eye(7, 5, k=-2))
    x = rng.standard_normal(5)
    want = (A - B) @ x + C @ x - D @ x
    np.testing.assert_allclose(_alias_twice(A, B, C, D, x), want, rtol=1e-12)
    np.testing.assert_allclose(ss.compile(_alias_twice)(A, B, C, D, x), want, rtol=1e-12)
    sdfg = _alias_twice.to_sdfg()
    assert sparse_type_of(sdfg.arrays['A']).sizes['n1'] != sparse_type_of(sdfg.arrays['B']).sizes['n1']
    assert sparse_type_of(sdfg.arrays['C']).sizes['nd'] != sparse_type_of(sdfg.arrays['D']).sizes['nd']
    with pytest.raises(errors.ShapeError, match='B: symbol N is 4, but A fixed N = 5'):  # the shared M, N stay shared
        _alias_twice(A, sp.random(7, 4, density=0.2, format='csr'), C, D, x)


def test_sizes_the_user_named_stay_shared():
    same = ss.CSR.type(dace.float64, M, N, n1='NNZ').structure()

    @dace.program
    def named(A: same, B: same, x: dace.float64[N]):
        return (A + B) @ x

    A = sp.random(4, 3, density=0.5, format='csr', random_state=1)
    with pytest.raises(errors.ShapeError, match='NNZ'):
        named(A, sp.random(4, 3, density=0.9, format='csr', random_state=2), np.ones(3))


def test_constant_shape_annotation():
    st = sparse_type_of(ss.CSC[dace.float32, 5, 7])
    assert (st.rows, st.cols) == (5, 7) and st.fmt is ss.CSC


def test_json_round_trip_of_structure():
    sdfg = dace.SDFG('fmt_json')
    sdfg.add_datadesc('A', ss.DIA[dace.float64, M, N])
    again = dace.SDFG.from_json(sdfg.to_json()).arrays['A']
    st = sparse_type_of(again)
    assert st.fmt is ss.DIA and (st.rows, st.cols) == (M, N)


def test_transposed_format_is_the_twin():
    assert ss.CSR.T is ss.CSC and ss.CSC.T is ss.CSR
    assert ss.COO.T.T is ss.COO
    assert ss.CSR.outer_dim == 0 and ss.CSC.outer_dim == 1 and ss.COO.outer_dim is None


def test_bad_annotations():
    with pytest.raises(errors.DTypeError, match='value dtype bool is not supported'):
        ss.CSR[dace.bool, M, N]
    with pytest.raises(errors.ShapeError, match='stores tensors of 2 dimensions, not 3; ss.COO and ss.CSF'):
        ss.CSR[dace.float64, M, N, 'nnz']
    with pytest.raises(TypeError, match='unexpected annotation argument'):
        ss.CSR[dace.float64, M, N, dace.int64, 'nnz']
    with pytest.raises(TypeError, match='unexpected annotation argument'):
        ss.CSR[dace.float64, M, 1.5]
    with pytest.raises(errors.DTypeError, match='index dtype .* not supported'):
        ss.CSR[dace.float64, M, N, dace.int16]


@pytest.mark.parametrize('fmt', FORMATS)
def test_host_convert_round_trip_every_format(fmt):
    f = ss.BSR.with_block(2, 2) if fmt == 'BSR' else getattr(ss, fmt)
    for name, A in zoo().items():
        if fmt == 'BSR' and (A.shape[0] % 2 or A.shape[1] % 2):
            continue
        B = ss.convert(A, f)
        assert (sp.issparse(B) and B.format == f.scipy_format) or isinstance(B, SparseMatrix)
        got = B.toarray() if not isinstance(B, SparseMatrix) else B.toarray()
        np.testing.assert_array_equal(got, A.toarray(), err_msg=f'{fmt} {name}')
        # storage walk by levels agrees too
        arrays, shape = to_storage(A, f)
        r, c, v = storage_to_coo(f, arrays, shape)
        D = np.zeros(shape)
        np.add.at(D, (r, c), v)
        np.testing.assert_array_equal(D, A.toarray())


def test_convert_with_annotation_applies_dtypes():
    B = ss.convert(EX, ss.ELL[dace.float32, M, N, dace.int64])
    assert B.dtype == np.float32 and B.index_dtype == np.int64


@pytest.mark.parametrize('fmt', FORMATS)
def test_every_format_validates(fmt):
    f = ss.BSR.with_block(2, 2) if fmt == 'BSR' else getattr(ss, fmt)
    arrays, shape = to_storage(EX, f)
    bad = {k: v.copy() for k, v in arrays.items()}
    key = next(k for k in bad if k.startswith('crd') or k.startswith('off'))
    if key.startswith('off'):
        bad[key][:] = bad[key][0]  # duplicate diagonal
        with pytest.raises(errors.DuplicateIndicesError, match='A: offsets contain a diagonal twice'):
            marshal_sparse('A', SparseMatrix(f, bad, shape), None)
        return
    bad[key][-1] = 10**6
    with pytest.raises(errors.InvalidIndexError, match=f'A: {key}\\[.*\\] = 1000000 is out of range'):
        marshal_sparse('A', SparseMatrix(f, bad, shape), None)
