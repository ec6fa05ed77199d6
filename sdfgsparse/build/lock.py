"""An exclusive file lock (``flock``) that survives the removal of its file."""
import os

__all__ = ['FileLock']


class FileLock:
    """An exclusive ``flock`` on ``path`` for the duration (no lock where there is no
    ``fcntl``). Whoever holds the lock may remove the file (``sdfgsparse cache --prune``
    removes a build folder with its lock file): a waiter that then gets the lock of the
    removed file opens the path again, so two holders never overlap.

    ``acquire(blocking=False)`` returns False instead of waiting when another holds it."""

    def __init__(self, path: str):
        self.path = path
        self.file = None

    def acquire(self, blocking: bool = True) -> bool:
        while True:
            handle = open(self.path, 'a')
            try:
                import fcntl
            except ImportError:
                self.file = handle
                return True
            try:
                fcntl.flock(handle, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                return False
            try:
                current = os.fstat(handle.fileno()).st_ino == os.stat(self.path).st_ino
            except OSError:  # removed while we waited
                current = False
            if current:
                self.file = handle
                return True
            handle.close()

    def release(self):
        if self.file is not None:
            self.file.close()  # releases the lock
            self.file = None

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()
        return False
