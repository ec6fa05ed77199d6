"""Row-parallel Gustavson SpGEMM: ``C = A @ B`` with ``A`` and ``B`` walked as CSR, a CSR ``C``.

The generic lowering (:mod:`sdfgsparse.targets.cpu.compress`) appends every product to one
list, sorts it and compresses it — sequentially, through ``flops``-long buffers (an order
of magnitude slower than scipy; docs/performance.md). When both operands iterate
row-major, the rows of ``C`` are independent, so this lowering computes them in parallel
(a DaCe map over rows, guided schedule: power-law rows differ by orders of magnitude):

1. *count* — per row, the distinct columns reached through ``A[i, k] * B[k, :]``, found
   with a marker array (a tag per row, so it is never cleared);
2. *positions* — ``pos`` as the prefix sum of the counts (sequential over rows);
3. *fill* — per row again, the products summed into a dense accumulator in the order of
   A's then B's entries (the generic lowering's order, so results agree to the last bit);
   a bitmap marks the row's columns. The row is written at ``pos[i]`` in column order
   (scipy's canonical format; scipy's own product is not sorted) in one of three ways, by
   how many of the row's columns fall on a word of the bitmap in the row's range:

   - two or more on average: every word in the range, bit by bit;
   - fewer: only the non-empty words, found through a second bitmap (a bit per word,
     made from the row's column list) — about (its words in the range) + (non-empty
     words) + (columns) steps, the first two columns of a word read without a branch;
   - far fewer (a wide range: more than 4 words of the second bitmap per column): the
     column list, sorted.

Both row loops prefetch the rows of B that the next entries of A's row will read (the
product is bound by those scattered reads once B leaves the cache).

Each per-row step is one C++ tasklet inside the generated map (the loop over a row's
products has data-dependent bounds and a scattered accumulator, which DaCe 1.0.2's
frontend turns into atomics). *Workspaces* (the marker, the bitmaps, the accumulator and
the column list: about 16 bytes per column of B) belong to one call: a thread makes its
own on its first row and the kernel's last step frees them all, through a table of one
pointer per OpenMP thread number (a kernel transient), so nothing stays allocated between
calls and concurrent calls share nothing. Large workspaces are pages of their own
(``mmap``): zero without a memset, touched only where used, returned to the system when
freed (the allocator would keep them). Explicit zeros from cancellation are kept, as in
the generic lowering.
"""
import dace

from sdfgsparse._symbolic import pyexpr
from sdfgsparse.targets.cpu.kernel import KernelBuilder, cpp_tasklet
from sdfgsparse.targets.cpu.rowwise import emit_count_fill

__all__ = ['emit_gustavson', 'build_gustavson', 'guided_rows', 'SLOTS', 'PREFETCH']

#: Entries of the workspace table: OpenMP thread numbers below it use a workspace for the
#: whole call; a thread beyond it (only with more threads than this) makes one per row
#: (``SS_GW_SLOTS`` of ``include/sdfgsparse_gustavson.h``).
SLOTS = 1024

#: How many entries of A's row ahead both row loops prefetch B's rows.
PREFETCH = 2

#: The C++ of the workspaces (``include/sdfgsparse_gustavson.h``), once per library.
GLOBAL_CODE = '#include "sdfgsparse_gustavson.h"\n'

# C++ locals are prefixed g_: DaCe writes the tasklet's outputs after its code in the same
# scope, so a local may not shadow a data name of the kernel.
_COUNT = '''
typedef unsigned int g_T;
const long long g_nc = _tnc;
const ss_gw_layout g_l = ss_gw_layout_of(g_nc, sizeof({vt}), sizeof({it}));
char* g_w = ss_gw_acquire(_tws, g_l);
g_T* __restrict__ g_mark = reinterpret_cast<g_T*>(g_w + g_l.mark);
unsigned long long& g_epoch = *reinterpret_cast<unsigned long long*>(g_w);
g_T g_tag = (g_T)++g_epoch;
if (g_tag == 0) {{ std::memset(g_mark, 0, sizeof(g_T) * g_nc); g_epoch = g_tag = 1; }}  // the tags wrapped
const long long g_i = _ti, g_qe = _ap[g_i + 1];
long long g_cnt = 0;
for (long long g_q = _ap[g_i]; g_q < g_qe; ++g_q) {{
    if (g_q + {pf} < g_qe) __builtin_prefetch(_bc + _bp[_ac[g_q + {pf}]]);
    const long long g_k = _ac[g_q], g_re = _bp[g_k + 1];
    for (long long g_r = _bp[g_k]; g_r < g_re; ++g_r) {{
        const long long g_j = _bc[g_r];
        g_cnt += g_mark[g_j] != g_tag;
        g_mark[g_j] = g_tag;
    }}
}}
ss_gw_done(g_w);
_tcnt = g_cnt;
'''

