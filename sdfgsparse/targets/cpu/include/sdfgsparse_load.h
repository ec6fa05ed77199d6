// sdfgsparse: how many threads the machine can give a call now (targets/cpu/team.py,
// targets/cpu/entry.py).
//
// OMP_NUM_THREADS says how many threads a parallel loop asks for, not how many cores are free:
// with other processes running, a team's threads are descheduled and its closing barrier
// waits for them a time slice at a time (a 0.3 ms SpMV took 12 ms on a loaded 2-core machine).
// machine_threads() counts the tasks that are running or waiting to run now and are not the
// calling thread's team (the kernel's count in /proc/loadavg, minus the caller and its OpenMP
// workers in state R: workers still spin after a region), and gives a call at most the cores
// of its affinity mask left to it, at least one. Other libraries' threads spinning in this
// process (another OpenMP runtime's team, MKL's) take cores as another process does, and count.
// A reading stands for LOAD_REFRESH_NS; the cores free are the most of the last LOAD_WINDOW
// readings, so that the kernel's own threads, runnable for an instant now and then (one extra
// task in most readings of a quiet VM), do not send calls to one thread: load that lasts is seen
// after LOAD_WINDOW readings (60 ms), and gone at the next reading. A reading reads files of
// /proc held open (/proc/loadavg; the stat of each worker of the caller's team: the caller itself
// runs). Beside another library's spinning threads a reading cost ~100 us (opening the files
// each time, and the caller's own stat): one per 4 ms made an SpMM of 0.5-0.8 ms called between
// torch calls 10-22 % slower (docs/performance.md).
// (Concurrent callers may both take a reading.) SDFGSPARSE_LOAD=ignore, or SDFGSPARSE_TEAM=team
// (always the whole team), read once per library, turns it off. Other systems than Linux: the
// count asked for.
//
// Limit: in a container that sees the host's /proc/loadavg, other containers' tasks count.
#ifndef SDFGSPARSE_LOAD_H
#define SDFGSPARSE_LOAD_H
#include <omp.h>
#include <atomic>
#include <cstdlib>
#include <cstring>
#if defined(__linux__)
#include <fcntl.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <vector>
#define SS_LOAD_LINUX 1
#endif

