"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.add_dense.SparseAddDense`."""
import dace
import dace.library
import sympy
from dace import dtypes
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse.lowering.graph import read
from sdfgsparse.targets.cpu.builder import CpuKernel, strategy, update
from sdfgsparse.ops.add_dense import D, OUT, SparseAddDense
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandSparseAddDenseCPU']


@dace.library.expansion
class ExpandSparseAddDenseCPU(ExpandTransformation):
    """``out = dense_sign * D`` (a parallel map), then every stored entry adds
    ``sparse_sign * A[i, j]`` in place: in parallel when A's outer level owns rows or
    columns, sequentially otherwise (no atomics; :func:`~sdfgsparse.targets.cpu.builder.strategy`)."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'SparseAddDense', state, sdfg):
        k = CpuKernel(node, state, sdfg)
        st = node.operand_type(state, 'A')
        A = k.operand('A', st)
        m, n = node.connected(state, OUT).shape
        z0, z1 = sympy.Symbol('__z0'), sympy.Symbol('__z1')
        sc = k.scope(k.add_state('dense'), [(str(z0), 0, m), (str(z1), 0, n)], [dtypes.ScheduleType.Default] * 2)
        k.compute(sc, (OUT, [z0, z1]), node.dense_sign * read(D, z0, z1), label='dense_part')
        od = st.fmt.outer_dim
        par = strategy(st, od if od is not None else 0, node.schedule_hint) != 'sequential'
        sc = k.entries(k.add_state('sparse'), A, parallel=par)
        update(k, sc, (OUT, [A.row, A.col]), node.sparse_sign * A.value, A.guard)
        return k.build()


register(SparseAddDense, 'cpu', ExpandSparseAddDenseCPU, default=True)
