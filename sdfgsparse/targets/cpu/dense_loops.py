"""Dense inner loops of sparse kernels as vectorisable C++ tasklets.

DaCe 1.0.2's frontend lowers ``for k in range(K): Y[i, k] += a * B[j, k]`` with a
data-dependent ``j`` into an indirection tasklet and element copies per iteration, which
the C++ compiler does not vectorise (the same walk with a SIMD inner loop is markedly
faster; docs/performance.md). :func:`axpy_row` emits that inner loop
as one tasklet per stored entry: restrict-qualified row pointers and ``#pragma omp simd``
over the ``K`` contiguous columns. The surrounding loop nest — the format's level walk,
the parallel map — stays generated Python, so every format still gets the operation.

Tasklets that walk a whole row (``spmv_row``, ``spmv_row_chunks``, ``spmm_row``,
``sddmm_row``) read the index and value arrays through dynamic memlets: they touch the
row's entries ``[pos[i], pos[i + 1])`` only, a data-dependent part of the arrays, and the
SOAP analysis (``analysis/sdfg_extract.py``) treats them as such.
"""
from typing import List

from sdfgsparse.targets.cpu.kernel import cpp_tasklet

__all__ = [
    'axpy_row', 'axpy_tile', 'dot_rows', 'transposed_rows', 'spmm_row', 'contiguous_rows',
    'gemm_row_block', 'GEMM_ROWS', 'SPMM_PANEL', 'sddmm_row', 'SDDMM_GROUP', 'spmv_row', 'spmv_row_chunks',
    'regular_rows', 'REGULAR_SAMPLE', 'REGULAR_MAX_MEAN'
]


def contiguous_rows(*descs) -> bool:
    """Whether each 2-D array stores its rows contiguously (unit stride along columns)."""
    return all(len(d.shape) == 2 and str(d.strides[1]) == '1' for d in descs)


def axpy_row(y: str, i: str, b: str, j: str, a: str, k: str, b_stride: str, ctype: str) -> List[str]:
    """Generated-source lines for ``y[i, 0:k] += a * b[j, 0:k]``.

    :param y, b: array names (rows contiguous); ``i``: a row expression usable in a memlet
                 (a loop variable or symbol); ``j``, ``a``: any expressions (read into
                 scalars first); ``k``: the column count; ``b_stride``: elements between
                 rows of ``b``; ``ctype``: the C type of the values.
    """
    code = (f'{ctype}* __restrict__ yr = _ty; '
            f'const {ctype}* __restrict__ br = ss_in(_tb) + _tj * ({b_stride}); '
            f'const long kk = {k}; '
            '_Pragma("omp simd") '
            'for (long c = 0; c < kk; ++c) yr[c] += _ta * br[c];')
    return [
        f'_aa = {a}',
        f'_jj = dace.int64({j})',
        *cpp_tasklet(
            [
                ('_ta', '_aa'),
                ('_tj', '_jj'),
                ('_tb', f'{b}'),
                ('_tyi', f'{y}[{i}, :]'),
            ],
            [
                ('_ty', f'{y}[{i}, :]'),
            ],
            code),
    ]


def axpy_tile(y: str, i: str, b: str, j: str, a: str, c0: str, c1: str, y_stride: str, b_stride: str,
              ctype: str) -> List[str]:
    """Generated-source lines for ``y[i, c0:c1] += a * b[j, c0:c1]`` where ``i`` may be
    data-dependent (a scatter): ``y`` is passed whole and addressed by pointer, so the
    caller must guarantee that concurrent tasklets touch disjoint columns (tiles)."""
    code = (f'{ctype}* __restrict__ yr = _ty + _ti * ({y_stride}); '
            f'const {ctype}* __restrict__ br = ss_in(_tb) + _tj * ({b_stride}); '
            'const long lo = _tc0, hi = _tc1; '
            '_Pragma("omp simd") '
            'for (long c = lo; c < hi; ++c) yr[c] += _ta * br[c];')
    return [
        f'_aa = {a}',
        f'_ii = dace.int64({i})',
        f'_jj = dace.int64({j})',
        f'_c0 = dace.int64({c0})',
        f'_c1 = dace.int64({c1})',
        *cpp_tasklet(
            [
                ('_ta', '_aa'),
                ('_ti', '_ii'),
                ('_tj', '_jj'),
                ('_tc0', '_c0'),
                ('_tc1', '_c1'),
                ('_tb', f'{b}'),
                ('_tyi', f'{y}'),
            ],
            [
                ('_ty', f'{y}'),
            ],
            code),
    ]


