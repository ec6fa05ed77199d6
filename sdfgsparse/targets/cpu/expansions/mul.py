"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.mul.SparseMul`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse import errors
from sdfgsparse.targets.cpu.compress import compress_kernel, emit_append
from sdfgsparse.targets.cpu.entries import Entries
from sdfgsparse.ops.base import member_conn
from sdfgsparse.ops.mul import SparseMul
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandSparseMulCPU']


@dace.library.expansion
class ExpandSparseMulCPU(ExpandTransformation):
    """Append A's and B's entries; after sorting (by rows, or by columns for a CSC result),
    a coordinate stored by both appears as two adjacent entries, whose product is written
    (``mode='intersect'``)."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'SparseMul', state, sdfg):

        def expand(kb, vt):
            for prefix in ('A', 'B'):
                st = node.operand_type(state, prefix)
                if not all(l.unique for l in st.fmt.levels):
                    raise errors.UnsupportedOperationError(f'{node.label}: operand {prefix} ({st.fmt.name}) may '
                                                           'store a coordinate twice; convert it to CSR first')
                ent = Entries(st, {m: member_conn(prefix, m) for m in st.fmt.member_names})
                ent.emit(kb, emit_append(ent.i, ent.j, f'{vt}({ent.val})'), parallel=False)

        sta = node.operand_type(state, 'A')
        return compress_kernel(node, state, sdfg, expand, sta.rows, sta.cols, mode='intersect')


register(SparseMul, 'cpu', ExpandSparseMulCPU, default=True)
