"""SpMM: ``Y = A @ B`` with sparse ``A`` and dense ``B`` (N x K)."""
import dace
import dace.library
from dace import properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse.lowering.graph import Kernel, epilogue_pass, fill
from sdfgsparse.lowering.graph_dense import spmm_pass
from sdfgsparse.ops.base import FusableSparseNode
from sdfgsparse.ops.validation import Wiring

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


@dace.library.node
class SpMM(FusableSparseNode):
    """Sparse matrix times dense matrix: members of ``A``, ``_B`` (N x K) -> ``_Y`` (M x K).
    ``transpose_A`` iterates A's storage as ``A.T`` (no copy)."""
    implementations = {'pure': ExpandSpMMPure}
    default_implementation = 'pure'
    SPARSE_INPUTS = ('A', )
    ACCEPTS_VIEWS = True

    transpose_A = properties.Property(dtype=bool, default=False, desc='Use the transposed view of A (no copy)')
    dense_tile = properties.Property(dtype=int,
                                     default=0,
                                     desc='Columns of B per tile of the dense loop (0: untiled); set by '
                                     'SparseDenseTiling from the I/O-bound analysis')

    def __init__(self, name='spmm', *args, **kwargs):
        super().__init__(name, *args, inputs={B}, outputs={Y}, **kwargs)

    def validate(self, sdfg, state):
        """A's members, a matrix ``_B`` (A's columns x K), a matrix ``_Y`` (A's rows x K) of the
        dtype of ``A @ B`` (:mod:`sdfgsparse.ops.validation`)."""
        w = Wiring(self, sdfg, state)
        A, b, y = w.sparse('A'), w.dense(B, (2, )), w.dense(Y, (2, ), output=True)
        w.same(A.cols, b.dim(0))
        w.same(A.rows, y.dim(0))
        w.same(b.dim(1), y.dim(1))
        w.computes(y, A, b)
        w.finish()