def dot_rows(out: str,
             x: str,
             i: str,
             y: str,
             j: str,
             k: str,
             x_stride: str,
             y_stride: str,
             ctype: str,
             y_pointer: bool = False) -> List[str]:
    """Generated-source lines for the scalar ``out = dot(x[i, 0:k], y[j, 0:k])`` (rows
    contiguous; ``i`` and ``j`` any expressions) as one SIMD reduction tasklet.
    ``y_pointer``: ``y`` names an int64 scalar holding the address of the rows (from
    :func:`transposed_rows`) instead of an array."""
    ybase = f'((const {ctype}*)(uintptr_t)_ty)' if y_pointer else '_ty'
    code = (f'const {ctype}* __restrict__ xr = ss_in(_tx) + _ti * ({x_stride}); '
            f'const {ctype}* __restrict__ yr = {ybase} + _tj * ({y_stride}); '
            f'{ctype} s = 0; const long kk = {k}; '
            '_Pragma("omp simd reduction(+:s)") '
            'for (long c = 0; c < kk; ++c) s += xr[c] * yr[c]; '
            '_to = s;')
    return [
        f'_ii = dace.int64({i})',
        f'_jj = dace.int64({j})',
        *cpp_tasklet(
            [
                ('_ti', '_ii'),
                ('_tj', '_jj'),
                ('_tx', f'{x}'),
                ('_ty', f'{y}'),
            ],
            [
                ('_to', f'{out}'),
            ],
            code),
    ]


def transposed_rows(ptr: str, src: str, rows: str, cols: str, src_stride: str, ctype: str) -> List[str]:
    """Generated-source lines that store ``src.T`` (``src``: ``rows x cols``, ``src_stride``
    elements between rows) by contiguous rows in a per-thread buffer and set the int64
    scalar ``ptr`` to its address (for :func:`dot_rows` with ``y_pointer``).

    The copy runs in parallel over the rows of ``src.T``; one such row reads a column of
    ``src``, whose cache lines the next few rows reuse. The buffer is ``thread_local`` to
    the calling thread and only grows (to the largest ``rows * cols`` seen): a new
    allocation of that size on every call costs a page fault per 4 KiB once it is above
    malloc's mmap threshold (several times the copy itself; docs/performance.md)."""
    code = f'''
typedef {ctype} yt_V;
static thread_local std::vector<yt_V> yt_buf;
const long long yt_R = {rows}, yt_C = {cols}, yt_ld = {src_stride};
if ((long long)yt_buf.size() < yt_R * yt_C) yt_buf.resize(yt_R * yt_C);
yt_V* __restrict__ yt_out = yt_buf.data();
const yt_V* __restrict__ yt_src = ss_in(_ts);
_Pragma("omp parallel for schedule(static) if(yt_R * yt_C > 65536)")
for (long long yt_c = 0; yt_c < yt_C; ++yt_c)
    for (long long yt_r = 0; yt_r < yt_R; ++yt_r) yt_out[yt_c * yt_R + yt_r] = yt_src[yt_r * yt_ld + yt_c];
_tp = (long long)(uintptr_t)yt_out;
'''
    return [
        f'{ptr} = dace.int64(0)',
        *cpp_tasklet(
            [
                ('_ts', f'{src}'),
            ],
            [
                ('_tp', f'{ptr}'),
            ],
            code),
    ]


def _vector_types(prefix: str, ctype: str) -> str:
    """C++ declarations of ``<prefix>_V`` (the value type), ``<prefix>_vec`` (a GCC/Clang
    vector of it as wide as the target's registers, ``SS_VECTOR_BYTES`` of
    :file:`include/sdfgsparse_cpu.h`: 64 bytes with AVX-512, 32 with AVX, 16 otherwise; aligned like
    one value so any address can be read) and ``<prefix>_L`` (values per vector), for the
    register-blocked row tasklets."""
    return (f'typedef {ctype} {prefix}_V;\n'
            f'typedef {prefix}_V {prefix}_vec __attribute__((vector_size(SS_VECTOR_BYTES), aligned(sizeof({prefix}_V))));\n'
            f'const long {prefix}_L = SS_VECTOR_BYTES / sizeof({prefix}_V);')


