"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.reduce.SparseSum`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse.ops.base import member_conn
from sdfgsparse.targets.cpu.entries import Entries, emit_accumulate, kernel_for_node
from sdfgsparse.ops.reduce import OUT, SparseSum
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandSparseSumCPU']


@dace.library.expansion
class ExpandSparseSumCPU(ExpandTransformation):
    """Row sums run like SpMV with x = 1; column sums like a transposed SpMV; the total
    walks all entries sequentially with one accumulator."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'SparseSum', state, sdfg):
        st = node.operand_type(state, 'A')
        kb = kernel_for_node(node, state, sdfg)
        ent = Entries(st, {m: member_conn('A', m) for m in st.fmt.member_names})
        out = node.connected(state, OUT)
        T = kb.dtype(out.dtype)
        term = '1' if node.count else ent.val
        if node.axis < 0:
            kb.line(f'acc = {T}(0)')
            ent.emit(kb, [f'acc += {term}'], parallel=False)
            kb.line(f'{OUT}[0] = acc')
            return kb.build()
        written = 1 - node.axis  # axis=1 sums along columns -> one value per row
        emit_accumulate(kb, ent, OUT, ent.i if written == 0 else ent.j, term, written, node.schedule_hint, out.dtype,
                        out.shape)
        return kb.build()


register(SparseSum, 'cpu', ExpandSparseSumCPU, default=True)
