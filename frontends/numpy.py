"""NumPy-style frontend: sparse operators inside ``@dace.program``.

Registers replacements in DaCe's operator repository so that, for a sparse argument
(a ``Structure`` made by :mod:`sdfgsparse.formats`), expressions such as ``A @ x``,
``A.T``, ``A * B``, ``A.sum(axis=1)`` or ``ss.relu(A)`` become sparse library nodes.
"""

import dace
from dace.frontend.common import op_repository as oprepo

from sdfgsparse import errors
from sdfgsparse.formats import is_sparse_desc, sparse_type_of
from sdfgsparse.ops import base
from sdfgsparse.ops.add_dense import SparseAddDense
from sdfgsparse.ops.dense_spmm import DenseSpMM
from sdfgsparse.ops.mul_dense import SparseMulDense
from sdfgsparse.ops.reduce import SparseSum, sum_dtype
from sdfgsparse.ops.sddmm import SDDMM
from sdfgsparse.ops.shape_checks import require_equal
from sdfgsparse.ops.spmm import SpMM
from sdfgsparse.ops.spmv import SpMV

__all__ = []


def _stype(sdfg, name):
    base_name, tr = base.resolve_alias(name)
    st = sparse_type_of(sdfg.arrays[base_name])
    return st.T if tr else st


def _shown(name: str) -> str:
    """How an operand appears in an error: its name, ``A.T`` for a transposed view."""
    base_name, tr = base.resolve_alias(name)
    return f'{base_name}.T' if tr else base_name


def _check_inner(sdfg, a_shape, b_shape, what):
    """The inner dimensions of ``what`` (``'A @ B'``) agree; decided now or at each call
    (:mod:`sdfgsparse.ops.shape_checks`)."""
    require_equal(sdfg, a_shape[-1], b_shape[0], f'{what}: inner dimensions')


@oprepo.replaces_operator('Structure', 'MatMult', otherclass='Array')
def _sparse_matmult_dense(pv, sdfg: dace.SDFG, state: dace.SDFGState, a: str, b: str):
    st = _stype(sdfg, a)
    bdesc = sdfg.arrays[b]
    _check_inner(sdfg, st.shape, bdesc.shape, f'{_shown(a)} @ {_shown(b)}')
    dtype = dace.dtypes.result_type_of(st.dtype, bdesc.dtype)
    if len(bdesc.shape) == 1:
        out, _ = sdfg.add_temp_transient([st.rows], dtype)
        return base.insert_node(state, SpMV(), {'A': a}, {'_x': b}, ('_y', out))
    if len(bdesc.shape) == 2:
        out, _ = sdfg.add_temp_transient([st.rows, bdesc.shape[1]], dtype)
        return base.insert_node(state, SpMM(), {'A': a}, {'_B': b}, ('_Y', out))
    raise errors.UnsupportedOperationError(f'sparse @ dense with a {len(bdesc.shape)}-D right operand')


@oprepo.replaces_operator('Array', 'MatMult', otherclass='Structure')
def _dense_matmult_sparse(pv, sdfg: dace.SDFG, state: dace.SDFGState, b: str, a: str):
    st = _stype(sdfg, a)
    bdesc = sdfg.arrays[b]
    _check_inner(sdfg, bdesc.shape, st.shape, f'{_shown(b)} @ {_shown(a)}')
    if len(bdesc.shape) not in (1, 2):
        raise errors.UnsupportedOperationError(f'dense @ sparse with a {len(bdesc.shape)}-D left operand')
    dtype = dace.dtypes.result_type_of(st.dtype, bdesc.dtype)
    shape = [st.cols] if len(bdesc.shape) == 1 else [bdesc.shape[0], st.cols]
    out, _ = sdfg.add_temp_transient(shape, dtype)
    return base.insert_node(state, DenseSpMM(), {'A': a}, {'_B': b}, ('_C', out))


@oprepo.replaces_attribute('Structure', 'T')
def _sparse_transpose(pv, sdfg: dace.SDFG, state: dace.SDFGState, a: str):
    return base.transposed_alias(sdfg, a)


