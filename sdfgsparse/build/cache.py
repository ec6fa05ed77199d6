"""The folder of compiled programs: building into it safely, what is in it, and pruning it
(``sdfgsparse cache``).

Once sdfgsparse is imported, DaCe's ``hash`` cache names a program's build folder
``<program>_<content hash>_ss<source fingerprint>`` (:mod:`sdfgsparse.build.folder`): a change
of the program, of DaCe's compiler settings or of sdfgsparse's own source gives a new
folder, and DaCe never removes the old ones (one checkout had 1,173 folders, 2 GB). Every
process that compiles or loads a folder's program marks the folder as used (the
compile wrapper sets its modification time), so its age says when it was last used.

**Complete builds.** ``make`` trusts file times, so a build killed while linking left a
library (0 bytes, or half written) that every later process loaded: "Could not load
library" with an empty reason, or SIGBUS/SIGSEGV. The build folder's compile wrapper builds through :func:`build`,
under the folder's lock:

* before DaCe builds, each ``lib*.so`` of ``<folder>/build`` is checked against the
  folder's build record (``build/.ss-complete``: size and SHA-256 of every library, written
  after a build that succeeded); a library that does not match (or has no record) is
  removed, so ``make`` links it again. While a build runs, ``build/.ss-building`` marks it:
  found at the start of a build (the last one was cut short, possibly inside the
  compiler), or with no record at all, the object files are removed too, so ``make``
  compiles them again;
* after the build (and the load) succeeded, the record is written and the marker removed;
* a library that still fails to load is removed with the object files and built once more;
  if it fails again, :class:`BuildCacheError` names the folder and the reason.

**Warm loads.** The record also holds the size and SHA-256 of ``program.sdfg``, the SDFG
as DaCe's code generation left it (DaCe writes it beside the sources). A folder whose
record, libraries and ``program.sdfg`` all agree is loaded without generating code again:
the SDFG is read from that file and the library loaded, as DaCe's own
``load_precompiled_sdfg`` does (:func:`load_complete`), instead of code generation and
CMake's check (figures: docs/performance.md). Anything that does not agree, a
library this process has loaded already (DaCe's path builds a renamed copy then; loading
the same library again through its loader crashed), or a load that fails takes the build
path above.

**Read-only caches.** Where the lock file cannot be created (a read-only file system or
folder: no lock is taken then), or the folder (or its ``build``) is not writable, a folder
that holds a complete build of the program is used without writing anything there: the
library and its loader stub are copied to a private temporary folder (removed at exit),
the copies checked against the record, and the library loaded from there (DaCe's loader
copies a library already loaded beside itself, which a read-only folder refuses). CMake
does not run; code is still generated, in memory, because DaCe hands the loader the SDFG
as code generation left it (its source maps go to the private folder). A folder without a
complete build raises :class:`BuildCacheError` naming it. Nothing checks that the
generated code still matches the folder's sources: the folder's name (the content hash)
stands for it.

**Parsed kernels.** Versions of sdfgsparse that built cpu kernels by parsing generated
source kept them in the folder :data:`KERNELS` beside the build folders; kernels are SDFGs
built directly now, nothing writes there, and pruning removes the folder.

**A full disk.** A write that fails for want of space (``ENOSPC``, or ``EDQUOT``: a
quota) anywhere in a build — DaCe's code generation, CMake or the compiler (their output
says so), the build marker or record, the lock file, the private copy of a read-only
build — raises :class:`NoSpaceError` (a :class:`BuildCacheError`) naming the folder that
needs space, instead of a raw ``OSError`` or a page of compiler output. What the build
left unfinished is a cut-short build as above: once there is space, the next call builds
it again.

**Listing and pruning.** :func:`scan` lists the folders with their state: ``ok``,
``broken`` (with the reason: ``no library``, ``libX.so is 0 bytes``, ``libX.so does not
match its build record`` …), ``in use`` (another process holds the lock: it may be
building) or ``unchecked`` (not named by sdfgsparse). :func:`prune` removes broken folders,
those built by another sdfgsparse source (``stale``) and, with ``older_than_days``, those of
the current source unused for that long. A folder is removed only while its lock is held
(the lock a build holds from writing the sources to loading the library), so a program
being built or loaded by another process at that moment is skipped, not broken; a broken
folder is checked again under the lock (another process may have rebuilt it meanwhile).
Folders that sdfgsparse did not name (no ``_ss<fingerprint>`` suffix: DaCe's own, or
another cache setting) are listed and never removed.
"""
import atexit
import copy
import errno
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

