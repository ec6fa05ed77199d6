"""``sdfgsparse bench --busy [N]``: the benchmark again while N other processes keep cores busy.

A machine is rarely quiet: a kernel whose threads wait for each other (a static OpenMP
schedule, a barrier per row block) collapses when one of its cores is taken, and 2-thread
SpMV then ran 4-6x slower than on one thread (DESIGN.md). :func:`spinning` starts a
process that spins in a loop, pinned (``os.sched_setaffinity``) to one core, by default
the last one this process may use (:func:`spin_core`), and stops it when the block ends,
also on an exception or Ctrl-C; the spinner also ends by itself when its parent is gone
(it watches ``os.getppid()``), so no run leaves one behind. :func:`spinners` starts N of
them on the cores :func:`spin_cores` names (the last core first, then downwards, round the
cores again past the first: ``--busy 3`` on two cores puts two on the last one and one beside
the benchmark).

:func:`busy_summary` compares, per kernel and matrix and for each of our systems, the
busy run's time with our own single-thread time on the quiet machine (``own 1-thread``
= that time / the busy time: at least :data:`GOAL_SINGLE`, i.e. a busy core must cost
us no more than running on one thread) and with the fastest peer's busy time
(``vs peer`` = the peer's busy time / ours: at least :data:`GOAL_PEER`).
:func:`format_busy_summary` prints them beside the goals.
"""
import os
import subprocess
import sys
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from typing import Dict, Iterator, List, Optional

from sdfgsparse.bench.report import fastest_peer
from sdfgsparse.bench.results import JUDGED, BenchResult, Result

__all__ = ['Spinner', 'spinning', 'spinners', 'spin_core', 'spin_cores', 'spinning_text', 'BusyRow', 'busy_summary',
           'format_busy_summary', 'GOAL_SINGLE', 'GOAL_PEER']

#: Goal: our busy time at least this fast relative to our own single-thread quiet time.
GOAL_SINGLE = 0.9
#: Goal: our busy time at least this fast relative to the fastest peer's busy time.
GOAL_PEER = 0.8

#: The spinner: a tight loop that checks every few milliseconds that its parent lives.
_SPIN = 'import os, sys\nparent = int(sys.argv[1])\nwhile os.getppid() == parent:\n    for _ in range(100000):\n' \
        '        pass\n'
_STOP_S = 5.0


@dataclass
class Spinner:
    """A running spinner: its process id and the core it is pinned to (None: not pinned,
    where the platform has no ``sched_setaffinity``)."""
    pid: int
    core: Optional[int]


def spin_core() -> Optional[int]:
    """The last core this process may run on (None where affinity is not available)."""
    if not hasattr(os, 'sched_getaffinity'):
        return None
    return max(os.sched_getaffinity(0))


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=_STOP_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def spin_cores(n: int) -> List[Optional[int]]:
    """The cores of ``n`` spinners: this process's cores from the last one downwards, round
    again past the first (None each where affinity is not available)."""
    if n < 1:
        raise ValueError(f'spin_cores: n must be at least 1, got {n}')
    if not hasattr(os, 'sched_getaffinity'):
        return [None] * n
    cores = sorted(os.sched_getaffinity(0), reverse=True)
    return [cores[k % len(cores)] for k in range(n)]


@contextmanager
def spinners(n: int) -> Iterator[List[Spinner]]:
    """``n`` spinners (:func:`spinning`) on :func:`spin_cores`, all stopped when the block
    ends in any way."""
    with ExitStack() as stack:
        yield [stack.enter_context(spinning(core)) for core in spin_cores(n)]


