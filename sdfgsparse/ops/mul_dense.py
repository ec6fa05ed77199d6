"""``A * D`` with sparse A and dense D of the same shape: a sparse result on A's pattern
(intersection with the dense operand is A's pattern itself)."""
import dace
import dace.library
from dace import properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse.lowering.graph import Kernel, read
from sdfgsparse.lowering.graph_values import copy_index_members as copy_members
from sdfgsparse.lowering.graph_values import entry_pass
from sdfgsparse.ops.base import SparseLibraryNode, member_conn
from sdfgsparse.ops.validation import Wiring

__all__ = ['portable_kernel', 'SparseMulDense']

D = '_D'


@dace.library.expansion
class ExpandSparseMulDensePure(ExpandTransformation):
    """The portable SDFG: A's index members copied and the result's values zeroed (ELL
    padding and out-of-range DIA slots stay 0), then parallel maps over A's stored entries
    with ``out[q] = A[q] * D[row, col]``; every entry owns its value slot ``q``."""
    environments = []

    @staticmethod
    def expansion(node: 'SparseMulDense', state, sdfg):
        k = Kernel(node, state, sdfg)
        portable_kernel(k, node, state)
        return k.build()


def portable_kernel(k: Kernel, node: 'SparseMulDense', state) -> None:
    """The steps of the portable expansion built into ``k`` (the ``cpu`` expansion builds
    them into its own kernel where it has no tuned walk)."""
    A = k.operand('A', node.operand_type(state, 'A'))
    out_vals = member_conn('out', 'vals')
    init = k.add_state('init')
    copy_members(k, init, node.member_arrays(state, 'out'), 'A', 'out')
    k.fill(init, out_vals)
    entry_pass(k, 'mul_dense', A, (out_vals, [A.pos]), A.value * read(D, A.row, A.col),
               parallel=node.schedule_hint != 'sequential')


@dace.library.node
class SparseMulDense(SparseLibraryNode):
    """Element-wise product of sparse A and dense ``_D`` -> members of ``out`` (A's pattern)."""
    implementations = {'pure': ExpandSparseMulDensePure}
    default_implementation = 'pure'
    SPARSE_INPUTS = ('A', )
    SPARSE_OUTPUTS = ('out', )

    transpose_A = properties.Property(dtype=bool, default=False, desc='Use the transposed view of A (no copy)')

    def __init__(self, name='sparse_mul_dense', *args, **kwargs):
        super().__init__(name, *args, inputs={D}, outputs=set(), **kwargs)

    def validate(self, sdfg, state):
        """A's members, a matrix ``_D`` of A's shape, the result with A's pattern and the
        dtype of ``A * D`` (:mod:`sdfgsparse.ops.validation`)."""
        w = Wiring(self, sdfg, state)
        A, d, out = w.sparse('A'), w.dense(D, (2, )), w.sparse('out', output=True)
        w.same(A.rows, d.dim(0))
        w.same(A.cols, d.dim(1))
        w.same_pattern(out, A)
        w.computes(out, A, d)
        w.finish()
