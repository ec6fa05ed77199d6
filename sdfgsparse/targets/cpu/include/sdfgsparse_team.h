// sdfgsparse: how many threads one call of a parallel loop runs with
// (targets/cpu/team.py inserts team_begin before the loop and team_end after it).
//
// A loop with little work runs on the calling thread alone: waking the OpenMP team and
// meeting it at the closing barrier costs more than the loop (several microseconds, far
// more when another process holds a core). Above that, each loop site measures the time
// per unit of work with the whole team and with one thread (an average over recent calls)
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
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace sdfgsparse {

// below this many units of work (multiply-adds, about a nanosecond each) a loop runs
// on one thread
constexpr long long TEAM_SERIAL_WORK = 16384;
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
    std::atomic<double> per_work[2];  // average seconds per unit of work: [0] one thread, [1] the team
    std::atomic<long long> calls;
    std::atomic<long long> next_probe;
    std::atomic<long long> interval;
    std::atomic<int> choice;  // 0: one thread, 1: the team
};

// one call, from team_begin to team_end (kept in six int64 slots of the kernel)
struct TeamCall {
    TeamSite* site;
    double t0;
    long long work;
    int previous, threads, which;
    int record;  // 0: not measured, 1: the chosen count (averaged), 2: a first measure, 3: a try of the other
};
static_assert(sizeof(TeamCall) <= 6 * sizeof(std::int64_t), "TeamCall must fit its six slots");

// the thread count of a call: `available` threads (the caller's OpenMP setting), `work` units
static inline TeamCall team_choose(TeamSite& site, long long work, int available, bool nested, TeamPolicy policy) {
    TeamCall c;
    c.site = &site;
    c.t0 = 0;
    c.work = work > 1 ? work : 1;
    c.previous = available;
    c.which = 0;
    c.record = 0;
    if (policy == TEAM_ALWAYS) {
        c.which = 1;
    } else if (policy == TEAM_ADAPTIVE && available > 1 && work >= TEAM_SERIAL_WORK && !nested) {
        const long long n = site.calls.fetch_add(1, std::memory_order_relaxed);
        const double one = site.per_work[0].load(std::memory_order_relaxed);
        const double team = site.per_work[1].load(std::memory_order_relaxed);
        if (n == 0) {
            c.which = 1;  // the first call runs cold (page faults, caches): not measured
        } else if (team == 0.0 || one == 0.0) {
            c.which = team == 0.0 ? 1 : 0;  // measure the team, then one thread
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

// what a call took (`seconds`) updates its site's averages and choice
static inline void team_record(const TeamCall& c, double seconds) {
    if (!c.record) return;
    TeamSite& s = *c.site;
    const double sample = seconds / (double)c.work;
    // a call with the chosen count moves its average a quarter of the way; a first
    // measure or a try of the other count replaces the other's (it may be long outdated)
    const double old = s.per_work[c.which].load(std::memory_order_relaxed);
    s.per_work[c.which].store(c.record == 1 ? 0.75 * old + 0.25 * sample : sample, std::memory_order_relaxed);
    const double one = s.per_work[0].load(std::memory_order_relaxed);
    const double team = s.per_work[1].load(std::memory_order_relaxed);
    if (one == 0.0 || team == 0.0) return;
    const int best = team < one ? 1 : 0;
    const int chosen = s.choice.load(std::memory_order_relaxed);
    const long long n = s.calls.load(std::memory_order_relaxed);
    long long iv = s.interval.load(std::memory_order_relaxed);
    if (c.record == 3 && best == chosen) {  // the try confirmed the choice: try less often
        iv = iv < TEAM_PROBE_MIN ? TEAM_PROBE_MIN : (2 * iv > TEAM_PROBE_MAX ? TEAM_PROBE_MAX : 2 * iv);
    } else if (c.record == 1 && best == chosen && s.next_probe.load(std::memory_order_relaxed) != 0) {
        return;  // nothing changed
    } else {  // a first choice, or a changed one: try the other count again soon
        iv = TEAM_PROBE_MIN;
    }
    s.choice.store(best, std::memory_order_relaxed);
    s.interval.store(iv, std::memory_order_relaxed);
    s.next_probe.store(n + iv, std::memory_order_relaxed);
}

static inline void team_begin(TeamSite& site, long long work, std::int64_t* slots) {
    TeamCall c = team_choose(site, work, omp_get_max_threads(), omp_in_parallel(), team_policy());
    if (c.threads != c.previous) omp_set_num_threads(c.threads);
    c.t0 = omp_get_wtime();
    std::memcpy(slots, &c, sizeof(c));
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
