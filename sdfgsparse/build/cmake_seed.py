"""CMake seeds: a new build folder skips CMake's compiler detection (DaCe 1.0.2).

Every new build folder runs a full CMake configure — compiler identification, ABI
detection, ``find_package(OpenMP)`` test builds — about 0.7 s of a 2.5 s cold compile here,
identical for every program of one configuration. After a build, its ``CMakeCache.txt`` and
compiler-detection files are kept as a *seed* in ``$SDFGSPARSE_CMAKE_SEEDS/<key>`` (default
``~/.cache/sdfgsparse/cmake-seeds``, or under ``$XDG_CACHE_HOME``; set the variable empty to
switch seeds off). The key (:func:`cmake_seed_key`) hashes the CMake command without the
program's name, sources and folder, the paths, sizes and times of ``cmake``, the C/C++
compilers and DaCe's configured compiler, and the environment variables CMake reads on a
first configure (``CC``, ``CXX``, ``*FLAGS``, ``CMAKE_GENERATOR``, ``CUDACXX``). A new build
folder of the same key starts from a copy of the seed, so CMake skips the detection
(configure ~0.03 s); the command still sets the program's name, sources and flags, and g++
still compiles everything. When a seeded configure fails, DaCe's own retry wipes the build
folder (and the ``.ss-seeded`` marker planted with the seed) and configures from scratch;
that build's configuration then replaces the seed. Any error of the seed code itself only
means no seed. ``SEEDS['planted']`` counts the build folders started from a seed.
"""
import hashlib
import os
import re
import shutil
import tempfile

import dace
from dace.codegen import compiler

from sdfgsparse._dace_compat import wrap
from sdfgsparse.build import policy

__all__ = ['SEEDS', 'cmake_seed_key', 'install']

#: Build folders of this process that started from a seed (the benchmark reports it).
SEEDS = {'planted': 0}
_PLANTED = set()  # their paths
_SEED_BUILD = '@SS_BUILD_DIR@'
_SEED_MARK = '.ss-seeded'
# arguments of DaCe's CMake command that name the program, its sources and its folder
_PROGRAM_ARGS = re.compile(r'-DDACE_SRC_DIR="[^"]*"|-DDACE_FILES="[^"]*"|-DDACE_PROGRAM_NAME=\S+')
_ENV_KEYS = ('CC', 'CXX', 'CFLAGS', 'CXXFLAGS', 'LDFLAGS', 'CMAKE_GENERATOR', 'CUDACXX')


def _toolchain() -> str:
    """Paths, sizes and modification times of ``cmake``, the C/C++ compilers and DaCe's
    configured compiler, and the environment variables a first configure reads."""
    tools = ['cmake', os.environ.get('CC') or 'cc', os.environ.get('CXX') or 'c++']
    try:
        tools.append(dace.Config.get('compiler', 'cpu', 'executable') or '')
    except KeyError:
        pass
    parts = []
    for tool in tools:
        path = shutil.which(tool) if tool else None
        if path:
            real = os.path.realpath(path)
            st = os.stat(real)
            parts.append(f'{tool}={real}:{st.st_size}:{st.st_mtime_ns}')
        else:
            parts.append(f'{tool}=?')
    parts += [f'{k}={os.environ.get(k)}' for k in _ENV_KEYS]
    return ';'.join(parts)


def cmake_seed_key(command: str) -> str:
    """The seed key of a DaCe CMake configure command (see the module)."""
    general = _PROGRAM_ARGS.sub('', command)
    return hashlib.sha256(f'{general}\n{_toolchain()}'.encode()).hexdigest()[:16]


def _seed_path(command: str):
    """Where the seed of ``command`` lives, or None when seeds are switched off."""
    root = os.environ.get('SDFGSPARSE_CMAKE_SEEDS')
    if root is None:
        base = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
        root = os.path.join(base, 'sdfgsparse', 'cmake-seeds')
    return os.path.join(root, cmake_seed_key(command)) if root else None


