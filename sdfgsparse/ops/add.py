"""``A + B`` and ``A - B`` for sparse A and B (any formats): a CSR result on the union of
the patterns (co-iteration by expand–sort–compress)."""
import dace
import dace.library
from dace import properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse.lowering.compress import compress_kernel, emit_append
from sdfgsparse.lowering.entries import Entries
from sdfgsparse.ops.base import SparseLibraryNode, member_conn

__all__ = ['SparseAdd']


@dace.library.expansion
class ExpandSparseAddPure(ExpandTransformation):
    """Append A's entries, then B's (times ``sign_B``); sort; sum equal coordinates."""
    environments = []

    @staticmethod
    def expansion(node: 'SparseAdd', state, sdfg):

        def expand(kb, vt):
            for prefix, sign in (('A', ''), ('B', '' if node.sign_B > 0 else '-')):
                st = node.operand_type(state, prefix)
                ent = Entries(st, {m: member_conn(prefix, m) for m in st.fmt.member_names})
                ent.emit(kb, emit_append(ent.i, ent.j, f'{sign}{vt}({ent.val})'), parallel=False)

        sta = node.operand_type(state, 'A')
        return compress_kernel(node, state, sdfg, expand, sta.rows, sta.cols)


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