_FILL = '''
typedef {vt} g_V;
typedef {it} g_I;
typedef unsigned long long g_U;
const long long g_nc = _tnc;
const ss_gw_layout g_l = ss_gw_layout_of(g_nc, sizeof(g_V), sizeof(g_I));
char* g_w = ss_gw_acquire(_tws, g_l);
g_U* __restrict__ g_bits = reinterpret_cast<g_U*>(g_w + g_l.bits);
g_U* __restrict__ g_top = reinterpret_cast<g_U*>(g_w + g_l.top);
g_V* __restrict__ g_acc = reinterpret_cast<g_V*>(g_w + g_l.acc);
g_I* __restrict__ g_cols = reinterpret_cast<g_I*>(g_w + g_l.cols);
const long long g_i = _ti, g_qe = _ap[g_i + 1];
long long g_n = 0, g_lo = g_nc, g_hi = -1;
for (long long g_q = _ap[g_i]; g_q < g_qe; ++g_q) {{
    if (g_q + {pf} < g_qe) {{
        const long long g_f = _bp[_ac[g_q + {pf}]];
        __builtin_prefetch(_bc + g_f);
        __builtin_prefetch(_bv + g_f);
    }}
    const long long g_k = _ac[g_q], g_re = _bp[g_k + 1];
    const g_V g_a = (g_V)_av[g_q];
    for (long long g_r = _bp[g_k]; g_r < g_re; ++g_r) {{
        const long long g_j = _bc[g_r];
        const g_V g_p = g_a * (g_V)_bv[g_r];
        const g_U g_m = 1ULL << (g_j & 63);
        g_U& g_b = g_bits[g_j >> 6];
        if (!(g_b & g_m)) {{
            g_b |= g_m;
            g_acc[g_j] = g_p;
            g_cols[g_n++] = (g_I)g_j;
        }} else g_acc[g_j] += g_p;
    }}
}}
// the row's range (a loop apart: fewer live registers above)
for (long long g_x = 0; g_x < g_n; ++g_x) {{
    const long long g_j = g_cols[g_x];
    g_lo = g_j < g_lo ? g_j : g_lo;
    g_hi = g_j > g_hi ? g_j : g_hi;
}}
g_I* __restrict__ g_oc = _oc + _op[g_i];
g_V* __restrict__ g_ov = _ov + _op[g_i];
bool g_listed = true;  // the columns in order in g_cols, to be written below
if (g_n > 0 && 2 * ((g_hi >> 6) - (g_lo >> 6) + 1) <= g_n) {{
    // at least two columns per word of bits in the row's range: write the row from every
    // word in it, clearing them
    g_listed = false;
    long long g_d = 0;
    for (long long g_y = g_lo >> 6; g_y <= (g_hi >> 6); ++g_y) {{
        g_U g_b = g_bits[g_y];
        g_bits[g_y] = 0;
        while (g_b) {{
            const long long g_j = (g_y << 6) + __builtin_ctzll(g_b);
            g_b &= g_b - 1;
            g_oc[g_d] = (g_I)g_j;
            g_ov[g_d] = g_acc[g_j];
            ++g_d;
        }}
    }}
}} else if (g_n > 0 && (g_hi >> 12) - (g_lo >> 12) < 4 * g_n) {{
    // fewer: the columns in order from the non-empty words of bits only (clearing them),
    // found through a bitmap of them (made here: setting it in the loop above costs more);
    // the first two columns of a word without a branch
    for (long long g_x = 0; g_x < g_n; ++g_x) {{
        const long long g_j = g_cols[g_x];
        g_top[g_j >> 12] |= 1ULL << ((g_j >> 6) & 63);
    }}
    long long g_s = 0;
    for (long long g_x = g_lo >> 12; g_x <= (g_hi >> 12); ++g_x) {{
        g_U g_t = g_top[g_x];
        g_top[g_x] = 0;
        while (g_t) {{
            const long long g_y = (g_x << 6) + __builtin_ctzll(g_t);
            g_t &= g_t - 1;
            g_U g_b = g_bits[g_y];
            g_bits[g_y] = 0;
            const long long g_base = g_y << 6;
            g_cols[g_s++] = (g_I)(g_base + __builtin_ctzll(g_b));
            g_b &= g_b - 1;
            g_cols[g_s] = (g_I)(g_base + __builtin_ctzll(g_b | (1ULL << 63)));  // kept if there was one
            g_s += g_b != 0;
            g_b &= g_b - 1;
            while (g_b) {{
                g_cols[g_s++] = (g_I)(g_base + __builtin_ctzll(g_b));
                g_b &= g_b - 1;
            }}
        }}
    }}
}} else {{
    // a wide range for few columns: sort them
    std::sort(g_cols, g_cols + g_n);
    for (long long g_x = 0; g_x < g_n; ++g_x) g_bits[g_cols[g_x] >> 6] = 0;
}}
if (g_listed)
    for (long long g_x = 0; g_x < g_n; ++g_x) {{
        const g_I g_j = g_cols[g_x];
        g_oc[g_x] = g_j;
        g_ov[g_x] = g_acc[g_j];
    }}
ss_gw_done(g_w);
'''


