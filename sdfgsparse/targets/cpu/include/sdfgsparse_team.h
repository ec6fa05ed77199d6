// sdfgsparse: how many threads one call of a parallel loop runs with
// (targets/cpu/team.py inserts team_begin before the loop and team_end after it).
//
// A loop with little work runs on the calling thread alone: waking the OpenMP team and
// meeting it at the closing barrier costs more than the loop (several microseconds, far
// more when another process holds a core). Above that, each loop site measures, per class of
// call shape (TeamSites), the time per unit of work with the whole team and with one thread
// (the geometric mean of recent calls)
// and runs with the faster; now and then a call tries the other count, so a site follows
// the cores actually free: when another process takes a core, a team whose barrier waits
// for a descheduled thread becomes slower than one thread and the site falls back to one
// thread, and back to the team when the core is free again. The thread count is the
// calling thread's OpenMP setting, restored after the loop (torch and other libraries
// read it too).
#ifndef SDFGSPARSE_TEAM_H
#define SDFGSPARSE_TEAM_H
#include <omp.h>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "sdfgsparse_load.h"

namespace sdfgsparse {

// below this many units of work (multiply-adds, about a nanosecond each: 20-30 us) a loop
// runs on one thread: a team gained 3 us of 19 on a quiet machine (SpMV, 10,000 entries)
// and lost 10-60 us with another process, or another library's spinning threads, on a core
constexpr long long TEAM_SERIAL_WORK = 32768;
// from this many units of work (tens of milliseconds on one thread) a loop always runs with the
// team, unmeasured: a barrier's wait for a descheduled thread is small beside such a loop
// (rows are taken in dynamic chunks: the thread that runs takes more of them), while each
// measuring call with one thread costs the whole loop again (a 2:4 MLP training step of 1.4 s
// took 2.1 s while its sites measured)
constexpr long long TEAM_ALWAYS_WORK = 1LL << 26;
// calls between tries of the count not chosen: starts here, doubles while the tries
// confirm the choice, up to TEAM_PROBE_MAX
constexpr long long TEAM_PROBE_MIN = 16, TEAM_PROBE_MAX = 1024;

// SDFGSPARSE_TEAM (read once per library): "adaptive" (the default: as above), "team"
// (always the whole team, a plain OpenMP loop) or "one" (always the calling thread alone)
enum TeamPolicy { TEAM_ADAPTIVE, TEAM_ALWAYS, TEAM_ONE };
static inline TeamPolicy team_policy() {
    static const TeamPolicy policy = [] {
        const char* v = std::getenv("SDFGSPARSE_TEAM");
        if (v && !std::strcmp(v, "team")) return TEAM_ALWAYS;
        if (v && !std::strcmp(v, "one")) return TEAM_ONE;
        return TEAM_ADAPTIVE;
    }();
    return policy;
}

// what one loop site has measured (a static of the generated library, zero at load;
// calls from several threads update it without locks: a lost update only delays a choice)
struct TeamSite {
    // the logarithms of the last TEAM_SAMPLES times per unit of work of each count, [0] one
    // thread, [1] the team, and their mean (a geometric mean of the times): what a call
    // typically costs, moved by the calls that another process or another library's
    // spinning threads hold up when they are frequent, not by one now and then
    std::atomic<double> samples[2][8];
    std::atomic<int> filled[2], next[2];
    std::atomic<double> per_work[2];
    std::atomic<int> known;             // bit 0: [0] measured, bit 1: [1] measured
    std::atomic<long long> calls;
    std::atomic<long long> next_probe;  // the call that tries the other count
    std::atomic<long long> interval;    // calls between tries
    std::atomic<long long> since;       // the call that made the current choice
    std::atomic<int> choice;            // 0: one thread, 1: the team
};
constexpr int TEAM_SAMPLES = 8;

// one call, from team_begin to team_end (kept in six int64 slots of the kernel)
struct TeamCall {
    TeamSite* site;
    double t0;
    long long work;
    int previous, threads, which;
    int record;  // 0: not measured, 1: the chosen count, 2: a first measure, 3: a try of the other
};
static_assert(sizeof(TeamCall) <= 6 * sizeof(std::int64_t), "TeamCall must fit its six slots");

// a try replaces the choice only when it is 10% faster (so noise does not flip it): log(0.9)
constexpr double TEAM_MARGIN = -0.10536051565782628;

// the thread count of a call: `available` threads (the caller's OpenMP setting), `work` units
static inline TeamCall team_choose(TeamSite& site, long long work, int available, bool nested, TeamPolicy policy) {
    TeamCall c;
    c.site = &site;
    c.t0 = 0;
    c.work = work > 1 ? work : 1;
    c.previous = available;
    c.which = 0;
    c.record = 0;
    if (policy == TEAM_ALWAYS || (policy == TEAM_ADAPTIVE && available > 1 && work >= TEAM_ALWAYS_WORK && !nested)) {
        c.which = 1;
    } else if (policy == TEAM_ADAPTIVE && available > 1 && work >= TEAM_SERIAL_WORK && !nested) {
        const long long n = site.calls.fetch_add(1, std::memory_order_relaxed);
        if (n == 0) {
            c.which = 1;  // the first call runs cold (page faults, caches): not measured
        } else if (n <= 4 || site.known.load(std::memory_order_relaxed) != 3) {
            c.which = (int)(n & 1);  // measure the team and one thread twice each, alternating
            c.record = 2;
        } else {
            c.which = site.choice.load(std::memory_order_relaxed);
            c.record = 1;
            if (n >= site.next_probe.load(std::memory_order_relaxed)) {  // try the other count
                c.which = 1 - c.which;
                c.record = 3;
            }
        }
    }
    c.threads = c.which ? available : 1;
    return c;
}

static inline void team_choose_now(TeamSite& s, int choice, long long n, long long interval) {
    if (interval < TEAM_PROBE_MIN) interval = TEAM_PROBE_MIN;
    if (interval > TEAM_PROBE_MAX) interval = TEAM_PROBE_MAX;
    if (choice != s.choice.load(std::memory_order_relaxed)) s.since.store(n, std::memory_order_relaxed);
    s.choice.store(choice, std::memory_order_relaxed);
    s.interval.store(interval, std::memory_order_relaxed);
    s.next_probe.store(n + interval, std::memory_order_relaxed);
}

// what a call took (`seconds`) updates its site's samples and choice:
// - a call with the chosen count joins its samples; when their mean makes the choice
//   slower than the other count, the other is chosen, and tried again soon if the
//   choice had held for a while (the machine changed), later if it had just been made (a try
//   that won by chance: when another process holds a core, the team is now fast, now
//   milliseconds slow);
// - a try replaces the other count's samples (they may be long outdated) and takes over when
//   it is clearly faster; a try that confirms the choice makes the next try twice as late.
static inline void team_record(const TeamCall& c, double seconds) {
    if (!c.record) return;
    TeamSite& s = *c.site;
    const double sample = std::log((seconds > 1e-9 ? seconds : 1e-9) / (double)c.work);
    const int w = c.which;
    if (c.record == 3) s.filled[w].store(0, std::memory_order_relaxed);  // a try: the old samples are outdated
    const int slot = s.next[w].fetch_add(1, std::memory_order_relaxed) % TEAM_SAMPLES;
    s.samples[w][slot].store(sample, std::memory_order_relaxed);
    int filled = s.filled[w].load(std::memory_order_relaxed);
    if (filled < TEAM_SAMPLES) s.filled[w].store(++filled, std::memory_order_relaxed);
    // the mean of the newest `filled` logarithms (two first measures: the faster, as one may
    // have paid page faults of a new result)
    double sum = 0, least = 0;
    for (int k = 0; k < filled; ++k) {
        const double v = s.samples[w][((slot - k) % TEAM_SAMPLES + TEAM_SAMPLES) % TEAM_SAMPLES].load(
            std::memory_order_relaxed);
        sum += v;
        least = k == 0 || v < least ? v : least;
    }
    s.per_work[w].store(c.record == 2 ? least : sum / filled, std::memory_order_relaxed);
    s.known.fetch_or(1 << w, std::memory_order_relaxed);
    if (s.known.load(std::memory_order_relaxed) != 3) return;
    const double per[2] = {s.per_work[0].load(std::memory_order_relaxed), s.per_work[1].load(std::memory_order_relaxed)};
    const long long n = s.calls.load(std::memory_order_relaxed);
    const int chosen = s.choice.load(std::memory_order_relaxed);
    const long long iv = s.interval.load(std::memory_order_relaxed);
    if (c.record == 2) {  // the first choice (again after each of the first measures)
        team_choose_now(s, per[1] < per[0] ? 1 : 0, n, TEAM_PROBE_MIN);
    } else if (c.record == 3) {
        if (per[c.which] < per[chosen] + TEAM_MARGIN) {
            team_choose_now(s, c.which, n, iv);
        } else {
            team_choose_now(s, chosen, n, 2 * iv);
        }
    } else if (per[chosen] > per[1 - chosen]) {  // the choice got slower than the other count
        const bool held = n - s.since.load(std::memory_order_relaxed) > iv;
        team_choose_now(s, 1 - chosen, n, held ? TEAM_PROBE_MIN : 2 * iv);
    }
}

// The sites of one loop: one per class of call shape, so that a call's times are compared
// only with those of calls of its own class (its rows, its work per entry and its entries,
// each rounded down to a power of two). One program runs a loop on operands of very different
// shapes (the 13 pointwise layers of a MobileNet share one SpMM program: 49 to 12,544 dense
// columns), whose times per unit of work differ by more than a team gains; one site for all
// of them compared one layer's time with one thread against another layer's with the team,
// and chose one thread for the whole stack (1.7x slower; docs/performance.md).
// TEAM_CLASSES sites, looked up by the class's hash over TEAM_PROBES neighbours; a class that
// finds none of them free or its own takes the first over (its samples start afresh).
constexpr int TEAM_CLASSES = 64, TEAM_PROBES = 4;
struct TeamSites {
    TeamSite site[TEAM_CLASSES];
    std::atomic<long long> key[TEAM_CLASSES];  // the class held (0: free)
};
static inline int team_log2(long long v) { return v > 1 ? 63 - __builtin_clzll((unsigned long long)v) : 0; }
static inline void team_reset(TeamSite& s) {
    for (int w = 0; w < 2; ++w) {
        for (int k = 0; k < TEAM_SAMPLES; ++k) s.samples[w][k].store(0, std::memory_order_relaxed);
        s.filled[w].store(0, std::memory_order_relaxed);
        s.next[w].store(0, std::memory_order_relaxed);
        s.per_work[w].store(0, std::memory_order_relaxed);
    }
    s.known.store(0, std::memory_order_relaxed);
    s.calls.store(0, std::memory_order_relaxed);
    s.next_probe.store(0, std::memory_order_relaxed);
    s.interval.store(0, std::memory_order_relaxed);
    s.since.store(0, std::memory_order_relaxed);
    s.choice.store(0, std::memory_order_relaxed);
}
// the site of the class of a call over `entries` stored entries, `scale` units of work each,
// and `rows` rows (concurrent callers may race for a free site: a lost claim shares a site)
static inline TeamSite& team_site(TeamSites& sites, long long entries, long long scale, long long rows) {
    const long long key = 1 + team_log2(rows) + 64LL * team_log2(scale) + 4096LL * team_log2(entries);
    const int h = (int)(((unsigned long long)key * 0x9E3779B97F4A7C15ULL) >> 58);  // 6 bits: TEAM_CLASSES
    for (int k = 0; k < TEAM_PROBES; ++k) {
        const int i = (h + k) % TEAM_CLASSES;
        long long held = sites.key[i].load(std::memory_order_relaxed);
        if (held == key) return sites.site[i];
        if (held == 0 && sites.key[i].compare_exchange_strong(held, key, std::memory_order_relaxed))
            return sites.site[i];
        if (held == key) return sites.site[i];  // claimed by another caller for this class
    }
    team_reset(sites.site[h]);
    sites.key[h].store(key, std::memory_order_relaxed);
    return sites.site[h];
}

static inline void team_begin(TeamSites& sites, long long entries, long long scale, long long rows,
                              std::int64_t* slots) {
    TeamSite& site = team_site(sites, entries, scale, rows);
    // the threads asked for, as many as the machine can give now (sdfgsparse_load.h)
    const int asked = omp_get_max_threads();
    TeamCall c = team_choose(site, entries * scale + rows, machine_threads(asked), omp_in_parallel(), team_policy());
    c.previous = asked;
    if (c.threads != c.previous) omp_set_num_threads(c.threads);
    c.t0 = omp_get_wtime();
    std::memcpy(slots, &c, sizeof(c));
}

// the sites of one loop of one kernel library: `SITE` names the loop (a hash the kernel
// builder computes from the kernel's and the state's names; static inline: one per library)
template <unsigned long long SITE> static inline TeamSites& team_sites() {
    static TeamSites sites;
    return sites;
}
template <unsigned long long SITE>
static inline void team_begin(long long entries, long long scale, long long rows, std::int64_t* slots) {
    team_begin(team_sites<SITE>(), entries, scale, rows, slots);
}

static inline void team_end(const std::int64_t* slots) {
    TeamCall c;
    std::memcpy(&c, slots, sizeof(c));
    const double seconds = omp_get_wtime() - c.t0;
    if (c.threads != c.previous) omp_set_num_threads(c.previous);
    team_record(c, seconds);
}

}  // namespace sdfgsparse
#endif
