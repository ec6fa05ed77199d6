"""The folder of compiled programs: what is in it, and pruning it (``sdfgsparse cache``).

Once sdfgsparse is imported, DaCe's ``hash`` cache names a program's build folder
``<program>_<content hash>_ss<source fingerprint>`` (``_dace_compat`` patch 8): a change
of the program, of DaCe's compiler settings or of sdfgsparse's own source gives a new
folder, and DaCe never removes the old ones (one checkout had 1,173 folders, 2 GB). Every
process that compiles or loads a folder's program marks the folder as used (patch 8's
compile wrapper sets its modification time), so its age says when it was last used.

:func:`scan` lists the folders; :func:`prune` removes those built by another sdfgsparse
source (``stale``) and, with ``older_than_days``, those of the current source unused for
that long. A folder is removed only while its lock is held (the lock a build holds from
writing the sources to loading the library), so a program being built or loaded by
another process at that moment is skipped, not broken. Folders that sdfgsparse did not
name (no ``_ss<fingerprint>`` suffix: DaCe's own, or another cache setting) are listed
and never removed.
"""
import os
import re
import shutil
import time
from dataclasses import dataclass
from typing import List, Optional

import dace

from sdfgsparse import _dace_compat

__all__ = ['BuildFolder', 'scan', 'prune', 'default_folder']

_OURS = re.compile(r'^(?P<program>.+)_(?P<hash>[0-9a-f]{32})_ss(?P<source>[0-9a-f]{12})$')


@dataclass
class BuildFolder:
    path: str
    program: str          # the SDFG's name ('' where sdfgsparse did not name the folder)
    ours: bool            # named by sdfgsparse (patch 8)
    current: bool         # built from this sdfgsparse source
    size: int             # bytes
    last_used: float      # seconds since the epoch

    @property
    def age_days(self) -> float:
        return max(0.0, (time.time() - self.last_used) / 86400)


def default_folder() -> str:
    """DaCe's build folder (``default_build_folder``, ``.dacecache`` under the working
    directory unless configured)."""
    return os.path.abspath(dace.Config.get('default_build_folder'))


def _size(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def scan(folder: Optional[str] = None) -> List[BuildFolder]:
    """The build folders in ``folder`` (default: :func:`default_folder`), oldest use first."""
    folder = folder or default_folder()
    if not os.path.isdir(folder):
        return []
    source = _dace_compat.source_fingerprint()
    found = []
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if not os.path.isdir(path) or os.path.islink(path):
            continue
        m = _OURS.match(name)
        found.append(BuildFolder(path, m.group('program') if m else '', bool(m),
                                 bool(m) and m.group('source') == source, _size(path), os.stat(path).st_mtime))
    return sorted(found, key=lambda f: (f.last_used, f.path))


def prune(folder: Optional[str] = None, older_than_days: Optional[float] = None, dry_run: bool = False,
          in_use: Optional[List[BuildFolder]] = None, found: Optional[List[BuildFolder]] = None) -> List[BuildFolder]:
    """Remove the stale build folders of ``folder`` (see the module); returns those removed
    (with ``dry_run``: those that would be). A folder whose lock another process holds is
    skipped and reported in ``in_use`` (when a list is given). ``found``: the
    :func:`scan` of ``folder`` when the caller has made it already."""
    if older_than_days is not None and older_than_days < 0:
        raise ValueError(f'older_than_days: must be at least 0, got {older_than_days}')
    removed = []
    for f in scan(folder) if found is None else found:
        if not f.ours:
            continue
        if f.current and (older_than_days is None or f.age_days < older_than_days):
            continue
        if dry_run:
            removed.append(f)
            continue
        lock = _dace_compat._locked(f.path + '.lock')
        if not lock.acquire(blocking=False):
            if in_use is not None:
                in_use.append(f)
            continue
        try:
            shutil.rmtree(f.path)
            removed.append(f)
            os.remove(f.path + '.lock')  # while held: a waiter for it opens the path anew
        finally:
            lock.release()
    return removed
