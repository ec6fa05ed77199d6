"""SpGEMM: ``C = A @ B`` with sparse A (any format) and sparse B in CSR; a CSR result.

When A iterates as CSR (a CSR A, or the transposed view of a CSC one), the rows of C are
computed in parallel by Gustavson's algorithm with a workspace per thread of each call,
freed when the call ends (:mod:`sdfgsparse.targets.cpu.gustavson`). Otherwise, Gustavson's
row-wise product in expand–sort–compress form: each stored ``A[i, k]`` appends
``A[i, k] * B[k, j]`` for every stored ``B[k, j]``; sorting and summing equal coordinates
gives C. Either way C's columns are sorted within each row (scipy's canonical format). The
result arrays have ``flops`` entries of capacity, which the runtime computes from the
arguments before the call (see :mod:`sdfgsparse.runtime.capacity`).
"""
import dace
import dace.library
from dace import properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse import errors
from sdfgsparse.lowering.graph import Kernel
from sdfgsparse.lowering.graph_compress import EntryLists, Rows, compress_lists, product_lists, row_major
from sdfgsparse.ops.base import SparseLibraryNode, member_conn
from sdfgsparse.ops.validation import Wiring

__all__ = ['SpGEMM', 'product_kernel']


@dace.library.expansion
class ExpandSpGEMMPure(ExpandTransformation):
    """The portable SDFG, Gustavson's row-wise product in expand–sort–compress form for
    every format of A (:mod:`sdfgsparse.lowering.graph_compress`): the products of each
    stored ``A[i, k]`` with row ``k`` of B as entry lists (two parallel maps around a
    prefix sum), two stable counting sorts (by column, then by row) and a row-parallel pass
    summing equal coordinates in the order of A's entries, then of B's. O(flops + rows +
    cols); the lists have the result's capacity (``flops``)."""
    environments = []

    @staticmethod
    def expansion(node: 'SpGEMM', state, sdfg):
        k = Kernel(node, state, sdfg)
        product_kernel(k, node, state)
        return k.build()


def product_kernel(k: Kernel, node: 'SpGEMM', state) -> None:
    """The expand–sort–compress product of :class:`ExpandSpGEMMPure` built into ``k``
    (the ``cpu`` expansion uses it where A does not walk as CSR)."""
    sta = node.operand_type(state, 'A')
    stb = node.operand_type(state, 'B')
    A = k.operand('A', sta)
    B = row_major(k.operand('B', stb))
    if B is None:
        raise errors.UnsupportedOperationError(f'{node.label}: B must iterate as CSR (got {stb.fmt.name}); '
                                               'the frontend converts it')
    out = {m: member_conn('out', m) for m in ('pos1', 'crd1', 'vals')}
    cap = k.sdfg.arrays[out['crd1']].shape[0]
    lists = product_lists(k, 'gemm', A, B, cap, k.sdfg.arrays[out['vals']].dtype, stb.cols)
    rows, cols = sta.rows, stb.cols
    if node.sparse_type(state, 'out').fmt.name == 'CSC':  # the CSR storage of C.T
        lists, rows, cols = EntryLists(lists.col, lists.row, lists.val), cols, rows
    compress_lists(k, 'gemm', lists, cap, rows, cols, Rows(out['pos1'], out['crd1'], out['vals'], rows))


@dace.library.node
class SpGEMM(SparseLibraryNode):
    """Members of ``A`` and of CSR ``B`` -> CSR members of ``out`` = A @ B."""
    implementations = {'pure': ExpandSpGEMMPure}
    default_implementation = 'pure'
    SPARSE_INPUTS = ('A', 'B')
    SPARSE_OUTPUTS = ('out', )

    transpose_A = properties.Property(dtype=bool, default=False, desc='Use the transposed view of A (no copy)')
    transpose_B = properties.Property(dtype=bool, default=False,
                                      desc='Use the transposed view of B (no copy; B.T must iterate as CSR)')

    def __init__(self, name='spgemm', *args, **kwargs):
        super().__init__(name, *args, inputs=set(), outputs=set(), **kwargs)

    def validate(self, sdfg, state):
        """A's members, B's (iterated as CSR), a CSR or CSC result of A's rows x B's columns
        and the dtype of ``A @ B`` (:mod:`sdfgsparse.ops.validation`)."""
        w = Wiring(self, sdfg, state)
        A, B, out = w.sparse('A'), w.sparse('B'), w.sparse('out', output=True)
        w.format_in(B, ('CSR', ), ' (a CSR matrix, or a CSC one read transposed); the frontend converts it')
        w.format_in(out, ('CSR', 'CSC'))
        w.same(A.cols, B.rows)
        w.same(out.rows, A.rows)
        w.same(out.cols, B.cols)
        w.computes(out, A, B)
        w.finish()
