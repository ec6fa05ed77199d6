// sdfgsparse: the row steps of the sparse results built row by row (targets/cpu/builder.py and
// row_union.py build the kernels around them). A + B / A - B and A * B: a column-major operand
// stored by rows first (rows_of_columns), then per row, in parallel, the size of the union
// (intersection) of the two sorted rows (union_count, intersect_count) and the row itself
// (union_fill, intersect_fill). dedupe_count / dedupe_fill sum the repeated columns of one
// operand's sorted rows; copy_row copies a row of a concatenation's part. The fills take the
// result's capacity (cap), which a valid count never exceeds (builder.count_fill says why the
// kernel passes it). Rows of valid operands are sorted and free of duplicates (the call checks
// it), so the merged rows are too; explicit zeros from cancellation are kept.
#ifndef SDFGSPARSE_ROW_UNION_H
#define SDFGSPARSE_ROW_UNION_H
#include <cstring>
#include <type_traits>
#include <vector>

namespace sdfgsparse {

// The CSR storage (tp, tc, tv) of a column-major operand (sp, sc, sv: rows x cols as the
// operation sees it): a counting sort by row that walks the columns in order, so every row
// comes out sorted (what scipy's tocsr does for A.T). In parallel over up to 16 chunks of
// consecutive columns with about equal entry counts: each chunk counts its entries per row, a
// pass over the rows turns the counts into each chunk's offset within the row, and each chunk
// places its entries.
template <typename P, typename C, typename T, typename SP, typename SC, typename ST>
static inline void rows_of_columns(P* tp_, C* tc_, T* tv_, const SP* sp_, const SC* sc_, const ST* sv_,
                                   long long rows, long long cols) {
    P* __restrict__ tp = tp_;
    C* __restrict__ tc = tc_;
    T* __restrict__ tv = tv_;
    const SP* __restrict__ sp = sp_;
    const SC* __restrict__ sc = sc_;
    const ST* __restrict__ sv = sv_;
    const long long n = (long long)sp[cols];
    long long chunks = n / 32768;
    const long long lim = 4 * n / (rows + 1);  // counters: at most ~4 per entry
    if (chunks > 16) chunks = 16;
    if (chunks > lim) chunks = lim;
    if (chunks < 1) chunks = 1;
    std::vector<long long> cb(chunks + 1);  // the chunks' first columns
    for (long long k = 0; k <= chunks; ++k) {
        if (k == chunks) {
            cb[k] = cols;
            break;
        }
        const long long target = n * k / chunks;
        long long lo = 0, hi = cols;
        while (lo < hi) {
            const long long mid = lo + (hi - lo) / 2;
            if ((long long)sp[mid] < target)
                lo = mid + 1;
            else
                hi = mid;
        }
        cb[k] = lo;
    }
    const long long R = rows + 1;
    std::vector<long long> cntv(chunks * R, 0);
    long long* __restrict__ cnt = cntv.data();
    _Pragma("omp parallel if(chunks > 1)") {
        _Pragma("omp for schedule(static)") for (long long k = 0; k < chunks; ++k) {
            long long* __restrict__ c = cnt + k * R;
            for (long long q = sp[cb[k]]; q < sp[cb[k + 1]]; ++q) c[sc[q]] += 1;
        }
        // per row: each chunk's offset within the row; the row's size
        _Pragma("omp for schedule(static)") for (long long r = 0; r < rows; ++r) {
            long long s = 0;
            for (long long k = 0; k < chunks; ++k) {
                const long long t = cnt[k * R + r];
                cnt[k * R + r] = s;
                s += t;
            }
            tp[r + 1] = s;
        }
        _Pragma("omp single") {
            tp[0] = 0;
            for (long long r = 0; r < rows; ++r) tp[r + 1] += tp[r];
        }
        _Pragma("omp for schedule(static)") for (long long k = 0; k < chunks; ++k) {
            long long* __restrict__ c = cnt + k * R;
            for (long long col = cb[k]; col < cb[k + 1]; ++col)
                for (long long q = sp[col]; q < sp[col + 1]; ++q) {
                    const long long r = sc[q];
                    const long long d = (long long)tp[r] + c[r]++;
                    tc[d] = col;
                    tv[d] = sv[q];
                }
        }
    }
}

// n entries of two rows that hold the same columns: the columns copied, the values combined
// by f(a, b) in V, one vector loop.
template <typename V, typename OC, typename AC, typename AV, typename BV, typename F>
static inline void same_columns(OC* __restrict__ o, V* __restrict__ w, const AC* __restrict__ x,
                                const AV* __restrict__ u, const BV* __restrict__ v, long long n, F f) {
    for (long long k = 0; k < n; ++k) {
        o[k] = x[k];
        w[k] = f((V)u[k], (V)v[k]);
    }
}

// Whether the rows [a, ae) of ac and [b, be) of bc hold the same columns (one memcmp; index
// arrays of different widths never compare equal here, and the merges then walk them).
template <typename AC, typename BC>
static inline bool same_row_columns(const AC* ac, long long a, long long ae, const BC* bc, long long b, long long be) {
    return sizeof(AC) == sizeof(BC) && ae - a == be - b && std::memcmp(ac + a, bc + b, sizeof(AC) * (ae - a)) == 0;
}

// The size of the union of row i of A and of B: the length of both where the rows hold the same
// columns (one memcmp: A + A.T of a symmetric pattern, A - A), else a two-pointer merge without
// branches (rows that interleave at random mispredict a branchy one; on equal rows the merge's
// dependent loads cost 5-20x the compare: docs/performance.md).
template <typename AP, typename AC, typename BP, typename BC>
static inline long long union_count(const AP* ap, const AC* ac, const BP* bp, const BC* bc, long long i) {
    long long a = ap[i], ae = ap[i + 1], b = bp[i], be = bp[i + 1], n = 0;
    if (same_row_columns(ac, a, ae, bc, b, be)) return ae - a;
    while (a < ae && b < be) {
        const long long ca = ac[a], cb = bc[b];
        a += ca <= cb;
        b += cb <= ca;
        ++n;
    }
    return n + (ae - a) + (be - b);
}

// Row i of A + sign * B at op[i] (the same merge, writing columns and values in V). Where the
// union (op[i + 1] - op[i], from union_count) is as long as both rows, the rows hold the same
// columns (sorted, without duplicates, as the call checks): one vector loop over them.
template <typename V, typename OC, typename AP, typename AC, typename AV, typename BP, typename BC, typename BV,
          typename OP>
static inline void union_fill(OC* oc, V* ov, const AP* ap, const AC* ac, const AV* av, const BP* bp, const BC* bc,
                              const BV* bv, const OP* op, long long i, long long cap, int sign) {
    (void)cap;
    const V s = (V)sign;
    long long a = ap[i], ae = ap[i + 1], b = bp[i], be = bp[i + 1], d = op[i];
    if ((long long)op[i + 1] - d == ae - a && ae - a == be - b) {  // the same columns
        same_columns<V>(oc + d, ov + d, ac + a, av + a, bv + b, ae - a, [s](V x, V y) { return x + s * y; });
        return;
    }
    while (a < ae && b < be) {
        const long long ca = ac[a], cb = bc[b];
        if (ca < cb) {
            oc[d] = ca;
            ov[d] = (V)av[a];
            ++a;
        } else if (cb < ca) {
            oc[d] = cb;
            ov[d] = s * (V)bv[b];
            ++b;
        } else {
            oc[d] = ca;
            ov[d] = (V)av[a] + s * (V)bv[b];
            ++a;
            ++b;
        }
        ++d;
    }
    for (; a < ae; ++a, ++d) {
        oc[d] = ac[a];
        ov[d] = (V)av[a];
    }
    for (; b < be; ++b, ++d) {
        oc[d] = bc[b];
        ov[d] = s * (V)bv[b];
    }
}

// The number of distinct columns of row i of A (sorted columns, possibly repeated: an expanded
// and sorted operand).
template <typename AP, typename AC>
static inline long long dedupe_count(const AP* ap, const AC* ac, long long i) {
    const long long a = ap[i], ae = ap[i + 1];
    long long n = ae > a;
    for (long long q = a + 1; q < ae; ++q) n += ac[q] != ac[q - 1];
    return n;
}

// Row i of A at op[i], each run of equal columns summed into one entry (in order).
template <typename V, typename OC, typename AP, typename AC, typename AV, typename OP>
static inline void dedupe_fill(OC* oc, V* ov, const AP* ap, const AC* ac, const AV* av, const OP* op, long long i,
                               long long cap) {
    (void)cap;
    const long long a = ap[i], ae = ap[i + 1];
    long long d = (long long)op[i] - 1;
    for (long long q = a; q < ae; ++q) {
        if (q == a || ac[q] != ac[q - 1]) {
            ++d;
            oc[d] = ac[q];
            ov[d] = (V)av[q];
        } else {
            ov[d] += (V)av[q];
        }
    }
}

// Row i of a part of a concatenation at the result's cursor d, its columns moved by c0 (one
// memcpy of the indices and one of the values where c0 is 0 and the types agree); returns the
// cursor past it.
template <typename V, typename OC, typename AP, typename AC, typename AV>
static inline long long copy_row(OC* oc, V* ov, const AP* ap, const AC* ac, const AV* av, long long i, long long d,
                                 long long c0, long long cap) {
    (void)cap;
    const long long a = ap[i], n = (long long)ap[i + 1] - a;
    if (c0 == 0 && std::is_same<OC, AC>::value)
        std::memcpy((void*)(oc + d), (const void*)(ac + a), sizeof(AC) * n);
    else
        for (long long q = 0; q < n; ++q) oc[d + q] = (OC)(ac[a + q] + c0);
    if (std::is_same<V, AV>::value)
        std::memcpy((void*)(ov + d), (const void*)(av + a), sizeof(V) * n);
    else
        for (long long q = 0; q < n; ++q) ov[d + q] = (V)av[a + q];
    return d + n;
}

// The size of the intersection of row i of A and of B: the row's length where both hold the
// same columns (one memcmp), else a two-pointer merge without branches.
template <typename AP, typename AC, typename BP, typename BC>
static inline long long intersect_count(const AP* ap, const AC* ac, const BP* bp, const BC* bc, long long i) {
    long long a = ap[i], ae = ap[i + 1], b = bp[i], be = bp[i + 1], n = 0;
    if (same_row_columns(ac, a, ae, bc, b, be)) return ae - a;
    while (a < ae && b < be) {
        const long long ca = ac[a], cb = bc[b];
        n += ca == cb;
        a += ca <= cb;
        b += cb <= ca;
    }
    return n;
}

// Row i of A * B at op[i], the products in V (A's value first). Where the intersection is as
// long as both rows, they hold the same columns: one vector loop.
template <typename V, typename OC, typename AP, typename AC, typename AV, typename BP, typename BC, typename BV,
          typename OP>
static inline void intersect_fill(OC* oc, V* ov, const AP* ap, const AC* ac, const AV* av, const BP* bp,
                                  const BC* bc, const BV* bv, const OP* op, long long i, long long cap) {
    (void)cap;
    long long a = ap[i], ae = ap[i + 1], b = bp[i], be = bp[i + 1], d = op[i];
    if ((long long)op[i + 1] - d == ae - a && ae - a == be - b) {  // the same columns
        same_columns<V>(oc + d, ov + d, ac + a, av + a, bv + b, ae - a, [](V x, V y) { return x * y; });
        return;
    }
    while (a < ae && b < be) {
        const long long ca = ac[a], cb = bc[b];
        if (ca == cb) {
            oc[d] = ca;
            ov[d] = (V)av[a] * (V)bv[b];
            ++d;
        }
        a += ca <= cb;
        b += cb <= ca;
    }
}

}  // namespace sdfgsparse

#endif  // SDFGSPARSE_ROW_UNION_H