def emit_gustavson(kb: KernelBuilder, rows, cols, cap, a: dict, b: dict, out: dict, vt: dace.typeclass,
                   it: dace.typeclass):
    """Emit the three steps into ``kb`` (:func:`~sdfgsparse.targets.cpu.rowwise.emit_count_fill`),
    with the call's workspace table before them and its release after them. Build the
    kernel with :func:`build_gustavson`.

    :param rows, cols: the result's shape (``cols`` is B's column count).
    :param cap: the result's capacity.
    :param a, b, out: connector names of ``pos1``, ``crd1``, ``vals`` of A, B and the result.
    :param vt, it: the result's value and index types.
    """
    kb.globals['np'] = __import__('numpy')
    kb.symbols_of(cols)
    L = kb.line
    L(f'ncols = dace.int64({pyexpr(cols)})')
    L(f'gwws = np.empty(({SLOTS},), dtype=dace.uint64)')
    for l in cpp_tasklet([], [('_tws', 'gwws')], 'ss_gw_clear(_tws);'):
        L(l)
    ins = [('_tnc', 'ncols'), ('_ap', a['pos1']), ('_ac', a['crd1']), ('_bp', b['pos1']), ('_bc', b['crd1'])]
    fill = ins + [('_av', a['vals']), ('_bv', b['vals']), ('_op', out['pos1'])]
    types = dict(vt=vt.ctype, it=it.ctype, pf=PREFETCH)
    emit_count_fill(kb, 'gw', rows, cap, ins, fill, out, _COUNT.format(**types), _FILL.format(**types),
                    workspaces=[('_tws', 'gwws')])
    for l in cpp_tasklet([('_tws', 'gwws')], [], 'ss_gw_release(_tws);', side_effects=True):
        L(l)


def build_gustavson(kb: KernelBuilder) -> dace.SDFG:
    """The kernel SDFG of ``kb`` (filled by :func:`emit_gustavson`): its row maps with the
    guided schedule, the workspace helpers in its global code."""
    sdfg = kb.build()
    guided_rows(sdfg)
    sdfg.append_global_code(GLOBAL_CODE)
    return sdfg


def guided_rows(sdfg: dace.SDFG):
    """Give the row maps of a built Gustavson kernel (the maps around its C++ tasklets)
    OpenMP's guided schedule."""
    for node, state in sdfg.all_nodes_recursive():
        if isinstance(node, dace.nodes.MapEntry) and any(
                isinstance(n, dace.nodes.Tasklet) and n.language == dace.Language.CPP
                for n in state.scope_subgraph(node).nodes()):
            node.map.omp_schedule = dace.dtypes.OMPScheduleType.Guided
