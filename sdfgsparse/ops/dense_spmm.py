"""Dense times sparse: ``C = B @ A`` (B: P x M or a vector of length M, A sparse M x N)."""
import dace
import dace.library
import sympy
from dace import properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse.lowering.graph import SUM, Kernel, emit, fill, read
from sdfgsparse.lowering.graph_dense import coordinate_binds, entry_maps
from sdfgsparse.ops.base import SparseLibraryNode
from sdfgsparse.ops.validation import Wiring

__all__ = ['DenseSpMM']

B, C = '_B', '_C'


@dace.library.expansion
class ExpandDenseSpMMPure(ExpandTransformation):
    """The portable SDFG: ``C = 0``, then maps over A's stored entries (their levels'
    loops, guards applied), each scattering along A's columns: ``C[k, col] += B[k, row] *
    A[row, col]`` in a sequential map over the P rows of B (``C[col] += B[row] *
    A[row, col]`` for a vector), as a write-conflict resolution (a plain update where A's
    outer level owns the columns, CSC; atomic elsewhere). Coordinates read from storage
    are bound to map parameters (:func:`~sdfgsparse.lowering.graph_dense.bind`), so the
    dense accesses are exact memlets."""
    environments = []

    @staticmethod
    def expansion(node: 'DenseSpMM', state, sdfg):
        k = Kernel(node, state, sdfg)
        A = k.operand('A', node.operand_type(state, 'A'))
        shape = node.connected(state, C).shape  # (a one-element operand reaches the kernel as a scalar)
        fill(k, k.add_state('zero'), C)
        st = k.add_state('dense_spmm')
        parallel = node.schedule_hint != 'sequential'
        binds = coordinate_binds(k, [('__i', A.row, B, len(shape) - 1), ('__j', A.col, C, len(shape) - 1)])
        kk = sympy.Symbol('__k')
        dense = ('__k', shape[0]) if len(shape) == 2 else None
        sc, coords = entry_maps(k, st, A, dense, parallel=parallel, binds=binds)
        i, j = coords.get('__i', A.row), coords.get('__j', A.col)
        if dense is None:
            emit(k, sc, [((C, [j]), read(B, i) * A.value, SUM)], guard=A.guard, label='vecmat')
        else:
            emit(k, sc, [((C, [kk, j]), read(B, kk, i) * A.value, SUM)], guard=A.guard, label='matmat')
        return k.build()


@dace.library.node
class DenseSpMM(SparseLibraryNode):
    """Dense (``_B``: P x M, or M) times sparse A (M x N) -> ``_C`` (P x N, or N)."""
    implementations = {'pure': ExpandDenseSpMMPure}
    default_implementation = 'pure'
    SPARSE_INPUTS = ('A', )
    ACCEPTS_VIEWS = True

    transpose_A = properties.Property(dtype=bool, default=False, desc='Use the transposed view of A (no copy)')

    def __init__(self, name='dense_spmm', *args, **kwargs):
        super().__init__(name, *args, inputs={B}, outputs={C}, **kwargs)

    def validate(self, sdfg, state):
        """A's members, ``_B`` (P x M, or M) and ``_C`` (P x N, or N) of one rank, of the
        dtype of ``B @ A`` (:mod:`sdfgsparse.ops.validation`)."""
        w = Wiring(self, sdfg, state)
        A, b, c = w.sparse('A'), w.dense(B, (1, 2)), w.dense(C, (1, 2), output=True)
        w.same(b.rank, c.rank)
        w.same(b.dim(-1), A.rows)
        w.same(c.dim(-1), A.cols)
        if b.rank.value == c.rank.value == 2:
            w.same(b.dim(0), c.dim(0))
        w.computes(c, A, b)
        w.finish()
