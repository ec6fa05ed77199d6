"""Interleaved wall-clock timing, its statistics, and the peak memory of one call.

:func:`interleaved` runs every system's call ``warmup`` times, then ``repeat`` rounds in
which each system is called once, so that a slow phase of the machine (another process,
frequency changes) hits all systems alike rather than whichever ran last. The round orders
are the rows of a balanced Latin square (Williams' design, with systems assigned to its
symbols by a seeded shuffle): within the rounds every system follows every other one
equally often. A library's threads keep spinning for a while after its call and slow
whatever runs next, so the predecessor matters: with a rotating order each system had
one fixed predecessor (the optimised and plain sdfgsparse rows of one program differed by
a steady 10% in a quick run), and with a fresh random order per round the counts were
still uneven (over 30 rounds of four systems one followed scipy 14 times, another 6; the
first read 10% slower). The garbage collector is off during the timed rounds; between
two calls (untimed) a generation-0 collection frees what the previous call left in
reference cycles (python-graphblas results are cyclic: without it, ten rounds of
512 MB results piled up to an 18 GB process).

:func:`peak_memory` measures the growth of the resident set during one call: on Linux it
resets the kernel's high-water mark (``/proc/self/clear_refs``) and reads ``VmHWM -
VmRSS``; this sees allocations of C/C++ code (DaCe, MKL, torch) too. Elsewhere it falls
back to :mod:`tracemalloc`, which sees only Python and NumPy allocations. Either is
approximate: memory the allocator already holds is reused without growing the resident
set. (It does not hand free heap memory back first: after one ``malloc_trim(0)``, glibc
returned and refetched the heap's top on every later call, 2026-12-02: scipy's CG step
went from 0.8 to 5.9 ms and ours from 0.30 to 0.56 ms for the rest of the process.)
"""
import gc
import random
import statistics
import time
import tracemalloc
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

__all__ = ['Stats', 'interleaved', 'balanced_orders', 'measure_peak', 'peak_memory', 'NOISE_SPREAD']

# (max - min) / median above this marks a measurement as noisy.
NOISE_SPREAD = 0.5


@dataclass
class Stats:
    """Timings of one system, in seconds; ``error`` when a call raised (timing stopped)."""
    times: List[float] = field(default_factory=list)
    error: Optional[str] = None

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def min(self) -> float:
        return min(self.times)

    @property
    def max(self) -> float:
        return max(self.times)

    @property
    def spread(self) -> float:
        """``(max - min) / median``: 0 on a quiet machine."""
        med = self.median
        return (self.max - self.min) / med if med > 0 else 0.0

    @property
    def noisy(self) -> bool:
        return len(self.times) > 1 and self.spread > NOISE_SPREAD


def balanced_orders(names: List[str], repeat: int, rng: random.Random) -> List[List[str]]:
    """``repeat`` call orders of ``names``: the rows of a Williams balanced Latin square
    (``n`` rows for an even count, ``2 n`` for an odd one), in a shuffled order per pass
    through them; ``names`` are assigned to the square's symbols by ``rng``. Over each whole
    pass every name directly follows every other name equally often."""
    n = len(names)
    if n == 0:
        return [[] for _ in range(repeat)]
    base, lo, hi = [0], 1, n - 1
    while len(base) < n:  # 0, 1, n-1, 2, n-2, ...
        base.append(lo)
        lo += 1
        if len(base) < n:
            base.append(hi)
            hi -= 1
    rows = [[(x + r) % n for x in base] for r in range(n)]
    if n % 2:
        rows += [row[::-1] for row in rows]
    symbols = list(names)
    rng.shuffle(symbols)
    out: List[List[str]] = []
    while len(out) < repeat:
        batch = list(rows)
        rng.shuffle(batch)
        out += [[symbols[x] for x in row] for row in batch]
    return out[:repeat]


def interleaved(calls: Dict[str, Callable[[], object]],
                repeat: int,
                warmup: int = 1,
                clock: Callable[[], float] = time.perf_counter,
                on_call: Optional[Callable[[str], None]] = None) -> Dict[str, Stats]:
    """Time each of ``calls`` ``repeat`` times, interleaved (see the module docstring).

    ``on_call(name)`` is called before each warm-up and timed call (progress display).
    Returns one :class:`Stats` per name. A call that raises gets the exception in
    ``Stats.error`` and is not called again; the others go on."""
    names = list(calls)
    stats = {name: Stats() for name in names}

    def fail(name, exc):  # reported per system, the run goes on
        stats[name].error = f'{type(exc).__name__}: {exc}'.splitlines()[0][:300]
        names.remove(name)

    for name in list(names):
        for _ in range(warmup):
            if on_call:
                on_call(name)
            try:
                calls[name]()
            except Exception as exc:
                fail(name, exc)
                break
    rounds = balanced_orders(names, repeat, random.Random(0))
    enabled = gc.isenabled()
    gc.disable()
    try:
        for order in rounds:
            for name in order:
                if name not in names:
                    continue  # failed in an earlier round
                if on_call:
                    on_call(name)
                fn = calls[name]
                gc.collect(0)
                t0 = clock()
                try:
                    fn()
                except Exception as exc:
                    fail(name, exc)
                    continue
                stats[name].times.append(clock() - t0)
    finally:
        if enabled:
            gc.enable()
    return stats


def _status_kib(key: str) -> Optional[int]:
    try:
        with open('/proc/self/status') as f:
            for line in f:
                if line.startswith(key + ':'):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_high_water_mark() -> bool:
    try:
        with open('/proc/self/clear_refs', 'w') as f:
            f.write('5')
        return True
    except OSError:
        return False


def measure_peak(fn: Callable[[], object]) -> Tuple[object, int]:
    """Call ``fn`` once; returns its result and the bytes by which the process's memory
    grew at most during the call (see the module docstring)."""
    gc.collect()
    if _status_kib('VmHWM') is not None and _reset_high_water_mark():
        base = _status_kib('VmRSS')
        result = fn()
        peak = _status_kib('VmHWM')
        return result, max(0, (peak - base) * 1024)
    tracemalloc.start()
    try:
        result = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, int(peak)


def peak_memory(fn: Callable[[], object]) -> int:
    """Bytes by which the process's memory grew at most during one call of ``fn``."""
    return measure_peak(fn)[1]
