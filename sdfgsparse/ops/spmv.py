"""SpMV: ``y = A @ x`` with sparse ``A`` (any catalogue format, or its transposed view)."""
import dace
import dace.library
from dace import properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse.lowering.graph import SUM, Kernel, epilogue_pass, read
from sdfgsparse.ops.base import FusableSparseNode
from sdfgsparse.ops.validation import Wiring

__all__ = ['SpMV']

X, Y = '_x', '_y'


@dace.library.expansion
class ExpandSpMVPure(ExpandTransformation):
    """The portable SDFG: ``y = 0``, then maps over A's stored entries (their levels' loops)
    with ``y[row] += A[row, col] * x[col]`` as a write-conflict resolution (a plain update
    where the outer level owns the rows, an atomic one for a scatter), then the fused
    epilogue, if any, as a pass over ``y``."""
    environments = []

    @staticmethod
    def expansion(node: 'SpMV', state, sdfg):
        k = Kernel(node, state, sdfg)
        A = k.operand('A', node.operand_type(state, 'A'))
        y = k.sdfg.arrays[Y]
        k.fill(k.add_state('zero'), Y)
        st = k.add_state('spmv')
        sc = k.entries(st, A, parallel=node.schedule_hint != 'sequential')
        k.compute(sc, (Y, [A.row]), A.value * read(X, A.col), wcr=SUM, guard=A.guard)
        epilogue_pass(k, node, Y, y.shape)
        return k.build()


@dace.library.node
class SpMV(FusableSparseNode):
    """Sparse matrix times dense vector. Inputs: members of ``A`` (``_A_<member>``) and
    ``_x``; output ``_y``. ``transpose_A`` iterates A's storage as ``A.T`` (no copy)."""
    implementations = {'pure': ExpandSpMVPure}
    default_implementation = 'pure'
    SPARSE_INPUTS = ('A', )
    ACCEPTS_VIEWS = True

    transpose_A = properties.Property(dtype=bool, default=False, desc='Use the transposed view of A (no copy)')
    row_chunk = properties.Property(
        dtype=int,
        default=4,
        desc='Entries per step of a row walk (CSR, or CSC seen as A.T; A, x and y of one dtype): '
        'one vector per step, the lanes past the row end masked, so the loop tests the row end once '
        'per step (a power of two up to 64); 0 or 1: one entry per step (the scalar loop)')

    adaptive_walk = properties.Property(
        dtype=bool,
        default=True,
        desc='With row_chunk > 1: choose per call between the chunked walk and one entry per step from a sample '
        'of row lengths (regular, short rows: one entry per step; targets/cpu/dense_loops.regular_rows); '
        'False: always the chunks')

    def __init__(self, name='spmv', *args, **kwargs):
        super().__init__(name, *args, inputs={X}, outputs={Y}, **kwargs)

    def validate(self, sdfg, state):
        """A's members, a vector ``_x`` of A's columns, a vector ``_y`` of A's rows of the
        dtype of ``A @ x`` (:mod:`sdfgsparse.ops.validation`)."""
        w = Wiring(self, sdfg, state)
        A, x, y = w.sparse('A'), w.dense(X, (1, )), w.dense(Y, (1, ), output=True)
        w.same(A.cols, x.dim(0))
        w.same(A.rows, y.dim(0))
        w.computes(y, A, x)
        w.finish()
