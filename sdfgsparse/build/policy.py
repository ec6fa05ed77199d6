"""DaCe's configuration while sdfgsparse names and builds one of its programs.

Importing sdfgsparse leaves DaCe's configuration as it is: a dense DaCe program in the
same process is built with DaCe's own flags, build type and cache. Our programs (an SDFG
that holds sparse data or that sdfgsparse built: :func:`sdfgsparse.formats.is_ours`) are
named and built under :func:`applied`, which sets, for the time of the build:

- ``compiler.cpu.args`` without ``-ffast-math`` (patch 11 of the old compatibility list;
  unless ``DACE_compiler_cpu_args`` is set): DaCe's default holds it, and a shared library
  linked with it (GCC < 13 on x86, GCC and Clang on AArch64) carries ``crtfastmath.o``,
  whose constructor sets flush-to-zero and denormals-are-zero for the whole process when
  the library is loaded: after the first compiled program, ``np.array([1e-310]) * 2`` was 0
  in the caller's code. ``-ffast-math`` (and ``-Ofast``) become the parts of it that neither
  change the process's floating-point state nor the meaning of NaN and infinity
  (:data:`FP_FLAGS`: no ``errno``, no trapping, reassociation and no signed zeros, so the
  compiler may vectorise reductions). Sums may be reassociated inside kernels (rounding
  differs from scipy's sequential order, within a few ulps per entry). Upstream: spcl/dace
  PR 2453 (2.0.0-alpha6) drops ``-ffast-math`` from the default flags too.
- ``compiler.build_type = 'Release'`` (``-O3``; unless ``DACE_compiler_build_type`` is
  set): DaCe's default builds at ``-O2``, and the SIMD kernels rely on ``-O3``.
- ``cache = 'hash'`` (unless ``DACE_cache`` is set): DaCe 1.0.2's default keys builds by
  program name, so two programs of one name overwrite each other's build; with ``hash``
  our programs get content-named folders (:mod:`sdfgsparse.build.folder`).

The settings are DaCe's process-wide configuration: while one of our builds runs, a dense
program built at the same moment by another thread sees them too (DaCe has no per-build
configuration). Nested and concurrent uses are counted; the last one out restores what
was there.
"""
import os

import dace

from sdfgsparse._scoped import CountedScope

__all__ = ['applied', 'active', 'register', 'settings', 'without_fast_math', 'FP_FLAGS']

#: What replaces ``-ffast-math``: none of these links ``crtfastmath.o`` or assumes finite values.
FP_FLAGS = ('-fno-math-errno', '-fno-trapping-math', '-fno-signed-zeros', '-fassociative-math')


def without_fast_math(args: str) -> str:
    """``args`` (compiler flags) with ``-ffast-math`` / ``-Ofast`` replaced."""
    out = []
    for flag in args.split():
        if flag == '-Ofast':
            out.append('-O3')
        if flag in ('-ffast-math', '-Ofast'):
            out += [f for f in FP_FLAGS if f not in out and f not in args.split()]
        else:
            out.append(flag)
    return ' '.join(out)


#: More settings of our builds, ``{path: function}`` (:func:`register`).
_MORE = {}


def register(path: tuple, value) -> None:
    """A target's setting of our builds: ``value()`` (None: leave it) at each first
    :func:`applied` (e.g. the CUDA arch without a GPU, :mod:`sdfgsparse.targets.cuda.compat`)."""
    _MORE[tuple(path)] = value


def settings() -> dict:
    """``{(section, ..., key): value}``: what :func:`applied` sets now (none where the
    environment chose: ``DACE_compiler_cpu_args``, ``DACE_compiler_build_type``, ``DACE_cache``)."""
    out = {}
    if 'DACE_compiler_cpu_args' not in os.environ:
        out[('compiler', 'cpu', 'args')] = without_fast_math(dace.Config.get('compiler', 'cpu', 'args') or '')
    if 'DACE_compiler_build_type' not in os.environ:
        out[('compiler', 'build_type')] = 'Release'
    if 'DACE_cache' not in os.environ:
        out[('cache', )] = 'hash'
    for path, value in _MORE.items():
        v = value()
        if v is not None:
            out[path] = v
    return out


_SAVED = {}


def _set() -> None:
    wanted = settings()
    _SAVED.clear()
    _SAVED.update({path: dace.Config.get(*path) for path in wanted})
    for path, value in wanted.items():
        dace.Config.set(*path, value=value)


def _restore() -> None:
    for path, value in _SAVED.items():
        dace.Config.set(*path, value=value)
    _SAVED.clear()


_SCOPE = CountedScope(_set, _restore)


def applied():
    """DaCe's configuration for naming and building one of our programs (see above; a
    context manager)."""
    return _SCOPE


def active() -> bool:
    """Whether one of our programs is being named or built now (in any thread)."""
    return _SCOPE.depth > 0
