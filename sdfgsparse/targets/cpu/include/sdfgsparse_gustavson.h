// sdfgsparse: per-call workspaces of the row-parallel SpGEMM (targets/cpu/gustavson.py, which
// includes this header in its kernels; SS_GW_SLOTS is its SLOTS)
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
#endif
