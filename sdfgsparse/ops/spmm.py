"""SpMM: ``Y = A @ B`` with sparse ``A`` and dense ``B`` (N x K)."""
import dace
import dace.library
from dace import properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse._symbolic import pyexpr
from sdfgsparse.targets.cpu.dense_loops import axpy_row, axpy_tile, contiguous_rows, spmm_row
from sdfgsparse.targets.cpu.entries import Entries, kernel_for_node, update, zero_fill
from sdfgsparse.lowering.epilogue import emit_epilogue_pass, node_epilogue
from sdfgsparse.lowering.graph import Kernel, epilogue_pass, fill
from sdfgsparse.lowering.graph_dense import spmm_pass
from sdfgsparse.ops.base import FusableSparseNode, member_conn

__all__ = ['SpMM']

B, Y = '_B', '_Y'

#: Columns per parallel tile of a scatter walk when no transformation chose a tile: two
#: cache lines of doubles, so each walk over the slots does SIMD updates while K = 64
#: still gives four tiles to share among threads. SparseDenseTiling sizes it for the cache.
SCATTER_TILE = 16


@dace.library.expansion
class ExpandSpMMPure(ExpandTransformation):
    """The portable SDFG: ``Y = 0``, then maps over A's stored entries (their levels'
    loops, guards applied) around a sequential map over the K columns with ``Y[row, k] +=
    A[row, col] * B[col, k]`` as a write-conflict resolution (a plain update where the
    outer map's parameter gives the row: CSR, BSR, ELL, DIA; atomic otherwise: DCSR,
    CSC, COO, transposed views), then the fused epilogue, if any, as a pass over Y.
    Coordinates read from storage are parameters of one-iteration maps
    (:func:`~sdfgsparse.lowering.graph_dense.bind`), so B and Y are accessed through
    exact memlets (DaCe's ``Vectorization`` matches the column map).

    With ``dense_tile = T`` the column map is strip-mined into tiles of T columns and the
    tile map hoisted outside the walk (:func:`~sdfgsparse.lowering.graph_dense.entry_maps`):
    sequential tiles around the parallel walk where A's outer level owns the rows, else
    parallel tiles each walking all entries (``dense_tile <= 0``: untiled)."""
    environments = []

    @staticmethod
    def expansion(node: 'SpMM', state, sdfg):
        k = Kernel(node, state, sdfg)
        A = k.operand('A', node.operand_type(state, 'A'))
        shape = node.connected(state, Y).shape  # (a one-element Y reaches the kernel as a scalar)
        fill(k, k.add_state('zero'), Y)
        spmm_pass(k, k.add_state('spmm'), A, Y, B, shape[1], tile=node.dense_tile,
                  parallel=node.schedule_hint != 'sequential')
        epilogue_pass(k, node, Y, shape)
        return k.build()


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
    environments = []

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
            acc = f'{Y}[{ent.i}, k] += {ent.val} * {B}[{ent.j}, k]' if '[' not in ent.i else \
                update(f'{Y}[{ent.i}, k]', f'{ent.val} * {B}[{ent.j}, k]')
            inner = [f'for k in {krange}:', '    ' + acc]
            if not T and '[' not in ent.i and contiguous_rows(bdesc, y):
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


@dace.library.node
class SpMM(FusableSparseNode):
    """Sparse matrix times dense matrix: members of ``A``, ``_B`` (N x K) -> ``_Y`` (M x K).
    ``transpose_A`` iterates A's storage as ``A.T`` (no copy)."""
    implementations = {'pure': ExpandSpMMPure, 'cpu': ExpandSpMMCPU}
    default_implementation = 'cpu'
    SPARSE_INPUTS = ('A', )

    transpose_A = properties.Property(dtype=bool, default=False, desc='Use the transposed view of A (no copy)')
    dense_tile = properties.Property(dtype=int,
                                     default=0,
                                     desc='Columns of B per tile of the dense loop (0: untiled); set by '
                                     'SparseDenseTiling from the I/O-bound analysis')

    def __init__(self, name='spmm', *args, **kwargs):
        super().__init__(name, *args, inputs={B}, outputs={Y}, **kwargs)
