"""One OpenMP runtime per process: the generated libraries share the one already loaded.

The libraries DaCe builds for us are compiled with GCC's ``-fopenmp`` and name
``libgomp.so.1`` as a dependency. Other libraries bring their own copy of GNU OpenMP:
torch's wheel ships one whose soname is ``libgomp.so.1`` (the dynamic loader then reuses
it for our libraries: one runtime), python-graphblas's wheel one renamed
``libgomp-<hash>.so.1.0.0`` (a second runtime). Two runtimes in one process each keep a
team of threads that spin for a while after every parallel region; called in
alternation on few cores, each team's spinning threads take the cores the other one
needs (an order of magnitude slower calls for both; figures in docs/performance.md).

:func:`bind` (run when ``sdfgsparse`` is imported) makes one runtime global, so that
GOMP symbol lookups of libraries loaded later find it first:

* a runtime whose soname is ``libgomp.so.1`` is already loaded (torch imported first):
  our libraries use it anyway; it is made global too;
* else a renamed GNU OpenMP runtime is loaded (python-graphblas imported first) and it
  defines every entry point our libraries call (:data:`ENTRY_POINTS`, at their symbol
  versions): it is made global, and our libraries bind to it instead of loading a second
  runtime;
* else the system's ``libgomp.so.1`` (the one the compiler links) is loaded now, global:
  libraries imported later (GraphBLAS, torch, MKL with ``MKL_THREADING_LAYER=GNU``) then
  run on it.

A library that binds to the global runtime finds it before its own copy, which is why a
runtime is made global only when it defines every entry point at the version the
library asks for; a missing one would make the library call two runtimes (a parallel
region of one, the thread number of the other: silent wrong results).
``SDFGSPARSE_OPENMP=private`` turns all this off (our libraries then load the system
runtime beside any other). Wait policies are the runtime's: ``OMP_WAIT_POLICY`` and
``GOMP_SPINCOUNT`` apply as the user sets them. Linux only; elsewhere :func:`bind` does
nothing. :func:`describe` says what was done and which OpenMP runtimes the process maps.
"""
import ctypes
import os
import sys
import threading
from typing import Dict, List, Optional

__all__ = ['bind', 'describe', 'loaded_runtimes', 'ENTRY_POINTS', 'OPT_OUT_ENV']

OPT_OUT_ENV = 'SDFGSPARSE_OPENMP'
OUR_SONAME = 'libgomp.so.1'

#: The OpenMP entry points (symbol, version) that generated libraries call: every one seen
#: in the libraries the test suite builds (``tests/targets/test_openmp_runtime.py`` checks
#: that a build calls nothing else), plus the other schedules' loop entry points.
ENTRY_POINTS = (
    ('omp_get_max_threads', 'OMP_1.0'),
    ('omp_get_num_threads', 'OMP_1.0'),
    ('omp_get_thread_num', 'OMP_1.0'),
    ('omp_set_num_threads', 'OMP_1.0'),
    ('omp_in_parallel', 'OMP_1.0'),
    ('omp_get_wtime', 'OMP_2.0'),
    ('GOMP_parallel', 'GOMP_4.0'),
    ('GOMP_barrier', 'GOMP_1.0'),
    ('GOMP_atomic_start', 'GOMP_1.0'),
    ('GOMP_atomic_end', 'GOMP_1.0'),
    ('GOMP_critical_start', 'GOMP_1.0'),
    ('GOMP_critical_end', 'GOMP_1.0'),
    ('GOMP_critical_name_start', 'GOMP_1.0'),
    ('GOMP_critical_name_end', 'GOMP_1.0'),
    ('GOMP_single_start', 'GOMP_1.0'),
    ('GOMP_loop_end', 'GOMP_1.0'),
    ('GOMP_loop_end_nowait', 'GOMP_1.0'),
    ('GOMP_loop_dynamic_start', 'GOMP_1.0'),
    ('GOMP_loop_dynamic_next', 'GOMP_1.0'),
    ('GOMP_loop_guided_start', 'GOMP_1.0'),
    ('GOMP_loop_guided_next', 'GOMP_1.0'),
    ('GOMP_loop_nonmonotonic_dynamic_start', 'GOMP_4.5'),
    ('GOMP_loop_nonmonotonic_dynamic_next', 'GOMP_4.5'),
    ('GOMP_loop_nonmonotonic_guided_start', 'GOMP_4.5'),
    ('GOMP_loop_nonmonotonic_guided_next', 'GOMP_4.5'),
    ('GOMP_parallel_loop_dynamic', 'GOMP_4.0'),
    ('GOMP_parallel_loop_guided', 'GOMP_4.0'),
    ('GOMP_parallel_loop_static', 'GOMP_4.0'),
    ('GOMP_parallel_loop_nonmonotonic_dynamic', 'GOMP_4.5'),
    ('GOMP_parallel_loop_nonmonotonic_guided', 'GOMP_4.5'),
)

_RUNTIME_STEMS = ('libgomp', 'libiomp5', 'libomp.', 'libomp-')
_LOCK = threading.Lock()
_STATE: Dict[str, object] = {}


