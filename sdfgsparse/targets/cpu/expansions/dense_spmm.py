"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.dense_spmm.DenseSpMM`."""
import dace
import dace.library
import sympy
from dace import dtypes
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse.lowering.graph import read
from sdfgsparse.targets.cpu.builder import CpuKernel, coordinates, strategy, update
from sdfgsparse.ops.dense_spmm import B, C, DenseSpMM
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandDenseSpMMCPU']


@dace.library.expansion
class ExpandDenseSpMMCPU(ExpandTransformation):
    """Each stored ``A[i, j]`` adds ``B[:, i] * A[i, j]`` to column ``j`` of C: parallel over
    A's outer level when it owns columns (CSC); otherwise parallel over the rows of B, each
    walking the flat coordinate arrays of A's slots. A vector ``x @ A`` with scattered
    columns runs sequentially."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'DenseSpMM', state, sdfg):
        k = CpuKernel(node, state, sdfg)
        st = node.operand_type(state, 'A')
        A = k.operand('A', st)
        c = node.connected(state, C)
        k.fill(k.add_state('zero'), C)
        strat = strategy(st, 1, node.schedule_hint)
        h = sympy.Symbol('__k')
        if len(c.shape) == 1:
            sc = k.entries(k.add_state('dense_spmm'), A, parallel=strat != 'sequential')
            update(k, sc, (C, [A.col]), read(B, A.row) * A.value, A.guard)
        elif strat != 'sequential':
            sc = k.entries(k.add_state('dense_spmm'), A, parallel=True, inner=[('__k', 0, c.shape[0])])
            update(k, sc, (C, [h, A.col]), read(B, h, A.row) * A.value, A.guard)
        else:  # columns are scattered: the rows of B in parallel around a flat walk over the slots
            ri, ci, n = coordinates(k, A)
            body = k.add_state('dense_spmm_rows')
            q = sympy.Symbol('__q')
            sc = k.scope(body, [('__k', 0, c.shape[0]), ('__q', 0, n)],
                         [dtypes.ScheduleType.Default, dtypes.ScheduleType.Sequential])
            update(k, sc, (C, [h, read(ci, q)]), read(B, h, read(ri, q)) * read(A.vals, q), read(ri, q) >= 0)
        return k.build()


register(DenseSpMM, 'cpu', ExpandDenseSpMMCPU, default=True)
