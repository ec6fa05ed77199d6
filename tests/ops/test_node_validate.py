"""``validate()`` of every sparse library node (:mod:`sdfgsparse.ops.validation`).

Each node comes from the frontend (one program holding fifteen of them; SparseAttention from
``SparseFusion``; the einsums from a program of their own), validates as built, and is then broken one way per rule: an edge or a
connector of a sparse member removed, a connector the node does not take added, an index
member or the result of another dtype, a dense operand of another rank or of a definitely
wrong size, a result of another format. DaCe's ``SDFG.validate()`` must fail with
``InvalidSDFGNodeError`` caused by the typed error, its message naming the node and the
connector. Nothing here compiles, except what a test stops before code generation.
"""
import copy
import re

import dace
import numpy as np
import pytest
from dace.sdfg.validation import InvalidSDFGNodeError

import sdfgsparse as ss
from sdfgsparse import errors
from sdfgsparse.formats import sparse_type_of
from sdfgsparse.ops.add import SparseAdd
from sdfgsparse.ops.add_dense import SparseAddDense
from sdfgsparse.ops.attention import SparseAttention
from sdfgsparse.ops.base import SparseLibraryNode, change_argument_format, member_conn, retype_sparse
from sdfgsparse.ops.concat import SparseConcat
from sdfgsparse.ops.convert import Convert
from sdfgsparse.ops.dense_spmm import DenseSpMM
from sdfgsparse.ops.einsum import SparseEinsum
from sdfgsparse.ops.einsum_sparse import SparsePrefixEinsum
from sdfgsparse.ops.materialise import SparseMaterialise
from sdfgsparse.ops.tensor_add import SparseTensorAdd
from sdfgsparse.ops.tensor_mul import SparseTensorMul
from sdfgsparse.ops.map_values import MapValues
from sdfgsparse.ops.mul import SparseMul
from sdfgsparse.ops.mul_dense import SparseMulDense
from sdfgsparse.ops.reduce import SparseSum
from sdfgsparse.ops.sddmm import SDDMM
from sdfgsparse.ops.softmax import SparseSoftmax
from sdfgsparse.ops.sparse_copy import SparseCopy
from sdfgsparse.ops.spgemm import SpGEMM
from sdfgsparse.ops.spmm import SpMM
from sdfgsparse.ops.spmv import SpMV
from sdfgsparse.scripting.files import load_sdfg
from sdfgsparse.transformations import SparseFusion

M, N, K, D, E = (dace.symbol(s) for s in 'MNKDE')
f64 = dace.float64


@dace.program
def every_op(A: ss.CSR[f64, M, N], B: ss.CSR[f64, M, N], x: f64[N], xt: f64[M], X: f64[M, K], Y: f64[K, N],
             Dn: f64[M, N], V: f64[N, K], s: f64):
    return (A @ x, A @ V, xt @ A, ss.sddmm(A, X, Y), A @ B.T, A + B, A * B, A + Dn, A * Dn, A * s, A.sum(axis=0),
            ss.softmax(A), ss.convert(A, ss.CSC), np.vstack((A, B)), A)


@dace.program
def attention(S: ss.CSR[f64, M, N], Q: f64[M, D], Kk: f64[N, D], V: f64[N, E]):
    return ss.softmax(ss.sddmm(S, Q, Kk.T), axis=1) @ V


@dace.program
def einsums(A: ss.CSR[f64, M, N], V: f64[N, K], T: ss.CSF[f64, M, N, K], v: f64[K]):
    return np.einsum('ij,jr->ir', A, V), np.einsum('ijk,k->ij', T, v)


@dace.program
def tensor_views(T: ss.CSF[f64, M, N, K], U: ss.CSF[f64, M, N, K]):
    return T.transpose((1, 0, 2)), T + U, T * U


@dace.program
def spmv_only(A: ss.CSR[f64, M, N], x: f64[N]):
    return A @ x


@dace.program
def fixed_spmv(A: ss.CSR[f64, 4, 5], x: f64[5]):
    return A @ x


