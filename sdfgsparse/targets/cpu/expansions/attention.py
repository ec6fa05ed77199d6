"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.attention.SparseAttention`."""
import dace
import dace.library
import sympy
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse._symbolic import pyexpr
from sdfgsparse.lowering.graph_values import exact_float
from sdfgsparse.ops.attention import K, OUT, Q, SparseAttention, V, portable_kernel
from sdfgsparse.ops.softmax import lowest_value
from sdfgsparse.targets.cpu.builder import CpuKernel, cpp, leaf, row_walk
from sdfgsparse.targets.cpu.dense_loops import SPMM_PANEL, contiguous_rows
from sdfgsparse.targets.cpu.row_leaves import index
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandSparseAttentionCPU']


@dace.library.expansion
class ExpandSparseAttentionCPU(ExpandTransformation):
    """Where S walks as CSR and the rows of Q, V and the output are contiguous, the rows run
    in parallel (dynamic chunks), each one call of ``attention_row``
    (``include/sdfgsparse_softmax.h``): the scores (SIMD dot products where K's rows, or
    columns, are contiguous) parked in a scratch slot per entry, the row's maximum, exp and
    sum, the weights normalised in their slots, then the output row in registers as SpMM's
    rows (no zero fill, no load and store of the row per entry). Every other case takes the
    portable kernel (:func:`~sdfgsparse.ops.attention.portable_kernel`) in a cpu kernel.

    An empty row has sum 0 and an all-zero output row; a non-empty row has sum >= 1 (its
    maximum contributes exp(0)), so scaling by ``1 / max(sum, 1)`` is exact for both."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'SparseAttention', state, sdfg):
        k = CpuKernel(node, state, sdfg)
        S = k.operand('S', node.operand_type(state, 'S'))
        q, kd, v, out = (node.connected(state, c) for c in (Q, K, V, OUT))
        walk = row_walk(S)
        if walk is None or not contiguous_rows(q, v, out):
            portable_kernel(k, node, state)
            return k.build()
        T = out.dtype
        d, dv = q.shape[1], out.shape[1]
        # key j, element h: K[j, h] (rows of K) or K[h, j] (K^T given as d x n)
        ldkj, ldkh = (kd.strides[0], kd.strides[1]) if node.key_layout == 'K' else (kd.strides[1], kd.strides[0])
        scratch = k.transient('__scores', [S.nvals], T)
        sc = k.rows(k.add_state('rows'), walk, scale=sympy.sympify(d) + sympy.sympify(dv) + 8)
        row = index(k, sc, walk.row, 'row')
        code = (f'sdfgsparse::attention_row<{SPMM_PANEL}, {T.ctype}>(ss_out(_ty), ss_in(_tq), {cpp(q.strides[0])}, '
                f'ss_in(_tk), {cpp(ldkj)}, {cpp(ldkh)}, ss_in(_tv), {cpp(v.strides[0])}, _tc, _ts, _tw, _ti, _tlo, '
                f'_thi, {cpp(d)}, {cpp(dv)}, ({T.ctype}){exact_float(lowest_value(T))});')
        leaf(k, sc, 'attention_row', code, scalars={'_tlo': walk.lo, '_thi': walk.hi},
             arrays={'_tq': Q, '_tk': K, '_tv': V, '_tc': walk.crd, '_ts': S.vals}, locals_in={'_ti': row},
             outs={'_ty': (OUT, f'{walk.var}, 0:{pyexpr(sympy.sympify(dv))}'), '_tw': (scratch, None)})
        return k.build()


register(SparseAttention, 'cpu', ExpandSparseAttentionCPU, default=True)
