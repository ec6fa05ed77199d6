"""``SparseLoopOrdering``: order the loops of a sampled product so that the sparse operand
filters the iteration space before the dense reduction runs."""
import dace
from dace import properties
from dace.libraries.blas import MatMul
from dace.sdfg import nodes
from dace.sdfg import utils as sdutil
from dace.transformation import transformation as xf

from sdfgsparse.ops.mul_dense import SparseMulDense
from sdfgsparse.ops.sddmm import SDDMM
from sdfgsparse.transformations._transpose import absorbable_transpose

__all__ = ['SparseLoopOrdering']


@properties.make_properties
class SparseLoopOrdering(xf.SingleStateTransformation):
    """Reorders the loops of ``S * (X @ Y)`` (S sparse) so that ``S`` filters first.

    The expression is one tensor-algebra statement ``C[i, j] = S[i, j] * X[i, k] * Y[k, j]``.
    Evaluated in the order the program spells it, the dense product runs the loop order
    ``(i, j, k)`` over *every* ``(i, j)`` and samples afterwards: ``M * N * K``
    multiply-adds and an ``M x N`` dense intermediate. Following Scorch's heuristic, the
    index variables that filter iteration -- ``i`` and ``j`` index compressed/coordinate
    levels of ``S`` and are absent from the other operand of the reduction -- are ranked
    first (most selective outermost) and respect ``S``'s level order; the reduction
    variable ``k`` goes innermost. That order is the sampled dense-dense product: the
    loops run over ``S``'s stored entries and ``K`` per entry, ``nnz * K`` in all, with no
    dense intermediate.

    Matched pattern::

        X, Y --> MatMul --> T (transient, M x N) --> SparseMulDense(S, T) --> C

    becomes ``S, X, Y --> SDDMM --> C`` (``C`` keeps ``S``'s pattern and format, as before;
    a transposed view of ``S`` stays a transposed view). ``Y`` may be any producer of a
    ``K x N`` array; when it is only the ``Transpose`` of an ``N x K`` array (``Kmat.T``),
    the transpose goes too and the SDDMM reads ``Kmat`` by rows (``y_layout='NK'``): each
    dot product then runs over two contiguous rows.

    Applicability:

    - the MatMul multiplies two 2-D operands with ``alpha = 1`` and ``beta = 0``;
    - ``T`` is a transient written only by the MatMul and read only by the element-wise
      product (in this state and nowhere else in the SDFG);
    - ``T`` has the product's dtype, so the rewrite does not change rounding.

    Iteration counts before and after are given by
    :func:`sdfgsparse.analysis.iteration_count`; see ``tests/transformations``.
    """
    CATEGORY = 'Sparse'

    matmul = xf.PatternNode(MatMul)
    tmp = xf.PatternNode(nodes.AccessNode)
    sample = xf.PatternNode(SparseMulDense)

    @classmethod
    def expressions(cls):
        return [sdutil.node_path_graph(cls.matmul, cls.tmp, cls.sample)]

    def _operands(self, state):
        ins = {e.dst_conn: e for e in state.in_edges(self.matmul)}
        return ins.get('_a'), ins.get('_b')

    def can_be_applied(self, state, expr_index, sdfg, permissive=False):
        mm, tmp = self.matmul, self.tmp
        desc = sdfg.arrays[tmp.data]
        if not desc.transient or isinstance(desc, dace.data.View) or len(desc.shape) != 2:
            return False
        if state.in_degree(tmp) != 1 or state.out_degree(tmp) != 1:
            return False  # another writer or reader of the dense intermediate
        if any(n.data == tmp.data for s in sdfg.states() for n in s.data_nodes() if n is not tmp):
            return False  # used elsewhere
        if state.out_edges(tmp)[0].dst_conn != '_D':
            return False
        if mm.alpha != 1 or mm.beta != 0:
            return False  # a scaled or accumulating product
        a, b = self._operands(state)
        if a is None or b is None or len(state.in_edges(mm)) != 2:
            return False
        adesc, bdesc = sdfg.arrays[a.data.data], sdfg.arrays[b.data.data]
        if len(adesc.shape) != 2 or len(bdesc.shape) != 2:
            return False  # batched or vector products are not sampled products
        if a.data.subset.num_elements() != adesc.total_size or b.data.subset.num_elements() != bdesc.total_size:
            return False  # the product must read whole operands
        if desc.dtype != dace.dtypes.result_type_of(adesc.dtype, bdesc.dtype):
            return False
        return True

    def apply(self, state, sdfg):
        mm, tmp, mul = self.matmul, self.tmp, self.sample
        a, b = self._operands(state)
        node = SDDMM('sddmm')
        node.transpose_S, node.schedule_hint = mul.transpose_A, mul.schedule_hint
        state.add_node(node)
        doomed = [mul, tmp, mm]
        transpose = absorbable_transpose(state, sdfg, b)
        if transpose is not None:  # Y = Kmat.T: read Kmat by rows instead (contiguous dot products)
            doomed += [transpose, b.src]
            b = state.in_edges(transpose)[0]
            node.y_layout = 'NK'
        for conn, edge in (('_X', a), ('_Y', b)):
            node.add_in_connector(conn)
            state.add_edge(edge.src, edge.src_conn, node, conn, dace.Memlet.from_array(edge.data.data,
                                                                                       sdfg.arrays[edge.data.data]))
        for e in state.in_edges(mul):
            if e.dst_conn and e.dst_conn.startswith('_A_'):
                conn = '_S_' + e.dst_conn[len('_A_'):]
                node.add_in_connector(conn)
                state.add_edge(e.src, e.src_conn, node, conn, e.data)
        for e in state.out_edges(mul):
            node.add_out_connector(e.src_conn)
            state.add_edge(node, e.src_conn, e.dst, e.dst_conn, e.data)
        names = {n.data for n in doomed if isinstance(n, nodes.AccessNode)}
        for n in doomed:
            state.remove_node(n)
        for n in list(state.data_nodes()):
            if state.degree(n) == 0:
                state.remove_node(n)
        used = {n.data for s in sdfg.states() for n in s.data_nodes()}
        for name in names:
            if name in sdfg.arrays and name not in used and sdfg.arrays[name].transient:
                sdfg.remove_data(name, validate=False)
