"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.softmax.SparseSoftmax`."""
import math
from typing import Sequence, Tuple
import dace
import dace.library
import numpy as np
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse._symbolic import pyexpr
from sdfgsparse.ops.base import member_conn
from sdfgsparse.targets.cpu.entries import Entries, copy_index_members, kernel_for_node, zero_fill
from sdfgsparse.targets.cpu.kernel import KernelBuilder
from sdfgsparse.ops.softmax import SparseSoftmax, lowest_value, owns_single_rows
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandSparseSoftmaxCPU', 'emit_row_phases', 'ROW', 'ENTRY']


#: Kinds of the phases of :func:`emit_row_phases`.
ROW, ENTRY = 'row', 'entry'


def emit_row_phases(kb: KernelBuilder, ent: Entries, phases: Sequence[Tuple[str, Sequence[str]]], parallel: bool):
    """One loop over the outer level (a map when ``parallel``, rows taken in dynamic chunks) whose body runs ``phases``
    in order: ``(ROW, lines)`` once per outer iteration, ``(ENTRY, lines)`` once per stored
    entry of that iteration (a full walk of the inner levels, guards included).

    Requires :func:`owns_single_rows` for per-row scalars to be meaningful."""
    st = ent.type
    kb.symbols_of(st.rows, st.cols, *st.sizes.values())
    outer = ent.pieces[0]
    for l in outer.pre:
        kb.line(l)
    if outer.has_loop:
        b, e = outer.bounds
        if parallel:
            kb.balance(outer.var)  # rows of different lengths: dynamic chunks
        kb.line(f'for {outer.var} in dace.map[{b}:{e}]:' if parallel else f'for {outer.var} in range({b}, {e}):')
    base = 1 if outer.has_loop else 0
    for l in outer.body:
        kb.line(l, base)
    for kind, lines in phases:
        ind = base
        if kind == ENTRY:
            if outer.guard:
                kb.line(f'if {outer.guard}:', ind)
                ind += 1
            for piece in ent.pieces[1:]:
                for l in piece.pre:
                    kb.line(l, ind)
                if piece.has_loop:
                    b, e = piece.bounds
                    kb.line(f'for {piece.var} in range({b}, {e}):', ind)
                    ind += 1
                for l in piece.body:
                    kb.line(l, ind)
                if piece.guard:
                    kb.line(f'if {piece.guard}:', ind)
                    ind += 1
        for l in lines:
            kb.line(l, ind)


@dace.library.expansion
class ExpandSparseSoftmaxCPU(ExpandTransformation):
    """Three passes over each row's entries: maximum, ``exp(v - max)`` with their sum,
    division by the sum.

    When every outer iteration is one row (CSR, ELL, DIA, DCSR; see
    :func:`owns_single_rows`) the rows run in parallel and the maximum and the sum are
    scalars of the row. Otherwise (BSR's block rows, and scattered rows: CSC, COO, the
    ``A.T`` views) they live in per-row workspaces and each pass is a full walk over the
    entries, in parallel when the outer level owns the rows (BSR), else sequential."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'SparseSoftmax', state, sdfg):
        st = node.operand_type(state, 'A')
        if node.axis == 0:
            st = st.T
        kb = kernel_for_node(node, state, sdfg)
        kb.globals['math'] = math
        kb.globals['np'] = np
        ent = Entries(st, {m: member_conn('A', m) for m in st.fmt.member_names})
        out = node.member_arrays(state, 'out')
        T = out['vals'].dtype
        Ts = kb.dtype(T)
        low = kb.const(lowest_value(T))
        o = member_conn('out', 'vals')
        val = f'{Ts}({ent.val})'
        copy_index_members(kb, node.member_arrays(state, 'A'), 'A', 'out')
        if any(p.guard for p in ent.pieces):  # padding / out-of-range slots keep value 0
            zero_fill(kb, o, out['vals'].shape)
        strategy = ent.strategy(0, node.schedule_hint)
        if owns_single_rows(st):
            emit_row_phases(kb, ent, [
                (ROW, [f'mx = {Ts}({low})']),
                (ENTRY, [f'mx = max(mx, {val})']),
                (ROW, [f'sm = {Ts}(0)']),
                (ENTRY, [f'e = math.exp({val} - mx)', f'{o}[{ent.v}] = e', 'sm = sm + e']),
                (ROW, ['rs = 1 / sm']),
                (ENTRY, [f'{o}[{ent.v}] = {o}[{ent.v}] * rs']),
            ],
                            parallel=strategy != 'sequential')
            return kb.build()
        rows = pyexpr(st.rows)
        npt = f'np.{T.type.__name__}'
        kb.line(f'mx = np.zeros(({rows},), dtype={npt})')
        kb.line(f'sm = np.zeros(({rows},), dtype={npt})')
        zero_fill(kb, 'mx', [st.rows], value=low)
        par = strategy != 'sequential'
        i = ent.i
        ent.emit(kb, [f'mx[{i}] = max(mx[{i}], {val})'], parallel=par)
        ent.emit(kb, [f'e = math.exp({val} - mx[{i}])', f'{o}[{ent.v}] = e', f'sm[{i}] = sm[{i}] + e'], parallel=par)
        ent.emit(kb, [f'{o}[{ent.v}] = {o}[{ent.v}] / sm[{i}]'], parallel=par)
        return kb.build()


register(SparseSoftmax, 'cpu', ExpandSparseSoftmaxCPU, default=True)
