"""What the ``cuda`` leaf kernels (:mod:`.spmv`, :mod:`.spmm`, :mod:`.sddmm`) share: which products
they take.

A leaf kernel takes a product of a sparse operand (``A``; SDDMM's ``S``) walked by rows (CSR, or CSC seen as
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


def takes(node, state, dense, sparse: str = 'A') -> bool:
    """Whether a leaf kernel takes ``node`` (sparse operand ``sparse``, dense connectors
    ``dense``, results included)."""
    st = node.operand_type(state, sparse)
    descs = [node.connected(state, c) for c in dense]
    if getattr(node, 'epilogue', None) or st.dtype not in FLOATS or st.index_dtype not in INDICES:
        return False
    if any(d.dtype != st.dtype or str(d.strides[-1]) != '1' for d in descs):
        return False
    return row_walk(Operand(st, {m: member_conn(sparse, m) for m in st.fmt.member_names})) is not None


def start(node, state, sdfg, sparse: str = 'A'):
    """A leaf kernel's SDFG begun: ``(kernel, the sparse operand's type, its operand, its row
    walk)``."""
    k = Kernel(node, state, sdfg)
    st = node.operand_type(state, sparse)
    A = k.operand(sparse, st)
    return k, st, A, row_walk(A)
