"""NumPy-style frontend: sparse operators inside ``@dace.program``.

Registers replacements in DaCe's operator repository so that, for a sparse argument
(a ``Structure`` made by :mod:`sdfgsparse.formats`), expressions such as ``A @ x``,
``A.T``, ``A * B``, ``A.sum(axis=1)`` or ``ss.relu(A)`` become sparse library nodes.

Values that leave a program or reach code that is not ours go through
:func:`install_hooks`: a returned argument or transposed view becomes a copy
(:class:`~sdfgsparse.ops.sparse_copy.SparseCopy`), and any NumPy function, method,
subscript or assignment that DaCe would apply to a sparse operand raises
:class:`~sdfgsparse.errors.UnsupportedOperationError` while the program is parsed.
"""
import ast
import contextlib
import warnings

import dace
import numpy as np
import sympy
from dace.frontend.common import op_repository as oprepo
from dace.frontend.python.common import DaceSyntaxError
from dace.frontend.python.newast import ProgramVisitor
from dace.symbolic import int_floor

from sdfgsparse import errors
from sdfgsparse import formats as _formats
from sdfgsparse._dace_compat import wrap
from sdfgsparse.formats import CSC, CSR, SparseFormat, is_parsing_ours, is_sparse_desc, sparse_type_of
from sdfgsparse.lowering.epilogue import NAN_UFUNC_CODE
from sdfgsparse.formats.counted import counted_coo
from sdfgsparse.formats.views import Reshape, Slice, Transpose, decode_steps, normalise_slice
from sdfgsparse.ops import base
from sdfgsparse.ops.add_dense import SparseAddDense
from sdfgsparse.ops.dense_spmm import DenseSpMM
from sdfgsparse.ops.mul_dense import SparseMulDense
from sdfgsparse.ops.reduce import SparseSum, sum_dtype
from sdfgsparse.ops.sddmm import SDDMM
from sdfgsparse.ops.sparse_copy import SparseCopy
from sdfgsparse.ops.shape_checks import require_equal
from sdfgsparse.ops.spmm import SpMM
from sdfgsparse.ops.spmv import SpMV
from sdfgsparse.ops.map_values import ALPHA, MapValues
from sdfgsparse.ops.materialise import SparseMaterialise
from sdfgsparse.ops.softmax import SparseSoftmax, normalise_axis
from sdfgsparse.ops.convert import Convert, TARGETS
from sdfgsparse.ops.add import SparseAdd, result_format
from sdfgsparse.ops.mul import SparseMul
from sdfgsparse.ops.spgemm import SpGEMM
from sdfgsparse.ops.concat import SparseConcat, part_prefix
from sdfgsparse.runtime.capacity import capacity_symbol

__all__ = ['TENSOR_OPERATIONS', 'SPARSE_FUNCTIONS', 'CALLBACK_FUNCTIONS']

#: What a sparse operand of a rank other than 2 is handed to (filled by
#: :mod:`sdfgsparse.frontends.numpy_tensor`): ``'sum'``, ``'matmul'``, ``'mul_dense'``,
#: ``'transpose'``, ``'add'`` and ``'mul'`` (of two sparse operands), ``'add_dense'``.
TENSOR_OPERATIONS = {}
#: NumPy functions DaCe has no replacement for (a program would call them back in Python):
#: name -> the implementation used when an operand is sparse (filled by
#: :mod:`sdfgsparse.frontends.numpy_tensor`).
CALLBACK_FUNCTIONS = {}


def _stype(sdfg, name):
    """The type of sparse data ``name`` as the program sees it (a view: its own shape)."""
    return base.view_type(sdfg, name)


def _shown(name: str, sdfg) -> str:
    """How an operand appears in an error: its name, ``A.T`` for a transposed view,
    ``A[2:5, :]`` for a slice."""
    return base.shown_name(sdfg, name)


def _check_inner(sdfg, a_shape, b_shape, what):
    """The inner dimensions of ``what`` (``'A @ B'``) agree; decided now or at each call
    (:mod:`sdfgsparse.ops.shape_checks`)."""
    require_equal(sdfg, a_shape[-1], b_shape[0], f'{what}: inner dimensions')


def _is_view(sdfg, name) -> bool:
    return isinstance(name, str) and name in sdfg.arrays and bool(base.resolve_view(sdfg, name)[2])


def _materialise(sdfg, state, name: str, coalesce: bool = False) -> str:
    """A sparse result holding the view ``name`` (a slice, ...): of a matrix, canonical
    (sorted, no duplicates), CSR, or CSC where the stored layout is column-major (a CSC, or a
    CSR read transposed); of another rank, the entries it keeps as a counted coordinate list
    (:class:`~sdfgsparse.ops.materialise.SparseMaterialise`; ``coalesce``: sorted, equal
    coordinates summed)."""
    st = _stype(sdfg, name)
    if st.rank != 2:
        cap = st.fmt.counts(st.shape, st.sizes)[-1]
        out_type = counted_coo(st.rank).type(st.dtype, *st.shape, _coordinate_type(st), n1=cap)
        return _insert(state, SparseMaterialise(coalesce=coalesce), {'A': name}, sparse_out=('out', out_type, 'view'))
    return _convert(sdfg, state, name, 'CSC' if st.fmt.outer_dim == 1 else 'CSR')


def _coordinate_type(*sts):
    """The index dtype of a coordinate list made from data of types ``sts`` (views): int64
    where one has int64 indices or a reshape (whose merged coordinates may pass 2**31), else
    int32."""
    wide = any(isinstance(s, Reshape) for st in sts for s in getattr(st.fmt, 'steps', ()))
    return dace.int64 if wide or any(st.index_dtype == dace.int64 for st in sts) else dace.int32


def _stored(sdfg, state, name: str) -> str:
    """``name``, or its materialised copy where it is a view or a concatenation: for the
    operations whose result has their operand's pattern and storage (its type is the
    operand's)."""
    if base.concat_of(sdfg, name) is not None:
        return _concat_materialise(sdfg, state, name)
    return _materialise(sdfg, state, name) if _is_view(sdfg, name) else name


def _insert(state, node, sparse_in=None, dense_in=None, dense_out=None, sparse_out=None) -> str:
    """:func:`base.insert_node`, after materialising the concatenations among ``sparse_in``
    and the views that ``node`` does not read as views
    (:attr:`~sdfgsparse.ops.base.SparseLibraryNode.ACCEPTS_VIEWS`)."""
    sdfg = state.parent
    sparse_in = dict(sparse_in or {})
    for prefix, name in sparse_in.items():
        if base.concat_of(sdfg, name) is not None or (not node.ACCEPTS_VIEWS and _is_view(sdfg, name)):
            sparse_in[prefix] = _stored(sdfg, state, name)
    return base.insert_node(state, node, sparse_in, dense_in, dense_out, sparse_out)


@oprepo.replaces_operator('Structure', 'MatMult', otherclass='Array')
def _sparse_matmult_dense(pv, sdfg: dace.SDFG, state: dace.SDFGState, a: str, b: str):
    st = _stype(sdfg, a)
    bdesc = sdfg.arrays[b]
    if st.rank != 2 or len(bdesc.shape) > 2:
        return TENSOR_OPERATIONS['matmul'](pv, sdfg, state, a, b)
    _check_inner(sdfg, st.shape, bdesc.shape, f'{_shown(a, sdfg)} @ {_shown(b, sdfg)}')
    dtype = dace.dtypes.result_type_of(st.dtype, bdesc.dtype)
    if len(bdesc.shape) not in (1, 2):
        raise errors.UnsupportedOperationError(f'sparse @ dense with a {len(bdesc.shape)}-D right operand')
    shape = [st.rows] + list(bdesc.shape[1:])
    node, x, y = (SpMV, '_x', '_y') if len(bdesc.shape) == 1 else (SpMM, '_B', '_Y')
    cat = base.concat_of(sdfg, a)
    if cat is not None:  # row blocks of the result, or a sum over column blocks of A and row blocks of b
        return _split(pv, sdfg, state, a, shape, dtype, 0 if cat[0] == 0 else None,
                      lambda st_, part, off, size, out: _insert(st_, node(), {'A': part},
                                                                {x: b if cat[0] == 0 else (b, _block(sdfg, b, 0, off, size))},
                                                                (y, ) + out))
    out, _ = sdfg.add_temp_transient(shape, dtype)
    return _insert(state, node(), {'A': a}, {x: b}, (y, out))


