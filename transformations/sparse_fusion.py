"""``SparseFusion``: fuse sampled attention, SDDMM -> SparseSoftmax -> SpMM, into one
``SparseAttention`` node that never stores the sampled scores."""
from typing import List, Optional, Set

import dace
from dace import properties
from dace.sdfg import nodes
from dace.sdfg import utils as sdutil
from dace.transformation import transformation as xf

from sdfgsparse.ops import attention
from sdfgsparse.ops.attention import SparseAttention
from sdfgsparse.ops.base import SparseLibraryNode, member_conn
from sdfgsparse.ops.sddmm import SDDMM
from sdfgsparse.ops.softmax import SparseSoftmax
from sdfgsparse.ops.spmm import SpMM
from sdfgsparse.transformations._transpose import absorbable_transpose

__all__ = ['SparseFusion']


@properties.make_properties
class SparseFusion(xf.SingleStateTransformation):
    """Fuses sampled attention ``ss.softmax(ss.sddmm(S, Q, K.T), axis=1) @ V`` into one
    :class:`~sdfgsparse.ops.attention.SparseAttention` node.

    Matched pattern (each sparse value travels member by member through views; the
    pattern follows the ``vals`` member, the conditions check all members)::

        SDDMM --_out_vals--> view --> P (transient structure) --> view --_A_vals--> SparseSoftmax
        SparseSoftmax --_out_vals--> view --> W (transient structure) --> view --_A_vals--> SpMM

    Before::

        S, Q, Y=K.T --> SDDMM --> P --> SparseSoftmax(axis=1) --> W --> SpMM(W, V) --> O

    After::

        S, Q, K, V --> SparseAttention --> O

    The attention node walks each row of S once per pass (in parallel over the rows when
    S's format owns its rows), computing the row's scores ``S_q * dot(Q[i], K[j_q])`` on the
    fly: neither ``P`` nor ``W`` (nnz values each) is written. ``P``, ``W``, their views and
    the three nodes disappear. When ``Y`` is a transient written only by a ``Transpose`` of
    a 2-D array ``K`` and read only by the SDDMM (what the frontend makes of ``K.T``) and
    ``absorb_transpose`` is set, the transpose goes too and the node reads ``K`` by rows.

    Applicability:

    - ``P`` and ``W`` are transient structures, each written only by its producer and read
      only by its consumer (in this state; no access to them anywhere else in the SDFG);
    - the softmax runs over the rows of ``P`` (``axis == 1``, no transposed view), the SpMM
      uses ``W`` untransposed and carries no fused epilogue;
    - the SDDMM's and SpMM's dense operands are 2-D arrays.

    Properties: ``absorb_transpose``.
    """
    CATEGORY = 'Sparse'

    sddmm = xf.PatternNode(SDDMM)
    scores_written = xf.PatternNode(nodes.AccessNode)
    scores = xf.PatternNode(nodes.AccessNode)
    scores_read = xf.PatternNode(nodes.AccessNode)
    softmax = xf.PatternNode(SparseSoftmax)
    probs_written = xf.PatternNode(nodes.AccessNode)
    probs = xf.PatternNode(nodes.AccessNode)
    probs_read = xf.PatternNode(nodes.AccessNode)
    spmm = xf.PatternNode(SpMM)

    absorb_transpose = properties.Property(dtype=bool,
                                           default=True,
                                           desc='Read K directly (by rows) when the SDDMM operand K.T is a '
                                           'transient made only by a Transpose of K; the transpose is removed')

    @classmethod
    def expressions(cls):
        return [
            sdutil.node_path_graph(cls.sddmm, cls.scores_written, cls.scores, cls.scores_read, cls.softmax,
                                   cls.probs_written, cls.probs, cls.probs_read, cls.spmm)
        ]

    # ------------------------------------------------------------------ predicates
    def can_be_applied(self, state, expr_index, sdfg, permissive=False):
        sddmm, softmax, spmm = self.sddmm, self.softmax, self.spmm
        if not _on_vals_member(state, self.sddmm, self.scores_written, self.scores_read, softmax):
            return False  # the pattern follows one member; take the vals member only (one match per chain)
        if not _on_vals_member(state, softmax, self.probs_written, self.probs_read, spmm, consumer_prefix='A'):
            return False
        if softmax.axis != 1 or softmax.transpose_A:
            return False  # a column softmax does not follow the rows of the sampled matrix
        if spmm.transpose_A or spmm.epilogue:
            return False  # SpMM over W.T, or an epilogue the attention node cannot carry
        if _sparse_link(state, sdfg, sddmm, 'out', self.scores.data, softmax, 'A') is None:
            return False  # P is not a transient passed only from the SDDMM to the softmax
        if _sparse_link(state, sdfg, softmax, 'out', self.probs.data, spmm, 'A') is None:
            return False  # W is not a transient passed only from the softmax to the SpMM
        for node, conn in ((sddmm, '_X'), (sddmm, '_Y'), (spmm, '_B'), (spmm, '_Y')):
            edge = node.edge(state, conn)
            if edge is None or len(sdfg.arrays[edge.data.data].shape) != 2:
                return False  # a dense operand that is not a 2-D array
        return True

    # ------------------------------------------------------------------ model
    def decision(self, state, sdfg, sizes=None, pattern=None, machine=None):
        """The data-movement model's verdict on this match
        (:func:`sdfgsparse.analysis.schedules.attention_decision`): fused against the three
        nodes, given symbol values ``sizes`` and, optionally, ``pattern``, S's column
        indices in row order (CSR) for the gather model. None when a size is unknown."""
        from sdfgsparse._symbolic import evaluate
        from sdfgsparse.analysis.schedules import Machine, attention_bound_bytes, attention_decision
        from sdfgsparse.ops.softmax import owns_single_rows
        from sdfgsparse.transformations._sizes import size_values, stored_slots
        sddmm, spmm = self.sddmm, self.spmm
        st = sddmm.operand_type(state, 'S')
        values = size_values(sdfg, sizes)
        q, v_ = sddmm.connected(state, '_X'), spmm.connected(state, '_B')
        dims = [evaluate(e, values) for e in (st.rows, st.cols, q.shape[1], v_.shape[1])]
        nnz = stored_slots(st, values)
        if nnz is None or any(x is None for x in dims):
            return None
        rows, cols, d, e = dims
        m = machine or Machine.here()
        vb, ib = q.dtype.bytes, st.index_dtype.bytes
        y_edge = sddmm.edge(state, '_Y')
        absorbed = sddmm.y_layout != 'NK' and self.absorb_transpose and \
            absorbable_transpose(state, sdfg, y_edge) is not None
        return attention_decision(sddmm.label, rows, cols, nnz, d, e, m, vb, ib, indices=pattern,
                                  row_owning=owns_single_rows(st), keys_transposed=absorbed,
                                  bound=attention_bound_bytes(rows, cols, nnz, d, e, m, vb))

    def sparse_argument(self, state) -> str:
        """Name of the array that holds S's values as the SDDMM reads them (a program
        argument's member, ``A_vals``, or a transient)."""
        e = self.sddmm.edge(state, '_S_vals')
        return e.data.data if e is not None else ''

    # ------------------------------------------------------------------ rewrite
    def apply(self, state, sdfg):
        sddmm, softmax, spmm = self.sddmm, self.softmax, self.spmm
        doomed: Set[nodes.Node] = {sddmm, softmax, spmm}
        doomed |= _sparse_link(state, sdfg, sddmm, 'out', self.scores.data, softmax, 'A')
        doomed |= _sparse_link(state, sdfg, softmax, 'out', self.probs.data, spmm, 'A')
        fused = SparseAttention('attention')
        fused.transpose_S = sddmm.transpose_S
        fused.schedule_hint = sddmm.schedule_hint
        state.add_node(fused)
        for e in state.in_edges(sddmm):  # the members of S keep their views
            if e.dst_conn and e.dst_conn.startswith('_S_'):
                fused.add_in_connector(e.dst_conn)
                state.add_edge(e.src, e.src_conn, fused, e.dst_conn, dace.Memlet.from_array(
                    e.data.data, sdfg.arrays[e.data.data]))
        _connect_input(state, sdfg, sddmm.edge(state, '_X'), fused, attention.Q)
        y_edge = sddmm.edge(state, '_Y')
        transpose = absorbable_transpose(state, sdfg, y_edge) if self.absorb_transpose else None
        if sddmm.y_layout == 'NK':  # the SDDMM already reads the keys by rows
            _connect_input(state, sdfg, y_edge, fused, attention.K)
            fused.key_layout = 'K'
        elif transpose is not None:
            k_edge = next(iter(state.in_edges(transpose)))
            _connect_input(state, sdfg, k_edge, fused, attention.K)
            fused.key_layout = 'K'
            doomed |= {transpose, y_edge.src}
        else:
            _connect_input(state, sdfg, y_edge, fused, attention.K)
            fused.key_layout = 'KT'
        _connect_input(state, sdfg, spmm.edge(state, '_B'), fused, attention.V)
        out = spmm.edge(state, '_Y')
        fused.add_out_connector(attention.OUT)
        state.add_edge(fused, attention.OUT, out.dst, out.dst_conn,
                       dace.Memlet.from_array(out.data.data, sdfg.arrays[out.data.data]))
        names = {n.data for n in doomed if isinstance(n, nodes.AccessNode)}
        for n in doomed:
            state.remove_node(n)
        for n in list(state.data_nodes()):
            if state.degree(n) == 0:
                state.remove_node(n)
                names.add(n.data)
        used = {n.data for s in sdfg.states() for n in s.data_nodes()}
        for name in names:
            if name in sdfg.arrays and name not in used and sdfg.arrays[name].transient:
                sdfg.remove_data(name, validate=False)


