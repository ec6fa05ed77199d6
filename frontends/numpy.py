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