import dace

from sdfgsparse import errors
from sdfgsparse.build.lock import FileLock
from sdfgsparse.build.naming import source_fingerprint
from sdfgsparse._warnings import benign_dace_warnings

__all__ = [
    'BuildFolder', 'BuildCacheError', 'LibraryLoadError', 'NoSpaceError', 'no_space', 'scan', 'prune', 'default_folder',
    'problem'
]

_OURS = re.compile(r'^(?P<program>.+)_(?P<hash>[0-9a-f]{32})_ss(?P<source>[0-9a-f]{12})$')
RECORD = '.ss-complete'    # in <folder>/build: {"libraries": {file: {"size": bytes, "sha256": hex}},
#                            "program": {"size": bytes, "sha256": hex}} (PROGRAM's)
PROGRAM = 'program.sdfg'   # in <folder>: the SDFG after code generation (written by DaCe)
BUILDING = '.ss-building'  # in <folder>/build while a build runs
_OBJECTS = ('.o', '.obj')


class BuildCacheError(RuntimeError):
    """A build folder that cannot be used; the message names it and says why."""


class LibraryLoadError(BuildCacheError):
    """A built library that DaCe could not load (``library``: its path; ``reason``: DaCe's
    error)."""

    def __init__(self, library: str, reason: BaseException):
        self.library, self.reason = library, reason
        super().__init__(f'{library}: the library cannot be loaded: {type(reason).__name__}: {reason}')


class NoSpaceError(BuildCacheError):
    """A build that ran out of disk space (or quota) in ``folder``."""

    def __init__(self, folder: str, detail: str):
        self.folder = folder
        super().__init__(f'{folder}: no space left on the device to build there ({detail}); free space (e.g. '
                         f'sdfgsparse cache --prune removes stale builds) and call again: the next call builds what '
                         f'this one left unfinished')


#: errno values of a full disk or an exhausted quota, and how tools' output says them
_FULL = tuple(e for e in (errno.ENOSPC, getattr(errno, 'EDQUOT', None)) if e is not None)
_FULL_TEXT = ('No space left on device', 'Disk quota exceeded')


def no_space(exc: BaseException, folder: str) -> Optional[NoSpaceError]:
    """The :class:`NoSpaceError` for ``exc`` when it says the disk (or quota) is full: an
    ``OSError`` with that errno, or DaCe's compiler or CMake failure (or the FPGA
    C-simulation's compiler failure) whose output says so;
    None for anything else."""
    if isinstance(exc, OSError):
        if exc.errno not in _FULL:
            return None
        return NoSpaceError(folder, f'{exc.strerror or exc}' + (f': {exc.filename}' if exc.filename else ''))
    from dace.codegen import exceptions as cgx
    if not isinstance(exc, (cgx.CompilationError, cgx.CompilerConfigurationError, errors.DeviceError)):
        return None  # (DeviceError: the FPGA C-simulation's compiler, targets/fpga/csim.py)
    text = str(exc)
    line = next((ln.strip() for ln in text.splitlines() if any(t in ln for t in _FULL_TEXT)), None)
    if line is None:
        return None
    return NoSpaceError(folder, f'the compiler says: {line[:300]}')