# ---------------------------------------------------------------------- element-wise on values
def _map_values(sdfg, state, a: str, function: str, alpha=None):
    from sdfgsparse.ops.map_values import ALPHA, MapValues
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
    out_type = st if out_dtype == st.dtype else st.fmt.type(out_dtype, st.rows, st.cols, st.index_dtype, **st.sizes)
    return base.insert_node(state, node, {'A': a}, dense_in, sparse_out=('out', out_type, 'mapped'))


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
        raise errors.UnsupportedOperationError(f"{_shown(a)} @ {alpha}: the right operand is a scalar; use '*' "
                                               "to scale a sparse matrix (as NumPy and scipy do)")

    @oprepo.replaces_operator(_other, 'MatMult', otherclass='Structure')
    def _scalar_matmult_sparse(pv, sdfg, state, alpha, a):
        raise errors.UnsupportedOperationError(f"{alpha} @ {_shown(a)}: the left operand is a scalar; use '*' "
                                               "to scale a sparse matrix (as NumPy and scipy do)")


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
    st = _stype(sdfg, a)
    ddesc = sdfg.arrays[d]
    _same_shape(sdfg, st, ddesc, f'{_shown(a)} * {_shown(d)}')
    dtype = dace.dtypes.result_type_of(st.dtype, ddesc.dtype)
    out_type = st if dtype == st.dtype else st.fmt.type(dtype, st.rows, st.cols, st.index_dtype, **st.sizes)
    return base.insert_node(state, SparseMulDense(), {'A': a}, {'_D': d}, sparse_out=('out', out_type, 'prod'))


def _add_dense(sdfg, state, a, d, sparse_sign, dense_sign):
    st = _stype(sdfg, a)
    ddesc = sdfg.arrays[d]
    _same_shape(sdfg, st, ddesc, f'{_shown(a)} + {_shown(d)}')
    out, _ = sdfg.add_temp_transient(list(ddesc.shape), dace.dtypes.result_type_of(st.dtype, ddesc.dtype))
    node = SparseAddDense(sparse_sign=sparse_sign, dense_sign=dense_sign)
    return base.insert_node(state, node, {'A': a}, {'_D': d}, ('_out', out))


@oprepo.replaces_operator('Structure', 'Mult', otherclass='Array')
def _sparse_mul_dense(pv, sdfg, state, a, d):
    return _mul_dense(sdfg, state, a, d)


@oprepo.replaces_operator('Array', 'Mult', otherclass='Structure')
def _dense_mul_sparse(pv, sdfg, state, d, a):
    return _mul_dense(sdfg, state, a, d)


@oprepo.replaces_operator('Structure', 'Add', otherclass='Array')
def _sparse_add_dense(pv, sdfg, state, a, d):
    return _add_dense(sdfg, state, a, d, 1, 1)


@oprepo.replaces_operator('Array', 'Add', otherclass='Structure')
def _dense_add_sparse(pv, sdfg, state, d, a):
    return _add_dense(sdfg, state, a, d, 1, 1)


@oprepo.replaces_operator('Structure', 'Sub', otherclass='Array')
def _sparse_sub_dense(pv, sdfg, state, a, d):
    return _add_dense(sdfg, state, a, d, 1, -1)


@oprepo.replaces_operator('Array', 'Sub', otherclass='Structure')
def _dense_sub_sparse(pv, sdfg, state, d, a):
    return _add_dense(sdfg, state, a, d, -1, 1)


# ---------------------------------------------------------------------- reductions, SDDMM, attributes
@oprepo.replaces_method('Structure', 'sum')
def _sparse_sum(pv, sdfg, state, a, axis=None):
    st = _stype(sdfg, a)
    if axis is None:
        shape, ax = [1], -1
    elif axis in (0, -2):
        shape, ax = [st.cols], 0
    elif axis in (1, -1):
        shape, ax = [st.rows], 1
    else:
        raise errors.UnsupportedOperationError(f'A.sum(axis={axis!r}): axis must be None, 0 or 1')
    return _sum_node(sdfg, state, a, shape, ax, sum_dtype(st.dtype), count=False)


_dense_numpy_sum = oprepo.Replacements.get('numpy.sum')


