"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.add_dense.SparseAddDense`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse._symbolic import pyexpr
from sdfgsparse.targets.cpu.entries import Entries, kernel_for_node, update
from sdfgsparse.ops.base import member_conn
from sdfgsparse.ops.add_dense import D, OUT, SparseAddDense
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandSparseAddDenseCPU']


@dace.library.expansion
class ExpandSparseAddDenseCPU(ExpandTransformation):
    """``out = dense_sign * D``, then every stored entry adds ``sparse_sign * A[i, j]``
    (parallel when A's outer level owns rows or columns, sequential otherwise)."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'SparseAddDense', state, sdfg):
        st = node.operand_type(state, 'A')
        kb = kernel_for_node(node, state, sdfg)
        ent = Entries(st, {m: member_conn('A', m) for m in st.fmt.member_names})
        out = node.connected(state, OUT)
        T = kb.dtype(out.dtype)
        m, n = (pyexpr(s) for s in out.shape)
        ds = '' if node.dense_sign > 0 else '-'
        kb.line(f'for z0, z1 in dace.map[0:{m}, 0:{n}]:')
        kb.line(f'    {OUT}[z0, z1] = {T}({ds}{D}[z0, z1])')
        op = '+' if node.sparse_sign > 0 else '-'
        od = st.fmt.outer_dim
        strat = ent.strategy(od if od is not None else 0, node.schedule_hint)
        ent.emit(kb, [update(f'{OUT}[{ent.i}, {ent.j}]', ent.val, op)], parallel=strat != 'sequential')
        return kb.build()


register(SparseAddDense, 'cpu', ExpandSparseAddDenseCPU, default=True)
