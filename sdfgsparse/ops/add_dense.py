"""``A + D``, ``A - D``, ``D - A`` with sparse A and dense D: a dense result (union with a
dense operand is dense)."""
import dace
import dace.library
import sympy
from dace import dtypes, properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse.lowering.graph import SUM, Kernel, read
from sdfgsparse.lowering.graph_values import entry_pass
from sdfgsparse.ops.base import SparseLibraryNode
from sdfgsparse.ops.validation import Wiring

__all__ = ['SparseAddDense']

D, OUT = '_D', '_out'


@dace.library.expansion
class ExpandSparseAddDensePure(ExpandTransformation):
    """The portable SDFG: a parallel map ``out[i, j] = dense_sign * D[i, j]``, then maps
    over A's stored entries with ``out[row, col] += sparse_sign * A[row, col]`` as a
    write-conflict resolution (plain updates where the outer level owns the written row or
    column, atomic ones for a scatter such as COO's); duplicates add up."""
    environments = []

    @staticmethod
    def expansion(node: 'SparseAddDense', state, sdfg):
        k = Kernel(node, state, sdfg)
        A = k.operand('A', node.operand_type(state, 'A'))
        m, n = node.connected(state, OUT).shape  # (a one-element result is a scalar in the kernel)
        init = k.add_state('dense')
        z0, z1 = sympy.Symbol('__z0'), sympy.Symbol('__z1')
        sc = k.scope(init, [(str(z0), 0, m), (str(z1), 0, n)], [dtypes.ScheduleType.Default] * 2)
        k.compute(sc, (OUT, [z0, z1]), node.dense_sign * read(D, z0, z1), label='dense_part')
        entry_pass(k, 'sparse_part', A, (OUT, [A.row, A.col]), node.sparse_sign * A.value, wcr=SUM,
                   parallel=node.schedule_hint != 'sequential')
        return k.build()


@dace.library.node
class SparseAddDense(SparseLibraryNode):
    """``_out = dense_sign * _D + sparse_sign * A`` (dense M x N result)."""
    implementations = {'pure': ExpandSparseAddDensePure}
    default_implementation = 'pure'
    SPARSE_INPUTS = ('A', )
    ACCEPTS_VIEWS = True

    sparse_sign = properties.Property(dtype=int, default=1, desc='+1 or -1: sign of the sparse operand')
    dense_sign = properties.Property(dtype=int, default=1, desc='+1 or -1: sign of the dense operand')
    transpose_A = properties.Property(dtype=bool, default=False, desc='Use the transposed view of A (no copy)')

    def __init__(self, name='sparse_add_dense', sparse_sign=1, dense_sign=1, *args, **kwargs):
        super().__init__(name, *args, inputs={D}, outputs={OUT}, **kwargs)
        self.sparse_sign = sparse_sign
        self.dense_sign = dense_sign

    def validate(self, sdfg, state):
        """A's members, matrices ``_D`` and ``_out`` of A's shape, ``_out`` of the dtype of
        ``A + D`` (:mod:`sdfgsparse.ops.validation`)."""
        w = Wiring(self, sdfg, state)
        A, d, out = w.sparse('A'), w.dense(D, (2, )), w.dense(OUT, (2, ), output=True)
        w.same(A.rows, d.dim(0), out.dim(0))
        w.same(A.cols, d.dim(1), out.dim(1))
        w.computes(out, A, d)
        w.finish()
