"""Row-parallel Gustavson SpGEMM: ``C = A @ B`` with ``A`` and ``B`` walked as CSR, a CSR ``C``.

The generic lowering (:mod:`sdfgsparse.lowering.compress`) appends every product to one
list, sorts it and compresses it — sequentially, through ``flops``-long buffers (A @ A on
adder_dcop_05, 1.85M products: 191 ms against scipy's 15 ms). When both operands iterate
row-major, the rows of ``C`` are independent, so this lowering computes them in parallel
(a DaCe map over rows, guided schedule: power-law rows differ by orders of magnitude):

1. *count* — per row, the distinct columns reached through ``A[i, k] * B[k, :]``, found
   with a per-thread marker array (an epoch per row, so it is never cleared);
2. *positions* — ``pos`` as the prefix sum of the counts (sequential over rows);
3. *fill* — per row again, the products summed into a per-thread dense accumulator in the
   order of A's then B's entries (the generic lowering's order, so results agree to the
   last bit); a per-thread bitmap marks the row's columns. They are written at ``pos[i]``
   in order by reading the bitmap words of the row's column range when that range is
   narrow (at most 8 words per column found), else by sorting them (cora_A @ cora_A at
   one thread: fill 2.5 ms with a sort per row, 1.7 ms with this choice).

Each per-row step is one C++ tasklet inside the generated map (the loop over a row's
products has data-dependent bounds and a scattered accumulator, which DaCe 1.0.2's
frontend turns into atomics). Per-thread workspaces are ``thread_local`` and grow to the
largest ``B.cols`` seen (a marker, an accumulator and a column list per thread). Explicit
zeros from cancellation are kept, as in the generic lowering.
"""
import dace

from sdfgsparse._symbolic import pyexpr
from sdfgsparse.lowering.kernel import KernelBuilder
from sdfgsparse.lowering.rowwise import emit_count_fill

__all__ = ['emit_gustavson', 'guided_rows']

# C++ locals are prefixed g_: DaCe writes the tasklet's outputs after its code in the same
# scope, so a local may not shadow a data name of the kernel.
_COUNT = '''
static thread_local std::vector<long long> g_markv;
static thread_local long long g_epoch = 0;
const long long g_nc = _tnc;
if ((long long)g_markv.size() < g_nc) g_markv.assign(g_nc, 0);
long long* __restrict__ g_mark = g_markv.data();
const long long g_tag = ++g_epoch;
const long long g_i = _ti;
long long g_cnt = 0;
for (long long g_q = _ap[g_i]; g_q < _ap[g_i + 1]; ++g_q) {
    const long long g_k = _ac[g_q];
    for (long long g_r = _bp[g_k]; g_r < _bp[g_k + 1]; ++g_r) {
        const long long g_j = _bc[g_r];
        if (g_mark[g_j] != g_tag) { g_mark[g_j] = g_tag; ++g_cnt; }
    }
}
_tcnt = g_cnt;
'''

_FILL = '''
typedef {vt} g_V;
static thread_local std::vector<unsigned long long> g_bitv;
static thread_local std::vector<g_V> g_accv;
static thread_local std::vector<long long> g_colv;
const long long g_nc = _tnc;
if ((long long)g_accv.size() < g_nc) {{ g_bitv.assign((g_nc >> 6) + 1, 0ULL); g_accv.resize(g_nc); g_colv.resize(g_nc); }}
unsigned long long* __restrict__ g_bits = g_bitv.data();
g_V* __restrict__ g_acc = g_accv.data();
long long* __restrict__ g_cols = g_colv.data();
const long long g_i = _ti;
long long g_n = 0, g_lo = g_nc, g_hi = -1;
for (long long g_q = _ap[g_i]; g_q < _ap[g_i + 1]; ++g_q) {{
    const long long g_k = _ac[g_q];
    const g_V g_a = (g_V)_av[g_q];
    for (long long g_r = _bp[g_k]; g_r < _bp[g_k + 1]; ++g_r) {{
        const long long g_j = _bc[g_r];
        const g_V g_p = g_a * (g_V)_bv[g_r];
        const unsigned long long g_m = 1ULL << (g_j & 63);
        unsigned long long& g_w = g_bits[g_j >> 6];
        if (!(g_w & g_m)) {{
            g_w |= g_m; g_acc[g_j] = g_p; g_cols[g_n++] = g_j;
            g_lo = g_j < g_lo ? g_j : g_lo; g_hi = g_j > g_hi ? g_j : g_hi;
        }} else g_acc[g_j] += g_p;
    }}
}}
long long g_d = _op[g_i];
if (g_n > 0 && (g_hi >> 6) - (g_lo >> 6) + 1 <= 8 * g_n) {{
    // a narrow column range: read the bitmap in order (and clear it)
    for (long long g_x = g_lo >> 6; g_x <= (g_hi >> 6); ++g_x) {{
        unsigned long long g_b = g_bits[g_x];
        g_bits[g_x] = 0;
        while (g_b) {{
            const long long g_j = (g_x << 6) + __builtin_ctzll(g_b);
            g_b &= g_b - 1;
            _oc[g_d] = g_j; _ov[g_d] = g_acc[g_j]; ++g_d;
        }}
    }}
}} else {{
    std::sort(g_cols, g_cols + g_n);
    for (long long g_x = 0; g_x < g_n; ++g_x) {{
        const long long g_j = g_cols[g_x];
        g_bits[g_j >> 6] = 0;
        _oc[g_d] = g_j; _ov[g_d] = g_acc[g_j]; ++g_d;
    }}
}}
'''


def emit_gustavson(kb: KernelBuilder, rows, cols, cap, a: dict, b: dict, out: dict, vt: dace.typeclass):
    """Emit the three steps into ``kb`` (:func:`~sdfgsparse.lowering.rowwise.emit_count_fill`).

    :param rows, cols: the result's shape (``cols`` is B's column count).
    :param cap: the result's capacity.
    :param a, b, out: connector names of ``pos1``, ``crd1``, ``vals`` of A, B and the result.
    :param vt: the result's value type.
    """
    kb.symbols_of(cols)
    kb.line(f'ncols = dace.int64({pyexpr(cols)})')
    ins = [('_tnc', 'ncols'), ('_ap', a['pos1']), ('_ac', a['crd1']), ('_bp', b['pos1']), ('_bc', b['crd1'])]
    fill = ins + [('_av', a['vals']), ('_bv', b['vals']), ('_op', out['pos1'])]
    emit_count_fill(kb, 'gw', rows, cap, ins, fill, out, _COUNT, _FILL.format(vt=vt.ctype))


def guided_rows(sdfg: dace.SDFG):
    """Give the row maps of a built Gustavson kernel (the maps around its C++ tasklets)
    OpenMP's guided schedule."""
    for node, state in sdfg.all_nodes_recursive():
        if isinstance(node, dace.nodes.MapEntry) and any(
                isinstance(n, dace.nodes.Tasklet) and n.language == dace.Language.CPP
                for n in state.scope_subgraph(node).nodes()):
            node.map.omp_schedule = dace.dtypes.OMPScheduleType.Guided