#: Vectors of ``y`` held in registers by one panel of :func:`spmm_row`.
SPMM_PANEL = 4


def spmm_row(y: str, i: str, b: str, crd: str, vals: str, lo: str, hi: str, k: str, b_stride: str,
             ctype: str) -> List[str]:
    """Generated-source lines for one whole row ``y[i, 0:k] = sum_p vals[p] * b[crd[p], 0:k]``
    over the stored entries ``p`` in ``[lo, hi)`` of a row-major operand, as one tasklet.

    Register blocking of the dense columns: the row is computed a panel of
    ``SPMM_PANEL`` vectors at a time (then two, one, and a tail of fewer columns
    than a vector, in one pass over the entries, not one scalar pass per column;
    panels of at most two vectors keep two sets of accumulators, for even and odd entries),
    the panel's accumulators held in registers over all of the row's entries, and ``y`` is
    written once — no zero fill, no load and store of ``y`` per entry as in
    :func:`axpy_row`. The accumulators are GCC/Clang vector-extension variables
    (as wide as the target's registers, :func:`_vector_types`; a vector wider than the
    registers is split by GCC, which then keeps the accumulators on the stack); arrays in ``omp simd`` loops were spilled to the
    stack by GCC 12, which made the same blocking slower than the per-entry form. Faster
    than zero fill plus :func:`axpy_row` on every matrix measured (docs/performance.md)."""
    code = f'''
{_vector_types('s', ctype)}
const long s_K = {k}, s_ldb = {b_stride};
const long long s_lo = _tlo, s_hi = _thi;
const s_V* __restrict__ s_b = ss_in(_tb);
const s_V* __restrict__ s_v = _tv;
const auto* __restrict__ s_c = _tc;
s_V* __restrict__ s_y = ss_out(_ty);
// NV vectors of the row in registers; narrow panels keep two sets (even and odd entries)
// so that consecutive entries' FMAs do not wait on each other
auto s_panel = [&](long s_c0, auto s_nv) {{
    constexpr int NV = decltype(s_nv)::value;
    constexpr int S = NV <= 2 ? 2 : 1;
    s_vec acc[S][NV];
    for (int h = 0; h < S; ++h)
        for (int u = 0; u < NV; ++u) acc[h][u] = s_vec{{}};
    long long p = s_lo;
    for (; p + S <= s_hi; p += S)
        for (int h = 0; h < S; ++h) {{
            const s_V a = s_v[p + h];
            const s_vec* br = (const s_vec*)(s_b + (long long)s_c[p + h] * s_ldb + s_c0);
            for (int u = 0; u < NV; ++u) acc[h][u] += a * br[u];
        }}
    for (; p < s_hi; ++p) {{
        const s_V a = s_v[p];
        const s_vec* br = (const s_vec*)(s_b + (long long)s_c[p] * s_ldb + s_c0);
        for (int u = 0; u < NV; ++u) acc[0][u] += a * br[u];
    }}
    s_vec* yv = (s_vec*)(s_y + s_c0);
    for (int u = 0; u < NV; ++u) yv[u] = S == 2 ? acc[0][u] + acc[S - 1][u] : acc[0][u];
}};
long s_c0 = 0;
for (; s_c0 + {SPMM_PANEL} * s_L <= s_K; s_c0 += {SPMM_PANEL} * s_L)
    s_panel(s_c0, std::integral_constant<int, {SPMM_PANEL}>());
if (s_c0 + 2 * s_L <= s_K) {{ s_panel(s_c0, std::integral_constant<int, 2>()); s_c0 += 2 * s_L; }}
for (; s_c0 + s_L <= s_K; s_c0 += s_L) s_panel(s_c0, std::integral_constant<int, 1>());
if (s_c0 < s_K) {{  // fewer columns than a vector: one pass over the entries for all of them
    const long s_r = s_K - s_c0;
    s_V acc[s_L] = {{}};
    for (long long p = s_lo; p < s_hi; ++p) {{
        const s_V a = s_v[p];
        const s_V* br = s_b + (long long)s_c[p] * s_ldb + s_c0;
        for (long j = 0; j < s_r; ++j) acc[j] += a * br[j];
    }}
    for (long j = 0; j < s_r; ++j) s_y[s_c0 + j] = acc[j];
}}
'''
    return [
        f'_lo = dace.int64({lo})',
        f'_hi = dace.int64({hi})',
        *cpp_tasklet(
            [
                ('_tlo', '_lo'),
                ('_thi', '_hi'),
                ('_tc', f'{crd}(-1)'),  # the row's entries: a data-dependent part (dynamic)
                ('_tv', f'{vals}(-1)'),
                ('_tb', f'{b}'),
            ],
            [
                ('_ty', f'{y}[{i}, :]'),
            ],
            code),
    ]


