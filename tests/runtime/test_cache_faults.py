"""Faults injected into DaCe's build folder (sdfgsparse/build/cache.py and build/folder.py):
a library truncated to 0 bytes or to half, overwritten in the middle, deleted, or left by a
build killed while linking or compiling is listed as broken and built again by the next
process, which gets the right result; a library that does not load is built again once; a
read-only folder holding a complete build is used without writing anything, and one
without a complete build raises an error that names it; a complete build is loaded by a
later process without generating code, unless its program.sdfg does not match the record.

The damaged programs run in separate processes, so that a crash (SIGBUS / SIGSEGV, as
before the fix) is a return code, not a dead test run."""
import json
import os
import pathlib
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.build import naming
from sdfgsparse.build.lock import FileLock
from sdfgsparse.cli import main
from sdfgsparse.build import cache as buildcache

pytestmark = pytest.mark.xdist_group('cache_faults')  # one worker: the built program is shared

PROGRAM = 'faults_spmv'  # the SDFG's name in the child (defined in its __main__)
_CHILD = """
import sys
import dace
import numpy as np
import scipy.sparse as sp
import sdfgsparse as ss
from sdfgsparse.build import naming
from sdfgsparse.build.lock import FileLock

folder, fingerprint, mode, calls = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
naming._FINGERPRINT[:] = [fingerprint]  # the test's, even while the tree is being edited
if mode == 'no-lock':  # the lock file cannot be created, as in a read-only folder

    def acquire(self, blocking=True):
        raise PermissionError(13, 'Permission denied', self.path)

    FileLock.acquire = acquire
if mode == 'no-codegen':  # a warm load must not generate code
    from dace.codegen import codegen

    def refuse(*args, **kwargs):
        raise AssertionError('code was generated')

    codegen.generate_code = refuse
M, N = dace.symbol('M'), dace.symbol('N')


def faults_spmv(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


A = sp.random(30, 20, density=0.2, format='csr', random_state=3)
x = np.random.default_rng(3).random(20)
with dace.config.set_temporary('default_build_folder', value=folder):
    for _ in range(calls):  # a new program object each time: it compiles (and loads) again
        np.testing.assert_allclose(dace.program(faults_spmv)(A, x), A @ x, rtol=1e-12)
print('RESULT OK')
"""

# A linker (or assembler) that leaves the program's library (object file) half written and
# kills the whole build with SIGKILL, Python included: found first through COMPILER_PATH.
_KILLER = """#!/bin/sh
out=""; prev=""
for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
{real} "$@" || exit $?
case "$out" in
  {pattern})
    size=$(stat -c %s "$out"); truncate -s $((size / 2)) "$out"; kill -KILL 0;;
esac
"""


def _writable_again(base):
    for root, dirs, _ in os.walk(base):
        for name in dirs + ['.']:
            os.chmod(os.path.join(root, name), 0o755)


@pytest.fixture(scope='module')
def child():
    """``run(folder, mode='', calls=1, user=None, cwd=None, env=None)``: the child program in
    a new process (a new session: a killed build takes only its own processes)."""
    root = pathlib.Path(tempfile.mkdtemp(prefix='ss-cache-faults-'))  # not under pytest's 0700 folder:
    os.chmod(root, 0o755)  # the read-only test runs the child as another user
    script = root / 'child.py'  # one path: it is part of the SDFG (debug information)
    script.write_text(_CHILD)
    os.chmod(script, 0o644)
    seeds = root / 'seeds'
    fingerprint = naming.source_fingerprint()

    def run(folder, mode='', calls=1, user=None, cwd=None, env=None):
        return subprocess.run(_as_user(user) + [sys.executable, str(script), str(folder), fingerprint, mode or '-',
                                                str(calls)], capture_output=True, text=True, timeout=300,
                              start_new_session=True, cwd=cwd or root,
                              env=dict(os.environ, OMP_NUM_THREADS='1', SDFGSPARSE_CMAKE_SEEDS=str(seeds),
                                       **(env or {})))

    run.root = root
    yield run
    _writable_again(root)
    shutil.rmtree(root, ignore_errors=True)


def _ok(proc):
    assert proc.returncode == 0 and 'RESULT OK' in proc.stdout, (proc.returncode, proc.stderr[-3000:])


@pytest.fixture(scope='module')
def built(child):
    """A build folder holding a complete build of the child's program."""
    folder = child.root / 'built'
    _ok(child(folder))
    return folder