#: node class -> (sparse operand prefix, dense connector or None, sparse result?, result dtype rule?)
NODES = {
    SpMV: ('A', '_x', False, True),
    SpMM: ('A', '_B', False, True),
    DenseSpMM: ('A', '_B', False, True),
    SDDMM: ('S', '_X', True, True),
    SpGEMM: ('A', None, True, True),
    SparseAdd: ('A', None, True, True),
    SparseMul: ('A', None, True, True),
    SparseAddDense: ('A', '_D', False, True),
    SparseMulDense: ('A', '_D', True, True),
    MapValues: ('A', '_alpha', True, False),
    SparseSum: ('A', '_out', False, True),
    SparseSoftmax: ('A', None, True, True),
    SparseAttention: ('S', '_Q', False, True),
    Convert: ('A', None, True, True),
    SparseConcat: ('A0', None, True, True),
    SparseCopy: ('A', None, True, True),
    SparseEinsum: ('A', '_D0', False, True),
    SparsePrefixEinsum: ('A', '_D0', True, True),
    SparseMaterialise: ('A', None, True, True),
    SparseTensorAdd: ('A', None, True, True),
    SparseTensorMul: ('A', None, True, True),
}
#: nodes whose result is a counted coordinate list (PCOO<n>): no other format has its members
COUNTED = (SparseMaterialise, SparseTensorAdd, SparseTensorMul)
#: the dense result of each node without a sparse one
DENSE_OUT = {SpMV: '_y', SpMM: '_Y', DenseSpMM: '_C', SparseAddDense: '_out', SparseSum: '_out',
             SparseAttention: '_out', SparseEinsum: '_out'}


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # (DaCe saves an invalid SDFG to ./_dacegraphs)


@pytest.fixture(scope='module')
def built():
    """Class -> an SDFG the frontend built that holds a node of it."""
    ops = every_op.to_sdfg()
    fused = attention.to_sdfg()
    assert fused.apply_transformations_repeated(SparseFusion) == 1
    tensors = einsums.to_sdfg()
    views = tensor_views.to_sdfg()
    return {cls: fused if cls is SparseAttention else tensors if cls in (SparseEinsum, SparsePrefixEinsum) else
            views if cls in COUNTED else ops for cls in NODES}


def _find(sdfg, cls):
    return next((n, st) for n, st in sdfg.all_nodes_recursive() if type(n) is cls)


def _edge(state, node, conn):
    return next(e for e in state.all_edges(node) if (e.dst_conn if e.dst is node else e.src_conn) == conn)


def _out_structure(state, node) -> str:
    view = _edge(state, node, member_conn('out', 'vals')).dst
    return state.out_edges(view)[0].dst.data


def _retype_out(sdfg, state, node, fmt=None, dtype=None, extra_rows=0):
    name = _out_structure(state, node)
    st = sparse_type_of(sdfg.arrays[name])
    fmt = fmt or st.fmt
    sizes = st.sizes if fmt is st.fmt else {}
    shape = list(st.shape)
    shape[0] = shape[0] + extra_rows
    retype_sparse(sdfg, name, fmt.type(dtype or st.dtype, *shape, st.index_dtype, **sizes))


def _redefine(sdfg, state, node, conn, shape=None, dtype=None):
    """The data at ``conn`` with another shape or dtype, its memlet the whole of it."""
    e = _edge(state, node, conn)
    old = sdfg.arrays[e.data.data]
    new = dace.data.Array(dtype or old.dtype, shape or old.shape, transient=old.transient)
    sdfg.arrays[e.data.data] = new
    e.data = dace.Memlet.from_array(e.data.data, new)


def _remove(state, node, conn):
    """Connector ``conn`` and its edge removed (and the data node left unconnected)."""
    e = _edge(state, node, conn)
    state.remove_edge(e)
    (node.remove_in_connector if e.dst is node else node.remove_out_connector)(conn)
    other = e.src if e.dst is node else e.dst
    if state.degree(other) == 0:
        state.remove_node(other)


# ---------------------------------------------------------------------- the breakages
def _drop_edge(sdfg, state, node, prefix, dense):
    conn = member_conn(prefix, 'pos1')
    state.remove_edge(_edge(state, node, conn))
    return errors.ConnectorError, f'connector {conn} .*is not connected'


