"""Row-parallel ``A + B`` / ``A - B`` of two compressed operands, a CSR result (a CSC
result is the CSR storage of ``A.T + B.T``: the caller passes the transposed views).

The generic lowering (:mod:`sdfgsparse.targets.cpu.compress`) appends both operands' entries
to one list, sorts and compresses it sequentially (slower than scipy; docs/performance.md).
When each operand, as the operation sees it, is CSR or CSC (a CSR
matrix, a transposed CSC one, or the other way round), this lowering:

0. stores a column-major operand by rows first — a counting sort by row, walking the
   columns in order so that every row comes out sorted (what scipy's ``tocsr`` does for
   ``A.T``), in parallel over up to 16 chunks of consecutive columns with equal entry
   counts: each chunk counts its entries per row, a pass over the rows turns the counts
   into each chunk's offset within the row, and each chunk places its entries;
1. *count* — per row, in parallel, the size of the union of the two sorted rows
   (a two-pointer merge);
2. *positions* — ``pos`` as the prefix sum of the counts;
3. *fill* — per row, in parallel, the same merge writing columns and ``a + sign * b``.

Rows of a valid CSR/CSC operand are sorted and free of duplicates (the call checks it),
so the merged rows are too. Explicit zeros from cancellation are kept, as in the generic
lowering. Each per-row step is one C++ tasklet inside a generated map.
"""
import dace

from sdfgsparse._symbolic import pyexpr
from sdfgsparse.targets.cpu.kernel import KernelBuilder, cpp_tasklet
from sdfgsparse.targets.cpu.rowwise import emit_count_fill

__all__ = ['emit_rows_of_columns', 'emit_row_union']

# C++ locals are prefixed u_ (DaCe writes tasklet outputs after the code, in its scope).
_TRANSPOSE = '''
auto* __restrict__ u_tp = _tp;
auto* __restrict__ u_tc = _tc;
auto* __restrict__ u_tv = _tv;
const auto* __restrict__ u_sp = _sp;
const auto* __restrict__ u_sc = _sc;
const auto* __restrict__ u_sv = _sv;
const long long u_rows = _trows, u_cols = _tcols, u_n = (long long)u_sp[u_cols];
// P chunks of consecutive columns with about n / P entries each; each chunk counts its
// entries per row, so a row's entries can be placed chunk by chunk, columns in order.
long long u_P = u_n / 32768;
const long long u_lim = 4 * u_n / (u_rows + 1);  // counters: at most ~4 per entry
if (u_P > 16) u_P = 16;
if (u_P > u_lim) u_P = u_lim;
if (u_P < 1) u_P = 1;
std::vector<long long> u_cb(u_P + 1);
for (long long u_k = 0; u_k <= u_P; ++u_k) {
    if (u_k == u_P) { u_cb[u_k] = u_cols; break; }
    const long long u_target = u_n * u_k / u_P;
    long long u_lo = 0, u_hi = u_cols;
    while (u_lo < u_hi) {
        const long long u_mid = u_lo + (u_hi - u_lo) / 2;
        if ((long long)u_sp[u_mid] < u_target) u_lo = u_mid + 1; else u_hi = u_mid;
    }
    u_cb[u_k] = u_lo;
}
const long long u_R = u_rows + 1;
std::vector<long long> u_cntv(u_P * u_R, 0);
long long* __restrict__ u_cnt = u_cntv.data();
_Pragma("omp parallel if(u_P > 1)")
{
    _Pragma("omp for schedule(static)")
    for (long long u_k = 0; u_k < u_P; ++u_k) {
        long long* __restrict__ u_c = u_cnt + u_k * u_R;
        for (long long u_q = u_sp[u_cb[u_k]]; u_q < u_sp[u_cb[u_k + 1]]; ++u_q) u_c[u_sc[u_q]] += 1;
    }
    // per row: each chunk's offset within the row; the row's size
    _Pragma("omp for schedule(static)")
    for (long long u_r = 0; u_r < u_rows; ++u_r) {
        long long u_s = 0;
        for (long long u_k = 0; u_k < u_P; ++u_k) {
            const long long u_t = u_cnt[u_k * u_R + u_r];
            u_cnt[u_k * u_R + u_r] = u_s;
            u_s += u_t;
        }
        u_tp[u_r + 1] = u_s;
    }
    _Pragma("omp single")
    {
        u_tp[0] = 0;
        for (long long u_r = 0; u_r < u_rows; ++u_r) u_tp[u_r + 1] += u_tp[u_r];
    }
    _Pragma("omp for schedule(static)")
    for (long long u_k = 0; u_k < u_P; ++u_k) {
        long long* __restrict__ u_c = u_cnt + u_k * u_R;
        for (long long u_col = u_cb[u_k]; u_col < u_cb[u_k + 1]; ++u_col)
            for (long long u_q = u_sp[u_col]; u_q < u_sp[u_col + 1]; ++u_q) {
                const long long u_r = u_sc[u_q];
                const long long u_d = (long long)u_tp[u_r] + u_c[u_r]++;
                u_tc[u_d] = u_col;
                u_tv[u_d] = u_sv[u_q];
            }
    }
}
'''