def spmv_row(y: str, i: str, x: str, crd: str, vals: str, lo: str, hi: str, ctype: str, check, vals_ctype: str,
             x_ctype: str) -> List[str]:
    """Generated-source lines for ``y[i] = sum_p vals[p] * x[crd[p]]`` over the stored
    entries ``p`` in ``[lo, hi)`` of one row, as one tasklet that also checks its part of
    the storage as it reads it (``check``: a
    :class:`sdfgsparse.targets.cpu.kernel_checks.RowCheck`): the segment within ``[0, nnz]``,
    the indices below their extent and, where the level is ordered, increasing; it reads
    only in range whatever it finds and reports a problem through the library's counter.
    ``ctype``: the result's (and sum's) C type; ``vals_ctype`` and ``x_ctype`` those of the
    operands (a float32 matrix times a float64 vector sums in float64, as NumPy does)."""
    body = check.row_walk('v_lo', 'v_hi', 'v_c', 'v_acc += (v_V)v_v[{p}] * (v_V)v_x[{c}];')
    code = f'''
typedef {ctype} v_V;
long long v_lo = _tlo, v_hi = _thi;
const auto* __restrict__ v_c = _tc;
const {vals_ctype}* __restrict__ v_v = _tv;
const {x_ctype}* __restrict__ v_x = ss_in(_tx);
v_V v_acc = 0;
{body}
_ty = v_acc;
'''
    return check.inputs() + [
        f'_lo = dace.int64({lo})',
        f'_hi = dace.int64({hi})',
        *cpp_tasklet(
            [('_tlo', '_lo'), ('_thi', '_hi')] + list(check.CONNECTORS) + [
                ('_tc', f'{crd}(-1)'),  # the row's entries: a data-dependent part (dynamic)
                ('_tv', f'{vals}(-1)'),
                ('_tx', f'{x}'),
            ],
            [
                ('_ty', f'{y}[{i}]'),
            ],
            code),
    ]


