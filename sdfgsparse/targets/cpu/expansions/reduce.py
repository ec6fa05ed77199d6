"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.reduce.SparseSum`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse.lowering.graph import SUM, Scope, reduce_local
from sdfgsparse.targets.cpu.builder import CpuKernel, accumulate, store
from sdfgsparse.ops.reduce import OUT, SparseSum
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandSparseSumCPU']


@dace.library.expansion
class ExpandSparseSumCPU(ExpandTransformation):
    """Row sums run like SpMV with x = 1 (a register per row where the outer level is the
    rows), column sums like a transposed SpMV (:func:`~sdfgsparse.targets.cpu.builder.accumulate`);
    the total walks all entries sequentially with one accumulator (a deterministic sum)."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'SparseSum', state, sdfg):
        k = CpuKernel(node, state, sdfg)
        A = k.operand('A', node.operand_type(state, 'A'))
        out = node.connected(state, OUT)
        term = 1 if node.count else A.value
        st = k.add_state('sum')
        if node.axis < 0:
            loops = [(str(l.var), l.begin, l.end) for l in A.levels if l.has_loop]
            scope = Scope.at(st)
            total = reduce_local(k, scope, loops, term, out.dtype, SUM, 0, guard=A.guard, guarded_reads=True)
            store(k, scope, total, OUT, [0])
            return k.build()
        written = 1 - node.axis  # axis=1 sums along columns -> one value per row
        accumulate(k, st, A, OUT, A.row if written == 0 else A.col, term, written, node.schedule_hint, out.dtype,
                   out.shape)
        return k.build()


register(SparseSum, 'cpu', ExpandSparseSumCPU, default=True)