def _state(base):
    """The only build folder of ``base`` (scanned)."""
    (f, ) = buildcache.scan(str(base))
    assert f.program == PROGRAM and f.current
    return f


def _complete(child, base):
    """``base``'s build folder, complete (built again where a failed test left it broken)."""
    found = buildcache.scan(str(base))
    if len(found) != 1 or found[0].status != 'ok':
        _ok(child(base))
    f = _state(base)
    assert f.status == 'ok', f.reason
    return f.path


def _library(path):
    return os.path.join(path, 'build', f'lib{PROGRAM}.so')


def _record(path):
    with open(os.path.join(path, 'build', buildcache.RECORD)) as f:
        return json.load(f)['libraries']


def _zero(lib):
    open(lib, 'w').close()


def _half(lib):
    os.truncate(lib, os.path.getsize(lib) // 2)


def _middle(lib):
    with open(lib, 'r+b') as f:
        f.seek(os.path.getsize(lib) // 2)
        f.write(b'\xcc' * 256)


@pytest.mark.parametrize('damage, reason', [
    (_zero, f'lib{PROGRAM}.so is 0 bytes'),
    (_half, f'lib{PROGRAM}.so does not match its build record'),
    (_middle, f'lib{PROGRAM}.so does not match its build record'),
    (os.remove, f'lib{PROGRAM}.so is missing'),
], ids=['zero-bytes', 'half', 'middle', 'deleted'])
def test_a_damaged_library_is_built_again(child, built, damage, reason):
    path = _complete(child, built)
    recorded = _record(path)
    damage(_library(path))
    f = _state(built)
    assert (f.status, f.reason) == ('broken', reason)
    _ok(child(built))
    assert _state(built).status == 'ok'
    assert _record(path) == recorded  # linked again from the same objects


def _killer(tmp_path, tool, pattern):
    tools = tmp_path / 'tools'
    tools.mkdir()
    real = shutil.which(tool)
    if real is None:
        pytest.skip(f'no {tool} on PATH')
    (tools / tool).write_text(_KILLER.format(real=real, pattern=pattern))
    os.chmod(tools / tool, 0o755)
    return {'COMPILER_PATH': str(tools)}


def _killed(proc):
    if proc.returncode == 0:  # GCC and Clang look there first; another compiler may not
        pytest.skip('the compiler did not run the assembler or linker found through COMPILER_PATH')
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr[-3000:])


def test_a_complete_build_loads_without_generating_code(child, built):
    """A later process loads the recorded program.sdfg and library (no code generation,
    no CMake); a program.sdfg that does not match the record sends it down the build
    path, which records it again."""
    path = _complete(child, built)
    _ok(child(built, mode='no-codegen'))
    # within one process, a second compile of the loaded program hands out the loaded one
    # (DaCe's own path built a renamed copy: build/folder.py)
    _ok(child(built, mode='no-codegen', calls=2))
    with open(os.path.join(path, 'program.sdfg'), 'a') as f:
        f.write(' ')  # still valid JSON, no longer the recorded file
    refused = child(built, mode='no-codegen')
    assert refused.returncode != 0 and 'code was generated' in refused.stderr
    _ok(child(built))
    _ok(child(built, mode='no-codegen'))


def test_a_build_killed_while_linking_is_built_again(child, tmp_path):
    """A first build: the whole build (Python, make, the compiler) is killed while ``ld``
    writes the library, and leaves it half written, newer than its objects (``make`` alone
    would take it as up to date), with no build record."""
    base = tmp_path / 'build'
    killed = child(base, env=_killer(tmp_path, 'ld', f'*lib{PROGRAM}.so'))
    _killed(killed)
    f = _state(base)
    assert (f.status, f.reason) == ('broken', f'lib{PROGRAM}.so has no build record (its build did not finish)')
    assert 0 < os.path.getsize(_library(f.path))
    _ok(child(base))
    assert _state(base).status == 'ok'
    assert main(['cache', '--folder', str(base)]) == 0


def test_a_build_killed_while_compiling_is_built_again(child, built, tmp_path):
    """A build in a folder with a record (its program's object file and library gone, so
    that ``make`` compiles): killed while ``as`` writes the object file, which it leaves half
    written and newer than its source. The marker left behind says the build was cut short:
    the next build removes the object files (with the half file, linking would fail)."""
    path = _complete(child, built)
    (obj, ) = [os.path.join(r, n) for r, _, fs in os.walk(os.path.join(path, 'build')) for n in fs
               if n == f'{PROGRAM}.cpp.o']
    os.remove(obj)
    os.remove(_library(path))
    killed = child(built, env=_killer(tmp_path, 'as', f'*/{PROGRAM}.cpp.o'))
    _killed(killed)
    assert os.path.exists(os.path.join(path, 'build', buildcache.BUILDING)) and 0 < os.path.getsize(obj)
    f = _state(built)
    assert (f.status, f.reason) == ('broken', f'lib{PROGRAM}.so is missing')
    _ok(child(built))
    assert _state(built).status == 'ok' and not os.path.exists(os.path.join(path, 'build', buildcache.BUILDING))


def test_a_library_that_does_not_load_is_built_again(child, built):
    """A library whose record agrees with it (a record cannot prove that a library loads)
    but whose ELF header is garbage: DaCe's loader refuses it, and it is built once more."""
    path = _complete(child, built)
    recorded = _record(path)
    lib = _library(path)
    with open(lib, 'r+b') as f:
        f.write(b'\0' * 16)
    size, sha = buildcache._digest(lib)
    forged = dict(recorded, **{os.path.basename(lib): {'size': size, 'sha256': sha}})
    with open(os.path.join(path, 'build', buildcache.RECORD), 'w') as f:
        json.dump({'libraries': forged}, f)
    assert _state(built).status == 'ok'
    _ok(child(built))
    assert _record(path) == recorded


M, N = dace.symbol('M'), dace.symbol('N')


def faults_local(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


_A = sp.random(30, 20, density=0.2, format='csr', random_state=3)
_X = np.random.default_rng(3).random(20)


def test_a_library_that_never_loads_raises_a_clear_error(build, monkeypatch):
    from dace.codegen import compiled_sdfg
    tries = []

    def refuse(self):
        tries.append(self._library_filename)
        raise OSError('simulated: cannot open shared object file')

    monkeypatch.setattr(compiled_sdfg.ReloadableDLL, 'load', refuse)
    with pytest.raises(buildcache.BuildCacheError, match=r'build.*faults_local_[0-9a-f]{32}.*was built again and '
                       r'still cannot be loaded \(OSError: simulated'):
        dace.program(faults_local)(_A, _X)
    assert len(tries) == 2
    (f, ) = buildcache.scan(str(build))
    assert f.status == 'broken'  # not recorded: the next build starts from scratch


def test_a_read_only_folder_without_a_build_raises_a_clear_error(build, monkeypatch):
    def acquire(self, blocking=True):
        raise PermissionError(13, 'Permission denied', self.path)

    monkeypatch.setattr(FileLock, 'acquire', acquire)
    with pytest.raises(buildcache.BuildCacheError, match=r'build/\w*faults_local_[0-9a-f]{32}_ss[0-9a-f]{12}: '
                       r'cannot build \w*faults_local there \(its lock file cannot be created: .*Permission denied'
                       r'.*\), and the folder holds no complete build of it \(lib\w*faults_local.so is missing\); '
                       r'make the folder writable'):
        dace.program(faults_local)(_A, _X)
    assert not os.listdir(build)  # nothing written


def _tree(base):
    """Every path under ``base`` with its size and modification time."""
    out = {}
    for root, dirs, files in os.walk(base):
        for name in dirs + files:
            p = os.path.join(root, name)
            st = os.lstat(p)
            out[p] = (st.st_size, st.st_mtime_ns)
    return out


def test_a_read_only_folder_is_loaded_without_writing(child, built):
    """Simulated (the lock file cannot be created), so that it runs as root too; twice in
    one process: DaCe's loader would copy the library beside itself for the second load."""
    path = _complete(child, built)
    os.remove(path + '.lock')
    before = _tree(built)
    _ok(child(built, mode='no-lock', calls=2))
    assert _tree(built) == before
    _middle(_library(path))
    refused = child(built, mode='no-lock')
    assert refused.returncode == 1
    assert (f'BuildCacheError: {path}: cannot build {PROGRAM} there (its lock file cannot be created' in refused.stderr
            and f'(lib{PROGRAM}.so does not match its build record)' in refused.stderr), refused.stderr[-3000:]
    _ok(child(built))  # writable again: built again


def _as_user(user):
    """The command prefix that runs a command as ``user`` (None: as this process)."""
    return [] if user is None else ['setpriv', f'--reuid={user}', f'--regid={user}', '--clear-groups']


def _other_user():
    """A user id to run a child as for real permissions (None: this process's own user),
    or a reason to skip."""
    if os.geteuid() != 0:
        return None
    why = 'no setpriv'
    if shutil.which('setpriv'):
        probe = subprocess.run(_as_user(65534) + [sys.executable, '-c', 'import sdfgsparse'], capture_output=True,
                               text=True, timeout=120, cwd='/')
        if probe.returncode == 0:
            return 65534
        why = probe.stderr.strip().splitlines()[-1:]
    pytest.skip(f'running as root (for whom chmod changes nothing), and user 65534 cannot import sdfgsparse: {why}')


def test_a_read_only_folder_for_real(child, built):
    """``chmod -R a-w`` on a copy of a complete build; the child runs as an ordinary user
    (as root: as user 65534, for whom the mode counts) in a read-only working directory:
    once where the lock file cannot be opened, once where it can (the folder is read-only)."""
    user = _other_user()
    _complete(child, built)
    base = str(child.root / 'read-only')
    try:
        shutil.copytree(built, base)  # a shipped cache (loading it runs no CMake: other paths are fine)
        for root, dirs, files in os.walk(base):
            for name in dirs + files + ['.']:
                p = os.path.join(root, name)
                os.chmod(p, os.stat(p).st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        before = _tree(base)
        _ok(child(base, calls=2, user=user, cwd=base))
        assert _tree(base) == before
        (lock, ) = [os.path.join(base, n) for n in os.listdir(base) if n.endswith('.lock')]
        os.chmod(lock, 0o666)
        before = _tree(base)
        _ok(child(base, user=user, cwd=base))
        assert _tree(base) == before
        cache = lambda *args: subprocess.run(_as_user(user) + [sys.executable, '-m', 'sdfgsparse', 'cache',
                                                               '--folder', base, *args],
                                             capture_output=True, text=True, timeout=120, cwd=base)
        listing = cache()
        # (its source fingerprint is its own: 'stale' where the tree changed since this test began)
        assert listing.returncode == 0 and re.search(f'{PROGRAM} .* ok\n', listing.stdout), listing
        (folder, ) = [os.path.join(base, n) for n in os.listdir(base)
                      if not n.endswith('.lock') and n != buildcache.KERNELS]  # (not the parsed kernels)
        os.chmod(_library(folder), 0o644)
        _zero(_library(folder))  # (someone who may write it) damages it: --prune cannot remove it
        os.chmod(_library(folder), 0o444)
        pruned = cache('--prune')
        assert pruned.returncode == 1 and f'sdfgsparse cache: {folder}: cannot be removed' in pruned.stderr, pruned
    finally:
        _writable_again(base)
        shutil.rmtree(base, ignore_errors=True)


def test_cache_lists_and_prunes_broken_builds(child, built, capsys):
    """Last: it removes the shared build."""
    path = _complete(child, built)
    _zero(_library(path))
    assert main(['cache', '--folder', str(built)]) == 0
    out = capsys.readouterr().out
    assert '1 build folders' in out and '1 broken (sdfgsparse cache --prune removes them)' in out
    assert re.search(f'this sdfgsparse +broken: lib{PROGRAM}.so is 0 bytes', out), out
    held = FileLock(path + '.lock')  # another process building it
    assert held.acquire(blocking=False)
    try:
        assert _state(built).status == 'in use'
        assert main(['cache', '--folder', str(built)]) == 0
        assert 'in use' in capsys.readouterr().out
        in_use = []
        assert buildcache.prune(str(built), in_use=in_use) == [] and len(in_use) == 0  # in use: not broken
        f = buildcache.scan(str(built))[0]
        f.status, f.reason = 'broken', 'simulated'  # seen broken, then taken by a build
        assert buildcache.prune(str(built), found=[f], in_use=in_use) == [] and in_use == [f]
    finally:
        held.release()
    assert main(['cache', '--folder', str(built), '--prune', '--dry-run']) == 0
    assert f'would remove {os.path.basename(path)}' in capsys.readouterr().out and os.path.isdir(path)
    assert main(['cache', '--folder', str(built), '--prune']) == 0
    out = capsys.readouterr().out
    assert f'removed {os.path.basename(path)} (' in out and f'broken: lib{PROGRAM}.so is 0 bytes)' in out
    assert 'removed 1 of 1' in out
    assert not os.path.exists(path) and not os.path.exists(path + '.lock')