def spmv_row_chunks(y: str, i: str, x: str, crd: str, vals: str, lo: str, hi: str, end: str, ctype: str,
                    itemsize: int, width: int) -> List[str]:
    """Generated-source lines for ``y[i] = sum_p vals[p] * x[crd[p]]`` over the stored
    entries ``[lo, hi)`` of one row, ``width`` entries at a time, as one tasklet.

    Each chunk is a GCC/Clang vector: the values loaded at once, ``x`` at the chunk's
    columns built from ``width`` loads, and the lanes past the row's end zeroed by a
    vector compare; so the loop tests the row's end once per chunk, and a row of up to
    ``width`` entries takes one pass without a branch on its length. The masked lanes
    read the next entries of the arrays (the following rows', whose columns are valid
    indices of ``x``); a chunk that would pass ``end`` (the end of the last row, not the
    arrays' capacity) is left to the scalar loop. ``itemsize``: bytes per value (the
    mask lanes are integers of that size). ``width`` 1: one entry per step, no vectors;
    the same where the target's vector registers (``SS_VECTOR_BYTES``) are narrower than
    a chunk (SSE: the chunks then cost 2-3x the scalar loop, docs/performance.md)."""
    one = f'''
typedef {ctype} r_V;
const long long r_lo = _tlo, r_hi = _thi;
(void)_tend;
const auto* __restrict__ r_c = _tc;
const r_V* __restrict__ r_v = _tv;
const r_V* __restrict__ r_x = ss_in(_tx);
r_V r_acc = 0;
for (long long r_p = r_lo; r_p < r_hi; ++r_p) r_acc += r_v[r_p] * r_x[r_c[r_p]];
_ty = r_acc;
'''
    if width <= 1:  # one entry per step
        return _row_tasklet(y, i, x, crd, vals, lo, hi, end, one)
    mask = {8: 'long long', 4: 'int'}[itemsize]  # the value dtypes have 4 or 8 bytes
    lanes = ', '.join(f'r_x[r_c[r_p + {k}]]' for k in range(width))
    zeros = ', '.join('0' for _ in range(width))
    iota = ', '.join(str(k) for k in range(width))
    # the chunk's values are read through the vector type (aligned like one value): a
    # memcpy into a vector variable went through the stack where GCC splits unaligned
    # 32-byte loads (its generic tuning, -march=x86-64-v3), a store-forwarding stall per chunk
    code = f'''
#ifndef SS_VECTOR_BYTES
#error "sdfgsparse: SS_VECTOR_BYTES (include/sdfgsparse_cpu.h) is not defined"
#endif
#if SS_VECTOR_BYTES >= {width * itemsize}
typedef {ctype} r_V;
typedef r_V r_vec __attribute__((vector_size({width * itemsize}), aligned(sizeof(r_V))));
typedef {mask} r_msk __attribute__((vector_size({width * itemsize})));
const long long r_lo = _tlo, r_hi = _thi, r_end = _tend;
const auto* __restrict__ r_c = _tc;
const r_V* __restrict__ r_v = _tv;
const r_V* __restrict__ r_x = ss_in(_tx);
const r_msk r_iota = {{{iota}}};
r_vec r_a = {{{zeros}}};
long long r_p = r_lo;
for (; r_p < r_hi && r_p + {width} <= r_end; r_p += {width}) {{
    const r_vec r_w = *(const r_vec*)(r_v + r_p);
    const r_vec r_g = {{{lanes}}};
    r_a += (r_iota < ({mask})(r_hi - r_p)) ? r_w * r_g : (r_vec){{{zeros}}};
}}
r_V r_acc = 0;
for (int r_k = 0; r_k < {width}; ++r_k) r_acc += r_a[r_k];
for (; r_p < r_hi; ++r_p) r_acc += r_v[r_p] * r_x[r_c[r_p]];
_ty = r_acc;
#else
// registers narrower than a chunk (SSE): one entry per step is faster
{one}
#endif
'''
    return _row_tasklet(y, i, x, crd, vals, lo, hi, end, code)


def _row_tasklet(y, i, x, crd, vals, lo, hi, end, code) -> List[str]:
    return [
        f'_lo = dace.int64({lo})',
        f'_hi = dace.int64({hi})',
        f'_end = dace.int64({end})',
        *cpp_tasklet(
            [
                ('_tlo', '_lo'),
                ('_thi', '_hi'),
                ('_tend', '_end'),
                ('_tc', f'{crd}(-1)'),  # the row's entries: a data-dependent part (dynamic)
                ('_tv', f'{vals}(-1)'),
                ('_tx', f'{x}'),
            ],
            [
                ('_ty', f'{y}[{i}]'),
            ],
            code),
    ]


#: Rows sampled by :func:`regular_rows` (pairs of a row and the one before it).
REGULAR_SAMPLE = 64
#: Mean entries per row up to which regular rows take the one-entry walk.
REGULAR_MAX_MEAN = 16


def regular_rows(out: str, pos: str, rows: str) -> List[str]:
    """Generated-source lines setting ``out[0]`` (a new array of one int) to 1 when the rows look regular:
    in a sample of :data:`REGULAR_SAMPLE` rows spread over the matrix, at least half are
    as long as the row before them, and rows hold at most :data:`REGULAR_MAX_MEAN` entries
    on average. Such rows (bands, meshes of one degree) run faster one entry at a time:
    the loop's end is predicted, and chunks would compute padding lanes (a band of 9: three
    chunks of 4 for 9 entries). Irregular or long rows run faster in chunks, which test
    the row's end once per chunk (the two walks compared per matrix: docs/performance.md).
    O(1) per call: the sample reads 3 * 64 row pointers."""
    code = (f'const long long m = _trows; const auto* __restrict__ q = _tpos; long long same = 0, seen = 0; '
            f'if (m >= 3) for (long long s = 0; s < {REGULAR_SAMPLE}; ++s) {{ '
            f'const long long r = 1 + (m - 2) * s / {REGULAR_SAMPLE - 1}; ++seen; '
            'same += (q[r + 1] - q[r]) == (q[r] - q[r - 1]); } '
            f'_treg = (seen > 0 && 2 * same >= seen && (long long)(q[m] - q[0]) <= {REGULAR_MAX_MEAN} * m) ? 1 : 0;')
    return [
        f'{out} = np.empty((1,), dtype=np.int64)',
        f'{out}_m = dace.int64({rows})',
        *cpp_tasklet([('_trows', f'{out}_m'), ('_tpos', pos)], [('_treg', f'{out}[0]')], code),
    ]