@dataclass
class BuildFolder:
    path: str
    program: str          # the SDFG's name ('' where sdfgsparse did not name the folder)
    ours: bool            # named by sdfgsparse (build/folder.py)
    current: bool         # built from this sdfgsparse source
    size: int             # bytes
    last_used: float      # seconds since the epoch
    status: str = 'ok'    # 'ok', 'broken', 'in use' (another process holds its lock), 'unchecked' (not ours)
    reason: str = ''      # why broken

    @property
    def age_days(self) -> float:
        return max(0.0, (time.time() - self.last_used) / 86400)


#: The folder where earlier versions kept parsed cpu kernels, inside the build folder; not a
#: build folder (pruning removes it).
KERNELS = 'sdfgsparse-kernels'


def default_folder() -> str:
    """DaCe's build folder (``default_build_folder``, ``.dacecache`` under the working
    directory unless configured)."""
    return os.path.abspath(dace.Config.get('default_build_folder'))


# ---------------------------------------------------------------- the build record
def _libraries(build: str) -> List[str]:
    """The libraries in ``build`` (``lib*.so``; not the ``lib*.so_`` copies DaCe's loader makes)."""
    ext = '.' + dace.Config.get('compiler', 'library_extension')
    try:
        names = os.listdir(build)
    except OSError:
        return []
    found = [n for n in names if n.startswith('lib') and n.endswith(ext) and os.path.isfile(os.path.join(build, n))]
    return sorted(found, key=lambda n: (n.startswith('libdacestub_'), n))  # the program's first


def _digest(path: str) -> Tuple[int, str]:
    h, size = hashlib.sha256(), 0
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            h.update(block)
            size += len(block)
    return size, h.hexdigest()


def _record_content(build: str) -> dict:
    """The build record of ``build`` as written (see RECORD); raises OSError / ValueError."""
    with open(os.path.join(build, RECORD)) as f:
        return json.load(f)


def _program_libraries(folder: str, name: str) -> Tuple[str, str]:
    """The paths of program ``name``'s library and of DaCe's loader stub in ``folder``."""
    from dace.codegen import compiler
    library = compiler.get_binary_name(folder, name)
    ext = dace.Config.get('compiler', 'library_extension')
    return library, os.path.join(os.path.dirname(library), f'libdacestub_{name}.{ext}')


def _read_record(build: str) -> Optional[Dict[str, dict]]:
    try:
        libraries = _record_content(build)['libraries']
        if all(isinstance(e['size'], int) and isinstance(e['sha256'], str) for e in libraries.values()):
            return libraries
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    return None


def _library_problem(build: str, name: str, record: Optional[Dict[str, dict]]) -> str:
    """Why ``build/name`` is not a complete library by ``record`` ('' when it is)."""
    path = os.path.join(build, name)
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        return f'{name} is missing'
    if size == 0:
        return f'{name} is 0 bytes'
    entry = (record or {}).get(name)
    if entry is None:
        return f'{name} has no build record (its build did not finish)'
    if size != entry['size'] or _digest(path) != (entry['size'], entry['sha256']):
        return f'{name} does not match its build record'
    return ''


def problem(folder: str, names: Optional[List[str]] = None) -> str:
    """Why ``folder`` does not hold a complete build ('' when it does): of the libraries
    ``names`` (file names in ``<folder>/build``), or of every library there and in its
    record."""
    build = os.path.join(folder, 'build')
    present = _libraries(build)
    if names is None and not present:
        return 'no library'
    record = _read_record(build)
    for name in names if names is not None else present + sorted(set(record or ()) - set(present)):
        why = _library_problem(build, name, record)
        if why:
            return why
    return ''


