"""DaCe 1.0.2's CUDA build made to work with CUDA 13, without touching DaCe's files.

Stock DaCe 1.0.2 with nvcc 13 fails in three ways (measured; DESIGN.md):

1. Without a GPU, the arch probe of DaCe's CMakeLists (``nvcc --run get_cuda_arch.cpp``)
   fails and falls back to ``compiler.cuda.cuda_arch``, whose default ``'60'`` nvcc 13
   rejects ("Unsupported gpu architecture 'compute_60'"; CUDA 13's oldest is 75).
   :func:`our_arch` replaces DaCe's default by :data:`NO_GPU_ARCH` (``'90'``) while our
   programs are built (:mod:`sdfgsparse.build.policy`; DaCe's own setting is left as it
   is for any other program). DaCe
   reads the setting *only* when its probe finds no GPU, so where a GPU exists the build
   is still for that GPU. A value the user chose is kept (``DACE_compiler_cuda_cuda_arch``,
   or any value but DaCe's default).
2. ``set(CMAKE_CUDA_STANDARD 14)`` in DaCe's CMakeLists: Thrust and CUB of recent CUDA
   need C++17. ``-std=c++17`` in ``compiler.cuda.args`` loses to CMake's later
   ``-std=c++14``, and ``-DCMAKE_CUDA_STANDARD=17`` to DaCe's ``set()``.
3. DaCe's runtime headers use names CUB 3 (CUDA 13) removed: ``cub::CountingInputIterator``
   and ``cub::TransformInputIterator`` in ``dace/reduction.h`` (every GPU reduction) and
   ``CTA_SYNC()`` in ``dace/cuda/multidim_gbar.cuh`` (upstream DaCe PRs 2255, 2142).

Fixes 2 and 3 are one CMake argument (:func:`cmake_args`):
``-DCMAKE_USER_MAKE_RULES_OVERRIDE_CUDA=`` :data:`RULES`. CMake reads that file inside
``enable_language(CUDA)``, after DaCe's ``set()`` and in the same scope, so it can set the
standard to 17; it also force-includes (nvcc ``--pre-include``, CUDA sources of the
program only, not CMake's compiler-check projects) :data:`HEADER`, which under
``__CUDACC_VER_MAJOR__ >= 13`` maps the two iterators to Thrust's ``counting_iterator`` /
``transform_iterator`` and ``CTA_SYNC()`` to ``__syncthreads()``. An ``-I`` overlay of
the headers does not work: DaCe includes them with quotes, which resolve beside
``dace.h`` first.

4. Not CUDA 13's: ``CUDACodeGen._compute_cudastreams`` gives a node the next free stream
   without counting it where that node is a view (a member of a sparse argument read in
   a nested SDFG, as ``SDFG.apply_gpu_transformations()`` leaves ``ss.relu(A)``), and the
   kernels after it inherit that stream: the program made 5 streams and launched on
   ``streams[5]``, a segfault inside ``cudaLaunchKernel`` (seen on an H200, 2026-12-04).
   :func:`count_streams` makes the count cover every stream a node was given.

Where it applies: :func:`install` (run on ``import sdfgsparse``) adds :func:`cmake_args` to the CMake options
of DaCe's CUDA code generator, which DaCe asks only for programs that contain CUDA code,
so CPU builds (and their build-folder names and CMake seeds) are unchanged, and every GPU
build of the process gets it, whether through ``ss.compile(target='gpu')`` or DaCe
directly. Both files are inert for older CUDA (the standard is raised only from CUDA 11,
which supports C++17; the header is empty below CUDA 13).
"""
import hashlib
import os
from typing import List

import dace
from dace.codegen import common
from dace.codegen.targets.cuda import CUDACodeGen

from sdfgsparse._dace_compat import wrap
from sdfgsparse.build import policy

__all__ = ['RULES', 'HEADER', 'NO_GPU_ARCH', 'DACE_DEFAULT_ARCH', 'cmake_args', 'our_arch', 'count_streams', 'install']

_HERE = os.path.dirname(os.path.abspath(__file__))
#: The CMake file read by ``enable_language(CUDA)`` (fix 2, and the force-include of fix 3).
RULES = os.path.join(_HERE, 'cuda13_rules.cmake')
#: The header force-included into every CUDA source (fix 3).
HEADER = os.path.join(_HERE, 'sdfgsparse_cuda_compat.h')
#: ``compiler.cuda.cuda_arch`` where DaCe's probe finds no GPU (fix 1): Hopper, which
#: nvcc 11.8 and later know; CUDA 13 dropped everything before 75.
NO_GPU_ARCH = '90'
#: DaCe 1.0.2's default ``compiler.cuda.cuda_arch``.
DACE_DEFAULT_ARCH = '60'
_ARCH_ENV = 'DACE_compiler_cuda_cuda_arch'


def _fingerprint() -> str:
    h = hashlib.sha256()
    for path in (RULES, HEADER):
        with open(path, 'rb') as f:
            h.update(f.read())
    return h.hexdigest()[:12]


def cmake_args() -> List[str]:
    """CMake arguments of a CUDA build (fixes 2 and 3), quoted as DaCe quotes its own:
    the rules file, and a fingerprint of both files so that a changed file changes the
    CMake command (a reconfigure; and another CMake seed, :mod:`sdfgsparse.build.cmake_seed`)."""
    return [f'-DCMAKE_USER_MAKE_RULES_OVERRIDE_CUDA="{RULES}"', f'-DSDFGSPARSE_CUDA_COMPAT={_fingerprint()}']


def count_streams(sdfg, streams: int, events: int):
    """Fix 4: ``(streams, events)`` as ``_compute_cudastreams`` counted them for ``sdfg``,
    with the stream count raised past the highest stream any node of ``sdfg`` (nested
    SDFGs included) was given. With a fixed number of concurrent streams the ids wrap
    around within it, and the count is already that number."""
    if int(dace.Config.get('compiler', 'cuda', 'max_concurrent_streams')) != 0:
        return streams, events
    given = [n._cuda_stream for n, _ in sdfg.all_nodes_recursive() if isinstance(getattr(n, '_cuda_stream', None), int)]
    return max([streams] + [g + 1 for g in given]), events


def install() -> None:
    """Fix 1 (:func:`our_arch`) in our build policy, fixes 2 and 3 for our CUDA builds:
    :func:`cmake_args` added to the CMake options of DaCe's CUDA code generator, which DaCe
    asks only for programs that contain CUDA code; and fix 4 (:func:`count_streams`) on
    its stream count; once."""
    policy.register(('compiler', 'cuda', 'cuda_arch'), our_arch)

    def make_streams(orig_streams):

        def _compute_cudastreams(self, sdfg, default_stream=0, default_event=0):
            return count_streams(sdfg, *orig_streams(self, sdfg, default_stream, default_event))

        return _compute_cudastreams

    def make_options(orig):

        def cmake_options():
            options = orig()
            if policy.active() and common.get_gpu_backend() == 'cuda':
                options += cmake_args()
            return options

        return cmake_options

    wrap(CUDACodeGen, '_compute_cudastreams', make_streams)
    wrap(CUDACodeGen, 'cmake_options', make_options)


def our_arch():
    """Fix 1, for our builds (:mod:`sdfgsparse.build.policy`): :data:`NO_GPU_ARCH` where the
    user did not choose ``compiler.cuda.cuda_arch`` (its environment variable, or a value other
    than DaCe's default); None: leave it."""
    if _ARCH_ENV in os.environ or str(dace.Config.get('compiler', 'cuda', 'cuda_arch')).strip() != DACE_DEFAULT_ARCH:
        return None
    return NO_GPU_ARCH
