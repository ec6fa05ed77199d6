"""Argument and result files the command line must not trust: Matrix Market and .npy
headers claiming more than the file holds or the memory allows (refused before anything
is allocated), ``-o`` paths in missing folders or at symbolic links (nothing created,
nothing followed), and ``xforms apply --every`` at its cap (nothing saved). Nothing here
compiles."""
import os
import subprocess
import sys

import dace
import numpy as np
import pytest

import sdfgsparse as ss
from sdfgsparse.cli import main
from sdfgsparse.scripting import commands, files

N, M = dace.symbol('N'), dace.symbol('M')
CSR = ss.CSR[dace.float64, N, N]
VEC = dace.data.Array(dace.float64, [N])


@dace.program
def spmv(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


@dace.program
def relu(X: dace.float64[N, M]):
    return np.maximum(X, 0)


@pytest.fixture(scope='module')
def sdfgs(tmp_path_factory):
    folder = tmp_path_factory.mktemp('sdfgs')
    out = {}
    for name, prog in (('spmv', spmv), ('relu', relu)):
        out[name] = str(folder / f'{name}.sdfg')
        prog.to_sdfg().save(out[name])
    return out


def _run(argv, capsys):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _mtx(path, header, *lines):
    path.write_text('%%MatrixMarket ' + header + '\n' + '\n'.join(lines) + '\n')
    return str(path)


def _npy_header(path, shape, data_bytes):
    with open(path, 'wb') as f:
        np.lib.format.write_array_header_1_0(f, {'descr': '<f8', 'fortran_order': False, 'shape': shape})
        f.write(b'\0' * data_bytes)
    return str(path)


# ---------------------------------------------------------------------------------- headers that lie


def test_matrix_market_header_claiming_more_entries_than_lines(tmp_path):
    path = _mtx(tmp_path / 'A.mtx', 'matrix coordinate real general', '5 5 1000000000', '1 1 1.0')
    with pytest.raises(files.ScriptingError, match=r'A=.*A.mtx: the header claims 5 x 5 with 1000000000 entries, '
                       r'but the file holds 3 lines'):
        files.read_argument('A', path, CSR)
    path = _mtx(tmp_path / 'X.mtx', 'matrix array real general', '100000 100000', '1.0', '2.0')
    with pytest.raises(files.ScriptingError, match=r'the header claims 100000 x 100000 with 10000000000 entries'):
        files.read_argument('X', path, VEC)


def test_symmetric_dense_matrix_market_files_read_like_scipy(tmp_path):
    """A symmetric (or skew-symmetric) array file lists one triangle: 6 values for 3 x 3 (it
    was refused as 'the header claims 3 x 3 with 9 entries'); read as scipy reads it."""
    import scipy.io
    DENSE = dace.data.Array(dace.float64, [N, N])
    for symmetry, values in (('symmetric', ['1', '2', '3', '4', '5', '6']), ('skew-symmetric', ['1', '2', '3'])):
        path = _mtx(tmp_path / f'{symmetry}.mtx', f'matrix array real {symmetry}', '3 3', *values)
        want = scipy.io.mmread(path)
        np.testing.assert_array_equal(files.read_argument('S', path, DENSE), want)
        np.testing.assert_array_equal(files.read_argument('S', path, CSR).toarray(), want)
    path = _mtx(tmp_path / 'short.mtx', 'matrix array real symmetric', '3 3', '1', '2')
    with pytest.raises(files.ScriptingError, match=r'the header claims 3 x 3 with 6 entries, but the file holds 4'):
        files.read_argument('S', path, DENSE)


def test_matrix_market_dimensions_beyond_memory(tmp_path):
    """Two billion rows with one entry: the conversion's row pointers alone are 16 GB (the
    run grew to 22.7 GB and was killed); refused from the header, nothing allocated."""
    path = _mtx(tmp_path / 'A.mtx', 'matrix coordinate real general', '2000000000 2000000000 1', '1 1 1.0')
    with pytest.raises(files.ScriptingError, match=r'A=.*: a 2000000000 x 2000000000 matrix with 1 entry would need '
                       r'about .* GiB, and .* is available'):
        files.read_argument('A', path, CSR)


def test_npy_header_claiming_more_than_the_file_holds(tmp_path):
    path = _npy_header(tmp_path / 'x.npy', (3000000000, ), 40)
    with pytest.raises(files.ScriptingError, match=r'x=.*x.npy: the header claims a float64 array of shape '
                       r'\(3000000000,\) \(24000000000 bytes\), the file holds 40 bytes of data'):
        files.read_argument('x', path, VEC)
    np.save(tmp_path / 'ok.npy', np.arange(4.0))  # an honest file still reads
    np.testing.assert_array_equal(files.read_argument('x', str(tmp_path / 'ok.npy'), VEC), np.arange(4.0))


def test_the_memory_check_follows_an_address_space_limit(tmp_path):
    """Under RLIMIT_AS = 1.5 GiB (set in a subprocess after the imports), a 100-million-row
    matrix with one entry (1.6 GB of row pointers) is a one-line error, not a MemoryError."""
    path = _mtx(tmp_path / 'A.mtx', 'matrix coordinate real general', '100000000 100000000 1', '1 1 1.0')
    script = f'''
import resource, sys
import dace, sdfgsparse as ss
from sdfgsparse.scripting import files
N = dace.symbol('N')
if sys.argv[1] == 'limit':
    with open('/proc/self/statm') as f:
        mapped = int(f.read().split()[0]) * 4096
    resource.setrlimit(resource.RLIMIT_AS, (mapped + (3 << 29), resource.RLIM_INFINITY))
try:
    A = files.read_argument('A', {str(path)!r}, ss.CSR[dace.float64, N, N])
    print('read', A.shape)
except files.ScriptingError as exc:
    print('refused', exc)
'''
    proc = subprocess.run([sys.executable, '-c', script, 'limit'], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith('refused A=') and 'is available' in proc.stdout and 'MemoryError' not in proc.stderr
    assert files.available_memory() > 0


# ---------------------------------------------------------------------------------- -o


def test_output_in_a_missing_folder_creates_nothing(sdfgs, tmp_path, capsys):
    np.save(tmp_path / 'x.npy', np.ones(3))
    deep = tmp_path / 'missing' / 'deeper' / 'y.npy'
    code, out, err = _run(['run', sdfgs['spmv'], '--arg', f'x={tmp_path / "x.npy"}', '--arg', 'A=a.mtx', '-o',
                           deep], capsys)
    assert code == 2 and out == '' and f'the folder {tmp_path / "missing" / "deeper"} does not exist' in err
    assert not (tmp_path / 'missing').exists()
    with pytest.raises(files.ScriptingError, match=r'does not exist'):
        files.result_paths(str(tmp_path / 'missing' / 'results'), ['result_0', 'result_1'], [False, False])
    paths = files.result_paths(str(tmp_path / 'results'), ['result_0', 'result_1'], [False, False])
    files.write_result(np.ones(2), paths[0])  # the folder of several results: one level, in one that exists
    np.testing.assert_array_equal(np.load(paths[0]), np.ones(2))


def test_output_at_a_symbolic_link_is_refused(sdfgs, tmp_path, capsys):
    target = tmp_path / 'elsewhere.npy'
    target.write_bytes(b'keep')
    link = tmp_path / 'y.npy'
    link.symlink_to(target)
    np.save(tmp_path / 'x.npy', np.ones(3))
    code, out, err = _run(['run', sdfgs['spmv'], '--arg', f'x={tmp_path / "x.npy"}', '--arg', 'A=a.mtx', '-o', link],
                          capsys)
    assert code == 2 and out == '' and err.splitlines()[0].endswith('y.npy: is a symbolic link; give the path of a '
                                                                   'file, not of a link')
    with pytest.raises(files.ScriptingError, match=r'is a symbolic link'):  # a link made after the checks
        files.write_result(np.ones(2), str(link))
    assert target.read_bytes() == b'keep'
    code, _, err = _run(['xforms', 'apply', sdfgs['relu'], 'MapTiling', '-o', link], capsys)
    assert code == 2 and 'is a symbolic link' in err and target.read_bytes() == b'keep'
    (tmp_path / 'results').mkdir()
    (tmp_path / 'results' / 'result_1.npy').symlink_to(target)
    with pytest.raises(files.ScriptingError, match=r'result_1.npy is a symbolic link'):
        files.result_paths(str(tmp_path / 'results'), ['result_0', 'result_1'], [False, False])


# ---------------------------------------------------------------------------------- --every


def test_every_stops_at_the_cap_and_saves_nothing(sdfgs, tmp_path, capsys):
    out_sdfg = tmp_path / 'tiled.sdfg'
    code, out, err = _run(['xforms', 'apply', sdfgs['relu'], 'MapTiling', '--every', '--no-verify', '-o', out_sdfg],
                          capsys)
    assert code == 1 and not out_sdfg.exists()
    assert err.splitlines()[0] == (f'sdfgsparse xforms apply: stopped after {commands.EVERY_LIMIT} applications: '
                                   'MapTiling keeps matching its own result (it would rewrite without end); nothing '
                                   'saved')
