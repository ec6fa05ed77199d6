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
import math

import dace
import dace.library
import numpy as np
import sympy
from dace import properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse._symbolic import pyexpr
from sdfgsparse.targets.cpu.dense_loops import axpy_row, contiguous_rows, dot_rows, spmm_row
from sdfgsparse.targets.cpu.entries import Entries, kernel_for_node, update, zero_fill
from sdfgsparse.lowering.graph import MAX, SUM, Kernel, emit, fill, read
from sdfgsparse.lowering.graph_dense import entry_maps, sampled_pass, spmm_pass
from sdfgsparse.lowering.graph_values import exact_float
from sdfgsparse.ops.base import SparseLibraryNode, member_conn
from sdfgsparse.ops.softmax import ENTRY, ROW, emit_row_phases, lowest_value, owns_single_rows

__all__ = ['SparseAttention', 'Q', 'K', 'V', 'OUT', 'KEY_LAYOUTS']

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
        return k.build()


@dace.library.expansion
class ExpandSparseAttentionCPU(ExpandTransformation):
    """When each outer iteration of S is one row (CSR, ELL, DIA, DCSR) the rows run in
    parallel (dynamic chunks) with the row maximum and sum as scalars: a pass computing the
    scores (kept in a scratch slot per entry) and their maximum, a pass adding
    ``exp(s - max) * V[j, :]`` to the output row, and a scaling of the row by ``1 / sum``.
    Where a row's entries are one segment of a compressed level (CSR) and the dense rows
    are contiguous, the weights are normalised in their scratch slots instead and the
    output row is computed in registers (:func:`~sdfgsparse.targets.cpu.dense_loops.spmm_row`,
    as SpMM's rows): no zero fill and no load and store of the row per entry. Otherwise (BSR block rows; scattered rows of CSC, COO, ``S.T``) the
    same passes run over all entries with per-row maximum and sum workspaces (in parallel
    over BSR block rows, sequentially for scattered rows), then a parallel scaling pass.

    An empty row has sum 0 and an all-zero output row; a non-empty row has sum >= 1 (its
    maximum contributes exp(0)), so scaling by ``1 / max(sum, 1)`` is exact for both."""
    environments = []

    @staticmethod
    def expansion(node: 'SparseAttention', state, sdfg):
        st = node.operand_type(state, 'S')
        kb = kernel_for_node(node, state, sdfg)
        kb.globals['math'] = math
        kb.globals['np'] = np
        ent = Entries(st, {m: member_conn('S', m) for m in st.fmt.member_names})
        q, out = node.connected(state, Q), node.connected(state, OUT)
        T = out.dtype
        Ts = kb.dtype(T)
        low = kb.const(lowest_value(T))
        d, dv = pyexpr(q.shape[1]), pyexpr(out.shape[1])
        i, j = ent.i, ent.j
        key = f'{K}[{j}, k]' if node.key_layout == 'K' else f'{K}[k, {j}]'
        score = [f'acc = {Ts}(0)', f'for k in range(0, {d}):', f'    acc += {Q}[{i}, k] * {key}', f's = {Ts}({ent.val}) * acc']
        strategy = ent.strategy(0, node.schedule_hint)
        npt = f'np.{T.type.__name__}'
        if owns_single_rows(st):
            # each score is computed once and parked in the entry's slot of a scratch array,
            # which the same row re-reads right away (cache-hot); no index arrays are built
            kb.line(f'sc = np.zeros(({pyexpr(ent.nvals)},), dtype={npt})')
            qd, kd, vd = node.connected(state, Q), node.connected(state, K), node.connected(state, V)
            simd = '[' not in i and contiguous_rows(qd, vd, out) and \
                (node.key_layout != 'K' or contiguous_rows(kd))
            weigh = [f'for h in range(0, {dv}):', '    ' + update(f'{OUT}[{i}, h]', f'e * {V}[{j}, h]')]
            if simd:  # SIMD tasklets for the dense row work (targets/cpu/dense_loops)
                if node.key_layout == 'K':
                    score = [f'acc = {Ts}(0)'] + dot_rows('acc', Q, i, K, j, d, pyexpr(qd.strides[0]),
                                                         pyexpr(kd.strides[0]), T.ctype) + \
                        [f's = {Ts}({ent.val}) * acc']
                weigh = axpy_row(OUT, i, V, j, 'e', dv, pyexpr(vd.strides[0]), T.ctype)
            row = ent.row_walk() if simd else None
            if row is not None:
                # weights normalised in the scratch slots, then the output row in registers
                # (spmm_row: no zero fill, no load and store of the row per entry)
                _, inner, crd, _ = row
                emit_row_phases(kb, ent, [
                    (ROW, [f'mx = {Ts}({low})']),
                    (ENTRY, score + [f'sc[{ent.v}] = s', 'mx = max(mx, s)']),
                    (ROW, [f'sm = {Ts}(0)']),
                    (ENTRY, [f'e = math.exp(sc[{ent.v}] - mx)', f'sc[{ent.v}] = e', 'sm = sm + e']),
                    (ROW, [f'rs = {Ts}(1) / max(sm, {Ts}(1))']),
                    (ENTRY, [f'sc[{ent.v}] = sc[{ent.v}] * rs']),
                    (ROW, spmm_row(OUT, i, V, crd, 'sc', inner.bounds[0], inner.bounds[1], dv,
                                   pyexpr(vd.strides[0]), T.ctype)),
                ],
                                parallel=strategy != 'sequential')
                return kb.build()
            zero_fill(kb, OUT, out.shape)
            emit_row_phases(kb, ent, [
                (ROW, [f'mx = {Ts}({low})']),
                (ENTRY, score + [f'sc[{ent.v}] = s', 'mx = max(mx, s)']),
                (ROW, [f'sm = {Ts}(0)']),
                (ENTRY, [f'e = math.exp(sc[{ent.v}] - mx)', 'sm = sm + e'] + weigh),
                (ROW, [f'rs = {Ts}(1) / max(sm, {Ts}(1))', f'for h in range(0, {dv}):',
                       '    ' + update(f'{OUT}[{i}, h]', 'rs', '*')]),
            ],
                            parallel=strategy != 'sequential')
            return kb.build()
        zero_fill(kb, OUT, out.shape)
        rows = pyexpr(st.rows)
        kb.line(f'mx = np.zeros(({rows},), dtype={npt})')
        kb.line(f'sm = np.zeros(({rows},), dtype={npt})')
        zero_fill(kb, 'mx', [st.rows], value=low)
        par = strategy != 'sequential'
        ent.emit(kb, score + [f'mx[{i}] = max(mx[{i}], s)'], parallel=par)
        ent.emit(kb, score + [f'e = math.exp(s - mx[{i}])', f'sm[{i}] = sm[{i}] + e', f'for h in range(0, {dv}):',
                              '    ' + update(f'{OUT}[{i}, h]', f'e * {V}[{j}, h]')],
                 parallel=par)
        kb.line(f'for z0 in dace.map[0:{rows}]:')
        kb.line(f'    rs = {Ts}(1) / max(sm[z0], {Ts}(1))')
        kb.line(f'    for h in range(0, {dv}):')
        kb.line('        ' + update(f'{OUT}[z0, h]', 'rs', '*'))
        return kb.build()


@dace.library.node
class SparseAttention(SparseLibraryNode):
    """Fused sampled attention: members of the pattern ``S`` (M x N), ``_Q`` (M x d), ``_K``
    (N x d, or d x N with ``key_layout='KT'``), ``_V`` (N x dv) -> ``_out`` (M x dv, dense):
    ``softmax(S ∘ (Q @ K.T), axis=1) @ V`` over S's stored entries.
    ``transpose_S`` iterates S's storage as ``S.T`` (no copy)."""
    implementations = {'pure': ExpandSparseAttentionPure, 'cpu': ExpandSparseAttentionCPU}
    default_implementation = 'cpu'
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