def _version_dirs(cmake_files: str):
    """CMake's per-version folders of compiler-detection results in ``CMakeFiles``."""
    if not os.path.isdir(cmake_files):
        return []
    return [d for d in os.listdir(cmake_files) if re.fullmatch(r'\d+\.\d+[\w.-]*', d)]


def _plant_seed(build_folder: str, command: str) -> bool:
    """Start an unconfigured build folder from the seed of its command, if there is one."""
    build = os.path.abspath(build_folder)
    try:
        seed = _seed_path(command)
        if seed is None or os.path.isfile(os.path.join(build, 'CMakeCache.txt')):
            return False
        cache = os.path.join(seed, 'CMakeCache.txt')
        if not os.path.isfile(cache):
            return False
        with open(cache) as f:
            text = f.read().replace(_SEED_BUILD, build)
        for d in _version_dirs(os.path.join(seed, 'CMakeFiles')):
            shutil.copytree(os.path.join(seed, 'CMakeFiles', d), os.path.join(build, 'CMakeFiles', d),
                            dirs_exist_ok=True)
        with open(os.path.join(build, 'CMakeCache.txt'), 'w') as f:
            f.write(text)
        with open(os.path.join(build, _SEED_MARK), 'w') as f:
            f.write(seed)
    except Exception:  # the seed is only a shortcut: CMake configures from scratch
        for name in ('CMakeCache.txt', _SEED_MARK):
            try:
                os.remove(os.path.join(build, name))
            except OSError:
                pass
        return False
    SEEDS['planted'] += 1
    _PLANTED.add(build)
    return True


def _keep_seed(build_folder: str) -> None:
    """After a successful build: keep its configuration as the seed of its command. A
    folder started from a seed that lost its marker was wiped by DaCe's retry after the
    seeded configure failed: the seed is replaced."""
    build = os.path.abspath(build_folder)
    tmp = None
    try:
        with open(os.path.join(build, 'cmake_configure.sh')) as f:
            command = f.read()
        seed = _seed_path(command)
        if seed is None:
            return
        if build in _PLANTED:
            _PLANTED.discard(build)
            if not os.path.isfile(os.path.join(build, _SEED_MARK)):
                shutil.rmtree(seed, ignore_errors=True)
        if os.path.isdir(seed):
            return
        with open(os.path.join(build, 'CMakeCache.txt')) as f:
            text = f.read()
        versions = _version_dirs(os.path.join(build, 'CMakeFiles'))
        if build not in text or not versions:
            return
        os.makedirs(os.path.dirname(seed), exist_ok=True)
        tmp = tempfile.mkdtemp(prefix='.tmp', dir=os.path.dirname(seed))
        for d in versions:
            shutil.copytree(os.path.join(build, 'CMakeFiles', d), os.path.join(tmp, 'CMakeFiles', d))
        with open(os.path.join(tmp, 'CMakeCache.txt'), 'w') as f:
            f.write(text.replace(build, _SEED_BUILD))
        os.rename(tmp, seed)  # atomic; fails if another process kept one first
        tmp = None
    except Exception:  # no seed kept; the build itself succeeded
        pass
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def install() -> None:
    """Wrap DaCe's ``identical_file_exists`` (plants a seed before a first configure) and
    ``configure_and_compile`` (keeps the seed after a build), while one of our programs is
    built (:func:`sdfgsparse.build.policy.active`; DaCe builds any other as it does); once."""

    def make_identical(orig_identical):

        def identical_file_exists(filename, file_contents):
            same = orig_identical(filename, file_contents)
            if not same and policy.active() and os.path.basename(filename) == 'cmake_configure.sh':
                _plant_seed(os.path.dirname(filename), file_contents)
            return same

        return identical_file_exists

    def make_build(orig_build):

        def configure_and_compile(program_folder, program_name=None, output_stream=None):
            result = orig_build(program_folder, program_name, output_stream)
            if policy.active():
                _keep_seed(os.path.join(os.path.abspath(program_folder), 'build'))
            return result

        return configure_and_compile

    wrap(compiler, 'identical_file_exists', make_identical)
    wrap(compiler, 'configure_and_compile', make_build)
