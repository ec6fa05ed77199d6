"""``T * U`` of two sparse tensors of one shape (any rank other than 2; views of either): the
element-wise product, whose entries are the coordinates both hold (the intersection of the
patterns), each the product of the two tensors' values there (their duplicates summed
first). Both operands' entries are sorted together by coordinates and each run of equal
coordinates that holds entries of both becomes one entry
(:func:`~sdfgsparse.ops.materialise.coalesce_entries`), in a counted coordinate list
(``PCOO<n>``, :mod:`sdfgsparse.formats.counted`) of ``T``'s entries as capacity."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse import errors
from sdfgsparse.formats.counted import is_counted_coo
from sdfgsparse.lowering.graph import Kernel
from sdfgsparse.ops.base import SparseLibraryNode
from sdfgsparse.ops.materialise import coalesce_entries
from sdfgsparse.ops.validation import Wiring

__all__ = ['SparseTensorMul', 'portable_kernel']


def portable_kernel(k: Kernel, node: 'SparseTensorMul', state) -> None:
    """The product of ``A`` and ``B`` into ``out``."""
    A = k.operand('A', node.operand_type(state, 'A'))
    B = k.operand('B', node.operand_type(state, 'B'))
    coalesce_entries(k, [A, B], 'out', product=True)


@dace.library.expansion
class ExpandSparseTensorMulPure(ExpandTransformation):
    """The portable SDFG (:func:`portable_kernel`)."""
    environments = []

    @staticmethod
    def expansion(node: 'SparseTensorMul', state, sdfg):
        k = Kernel(node, state, sdfg)
        portable_kernel(k, node, state)
        return k.build()


@dace.library.node
class SparseTensorMul(SparseLibraryNode):
    """Members of ``A`` and ``B`` (sparse data of one shape, read through their views) ->
    members of ``out``, a ``PCOO<n>`` tensor holding ``A * B`` on the coordinates both hold."""
    implementations = {'pure': ExpandSparseTensorMulPure}
    default_implementation = 'pure'
    SPARSE_INPUTS = ('A', 'B')
    ACCEPTS_VIEWS = True
    SPARSE_OUTPUTS = ('out', )

    def __init__(self, name='sparse_tensor_mul', *args, **kwargs):
        super().__init__(name, *args, inputs=set(), outputs=set(), **kwargs)

    def validate(self, sdfg, state):
        """A's and B's members, of one rank and shape; a ``PCOO`` result of that shape, of the
        operands' dtype (:mod:`sdfgsparse.ops.validation`)."""
        w = Wiring(self, sdfg, state)
        A, B, out = w.sparse('A'), w.sparse('B'), w.sparse('out', output=True)
        if out.stored is not None and not is_counted_coo(out.stored.fmt):
            w.fail(errors.FormatMismatchError, f'result {out.shown} is {out.stored.fmt.name}; the node writes a '
                   'counted coordinate list (PCOO<n>)')
        for x in (B, out):
            if x.seen is not None and A.seen is not None and x.seen.rank != A.seen.rank:
                w.fail(errors.ShapeError, f'{x.shown} has {x.seen.rank} dimensions, {A.shown} {A.seen.rank}')
        for a, b, c in zip(A.dims(), B.dims(), out.dims()):
            w.same(a, b, c)
        w.computes(out, A, B)
        w.finish()