#: Stored entries whose dot products :func:`sddmm_row` computes together.
SDDMM_GROUP = 4


def sddmm_row(out: str, out_crd: str, i: str, x: str, y: str, crd: str, vals: str, lo: str, hi: str, k: str,
              x_stride: str, y_stride: str, ctype: str, y_pointer: bool = False) -> List[str]:
    """Generated-source lines for one whole row of SDDMM as one tasklet: for the stored
    entries ``p`` in ``[lo, hi)``, ``out[p] = vals[p] * dot(x[i, 0:k], y[crd[p], 0:k])`` and
    ``out_crd[p] = crd[p]`` (the result shares the operand's pattern).

    The dot products of ``SDDMM_GROUP`` entries are computed together over register-wide vectors
    (GCC/Clang vector extensions, see :func:`spmm_row`): each piece of the ``x`` row is
    loaded once per group and feeds one independent accumulator per entry; the tail
    columns (``k`` not a multiple of the vector) are added in scalar. ``y_pointer`` as in
    :func:`dot_rows`. Faster than one ``omp simd`` reduction per entry, and than groups of
    two entries (docs/performance.md)."""
    ybase = f'((const {ctype}*)(uintptr_t)_ty)' if y_pointer else '_ty'
    code = f"""
{_vector_types('d', ctype)}
const long d_K = {k}, d_NV = d_K / d_L, d_T = d_NV * d_L;
const long long d_ys = {y_stride};
const long long d_lo = _tlo, d_hi = _thi;
const d_V* __restrict__ d_x = ss_in(_tx) + _ti * ({x_stride});
const d_V* __restrict__ d_y = {ybase};
const auto* __restrict__ d_c = _tc;
const d_V* __restrict__ d_sv = _tv;
d_V* __restrict__ d_o = _to;
auto* __restrict__ d_oc = _toc;
auto d_dots = [&](long long p, auto d_n) {{
    constexpr int H = decltype(d_n)::value;
    const d_V* d_r[H];
    for (int h = 0; h < H; ++h) d_r[h] = d_y + (long long)d_c[p + h] * d_ys;
    d_vec a[H];
    for (int h = 0; h < H; ++h) a[h] = d_vec{{}};
    for (long u = 0; u < d_NV; ++u) {{
        const d_vec xv = *(const d_vec*)(d_x + u * d_L);
        for (int h = 0; h < H; ++h) a[h] += xv * *(const d_vec*)(d_r[h] + u * d_L);
    }}
    for (int h = 0; h < H; ++h) {{
        d_V s = 0;
        for (long l = 0; l < d_L; ++l) s += a[h][l];
        for (long c = d_T; c < d_K; ++c) s += d_x[c] * d_r[h][c];
        d_o[p + h] = d_sv[p + h] * s;
        d_oc[p + h] = d_c[p + h];
    }}
}};
long long p = d_lo;
for (; p + {SDDMM_GROUP} <= d_hi; p += {SDDMM_GROUP}) d_dots(p, std::integral_constant<int, {SDDMM_GROUP}>());
for (; p < d_hi; ++p) d_dots(p, std::integral_constant<int, 1>());
"""
    return [
        f'_ii = dace.int64({i})',
        f'_lo = dace.int64({lo})',
        f'_hi = dace.int64({hi})',
        *cpp_tasklet(
            [
                ('_ti', '_ii'),
                ('_tlo', '_lo'),
                ('_thi', '_hi'),
                ('_tx', f'{x}'),
                ('_ty', f'{y}'),
                ('_tc', f'{crd}(-1)'),  # the row's entries: a data-dependent part (dynamic)
                ('_tv', f'{vals}(-1)'),
            ],
            [
                ('_to', f'{out}'),
                ('_toc', f'{out_crd}'),
            ],
            code),
    ]


