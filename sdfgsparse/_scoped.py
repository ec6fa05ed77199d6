"""A process-wide setting held while any thread is inside a scope of it."""
import threading
from typing import Callable

__all__ = ['CountedScope']


class CountedScope:
    """A re-entrant, thread-safe context manager: ``first()`` runs when the first user enters
    (no one inside, in any thread), ``last()`` when the last one leaves. For settings that
    only exist process-wide (DaCe's configuration, Python's warning filters)."""

    def __init__(self, first: Callable[[], None], last: Callable[[], None]):
        self._first, self._last = first, last
        self._lock = threading.Lock()
        self.depth = 0

    def __enter__(self):
        with self._lock:
            if self.depth == 0:
                self._first()
            self.depth += 1
        return self

    def __exit__(self, *exc):
        with self._lock:
            self.depth -= 1
            if self.depth == 0:
                self._last()
        return False
