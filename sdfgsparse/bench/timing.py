"""Interleaved wall-clock timing, its statistics, and the peak memory of one call.

:func:`interleaved` runs every system's call ``warmup`` times, then times the calls
in an order where the systems alternate, so that a slow phase of the machine (another
process, frequency changes) hits all systems alike rather than whichever ran last. A
library's threads keep spinning for a while after its call and slow whatever runs next,
so the predecessor of a timed call matters: the order repeats an Eulerian circuit of the
complete directed graph on the systems (:func:`call_sequence`), in which every system
follows every other one exactly once per period; each system is timed ``repeat`` times
(``n - 1`` per period for ``n`` systems; the last period is cut short). A fixed or random round order
gave uneven predecessors, the same for every matrix of a run (the seed is fixed), and
with it a steady bias: ``docs/performance.md`` has the figures. The garbage collector is
off during the timed calls; between two calls (untimed) a generation-0 collection frees
what the previous call left in reference cycles (python-graphblas results are cyclic:
without it, ten rounds of 512 MB results piled up to an 18 GB process).

:func:`peak_memory` measures the growth of the resident set during one call: on Linux it
resets the kernel's high-water mark (``/proc/self/clear_refs``) and reads ``VmHWM -
VmRSS``; this sees allocations of C/C++ code (DaCe, MKL, torch) too. Elsewhere it falls
back to :mod:`tracemalloc`, which sees only Python and NumPy allocations. Either is
approximate: memory the allocator already holds is reused without growing the resident
set. (It does not hand free heap memory back first: after one ``malloc_trim(0)`` every
later call of some systems ran slower for the rest of the process; see
``docs/performance.md``.)
"""
import gc
import random
import statistics
import time
import tracemalloc
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

__all__ = ['Stats', 'interleaved', 'call_sequence', 'measure_peak', 'peak_memory', 'NOISE_SPREAD']

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


def call_sequence(names: List[str], repeat: int, rng: random.Random) -> List[str]:
    """The order of the timed calls: repeated periods of an Eulerian circuit of the complete
    directed graph on ``names`` (names assigned to its vertices by ``rng``), so that over
    each period every name directly follows every other name exactly once, the period's
    boundary included; each name is called ``n - 1`` times per period (once for a single
    name), and the periods repeat until each has ``repeat`` calls (the last one cut
    there)."""
    n = len(names)
    if n == 0 or repeat <= 0:
        return []
    if n == 1:
        return list(names) * repeat
    order = list(names)
    rng.shuffle(order)
    # Hierholzer's algorithm on the complete digraph (every ordered pair an edge)
    todo = {a: [b for b in reversed(order) if b != a] for a in order}
    stack, circuit = [order[0]], []
    while stack:
        v = stack[-1]
        if todo[v]:
            stack.append(todo[v].pop())
        else:
            circuit.append(stack.pop())
    period = circuit[::-1][:-1]  # first == last: drop the closing vertex
    seq, count = [], dict.fromkeys(names, 0)
    for name in period * -(-repeat // (n - 1)):
        if count[name] < repeat:  # the last period is cut where a name has its calls
            count[name] += 1
            seq.append(name)
    return seq


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
    sequence = call_sequence(names, repeat, random.Random(0))
    enabled = gc.isenabled()
    gc.disable()
    try:
        for name in sequence:
            if name not in names:
                continue  # failed earlier
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
