"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.mul.SparseMul`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse.targets.cpu.row_union import merge_kernel
from sdfgsparse.ops.mul import SparseMul, check_unique
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandSparseMulCPU']


@dace.library.expansion
class ExpandSparseMulCPU(ExpandTransformation):
    """Per row, in parallel, the intersection of the operands' sorted rows (a branch-free
    two-pointer merge, or one vector loop where both rows hold the same columns), the
    products in A's order, after storing by rows an operand that does not walk as CSR
    (:func:`~sdfgsparse.targets.cpu.row_union.merge_kernel`)."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'SparseMul', state, sdfg):
        check_unique(node, state)
        return merge_kernel(node, state, sdfg, 'intersect')


register(SparseMul, 'cpu', ExpandSparseMulCPU, default=True)
