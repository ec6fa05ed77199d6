"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.softmax.SparseSoftmax`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse.lowering.graph_values import copy_index_members, exact_float
from sdfgsparse.ops.base import member_conn
from sdfgsparse.ops.softmax import SparseSoftmax, lowest_value, portable_kernel
from sdfgsparse.targets.cpu.builder import CpuKernel, leaf, row_walk
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandSparseSoftmaxCPU']


@dace.library.expansion
class ExpandSparseSoftmaxCPU(ExpandTransformation):
    """Where A (seen along ``axis``) walks as CSR, its rows in parallel (dynamic chunks),
    each one call of ``softmax_row`` (``include/sdfgsparse_softmax.h``: the row's maximum,
    ``exp(v - max)`` with their sum, a scaling by ``1 / sum``; vectorised exp). Every other
    format takes the portable kernel (:func:`~sdfgsparse.ops.softmax.portable_kernel`:
    per-row maximum and sum workspaces, plain updates where the outer level is the row,
    atomic ones for scattered rows) in a cpu kernel."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'SparseSoftmax', state, sdfg):
        st = node.operand_type(state, 'A')
        if node.axis == 0:
            st = st.T
        k = CpuKernel(node, state, sdfg)
        A = k.operand('A', st)
        walk = row_walk(A)
        if walk is None:
            portable_kernel(k, node, state)
            return k.build()
        out = member_conn('out', 'vals')
        T = k.sdfg.arrays[out].dtype
        copy_index_members(k, k.add_state('indices'), node.member_arrays(state, 'out'), 'A', 'out')
        sc = k.rows(k.add_state('rows'), walk, scale=8)
        leaf(k, sc, 'softmax_row', f'sdfgsparse::softmax_row<{T.ctype}>(_to, _tv, _tlo, _thi, '
             f'({T.ctype}){exact_float(lowest_value(T))});', scalars={'_tlo': walk.lo, '_thi': walk.hi},
             arrays={'_tv': A.vals}, outs={'_to': (out, None)})
        return k.build()


register(SparseSoftmax, 'cpu', ExpandSparseSoftmaxCPU, default=True)