def _drop_member(sdfg, state, node, prefix, dense):
    conn = member_conn(prefix, 'vals')
    _remove(state, node, conn)
    return errors.ConnectorError, f'connector {conn} .*is missing'


def _drop_dense(sdfg, state, node, prefix, dense):
    _remove(state, node, dense)
    return errors.ConnectorError, f'connector {dense} .*is missing'


def _extra_member(sdfg, state, node, prefix, dense):
    conn = member_conn(prefix, 'bogus')
    node.add_in_connector(conn)
    return errors.ConnectorError, f'connector {conn}: the (CSR|CSF3) operand {prefix} has no member bogus'


def _extra(sdfg, state, node, prefix, dense):
    node.add_out_connector('_bogus')
    return errors.ConnectorError, 'unexpected output connector _bogus'


def _index_dtype(sdfg, state, node, prefix, dense):
    conn = member_conn(prefix, 'crd1')
    sdfg.arrays[_edge(state, node, conn).data.data].dtype = dace.int64
    return errors.DTypeError, f'{conn} \\(int64\\)'


def _result_dtype(sdfg, state, node, prefix, dense):
    if type(node) in DENSE_OUT:
        conn = DENSE_OUT[type(node)]
        dtype = dace.int64 if type(node) is SparseAttention else dace.float32
        _redefine(sdfg, state, node, conn, dtype=dtype)
        return errors.DTypeError, f"connector {conn}: dtype {dtype.to_string()}"
    _retype_out(sdfg, state, node, dtype=dace.float32)
    return errors.DTypeError, 'connector _out_vals: dtype float32, but the node computes float64'


def _rank(sdfg, state, node, prefix, dense):
    shape = tuple(sdfg.arrays[_edge(state, node, dense).data.data].shape)
    _redefine(sdfg, state, node, dense, shape=shape + (2, 2))
    return errors.ShapeError, f'connector {dense} takes a (vector|matrix)'


def _size(sdfg, state, node, prefix, dense):
    if dense is not None and dense != '_alpha':
        shape = list(sdfg.arrays[_edge(state, node, dense).data.data].shape)
        shape[0] = shape[0] + 1
        _redefine(sdfg, state, node, dense, shape=shape)
        return errors.ShapeError, f'{dense}.* differ'
    _retype_out(sdfg, state, node, extra_rows=1)
    return errors.ShapeError, '_out_.* differ'


def _format(sdfg, state, node, prefix, dense):
    # (a format with the same members: BSR for a CSR-like result, DCSR for a CSF2 one)
    crd0 = 'crd0' in sparse_type_of(sdfg.arrays[_out_structure(state, node)]).fmt.member_names
    other = sparse_type_of(ss.DCSR[f64, 4, 4] if crd0 else ss.BSR.with_block(2, 2)[f64, 4, 4]).fmt
    _retype_out(sdfg, state, node, fmt=other)
    return errors.FormatMismatchError, rf'out \(_out_\*\) is {other.name}'


BREAKAGES = {f.__name__.lstrip('_'): f for f in (_drop_edge, _drop_member, _drop_dense, _extra_member, _extra,
                                                  _index_dtype, _result_dtype, _rank, _size, _format)}


def _applies(cls, breakage) -> bool:
    prefix, dense, sparse_out, dtype_rule = NODES[cls]
    return {'drop_dense': dense is not None, 'rank': dense not in (None, '_alpha'),
            'format': sparse_out and cls not in COUNTED,
            'result_dtype': dtype_rule}.get(breakage, True)


CASES = [(cls, b) for cls in NODES for b in BREAKAGES if _applies(cls, b)]


def test_every_sparse_node_is_covered():
    import sdfgsparse.ops  # noqa: F401

    def subclasses(c):
        for s in c.__subclasses__():
            yield s
            yield from subclasses(s)

    assert {c for c in subclasses(SparseLibraryNode) if 'implementations' in c.__dict__} == set(NODES)


@pytest.mark.parametrize('cls', list(NODES), ids=lambda c: c.__name__)
def test_the_frontends_sdfg_validates_and_validate_changes_nothing(built, cls):
    sdfg = built[cls]
    node, state = _find(sdfg, cls)
    before = sdfg.to_json()
    node.validate(state.parent, state)
    sdfg.validate()
    assert sdfg.to_json() == before


