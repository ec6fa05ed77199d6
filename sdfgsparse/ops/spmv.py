"""SpMV: ``y = A @ x`` with sparse ``A`` (any catalogue format, or its transposed view)."""
import dace
import dace.library
from dace import properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse.lowering.entries import Entries, emit_accumulate, kernel_for_node
from sdfgsparse.lowering.epilogue import node_epilogue
from sdfgsparse.ops.base import FusableSparseNode, member_conn

__all__ = ['SpMV']

X, Y = '_x', '_y'


@dace.library.expansion
class ExpandSpMVPure(ExpandTransformation):
    """Co-iterates the levels of A: a scalar accumulator per row when the outer level owns
    the rows, otherwise in-place updates (sequential when rows are scattered)."""
    environments = []

    @staticmethod
    def expansion(node: 'SpMV', state, sdfg):
        st = node.operand_type(state, 'A')
        kb = kernel_for_node(node, state, sdfg)
        ent = Entries(st, {m: member_conn('A', m) for m in st.fmt.member_names})
        y = node.connected(state, Y)
        finish = (lambda v, idx: node_epilogue(node, v, idx)) if node.epilogue else None
        emit_accumulate(kb, ent, Y, ent.i, f'{ent.val} * {X}[{ent.j}]', 0, node.schedule_hint, y.dtype, y.shape,
                        finish)
        return kb.build()


@dace.library.node
class SpMV(FusableSparseNode):
    """Sparse matrix times dense vector. Inputs: members of ``A`` (``_A_<member>``) and
    ``_x``; output ``_y``. ``transpose_A`` iterates A's storage as ``A.T`` (no copy)."""
    implementations = {'pure': ExpandSpMVPure}
    default_implementation = 'pure'
    SPARSE_INPUTS = ('A', )

    transpose_A = properties.Property(dtype=bool, default=False, desc='Use the transposed view of A (no copy)')

    def __init__(self, name='spmv', *args, **kwargs):
        super().__init__(name, *args, inputs={X}, outputs={Y}, **kwargs)
