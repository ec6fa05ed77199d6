"""SpGEMM: ``C = A @ B`` with sparse A (any format) and sparse B in CSR; a CSR result.

Gustavson's row-wise product in expand–sort–compress form: each stored ``A[i, k]``
appends ``A[i, k] * B[k, j]`` for every stored ``B[k, j]``; sorting and summing equal
coordinates gives C. The expansion list holds exactly ``flops`` entries, a capacity the
runtime computes from the arguments before the call (see :mod:`sdfgsparse.runtime.capacity`).
"""
import dace
import dace.library
from dace import properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse import errors
from sdfgsparse.lowering.compress import emit_append, emit_buffers, emit_sort_compress
from sdfgsparse.lowering.entries import Entries, kernel_for_node
from sdfgsparse.ops.base import SparseLibraryNode, member_conn

__all__ = ['SpGEMM']


@dace.library.expansion
class ExpandSpGEMMPure(ExpandTransformation):
    """Expand (sequential walk over A's entries and the matching rows of B), sort, sum."""
    environments = []

    @staticmethod
    def expansion(node: 'SpGEMM', state, sdfg):
        kb = kernel_for_node(node, state, sdfg)
        sta = node.operand_type(state, 'A')
        stb = node.operand_type(state, 'B')
        if stb.fmt.name != 'CSR':
            raise errors.UnsupportedOperationError(f'{node.label}: B must be CSR (got {stb.fmt.name}); '
                                                   'the frontend converts it')
        out = node.member_arrays(state, 'out')
        cap = out['crd1'].shape[0]
        vt = kb.dtype(out['vals'].dtype)
        kb.symbols_of(cap)
        emit_buffers(kb, cap, vt)
        ent = Entries(sta, {m: member_conn('A', m) for m in sta.fmt.member_names})
        bp, bc, bv = (member_conn('B', m) for m in ('pos1', 'crd1', 'vals'))
        k = ent.j
        inner = [f'for qb in range({bp}[{k}], {bp}[{k} + 1]):']
        inner += ['    ' + l for l in emit_append(ent.i, f'{bc}[qb]', f'{vt}({ent.val}) * {bv}[qb]')]
        ent.emit(kb, inner, parallel=False)
        emit_sort_compress(kb, sta.rows, stb.cols, cap, member_conn('out', 'pos1'), member_conn('out', 'crd1'),
                           member_conn('out', 'vals'), vt)
        return kb.build()


@dace.library.node
class SpGEMM(SparseLibraryNode):
    """Members of ``A`` and of CSR ``B`` -> CSR members of ``out`` = A @ B."""
    implementations = {'pure': ExpandSpGEMMPure}
    default_implementation = 'pure'
    SPARSE_INPUTS = ('A', 'B')
    SPARSE_OUTPUTS = ('out', )

    transpose_A = properties.Property(dtype=bool, default=False, desc='Use the transposed view of A (no copy)')
    transpose_B = properties.Property(dtype=bool, default=False,
                                      desc='Use the transposed view of B (no copy; B.T must iterate as CSR)')

    def __init__(self, name='spgemm', *args, **kwargs):
        super().__init__(name, *args, inputs=set(), outputs=set(), **kwargs)