@oprepo.replaces_operator('Array', 'MatMult', otherclass='Structure')
def _dense_matmult_sparse(pv, sdfg: dace.SDFG, state: dace.SDFGState, b: str, a: str):
    st = _stype(sdfg, a)
    bdesc = sdfg.arrays[b]
    if st.rank != 2 or len(bdesc.shape) > 2:
        return TENSOR_OPERATIONS['matmul'](pv, sdfg, state, b, a)
    _check_inner(sdfg, bdesc.shape, st.shape, f'{_shown(b, sdfg)} @ {_shown(a, sdfg)}')
    if len(bdesc.shape) not in (1, 2):
        raise errors.UnsupportedOperationError(f'dense @ sparse with a {len(bdesc.shape)}-D left operand')
    dtype = dace.dtypes.result_type_of(st.dtype, bdesc.dtype)
    shape = [st.cols] if len(bdesc.shape) == 1 else [bdesc.shape[0], st.cols]
    cat = base.concat_of(sdfg, a)
    if cat is not None:  # column blocks of the result, or a sum over row blocks of A and column blocks of b
        last = len(bdesc.shape) - 1
        return _split(pv, sdfg, state, a, shape, dtype, last if cat[0] == 1 else None,
                      lambda st_, part, off, size, out: _insert(st_, DenseSpMM(), {'A': part}, {
                          '_B': b if cat[0] == 1 else (b, _block(sdfg, b, last, off, size))
                      }, ('_C', ) + out))
    out, _ = sdfg.add_temp_transient(shape, dtype)
    return _insert(state, DenseSpMM(), {'A': a}, {'_B': b}, ('_C', out))


@oprepo.replaces_attribute('Structure', 'T')
def _sparse_transpose(pv, sdfg: dace.SDFG, state: dace.SDFGState, a: str):
    return _transposed(sdfg, a)


def _transposed(sdfg, a: str) -> str:
    """``a.T``: a transposed view; of a concatenation, the concatenation of the transposed
    parts along the other axis (still no storage). Of a tensor: its dimensions reversed."""
    if _stype(sdfg, a).rank != 2:
        return TENSOR_OPERATIONS['transpose'](None, sdfg, None, a)
    cat = base.concat_of(sdfg, a)
    if cat is None:
        return base.transposed_alias(sdfg, a)
    st = _stype(sdfg, a)
    parts = [_transposed(sdfg, p) for p in cat[1]]
    return base.concat_alias(sdfg, parts, 1 - cat[0], _csr_type(st.dtype, st.cols, st.rows, st.index_dtype, _vals_count(st)),
                             f'{_shown(a, sdfg)}.T')


# ---------------------------------------------------------------------- element-wise on values
#: The value functions for which a sum of duplicates differs from the duplicates mapped one by one.
_NONLINEAR = frozenset(('relu', 'exp', 'sqrt', 'abs', 'sin', 'tanh', 'square', 'sigmoid', 'spones'))


def _has_duplicates(st) -> bool:
    """Whether data of type ``st`` (or the data a view reads) may hold entries of equal
    coordinates (a level that is not unique: COO, a sum of tensors)."""
    return not all(l.unique for l in st.fmt.levels)


def _map_values(sdfg, state, a: str, function: str, alpha=None, coalesced=False):
    """``f(A)`` on A's stored values (A's pattern; of a COO matrix each stored entry, as
    scipy's). Of a tensor (rank other than 2) that may hold duplicates (a COO argument, a sum
    of tensors) a function for which they must be summed first (:data:`_NONLINEAR`) reads
    the tensor sorted with duplicates summed (``coalesced``: done), as pydata's and torch's."""
    if function in _NONLINEAR and not coalesced and base.concat_of(sdfg, a) is None and \
            _stype(sdfg, a).rank != 2 and _has_duplicates(_stype(sdfg, a)):
        return _map_values(sdfg, state, _materialise(sdfg, state, a, coalesce=True), function, alpha, True)
    stored, transposed, steps = base.resolve_view(sdfg, a)
    if steps and base.concat_of(sdfg, a) is None and (_stype(sdfg, a).rank != 2 or _stype(sdfg, stored).rank != 2):
        # f(view of T) is the same view of f(T): the function of the stored values, seen as before
        mapped = _map_values(sdfg, state, stored, function, alpha, coalesced)
        return base.view_alias(sdfg, _transposed(sdfg, mapped) if transposed else mapped, decode_steps(steps),
                               _shown(a, sdfg))
    a = _stored(sdfg, state, a)
    stored, transposed, steps = base.resolve_view(sdfg, a)
    if transposed and not steps:  # f(A.T) is f(A).T: on the stored matrix, read transposed
        return _transposed(sdfg, _map_values(sdfg, state, stored, function, alpha, coalesced))
    st = _stype(sdfg, a)
    node = MapValues(function=function)
    dense_in = {}
    out_dtype = st.dtype
    if isinstance(alpha, str) and alpha in sdfg.arrays:
        node.alpha_is_data = True
        dense_in[ALPHA] = alpha
        out_dtype = dace.dtypes.result_type_of(st.dtype, sdfg.arrays[alpha].dtype)
    elif alpha is not None:
        node.alpha = str(alpha)
        if isinstance(alpha, float) and st.dtype not in (dace.float32, dace.float64):
            out_dtype = dace.float64
    elif function in ('sqrt', 'exp', 'sigmoid', 'sin', 'tanh') and st.dtype in (dace.int32, dace.int64):
        out_dtype = dace.float64
    out_type = st if out_dtype == st.dtype else st.fmt.type(out_dtype, *st.shape, st.index_dtype, **st.sizes)
    return _insert(state, node, {'A': a}, dense_in, sparse_out=('out', out_type, 'mapped'))


for _other in ('NumConstant', 'symbol', 'Scalar'):

    @oprepo.replaces_operator('Structure', 'Mult', otherclass=_other)
    def _sparse_times_scalar(pv, sdfg, state, a, alpha):
        return _map_values(sdfg, state, a, 'scale', alpha)

    @oprepo.replaces_operator(_other, 'Mult', otherclass='Structure')
    def _scalar_times_sparse(pv, sdfg, state, alpha, a):
        return _map_values(sdfg, state, a, 'scale', alpha)

    @oprepo.replaces_operator('Structure', 'Div', otherclass=_other)
    def _sparse_div_scalar(pv, sdfg, state, a, alpha):
        if isinstance(alpha, str):
            raise errors.UnsupportedOperationError('A / x with a data scalar x: multiply by 1 / x instead')
        return _map_values(sdfg, state, a, 'scale', 1.0 / alpha if isinstance(alpha, (int, float)) else 1 / alpha)


    @oprepo.replaces_operator('Structure', 'MatMult', otherclass=_other)
    def _sparse_matmult_scalar(pv, sdfg, state, a, alpha):
        raise errors.UnsupportedOperationError(f"{_shown(a, sdfg)} @ {alpha}: the right operand is a scalar; use '*' "
                                               "to scale a sparse matrix (as NumPy and scipy do)")

    @oprepo.replaces_operator(_other, 'MatMult', otherclass='Structure')
    def _scalar_matmult_sparse(pv, sdfg, state, alpha, a):
        raise errors.UnsupportedOperationError(f"{alpha} @ {_shown(a, sdfg)}: the left operand is a scalar; use '*' "
                                               "to scale a sparse matrix (as NumPy and scipy do)")


def _refuse_comparison(symbol: str, sparse_left: bool):
    def refuse(pv, sdfg, state, left, right):
        a, b = (_shown(left, sdfg), right) if sparse_left else (left, _shown(right, sdfg))
        raise errors.UnsupportedOperationError(
            f'{a} {symbol} {b}: comparisons of a sparse matrix (boolean masks such as A[A > 0]) are not supported; '
            'compare a dense array instead')
    return refuse


for _op, _symbol in (('Gt', '>'), ('Lt', '<'), ('GtE', '>='), ('LtE', '<='), ('Eq', '=='), ('NotEq', '!=')):
    for _other in ('NumConstant', 'symbol', 'Scalar', 'Array', 'Structure'):
        oprepo.replaces_operator('Structure', _op, otherclass=_other)(_refuse_comparison(_symbol, True))
        if _other != 'Structure':
            oprepo.replaces_operator(_other, _op, otherclass='Structure')(_refuse_comparison(_symbol, False))


@oprepo.replaces_operator('Structure', 'USub')
def _sparse_neg(pv, sdfg, state, a, _none=None):
    return _map_values(sdfg, state, a, 'neg')


def _register_function(fname):

    def impl(pv, sdfg, state, a):
        return _map_values(sdfg, state, a, fname)

    oprepo.replaces(f'sdfgsparse.{fname}')(impl)
    oprepo.replaces(f'sdfgsparse.ops.functions.{fname}')(impl)


