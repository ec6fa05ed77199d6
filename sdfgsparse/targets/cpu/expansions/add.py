"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.add.SparseAdd`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse.targets.cpu.compress import compress_kernel, emit_append
from sdfgsparse.targets.cpu.entries import Entries, kernel_for_node
from sdfgsparse.targets.cpu.row_union import emit_row_union, emit_rows_of_columns
from sdfgsparse.ops.base import member_conn
from sdfgsparse.ops.add import SparseAdd
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandSparseAddCPU']


@dace.library.expansion
class ExpandSparseAddCPU(ExpandTransformation):
    """Parallel merge for CSR / CSC operands and a CSR or CSC result; otherwise append A's
    entries, then B's (times ``sign_B``), sort, sum equal coordinates."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'SparseAdd', state, sdfg):
        seen = {p: node.operand_type(state, p) for p in ('A', 'B')}
        out_fmt = node.sparse_type(state, 'out').fmt.name
        if out_fmt in ('CSR', 'CSC') and all(t.fmt.name in ('CSR', 'CSC') for t in seen.values()):
            if out_fmt == 'CSC':  # the CSR storage of C.T = A.T + B.T
                seen = {p: t.T for p, t in seen.items()}
            return _row_union_kernel(node, state, sdfg, seen)

        def expand(kb, vt):
            for prefix, sign in (('A', ''), ('B', '' if node.sign_B > 0 else '-')):
                st = node.operand_type(state, prefix)
                ent = Entries(st, {m: member_conn(prefix, m) for m in st.fmt.member_names})
                ent.emit(kb, emit_append(ent.i, ent.j, f'{sign}{vt}({ent.val})'), parallel=False)

        sta = node.operand_type(state, 'A')
        return compress_kernel(node, state, sdfg, expand, sta.rows, sta.cols)


def _row_union_kernel(node, state, sdfg, seen):
    """The row-parallel merge of ``seen`` (prefix -> the operand's type as merged: row by
    row, CSR or CSC) into the result's members."""
    kb = kernel_for_node(node, state, sdfg)
    vt = node.member_arrays(state, 'out')['vals'].dtype
    rows = {}
    for p, st in seen.items():
        conns = {m: member_conn(p, m) for m in ('pos1', 'crd1', 'vals')}
        if st.fmt.name == 'CSC':  # column-major as merged: store it by rows first
            arrs = node.member_arrays(state, p)
            conns = emit_rows_of_columns(kb, f'rows{p}', st.rows, st.cols, conns, arrs['crd1'].shape[0],
                                         kb.dtype(arrs['crd1'].dtype), kb.dtype(arrs['vals'].dtype))
        rows[p] = conns
    out = {m: member_conn('out', m) for m in ('pos1', 'crd1', 'vals')}
    cap = node.member_arrays(state, 'out')['crd1'].shape[0]
    emit_row_union(kb, seen['A'].rows, cap, rows['A'], rows['B'], out, node.sign_B, vt)
    return kb.build()


register(SparseAdd, 'cpu', ExpandSparseAddCPU, default=True)
