"""A one-line progress bar on the terminal (stderr), redrawn in place; silent when stderr
is not a terminal or when disabled, so logs and pipes stay clean. For work that prints
lines of its own meanwhile (``sdfgsparse demo``), :meth:`Progress.begin` says on a line
of its own which unit starts (``[3/7] sparse_algebra ...``) instead."""
import sys
import time
from typing import Optional, TextIO

__all__ = ['Progress']


class Progress:
    """``Progress(total)``; ``step(label)`` after each unit of work, ``note(label)`` to
    change the label only, ``close()`` at the end; ``begin(label)`` before a unit whose
    output is lines (usually with the bar disabled, ``enabled=False``)."""

    def __init__(self, total: int, enabled: Optional[bool] = None, stream: Optional[TextIO] = None, width: int = 28):
        self.stream = stream or sys.stderr
        self.enabled = (self.stream.isatty() if hasattr(self.stream, 'isatty') else False) if enabled is None else enabled
        self.total = max(1, total)
        self.done = 0
        self.width = width
        self.start = time.perf_counter()
        self._last = 0.0
        self._label = ''

    def _draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self._last < 0.1:
            return
        self._last = now
        filled = int(self.width * self.done / self.total)
        bar = '#' * filled + '.' * (self.width - filled)
        line = f'\r[{bar}] {self.done}/{self.total} {now - self.start:5.0f}s  {self._label}'[:118]
        self.stream.write(line.ljust(120))
        self.stream.flush()

    def note(self, label: str) -> None:
        self._label = label
        self._draw()

    def begin(self, label: str) -> None:
        """Write ``[n/total] label ...`` as a line of its own, ``n`` the unit that starts
        (``done + 1``), whether or not the bar is enabled (it is meant for logs too; a bar
        is cleared first and drawn again below it); ``sys.stdout`` is flushed first, so the
        line lands between the lines printed there."""
        sys.stdout.flush()
        clear = '\r' + ' ' * 120 + '\r' if self.enabled else ''
        self.stream.write(f'{clear}[{min(self.total, self.done + 1)}/{self.total}] {label} ...\n')
        self.stream.flush()
        self._label = label
        self._draw(force=True)

    def step(self, label: str = '') -> None:
        self.done = min(self.total, self.done + 1)
        if label:
            self._label = label
        self._draw(force=True)

    def close(self) -> None:
        if self.enabled:
            self.stream.write('\r' + ' ' * 120 + '\r')
            self.stream.flush()
