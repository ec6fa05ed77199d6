"""``sdfgsparse bench --check``: no sdfgsparse kernel slower than scipy.

scipy.sparse runs on one thread, so a sdfgsparse result (``sdfgsparse`` or, with
``--optimize``, ``sdfgsparse-opt``) slower than scipy's on any kernel and matrix is a
defect whatever the machine. :func:`check_against_scipy` compares the medians of one
:class:`~sdfgsparse.bench.results.BenchResult`; where either side has no timed result
(scipy not among the peers, a result wrong or failed) the pair is *unchecked*: reported,
not a failure (a wrong result of ours is already exit status 1).
:meth:`SpeedCheck.format` is the text the command prints: a pass line, or a block
listing each slower kernel and matrix with both times and their ratio.
"""
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from sdfgsparse.bench.results import JUDGED, BenchResult, Result

__all__ = ['Slower', 'SpeedCheck', 'check_against_scipy', 'REFERENCE']

#: The system every one of ours must not be slower than.
REFERENCE = 'scipy'


@dataclass
class Slower:
    """One of our results slower than scipy's (times in seconds; ``ratio`` = ours / scipy's)."""
    kernel: str
    matrix: str
    system: str
    ours_s: float
    scipy_s: float

    @property
    def ratio(self) -> float:
        return self.ours_s / self.scipy_s


@dataclass
class SpeedCheck:
    """What :func:`check_against_scipy` found: ``slower`` (the failures), ``unchecked``
    (``(kernel, matrix, system, reason)``), ``passed`` (pairs at least as fast as scipy)
    and a ``label`` for the printed text (e.g. ``busy run``)."""
    slower: List[Slower] = field(default_factory=list)
    unchecked: List[Tuple[str, str, str, str]] = field(default_factory=list)
    passed: int = 0
    label: str = ''

    @property
    def ok(self) -> bool:
        """No result of ours slower than scipy's (unchecked pairs do not fail)."""
        return not self.slower

    def format(self) -> str:
        """A pass line, or the loud block of slower results; unchecked pairs after either."""
        where = f' ({self.label})' if self.label else ''
        if self.ok:
            lines = [f'check{where}: PASS: every sdfgsparse result is at least as fast as scipy '
                     f'({self.passed} kernel x matrix pairs checked)']
        else:
            rule = '!' * 78
            rows = [('kernel', 'matrix', 'system', 'ours ms', 'scipy ms', 'ours/scipy')]
            rows += [(s.kernel, s.matrix, s.system, f'{s.ours_s * 1e3:.4g}', f'{s.scipy_s * 1e3:.4g}',
                      f'{s.ratio:.2f}x') for s in self.slower]
            widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
            lines = [rule, f'check{where}: FAIL: {len(self.slower)} sdfgsparse result(s) SLOWER THAN SCIPY '
                     f'(single-threaded); {self.passed} pair(s) at least as fast', rule]
            lines += ['  ' + '  '.join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                      for r in rows]
            lines.append(rule)
        for kernel, matrix, system, why in self.unchecked:
            lines.append(f'check{where}: unchecked: {system} {kernel} on {matrix}: {why}')
        return '\n'.join(lines)


    def summary(self) -> str:
        """One closing line for a run without ``--check`` (the table shows the times): how
        many pairs were at least as fast as scipy, and which were slower, with their ratios."""
        where = f' ({self.label})' if self.label else ''
        judged = self.passed + len(self.slower)
        if not judged:
            return f'against scipy{where}: no pair timed on both sides'
        line = f'against scipy{where}: {self.passed} of {judged} kernel x matrix pairs at least as fast'
        if self.slower:
            line += '; slower: ' + ', '.join(f'{s.kernel} on {s.matrix} ({s.ratio:.2f}x)' for s in self.slower)
        return line


def _why_untimed(r: Optional[Result], system: str) -> str:
    if r is None:
        return f'no {system} result'
    return f'{system} not timed ({r.error or "no time"})'


def check_against_scipy(result: BenchResult, label: str = '') -> SpeedCheck:
    """Compare every timed result of ours in ``result`` with scipy's on the same kernel and
    matrix (see the module docstring)."""
    by: Dict[Tuple[str, str], Dict[str, Result]] = {}
    for r in result.results:
        by.setdefault((r.kernel, r.matrix), {})[r.system] = r
    out = SpeedCheck(label=label)
    for (kernel, matrix), row in by.items():
        ref = row.get(REFERENCE)
        for system in JUDGED:  # sdfgsparse, then sdfgsparse-opt
            mine = row.get(system)
            if mine is None:
                continue
            if not mine.timed:
                out.unchecked.append((kernel, matrix, system, _why_untimed(mine, system)))
            elif ref is None or not ref.timed:
                out.unchecked.append((kernel, matrix, system, _why_untimed(ref, REFERENCE)))
            elif mine.median_s > ref.median_s:
                out.slower.append(Slower(kernel, matrix, system, mine.median_s, ref.median_s))
            else:
                out.passed += 1
    return out