def _remove(path: str, folder: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise BuildCacheError(f'{folder}: cannot remove {os.path.relpath(path, folder)} of an unfinished or '
                              f'damaged build ({exc}); remove the folder') from exc


def _remove_objects(build: str, folder: str) -> None:
    for root, _, files in os.walk(os.path.join(build, 'CMakeFiles')):
        for f in files:
            if f.endswith(_OBJECTS):
                _remove(os.path.join(root, f), folder)


def _prepare(folder: str) -> None:
    """Before a build, under the lock: remove what a cut-short or damaged build left, and
    mark the build as running."""
    build = os.path.join(folder, 'build')
    if not os.path.isdir(build):  # a first build: one cut short leaves no record
        return
    record = _read_record(build)
    cut_short = record is None or os.path.exists(os.path.join(build, BUILDING))
    for name in _libraries(build):
        if _library_problem(build, name, record):
            _remove(os.path.join(build, name), folder)
    if cut_short:
        _remove_objects(build, folder)
    with open(os.path.join(build, BUILDING), 'w'):
        pass


def _discard(folder: str) -> None:
    """Every library and object file of ``folder``: the next build compiles and links anew."""
    build = os.path.join(folder, 'build')
    for name in _libraries(build):
        _remove(os.path.join(build, name), folder)
    _remove_objects(build, folder)


def _record(folder: str) -> None:
    """After a build that succeeded, under the lock: record its libraries and its
    ``program.sdfg``, drop the marker."""
    build = os.path.join(folder, 'build')
    libraries = {}
    for name in _libraries(build):
        size, sha = _digest(os.path.join(build, name))
        libraries[name] = {'size': size, 'sha256': sha}
    content = {'libraries': libraries}
    try:
        size, sha = _digest(os.path.join(folder, PROGRAM))
        content['program'] = {'size': size, 'sha256': sha}
    except OSError:
        pass
    tmp = os.path.join(build, RECORD + '.tmp')
    with open(tmp, 'w') as f:
        json.dump(content, f, indent=1, sort_keys=True)
    os.replace(tmp, os.path.join(build, RECORD))
    _remove(os.path.join(build, BUILDING), folder)


def build(folder: str, compile_once: Callable[[], object]):
    """Run ``compile_once`` (DaCe's ``SDFG.compile`` for ``folder``) while the caller holds
    the folder's lock: remove what a cut-short or damaged build left first, rebuild once a
    library that fails to load, record the build when it succeeded (see the module); a
    full disk is a :class:`NoSpaceError`."""
    try:
        _prepare(folder)
        with benign_dace_warnings():  # (code generation's remarks on what sdfgsparse builds)
            try:
                result = compile_once()
            except LibraryLoadError:
                _discard(folder)
                try:
                    result = compile_once()
                except LibraryLoadError as again:
                    raise BuildCacheError(f'{folder}: {os.path.basename(again.library)} was built again and still '
                                          f'cannot be loaded ({type(again.reason).__name__}: {again.reason})') from again
        _record(folder)
    except Exception as exc:
        full = no_space(exc, folder)
        if full is None:
            raise
        raise full from exc
    return result


def intact(folder: str, name: str) -> bool:
    """Whether ``folder`` holds a complete build of the program ``name`` (its libraries
    match the build record, and no build is marked as running)."""
    try:
        library, stub = _program_libraries(os.path.abspath(folder), name)
        return not os.path.exists(os.path.join(os.path.abspath(folder), 'build', BUILDING)) and \
            not problem(folder, [os.path.basename(library), os.path.basename(stub)])
    except Exception:
        return False


def load_complete(sdfg, folder: str):
    """A loaded program for ``sdfg`` from ``folder``'s complete build, without generating
    code (see the module), or None where the folder's record, libraries or ``program.sdfg``
    do not agree or the load fails (then the caller builds). Called under the lock."""
    from dace.codegen import compiled_sdfg
    folder = os.path.abspath(folder)
    build = os.path.join(folder, 'build')
    try:
        library, stub = _program_libraries(folder, sdfg.name)
        if os.path.exists(os.path.join(build, BUILDING)) or \
                problem(folder, [os.path.basename(library), os.path.basename(stub)]):
            return None
        # loaded by this process already (the stub, checked above, says): DaCe's path builds
        # another copy; before reading program.sdfg, which costs more
        if compiled_sdfg.ReloadableDLL(library, sdfg.name).is_loaded():
            return None
        entry = _record_content(build).get('program') or {}
        path = os.path.join(folder, PROGRAM)
        if _digest(path) != (entry.get('size'), entry.get('sha256')):
            return None
        program = dace.SDFG.from_file(path)
        if program.name != sdfg.name or program.arg_names != sdfg.arg_names:
            return None
        program.build_folder = folder
        return compiled_sdfg.CompiledSDFG(program, compiled_sdfg.ReloadableDLL(library, program.name),
                                          program.arg_names)
    except Exception:  # anything unexpected: the build path decides (and reports)
        return None


# ---------------------------------------------------------------- read-only folders
def is_read_only_error(exc: OSError) -> bool:
    """Whether ``exc`` says a path cannot be written (permissions, read-only file system)."""
    return isinstance(exc, PermissionError) or exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM)