for _f in ('relu', 'exp', 'sqrt', 'abs', 'sin', 'tanh', 'square', 'sigmoid', 'spones'):
    _register_function(_f)


# ---------------------------------------------------------------------- sparse with dense, same shape
def _same_shape(sdfg, st, ddesc, what):
    if len(ddesc.shape) != 2:
        raise errors.ShapeError(f'{what}: the dense operand must be 2-D like the sparse one, got shape '
                                f'{tuple(ddesc.shape)}')
    for d, (a, b) in enumerate(zip(st.shape, ddesc.shape)):
        require_equal(sdfg, a, b, f'{what}: {"rows" if d == 0 else "columns"} of the sparse and the dense operand')


def _mul_dense(sdfg, state, a, d):
    if _stype(sdfg, a).rank != 2:
        return TENSOR_OPERATIONS['mul_dense'](sdfg, state, a, d)
    a = _stored(sdfg, state, a)
    st = _stype(sdfg, a)
    ddesc = sdfg.arrays[d]
    _same_shape(sdfg, st, ddesc, f'{_shown(a, sdfg)} * {_shown(d, sdfg)}')
    dtype = dace.dtypes.result_type_of(st.dtype, ddesc.dtype)
    out_type = st if dtype == st.dtype else st.fmt.type(dtype, st.rows, st.cols, st.index_dtype, **st.sizes)
    return _insert(state, SparseMulDense(), {'A': a}, {'_D': d}, sparse_out=('out', out_type, 'prod'))


def _add_dense(sdfg, state, a, d, sparse_sign, dense_sign, pv=None):
    if _stype(sdfg, a).rank != 2:
        return TENSOR_OPERATIONS['add_dense'](pv, sdfg, state, a, d, sparse_sign, dense_sign)
    st = _stype(sdfg, a)
    ddesc = sdfg.arrays[d]
    _same_shape(sdfg, st, ddesc, f'{_shown(a, sdfg)} + {_shown(d, sdfg)}')
    out, _ = sdfg.add_temp_transient(list(ddesc.shape), dace.dtypes.result_type_of(st.dtype, ddesc.dtype))
    node = SparseAddDense(sparse_sign=sparse_sign, dense_sign=dense_sign)
    return _insert(state, node, {'A': a}, {'_D': d}, ('_out', out))


@oprepo.replaces_operator('Structure', 'Mult', otherclass='Array')
def _sparse_mul_dense(pv, sdfg, state, a, d):
    return _mul_dense(sdfg, state, a, d)


@oprepo.replaces_operator('Array', 'Mult', otherclass='Structure')
def _dense_mul_sparse(pv, sdfg, state, d, a):
    return _mul_dense(sdfg, state, a, d)


@oprepo.replaces_operator('Structure', 'Add', otherclass='Array')
def _sparse_add_dense(pv, sdfg, state, a, d):
    return _add_dense(sdfg, state, a, d, 1, 1, pv)


@oprepo.replaces_operator('Array', 'Add', otherclass='Structure')
def _dense_add_sparse(pv, sdfg, state, d, a):
    return _add_dense(sdfg, state, a, d, 1, 1, pv)


@oprepo.replaces_operator('Structure', 'Sub', otherclass='Array')
def _sparse_sub_dense(pv, sdfg, state, a, d):
    return _add_dense(sdfg, state, a, d, 1, -1, pv)


@oprepo.replaces_operator('Array', 'Sub', otherclass='Structure')
def _dense_sub_sparse(pv, sdfg, state, d, a):
    return _add_dense(sdfg, state, a, d, -1, 1, pv)


# ---------------------------------------------------------------------- reductions, SDDMM, attributes
@oprepo.replaces_method('Structure', 'sum')
def _sparse_sum(pv, sdfg, state, a, axis=None):
    st = _stype(sdfg, a)
    if st.rank != 2:
        return TENSOR_OPERATIONS['sum'](sdfg, state, a, st, axis)
    if axis is None:
        shape, ax = [1], -1
    elif axis in (0, -2):
        shape, ax = [st.cols], 0
    elif axis in (1, -1):
        shape, ax = [st.rows], 1
    else:
        raise errors.UnsupportedOperationError(f'A.sum(axis={axis!r}): axis must be None, 0 or 1')
    return _sum_node(sdfg, state, a, shape, ax, sum_dtype(st.dtype), count=False, pv=pv)


_dense_numpy_sum = oprepo.Replacements.get('numpy.sum')


@oprepo.replaces('numpy.sum')
def _numpy_sum(pv, sdfg, state, a, axis=None):
    """``np.sum(A, axis)`` of a sparse ``A`` is ``A.sum(axis)``; anything else goes to DaCe's."""
    name = base.resolve_alias(a)[0] if isinstance(a, str) else None
    if name in sdfg.arrays and is_sparse_desc(sdfg.arrays[name]):
        return _sparse_sum(pv, sdfg, state, a, axis)
    return _dense_numpy_sum(pv, sdfg, state, a, axis=axis)


def _sum_node(sdfg, state, a, shape, axis, dtype, count, pv=None):
    """``A.sum(axis)`` (``count``: the number of stored entries); of a concatenation, the
    parts' sums into their blocks of the result, or added (``pv``: the visitor, for the sum)."""

    def node():
        n = SparseSum(axis=axis)
        n.count = count
        return n

    cat = base.concat_of(sdfg, a)
    if cat is not None:
        return _split(pv, sdfg, state, a, shape, dtype, 0 if (cat[0], axis) in ((0, 1), (1, 0)) else None,
                      lambda st_, part, off, size, out: _insert(st_, node(), {'A': part}, dense_out=('_out', ) + out))
    out, _ = sdfg.add_temp_transient(shape, dtype)
    return _insert(state, node(), {'A': a}, dense_out=('_out', out))


def _sddmm(pv, sdfg, state, S, X, Y):
    S = _stored(sdfg, state, S)
    st = _stype(sdfg, S)
    xd, yd = sdfg.arrays[X], sdfg.arrays[Y]
    if len(xd.shape) != 2 or len(yd.shape) != 2:
        raise errors.ShapeError('ss.sddmm(S, X, Y): X and Y must be 2-D')
    _check_inner(sdfg, xd.shape, yd.shape, f'ss.sddmm({_shown(S, sdfg)}, {X}, {Y}): {X} @ {Y}')
    _same_shape(sdfg, st, dace.data.Array(xd.dtype, [xd.shape[0], yd.shape[1]]),
                f'ss.sddmm({_shown(S, sdfg)}, {X}, {Y}): {_shown(S, sdfg)} and {X} @ {Y}')
    dtype = dace.dtypes.result_type_of(st.dtype, xd.dtype, yd.dtype)
    out_type = st if dtype == st.dtype else st.fmt.type(dtype, st.rows, st.cols, st.index_dtype, **st.sizes)
    return _insert(state, SDDMM(), {'S': S}, {'_X': X, '_Y': Y}, sparse_out=('out', out_type, 'sddmm'))


oprepo.replaces('sdfgsparse.sddmm')(_sddmm)
oprepo.replaces('sdfgsparse.ops.functions.sddmm')(_sddmm)


def _softmax(pv, sdfg, state, S, axis=1):
    name = base.resolve_alias(S)[0] if isinstance(S, str) else None
    if name not in sdfg.arrays or not is_sparse_desc(sdfg.arrays[name]):
        raise errors.UnsupportedOperationError(f'ss.softmax(S): S must be a sparse matrix inside a program, got {S!r}')
    if _stype(sdfg, S).rank != 2:
        raise errors.UnsupportedOperationError(f'ss.softmax({_shown(S, sdfg)}): a tensor of {_stype(sdfg, S).rank} '
                                               'dimensions; this operation takes matrices')
    S = _stored(sdfg, state, S)
    st = _stype(sdfg, S)
    node = SparseSoftmax(axis=normalise_axis(axis))
    dtype = st.dtype if st.dtype in (dace.float32, dace.float64) else dace.float64
    out_type = st if dtype == st.dtype else st.fmt.type(dtype, st.rows, st.cols, st.index_dtype, **st.sizes)
    return _insert(state, node, {'A': S}, sparse_out=('out', out_type, 'softmax'))


oprepo.replaces('sdfgsparse.softmax')(_softmax)
oprepo.replaces('sdfgsparse.ops.functions.softmax')(_softmax)


@oprepo.replaces_attribute('Structure', 'shape')
def _sparse_shape(pv, sdfg, state, a):
    return tuple(_stype(sdfg, a).shape)


