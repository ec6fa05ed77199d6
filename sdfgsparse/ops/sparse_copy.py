"""``return A`` / ``return A.T`` in a program: a copy of a sparse matrix (or of its
transposed view) into a new sparse result.

A sparse argument, or the zero-copy transposed view ``X.T`` of any sparse data, names no
storage of its own that a program could hand back: the frontend inserts this node where
such a value leaves the program (:mod:`sdfgsparse.frontends.numpy`). The result is a new
matrix in the format the operand is seen in: ``A`` (CSR) gives a CSR copy, ``A.T`` gives the
same arrays seen as CSC (the transposed view of a format has the format's members, with
rows and columns swapped), so the copy is member by member whatever the format; the
caller's matrix is never aliased.
"""
import dace
import dace.library
from dace import properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse.lowering.graph import Kernel
from sdfgsparse.ops.base import SparseLibraryNode, member_conn
from sdfgsparse.ops.validation import Wiring

__all__ = ['portable_kernel', 'SparseCopy']


@dace.library.expansion
class ExpandSparseCopyPure(ExpandTransformation):
    """The portable SDFG: one state copying each member array ``_A_<m>`` to ``_out_<m>``
    (whole arrays: capacity-sized members of an intermediate result keep their
    capacity; the result's position array still records the real count). DaCe generates
    each copy as a ``memcpy`` (a device copy on the GPU), which no hand-written kernel
    beats: the ``cpu`` and ``cuda`` expansions build the same copies."""
    environments = []

    @staticmethod
    def expansion(node: 'SparseCopy', state, sdfg):
        k = Kernel(node, state, sdfg)
        portable_kernel(k, node, state)
        return k.build()


def portable_kernel(k: Kernel, node: 'SparseCopy', state) -> None:
    """The steps of the portable expansion built into ``k`` (the ``cpu`` expansion builds
    them into its own kernel where it has no tuned walk)."""
    st = k.add_state('copy')
    for m in node.member_arrays(state, 'out'):
        src, dst = member_conn('A', m), member_conn('out', m)
        state_src, state_dst = st.add_read(src), st.add_write(dst)
        st.add_nedge(state_src, state_dst, dace.Memlet.from_array(src, k.sdfg.arrays[src]))


@dace.library.node
class SparseCopy(SparseLibraryNode):
    """Members of ``A`` (or of ``A.T``: ``transpose_A``) -> members of ``out``, a new matrix
    of the type ``A`` is seen as (``A.T`` of a CSR is a CSC of the same arrays)."""
    implementations = {'pure': ExpandSparseCopyPure}
    default_implementation = 'pure'
    SPARSE_INPUTS = ('A', )
    SPARSE_OUTPUTS = ('out', )

    transpose_A = properties.Property(dtype=bool, default=False, desc='Copy the transposed view of A (the '
                                      'same arrays, read as the transposed format)')

    def __init__(self, name='sparse_copy', *args, **kwargs):
        super().__init__(name, *args, inputs=set(), outputs=set(), **kwargs)

    def validate(self, sdfg, state):
        """A's members, a result of the type A is seen as: A's members, sizes and dtype
        (:mod:`sdfgsparse.ops.validation`)."""
        w = Wiring(self, sdfg, state)
        A, out = w.sparse('A'), w.sparse('out', output=True)
        w.same_pattern(out, A)
        w.computes(out, A)
        w.finish()
