"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.dense_spmm.DenseSpMM`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse._symbolic import pyexpr
from sdfgsparse.targets.cpu.entries import Entries, kernel_for_node, update, zero_fill
from sdfgsparse.ops.base import member_conn
from sdfgsparse.ops.dense_spmm import B, C, DenseSpMM
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandDenseSpMMCPU']


@dace.library.expansion
class ExpandDenseSpMMCPU(ExpandTransformation):
    """Each stored ``A[i, j]`` adds ``B[:, i] * A[i, j]`` to column ``j`` of C: parallel over
    A's outer level when it owns columns (CSC); otherwise parallel over the rows of B, each
    walking the flat coordinate arrays of A's slots. A vector ``x @ A`` with scattered
    columns runs sequentially."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'DenseSpMM', state, sdfg):
        st = node.operand_type(state, 'A')
        kb = kernel_for_node(node, state, sdfg)
        ent = Entries(st, {m: member_conn('A', m) for m in st.fmt.member_names})
        c = node.connected(state, C)
        zero_fill(kb, C, c.shape)
        strat = ent.strategy(1, node.schedule_hint)
        b = node.connected(state, B)
        if len(c.shape) == 1:
            # (a vector of one element reaches the kernel as a scalar, which takes no variable index)
            bi = '0' if not dace.symbolic.issymbolic(b.total_size) and int(b.total_size) == 1 else ent.i
            ent.emit(kb, [update(f'{C}[{ent.j}]', f'{B}[{bi}] * {ent.val}')], parallel=strat != 'sequential')
        elif strat != 'sequential':
            ent.emit(kb, [
                f'for k in range(0, {pyexpr(c.shape[0])}):',
                '    ' + update(f'{C}[k, {ent.j}]', f'{B}[k, {ent.i}] * {ent.val}')
            ],
                     parallel=True)
        else:  # columns are scattered: the rows of B in parallel around a flat walk over the slots
            n = ent.emit_coordinates(kb)
            kb.line(f'for k in dace.map[0:{pyexpr(c.shape[0])}]:')
            kb.line(f'    for q in range(0, {n}):')
            kb.line('        if ri[q] >= 0:')
            kb.line('            ' + update(f'{C}[k, ci[q]]', f'{B}[k, ri[q]] * {ent.vals}[q]'))
        return kb.build()


register(DenseSpMM, 'cpu', ExpandDenseSpMMCPU, default=True)