# ---------------------------------------------------------------------- helpers
def _connect_input(state, sdfg, edge, node, conn):
    node.add_in_connector(conn)
    state.add_edge(edge.src, edge.src_conn, node, conn, dace.Memlet.from_array(edge.data.data,
                                                                               sdfg.arrays[edge.data.data]))


def _on_vals_member(state, producer, written, read, consumer, consumer_prefix='A') -> bool:
    """The matched views carry the ``vals`` member from ``producer`` to ``consumer``."""
    out_ok = any(e.dst is written and e.src_conn == member_conn('out', 'vals') for e in state.out_edges(producer))
    in_ok = any(e.src is read and e.dst_conn == member_conn(consumer_prefix, 'vals') for e in state.in_edges(consumer))
    return out_ok and in_ok


def _sparse_link(state, sdfg, producer: SparseLibraryNode, out_prefix: str, data: str, consumer: SparseLibraryNode,
                 in_prefix: str) -> Optional[Set[nodes.Node]]:
    """The nodes that pass the transient structure ``data`` from ``producer`` (members
    ``_<out_prefix>_*``) to ``consumer`` (members ``_<in_prefix>_*``) and nothing else:
    the write views, the structure's access nodes and the read views; None when the
    structure is not transient or has another writer or reader."""
    desc = sdfg.arrays.get(data)
    if desc is None or not desc.transient or not isinstance(desc, dace.data.Structure):
        return None
    struct_nodes = [n for n in state.data_nodes() if n.data == data]
    if any(n.data == data for s in sdfg.states() if s is not state for n in s.data_nodes()):
        return None  # used in another state
    found: Set[nodes.Node] = set(struct_nodes)
    written: List[str] = []
    for sn in struct_nodes:
        for e in state.in_edges(sn):
            view = e.src
            if not _is_view(sdfg, view) or state.in_degree(view) != 1 or state.out_degree(view) != 1:
                return None
            pe = state.in_edges(view)[0]
            if pe.src is not producer or not (pe.src_conn or '').startswith(f'_{out_prefix}_'):
                return None  # another writer
            written.append(pe.src_conn)
            found.add(view)
        for e in state.out_edges(sn):
            view = e.dst
            if not _is_view(sdfg, view) or state.in_degree(view) != 1:
                return None
            for ce in state.out_edges(view):
                if ce.dst is not consumer or not (ce.dst_conn or '').startswith(f'_{in_prefix}_'):
                    return None  # another reader
            found.add(view)
    produced = {e.src_conn for e in state.out_edges(producer) if (e.src_conn or '').startswith(f'_{out_prefix}_')}
    if not struct_nodes or set(written) != produced:
        return None  # the producer writes members elsewhere too
    consumed = {e.src for e in state.in_edges(consumer) if (e.dst_conn or '').startswith(f'_{in_prefix}_')}
    if not consumed <= found:
        return None  # the consumer reads members of another structure
    return found


def _is_view(sdfg, node) -> bool:
    return isinstance(node, nodes.AccessNode) and isinstance(sdfg.arrays[node.data], dace.data.View)
