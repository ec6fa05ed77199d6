"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.sddmm.SDDMM`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse.formats.structured import pattern_of
from sdfgsparse.lowering.graph import Scope, emit, fill, read
from sdfgsparse.lowering.graph_dense import sampled_pass
from sdfgsparse.lowering.graph_values import copy_index_members
from sdfgsparse.targets.cpu import structured
from sdfgsparse.targets.cpu.builder import CpuKernel, cpp, row_walk
from sdfgsparse.targets.cpu.dense_loops import contiguous_rows
from sdfgsparse.targets.cpu.row_leaves import dot_rows, result, sddmm_row, transposed_rows
from sdfgsparse.ops.base import member_conn
from sdfgsparse.ops.sddmm import SDDMM, X, Y
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandSDDMMCPU']


@dace.library.expansion
class ExpandSDDMMCPU(ExpandTransformation):
    """One dot product of length K per stored entry; entries own distinct value slots, so
    the outer level always runs in parallel. Index arrays of S are copied to the result
    (for a plain row walk, within the walk, whose rows are then one tasklet each computing
    several dot products at a time).
    Both operands are read by contiguous rows in a SIMD tasklet: with ``y_layout='NK'``
    directly, with ``'KN'`` from ``Y.T`` stored by rows once per call (in a buffer that
    the calling thread keeps: :func:`~sdfgsparse.targets.cpu.row_leaves.transposed_rows`).
    Every stored slot is written, so only formats with padding slots zero the result's
    values first."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'SDDMM', state, sdfg):
        k = CpuKernel(node, state, sdfg)
        st = node.operand_type(state, 'S')
        S = k.operand('S', st)
        vals, opos, ocrd = (member_conn('out', m) for m in ('vals', 'pos1', 'crd1'))
        dtype = k.sdfg.arrays[vals].dtype
        x, y = node.connected(state, X), node.connected(state, Y)
        kd = x.shape[1]
        walk = row_walk(S)
        members = node.member_arrays(state, 'S')
        copy_in_walk = walk is not None and set(members) == {'pos1', 'crd1', 'vals'} and \
            (walk.crd, walk.pos) == (member_conn('S', 'crd1'), member_conn('S', 'pos1'))
        first = k.add_state('prepare')
        rows_of_y, y_stride, y_pointer = Y, y.strides[0] if len(y.shape) == 2 else None, False
        if node.y_layout == 'KN' and contiguous_rows(x, y):
            # Y's columns are strided: store Y.T by rows once per call (O(N K) against O(nnz K)
            # products) so that every dot product reads two contiguous rows
            rows_of_y = transposed_rows(k, first, Y, kd, y.shape[1], y_stride, dtype.ctype)
            y_stride, y_pointer = kd, True
        rows_in_simd = y_pointer or (node.y_layout == 'NK' and contiguous_rows(x, y))
        simd_rows = rows_in_simd and copy_in_walk and not (structured.applies(st) and st.dtype == dtype)
        if not simd_rows:
            copy_index_members(k, first, st.fmt.member_names, 'S', 'out')
        if st.fmt.name not in ('CSR', 'CSC', 'COO', 'DCSR') and pattern_of(st.fmt) is None:
            # padded slots (ELL, DIA, BSR) read as zeros (a structured layout has none: every slot is written)
            fill(k, first, vals)
        if rows_in_simd and structured.applies(st) and st.dtype == dtype:
            # a fixed number of slots per group: one tasklet per row (targets/cpu/structured.py)
            structured.emit_sddmm(k, st, S, vals, X, rows_of_y, cpp(kd), cpp(x.strides[0]), cpp(y_stride),
                                  dtype.ctype, y_pointer)
            return k.build()
        if simd_rows:
            # a plain row walk: one tasklet per row, dot products of several entries at a
            # time (row_leaves.sddmm_row); it also copies the row's indices
            emit(k, Scope.at(first), [((opos, [0]), read(walk.pos, 0), None)], label='first_position')
            sc = k.rows(k.add_state('sddmm'), walk, scale=kd)
            emit(k, sc, [((opos, [walk.row + 1]), read(walk.pos, walk.row + 1), None)], label='position')
            sddmm_row(k, sc, walk, S.vals, X, rows_of_y, vals, ocrd, kd, x.strides[0], y_stride, dtype.ctype,
                      y_pointer)
            return k.build()
        body = k.add_state('sddmm')
        if rows_in_simd:
            # one SIMD dot product of two contiguous rows per stored entry
            sc = k.entries(body, S, parallel=True)
            dd = result(k, sc, 'dot', dtype)
            dot_rows(k, sc, dd, X, S.row, rows_of_y, S.col, kd, x.strides[0], y_stride, dtype.ctype, y_pointer,
                     guard=S.guard)
            emit(k, sc, [((vals, [S.pos]), S.value * dd.symbol, None)], guard=S.guard, locals_in=[dd], label='scale')
            return k.build()
        # strided operands: the portable pass (a dot product in a register per entry)
        sampled_pass(k, body, S, X, Y, kd, node.y_layout == 'NK', dtype, parallel=node.schedule_hint != 'sequential',
                     more=lambda s: [((vals, [S.pos]), s, None)])
        return k.build()


register(SDDMM, 'cpu', ExpandSDDMMCPU, default=True)
