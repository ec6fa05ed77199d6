"""Build folders named by content, built one process at a time, never left half built.

DaCe 1.0.2's ``SDFG.build_folder`` with ``cache = 'hash'`` names the folder by an MD5 of
the SDFG's JSON *including every node's random GUID*, so no two SDFG objects — no second
process, no re-parse — ever share a folder: every run built from scratch and the cache
folder grew by a build per program per run (1,173 folders, 2 GB here). :func:`install`
names the folder ``<program>_<content hash>_ss<source fingerprint>``
(:mod:`sdfgsparse.build.naming`), so that a build made by an older sdfgsparse or with
other compiler flags is not reused. Code is still regenerated on every build (DaCe's
``regenerate_code``), but unchanged files are not rewritten, CMake is not reconfigured and
``make`` finds the library up to date (in a new process: within one process DaCe renames
a second copy of a loaded program and builds it again).

``SDFG.compile`` first gives the symbols that size an int64-index sparse structure the
int64 type (:func:`sdfgsparse.formats.format.widen_size_symbols`: DaCe types a symbol from
the first object that names it, int32 for ``dace.symbol('N')``), puts each state's edges
in one order (:func:`~sdfgsparse.build.naming.canonical_edge_order`), then holds an
exclusive ``flock`` on ``<folder>.lock`` from writing the sources to loading the library,
so that two processes building the same folder (pytest-xdist workers) take turns. Under
the lock the build goes through :func:`sdfgsparse.build.cache.build` (libraries that do
not match the folder's build record are removed first; see that module), DaCe's
``compiler.get_program_handle`` raises ``LibraryLoadError`` for a library DaCe cannot load
(built once more before a ``BuildCacheError`` names the folder), and a read-only cache is
loaded without writing to it.

**One load per process.** DaCe renames a second SDFG object whose program this process has
loaded already (``name_0``, ``name_1``, ...) and builds it again, seconds each time: the
bench's ``--optimize`` compiled one program several times, and ``ss.compile(prog)`` after
``prog(...)`` rebuilt it. A folder's program loaded in this process and still alive is
handed out again instead, while the folder holds its complete build (:data:`_LOADED`; the
compiled program is safe to share: its calls hold its lock and start from cleared results,
:mod:`sdfgsparse.runtime.hooks`).

Only our programs (:func:`sdfgsparse.formats.is_ours`) are named, built and loaded this way,
under our build policy (:mod:`sdfgsparse.build.policy`); DaCe names and builds any other.
"""
import os
import weakref

import dace
from dace.codegen import compiler

from sdfgsparse._dace_compat import wrap
from sdfgsparse.build import cache, policy
from sdfgsparse.build.lock import FileLock
from sdfgsparse.build.naming import canonical_edge_order, content_hash, source_fingerprint
from sdfgsparse.formats.format import is_ours, mark_ours, widen_size_symbols

__all__ = ['install']

#: absolute build folder -> the compiled program loaded from it in this process (while alive)
_LOADED: 'weakref.WeakValueDictionary' = weakref.WeakValueDictionary()


def _loaded(folder: str, sdfg):
    """The compiled program of ``folder`` this process loaded and still holds, if it is
    ``sdfg``'s (same name and arguments) and its library is still loaded; else None."""
    found = _LOADED.get(os.path.abspath(folder))
    if found is None:
        return None
    try:
        if found.sdfg.name != sdfg.name or list(found.sdfg.arg_names) != list(sdfg.arg_names) or \
                not found._lib.is_loaded():
            return None
    except Exception:  # a half-finalised object: load as usual
        return None
    # the folder still holds its complete build (pruned or broken since: built again, as before)
    return found if cache.intact(folder, sdfg.name) else None


def _named_by_content(sdfg) -> bool:
    """Whether our ``sdfg`` gets a content-named folder: none set by hand, and the hash cache
    (what :func:`sdfgsparse.build.policy.applied` sets unless ``DACE_cache`` says otherwise)."""
    return '_build_folder' not in sdfg.__dict__ and dace.Config.get('cache') == 'hash'


