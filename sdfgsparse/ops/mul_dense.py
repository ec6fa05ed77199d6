"""``A * D`` with sparse A and dense D of the same shape: a sparse result on A's pattern
(intersection with the dense operand is A's pattern itself)."""
import dace
import dace.library
from dace import properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse.targets.cpu.entries import Entries, copy_index_members, kernel_for_node, zero_fill
from sdfgsparse.ops.base import SparseLibraryNode, member_conn

__all__ = ['SparseMulDense']

D = '_D'


@dace.library.expansion
class ExpandSparseMulDenseCPU(ExpandTransformation):
    """Each stored entry reads ``D[i, j]`` (locate into the dense operand); value slots are
    distinct, so the outer level runs in parallel."""
    environments = []

    @staticmethod
    def expansion(node: 'SparseMulDense', state, sdfg):
        st = node.operand_type(state, 'A')
        kb = kernel_for_node(node, state, sdfg)
        ent = Entries(st, {m: member_conn('A', m) for m in st.fmt.member_names})
        out_vals = member_conn('out', 'vals')
        copy_index_members(kb, node.member_arrays(state, 'A'), 'A', 'out')
        zero_fill(kb, out_vals, node.member_arrays(state, 'out')['vals'].shape)
        ent.emit(kb, [f'{out_vals}[{ent.v}] = {ent.val} * {D}[{ent.i}, {ent.j}]'], parallel=True)
        return kb.build()


@dace.library.node
class SparseMulDense(SparseLibraryNode):
    """Element-wise product of sparse A and dense ``_D`` -> members of ``out`` (A's pattern)."""
    implementations = {'cpu': ExpandSparseMulDenseCPU}
    default_implementation = 'cpu'
    SPARSE_INPUTS = ('A', )
    SPARSE_OUTPUTS = ('out', )

    transpose_A = properties.Property(dtype=bool, default=False, desc='Use the transposed view of A (no copy)')

    def __init__(self, name='sparse_mul_dense', *args, **kwargs):
        super().__init__(name, *args, inputs={D}, outputs=set(), **kwargs)
