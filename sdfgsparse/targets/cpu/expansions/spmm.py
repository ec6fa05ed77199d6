"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.spmm.SpMM`."""
import dace
import dace.library
import sympy
from dace import dtypes
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse.lowering.graph import epilogue_pass, read
from sdfgsparse.targets.cpu import structured
from sdfgsparse.targets.cpu.builder import CpuKernel, coordinates, row_epilogue, row_walk, strategy, update
from sdfgsparse.targets.cpu.dense_loops import contiguous_rows
from sdfgsparse.targets.cpu.row_leaves import axpy_row, axpy_tile, spmm_row
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
        k = CpuKernel(node, state, sdfg)
        st = node.operand_type(state, 'A')
        A = k.operand('A', st)
        y, bdesc = node.connected(state, Y), node.connected(state, B)
        K = y.shape[1]
        T = node.dense_tile if 0 < node.dense_tile else 0
        ctype = y.dtype.ctype
        contiguous = contiguous_rows(bdesc, y)
        if (structured.applies(st) or structured.transposed(st)) and not T and contiguous:
            # a fixed number of slots per group (targets/cpu/structured.py): A by rows or row blocks,
            # A.T by column ranges in parallel, each over all slots
            (structured.emit_spmm if structured.applies(st) else structured.emit_spmm_t)(k, st, A, Y, B, ctype)
            epilogue_pass(k, node, Y, y.shape)
            return k.build()
        strat = strategy(st, 0, node.schedule_hint)
        walk = row_walk(A) if not T and strat == 'acc' and contiguous else None
        if walk is not None:
            # one tasklet per row of Y, written whole (no zero fill; row_leaves.spmm_row)
            sc = k.rows(k.add_state('spmm'), walk, scale=K)
            t = spmm_row(k, sc, walk, A.vals, B, Y, K, bdesc.strides[0], ctype, outs=not node.epilogue)
            if node.epilogue:
                row_epilogue(k, sc, t, '_ty', Y, walk.row, K, node)
            return k.build()
        k.fill(k.add_state('zero'), Y)
        if strat != 'sequential':
            direct = not any(isinstance(a, sympy.core.function.AppliedUndef) for a in sympy.preorder_traversal(A.row))
            if not T and direct and contiguous:
                # one SIMD loop over the K columns per stored entry
                sc = k.entries(k.add_state('spmm'), A, parallel=True)
                axpy_row(k, sc, Y, A.row, B, A.col, A.value, K, bdesc.strides[0], ctype, guard=A.guard)
            else:
                if T:  # the tile loop hoisted outside the parallel row loop: B[:, tile] stays in cache
                    body = k.loop('tiles', '__kt', 0, (K + T - 1) // T)
                    kt = sympy.Symbol('__kt') * T
                    columns = ('__k', kt, sympy.Min(kt + T, K))
                else:
                    body = k.add_state('spmm')
                    columns = ('__k', 0, K)
                sc = k.entries(body, A, parallel=True, inner=[columns])
                h = sympy.Symbol('__k')
                update(k, sc, (Y, [A.row, h]), A.value * read(B, A.col, h), A.guard)
            epilogue_pass(k, node, Y, y.shape)
            return k.build()
        # rows are scattered: the K columns (or K / T tiles) in parallel around a flat walk over the slots
        ri, ci, n = coordinates(k, A)
        q = sympy.Symbol('__q')
        body = k.add_state('spmm')
        if contiguous:  # one SIMD loop over the tile's columns per slot
            T = T or SCATTER_TILE  # untiled by a transformation: a fixed tile (see SCATTER_TILE)
            sc = k.scope(body, [('__t', 0, (K + T - 1) // T), ('__q', 0, n)],
                         [dtypes.ScheduleType.Default, dtypes.ScheduleType.Sequential])
            c0 = sympy.Symbol('__t') * T
            axpy_tile(k, sc, Y, ri, ci, A.vals, '__q', B, c0, sympy.Min(c0 + T, K), y.strides[0], bdesc.strides[0],
                      ctype)
        else:
            if T:
                c0 = sympy.Symbol('__t') * T
                ranges = [('__t', 0, (K + T - 1) // T), ('__q', 0, n), ('__k', c0, sympy.Min(c0 + T, K))]
            else:
                ranges = [('__k', 0, K), ('__q', 0, n)]
            sc = k.scope(body, ranges, [dtypes.ScheduleType.Default] + [dtypes.ScheduleType.Sequential] * (len(ranges) - 1))
            h = sympy.Symbol('__k')
            update(k, sc, (Y, [read(ri, q), h]), read(A.vals, q) * read(B, read(ci, q), h), read(ri, q) >= 0)
        epilogue_pass(k, node, Y, y.shape)
        return k.build()


register(SpMM, 'cpu', ExpandSpMMCPU, default=True)
