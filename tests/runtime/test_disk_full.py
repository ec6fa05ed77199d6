"""A full disk during a build (runtime/buildcache.py): every place the build writes —
the lock file, DaCe's code generation, CMake and the compiler, the build record, the
private copy of a read-only build, the parsed-kernel files — raises ``NoSpaceError`` (a
``BuildCacheError``) naming the folder that needs space, not a raw ``OSError``; and once
there is space again, the next call builds what was left and computes the right result.

The full disk is injected: ``open`` raises ``ENOSPC`` (when the file is opened, or when it
is written, after it was created) for the paths a test names, and CMake's build step
fails with the compiler's "No space left on device"."""
import builtins
import errno
import os
import subprocess

import dace
import numpy as np
import pytest
import scipy.sparse as sp
from dace.codegen import compiler

import sdfgsparse as ss
from sdfgsparse import errors
from sdfgsparse.build import cache as buildcache

M, N = dace.symbol('M'), dace.symbol('N')


def disk_spmv(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


def _run():
    """A new program object of the same function (DaCe's in-memory cache must not answer)."""
    A = sp.random(30, 20, density=0.2, format='csr', random_state=3)
    x = np.random.default_rng(3).random(20)
    np.testing.assert_allclose(dace.program(disk_spmv)(A, x), A @ x, rtol=1e-12)


class _Full:
    """A file whose writes fail as on a full disk (it was created, as a real one is)."""

    def __init__(self, f, path):
        self._f, self._path = f, path

    def write(self, *args):
        raise OSError(errno.ENOSPC, 'No space left on device', self._path)

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()
        return False


@pytest.fixture
def disk(monkeypatch):
    """``disk.full = (predicate on the path, 'open' or 'write')``: the writes it matches fail."""

    class Disk:
        full = None
        hits = []

    real = builtins.open

    def fake_open(file, mode='r', *args, **kwargs):
        if Disk.full is not None and isinstance(file, (str, os.PathLike)) and any(c in mode for c in 'wax+'):
            path = os.fspath(file)
            matches, at = Disk.full
            if matches(path):
                Disk.hits.append(path)
                if at == 'open':
                    raise OSError(errno.ENOSPC, 'No space left on device', path)
                return _Full(real(file, mode, *args, **kwargs), path)
        return real(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, 'open', fake_open)
    return Disk


def test_lock_and_code_generation(build, disk):
    disk.full = (lambda p: p.endswith('.lock'), 'open')
    with pytest.raises(buildcache.NoSpaceError, match=rf'^{build}: no space left on the device to build there '
                       r'\(No space left on device: .*\.lock\); free space'):
        _run()
    disk.full = (lambda p: p.startswith(str(build)) and not p.endswith('.lock'), 'write')
    with pytest.raises(buildcache.BuildCacheError, match=rf'^{build}/.*disk_spmv.*: no space left on the device'):
        _run()
    assert disk.hits
    disk.full = None  # space again: the next call builds
    _run()
    (found, ) = buildcache.scan(str(build))
    assert found.status == 'ok'


def test_build_record(build, disk):
    disk.full = (lambda p: os.path.basename(p) == buildcache.RECORD + '.tmp', 'write')
    with pytest.raises(buildcache.NoSpaceError, match=r'disk_spmv.*: no space left on the device to build there'):
        _run()
    (found, ) = buildcache.scan(str(build))
    assert found.status == 'broken'  # the libraries were built, but not recorded
    disk.full = None
    _run()
    (found, ) = buildcache.scan(str(build))
    assert found.status == 'ok'


def test_compiler_output(build, monkeypatch):
    real = compiler._run_liveoutput

    def full(command, output_stream=None, **kwargs):
        if command.startswith('cmake --build'):
            raise subprocess.CalledProcessError(1, command, output='[ 50%] Building CXX object ...\n'
                                                'cc1plus: fatal error: program.o: No space left on device\n')
        return real(command, output_stream=output_stream, **kwargs)

    monkeypatch.setattr(compiler, '_run_liveoutput', full)
    with pytest.raises(buildcache.NoSpaceError, match=r'the compiler says: cc1plus: fatal error: program.o: No '
                       r'space left on device\); free space'):
        _run()
    monkeypatch.setattr(compiler, '_run_liveoutput', real)
    _run()


def test_what_says_the_disk_is_full():
    from dace.codegen.exceptions import CompilationError
    err = CompilationError('Compiler failure:\nerror: expected ;')
    assert buildcache.no_space(err, 'f') is None
    assert buildcache.no_space(OSError(errno.EACCES, 'Permission denied'), 'f') is None
    assert isinstance(buildcache.no_space(OSError(errno.ENOSPC, 'No space left on device'), 'f'),
                      buildcache.BuildCacheError)
    csim = errors.DeviceError('FPGA C-simulation: linking failed:\ng++ ...\n/usr/bin/ld: final link failed: No space '
                              'left on device')
    assert 'final link failed' in str(buildcache.no_space(csim, 'f'))
    assert buildcache.no_space(errors.DeviceError('FPGA C-simulation: x.cpp does not compile'), 'f') is None


def test_private_copy_of_a_read_only_build(build, disk, monkeypatch, tmp_path):
    _run()
    monkeypatch.setattr(buildcache, 'writable', lambda folder: False)
    monkeypatch.setattr(buildcache.tempfile, 'tempdir', str(tmp_path / 'private'))
    (tmp_path / 'private').mkdir()
    disk.full = (lambda p: p.startswith(str(tmp_path / 'private')), 'write')
    monkeypatch.setattr(buildcache.shutil, 'copyfile', _copy_with_open)
    with pytest.raises(buildcache.NoSpaceError, match=rf'^{tmp_path}/private: no space left on the device'):
        _run()
    disk.full = None
    _run()


def _copy_with_open(src, dst):  # (shutil's own copy bypasses Python's file writes)
    with open(src, 'rb') as a, open(dst, 'wb') as b:
        b.write(a.read())
    return dst


def test_prune_removes_the_parsed_kernels_of_earlier_versions(build):
    """Earlier versions kept parsed kernels in a folder beside the builds; it is not a
    build folder, and pruning removes it whole."""
    folder = os.path.join(str(build), buildcache.KERNELS)
    os.makedirs(folder)
    for name in ('0' * 12 + '-a.json', '1' * 12 + '-b.json.tmp'):
        with open(os.path.join(folder, name), 'w') as f:
            f.write('{}')
    assert all(f.path != folder for f in buildcache.scan(str(build)))
    assert buildcache.prune_kernels(str(build)) == 2 and not os.path.exists(folder)
    assert buildcache.prune_kernels(str(build)) == 0
