"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.spmm.SpMM`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse._symbolic import pyexpr
from sdfgsparse.targets.cpu import structured
from sdfgsparse.targets.cpu.dense_loops import axpy_row, axpy_tile, contiguous_rows, spmm_row
from sdfgsparse.targets.cpu.entries import Entries, kernel_for_node, update, zero_fill
from sdfgsparse.lowering.epilogue import emit_epilogue_pass, node_epilogue
from sdfgsparse.ops.base import member_conn
from sdfgsparse.ops.spmm import B, SCATTER_TILE, SpMM, Y
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandSpMMCPU']


@dace.library.expansion
class ExpandSpMMCPU(ExpandTransformation):
    """Rows of A in parallel when the outer level owns them (each row updates its own row of
    Y over the K columns; for a plain row walk such as CSR, one tasklet per row that keeps
    panels of the row in registers and writes it once, so Y needs no zero fill);
    otherwise (scatter: CSC, COO, ``A.T`` of CSR) the K columns in parallel, each walking
    the flat coordinate arrays of A's slots (race-free).

    With ``dense_tile = T`` the dense loop is strip-mined into tiles of T columns and the
    tile loop hoisted outward: row-owned, a sequential loop over tiles around the parallel
    row loop; scatter, the tiles in parallel, each walking the slots once and updating T
    contiguous columns per slot (instead of one strided column per walk)."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'SpMM', state, sdfg):
        st = node.operand_type(state, 'A')
        kb = kernel_for_node(node, state, sdfg)
        ent = Entries(st, {m: member_conn('A', m) for m in st.fmt.member_names})
        y = node.connected(state, Y)
        K = pyexpr(y.shape[1])
        T = node.dense_tile if 0 < node.dense_tile else 0
        bdesc = node.connected(state, B)
        # the dense loop over the K columns, whole or one tile [kt, kt + T) at a time
        krange = f'range(kt, min(kt + {T}, {K}))' if T else f'range(0, {K})'
        row_done = []
        if node.epilogue and ent.i == ent.pieces[0].coord:  # the row is complete after its outer iteration
            el = f'{Y}[{ent.i}, k]'
            row_done = [f'for k in {krange}:', f'    {el} = {node_epilogue(node, el, [ent.i, "k"])}']
        if (structured.applies(st) or structured.transposed(st)) and not T and contiguous_rows(bdesc, y):
            # a fixed number of slots per group (targets/cpu/structured.py): A by rows or row blocks,
            # A.T by column ranges in parallel, each over all slots
            emit = structured.emit_spmm if structured.applies(st) else structured.emit_spmm_t
            emit(kb, st, ent.member_vars, Y, B, K, pyexpr(bdesc.strides[0]), y.dtype.ctype, pyexpr(y.strides[0]))
            if node.epilogue:
                emit_epilogue_pass(kb, node, Y, y.shape)
            return kb.build()
        row = ent.row_walk() if not T and ent.strategy(0, node.schedule_hint) == 'acc' and contiguous_rows(
            bdesc, y) else None
        if row is not None:
            # one tasklet per row of Y, written whole (no zero fill; targets/cpu/dense_loops.spmm_row)
            _, inner, crd, _ = row
            ent.emit_row_map(kb, scale=str(K))
            for l in spmm_row(Y, ent.i, B, crd, ent.vals, inner.bounds[0], inner.bounds[1], K,
                              pyexpr(bdesc.strides[0]), y.dtype.ctype) + row_done:
                kb.line(l, 1)
            return kb.build()
        zero_fill(kb, Y, y.shape)
        if ent.strategy(0, node.schedule_hint) != 'sequential':
            # A direct row index may use +=; an indirect one (DCSR) needs the explicit update
            direct = '[' not in ent.i and not ent.bound_row
            acc = f'{Y}[{ent.i}, k] += {ent.val} * {B}[{ent.j}, k]' if direct else \
                update(f'{Y}[{ent.i}, k]', f'{ent.val} * {B}[{ent.j}, k]')
            inner = [f'for k in {krange}:', '    ' + acc]
            if not T and direct and contiguous_rows(bdesc, y):
                # one SIMD loop over the K columns per stored entry (see targets/cpu/dense_loops)
                inner = axpy_row(Y, ent.i, B, ent.j, ent.val, K, pyexpr(bdesc.strides[0]), y.dtype.ctype)
            if T:  # the tile loop hoisted outside the parallel row loop: B[:, tile] stays in cache
                kb.line(f'for kt in range(0, {K}, {T}):')
            ent.emit(kb, inner, parallel=True, epi=row_done, indent=1 if T else 0)
            if node.epilogue and not row_done:
                emit_epilogue_pass(kb, node, Y, y.shape)
        else:  # rows are scattered: the K columns (or K / T tiles) in parallel around a flat walk over the slots
            n = ent.emit_coordinates(kb)
            if contiguous_rows(bdesc, y):  # one SIMD loop over the tile's columns per slot
                T = T or SCATTER_TILE  # untiled by a transformation: a fixed tile (see SCATTER_TILE)
                kb.line(f'for kt in dace.map[0:{K}:{T}]:')
                kb.line(f'    for q in range(0, {n}):')
                kb.line('        if ri[q] >= 0:')
                for l in axpy_tile(Y, 'ri[q]', B, 'ci[q]', f'{ent.vals}[q]', 'kt', f'min(kt + {T}, {K})',
                                   pyexpr(y.strides[0]), pyexpr(bdesc.strides[0]), y.dtype.ctype):
                    kb.line('            ' + l)
            elif T:
                kb.line(f'for kt in dace.map[0:{K}:{T}]:')
                kb.line(f'    for q in range(0, {n}):')
                kb.line('        if ri[q] >= 0:')
                kb.line(f'            for k in {krange}:')
                kb.line('                ' + update(f'{Y}[ri[q], k]', f'{ent.vals}[q] * {B}[ci[q], k]'))
            else:
                kb.line(f'for k in dace.map[0:{K}]:')
                kb.line(f'    for q in range(0, {n}):')
                kb.line('        if ri[q] >= 0:')
                kb.line('            ' + update(f'{Y}[ri[q], k]', f'{ent.vals}[q] * {B}[ci[q], k]'))
            emit_epilogue_pass(kb, node, Y, y.shape)
        return kb.build()


register(SpMM, 'cpu', ExpandSpMMCPU, default=True)
