"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.sddmm.SDDMM`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse._symbolic import pyexpr
from sdfgsparse.formats.structured import pattern_of
from sdfgsparse.targets.cpu import structured
from sdfgsparse.targets.cpu.dense_loops import contiguous_rows, dot_rows, sddmm_row, transposed_rows
from sdfgsparse.targets.cpu.entries import Entries, copy_index_members, kernel_for_node, zero_fill
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
    the calling thread keeps: :func:`~sdfgsparse.targets.cpu.dense_loops.transposed_rows`).
    Every stored slot is written, so only formats with padding slots zero the result's
    values first."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'SDDMM', state, sdfg):
        st = node.operand_type(state, 'S')
        kb = kernel_for_node(node, state, sdfg)
        ent = Entries(st, {m: member_conn('S', m) for m in st.fmt.member_names})
        out = node.member_arrays(state, 'out')
        x = node.connected(state, X)
        T = kb.dtype(out['vals'].dtype)
        # S's index arrays become the result's: inside the walk for a plain row walk (no
        # parallel regions of their own), else one parallel copy per member
        row = ent.row_walk()
        members = node.member_arrays(state, 'S')
        pro, copy_crd = [], []
        copy_in_walk = row is not None and set(members) == {'pos1', 'crd1', 'vals'} and row[2:] == (member_conn(
            'S', 'crd1'), member_conn('S', 'pos1'))
        if copy_in_walk:
            outer, _, crd, pos = row
            opos, ocrd = member_conn('out', 'pos1'), member_conn('out', 'crd1')
            kb.line(f'{opos}[0] = {pos}[0]')
            pro = [f'{opos}[{outer.var} + 1] = {pos}[{outer.var} + 1]']
            copy_crd = [f'{ocrd}[{ent.v}] = {crd}[{ent.v}]']
        else:
            copy_index_members(kb, members, 'S', 'out')
        if st.fmt.name not in ('CSR', 'CSC', 'COO', 'DCSR') and pattern_of(st.fmt) is None:
            # padded slots (ELL, DIA, BSR) read as zeros (a structured layout has none: every slot is written)
            zero_fill(kb, member_conn('out', 'vals'), out['vals'].shape)
        y = node.connected(state, Y)
        Kd = pyexpr(x.shape[1])
        rows_of_y, y_stride, y_pointer = Y, pyexpr(y.strides[0]) if len(y.shape) == 2 else None, False
        if node.y_layout == 'KN' and contiguous_rows(x, y):
            # Y's columns are strided: store Y.T by rows once per call (O(N K) against O(nnz K)
            # products) so that every dot product reads two contiguous rows
            for l in transposed_rows('_ytp', Y, Kd, pyexpr(y.shape[1]), y_stride, out['vals'].dtype.ctype):
                kb.line(l)
            rows_of_y, y_stride, y_pointer = '_ytp', Kd, True
        rows_in_simd = y_pointer or (node.y_layout == 'NK' and contiguous_rows(x, y))
        if rows_in_simd and structured.applies(st) and st.dtype == out['vals'].dtype:
            # a fixed number of slots per group: one tasklet per row (targets/cpu/structured.py)
            structured.emit_sddmm(kb, st, ent.member_vars, member_conn('out', 'vals'), X, rows_of_y, Kd,
                                  pyexpr(x.strides[0]), y_stride, out['vals'].dtype.ctype, y_pointer)
            return kb.build()
        if rows_in_simd and copy_in_walk:
            # a plain row walk: one tasklet per row, dot products of several entries at a
            # time (targets/cpu/dense_loops.sddmm_row); it also copies the row's indices
            _, inner, crd, _ = row
            ent.emit_row_map(kb, scale=str(Kd))
            for l in pro:
                kb.line(l, 1)
            for l in sddmm_row(member_conn('out', 'vals'), member_conn('out', 'crd1'), ent.i, X, rows_of_y, crd,
                               ent.vals, inner.bounds[0], inner.bounds[1], Kd, pyexpr(x.strides[0]), y_stride,
                               out['vals'].dtype.ctype, y_pointer):
                kb.line(l, 1)
            return kb.build()
        if rows_in_simd:
            # one SIMD dot product of two contiguous rows per stored entry (targets/cpu/dense_loops)
            body = [f'_dd = {T}(0)'] + dot_rows('_dd', X, ent.i, rows_of_y, ent.j, Kd, pyexpr(x.strides[0]),
                                                 y_stride, out['vals'].dtype.ctype, y_pointer)
            body.append(f'{member_conn("out", "vals")}[{ent.v}] = {ent.val} * _dd')
        else:
            yk = f'{Y}[{ent.j}, k]' if node.y_layout == 'NK' else f'{Y}[k, {ent.j}]'
            body = [f'acc = {T}(0)', f'for k in range(0, {Kd}):', f'    acc += {X}[{ent.i}, k] * {yk}',
                    f'{member_conn("out", "vals")}[{ent.v}] = {ent.val} * acc']
        ent.emit(kb, body + copy_crd, parallel=True, pro=pro)
        return kb.build()


register(SDDMM, 'cpu', ExpandSDDMMCPU, default=True)
