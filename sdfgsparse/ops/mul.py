"""``A * B`` element-wise for sparse A and B: a CSR result on the intersection of the
patterns. Both operands must store each coordinate once (the frontend converts a COO
operand first)."""
import dace
import dace.library
from dace import properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse import errors
from sdfgsparse.lowering.compress import emit_append, emit_buffers, emit_sort_compress
from sdfgsparse.lowering.entries import Entries, kernel_for_node
from sdfgsparse.ops.base import SparseLibraryNode, member_conn

__all__ = ['SparseMul']


@dace.library.expansion
class ExpandSparseMulPure(ExpandTransformation):
    """Append A's and B's entries; after sorting, a coordinate stored by both appears as two
    adjacent entries, whose product is written (``mode='intersect'``)."""
    environments = []

    @staticmethod
    def expansion(node: 'SparseMul', state, sdfg):
        kb = kernel_for_node(node, state, sdfg)
        out = node.member_arrays(state, 'out')
        cap = out['crd1'].shape[0]
        vt = kb.dtype(out['vals'].dtype)
        kb.symbols_of(cap)
        emit_buffers(kb, cap, vt)
        sta = node.operand_type(state, 'A')
        for prefix in ('A', 'B'):
            st = node.operand_type(state, prefix)
            if not all(l.unique for l in st.fmt.levels):
                raise errors.UnsupportedOperationError(f'{node.label}: operand {prefix} ({st.fmt.name}) may store '
                                                       'a coordinate twice; convert it to CSR first')
            ent = Entries(st, {m: member_conn(prefix, m) for m in st.fmt.member_names})
            ent.emit(kb, emit_append(ent.i, ent.j, f'{vt}({ent.val})'), parallel=False)
        emit_sort_compress(kb, sta.rows, sta.cols, cap, member_conn('out', 'pos1'), member_conn('out', 'crd1'),
                           member_conn('out', 'vals'), vt, mode='intersect')
        return kb.build()


@dace.library.node
class SparseMul(SparseLibraryNode):
    """Members of ``A`` and ``B`` -> CSR members of ``out`` = A ∘ B."""
    implementations = {'pure': ExpandSparseMulPure}
    default_implementation = 'pure'
    SPARSE_INPUTS = ('A', 'B')
    SPARSE_OUTPUTS = ('out', )

    transpose_A = properties.Property(dtype=bool, default=False, desc='Use the transposed view of A (no copy)')
    transpose_B = properties.Property(dtype=bool, default=False, desc='Use the transposed view of B (no copy)')

    def __init__(self, name='sparse_mul', *args, **kwargs):
        super().__init__(name, *args, inputs=set(), outputs=set(), **kwargs)
