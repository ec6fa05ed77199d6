"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.spgemm.SpGEMM`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse import errors
from sdfgsparse.targets.cpu.compress import compress_kernel, emit_append
from sdfgsparse.targets.cpu.entries import Entries, kernel_for_node
from sdfgsparse.targets.cpu.gustavson import build_gustavson, emit_gustavson
from sdfgsparse.ops.base import member_conn
from sdfgsparse.ops.spgemm import SpGEMM
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandSpGEMMCPU']


@dace.library.expansion
class ExpandSpGEMMCPU(ExpandTransformation):
    """Row-parallel Gustavson when A iterates as CSR; else expand (sequential walk over A's
    entries and the matching rows of B), sort, sum."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'SpGEMM', state, sdfg):
        sta = node.operand_type(state, 'A')
        stb = node.operand_type(state, 'B')
        if stb.fmt.name != 'CSR':
            raise errors.UnsupportedOperationError(f'{node.label}: B must iterate as CSR (got {stb.fmt.name}); '
                                                   'the frontend converts it')
        if sta.fmt.name == 'CSR' and node.sparse_type(state, 'out').fmt.name == 'CSR':
            kb = kernel_for_node(node, state, sdfg)
            conns = {p: {m: member_conn(p, m) for m in ('pos1', 'crd1', 'vals')} for p in ('A', 'B', 'out')}
            outs = node.member_arrays(state, 'out')
            emit_gustavson(kb, sta.rows, stb.cols, outs['crd1'].shape[0], conns['A'], conns['B'], conns['out'],
                           outs['vals'].dtype, outs['crd1'].dtype)
            return build_gustavson(kb)
        ent = Entries(sta, {m: member_conn('A', m) for m in sta.fmt.member_names})
        bp, bc, bv = (member_conn('B', m) for m in ('pos1', 'crd1', 'vals'))

        def expand(kb, vt):
            k = ent.j
            inner = [f'for qb in range({bp}[{k}], {bp}[{k} + 1]):']
            inner += ['    ' + l for l in emit_append(ent.i, f'{bc}[qb]', f'{vt}({ent.val}) * {bv}[qb]')]
            ent.emit(kb, inner, parallel=False)

        return compress_kernel(node, state, sdfg, expand, sta.rows, stb.cols)


register(SpGEMM, 'cpu', ExpandSpGEMMCPU, default=True)
