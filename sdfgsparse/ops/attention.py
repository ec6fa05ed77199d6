"""Sparse attention: ``ss.softmax(ss.sddmm(S, Q, K.T), axis=1) @ V`` in one pass over S's rows.

For every row ``i`` of the pattern ``S`` (M x N) with stored entries ``(j_q, S_q)``::

    s_q    = S_q * dot(Q[i, :], K[j_q, :])
    p_q    = exp(s_q - max_q s_q) / sum_q exp(s_q - max_q s_q)
    out[i] = sum_q p_q * V[j_q, :]

and ``out[i] = 0`` for a row without stored entries. No sampled matrix is built (no index
arrays, no separate softmax pass over memory): for row-owning formats each score is
computed once, parked in its entry's slot of a scratch array and re-read by the same row
while it is still in cache; other formats compute the scores twice (maximum, weights). The node is made by the ``SparseFusion``
transformation from the three nodes SDDMM -> SparseSoftmax -> SpMM.
"""

import dace
import dace.library
import sympy
from dace import properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse.lowering.graph import MAX, SUM, Kernel, emit, fill, read
from sdfgsparse.lowering.graph_dense import entry_maps, sampled_pass, spmm_pass
from sdfgsparse.lowering.graph_values import exact_float
from sdfgsparse.ops.base import SparseLibraryNode
from sdfgsparse.ops.validation import Wiring
from sdfgsparse.ops.softmax import lowest_value

__all__ = ['portable_kernel', 'SparseAttention', 'Q', 'K', 'V', 'OUT', 'KEY_LAYOUTS']

#: Connector names: queries (M x d), keys (N x d, or d x N for ``key_layout='KT'``),
#: values (N x dv) and the dense result (M x dv).
Q, K, V, OUT = '_Q', '_K', '_V', '_out'

#: ``K``: the keys as rows (N x d, the matrix of ``K.T`` in the program); ``KT``: the
#: transposed keys (d x N, SDDMM's right operand as given).
KEY_LAYOUTS = ('K', 'KT')


@dace.library.expansion
class ExpandSparseAttentionPure(ExpandTransformation):
    """The portable SDFG: the three nodes it replaces, composed in one SDFG over S's
    stored entries (levels' loops, guards applied: ELL padding and out-of-range DIA slots
    take no part; COO duplicates and BSR's zero fill each count on their own, as in
    :class:`~sdfgsparse.ops.softmax.SparseSoftmax`):

    1. sampled scores ``s = S_value * dot(Q[row], K[col])``, each in its entry's slot of
       a scratch array (a local dot product per entry, as the SDDMM's), and the row
       maxima ``max[row] max= s``;
    2. ``e = exp(s - max[row])`` in place, and the row sums ``sum[row] += e``;
    3. the probabilities ``e / sum[row]`` in place;
    4. the SpMM ``out[row, :] += p * V[col, :]`` (out zeroed first).

    Row maxima and sums are write-conflict resolutions into per-row workspaces: plain
    updates where S's outer map parameter gives the row (CSR, ELL, DIA, BSR), atomic
    otherwise (DCSR's rows read from storage; CSC, COO and transposed views). A row
    without stored entries keeps an all-zero output row."""
    environments = []

    @staticmethod
    def expansion(node: 'SparseAttention', state, sdfg):
        k = Kernel(node, state, sdfg)
        portable_kernel(k, node, state)
        return k.build()


def portable_kernel(k: Kernel, node: 'SparseAttention', state) -> None:
    """The steps of the portable expansion built into ``k`` (the ``cpu`` expansion builds
    them into its own kernel where it has no tuned walk)."""
    S = k.operand('S', node.operand_type(state, 'S'))
    T = k.sdfg.arrays[OUT].dtype
    d = node.connected(state, Q).shape[1]  # (one-element operands reach the kernel as scalars)
    dv = node.connected(state, OUT).shape[1]
    slots = k.transient('__scores', [S.nvals], T)
    mx = k.transient('__rowmax', [S.type.rows], T)
    sm = k.transient('__rowsum', [S.type.rows], T)
    init = k.add_state('init')
    fill(k, init, OUT)
    fill(k, init, mx, exact_float(lowest_value(T)))
    fill(k, init, sm)
    par = node.schedule_hint != 'sequential'
    here, row = read(slots, S.pos), S.row
    sampled_pass(k, k.add_state('scores'), S, Q, K, d, node.key_layout == 'K', T, parallel=par,
                 more=lambda s: [((slots, [S.pos]), s, None), ((mx, [row]), s, MAX)])
    e = sympy.exp(here - read(mx, row))
    emit(k, entry_maps(k, k.add_state('exp'), S, parallel=par)[0],
         [((slots, [S.pos]), e, None), ((sm, [row]), e, SUM)], guard=S.guard, label='exp')
    emit(k, entry_maps(k, k.add_state('normalise'), S, parallel=par)[0],
         [((slots, [S.pos]), here / read(sm, row), None)], guard=S.guard, label='normalise')
    spmm_pass(k, k.add_state('spmm'), S, OUT, V, dv, value=here, parallel=par)


@dace.library.node
class SparseAttention(SparseLibraryNode):
    """Fused sampled attention: members of the pattern ``S`` (M x N), ``_Q`` (M x d), ``_K``
    (N x d, or d x N with ``key_layout='KT'``), ``_V`` (N x dv) -> ``_out`` (M x dv, dense):
    ``softmax(S ∘ (Q @ K.T), axis=1) @ V`` over S's stored entries.
    ``transpose_S`` iterates S's storage as ``S.T`` (no copy)."""
    implementations = {'pure': ExpandSparseAttentionPure}
    default_implementation = 'pure'
    SPARSE_INPUTS = ('S', )

    transpose_S = properties.Property(dtype=bool, default=False, desc='Use the transposed view of S (no copy)')
    key_layout = properties.Property(dtype=str,
                                     default='K',
                                     choices=list(KEY_LAYOUTS),
                                     desc='K: _K holds the keys as rows (N x d); KT: _K holds them as columns '
                                     '(d x N, the SDDMM operand K.T as given)')

    def __init__(self, name='attention', key_layout='K', *args, **kwargs):
        super().__init__(name, *args, inputs={Q, K, V}, outputs={OUT}, **kwargs)
        self.key_layout = key_layout

    def validate(self, sdfg, state):
        """S's members, matrices ``_Q`` (S's rows x d), ``_K`` (S's columns x d, or d x S's
        columns with ``key_layout='KT'``), ``_V`` (S's columns x dv) and a float ``_out``
        (S's rows x dv) (:mod:`sdfgsparse.ops.validation`)."""
        w = Wiring(self, sdfg, state)
        S, q, k, v = w.sparse('S'), w.dense(Q, (2, )), w.dense(K, (2, )), w.dense(V, (2, ))
        out = w.dense(OUT, (2, ), output=True)
        n, d = (0, 1) if self.key_layout == 'K' else (1, 0)
        w.same(S.rows, q.dim(0), out.dim(0))
        w.same(S.cols, k.dim(n), v.dim(0))
        w.same(q.dim(1), k.dim(d))
        w.same(v.dim(1), out.dim(1))
        w.floating(out)
        w.finish()
