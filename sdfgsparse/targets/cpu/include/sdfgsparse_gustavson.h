// sdfgsparse: the row-parallel SpGEMM C = A @ B (A, B, C walked as CSR): the per-call
// workspaces and the two row steps, count and fill, that targets/cpu/gustavson.py calls from
// its row maps (SS_GW_SLOTS is its SLOTS, SS_GW_PREFETCH its PREFETCH).
#ifndef SDFGSPARSE_GUSTAVSON_WORKSPACE
#define SDFGSPARSE_GUSTAVSON_WORKSPACE
#include <omp.h>
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#define SS_GW_MMAP 1
#endif
#define SS_GW_SLOTS 1024
// entries of A's row ahead whose rows of B both row steps prefetch
#define SS_GW_PREFETCH 2
// Workspaces of at least this many bytes are pages of their own (zero when mapped, returned
// to the system when unmapped: the allocator keeps nothing of them); smaller ones come
// from malloc.
#define SS_GW_MAPPED (1LL << 18)
// Byte offsets in one thread's workspace for nc columns; [0, zeroed) starts at zero.
struct ss_gw_layout {
    long long mark, bits, top, zeroed, acc, cols, bytes;
};
static inline ss_gw_layout ss_gw_layout_of(long long nc, long long vbytes, long long ibytes) {
    ss_gw_layout l;
    l.mark = 64;                                             // header: the tags' epoch, the size
    l.bits = (l.mark + 4 * nc + 63) & ~63LL;                 // count: a 32-bit tag per column
    l.top = (l.bits + 8 * ((nc >> 6) + 1) + 63) & ~63LL;     // fill: a bit per column
    l.zeroed = (l.top + 8 * ((nc >> 12) + 1) + 63) & ~63LL;  // a bit per non-empty word of bits
    l.acc = l.zeroed;                                        // the dense accumulator
    l.cols = (l.acc + vbytes * nc + 63) & ~63LL;             // the row's columns (2 spare)
    l.bytes = (l.cols + ibytes * (nc + 2) + 63) & ~63LL;
    return l;
}
static inline char* ss_gw_new(const ss_gw_layout& l) {
    char* w;
#ifdef SS_GW_MMAP
    if (l.bytes >= SS_GW_MAPPED) {
        void* p = mmap(nullptr, (size_t)l.bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw std::bad_alloc();
        w = static_cast<char*>(p);
    } else
#endif
    {
        w = static_cast<char*>(std::malloc((size_t)l.bytes));
        if (!w) throw std::bad_alloc();
        std::memset(w, 0, (size_t)l.zeroed);
    }
    reinterpret_cast<long long*>(w)[1] = l.bytes;
    return w;
}
static inline void ss_gw_free(char* w) {
#ifdef SS_GW_MMAP
    const long long bytes = reinterpret_cast<long long*>(w)[1];
    if (bytes >= SS_GW_MAPPED) { munmap(w, (size_t)bytes); return; }
#endif
    std::free(w);
}
// The kernel's first step: an empty table (one thread: a parallel loop costs more here).
static inline void ss_gw_clear(uint64_t* slots) { std::memset(slots, 0, sizeof(uint64_t) * SS_GW_SLOTS); }
// The calling thread's workspace: the one in its slot of the call's table, else a new one.
static inline char* ss_gw_acquire(uint64_t* slots, const ss_gw_layout& l) {
    const int t = omp_get_thread_num();
    if (t < SS_GW_SLOTS && slots[t]) return reinterpret_cast<char*>(slots[t]);
    char* w = ss_gw_new(l);
    if (t < SS_GW_SLOTS) slots[t] = reinterpret_cast<uint64_t>(w);
    return w;
}
// After a row: frees the workspace of a thread that has no slot.
static inline void ss_gw_done(char* w) {
    if (omp_get_thread_num() >= SS_GW_SLOTS) ss_gw_free(w);
}
// The kernel's last step: frees every workspace of the call.
static inline void ss_gw_release(uint64_t* slots) {
    for (int t = 0; t < SS_GW_SLOTS; ++t)
        if (slots[t]) { ss_gw_free(reinterpret_cast<char*>(slots[t])); slots[t] = 0; }
}
namespace sdfgsparse {

// The size of row i of C: the distinct columns of the rows of B that A's row names, marked in
// the thread's workspace with the call's tag (one 32-bit tag per column: no clearing between
// rows; the tags wrap every 2^32 rows, when the marks are cleared). V, I: C's value and index
// types (they size the workspace, which the fill step shares).
template <typename V, typename I, typename AP, typename AC, typename BP, typename BC>
static inline long long gustavson_count(uint64_t* slots, long long nc, const AP* ap,
                                        const AC* ac, const BP* bp,
                                        const BC* bc, long long i) {
    typedef unsigned int T;
    const ss_gw_layout l = ss_gw_layout_of(nc, sizeof(V), sizeof(I));
    char* w = ss_gw_acquire(slots, l);
    T* __restrict__ mark = reinterpret_cast<T*>(w + l.mark);
    unsigned long long& epoch = *reinterpret_cast<unsigned long long*>(w);
    T tag = (T)++epoch;
    if (tag == 0) {  // the tags wrapped
        std::memset(mark, 0, sizeof(T) * nc);
        epoch = tag = 1;
    }
    const long long qe = ap[i + 1];
    long long cnt = 0;
    for (long long q = ap[i]; q < qe; ++q) {
        if (q + SS_GW_PREFETCH < qe) __builtin_prefetch(bc + bp[ac[q + SS_GW_PREFETCH]]);
        const long long k = ac[q], re = bp[k + 1];
        for (long long r = bp[k]; r < re; ++r) {
            const long long j = bc[r];
            cnt += mark[j] != tag;
            mark[j] = tag;
        }
    }
    ss_gw_done(w);
    return cnt;
}

// Row i of C, written at op[i] in column order: the products accumulated in a dense row of the
// workspace, the columns met kept in a bitmap and in a list; the row then comes out of the
// bitmap where it is dense enough, else from the list, sorted.
template <typename V, typename I, typename AP, typename AC, typename AV, typename BP, typename BC, typename BV,
          typename OP>
static inline void gustavson_fill(uint64_t* slots, long long nc, I* oc, V* ov,
                                  const AP* ap, const AC* ac, const AV* av,
                                  const BP* bp, const BC* bc, const BV* bv,
                                  const OP* op, long long i, long long cap) {
    (void)cap;  // (the result's capacity: targets/cpu/rowwise.py)
    typedef unsigned long long U;
    const ss_gw_layout l = ss_gw_layout_of(nc, sizeof(V), sizeof(I));
    char* w = ss_gw_acquire(slots, l);
    U* __restrict__ bits = reinterpret_cast<U*>(w + l.bits);
    U* __restrict__ top = reinterpret_cast<U*>(w + l.top);
    V* __restrict__ acc = reinterpret_cast<V*>(w + l.acc);
    I* __restrict__ cols = reinterpret_cast<I*>(w + l.cols);
    const long long qe = ap[i + 1];
    long long n = 0, lo = nc, hi = -1;
    for (long long q = ap[i]; q < qe; ++q) {
        if (q + SS_GW_PREFETCH < qe) {
            const long long f = bp[ac[q + SS_GW_PREFETCH]];
            __builtin_prefetch(bc + f);
            __builtin_prefetch(bv + f);
        }
        const long long k = ac[q], re = bp[k + 1];
        const V a = (V)av[q];
        for (long long r = bp[k]; r < re; ++r) {
            const long long j = bc[r];
            const V p = a * (V)bv[r];
            const U m = 1ULL << (j & 63);
            U& b = bits[j >> 6];
            if (!(b & m)) {
                b |= m;
                acc[j] = p;
                cols[n++] = (I)j;
            } else
                acc[j] += p;
        }
    }
    // the row's range (a loop apart: fewer live registers above)
    for (long long x = 0; x < n; ++x) {
        const long long j = cols[x];
        lo = j < lo ? j : lo;
        hi = j > hi ? j : hi;
    }
    I* __restrict__ orow = oc + op[i];
    V* __restrict__ vrow = ov + op[i];
    bool listed = true;  // the columns in order in cols, to be written below
    if (n > 0 && 2 * ((hi >> 6) - (lo >> 6) + 1) <= n) {
        // at least two columns per word of bits in the row's range: the row from every word in
        // it, clearing them
        listed = false;
        long long d = 0;
        for (long long y = lo >> 6; y <= (hi >> 6); ++y) {
            U b = bits[y];
            bits[y] = 0;
            while (b) {
                const long long j = (y << 6) + __builtin_ctzll(b);
                b &= b - 1;
                orow[d] = (I)j;
                vrow[d] = acc[j];
                ++d;
            }
        }
    } else if (n > 0 && (hi >> 12) - (lo >> 12) < 4 * n) {
        // fewer: the columns in order from the non-empty words of bits only (clearing them),
        // found through a bitmap of them (made here: setting it in the loop above costs more);
        // the first two columns of a word without a branch
        for (long long x = 0; x < n; ++x) {
            const long long j = cols[x];
            top[j >> 12] |= 1ULL << ((j >> 6) & 63);
        }
        long long s = 0;
        for (long long x = lo >> 12; x <= (hi >> 12); ++x) {
            U t = top[x];
            top[x] = 0;
            while (t) {
                const long long y = (x << 6) + __builtin_ctzll(t);
                t &= t - 1;
                U b = bits[y];
                bits[y] = 0;
                const long long base = y << 6;
                cols[s++] = (I)(base + __builtin_ctzll(b));
                b &= b - 1;
                cols[s] = (I)(base + __builtin_ctzll(b | (1ULL << 63)));  // kept if there was one
                s += b != 0;
                b &= b - 1;
                while (b) {
                    cols[s++] = (I)(base + __builtin_ctzll(b));
                    b &= b - 1;
                }
            }
        }
    } else {  // a wide range for few columns: sort them
        std::sort(cols, cols + n);
        for (long long x = 0; x < n; ++x) bits[cols[x] >> 6] = 0;
    }
    if (listed)
        for (long long x = 0; x < n; ++x) {
            const I j = cols[x];
            orow[x] = j;
            vrow[x] = acc[j];
        }
    ss_gw_done(w);
}

}  // namespace sdfgsparse
#endif