@oprepo.replaces_attribute('Structure', 'nnz')
def _sparse_nnz(pv, sdfg, state, a):
    """Number of stored entries: a symbol for formats that store no padding, else a count."""
    st = _stype(sdfg, a)
    if _is_view(sdfg, a) or base.concat_of(sdfg, a) is not None or st.fmt.name in ('ELL', 'DIA') or \
            st.fmt.name.rstrip('T') in ('ELL', 'DIA'):
        return _sum_node(sdfg, state, a, [1], -1, dace.int64, count=True, pv=pv)
    return st.fmt.counts(st.shape, st.sizes)[-1]


# ---------------------------------------------------------------------- sparse with sparse
def _csr_type(dtype, rows, cols, itype, cap):
    return CSR.type(dtype, rows, cols, itype, n1=cap)


def _vals_count(st):
    return st.fmt.counts(st.shape, st.sizes)[-1]


def _index_type(*sts):
    return dace.int64 if any(s.index_dtype == dace.int64 for s in sts) else dace.int32


def _convert(sdfg, state, a: str, target: str = 'CSR') -> str:
    if target not in TARGETS:
        raise errors.UnsupportedOperationError(f'ss.convert inside a program supports {", ".join(TARGETS)}; '
                                               f'convert to {target} outside the program with ss.convert')
    if base.concat_of(sdfg, a) is not None:
        return _concat_materialise(sdfg, state, a, target)
    st = _stype(sdfg, a)
    cap = _vals_count(st)
    out_type = _csr_type(st.dtype, st.rows, st.cols, st.index_dtype, cap) if target == 'CSR' else \
        CSC.type(st.dtype, st.rows, st.cols, st.index_dtype, n1=cap)
    return _insert(state, Convert(target=target), {'A': a}, sparse_out=('out', out_type, 'converted'))


def _sparse_binary(sdfg, state, a, b, kind, sign=1):
    sta, stb = _stype(sdfg, a), _stype(sdfg, b)
    op = '*' if kind == 'mul' else '+' if sign > 0 else '-'
    if sta.rank != 2 or stb.rank != 2:
        return TENSOR_OPERATIONS[kind](sdfg, state, a, b, sign)
    for d, (x, y) in enumerate(zip(sta.shape, stb.shape)):
        require_equal(sdfg, x, y, f'{_shown(a, sdfg)} {op} {_shown(b, sdfg)}: {"rows" if d == 0 else "columns"}')
    if kind == 'mul':
        if not all(l.unique for l in sta.fmt.levels):
            a, sta = _convert(sdfg, state, a), None
            sta = _stype(sdfg, a)
        if not all(l.unique for l in stb.fmt.levels):
            b = _convert(sdfg, state, b)
            stb = _stype(sdfg, b)
    dtype = dace.dtypes.result_type_of(sta.dtype, stb.dtype)
    node = SparseAdd(sign_B=sign) if kind == 'add' else SparseMul()
    cap = _vals_count(sta) + _vals_count(stb)
    out_type = result_format(sta).type(dtype, sta.rows, sta.cols, _index_type(sta, stb), n1=cap)
    return _insert(state, node, {'A': a, 'B': b}, sparse_out=('out', out_type, kind))


@oprepo.replaces_operator('Structure', 'Add', otherclass='Structure')
def _sparse_add_sparse(pv, sdfg, state, a, b):
    return _sparse_binary(sdfg, state, a, b, 'add', 1)


@oprepo.replaces_operator('Structure', 'Sub', otherclass='Structure')
def _sparse_sub_sparse(pv, sdfg, state, a, b):
    return _sparse_binary(sdfg, state, a, b, 'add', -1)


@oprepo.replaces_operator('Structure', 'Mult', otherclass='Structure')
def _sparse_mul_sparse(pv, sdfg, state, a, b):
    return _sparse_binary(sdfg, state, a, b, 'mul')


def _oriented(sdfg, name: str):
    """(stored data, read transposed) of sparse data ``name``: an argument, its ``.T``, or a
    view (its transpositions counted)."""
    stored, tr, steps = base.resolve_view(sdfg, name)
    flips = sum(isinstance(s, Transpose) for s in decode_steps(steps)) if steps else 0
    return stored, bool(tr) ^ bool(flips % 2)


@oprepo.replaces_operator('Structure', 'MatMult', otherclass='Structure')
def _sparse_matmult_sparse(pv, sdfg, state, a, b):
    sta, stb = _stype(sdfg, a), _stype(sdfg, b)
    _check_inner(sdfg, sta.shape, stb.shape, f'{_shown(a, sdfg)} @ {_shown(b, sdfg)}')
    for name in (a, b):
        if base.concat_of(sdfg, name) is not None:
            raise errors.UnsupportedOperationError(f'{_shown(a, sdfg)} @ {_shown(b, sdfg)}: sparse @ sparse does not take '
                                                   'a concatenation yet; multiply the parts and concatenate the '
                                                   'products')
    (abase, ta), (bbase, tb) = (_oriented(sdfg, n) for n in (a, b))
    for name in (abase, bbase):
        if sdfg.arrays[name].transient:
            raise errors.UnsupportedOperationError('sparse @ sparse: both operands must be program arguments (or '
                                                   'their .T or slices), so that the result can be sized before the '
                                                   'call')
    # a slice's products are among its matrix's: the capacity of the whole product bounds it
    cap = dace.symbol(capacity_symbol(abase, ta, bbase, tb, taken=sdfg.symbols), dace.int64)
    if stb.fmt.name != 'CSR':
        b = _convert(sdfg, state, b)
    dtype = dace.dtypes.result_type_of(sta.dtype, stb.dtype)
    out_type = _csr_type(dtype, sta.rows, stb.cols, _index_type(sta, stb), cap)
    return _insert(state, SpGEMM(), {'A': a, 'B': b}, sparse_out=('out', out_type, 'spgemm'))


def _format_of_text(text: str):
    """The format a program's ``ss.convert(A, fmt)`` names, as DaCe hands it over (source
    text): ``ss.CSR``, ``sdfgsparse.DIA``, ``ss.BSR.with_block(2, 2)``, ``ss.NM[2, 4]``. Read
    from the expression's syntax tree: names of the format catalogue, integer constants,
    ``with_block`` calls and subscripts only (nothing is evaluated as Python)."""
    bad = errors.UnsupportedOperationError(f'ss.convert(A, fmt): fmt must be a format such as ss.CSR, '
                                           f'ss.BSR.with_block(2, 2) or ss.NM[2, 4], got {text!r}')

    def value(n):
        if isinstance(n, ast.Name) and n.id in ('ss', 'sdfgsparse'):
            return _formats
        if isinstance(n, ast.Constant) and type(n.value) is int:
            return n.value
        if isinstance(n, ast.Tuple):
            return tuple(value(x) for x in n.elts)
        if isinstance(n, ast.Attribute) and not n.attr.startswith('_'):
            owner = value(n.value)
            if owner is _formats and n.attr not in _formats.__all__:
                raise bad
            return getattr(owner, n.attr)
        if isinstance(n, ast.Call) and not n.keywords and isinstance(n.func, ast.Attribute) and \
                n.func.attr == 'with_block':
            return value(n.func)(*(value(x) for x in n.args))
        if isinstance(n, ast.Subscript):
            return value(n.value)[value(n.slice)]
        raise bad

    try:
        return value(ast.parse(text.strip(), mode='eval').body)
    except (SyntaxError, AttributeError, TypeError, KeyError, IndexError, ValueError):
        raise bad from None


def _convert_call(pv, sdfg, state, a, fmt):
    if isinstance(fmt, str):
        fmt = _format_of_text(fmt)
    if isinstance(fmt, dace.data.Structure) and is_sparse_desc(fmt):
        fmt = sparse_type_of(fmt).fmt
    if not isinstance(fmt, SparseFormat):
        raise errors.UnsupportedOperationError(f'ss.convert(A, fmt): fmt must be a format such as ss.CSR, got {fmt!r}')
    return _convert(sdfg, state, a, fmt.name)


oprepo.replaces('sdfgsparse.convert')(_convert_call)


# ---------------------------------------------------------------------- values leaving the program
def _sparse_name(sdfg, value) -> bool:
    """``value`` names sparse data of ``sdfg`` (an argument, a result or an ``X.T`` view)."""
    return isinstance(value, str) and value in sdfg.arrays and is_sparse_desc(sdfg.arrays[value])


def _unsupported(what: str, names, sdfg) -> errors.UnsupportedOperationError:
    shown = ', '.join(_shown(n, sdfg) for n in names)
    return errors.UnsupportedOperationError(
        f'{what}: {shown} {"is a sparse matrix" if len(names) == 1 else "are sparse matrices"}, which it does not '
        'take inside a program (sparse operands support @, +, -, *, .T, slices A[a:b, c:d:s], .sum(), .shape, .nnz, '
        'ss.convert and the ss functions); convert to a dense array outside the program, or use the scipy object '
        'there')


