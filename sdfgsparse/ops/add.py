"""``A + B`` and ``A - B`` for sparse A and B (any formats): a CSR result on the union of
the patterns (co-iteration by expand–sort–compress)."""
import dace
import dace.library
from dace import properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse.lowering.compress import emit_append, emit_buffers, emit_sort_compress
from sdfgsparse.lowering.entries import Entries, kernel_for_node
from sdfgsparse.ops.base import SparseLibraryNode, member_conn

__all__ = ['SparseAdd']


@dace.library.expansion
class ExpandSparseAddPure(ExpandTransformation):
    """Append A's entries, then B's (times ``sign_B``); sort; sum equal coordinates."""
    environments = []

    @staticmethod
    def expansion(node: 'SparseAdd', state, sdfg):
        kb = kernel_for_node(node, state, sdfg)
        out = node.member_arrays(state, 'out')
        cap = out['crd1'].shape[0]
        vt = kb.dtype(out['vals'].dtype)
        kb.symbols_of(cap)
        emit_buffers(kb, cap, vt)
        sta = node.operand_type(state, 'A')
        for prefix, sign in (('A', ''), ('B', '' if node.sign_B > 0 else '-')):
            st = node.operand_type(state, prefix)
            ent = Entries(st, {m: member_conn(prefix, m) for m in st.fmt.member_names})
            ent.emit(kb, emit_append(ent.i, ent.j, f'{sign}{vt}({ent.val})'), parallel=False)
        emit_sort_compress(kb, sta.rows, sta.cols, cap, member_conn('out', 'pos1'), member_conn('out', 'crd1'),
                           member_conn('out', 'vals'), vt)
        return kb.build()


@dace.library.node
class SparseAdd(SparseLibraryNode):
    """Members of ``A`` and ``B`` -> CSR members of ``out`` = A + sign_B * B."""
    implementations = {'pure': ExpandSparseAddPure}
    default_implementation = 'pure'
    SPARSE_INPUTS = ('A', 'B')
    SPARSE_OUTPUTS = ('out', )

    sign_B = properties.Property(dtype=int, default=1, desc='+1 for A + B, -1 for A - B')
    transpose_A = properties.Property(dtype=bool, default=False, desc='Use the transposed view of A (no copy)')
    transpose_B = properties.Property(dtype=bool, default=False, desc='Use the transposed view of B (no copy)')

    def __init__(self, name='sparse_add', sign_B=1, *args, **kwargs):
        super().__init__(name, *args, inputs=set(), outputs=set(), **kwargs)
        self.sign_B = sign_B
