"""``A + B`` and ``A - B`` for sparse A and B (any formats): a CSR result on the union of
the patterns. CSR / CSC operands (as the operation sees them) are merged row by row in
parallel (:mod:`sdfgsparse.lowering.row_union`); other formats, and CSC results, by
expand–sort–compress."""
import dace
import dace.library
from dace import properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse.lowering.compress import compress_kernel, emit_append
from sdfgsparse.lowering.entries import Entries, kernel_for_node
from sdfgsparse.lowering.row_union import emit_row_union, emit_rows_of_columns
from sdfgsparse.ops.base import SparseLibraryNode, member_conn

__all__ = ['SparseAdd']


@dace.library.expansion
class ExpandSparseAddPure(ExpandTransformation):
    """Row-parallel merge for CSR / CSC operands and a CSR result; otherwise append A's
    entries, then B's (times ``sign_B``), sort, sum equal coordinates."""
    environments = []

    @staticmethod
    def expansion(node: 'SparseAdd', state, sdfg):
        seen = {p: node.operand_type(state, p) for p in ('A', 'B')}
        if node.sparse_type(state, 'out').fmt.name == 'CSR' and all(t.fmt.name in ('CSR', 'CSC')
                                                                     for t in seen.values()):
            return _row_union_kernel(node, state, sdfg, seen)

        def expand(kb, vt):
            for prefix, sign in (('A', ''), ('B', '' if node.sign_B > 0 else '-')):
                st = node.operand_type(state, prefix)
                ent = Entries(st, {m: member_conn(prefix, m) for m in st.fmt.member_names})
                ent.emit(kb, emit_append(ent.i, ent.j, f'{sign}{vt}({ent.val})'), parallel=False)

        sta = node.operand_type(state, 'A')
        return compress_kernel(node, state, sdfg, expand, sta.rows, sta.cols)


def _row_union_kernel(node, state, sdfg, seen):
    kb = kernel_for_node(node, state, sdfg)
    vt = node.member_arrays(state, 'out')['vals'].dtype
    rows = {}
    for p, st in seen.items():
        conns = {m: member_conn(p, m) for m in ('pos1', 'crd1', 'vals')}
        if st.fmt.name == 'CSC':  # column-major as seen: store it by rows first
            arrs = node.member_arrays(state, p)
            conns = emit_rows_of_columns(kb, f'rows{p}', st.rows, st.cols, conns, arrs['crd1'].shape[0],
                                         kb.dtype(arrs['crd1'].dtype), kb.dtype(arrs['vals'].dtype))
        rows[p] = conns
    out = {m: member_conn('out', m) for m in ('pos1', 'crd1', 'vals')}
    cap = node.member_arrays(state, 'out')['crd1'].shape[0]
    emit_row_union(kb, seen['A'].rows, cap, rows['A'], rows['B'], out, node.sign_B, vt)
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