def install() -> None:
    """Wrap ``SDFG.build_folder``, ``SDFG.compile`` and DaCe's ``get_program_handle``, for our
    programs only (:func:`sdfgsparse.formats.is_ours`; any other SDFG is named, built and
    loaded as DaCe does it); once."""

    def make_folder(orig):

        def build_folder(self):
            if not is_ours(self):
                return orig(self)
            with policy.applied():
                if not _named_by_content(self):
                    return orig(self)
                base = dace.Config.get('default_build_folder')
                return os.path.join(base, f'{self.name}_{content_hash(self)}_ss{source_fingerprint()}')

        return build_folder

    def make_compile(orig_compile):

        def compile(self, *args, **kwargs):
            if not is_ours(self):
                return orig_compile(self, *args, **kwargs)
            with policy.applied():
                result = _compile(self, orig_compile, args, kwargs)
            if getattr(result, 'sdfg', None) is not None:  # (a complete build loaded from its folder: a copy)
                mark_ours(result.sdfg)
            return result

        return compile

    wrap(dace.SDFG, 'build_folder', make_folder)
    wrap(dace.SDFG, 'compile', make_compile)
    _install_program_handle()


def _compile(sdfg, orig_compile, args, kwargs):
    """One of our programs compiled (under the build policy): its folder named by content,
    built under the folder's lock, a complete build loaded as it is."""
    widen_size_symbols(sdfg)  # before the folder is named: the types are part of the code
    if not _named_by_content(sdfg):
        return orig_compile(sdfg, *args, **kwargs)
    canonical_edge_order(sdfg)
    folder = sdfg.build_folder
    # one build of this folder at a time, from writing the sources to loading the library
    lock = FileLock(os.path.abspath(folder) + '.lock')
    try:
        os.makedirs(os.path.dirname(os.path.abspath(folder)), exist_ok=True)
        lock.acquire()
    except OSError as exc:  # a read-only cache: its complete builds are loaded as they are
        if not cache.is_read_only_error(exc):
            raise cache.no_space(exc, os.path.dirname(os.path.abspath(folder))) or exc
        return cache.load_read_only(sdfg, folder, f'its lock file cannot be created: {exc}', *args, **kwargs)
    try:
        if not cache.writable(folder):
            return cache.load_read_only(sdfg, folder, 'the folder is not writable', *args, **kwargs)
        result = None
        plain = not args and set(kwargs) <= {'validate'}  # a library, loaded: a warm load will do
        if plain:
            result = _loaded(folder, sdfg) or cache.load_complete(sdfg, folder)
        if result is None:
            sdfg._build_folder = folder  # computed once for this build
            try:
                result = cache.build(os.path.abspath(folder), lambda: orig_compile(sdfg, *args, **kwargs))
            finally:
                del sdfg._build_folder
        try:  # last use, for ``sdfgsparse cache`` (runtime/cache.py)
            os.utime(folder, None)
        except OSError:
            pass
        if plain and result is not None and getattr(result, 'sdfg', None) is not None and \
                result.sdfg.name == sdfg.name:  # (not a renamed copy: DaCe built that one elsewhere)
            _LOADED[os.path.abspath(folder)] = result
        return result
    finally:
        lock.release()


def _install_program_handle():
    """A library of ours that DaCe's loader refuses raises ``cache.LibraryLoadError``
    (its path and DaCe's error), which the compile wrapper answers by building it again."""

    def make(orig):

        def get_program_handle(library_path, sdfg):
            if not is_ours(sdfg):
                return orig(library_path, sdfg)
            try:
                return orig(library_path, sdfg)
            except (OSError, RuntimeError, KeyError) as exc:  # ctypes, ReloadableDLL.load, get_symbol
                raise cache.LibraryLoadError(library_path, exc) from exc

        return get_program_handle

    wrap(compiler, 'get_program_handle', make)
