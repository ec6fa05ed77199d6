"""NumPy-style frontend: sparse operators inside ``@dace.program``.

Registers replacements in DaCe's operator repository so that, for a sparse argument
(a ``Structure`` made by :mod:`sdfgsparse.formats`), expressions such as ``A @ x``,
``A.T``, ``A * B``, ``A.sum(axis=1)`` or ``ss.relu(A)`` become sparse library nodes.
"""
from typing import Optional

import dace
from dace.frontend.common import op_repository as oprepo

from sdfgsparse import errors
from sdfgsparse.formats import is_sparse_desc, sparse_type_of
from sdfgsparse.ops import base
from sdfgsparse.ops.spmv import SpMV

__all__ = []


def _stype(sdfg, name):
    base_name, tr = base.resolve_alias(name)
    st = sparse_type_of(sdfg.arrays[base_name])
    return st.T if tr else st


def _check_inner(a_shape, b_shape, what):
    ka, kb = a_shape[-1], b_shape[0]
    if not dace.symbolic.issymbolic(ka - kb) and ka != kb:
        raise errors.ShapeError(f'{what}: inner dimensions differ ({ka} vs {kb})')


@oprepo.replaces_operator('Structure', 'MatMult', otherclass='Array')
def _sparse_matmult_dense(pv, sdfg: dace.SDFG, state: dace.SDFGState, a: str, b: str):
    st = _stype(sdfg, a)
    bdesc = sdfg.arrays[b]
    _check_inner(st.shape, bdesc.shape, 'A @ B')
    dtype = dace.dtypes.result_type_of(st.dtype, bdesc.dtype)
    if len(bdesc.shape) == 1:
        out, _ = sdfg.add_temp_transient([st.rows], dtype)
        node = SpMV()
        state.add_node(node)
        base.add_sparse_input(state, node, 'A', a)
        base.add_dense_input(state, node, '_x', b)
        base.add_dense_output(state, node, '_y', out)
        return out
    raise errors.UnsupportedOperationError(f'sparse @ dense with a {len(bdesc.shape)}-D right operand')


@oprepo.replaces_attribute('Structure', 'T')
def _sparse_transpose(pv, sdfg: dace.SDFG, state: dace.SDFGState, a: str):
    return base.transposed_alias(sdfg, a)


# ---------------------------------------------------------------------- element-wise on values
def _map_values(sdfg, state, a: str, function: str, alpha=None):
    from sdfgsparse.ops.map_values import ALPHA, MapValues
    st = _stype(sdfg, a)
    if st.fmt.name != sparse_type_of(sdfg.arrays[base.resolve_alias(a)[0]]).fmt.name:
        raise errors.UnsupportedOperationError('element-wise functions of a transposed view: apply them to the '
                                               'matrix first, then transpose')
    node = MapValues(function=function)
    state.add_node(node)
    out_type = st
    if alpha is not None:
        if isinstance(alpha, str) and alpha in sdfg.arrays:
            node.alpha_is_data = True
            base.add_dense_input(state, node, ALPHA, alpha)
            out_dtype = dace.dtypes.result_type_of(st.dtype, sdfg.arrays[alpha].dtype)
        else:
            node.alpha = str(alpha)
            out_dtype = st.dtype if not isinstance(alpha, float) or st.dtype in (dace.float32, dace.float64) \
                else dace.float64
        if out_dtype != st.dtype:
            out_type = st.fmt.type(out_dtype, st.rows, st.cols, st.index_dtype, **st.sizes)
    elif function in ('sqrt', 'exp', 'sigmoid', 'sin', 'tanh') and st.dtype in (dace.int32, dace.int64):
        out_type = st.fmt.type(dace.float64, st.rows, st.cols, st.index_dtype, **st.sizes)
    base.add_sparse_input(state, node, 'A', a)
    out = base.new_sparse_result(sdfg, out_type, 'mapped')
    base.add_sparse_output(state, node, 'out', out)
    return out


def _is_number(x):
    return isinstance(x, (int, float)) or (dace.symbolic.issymbolic(x))


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


@oprepo.replaces_operator('Structure', 'USub')
def _sparse_neg(pv, sdfg, state, a, _none=None):
    return _map_values(sdfg, state, a, 'neg')


def _register_function(fname):

    def impl(pv, sdfg, state, a):
        return _map_values(sdfg, state, a, fname)

    oprepo.replaces(f'sdfgsparse.{fname}')(impl)
    oprepo.replaces(f'sdfgsparse.ops.functions.{fname}')(impl)


for _f in ('relu', 'exp', 'sqrt', 'abs', 'sin', 'tanh', 'square', 'sigmoid'):
    _register_function(_f)