def _copy_out(pv, sdfg, name: str) -> str:
    """A new sparse result holding ``name`` as the program sees it: a copy of an argument
    (so that a returned matrix never aliases the caller's), or of the arrays of a
    transposed view read as the transposed format (``X.T`` of a CSR: a CSC)."""
    state = pv._add_state(f'copy_{base.resolve_view(sdfg, name)[0]}')
    return _insert(state, SparseCopy(), {'A': name}, sparse_out=('out', _stype(sdfg, name), 'copy'))


def _leaving(pv, name):
    """The value a ``return`` hands out for ``name``: sparse data that has storage of its
    own (a program's sparse result) as it is, an argument or a view (``A``, ``A.T``,
    ``A.T.T``, a variable bound to one) as a copy."""
    sdfg = pv.sdfg
    if not _sparse_name(sdfg, name):
        return name
    if base.concat_of(sdfg, name) is not None:
        return _concat_materialise(sdfg, pv._add_state('materialise_concat'), name)
    if _is_view(sdfg, name):
        return _materialise(sdfg, pv._add_state(f'materialise_{base.resolve_view(sdfg, name)[0]}'), name)
    base_name, transposed = base.resolve_alias(name)
    if transposed or base_name != name or not sdfg.arrays[base_name].transient:
        return _copy_out(pv, sdfg, name)
    return name


@contextlib.contextmanager
def _watching(pv, method: str, transforms):
    """While active, what the visitor's ``method`` (``_gettype``: where the frontend turns
    an expression into data names; ``_parse_function_arg``: a call's argument) returns
    for one of the AST nodes of ``transforms`` (a list of ``(node, transform)``) is
    replaced by ``transform(result)``; other expressions, including the parts of those
    nodes, parse as usual. Watches nest."""
    by_id = {id(n): f for n, f in transforms}
    previous = pv.__dict__.get(method)
    inner = previous or getattr(ProgramVisitor, method).__get__(pv)

    def watched(opnode):
        parsed = inner(opnode)
        transform = by_id.get(id(opnode))
        return parsed if transform is None else transform(parsed)

    setattr(pv, method, watched)
    try:
        yield
    finally:
        if previous is None:
            del pv.__dict__[method]
        else:
            setattr(pv, method, previous)


def _each(on_value):
    """A ``_gettype`` transform: ``on_value`` applied to each parsed value."""
    return lambda parsed: [(on_value(v), t) for v, t in parsed]


def _defined_data(pv, target):
    """The data an assignment target names (``x``, ``x[i]``, ``A.vals``), or None for a new
    variable."""
    node = target.value if isinstance(target, ast.Subscript) else target
    try:
        name = dace.frontend.python.astutils.rname(node)
    except Exception:  # an unusual target: DaCe decides
        return None
    head, _, rest = name.partition('.')
    head = pv.variables.get(head, head)
    full = f'{head}.{rest}' if rest else head
    return full if full in pv.sdfg.arrays else None


def _refuse_rebinding(pv, node, targets) -> None:
    """``y = A @ y`` in one of our programs, where ``y`` names an argument array: DaCe writes
    the value into the argument (the caller's array), NumPy makes a new array and leaves the
    caller's as it was. Refused, the line named, rather than a silent write into the
    caller's data (``y[:] = ...`` writes into it on purpose; ``y += ...`` does in NumPy too)."""
    for t in targets:
        if not isinstance(t, ast.Name):
            continue
        data = _defined_data(pv, t)
        desc = pv.sdfg.arrays.get(data) if data is not None else None
        if desc is None or desc.transient or isinstance(desc, dace.data.Scalar) or '.' in data:
            continue
        if not _parsing_ours(pv):
            return
        line = getattr(node, 'lineno', None)
        where = f'{pv.filename}:{line}' if line is not None and getattr(pv, 'filename', None) else f'line {line}'
        raise errors.UnsupportedOperationError(
            f'{where}: "{dace.frontend.python.astutils.unparse(node).strip()}" rebinds the argument {t.id!r}; in a '
            f'compiled program that would write into the caller\'s array (NumPy makes a new one). Give the result '
            f'a new name, or write "{t.id}[:] = ..." to update the caller\'s array on purpose')


def _visit_assign(pv, node, node_target, op, dtype=None, is_return=False, _dace=ProgramVisitor._visit_assign):
    """DaCe's assignment (``return`` is one too), with sparse values handled first; a
    rebound argument refused (:func:`_refuse_rebinding`)."""
    targets = node_target.elts if isinstance(node_target, (ast.Tuple, ast.List)) else [node_target]
    if not is_return and op is None and isinstance(node, ast.Assign):
        _refuse_rebinding(pv, node, targets)
    if not is_return:
        for t in targets:
            data = _defined_data(pv, t)
            if data is not None and _sparse_name(pv.sdfg, data) and (op or isinstance(t, ast.Subscript)):
                raise errors.UnsupportedOperationError(f'assignment into {_shown(data, pv.sdfg)}: a sparse matrix (or its '
                                                       'pattern) cannot be written inside a program')
    values = node.value.elts if isinstance(node.value, (ast.Tuple, ast.List)) else [node.value]
    paired = targets if len(targets) == len(values) else [None] * len(values)

    def on_value(t):

        def transform(v):
            if is_return:
                return _leaving(pv, v)
            if not _sparse_name(pv.sdfg, v):
                return v
            if op or not isinstance(t, ast.Name) or _defined_data(pv, t) is not None:
                what = f'{_shown(v, pv.sdfg)} assigned into {dace.frontend.python.astutils.unparse(node_target)}'
                raise errors.UnsupportedOperationError(f'{what}: a sparse matrix cannot be stored into dense data '
                                                       'or existing data inside a program')
            if pv.sdfg.arrays[v].transient:  # a result, or a view (``B = A.T``): B names it
                return v
            # ``B = A``: B names A through an alias, as ``B = A.T`` names A's transposed view (no copy)
            return base.alias(pv.sdfg, v)

        return transform

    with _watching(pv, '_gettype', [(v, _each(on_value(t))) for v, t in zip(values, paired)]):
        return _dace(pv, node, node_target, op, dtype, is_return)


class _SparseValue(Exception):
    """Raised from inside DaCe's subscript once its value is known to be sparse data."""

    def __init__(self, name):
        super().__init__(name)
        self.name = name


def _visit_subscript(pv, node, inference=False, _dace=ProgramVisitor.visit_Subscript):
    """DaCe's subscript; on sparse data a slice (:func:`_sparse_subscript`)."""

    def on_value(v):
        if _sparse_name(pv.sdfg, v):
            raise _SparseValue(v)
        return v

    try:
        with _watching(pv, '_gettype', [(node.value, _each(on_value))]):
            return _dace(pv, node, inference)
    except _SparseValue as sv:
        return _sparse_subscript(pv, node, sv.name, inference)


def _slice_bound(pv, v, what):
    """A slice bound as a symbolic integer (None stays None); symbols it names become symbols
    of the program (a data scalar is already promoted to one by DaCe's slice parser)."""
    if v is None or isinstance(v, (int, np.integer)):
        return None if v is None else int(v)
    if isinstance(v, str) and v in pv.sdfg.arrays:
        raise errors.UnsupportedOperationError(f'{what}: bound {v!r} is an array, not an integer')
    e = dace.symbolic.pystr_to_symbolic(v) if isinstance(v, str) else v
    if not dace.symbolic.issymbolic(e) and not isinstance(e, (int, np.integer)):
        raise errors.UnsupportedOperationError(f'{what}: bound {v!r} is not an integer or a symbol')
    for sym in sympy.sympify(e).free_symbols:
        if str(sym) not in pv.sdfg.symbols:
            pv.sdfg.add_symbol(str(sym), getattr(sym, 'dtype', dace.int64))
    return e


def _is_int_index(item) -> bool:
    """Whether a parsed subscript item is one index (an integer, or a symbolic integer
    expression), not a slice."""
    return (isinstance(item, (int, np.integer)) and not isinstance(item, bool)) or \
        (isinstance(item, sympy.Basic) and item.is_integer is not False and not item.is_Boolean) or \
        (isinstance(item, str) and not item.startswith('__'))


