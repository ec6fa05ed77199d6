"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.map_values.MapValues`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse._symbolic import pyexpr
from sdfgsparse.ops.base import member_conn
from sdfgsparse.targets.cpu.entries import copy_index_members, kernel_for_node
from sdfgsparse.ops.map_values import ALPHA, MapValues, alpha_spelling, value_expression
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandMapValuesCPU']


@dace.library.expansion
class ExpandMapValuesCPU(ExpandTransformation):
    """A parallel map over stored values, each a Python tasklet ``out[q] = f(A[q])`` with
    the expression of :data:`FUNCTIONS` as written (tasklet code, as in ``pure``: a
    statement of the kernel's program would not know ``math.tanh``); index arrays copied
    by parallel maps."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'MapValues', state, sdfg):
        kb = kernel_for_node(node, state, sdfg)
        members = node.member_arrays(state, 'A')
        expr = value_expression(node.function, members['vals'].dtype, node.member_arrays(state, 'out')['vals'].dtype)
        reads = [f'v << {member_conn("A", "vals")}[q]']
        if node.function == 'scale':
            if node.alpha_is_data:
                reads.append(f'__alpha << {ALPHA}[0]')
                expr = expr.replace('alpha', '__alpha')
            else:
                spelling, names = alpha_spelling(node.alpha)
                for name in names:
                    kb.symbol(name)
                expr = expr.replace('alpha', spelling)
        copy_index_members(kb, members, 'A', 'out')
        kb.line(f'for q in dace.map[0:{pyexpr(members["vals"].shape[0])}]:')
        kb.line('    with dace.tasklet:')
        for r in reads:
            kb.line(f'        {r}')
        kb.line(f'        __o >> {member_conn("out", "vals")}[q]')
        kb.line(f'        __o = {expr}')
        return kb.build()


register(MapValues, 'cpu', ExpandMapValuesCPU, default=True)
