"""``T + U`` / ``T - U`` of two sparse tensors of one shape (any rank other than 2; views of
either): every entry of both, ``U``'s negated for a difference, in one coordinate list
(``PCOO<n>``, :mod:`sdfgsparse.formats.counted`), whose equal coordinates sum: a coordinate
list's duplicates are summed wherever it is read or returned, so the sum needs no merge of
the two patterns. The entries are ``T``'s in its walk order, then ``U``'s
(:func:`~sdfgsparse.ops.materialise.gather_entries`)."""
import dace
import dace.library
from dace import properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse import errors
from sdfgsparse.lowering.graph import Kernel
from sdfgsparse.ops.base import SparseLibraryNode
from sdfgsparse.ops.materialise import gather_entries, validate_counted

__all__ = ['SparseTensorAdd', 'portable_kernel']


def portable_kernel(k: Kernel, node: 'SparseTensorAdd', state) -> None:
    """``A``'s entries, then ``B``'s times ``sign``, into ``out``."""
    A = k.operand('A', node.operand_type(state, 'A'))
    B = k.operand('B', node.operand_type(state, 'B'))
    gather_entries(k, [(A, 1), (B, node.sign)], 'out')


@dace.library.expansion
class ExpandSparseTensorAddPure(ExpandTransformation):
    """The portable SDFG (:func:`portable_kernel`)."""
    environments = []

    @staticmethod
    def expansion(node: 'SparseTensorAdd', state, sdfg):
        k = Kernel(node, state, sdfg)
        portable_kernel(k, node, state)
        return k.build()


@dace.library.node
class SparseTensorAdd(SparseLibraryNode):
    """Members of ``A`` and ``B`` (sparse data of one shape, read through their views) ->
    members of ``out``, a ``PCOO<n>`` tensor holding ``A + sign * B``."""
    implementations = {'pure': ExpandSparseTensorAddPure}
    default_implementation = 'pure'
    SPARSE_INPUTS = ('A', 'B')
    ACCEPTS_VIEWS = True
    SPARSE_OUTPUTS = ('out', )

    sign = properties.Property(dtype=int, default=1, desc='+1: A + B; -1: A - B')

    def __init__(self, name='sparse_tensor_add', sign=1, *args, **kwargs):
        super().__init__(name, *args, inputs=set(), outputs=set(), **kwargs)
        self.sign = sign

    def validate(self, sdfg, state):
        """``sign`` +1 or -1; A's and B's members, of one rank and shape, and a ``PCOO`` result
        of that shape (:func:`~sdfgsparse.ops.materialise.validate_counted`)."""
        if self.sign not in (1, -1):
            raise errors.ArgumentError(f'{self.label}: sign must be +1 or -1, got {self.sign!r}')
        validate_counted(self, sdfg, state, ('A', 'B'))