def _sparse_subscript(pv, node, name, inference):
    """``A[a:b, c:d:s]`` of sparse data: a view (:func:`base.view_alias`), no copy. Slices
    with NumPy's rules (negative bounds, clipping, negative steps), as many as the data's
    dimensions; of a tensor (rank other than 2) also integer indices, each removing its
    dimension (NumPy's ``T[i]``: a slice of one position, then a reshape without it). Of a
    matrix an integer index, ``None`` or ``...`` is refused."""
    sdfg = pv.sdfg
    unparse = ast.unparse  # (DaCe's writes ``::(- 1)``)
    items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    index = ', '.join(unparse(e) for e in items)
    text = f'{_shown(name, sdfg)}[{index}]'
    if not isinstance(node.ctx, ast.Load):
        raise errors.UnsupportedOperationError(f'assignment into {text}: a sparse matrix (or its pattern) cannot be '
                                               'written inside a program')
    parsed = pv._parse_subscript_slice(node.slice)
    if isinstance(node.slice, ast.Tuple):
        parsed = tuple(parsed)
    elif not (isinstance(parsed, tuple) and len(parsed) == 1):  # (one item, as it is or wrapped)
        parsed = (parsed, )
    st = _stype(sdfg, name)
    if len(parsed) > st.rank:
        raise errors.ShapeError(f'{text}: too many indices for a {st.rank}-D sparse '
                                f'{"matrix" if st.rank == 2 else "tensor"} ({len(parsed)} given)')
    steps, dropped = [], []
    for axis, item in enumerate(parsed):
        if st.rank != 2 and not isinstance(item, tuple) and _is_int_index(item):
            i = _slice_bound(pv, item, text)
            n = sympy.sympify(st.shape[axis])
            if isinstance(i, int) and n.is_Integer and not -int(n) <= i < int(n):
                raise errors.ShapeError(f'{text}: index {i} is out of bounds for dimension {axis} of size {n}')
            # (a symbolic index is taken to be in range: its slice of one position is not checked)
            first, _, _ = normalise_slice(n, i, None if isinstance(i, int) and i == -1 else i + 1, 1)
            steps.append(Slice(axis, first, sympy.Integer(1), 1))
            dropped.append(axis)
            continue
        if not isinstance(item, tuple) or len(item) != 3:
            raise errors.UnsupportedOperationError(
                f'{text}: only slices (start:stop:step) select from a sparse matrix inside a program; an integer '
                f'index, None or ... is not supported (write {_shown(name, sdfg)}[i:i + 1] for row i)')
        start, stop, step = (_slice_bound(pv, v, text) for v in item)
        if start is None and stop is None and step in (None, 1):
            continue  # ':' keeps the dimension as it is
        first, count, step = normalise_slice(st.shape[axis], start, stop, step)
        steps.append(Slice(axis, first, count, step))
    shape = list(st.shape)
    for s in steps:
        shape[s.axis] = s.count
    if dropped:
        steps.append(Reshape(shape, [v for d, v in enumerate(shape) if d not in dropped]))
        shape = [v for d, v in enumerate(shape) if d not in dropped]
    if inference:
        return st.dtype, shape
    if not steps:
        return name
    cat = base.concat_of(sdfg, name)
    if cat is not None:
        if all(s.axis != cat[0] for s in steps):  # a slice across the parts: the concatenation of their slices
            parts = [base.view_alias(sdfg, p, steps, f'{_shown(p, sdfg)}[{index}]') for p in cat[1]]
            return base.concat_alias(sdfg, parts, cat[0],
                                     _csr_type(st.dtype, shape[0], shape[1], st.index_dtype, _vals_count(st)), text)
        name = _concat_materialise(sdfg, pv._add_state('materialise_concat'), name)
    return base.view_alias(sdfg, name, steps, text)


class _SparseCall(Exception):
    """Raised from inside DaCe's callback once an argument is known to be sparse data."""


def _create_callback(pv, node, *args, _dace=ProgramVisitor.create_callback, **kwargs):
    """DaCe's Python callback (a call of a function it cannot parse), refused for sparse
    arguments (the callback would receive the argument struct, not a matrix), except for
    the NumPy functions of :data:`CALLBACK_FUNCTIONS`, which get the parsed arguments (each
    parsed once: those DaCe parsed before the sparse one, then the rest)."""
    name = dace.frontend.python.astutils.rname(node)
    qualname = pv.closure.callbacks.get(name, (name, ))[0]  # numpy_linalg_norm -> numpy.linalg.norm
    ours = CALLBACK_FUNCTIONS.get(qualname)
    parsed_args = []

    def check(parsed):
        parsed_args.append(parsed)
        found = _sparse_operands(pv.sdfg, parsed)
        if found and ours is not None:
            raise _SparseCall()
        if found:
            raise _unsupported(f'{qualname} (a Python callback)', found, pv.sdfg)
        return parsed

    arg_nodes = list(node.args) + [kw.value for kw in node.keywords]
    try:
        with _watching(pv, '_parse_function_arg', [(a, check) for a in arg_nodes]):
            return _dace(pv, node, *args, **kwargs)
    except _SparseCall:
        pass
    values = parsed_args + [pv._parse_function_arg(a) for a in arg_nodes[len(parsed_args):]]
    positional = values[:len(node.args)]
    keywords = {kw.arg: v for kw, v in zip(node.keywords, values[len(node.args):])}
    pv._add_state(f'call_{node.lineno}')
    result = ours(pv, pv.sdfg, pv.last_block, *positional, **keywords)
    return list(result) if isinstance(result, (tuple, list)) else [result]


def _visit_call(pv, node, *args, _dace=ProgramVisitor.visit_Call, **kwargs):
    """DaCe's call; in our programs, a call of a function of :data:`CALLBACK_FUNCTIONS` without
    DaCe's warning that it becomes a Python callback (with a sparse operand it does not:
    :func:`_create_callback`)."""
    if CALLBACK_FUNCTIONS and _parsing_ours(pv) and isinstance(node.func, (ast.Name, ast.Attribute)):
        try:
            name = dace.frontend.python.astutils.rname(node)
        except NotImplementedError:  # (a method of a call's result: not one of them)
            name = None
        if name is not None and pv.closure.callbacks.get(name, (name, ))[0] in CALLBACK_FUNCTIONS:
            with warnings.catch_warnings():
                warnings.filterwarnings('ignore', message='Performance warning: Automatically creating callback')
                return _dace(pv, node, *args, **kwargs)
    return _dace(pv, node, *args, **kwargs)


# ---------------------------------------------------------------------- NumPy on sparse operands
def _ours(fn) -> bool:
    return getattr(fn, '__module__', '').startswith('sdfgsparse')


def _sparse_operands(sdfg, values) -> list:
    """The sparse data names among ``values`` (nested tuples, lists and dicts)."""
    found = []
    stack = [values]
    while stack:
        v = stack.pop()
        if isinstance(v, (tuple, list)):
            stack.extend(reversed(v))
        elif isinstance(v, dict):
            stack.extend(reversed(list(v.values())))
        elif _sparse_name(sdfg, v) and v not in found:
            found.append(v)
    return found


_GUARDS = {}


def _guarded_function(fn, name: str):
    """``fn`` (DaCe's replacement of function ``name``), refusing sparse operands."""
    key = ('function', id(fn), name)
    hit = _GUARDS.get(key)
    if hit is None or hit[0] is not fn:

        def guarded(pv, sdfg, state, *args, **kwargs):
            found = _sparse_operands(sdfg, (args, kwargs))
            if found:
                sparse_impl = SPARSE_FUNCTIONS.get(name)
                if sparse_impl is None:
                    raise _unsupported(name, found, sdfg)
                return sparse_impl(pv, sdfg, state, *args, **kwargs)
            return fn(pv, sdfg, state, *args, **kwargs)

        hit = _GUARDS[key] = (fn, guarded)
    return hit[1]


def _guarded_ufunc(fn, method):
    key = ('ufunc', id(fn), method)
    hit = _GUARDS.get(key)
    if hit is None or hit[0] is not fn:

        def guarded(pv, node, sdfg, state, ufunc_name, args, kwargs):
            found = _sparse_operands(sdfg, (args, kwargs))
            if found:
                raise _unsupported(f'numpy.{ufunc_name}' + (f'.{method}' if method else ''), found, sdfg)
            return fn(pv, node, sdfg, state, ufunc_name, args, kwargs)

        hit = _GUARDS[key] = (fn, guarded)
    return hit[1]