@contextmanager
def spinning(core: Optional[int] = None) -> Iterator[Spinner]:
    """A busy-looping Python process pinned to ``core`` (default :func:`spin_core`) for the
    duration of the block; it is stopped (terminated, killed if it lingers, and reaped)
    when the block ends in any way."""
    if core is None:
        core = spin_core()
    proc = subprocess.Popen([sys.executable, '-I', '-S', '-c', _SPIN, str(os.getpid())], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if core is not None and hasattr(os, 'sched_setaffinity'):
            os.sched_setaffinity(proc.pid, {core})
        yield Spinner(proc.pid, core)
    finally:
        _stop(proc)


@dataclass
class BusyRow:
    """One of our systems on one kernel and matrix: its busy time, its own single-thread
    quiet time and the fastest peer's busy time (seconds; None where not timed)."""
    kernel: str
    matrix: str
    system: str
    busy_s: Optional[float]
    single_s: Optional[float]
    peer: Optional[str] = None
    peer_busy_s: Optional[float] = None

    @property
    def vs_single(self) -> Optional[float]:
        """Single-thread quiet time / busy time (goal: at least :data:`GOAL_SINGLE`)."""
        return self.single_s / self.busy_s if self.busy_s and self.single_s else None

    @property
    def vs_peer(self) -> Optional[float]:
        """The fastest peer's busy time / ours (goal: at least :data:`GOAL_PEER`)."""
        return self.peer_busy_s / self.busy_s if self.busy_s and self.peer_busy_s else None

    def to_dict(self) -> Dict[str, object]:
        return {**asdict(self), 'vs_single': self.vs_single, 'vs_peer': self.vs_peer}


def _rows(result: BenchResult) -> Dict[tuple, Dict[str, Result]]:
    by: Dict[tuple, Dict[str, Result]] = {}
    for r in result.results:
        by.setdefault((r.kernel, r.matrix), {})[r.system] = r
    return by


def busy_summary(busy: BenchResult, single: Optional[BenchResult]) -> List[BusyRow]:
    """A :class:`BusyRow` per kernel, matrix and system of ours in ``busy`` (the busy run),
    with the time of the same system in ``single`` (our single-thread quiet run; None
    where it failed)."""
    single_by = _rows(single) if single is not None else {}
    out = []
    for key, row in _rows(busy).items():
        best = fastest_peer(row)
        for system in JUDGED:
            mine = row.get(system)
            if mine is None:
                continue
            one = single_by.get(key, {}).get(system)
            out.append(BusyRow(key[0], key[1], system, mine.median_s if mine.timed else None,
                               one.median_s if one is not None and one.timed else None,
                               best.system if best else None, best.median_s if best else None))
    return out


def _goal(value: Optional[float], goal: float) -> str:
    if value is None:
        return '-'
    return f'{value:.2f}' + ('' if value >= goal else ' BELOW')


def spinning_text(cores: List[Optional[int]]) -> str:
    """Which processes spun beside a busy run, from their cores (None: not pinned)."""
    named = [c for c in cores if c is not None]
    if len(cores) > 1:
        return f'{len(cores)} other processes spinning' + (f' on cores {", ".join(map(str, named))}' if named else '')
    return 'another process spinning' + (f' on core {named[0]}' if named else '')


def format_busy_summary(rows: List[BusyRow], core=None) -> str:
    """The busy summary as text: a line per row, the goals in the title, ``BELOW`` beside a
    ratio short of its goal, and a last line counting them. ``core``: the spinner's core, or
    the list of the spinners' cores."""
    where = spinning_text(list(core) if isinstance(core, (list, tuple)) else [core])
    head = ('kernel', 'matrix', 'system', 'busy ms', '1-thread ms', f'own 1-thread (>= {GOAL_SINGLE})',
            'fastest peer', f'vs peer (>= {GOAL_PEER})')
    table = [head]
    for r in rows:
        table.append((r.kernel, r.matrix, r.system, '' if r.busy_s is None else f'{r.busy_s * 1e3:.4g}',
                      '' if r.single_s is None else f'{r.single_s * 1e3:.4g}', _goal(r.vs_single, GOAL_SINGLE),
                      r.peer or '', _goal(r.vs_peer, GOAL_PEER)))
    widths = [max(len(t[i]) for t in table) for i in range(len(head))]
    lines = [f'busy summary ({where}): own 1-thread = our single-thread time on the quiet '
             f'machine / our busy time, goal >= {GOAL_SINGLE}; vs peer = the fastest peer\'s busy time / ours, goal '
             f'>= {GOAL_PEER}']
    lines += ['  ' + '  '.join(c.ljust(w) if i < 3 or i == 6 else c.rjust(w) for i, (c, w) in enumerate(zip(t, widths)))
              for t in table]
    below_single = sum(1 for r in rows if r.vs_single is not None and r.vs_single < GOAL_SINGLE)
    below_peer = sum(1 for r in rows if r.vs_peer is not None and r.vs_peer < GOAL_PEER)
    lines.append(f'busy goals: own 1-thread below {GOAL_SINGLE}: {below_single} of '
                 f'{sum(1 for r in rows if r.vs_single is not None)}; vs peer below {GOAL_PEER}: {below_peer} of '
                 f'{sum(1 for r in rows if r.vs_peer is not None)}')
    return '\n'.join(lines)
