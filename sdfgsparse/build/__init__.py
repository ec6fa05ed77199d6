"""The build cache: where compiled programs live, how their folders are named, and how
they are built safely by several processes (used by the runtime and the targets alike).

- :mod:`.naming` — a folder's name: the program's content hash and sdfgsparse's source
  fingerprint;
- :mod:`.folder` — DaCe's ``SDFG.build_folder`` / ``SDFG.compile`` named by content and
  built under a lock;
- :mod:`.cache` — complete builds, warm loads, read-only caches, listing and pruning
  (``sdfgsparse cache``);
- :mod:`.cmake_seed` — CMake's compiler detection done once per toolchain;
- :mod:`.lock` — the file lock.

:func:`install` (run on ``import sdfgsparse``) sets DaCe's build policy and installs the
folder naming and the CMake seeds.
"""
import os

import dace

from sdfgsparse.build import cmake_seed, folder
from sdfgsparse.build.naming import content_hash, source_fingerprint

__all__ = ['install', 'content_hash', 'source_fingerprint']


def install() -> None:
    """DaCe's build policy for sdfgsparse, then the build folder and CMake seed wrappers.

    - ``cache = 'hash'`` (unless ``DACE_cache`` says otherwise): DaCe 1.0.2's default cache
      keys builds by program name, so two programs of one name overwrite each other's build;
    - ``compiler.build_type = 'Release'`` (``-O3``; unless ``DACE_compiler_build_type`` is
      set): the default compiled every kernel at ``-O2``, and the SIMD kernels rely on
      ``-O3``."""
    if 'DACE_cache' not in os.environ:
        dace.Config.set('cache', value='hash')
    if 'DACE_compiler_build_type' not in os.environ:
        dace.Config.set('compiler', 'build_type', value='Release')
    folder.install()
    cmake_seed.install()