namespace sdfgsparse {

// how long one reading of the machine's load stands (nanoseconds)
constexpr long long LOAD_REFRESH_NS = 20000000;

static inline bool load_ignored() {
    static const bool ignored = [] {
        const char* v = std::getenv("SDFGSPARSE_LOAD");
        const char* team = std::getenv("SDFGSPARSE_TEAM");
        return (v && !std::strcmp(v, "ignore")) || (team && !std::strcmp(team, "team"));
    }();
    return ignored;
}

#ifdef SS_LOAD_LINUX
static inline long long load_now_ns() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

// a file of /proc opened once and kept (-1 where it cannot be opened); read again from its start
static inline int load_open(const char* path) { return open(path, O_RDONLY | O_CLOEXEC); }

// the first `n` bytes of the file open as `fd`, read from its start (NUL-terminated), or -1
static inline int load_read(int fd, char* buf, int n) {
    if (fd < 0) return -1;
    const ssize_t got = pread(fd, buf, (size_t)(n - 1), 0);
    if (got <= 0) return -1;
    buf[got] = 0;
    return (int)got;
}

// the tasks running or runnable on the machine now: the numerator of "R/T" in /proc/loadavg
static inline long load_running() {
    static const int fd = load_open("/proc/loadavg");
    char buf[128];
    if (load_read(fd, buf, sizeof buf) < 0) return -1;
    const char* slash = std::strchr(buf, '/');
    if (!slash) return -1;
    const char* p = slash;
    while (p > buf && p[-1] != ' ') --p;
    return std::strtol(p, nullptr, 10);
}

// whether the task whose stat is open as `fd` is in state R (the state follows the ')' that
// closes the name)
static inline bool load_task_running(int fd) {
    char buf[256];
    if (load_read(fd, buf, sizeof buf) < 0) return false;
    const char* close_paren = std::strrchr(buf, ')');
    return close_paren && close_paren[1] == ' ' && close_paren[2] == 'R';
}

// The threads of the calling thread's OpenMP team, the caller first, and their stat files held
// open: learnt once per thread (and again when more are asked for) by a parallel region that
// records each member's id. GNU OpenMP keeps a thread's team between regions, so these are the
// threads its next regions run on; spinning after a region, they are the team, not load.
struct LoadTeam {
    std::vector<long> tids;
    std::vector<int> stats;  // (the caller's: not opened)
    void close_all() {
        for (int fd : stats)
            if (fd >= 0) close(fd);
        stats.clear();
    }
    ~LoadTeam() { close_all(); }
};
static inline const LoadTeam& load_team(int wanted) {
    static thread_local LoadTeam team;
    if ((int)team.tids.size() < wanted) {
        std::vector<long> seen((size_t)wanted, 0);
        _Pragma("omp parallel num_threads(wanted)") {
            const int t = omp_get_thread_num();
            if (t < wanted) seen[(size_t)t] = (long)syscall(SYS_gettid);
        }
        team.close_all();
        team.tids.swap(seen);
        team.stats.assign(team.tids.size(), -1);
        for (size_t k = 1; k < team.tids.size(); ++k) {
            char path[64];
            std::snprintf(path, sizeof path, "/proc/self/task/%ld/stat", team.tids[k]);
            if (team.tids[k] > 0) team.stats[k] = load_open(path);
        }
    }
    return team;
}

// the running tasks (state R) among the calling thread's team: the caller (it runs: its stat is
// not read) and its workers in state R
static inline long load_running_here(int wanted) {
    const LoadTeam& team = load_team(wanted);
    long n = 1;
    for (size_t k = 1; k < team.stats.size(); ++k) n += load_task_running(team.stats[k]);
    return n;
}

static inline int load_cores() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        const int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

// the cores left to a team of `wanted` threads now: the process's cores minus the tasks that run
// or wait to run and are not the team (at least 1); 0 where /proc cannot be read
static inline int load_free_cores(int wanted) {
    const long running = load_running();
    if (running < 0) return 0;
    const int cores = load_cores();
    if (running <= 1) return cores;  // (the calling thread itself)
    const long here = load_running_here(wanted);
    const long others = running - (here > 0 ? here : 1);
    const long free = (long)cores - (others > 0 ? others : 0);
    return free >= 1 ? (int)free : 1;
}

// the last LOAD_WINDOW readings of the cores free
constexpr int LOAD_WINDOW = 3;
struct LoadReading {
    std::atomic<long long> until{0};  // when the reading expires (load_now_ns)
    std::atomic<int> next{0};         // the slot of the next reading
    std::atomic<int> seen[LOAD_WINDOW] = {};  // cores free at each reading (0: unknown)
    std::atomic<int> free{0};         // the most of them
};
#endif

// at most `wanted` threads: as many as the machine has cores free now (at least 1)
static inline int machine_threads(int wanted) {
#ifdef SS_LOAD_LINUX
    if (wanted <= 1 || load_ignored() || omp_in_parallel()) return wanted;
    static LoadReading reading;
    const long long now = load_now_ns();
    int free;
    if (now < reading.until.load(std::memory_order_relaxed)) {
        free = reading.free.load(std::memory_order_relaxed);
    } else {
        const int now_free = load_free_cores(wanted);
        const int slot = reading.next.fetch_add(1, std::memory_order_relaxed) % LOAD_WINDOW;
        reading.seen[slot].store(now_free, std::memory_order_relaxed);
        free = now_free;
        for (int k = 0; k < LOAD_WINDOW; ++k) {
            const int v = reading.seen[k].load(std::memory_order_relaxed);
            free = v > free ? v : free;
        }
        reading.free.store(free, std::memory_order_relaxed);
        reading.until.store(now + LOAD_REFRESH_NS, std::memory_order_relaxed);
    }
    return free > 0 && free < wanted ? free : wanted;
#else
    return wanted;
#endif
}

// For the duration of a call: the calling thread's OpenMP thread count lowered to what the
// machine can give now (restored at the end; nothing changes where it can give all of them,
// or inside a parallel region).
class LoadScope {
  public:
    LoadScope() : previous_(0) {
        if (omp_in_parallel()) return;
        const int wanted = omp_get_max_threads();
        const int now = machine_threads(wanted);
        if (now < wanted) {
            previous_ = wanted;
            omp_set_num_threads(now);
        }
    }
    ~LoadScope() {
        if (previous_) omp_set_num_threads(previous_);
    }
    LoadScope(const LoadScope&) = delete;
    LoadScope& operator=(const LoadScope&) = delete;

  private:
    int previous_;
};

}  // namespace sdfgsparse
#endif