@oprepo.replaces('numpy.sum')
def _numpy_sum(pv, sdfg, state, a, axis=None):
    """``np.sum(A, axis)`` of a sparse ``A`` is ``A.sum(axis)``; anything else goes to DaCe's."""
    name = base.resolve_alias(a)[0] if isinstance(a, str) else None
    if name in sdfg.arrays and is_sparse_desc(sdfg.arrays[name]):
        return _sparse_sum(pv, sdfg, state, a, axis)
    return _dense_numpy_sum(pv, sdfg, state, a, axis=axis)


def _sum_node(sdfg, state, a, shape, axis, dtype, count):
    out, _ = sdfg.add_temp_transient(shape, dtype)
    node = SparseSum(axis=axis)
    node.count = count
    return base.insert_node(state, node, {'A': a}, dense_out=('_out', out))


def _sddmm(pv, sdfg, state, S, X, Y):
    st = _stype(sdfg, S)
    xd, yd = sdfg.arrays[X], sdfg.arrays[Y]
    if len(xd.shape) != 2 or len(yd.shape) != 2:
        raise errors.ShapeError('ss.sddmm(S, X, Y): X and Y must be 2-D')
    _check_inner(sdfg, xd.shape, yd.shape, f'ss.sddmm({_shown(S)}, {X}, {Y}): {X} @ {Y}')
    _same_shape(sdfg, st, dace.data.Array(xd.dtype, [xd.shape[0], yd.shape[1]]),
                f'ss.sddmm({_shown(S)}, {X}, {Y}): {_shown(S)} and {X} @ {Y}')
    dtype = dace.dtypes.result_type_of(st.dtype, xd.dtype, yd.dtype)
    out_type = st if dtype == st.dtype else st.fmt.type(dtype, st.rows, st.cols, st.index_dtype, **st.sizes)
    return base.insert_node(state, SDDMM(), {'S': S}, {'_X': X, '_Y': Y}, sparse_out=('out', out_type, 'sddmm'))


oprepo.replaces('sdfgsparse.sddmm')(_sddmm)
oprepo.replaces('sdfgsparse.ops.functions.sddmm')(_sddmm)


def _softmax(pv, sdfg, state, S, axis=1):
    from sdfgsparse.ops.softmax import SparseSoftmax, normalise_axis
    name = base.resolve_alias(S)[0] if isinstance(S, str) else None
    if name not in sdfg.arrays or not is_sparse_desc(sdfg.arrays[name]):
        raise errors.UnsupportedOperationError(f'ss.softmax(S): S must be a sparse matrix inside a program, got {S!r}')
    st = _stype(sdfg, S)
    node = SparseSoftmax(axis=normalise_axis(axis))
    dtype = st.dtype if st.dtype in (dace.float32, dace.float64) else dace.float64
    out_type = st if dtype == st.dtype else st.fmt.type(dtype, st.rows, st.cols, st.index_dtype, **st.sizes)
    return base.insert_node(state, node, {'A': S}, sparse_out=('out', out_type, 'softmax'))


oprepo.replaces('sdfgsparse.softmax')(_softmax)
oprepo.replaces('sdfgsparse.ops.functions.softmax')(_softmax)


@oprepo.replaces_attribute('Structure', 'shape')
def _sparse_shape(pv, sdfg, state, a):
    return tuple(_stype(sdfg, a).shape)


@oprepo.replaces_attribute('Structure', 'nnz')
def _sparse_nnz(pv, sdfg, state, a):
    """Number of stored entries: a symbol for formats that store no padding, else a count."""
    st = _stype(sdfg, a)
    if st.fmt.name in ('ELL', 'DIA') or st.fmt.name.rstrip('T') in ('ELL', 'DIA'):
        return _sum_node(sdfg, state, a, [1], -1, dace.int64, count=True)
    return st.fmt.counts(st.rows, st.cols, st.sizes)[-1]


# ---------------------------------------------------------------------- sparse with sparse
def _csr_type(dtype, rows, cols, itype, cap):
    from sdfgsparse.formats import CSR
    return CSR.type(dtype, rows, cols, itype, n1=cap)


def _vals_count(st):
    return st.fmt.counts(st.rows, st.cols, st.sizes)[-1]


def _index_type(*sts):
    return dace.int64 if any(s.index_dtype == dace.int64 for s in sts) else dace.int32