def writable(folder: str) -> bool:
    """Whether a build may write ``folder`` (and its ``build``) — or create it."""
    if not os.path.isdir(folder):
        return os.access(os.path.dirname(os.path.abspath(folder)), os.W_OK)
    build = os.path.join(folder, 'build')
    return os.access(folder, os.W_OK) and (not os.path.isdir(build) or os.access(build, os.W_OK))


_PRIVATE: List[str] = []  # temporary folders of read-only loads, removed at exit


def _remove_private():
    for d in _PRIVATE:
        shutil.rmtree(d, ignore_errors=True)


def _private_copy(folder: str, names: List[str]) -> str:
    """A temporary folder with a copy of each library in ``names``, checked against the
    record (the copy, not the original, is what gets loaded)."""
    build = os.path.join(folder, 'build')
    record = _read_record(build) or {}
    if not _PRIVATE:
        atexit.register(_remove_private)
    private = tempfile.mkdtemp(prefix='sdfgsparse-lib-')
    _PRIVATE.append(private)
    for name in names:
        shutil.copyfile(os.path.join(build, name), os.path.join(private, name))
        entry = record.get(name) or {}
        if _digest(os.path.join(private, name)) != (entry.get('size'), entry.get('sha256')):
            raise BuildCacheError(f'{folder}: {name} changed while it was read (it no longer matches its build '
                                  'record); try again')
    return private


def load_read_only(sdfg, folder: str, why: str, output_file=None, validate=True, return_program_handle=True):
    """``SDFG.compile`` for a folder that cannot be written (``why``): load its complete
    build without writing there, or raise :class:`BuildCacheError` (see the module)."""
    from dace.codegen import codegen, compiled_sdfg
    folder = os.path.abspath(folder)
    library, stub = _program_libraries(folder, sdfg.name)
    names = [os.path.basename(library), os.path.basename(stub)]
    missing = problem(folder, names)
    if missing:
        raise BuildCacheError(f'{folder}: cannot build {sdfg.name} there ({why}), and the folder holds no complete '
                              f'build of it ({missing}); make the folder writable, or set '
                              'DACE_default_build_folder to a writable folder')
    try:  # (the private copy and the source maps go to the temporary folder: it needs the space)
        private = _private_copy(folder, names)
        if output_file is not None:
            if os.path.isdir(output_file):
                output_file = os.path.join(output_file, names[0])
            shutil.copyfile(os.path.join(private, names[0]), output_file)
        if not return_program_handle:
            return None
        program = copy.deepcopy(sdfg)  # what DaCe's compile hands to the loader: its copy after code generation,
        program.build_folder = private  # which writes source maps into the build folder
        program.fill_scope_connectors()
        with benign_dace_warnings():
            codegen.generate_code(program, validate=validate)
    except OSError as exc:
        full = no_space(exc, tempfile.gettempdir())
        if full is None:
            raise
        raise full from exc
    try:
        return compiled_sdfg.CompiledSDFG(program, compiled_sdfg.ReloadableDLL(os.path.join(private, names[0]),
                                                                                program.name), program.arg_names)
    except (OSError, RuntimeError, KeyError) as exc:
        raise BuildCacheError(f'{folder}: {names[0]} (a read-only build, {why}) cannot be loaded '
                              f'({type(exc).__name__}: {exc}); make the folder writable to rebuild it') from exc


