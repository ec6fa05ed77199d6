"""``SparseFormatInference``: the storage order of sparse intermediates and results from the
operations that produce and consume them."""
from dace import properties
from dace.sdfg import utils as sdutil
from dace.transformation import transformation as xf

from sdfgsparse.formats import CSC, CSR, sparse_type_of
from sdfgsparse.ops.add import SparseAdd
from sdfgsparse.ops.base import SparseLibraryNode, retype_sparse, sparse_consumers
from sdfgsparse.ops.map_values import MapValues
from sdfgsparse.ops.mul import SparseMul
from sdfgsparse.ops.mul_dense import SparseMulDense
from sdfgsparse.ops.sddmm import SDDMM
from sdfgsparse.ops.softmax import SparseSoftmax
from sdfgsparse.ops.sparse_copy import SparseCopy

__all__ = ['SparseFormatInference', 'PRODUCERS']

#: nodes whose result format (CSR or CSC) this transformation may change
PRODUCERS = (SparseAdd, SparseMul)

#: readers whose sparse result takes their operand's pattern (its index arrays, in its
#: format): retyping the operand alone would leave their results typed in the old format
#: over storage in the new one (a wrong result, and for a non-square matrix writes past
#: the result's position array)
PATTERN_SHARING = (MapValues, SparseMulDense, SDDMM, SparseSoftmax, SparseCopy)


def _out_name(state, node):
    for e in state.out_edges(node):
        if e.src_conn and e.src_conn.startswith('_out_'):
            return state.out_edges(e.dst)[0].dst.data
    return None


@properties.make_properties
class SparseFormatInference(xf.SingleStateTransformation):
    """Chooses CSR or CSC for the result of an element-wise sparse operation (``A + B``,
    ``A - B``, ``A * B``) from Scorch's rules.

    The frontend stores these results as scipy does: CSC when the left operand is CSC (as
    the operation sees it), CSR otherwise. The rules compress the result's outer level
    along the index variable its uses iterate first:

    - a *consumer* that iterates the result row by row (SpMV, SpMM, SDDMM, ... on ``C``)
      wants ``C`` row-major; one that takes the transposed view (``C.T @ x``) iterates
      ``C``'s columns first and wants it column-major (CSC) -- then its loop runs in
      parallel over owned rows instead of scattering;
    - with no consumer in the program (the value is returned), the result follows its
      operands: a level is compressed along the index variable that indexes the operands'
      compressed outer levels (``CSC + CSC`` is CSC, as in scipy).

    Consumers decide when there are any (the expand-sort-compress producer costs the same
    for either order); ties keep CSR.

    Matched pattern: a ``SparseAdd`` or ``SparseMul`` node whose result is CSR or CSC.
    Applicable when the rules prefer the other of the two and every reader of the result
    is a sparse library node (or the result is only returned) whose own result does not
    take the result's pattern (:data:`PATTERN_SHARING`: ``2 * C``, ``C * D``, softmax). The rewrite changes the
    result's type (and its member views); the producer compresses along the other
    dimension, consumers iterate the new format. Examples: ``(A - B).T @ x`` with CSR
    operands gets a CSC intermediate; ``(A + B) @ x`` with CSC operands a CSR one (the
    SpMV then walks owned rows in parallel instead of scattering).
    """
    CATEGORY = 'Sparse'

    producer = xf.PatternNode(SparseLibraryNode)

    @classmethod
    def expressions(cls):
        return [sdutil.node_path_graph(cls.producer)]

    def preferred(self, state, sdfg) -> str:
        """'CSR' or 'CSC' by the rules in the class docstring."""
        node = self.producer
        name = _out_name(state, node)
        readers = [(n, p) for n, p in sparse_consumers(state, name)]
        if readers:
            cols = sum(1 for n, p in readers if getattr(n, f'transpose_{p}', False))
            return 'CSC' if cols > len(readers) - cols else 'CSR'
        outer = [node.operand_type(state, p).fmt.outer_dim for p in node.SPARSE_INPUTS]
        cols = sum(1 for d in outer if d == 1)
        return 'CSC' if cols > len(outer) - cols else 'CSR'

    def can_be_applied(self, state, expr_index, sdfg, permissive=False):
        node = self.producer
        if not isinstance(node, PRODUCERS):
            return False
        name = _out_name(state, node)
        if name is None or sparse_type_of(sdfg.arrays[name]).fmt.name not in ('CSR', 'CSC'):
            return False
        readers = sparse_consumers(state, name)
        if any(p is None for _, p in readers):
            return False  # read by something that is not a sparse node
        if any(isinstance(n, PATTERN_SHARING) for n, _ in readers):
            return False  # a reader's result shares this pattern, typed as it is now (2 * C: CSR storage of C)
        if any(n.data == name for s in sdfg.states() if s is not state for n in s.data_nodes()):
            return False  # used in another state
        return self.preferred(state, sdfg) != sparse_type_of(sdfg.arrays[name]).fmt.name

    def apply(self, state, sdfg):
        name = _out_name(state, self.producer)
        st = sparse_type_of(sdfg.arrays[name])
        fmt = CSC if self.preferred(state, sdfg) == 'CSC' else CSR
        retype_sparse(sdfg, name, fmt.type(st.dtype, st.rows, st.cols, st.index_dtype, **st.sizes))
