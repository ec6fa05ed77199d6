"""The build cache: where compiled programs live, how their folders are named, and how
they are built safely by several processes (used by the runtime and the targets alike).

- :mod:`.naming` — a folder's name: the program's content hash and sdfgsparse's source
  fingerprint;
- :mod:`.folder` — DaCe's ``SDFG.build_folder`` / ``SDFG.compile`` named by content and
  built under a lock;
- :mod:`.cache` — complete builds, warm loads, read-only caches, listing and pruning
  (``sdfgsparse cache``);
- :mod:`.cmake_seed` — CMake's compiler detection done once per toolchain;
- :mod:`.lock` — the file lock;
- :mod:`.policy` — DaCe's configuration while one of our programs is named and built.

:func:`install` (run on ``import sdfgsparse``) installs the folder naming and the CMake seeds,
for our programs only.
"""
from sdfgsparse.build import cmake_seed, folder
from sdfgsparse.build.naming import content_hash, source_fingerprint

__all__ = ['install', 'content_hash', 'source_fingerprint']


def install() -> None:
    """The build folder and CMake seed wrappers (for our programs only; DaCe's configuration
    is left as it is: our build policy applies while our programs are named and built,
    :mod:`.policy`)."""
    folder.install()
    cmake_seed.install()
