"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.mul_dense.SparseMulDense`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse.ops.base import member_conn
from sdfgsparse.targets.cpu.entries import Entries, copy_index_members, kernel_for_node, zero_fill
from sdfgsparse.ops.mul_dense import D, SparseMulDense
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandSparseMulDenseCPU']


@dace.library.expansion
class ExpandSparseMulDenseCPU(ExpandTransformation):
    """Each stored entry reads ``D[i, j]`` (locate into the dense operand); value slots are
    distinct, so the outer level runs in parallel."""
    environments = [SdfgsparseCPU]

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


register(SparseMulDense, 'cpu', ExpandSparseMulDenseCPU, default=True)