@pytest.mark.parametrize('cls, breakage', CASES, ids=[f'{c.__name__}-{b}' for c, b in CASES])
def test_a_broken_node_is_refused_with_a_typed_error(built, cls, breakage):
    sdfg = copy.deepcopy(built[cls])
    node, state = _find(sdfg, cls)
    prefix, dense = NODES[cls][:2]
    error, detail = BREAKAGES[breakage](sdfg, state, node, prefix, dense)
    pattern = f'{re.escape(node.label)}: .*{detail}'
    with pytest.raises(error, match=pattern):  # the node's own check
        node.validate(state.parent, state)
    with pytest.raises(InvalidSDFGNodeError, match=pattern) as info:  # as DaCe runs it
        sdfg.validate()
    assert isinstance(info.value.__cause__, error)


def test_spgemm_refuses_a_right_operand_that_does_not_iterate_as_csr(built):
    sdfg = copy.deepcopy(built[SpGEMM])
    node, state = _find(sdfg, SpGEMM)
    b = state.in_edges(_edge(state, node, '_B_vals').src)[0].data.data.split('.')[0]
    st = sparse_type_of(sdfg.arrays[b])
    retype_sparse(sdfg, b, sparse_type_of(ss.BSR.with_block(2, 2)[f64, 4, 4]).fmt.type(st.dtype, st.rows, st.cols))
    with pytest.raises(errors.FormatMismatchError, match=r'spgemm: operand B \(_B_\*\) is BSR2x2.*CSR'):
        node.validate(state.parent, state)


def test_mul_refuses_an_operand_that_may_store_duplicates(built):
    sdfg = copy.deepcopy(built[SparseMul])
    change_argument_format(sdfg, 'A', ss.COO)  # (the frontend converts a COO operand first)
    node, state = _find(sdfg, SparseMul)
    with pytest.raises(errors.UnsupportedOperationError, match=r'sparse_mul: operand A \(_A_\*\) \(COO\) may store'):
        node.validate(state.parent, state)


def test_dense_operand_of_no_number_type_is_refused(built):
    sdfg = copy.deepcopy(built[SpMV])
    node, state = _find(sdfg, SpMV)
    _redefine(sdfg, state, node, '_x', dtype=dace.pointer(f64))
    with pytest.raises(errors.DTypeError, match=r'spmv: connector _x: dtype .* is not a number type'):
        node.validate(state.parent, state)


def test_sizes_that_may_agree_are_accepted_and_fixed_ones_that_differ_refused():
    sdfg = spmv_only.to_sdfg()
    node, state = _find(sdfg, SpMV)
    _redefine(sdfg, state, node, '_x', shape=(7, ))  # N may be 7: decided at the call
    sdfg.validate()
    fixed = fixed_spmv.to_sdfg()
    node, state = _find(fixed, SpMV)
    fixed.validate()
    _redefine(fixed, state, node, '_x', shape=(6, ))
    with pytest.raises(errors.ShapeError, match=r'spmv: the columns of A \(_A_\*\) \(5\) and the length of _x '
                       r'\(6\) differ'):
        node.validate(state.parent, state)


def test_a_loaded_file_with_a_broken_connection_fails_before_code_generation(tmp_path, monkeypatch):
    sdfg = spmv_only.to_sdfg()
    node, state = _find(sdfg, SpMV)
    state.remove_edge(_edge(state, node, '_x'))
    for n in [n for n in state.data_nodes() if state.degree(n) == 0]:
        state.remove_node(n)
    path = str(tmp_path / 'broken.sdfg')
    sdfg.save(path)
    loaded = load_sdfg(path)

    def never(*args, **kwargs):
        raise AssertionError('code generation or the compiler was reached')

    monkeypatch.setattr(dace.SDFG, 'expand_library_nodes', never)
    monkeypatch.setattr(dace.codegen.compiler, 'configure_and_compile', never)
    with pytest.raises(InvalidSDFGNodeError, match=r'spmv: connector _x \(the dense operand\) is not connected') \
            as info:
        ss.compile(loaded).build()
    assert isinstance(info.value.__cause__, errors.ConnectorError)

