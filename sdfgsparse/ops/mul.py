"""``A * B`` element-wise for sparse A and B: a CSR or CSC result on the intersection of
the patterns, in the format :func:`~sdfgsparse.ops.add.result_format` gives (scipy's rule:
CSC when A is CSC, else CSR). Both operands must store each coordinate once (the frontend
converts a COO operand to CSR first, so ``coo * coo`` is CSR, as in scipy)."""
import dace
import dace.library
from dace import properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse import errors
from sdfgsparse.ops.add import may_repeat, pure_merge, validate_merge
from sdfgsparse.ops.base import SparseLibraryNode

__all__ = ['check_unique', 'SparseMul']


def check_unique(node: 'SparseMul', state) -> None:
    """Refuse an operand whose format may store a coordinate twice (COO): the product of
    two stored entries would be ambiguous."""
    for prefix in ('A', 'B'):
        st = node.operand_type(state, prefix)
        if may_repeat(st):
            raise errors.UnsupportedOperationError(f'{node.label}: operand {prefix} ({st.fmt.name}) may '
                                                   'store a coordinate twice; convert it to CSR first')


@dace.library.expansion
class ExpandSparseMulPure(ExpandTransformation):
    """The portable SDFG: per row, a two-pointer intersection of the operands' sorted rows
    (count, prefix sum into ``pos``, fill with the products), after storing by rows any
    operand that does not walk as CSR (:func:`~sdfgsparse.ops.add.pure_merge`)."""
    environments = []

    @staticmethod
    def expansion(node: 'SparseMul', state, sdfg):
        check_unique(node, state)
        return pure_merge(node, state, sdfg, 'intersect')


@dace.library.node
class SparseMul(SparseLibraryNode):
    """Members of ``A`` and ``B`` -> members of ``out`` = A ∘ B (CSR or CSC; the frontend
    chooses :func:`~sdfgsparse.ops.add.result_format`, ``SparseFormatInference`` may
    change it)."""
    implementations = {'pure': ExpandSparseMulPure}
    default_implementation = 'pure'
    SPARSE_INPUTS = ('A', 'B')
    SPARSE_OUTPUTS = ('out', )

    transpose_A = properties.Property(dtype=bool, default=False, desc='Use the transposed view of A (no copy)')
    transpose_B = properties.Property(dtype=bool, default=False, desc='Use the transposed view of B (no copy)')

    def __init__(self, name='sparse_mul', *args, **kwargs):
        super().__init__(name, *args, inputs=set(), outputs=set(), **kwargs)

    def validate(self, sdfg, state):
        """:func:`~sdfgsparse.ops.add.validate_merge`, operands that store each coordinate once."""
        validate_merge(self, sdfg, state, unique=True)