def _guarded_method(fn, classname: str, method: str):
    key = ('method', id(fn), classname, method)
    hit = _GUARDS.get(key)
    if hit is None or hit[0] is not fn:

        def guarded(pv, sdfg, state, obj, *args, **kwargs):
            if _sparse_name(sdfg, obj):
                raise _unsupported(f'{_shown(obj, sdfg)}.{method}()', [obj], sdfg)
            if fn is None:  # DaCe's own answer for a method it does not know
                raise DaceSyntaxError(pv, None, f'Method "{method}" is not registered for object type "{classname}"')
            found = _sparse_operands(sdfg, (args, kwargs))
            if found:
                raise _unsupported(f'{obj}.{method}()', found, sdfg)
            return fn(pv, sdfg, state, obj, *args, **kwargs)

        hit = _GUARDS[key] = (fn, guarded)
    return hit[1]


def _get_function(name, _dace=oprepo.Replacements.get):
    fn = _dace(name)
    return fn if fn is None or _ours(fn) else _guarded_function(fn, name)


def _get_ufunc(ufunc_method=None, _dace=oprepo.Replacements.get_ufunc):
    fn = _dace(ufunc_method)
    return fn if fn is None or _ours(fn) else _guarded_ufunc(fn, ufunc_method)


def _get_method(class_or_name, method_name, _dace=oprepo.Replacements.get_method):
    fn = _dace(class_or_name, method_name)
    classname = class_or_name if isinstance(class_or_name, str) else class_or_name.__name__
    if _ours(fn) or (fn is None and classname != 'Structure'):
        return fn
    return _guarded_method(fn, classname, method_name)


def _np_copy(pv, sdfg, state, a, *args, **kwargs):
    if args or kwargs or not _sparse_name(sdfg, a):
        raise _unsupported('numpy.copy with arguments besides the matrix', _sparse_operands(sdfg, (a, args, kwargs)), sdfg)
    if _is_view(sdfg, a):
        return _materialise(sdfg, state, a)
    return _insert(state, SparseCopy(), {'A': a}, sparse_out=('out', _stype(sdfg, a), 'copy'))


def _axes_of(value, what: str, a: str, sdfg) -> tuple:
    """``axes`` of a 2-D sparse operand as non-negative integers (NumPy's negative ones
    too); a ShapeError names anything else."""
    items = value if isinstance(value, (tuple, list)) else (value, )
    out = []
    for v in items:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not -2 <= int(v) < 2:
            raise errors.ShapeError(f'{what}: axis {v!r} is out of range for the 2-D sparse matrix {_shown(a, sdfg)} '
                                    '(axes are 0, 1, -1, -2)')
        out.append(int(v) % 2)
    return tuple(out)


def _np_transpose(pv, sdfg, state, a, axes=None, *args):
    if args or not _sparse_name(sdfg, a):
        raise _unsupported(f'numpy.transpose with axes={axes!r}', _sparse_operands(sdfg, (a, axes, args)), sdfg)
    if _stype(sdfg, a).rank != 2:
        return TENSOR_OPERATIONS['transpose'](pv, sdfg, state, a, axes)
    if axes is None:
        return _transposed(sdfg, a)
    order = _axes_of(axes, f'numpy.transpose({_shown(a, sdfg)}, {axes!r})', a, sdfg)
    if sorted(order) != [0, 1]:
        raise errors.ShapeError(f'numpy.transpose({_shown(a, sdfg)}, {axes!r}): axes must be a permutation of '
                                '(0, 1) for a 2-D sparse matrix')
    return _transposed(sdfg, a) if order == (1, 0) else a


# ---------------------------------------------------------------------- concatenation
def _concat_materialise(sdfg, state, name: str, target: str = None) -> str:
    """The concatenation ``name`` as a new canonical matrix (a ``SparseConcat`` node):
    ``target`` (CSR or CSC); by default CSC where every part is stored column-major, else
    CSR."""
    axis, parts = base.concat_of(sdfg, name)
    st = _stype(sdfg, name)
    if target is None:
        target = 'CSC' if all(_stype(sdfg, p).fmt.outer_dim == 1 for p in parts) else 'CSR'
    fmt = CSR if target == 'CSR' else CSC
    out_type = fmt.type(st.dtype, st.rows, st.cols, st.index_dtype, n1=_vals_count(st))
    return _insert(state, SparseConcat(axis=axis, parts=len(parts)), {part_prefix(p): n for p, n in enumerate(parts)},
                   sparse_out=('out', out_type, 'concat'))


def _block(sdfg, name: str, dim: int, offset, size) -> dace.subsets.Range:
    """The part of dense data ``name`` at ``offset:offset + size`` along ``dim``, whole along
    the others."""
    ranges = [(0, s - 1, 1) for s in sdfg.arrays[name].shape]
    ranges[dim] = (offset, offset + size - 1, 1)
    return dace.subsets.Range(ranges)


def _split(pv, sdfg, state, cat: str, shape, dtype, out_dim, emit) -> str:
    """A linear operation on the concatenation ``cat`` as one operation per part, fused:
    no part is copied. ``emit(state, part, offset, size, out)`` inserts the operation of one
    part (at ``offset``, ``size`` long along the concatenation axis) writing ``out``
    (``(data,)`` or ``(data, subset)``). ``out_dim``: the dimension of the result (of
    ``shape`` and ``dtype``) that the concatenation axis becomes, each part writing its
    block of it; None where the operation sums over that axis, each part then writing a
    partial result, added afterwards."""
    axis, parts = base.concat_of(sdfg, cat)
    offset = 0
    out = None
    partials = []
    if out_dim is not None:
        out, _ = sdfg.add_temp_transient(shape, dtype)
    for p in parts:
        size = _stype(sdfg, p).shape[axis]
        if out_dim is not None:
            emit(state, p, offset, size, (out, _block(sdfg, out, out_dim, offset, size)))
        else:
            t, _ = sdfg.add_temp_transient(shape, dtype)
            emit(state, p, offset, size, (t, ))
            partials.append(t)
        offset = offset + size
    if out is not None:
        return out
    add = oprepo.Replacements.getop('Array', 'Add', otherclass='Array')
    total = partials[0]
    for t in partials[1:]:
        total = add(pv, sdfg, pv._add_state('concat_sum'), total, t)
    return total


_CONCAT_CALLS = {'numpy.concatenate': 'np.concatenate', 'numpy.vstack': 'np.vstack', 'numpy.row_stack': 'np.vstack',
                 'numpy.hstack': 'np.hstack', 'numpy.column_stack': 'np.hstack'}


def _sparse_concat(pv, sdfg, state, arrays, axis, call: str) -> str:
    """``np.concatenate(arrays, axis)`` (``np.vstack``: axis 0, ``np.hstack``: axis 1) of
    sparse matrices: a concatenation (:func:`base.concat_alias`), no storage. Parts that
    are concatenations along the same axis are flattened into it; along the other axis,
    materialised first."""
    names = list(arrays) if isinstance(arrays, (tuple, list)) else [arrays]
    # a call's result inside the tuple arrives as a one-element list
    names = [n[0] if isinstance(n, (tuple, list)) and len(n) == 1 else n for n in names]
    what = f'{call}(({", ".join(_shown(n, sdfg) if _sparse_name(sdfg, n) else str(n) for n in names)}), axis={axis})'
    dense = [str(n) for n in names if not _sparse_name(sdfg, n)]
    if dense:
        raise errors.UnsupportedOperationError(f'{what}: {", ".join(dense)} {"is" if len(dense) == 1 else "are"} not '
                                               'sparse; a program concatenates sparse matrices with sparse matrices '
                                               'only (make the dense operand sparse outside the program)')
    if axis is None:
        raise errors.UnsupportedOperationError(f'{what}: axis=None flattens the operands, which sparse matrices do not '
                                               'support inside a program; give axis 0 or 1')
    (axis, ) = _axes_of((axis, ), what, names[0], sdfg)  # (a tuple axis is refused too)
    sts = [_stype(sdfg, n) for n in names]
    other = 1 - axis
    for n, st in zip(names[1:], sts[1:]):
        require_equal(sdfg, sts[0].shape[other], st.shape[other],
                      f'{what}: {"columns" if other else "rows"} of {_shown(names[0], sdfg)} and {_shown(n, sdfg)}')
    parts = []
    for n in names:
        cat = base.concat_of(sdfg, n)
        if cat is not None and cat[0] == axis:
            parts.extend(cat[1])
        elif cat is not None:
            parts.append(_concat_materialise(sdfg, state, n))
        else:
            parts.append(n)
    if len(parts) == 1:
        return names[0]
    shape = list(sts[0].shape)
    shape[axis] = sum((st.shape[axis] for st in sts), sympy.Integer(0))
    dtype = dace.dtypes.result_type_of(*(st.dtype for st in sts))
    cap = sum((_vals_count(st) for st in sts), sympy.Integer(0))
    return base.concat_alias(sdfg, parts, axis, _csr_type(dtype, shape[0], shape[1], _index_type(*sts), cap), what)