#: Rows of ``C`` per register block of :func:`gemm_row_block`.
GEMM_ROWS = 4


def gemm_row_block(c: str, a: str, b: str, ib: str, m: str, k: str, n: str, lda: str, ldb: str, ldc: str,
                   ctype: str) -> List[str]:
    """Generated-source lines for rows ``GEMM_ROWS*ib ...`` (at most ``GEMM_ROWS``, fewer at
    the end) of the dense product ``c = a @ b`` (``m x k`` times ``k x n``, rows contiguous,
    ``ld*`` elements between rows).

    Register blocking: the block's rows are computed a column panel at a time, the panel's
    accumulators (``GEMM_ROWS`` rows x four register-wide vectors) held in registers over the
    whole ``k`` loop, so every loaded row piece of ``b`` feeds ``GEMM_ROWS`` FMAs and ``c``
    is written once (the row-wise axpy form loads and stores ``c`` for every ``k``). Narrower
    panels (one vector) take the remaining columns, the last partial vector is masked;
    trailing rows use one-row blocks. ``c`` is passed whole; blocks write disjoint rows.
    """
    code = f'''
typedef {ctype} _T;
const long _V = SS_VECTOR_BYTES / sizeof(_T);
const long _M = {m}, _K = {k}, _N = {n}, _lda = {lda}, _ldb = {ldb}, _ldc = {ldc};
const _T* __restrict__ _pa = ss_in(_ta);
const _T* __restrict__ _pb = ss_in(_tb);
_T* __restrict__ _pc = _tc;
auto _panel = [&](long r0, long c0, auto rows, auto width, auto masked, long rem) {{
    constexpr long R = decltype(rows)::value;
    constexpr long W = decltype(width)::value;
    constexpr bool MASK = decltype(masked)::value;
    _T acc[R][W];
    for (long r = 0; r < R; ++r) {{
        _Pragma("omp simd") for (long c = 0; c < W; ++c) acc[r][c] = 0;
    }}
    for (long q = 0; q < _K; ++q) {{
        const _T* __restrict__ br = _pb + q * _ldb + c0;
        for (long r = 0; r < R; ++r) {{
            const _T av = _pa[(r0 + r) * _lda + q];
            if (MASK) {{
                _Pragma("omp simd") for (long c = 0; c < W; ++c) acc[r][c] += av * (c < rem ? br[c] : _T(0));
            }} else {{
                _Pragma("omp simd") for (long c = 0; c < W; ++c) acc[r][c] += av * br[c];
            }}
        }}
    }}
    for (long r = 0; r < R; ++r) {{
        _T* __restrict__ cr = _pc + (r0 + r) * _ldc + c0;
        if (MASK) {{
            for (long c = 0; c < W; ++c) if (c < rem) cr[c] = acc[r][c];
        }} else {{
            _Pragma("omp simd") for (long c = 0; c < W; ++c) cr[c] = acc[r][c];
        }}
    }}
}};
auto _rows = [&](long r0, auto rows) {{
    long c0 = 0;
    for (; c0 + 4 * _V <= _N; c0 += 4 * _V)
        _panel(r0, c0, rows, std::integral_constant<long, 4 * _V>(), std::false_type(), 0);
    for (; c0 + _V <= _N; c0 += _V)
        _panel(r0, c0, rows, std::integral_constant<long, _V>(), std::false_type(), 0);
    if (c0 < _N)
        _panel(r0, c0, rows, std::integral_constant<long, _V>(), std::true_type(), _N - c0);
}};
const long _i0 = _tib * {GEMM_ROWS};
if (_i0 + {GEMM_ROWS} <= _M) {{
    _rows(_i0, std::integral_constant<long, {GEMM_ROWS}>());
}} else {{
    for (long r = _i0; r < _M; ++r) _rows(r, std::integral_constant<long, 1>());
}}
'''
    return [
        f'_ib = dace.int64({ib})',
        *cpp_tasklet(
            [
                ('_tib', '_ib'),
                ('_ta', f'{a}'),
                ('_tb', f'{b}'),
            ],
            [
                ('_tc', f'{c}'),
            ],
            code),
    ]
