"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.attention.SparseAttention`."""
import math
import dace
import dace.library
import numpy as np
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse._symbolic import pyexpr
from sdfgsparse.targets.cpu.dense_loops import axpy_row, contiguous_rows, dot_rows, spmm_row
from sdfgsparse.targets.cpu.entries import Entries, kernel_for_node, update, zero_fill
from sdfgsparse.ops.base import member_conn
from sdfgsparse.ops.softmax import lowest_value, owns_single_rows
from sdfgsparse.targets.cpu.expansions.softmax import ENTRY, ROW, emit_row_phases
from sdfgsparse.ops.attention import K, OUT, Q, SparseAttention, V
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandSparseAttentionCPU']


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
    environments = [SdfgsparseCPU]

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


register(SparseAttention, 'cpu', ExpandSparseAttentionCPU, default=True)