def _np_concatenate(pv, sdfg, state, arrays, axis=0, out=None, **kwargs):
    if out is not None or kwargs:
        raise _unsupported('numpy.concatenate with out, dtype or casting', _sparse_operands(sdfg, (arrays, out)), sdfg)
    return _sparse_concat(pv, sdfg, state, arrays, axis, 'np.concatenate')


def _stacker(name: str, axis: int):

    def stack(pv, sdfg, state, tup, **kwargs):
        if kwargs:
            raise _unsupported(f'{name} with dtype or casting', _sparse_operands(sdfg, tup), sdfg)
        return _sparse_concat(pv, sdfg, state, tup, axis, _CONCAT_CALLS[name])

    return stack


def _new_axis_stack(name: str):

    def refuse(pv, sdfg, state, arrays, *args, **kwargs):
        found = _sparse_operands(sdfg, arrays)
        raise errors.UnsupportedOperationError(
            f'{name}: {", ".join(_shown(n, sdfg) for n in found)} would stack along a third axis; write '
            'np.stack((...), axis=2) for sparse matrices')

    return refuse


# ---------------------------------------------------------------------- reshape
class _ShownPrinter(sympy.printing.str.StrPrinter):
    """Sizes as a user writes them: ``N // 2``, not ``int_floor(N, 2)``."""

    def _print_int_floor(self, expr):
        a, b = (self.parenthesize(x, 50) for x in expr.args)
        return f'{a} // {b}'


def _dim_text(v) -> str:
    return _ShownPrinter().doprint(v) if isinstance(v, sympy.Basic) else str(v)


def _dimension(v, what: str):
    """One entry of a new shape: an integer (``-1``: inferred) or a symbolic expression."""
    if isinstance(v, bool) or v is None or isinstance(v, (float, np.floating)):
        raise errors.ShapeError(f'{what}: {v!r} is not a dimension (an integer, -1 or a symbolic size)')
    if isinstance(v, (int, np.integer)):
        if int(v) < -1:
            raise errors.ShapeError(f'{what}: negative dimension {int(v)} (only -1 is inferred)')
        return int(v)
    e = dace.symbolic.pystr_to_symbolic(v) if isinstance(v, str) else v
    if not dace.symbolic.issymbolic(e):
        raise errors.ShapeError(f'{what}: {v!r} is not a dimension (an integer, -1 or a symbolic size)')
    return e


def _sparse_reshape(pv, sdfg, state, a: str, shape, order='C') -> str:
    """``A.reshape(shape)`` of sparse data into another shape of any rank (a matrix into a
    tensor, ``(I, J, K) -> (I * J, K)``), in C order (``F``: the data transposed, reshaped to
    the reversed shape, transposed back): a view (:class:`~sdfgsparse.formats.views.Reshape`),
    no copy. One ``-1`` is inferred; the sizes must agree (now where they are constants, at
    each call where they are symbols)."""
    items = list(shape) if isinstance(shape, (tuple, list)) else [shape]
    order = str(order).strip('\'"')
    what = f'{_shown(a, sdfg)}.reshape(({", ".join(_dim_text(v) for v in items)}{"," if len(items) == 1 else ""}))'
    if order not in ('C', 'F'):
        raise errors.UnsupportedOperationError(f'{what}: order={order!r}; sparse matrices reshape in C or F order')
    dims = [_dimension(v, what) for v in items]
    if not dims:
        raise errors.UnsupportedOperationError(f'{what}: a 0-D result (a scalar); use .sum()')
    st = _stype(sdfg, a)
    size = sympy.Integer(1)
    for v in st.shape:
        size = size * v
    unknown = [k for k, v in enumerate(dims) if isinstance(v, int) and v == -1]
    if len(unknown) > 1:
        raise errors.ShapeError(f'{what}: can only specify one unknown dimension')
    if unknown:
        other = sympy.Integer(1)
        for k, v in enumerate(dims):
            other = other if k == unknown[0] else other * v
        if other == 0:
            raise errors.ShapeError(f'{what}: cannot infer -1 next to a zero dimension')
        num, den = sympy.fraction(sympy.cancel(sympy.sympify(size) / other))
        dims[unknown[0]] = num if den == 1 else int_floor(num, den)  # a wrong guess fails the size rule below
    total = sympy.Integer(1)
    for v in dims:
        total = total * v
    require_equal(sdfg, total, size, f'{what}: the number of elements ({_shown(a, sdfg)} has {_dim_text(size)})')
    if base.concat_of(sdfg, a) is not None:
        a = _concat_materialise(sdfg, state, a)
    if len(dims) == st.rank and all(sympy.simplify(sympy.sympify(v) - w) == 0 for v, w in zip(dims, st.shape)):
        return a
    steps = [Reshape(st.shape, dims)] if order == 'C' else \
        [Transpose(), Reshape(st.shape[::-1], dims[::-1]), Transpose()]
    return base.view_alias(sdfg, a, steps, what)


@oprepo.replaces_method('Structure', 'reshape')
def _sparse_reshape_method(pv, sdfg, state, a, *shape, order='C'):
    return _sparse_reshape(pv, sdfg, state, a, shape[0] if len(shape) == 1 else shape, order)


def _np_reshape(pv, sdfg, state, a, newshape, order='C'):
    if not _sparse_name(sdfg, a):
        raise _unsupported('numpy.reshape', _sparse_operands(sdfg, (a, newshape)), sdfg)
    return _sparse_reshape(pv, sdfg, state, a, newshape, order)


#: DaCe's function name -> the sparse implementation used when an operand is sparse
SPARSE_FUNCTIONS = {
    'numpy.copy': _np_copy,
    'numpy.transpose': _np_transpose,
    'numpy.concatenate': _np_concatenate,
    'numpy.reshape': _np_reshape,
    'numpy.vstack': _stacker('numpy.vstack', 0),
    'numpy.row_stack': _stacker('numpy.row_stack', 0),
    'numpy.hstack': _stacker('numpy.hstack', 1),
    'numpy.column_stack': _stacker('numpy.column_stack', 1),
    'numpy.dstack': _new_axis_stack('np.dstack'),
}


@oprepo.replaces_method('Structure', 'copy')
def _sparse_copy_method(pv, sdfg, state, a):
    return _np_copy(pv, sdfg, state, a)


def _parsing_ours(visitor) -> bool:
    """Whether ``visitor`` parses one of our programs: for sdfgsparse
    (:func:`sdfgsparse.formats.parsing_ours`), or one whose data hold sparse structures."""
    if is_parsing_ours():
        return True
    return any(is_sparse_desc(d) for d in visitor.sdfg.arrays.values()) or \
        any(is_sparse_desc(d) for d in getattr(visitor, 'scope_arrays', {}).values())


def _nan_extrema(orig):
    """DaCe's ufunc look-up, with :data:`~sdfgsparse.lowering.epilogue.NAN_UFUNC_CODE` for
    ``np.maximum`` / ``np.minimum`` in our programs (any other program keeps DaCe's)."""

    def _get_ufunc_impl(visitor, ast_node, ufunc_name):
        impl = orig(visitor, ast_node, ufunc_name)
        if ufunc_name in NAN_UFUNC_CODE and _parsing_ours(visitor):
            return {**impl, 'code': NAN_UFUNC_CODE[ufunc_name]}
        return impl

    return _get_ufunc_impl


def install_hooks() -> None:
    """Route DaCe's frontend through the functions above (once): assignments and returns
    (``ProgramVisitor._visit_assign``), subscripts (``visit_Subscript``), Python callbacks
    (``create_callback``; ``visit_Call`` for their warning), the operator repository's look-ups of function, ufunc and
    method replacements (the one place where DaCe hands a NumPy implementation its
    operands), and the ufunc tasklets' code (``np.maximum`` / ``np.minimum`` in our
    programs: :func:`_nan_extrema`). Each hands anything that is not ours to DaCe's own."""
    from dace.frontend.python import replacements
    for owner, name, new in ((ProgramVisitor, '_visit_assign', _visit_assign),
                             (ProgramVisitor, 'visit_Subscript', _visit_subscript),
                             (ProgramVisitor, 'create_callback', _create_callback),
                             (ProgramVisitor, 'visit_Call', _visit_call),
                             (oprepo.Replacements, 'get', _get_function),
                             (oprepo.Replacements, 'get_ufunc', _get_ufunc),
                             (oprepo.Replacements, 'get_method', _get_method)):
        wrap(owner, name, lambda orig, new=new: new, key=f'{__name__}.{new.__name__}')
    wrap(replacements, '_get_ufunc_impl', _nan_extrema)


install_hooks()