# ---------------------------------------------------------------- listing and pruning
def _lock_held_elsewhere(path: str) -> bool:
    """Whether another open file holds the lock ``path`` now (never creates the file)."""
    try:
        import fcntl
        handle = open(path, 'rb')
    except (ImportError, OSError):
        return False
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)  # released by the close
        except BlockingIOError:
            return True
        return False


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
    """The build folders in ``folder`` (default: :func:`default_folder`), oldest use first,
    each with its state (see the module)."""
    folder = folder or default_folder()
    if not os.path.isdir(folder):
        return []
    source = source_fingerprint()
    found = []
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if not os.path.isdir(path) or os.path.islink(path) or name == KERNELS:
            continue
        m = _OURS.match(name)
        if not m:
            status, reason = 'unchecked', ''
        elif _lock_held_elsewhere(path + '.lock'):
            status, reason = 'in use', ''
        else:
            reason = problem(path)
            status = 'broken' if reason else 'ok'
        found.append(BuildFolder(path, m.group('program') if m else '', bool(m),
                                 bool(m) and m.group('source') == source, _size(path), os.stat(path).st_mtime,
                                 status, reason))
    return sorted(found, key=lambda f: (f.last_used, f.path))


def prune(folder: Optional[str] = None, older_than_days: Optional[float] = None, dry_run: bool = False,
          in_use: Optional[List[BuildFolder]] = None, found: Optional[List[BuildFolder]] = None) -> List[BuildFolder]:
    """Remove the broken and stale build folders of ``folder`` (see the module); returns
    those removed (with ``dry_run``: those that would be). A folder whose lock another
    process holds is skipped and reported in ``in_use`` (when a list is given). ``found``:
    the :func:`scan` of ``folder`` when the caller has made it already. Raises
    :class:`BuildCacheError` for a folder that cannot be removed (a read-only cache)."""
    if older_than_days is not None and older_than_days < 0:
        raise ValueError(f'older_than_days: must be at least 0, got {older_than_days}')
    if not dry_run:
        prune_kernels(folder)
    removed = []
    for f in scan(folder) if found is None else found:
        if not f.ours:
            continue
        keep_if_whole = f.current and (older_than_days is None or f.age_days < older_than_days)
        if keep_if_whole and f.status != 'broken':
            continue
        if dry_run:
            removed.append(f)
            continue
        lock = FileLock(f.path + '.lock')
        try:
            if not lock.acquire(blocking=False):
                if in_use is not None:
                    in_use.append(f)
                continue
        except OSError as exc:
            raise BuildCacheError(f'{f.path}: cannot be removed, its lock file cannot be opened ({exc})') from exc
        try:
            if keep_if_whole and not problem(f.path):
                continue  # built again since the scan
            try:
                shutil.rmtree(f.path)
            except OSError as exc:
                raise BuildCacheError(f'{f.path}: cannot be removed ({exc})') from exc
            removed.append(f)
            os.remove(f.path + '.lock')  # while held: a waiter for it opens the path anew
        finally:
            lock.release()
    return removed


def prune_kernels(folder: Optional[str] = None) -> int:
    """Remove the folder of parsed kernels (:data:`KERNELS`) that earlier versions left;
    returns how many files it held (0 when there was none)."""
    path = os.path.join(folder or default_folder(), KERNELS)
    if not os.path.isdir(path) or os.path.islink(path):
        return 0
    count = sum(len(files) for _, _, files in os.walk(path))
    shutil.rmtree(path, ignore_errors=True)
    return count
