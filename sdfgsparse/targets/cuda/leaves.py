"""What the ``cuda`` leaf kernels (:mod:`.spmv`, :mod:`.spmm`) share: which products they take.

A leaf kernel takes a product of a sparse operand ``A`` walked by rows (CSR, or CSC seen as
``A.T``: :func:`~sdfgsparse.targets.cpu.builder.row_walk`) with float32 or float64 values and
int32 or int64 indices, dense operands and result of A's dtype, their last dimension of unit
stride, and no fused epilogue; every other product keeps the generic level walk
(:func:`~sdfgsparse.targets.cuda.expansions.portable`).
"""
import dace

from sdfgsparse.lowering.graph import Kernel, Operand
from sdfgsparse.ops.base import member_conn
from sdfgsparse.targets.cpu.builder import row_walk

__all__ = ['FLOATS', 'INDICES', 'takes', 'start']

FLOATS = (dace.float32, dace.float64)
INDICES = (dace.int32, dace.int64)


def takes(node, state, dense) -> bool:
    """Whether a leaf kernel takes ``node`` (operand ``A``, dense connectors ``dense``)."""
    st = node.operand_type(state, 'A')
    descs = [node.connected(state, c) for c in dense]
    if node.epilogue or st.dtype not in FLOATS or st.index_dtype not in INDICES:
        return False
    if any(d.dtype != st.dtype or str(d.strides[-1]) != '1' for d in descs):
        return False
    return row_walk(Operand(st, {m: member_conn('A', m) for m in st.fmt.member_names})) is not None


def start(node, state, sdfg):
    """A leaf kernel's SDFG begun: ``(kernel, A's type, A's operand, A's row walk)``."""
    k = Kernel(node, state, sdfg)
    st = node.operand_type(state, 'A')
    A = k.operand('A', st)
    return k, st, A, row_walk(A)