def loaded_runtimes() -> List[str]:
    """Paths of the OpenMP runtimes (GNU, Intel, LLVM) mapped into this process (Linux;
    elsewhere an empty list)."""
    try:
        with open('/proc/self/maps') as f:
            paths = {line.split(None, 5)[5].strip() for line in f if len(line.split(None, 5)) == 6}
    except OSError:
        return []
    return sorted(p for p in paths if os.path.basename(p).startswith(_RUNTIME_STEMS))


def _gnu(path: str) -> bool:
    return os.path.basename(path).startswith('libgomp')


def _dlvsym():
    """glibc's ``dlvsym`` (in libc from glibc 2.34, in libdl before), or None."""
    fn = getattr(ctypes.CDLL(None), 'dlvsym', None) or getattr(ctypes.CDLL('libdl.so.2'), 'dlvsym', None)
    if fn is not None:
        fn.restype, fn.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
    return fn


def missing_entry_points(path: str) -> List[str]:
    """The :data:`ENTRY_POINTS` (``name@version``) that the loaded runtime ``path`` does not
    define (all of them when it cannot be asked)."""
    everything = [f'{n}@{v}' for n, v in ENTRY_POINTS]
    try:
        handle = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LOCAL)._handle
        dlvsym = _dlvsym()
    except OSError:
        return everything
    if dlvsym is None:
        return everything
    return [f'{n}@{v}' for n, v in ENTRY_POINTS if not dlvsym(handle, n.encode(), v.encode())]


def _make_global(name: str, load: bool) -> Optional[str]:
    """dlopen ``name`` with RTLD_GLOBAL (RTLD_NOLOAD unless ``load``); the error or None."""
    try:
        ctypes.CDLL(name, mode=os.RTLD_GLOBAL | (0 if load else os.RTLD_NOLOAD))
    except OSError as exc:
        return str(exc)
    return None


def bind() -> Dict[str, object]:
    """Make one GNU OpenMP runtime global for this process (see the module docstring);
    idempotent and thread-safe. Returns :func:`describe`'s record of what was done."""
    with _LOCK:
        if _STATE:
            return dict(_STATE)
        before = loaded_runtimes()
        _STATE.update(_bind(before))
        _STATE['before'] = before
        return dict(_STATE)


def _bind(before: List[str]) -> Dict[str, object]:
    if os.environ.get(OPT_OUT_ENV, '').lower() in ('private', 'off', '0'):
        return {'action': 'none', 'why': f'{OPT_OUT_ENV}={os.environ[OPT_OUT_ENV]}', 'runtime': None}
    if not sys.platform.startswith('linux'):
        return {'action': 'none', 'why': f'not Linux ({sys.platform})', 'runtime': None}
    foreign = _foreign(before)
    if _make_global(OUR_SONAME, load=False) is None:  # a libgomp.so.1 is loaded: ours bind to it
        ours = [p for p in before if _gnu(p) and p not in foreign]
        return {'action': 'shared', 'why': f'{OUR_SONAME} was already loaded', 'runtime': (ours or [OUR_SONAME])[0]}
    refused = {}
    for path in foreign:
        missing = missing_entry_points(path)
        if missing:
            refused[path] = f'lacks {", ".join(missing[:3])}' + (' ...' if len(missing) > 3 else '')
            continue
        error = _make_global(path, load=False)
        if error is None:
            return {'action': 'bound', 'why': 'a GNU OpenMP runtime was already loaded', 'runtime': path}
        refused[path] = error
    error = _make_global(OUR_SONAME, load=True)
    if error is not None:
        return {'action': 'none', 'why': f'could not load {OUR_SONAME}: {error}', 'runtime': None, 'refused': refused}
    loaded = [p for p in loaded_runtimes() if _gnu(p) and p not in before]
    return {'action': 'loaded', 'why': 'no usable OpenMP runtime was loaded', 'runtime': (loaded or [OUR_SONAME])[0],
            'refused': refused}


def _foreign(paths: List[str]) -> List[str]:
    """The renamed GNU runtimes among ``paths`` (their soname is not ``libgomp.so.1``)."""
    return [p for p in paths if _gnu(p) and not os.path.basename(p).startswith('libgomp.so')]


def describe() -> Dict[str, object]:
    """What :func:`bind` did (``action``: shared / bound / loaded / none, ``why``,
    ``runtime``: the path our libraries use, ``before``: the runtimes mapped then), every
    OpenMP runtime mapped now (``mapped``), the wait-policy settings of the environment,
    and ``competing``: the mapped runtimes other than ours that some library runs on —
    those mapped before the binding and not chosen, and any Intel or LLVM runtime. A GNU
    runtime mapped after the binding belongs to a library loaded later, which binds to
    ours; its own copy stays mapped but idle."""
    out = dict(_STATE) if _STATE else {'action': 'not bound yet', 'runtime': None, 'before': []}
    mapped = loaded_runtimes()
    ours = out.get('runtime')
    unbound = out.get('action') == 'none'
    out['mapped'] = mapped
    out['competing'] = [p for p in mapped if p != ours and (unbound or p in out['before'] or not _gnu(p))]
    out['env'] = {k: os.environ[k] for k in ('OMP_WAIT_POLICY', 'GOMP_SPINCOUNT', 'OMP_NUM_THREADS', OPT_OUT_ENV,
                                             'MKL_THREADING_LAYER', 'KMP_BLOCKTIME') if k in os.environ}
    return out