_COUNT = '''
const long long u_i = _ti;
long long u_a = _ap[u_i], u_ae = _ap[u_i + 1], u_b = _bp[u_i], u_be = _bp[u_i + 1], u_n = 0;
while (u_a < u_ae && u_b < u_be) {
    const long long u_ca = _ac[u_a], u_cb = _bc[u_b];
    u_a += u_ca <= u_cb;
    u_b += u_cb <= u_ca;
    ++u_n;
}
_tcnt = u_n + (u_ae - u_a) + (u_be - u_b);
'''

_FILL = '''
typedef {vt} u_V;
const u_V u_s = (u_V)({sign});
const long long u_i = _ti;
long long u_a = _ap[u_i], u_ae = _ap[u_i + 1], u_b = _bp[u_i], u_be = _bp[u_i + 1], u_d = _op[u_i];
while (u_a < u_ae && u_b < u_be) {{
    const long long u_ca = _ac[u_a], u_cb = _bc[u_b];
    if (u_ca < u_cb) {{ _oc[u_d] = u_ca; _ov[u_d] = (u_V)_av[u_a]; ++u_a; }}
    else if (u_cb < u_ca) {{ _oc[u_d] = u_cb; _ov[u_d] = u_s * (u_V)_bv[u_b]; ++u_b; }}
    else {{ _oc[u_d] = u_ca; _ov[u_d] = (u_V)_av[u_a] + u_s * (u_V)_bv[u_b]; ++u_a; ++u_b; }}
    ++u_d;
}}
for (; u_a < u_ae; ++u_a, ++u_d) {{ _oc[u_d] = _ac[u_a]; _ov[u_d] = (u_V)_av[u_a]; }}
for (; u_b < u_be; ++u_b, ++u_d) {{ _oc[u_d] = _bc[u_b]; _ov[u_d] = u_s * (u_V)_bv[u_b]; }}
'''


def emit_rows_of_columns(kb: KernelBuilder, tag: str, rows, cols, src: dict, nnz, idtype: str, vdtype: str) -> dict:
    """Emit the row-major copy of a column-major operand (``src``: connector names of its
    ``pos1`` / ``crd1`` / ``vals``; ``rows x cols`` as the operation sees it). Returns the
    names of the copy's arrays, keyed like ``src``."""
    kb.globals['np'] = __import__('numpy')
    kb.symbols_of(rows, cols, nnz)
    R, C, n = pyexpr(rows), pyexpr(cols), pyexpr(nnz)
    names = {'pos1': f'{tag}_pos', 'crd1': f'{tag}_crd', 'vals': f'{tag}_vals'}
    L = kb.line
    L(f'{names["pos1"]} = np.empty(({R} + 1,), dtype={idtype})')
    L(f'{names["crd1"]} = np.empty(({n},), dtype={idtype})')
    L(f'{names["vals"]} = np.empty(({n},), dtype={vdtype})')
    L(f'{tag}_rows = dace.int64({R})')
    L(f'{tag}_cols = dace.int64({C})')
    ins = [('_trows', f'{tag}_rows'), ('_tcols', f'{tag}_cols'), ('_sp', src['pos1']), ('_sc', src['crd1']),
           ('_sv', src['vals'])]
    for l in cpp_tasklet(ins, [('_tp', names['pos1']), ('_tc', names['crd1']), ('_tv', names['vals'])], _TRANSPOSE):
        L(l)
    return names


def emit_row_union(kb: KernelBuilder, rows, cap, a: dict, b: dict, out: dict, sign: int, vt: dace.typeclass):
    """Emit count, positions and fill of ``out = a + sign * b`` over ``rows`` rows (``a``,
    ``b``, ``out``: names of ``pos1`` / ``crd1`` / ``vals``, all row-major; ``cap``: the
    result's capacity, ``nnz(A) + nnz(B)``), by
    :func:`~sdfgsparse.targets.cpu.rowwise.emit_count_fill`."""
    ins = [('_ap', a['pos1']), ('_ac', a['crd1']), ('_bp', b['pos1']), ('_bc', b['crd1'])]
    fill = ins + [('_av', a['vals']), ('_bv', b['vals']), ('_op', out['pos1'])]
    emit_count_fill(kb, 'un', rows, cap, ins, fill, out, _COUNT, _FILL.format(vt=vt.ctype, sign=int(sign)))
