"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.add.SparseAdd`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse.targets.cpu.row_union import merge_kernel
from sdfgsparse.ops.add import SparseAdd
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandSparseAddCPU']


@dace.library.expansion
class ExpandSparseAddCPU(ExpandTransformation):
    """Per row, in parallel, the union of the operands' sorted rows (a branch-free
    two-pointer merge, or one vector loop where both rows hold the same columns), after
    storing by rows an operand that does not walk as CSR."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'SparseAdd', state, sdfg):
        return merge_kernel(node, state, sdfg, 'union', node.sign_B)


register(SparseAdd, 'cpu', ExpandSparseAddCPU, default=True)