def _convert(sdfg, state, a: str, target: str = 'CSR') -> str:
    from sdfgsparse.formats import CSC
    from sdfgsparse.ops.convert import TARGETS, Convert
    if target not in TARGETS:
        raise errors.UnsupportedOperationError(f'ss.convert inside a program supports {", ".join(TARGETS)}; '
                                               f'convert to {target} outside the program with ss.convert')
    st = _stype(sdfg, a)
    cap = _vals_count(st)
    out_type = _csr_type(st.dtype, st.rows, st.cols, st.index_dtype, cap) if target == 'CSR' else \
        CSC.type(st.dtype, st.rows, st.cols, st.index_dtype, n1=cap)
    return base.insert_node(state, Convert(target=target), {'A': a}, sparse_out=('out', out_type, 'converted'))


def _sparse_binary(sdfg, state, a, b, kind, sign=1):
    from sdfgsparse.ops.add import SparseAdd, result_format
    from sdfgsparse.ops.mul import SparseMul
    sta, stb = _stype(sdfg, a), _stype(sdfg, b)
    op = '*' if kind == 'mul' else '+' if sign > 0 else '-'
    for d, (x, y) in enumerate(zip(sta.shape, stb.shape)):
        require_equal(sdfg, x, y, f'{_shown(a)} {op} {_shown(b)}: {"rows" if d == 0 else "columns"}')
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
    return base.insert_node(state, node, {'A': a, 'B': b}, sparse_out=('out', out_type, kind))


@oprepo.replaces_operator('Structure', 'Add', otherclass='Structure')
def _sparse_add_sparse(pv, sdfg, state, a, b):
    return _sparse_binary(sdfg, state, a, b, 'add', 1)


@oprepo.replaces_operator('Structure', 'Sub', otherclass='Structure')
def _sparse_sub_sparse(pv, sdfg, state, a, b):
    return _sparse_binary(sdfg, state, a, b, 'add', -1)


@oprepo.replaces_operator('Structure', 'Mult', otherclass='Structure')
def _sparse_mul_sparse(pv, sdfg, state, a, b):
    return _sparse_binary(sdfg, state, a, b, 'mul')


@oprepo.replaces_operator('Structure', 'MatMult', otherclass='Structure')
def _sparse_matmult_sparse(pv, sdfg, state, a, b):
    from sdfgsparse.ops.spgemm import SpGEMM
    from sdfgsparse.runtime.capacity import capacity_symbol
    sta, stb = _stype(sdfg, a), _stype(sdfg, b)
    _check_inner(sdfg, sta.shape, stb.shape, f'{_shown(a)} @ {_shown(b)}')
    (abase, ta), (bbase, tb) = base.resolve_alias(a), base.resolve_alias(b)
    for name in (abase, bbase):
        if sdfg.arrays[name].transient:
            raise errors.UnsupportedOperationError('sparse @ sparse: both operands must be program arguments (or '
                                                   'their .T), so that the result can be sized before the call')
    cap = dace.symbol(capacity_symbol(abase, ta, bbase, tb, taken=sdfg.symbols), dace.int64)
    if stb.fmt.name != 'CSR':
        b = _convert(sdfg, state, b)
    dtype = dace.dtypes.result_type_of(sta.dtype, stb.dtype)
    out_type = _csr_type(dtype, sta.rows, stb.cols, _index_type(sta, stb), cap)
    return base.insert_node(state, SpGEMM(), {'A': a, 'B': b}, sparse_out=('out', out_type, 'spgemm'))


def _convert_call(pv, sdfg, state, a, fmt):
    from sdfgsparse.formats import SparseFormat, is_sparse_desc, sparse_type_of as _st
    if isinstance(fmt, str):
        import sdfgsparse
        fmt = eval(fmt, {'ss': sdfgsparse, 'sdfgsparse': sdfgsparse})
    if isinstance(fmt, dace.data.Structure) and is_sparse_desc(fmt):
        fmt = _st(fmt).fmt
    if not isinstance(fmt, SparseFormat):
        raise errors.UnsupportedOperationError(f'ss.convert(A, fmt): fmt must be a format such as ss.CSR, got {fmt!r}')
    return _convert(sdfg, state, a, fmt.name)


oprepo.replaces('sdfgsparse.convert')(_convert_call)
