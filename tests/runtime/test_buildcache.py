"""``sdfgsparse cache`` (runtime/buildcache.py): listing DaCe's build folder, pruning the
builds of another sdfgsparse source and unused ones, never a folder that sdfgsparse did
not name or whose build lock another holder has; the build lock survives the removal of
its file; a compile marks its folder as used and records its complete build. Damaged and
unfinished builds, and read-only folders: test_cache_faults.py."""
import json
import os
import threading
import time

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.build.lock import FileLock
from sdfgsparse.cli import main
from sdfgsparse.build import cache as buildcache

M, N = dace.symbol('M'), dace.symbol('N')
STALE = '0' * 12  # a source fingerprint that is not this one


def cached_spmv(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


def _program():
    # a new program object (DaCe's in-memory cache must not answer) of the same function
    # and annotations, so the same SDFG and build folder
    return dace.program(cached_spmv)


def _run(prog):
    A = sp.random(30, 20, density=0.2, format='csr', random_state=3)
    x = np.random.default_rng(3).random(20)
    np.testing.assert_allclose(prog(A, x), A @ x, rtol=1e-12)


def _with_stale_and_foreign(build):
    """The built folder, a copy of it as another sdfgsparse source's build, and a folder
    sdfgsparse did not name."""
    (current, ) = buildcache.scan(str(build))
    stale = current.path[:-12] + STALE
    os.rename(current.path, stale)
    _run(_program())  # built again, under this source's name
    (build / 'not_ours_program').mkdir()
    (build / 'not_ours_program' / 'lib.so').write_bytes(b'x' * 100)
    (build / (os.path.basename(stale) + '.lock')).touch()
    return current.path, stale


def test_scan_and_prune(build):
    _run(_program())
    current, stale = _with_stale_and_foreign(build)
    found = {os.path.basename(f.path): f for f in buildcache.scan(str(build))}
    assert set(found) == {os.path.basename(current), os.path.basename(stale), 'not_ours_program'}
    cur, old, foreign = found[os.path.basename(current)], found[os.path.basename(stale)], found['not_ours_program']
    assert (cur.ours, cur.current, cur.program) == (True, True, 'test_buildcache_cached_spmv')
    assert (old.ours, old.current, old.program) == (True, False, 'test_buildcache_cached_spmv')
    assert (foreign.ours, foreign.current, foreign.size) == (False, False, 100)
    assert (cur.status, old.status, foreign.status) == ('ok', 'ok', 'unchecked')
    assert cur.size > 10_000 and old.size > 10_000

    assert [f.path for f in buildcache.prune(str(build), dry_run=True)] == [stale]
    assert os.path.isdir(stale)  # a dry run removes nothing
    assert [f.path for f in buildcache.prune(str(build))] == [stale]
    assert not os.path.exists(stale) and not os.path.exists(stale + '.lock')
    assert os.path.isdir(current) and os.path.isdir(build / 'not_ours_program')
    _run(_program())  # the current build still loads

    # unused for ten days: pruned with --older-than 5, not with 20
    old_time = time.time() - 10 * 86400
    os.utime(current, (old_time, old_time))
    assert buildcache.prune(str(build), older_than_days=20) == []
    assert [f.path for f in buildcache.prune(str(build), older_than_days=5)] == [current]
    assert not os.path.exists(current)
    _run(_program())  # built again
    assert os.path.isdir(current)
    with pytest.raises(ValueError, match='older_than_days'):
        buildcache.prune(str(build), older_than_days=-1)


def test_a_folder_in_use_is_left(build):
    _run(_program())
    current, stale = _with_stale_and_foreign(build)
    held = FileLock(stale + '.lock')
    assert held.acquire(blocking=False)
    try:
        in_use = []
        assert buildcache.prune(str(build), in_use=in_use) == []
        assert [f.path for f in in_use] == [stale] and os.path.isdir(stale)
    finally:
        held.release()
    assert [f.path for f in buildcache.prune(str(build))] == [stale]


def test_the_build_lock_survives_the_removal_of_its_file(tmp_path):
    """A waiter that gets the lock of a file its holder removed opens the path again, so
    it never holds a lock that a newcomer could take as well."""
    path = str(tmp_path / 'folder.lock')
    first = FileLock(path)
    assert first.acquire()
    waiter = FileLock(path)
    got = threading.Event()
    t = threading.Thread(target=lambda: (waiter.acquire(), got.set()))
    t.start()
    time.sleep(0.2)
    assert not got.is_set()
    os.remove(path)  # what prune does while it holds the lock
    first.release()
    t.join(10)
    assert got.is_set()
    assert os.fstat(waiter.file.fileno()).st_ino == os.stat(path).st_ino
    newcomer = FileLock(path)
    assert not newcomer.acquire(blocking=False)  # the waiter holds the file now at the path
    waiter.release()
    assert newcomer.acquire(blocking=False)
    newcomer.release()


def test_a_compile_marks_its_folder_used(build):
    _run(_program())
    (folder, ) = buildcache.scan(str(build))
    lib = os.path.join(folder.path, 'build', 'libtest_buildcache_cached_spmv.so')
    with open(os.path.join(folder.path, 'build', buildcache.RECORD)) as f:
        record = json.load(f)['libraries']
    assert record[os.path.basename(lib)]['size'] == os.path.getsize(lib)
    assert set(record) == {os.path.basename(lib), 'libdacestub_test_buildcache_cached_spmv.so'}
    assert not os.path.exists(os.path.join(folder.path, 'build', buildcache.BUILDING))
    old_time = time.time() - 30 * 86400
    os.utime(folder.path, (old_time, old_time))
    _run(_program())  # a new program object: compiles, finds the build
    (again, ) = buildcache.scan(str(build))
    assert again.path == folder.path and again.age_days < 1


def test_cli(build, capsys):
    _run(_program())
    current, stale = _with_stale_and_foreign(build)
    assert main(['cache', '--folder', str(build)]) == 0
    out = capsys.readouterr().out
    assert '3 build folders' in out and 'another sdfgsparse (stale)' in out and 'not sdfgsparse' in out
    assert 'this sdfgsparse' in out and ' ok\n' in out and 'broken' not in out
    assert main(['cache', '--folder', str(build), '--prune', '--dry-run']) == 0
    assert 'would remove 1 of 3' in capsys.readouterr().out and os.path.isdir(stale)
    assert main(['cache', '--folder', str(build), '--older-than', '3']) == 2
    assert '--older-than needs --prune' in capsys.readouterr().err
    assert main(['cache', '--folder', str(build), '--prune', '--older-than', '-1']) == 2
    assert main(['cache', '--folder', str(build), '--prune']) == 0
    assert 'removed 1 of 3' in capsys.readouterr().out and not os.path.exists(stale)
    assert main(['cache', '--folder', str(build / 'missing')]) == 0
    assert '0 build folders' in capsys.readouterr().out


def test_a_loaded_program_is_handed_out_again_not_rebuilt(build):
    """Within one process a second compile of a loaded program (a new program object, or
    ``ss.compile`` after a call) gets the loaded one: DaCe renamed it (``name_0``) and
    built it again, seconds each time. A folder whose build is gone is built again."""
    first = _program()
    _run(first)
    loaded = ss.compile(first).build().compiled
    again = ss.compile(_program()).build().compiled
    assert again is loaded and loaded.sdfg.name == 'test_buildcache_cached_spmv'
    _run(ss.compile(_program()))
    assert len(buildcache.scan(str(build))) == 1  # no renamed copy was built
    (folder, ) = buildcache.scan(str(build))
    os.remove(os.path.join(folder.path, 'build', 'libtest_buildcache_cached_spmv.so'))
    rebuilt = ss.compile(_program()).build().compiled
    assert rebuilt is not loaded
    _run(ss.compile(_program()))
