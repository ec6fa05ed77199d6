"""The SDFG command line (sdfgsparse/scripting): ``xforms list|apply``, ``optimize``,
``annotate`` and ``run`` on saved SDFG files, called in-process through
``sdfgsparse.cli.main``. Each SDFG is built once per module; five programs compile
(GCN before and after SparseEpilogueFusion, GCN optimised, SpMV, A + A)."""
import os

import dace
import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.cli import main
from sdfgsparse.scripting import files
from sdfgsparse.targets.fpga.lower import fpga_storage

N, K, M, T = (dace.symbol(s) for s in 'NKMT')
DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'data')
CORA = os.path.join(DATA, 'cora_A.mtx.gz')


@dace.program
def gcn(A: ss.CSR[dace.float64, N, N], X: dace.float64[N, K], W: dace.float64[K, M], b: dace.float64[M]):
    return np.maximum(A @ (X @ W) + b, 0)


@dace.program
def spmv(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


@dace.program
def add(A: ss.CSR[dace.float64, M, N]):
    return A + A


@dace.program
def repeat(x: dace.float64[N]):  # T is fixed by no argument
    y = np.zeros_like(x)
    for _ in range(T):
        y += x
    return y


@pytest.fixture(scope='module')
def sdfgs(tmp_path_factory):
    folder = tmp_path_factory.mktemp('sdfgs')
    out = {}
    for name, prog in (('gcn', gcn), ('spmv', spmv), ('add', add), ('repeat', repeat)):
        out[name] = str(folder / f'{name}.sdfg')
        prog.to_sdfg().save(out[name])  # (the SDFG's name is the program's qualified one: test_sdfg_cli_gcn)
    return out


@pytest.fixture(scope='module')
def gcn_data(tmp_path_factory):
    """A.mtx (40 x 40, empty rows), X.npy, W.npy, b.npy and the expected GCN output."""
    rng = np.random.default_rng(7)
    folder = tmp_path_factory.mktemp('gcn_data')
    A = sp.random_array((40, 40), density=0.1, format='csr', rng=rng)
    A = sp.csr_array(A.multiply(np.arange(40)[:, None] % 5 != 0))  # every fifth row empty
    scipy.io.mmwrite(str(folder / 'A.mtx'), A)
    arrays = {'X': rng.standard_normal((40, 6)), 'W': rng.standard_normal((6, 3)), 'b': rng.standard_normal(3)}
    for name, a in arrays.items():
        np.save(folder / f'{name}.npy', a)
    A = sp.csr_array(scipy.io.mmread(str(folder / 'A.mtx')))  # what the files hold
    want = np.maximum(A @ (arrays['X'] @ arrays['W']) + arrays['b'], 0)
    args = [f'--arg={n}={folder / f}' for n, f in (('A', 'A.mtx'), ('X', 'X.npy'), ('W', 'W.npy'), ('b', 'b.npy'))]
    return folder, args, want


def _run(argv, capsys):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


# ---------------------------------------------------------------------------------- xforms


def test_xforms_list_shows_sparse_epilogue_fusion(sdfgs, capsys):
    code, out, err = _run(['xforms', 'list', sdfgs['gcn']], capsys)
    assert code == 0, err
    lines = [ln for ln in out.splitlines() if 'SparseEpilogueFusion' in ln]
    assert len(lines) == 1
    assert lines[0].split()[:3] == ['0', 'SparseEpilogueFusion', 'Sparse']
    assert 'SpMM' in lines[0] and 'state 0' in lines[0]
    assert 'MapTiling' not in out and "other transformations (DaCe's; --all lists them)" in out
    code, out, _ = _run(['xforms', 'list', sdfgs['gcn'], '--all'], capsys)
    assert code == 0 and 'MapTiling' in out and 'SparseEpilogueFusion' in out


def test_xforms_apply_epilogue_fusion_agrees_with_the_original_and_scipy(sdfgs, gcn_data, tmp_path, capsys):
    folder, args, want = gcn_data
    fused = tmp_path / 'gcn_fused.sdfg'
    code, out, err = _run(['xforms', 'apply', sdfgs['gcn'], 'SparseEpilogueFusion', '-o', fused], capsys)
    assert code == 0, err
    assert out.count('applied SparseEpilogueFusion at') == 1 and f'saved {fused}' in out
    assert 'verified: 1 output agrees before and after SparseEpilogueFusion on two sets of random inputs' in out
    again = dace.SDFG.from_file(str(fused))
    again.validate()
    assert [type(h).__name__ for h in again.transformation_hist] == ['SparseEpilogueFusion']
    results = {}
    for name, path in (('original', sdfgs['gcn']), ('fused', fused)):
        y = tmp_path / f'{name}.npy'
        code, out, err = _run(['run', path, *args, '-o', y], capsys)
        assert code == 0, err
        assert f'-> {y}' in out
        results[name] = np.load(y)
    np.testing.assert_allclose(results['fused'], results['original'], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(results['fused'], want, rtol=1e-12, atol=1e-12)
    code, out, err = _run(['run', fused, *args], capsys)  # printed instead (the build is cached)
    assert code == 0, err
    assert out.startswith('result: float64 array of shape (40, 3)')


def test_xforms_apply_refuses_a_transformation_that_changes_the_result(sdfgs, tmp_path, capsys):
    """MapTiling with tile_sizes=[-1] validates but computes another result (it differed by
    up to 11 on the GCN and was saved): the run before and after on random inputs catches
    it, nothing is saved, exit 1; --no-verify saves it unchecked."""
    tiled = tmp_path / 'tiled.sdfg'
    argv = ['xforms', 'apply', sdfgs['gcn'], 'MapTiling', '--set', 'tile_sizes=[-1]', '-o', tiled]
    code, out, err = _run(argv, capsys)
    assert code == 1 and not tiled.exists() and 'saved' not in out
    lines = err.splitlines()
    assert lines[0].startswith('sdfgsparse xforms apply: MapTiling changes the result: output result differs by up to ')
    assert lines[0].endswith('; nothing saved') and lines[1] == 'hint: --no-verify saves it without this check'
    assert float(lines[0].split('differs by up to ')[1].split()[0]) > 1e-6
    code, out, err = _run(argv + ['--no-verify'], capsys)
    assert code == 0 and tiled.exists() and 'verified' not in out


def test_xforms_apply_unknown_name_suggests_close_ones(sdfgs, tmp_path, capsys):
    code, out, err = _run(['xforms', 'apply', sdfgs['gcn'], 'SparseEpilogFusion', '-o', tmp_path / 'x.sdfg'], capsys)
    assert code == 2
    assert err.splitlines()[0].startswith("sdfgsparse xforms apply: unknown transformation 'SparseEpilogFusion'; "
                                          'did you mean SparseEpilogueFusion')
    assert 'Traceback' not in err and not (tmp_path / 'x.sdfg').exists()


def test_xforms_apply_where_index_every_and_set(sdfgs, tmp_path, capsys):
    out_sdfg = tmp_path / 'tiled.sdfg'
    code, out, err = _run(['xforms', 'apply', sdfgs['gcn'], 'MapTiling', '--where', '_numpy_maximum', '--set',
                           'tile_sizes=[8]', '-o', out_sdfg, '--no-verify'], capsys)
    assert code == 0, err
    assert out.count('applied MapTiling at') == 1 and '_numpy_maximum' in out and 'other match' not in out
    tiled = dace.SDFG.from_file(str(out_sdfg))
    hist = tiled.transformation_hist
    assert len(hist) == 1 and tuple(hist[0].tile_sizes) == (8, )
    code, out, _ = _run(['xforms', 'apply', sdfgs['gcn'], 'MapTiling', '-o', out_sdfg, '--no-verify'], capsys)
    assert code == 0 and '(1 other match left' in out
    code, out, _ = _run(['xforms', 'apply', sdfgs['gcn'], 'MapExpansion', '--every', '-o', out_sdfg, '--no-verify'],
                        capsys)
    assert code == 0 and out.count('applied MapExpansion at') == 2
    code, _, err = _run(['xforms', 'apply', sdfgs['gcn'], 'MapTiling', '--index', '5', '-o', out_sdfg], capsys)
    assert code == 2 and '--index 5: MapTiling has 2 matches (--index 0 to 1)' in err
    code, _, err = _run(['xforms', 'apply', sdfgs['gcn'], 'MapTiling', '--set', 'tile_size=4', '-o', out_sdfg], capsys)
    assert code == 2 and 'MapTiling has no property tile_size' in err and 'did you mean tile_sizes' in err


def test_xforms_apply_nothing_to_apply_or_nowhere_to_save(sdfgs, tmp_path, capsys):
    code, out, err = _run(['xforms', 'apply', sdfgs['gcn'], 'SparseFusion', '-o', tmp_path / 'x.sdfg'], capsys)
    assert code == 1 and 'SparseFusion matches nowhere' in err and not (tmp_path / 'x.sdfg').exists()
    code, _, err = _run(['xforms', 'apply', sdfgs['gcn'], 'MapTiling', '--where', 'no_such_node', '-o',
                         tmp_path / 'x.sdfg'], capsys)
    assert code == 1 and '(2 without --where' in err
    code, _, err = _run(['xforms', 'apply', sdfgs['gcn'], 'SparseEpilogueFusion'], capsys)
    assert code == 2 and 'give -o OUT.sdfg (or --in-place' in err


@pytest.mark.parametrize('content, message', [(None, 'no such file'), (b'not json at all', 'not an SDFG file'),
                                              (b'{"type": "nothing"}', 'not a readable SDFG')])
def test_not_an_sdfg(tmp_path, capsys, content, message):
    path = tmp_path / 'bad.sdfg'
    if content is not None:
        path.write_bytes(content)
    for argv in (['xforms', 'list', path], ['run', path], ['optimize', path, '-o', tmp_path / 'o.sdfg']):
        code, _, err = _run(argv, capsys)
        assert code == 2 and message in err.splitlines()[0] and 'Traceback' not in err


# ---------------------------------------------------------------------------------- optimize, annotate


def test_optimize_with_a_matrices_folder_runs_correctly(sdfgs, gcn_data, tmp_path, capsys):
    folder, args, want = gcn_data
    examples = tmp_path / 'examples'
    examples.mkdir()
    A = sp.csr_array(scipy.io.mmread(str(folder / 'A.mtx')))
    scipy.io.mmwrite(str(examples / 'A.mtx'), A)
    np.save(examples / 'Z.npy', np.zeros(3))  # no argument Z: reported, ignored
    (examples / 'README.txt').write_text('not an argument file')
    out_sdfg = tmp_path / 'gcn_opt.sdfg'
    code, out, err = _run(['optimize', sdfgs['gcn'], '--matrices', examples, '-o', out_sdfg], capsys)
    assert code == 0, err
    assert out.startswith('ss.optimize(test_sdfg_cli_gcn)') and 'SparseEpilogueFusion   applied 2x' in out
    assert 'Z.npy: test_sdfg_cli_gcn has no argument Z' in err and 'README' not in err
    from sdfgsparse.transformations.examples import recorded_sizes
    assert recorded_sizes(dace.SDFG.from_file(str(out_sdfg)))['N'] == 40
    y = tmp_path / 'y.npy'
    code, out, err = _run(['run', out_sdfg, *args, '-o', y], capsys)
    assert code == 0, err
    np.testing.assert_allclose(np.load(y), want, rtol=1e-12, atol=1e-12)
    empty = tmp_path / 'empty'
    empty.mkdir()
    code, _, err = _run(['optimize', sdfgs['gcn'], '--matrices', empty, '-o', out_sdfg], capsys)
    assert code == 2 and 'no file is named after an argument of test_sdfg_cli_gcn (arguments: A, X, W, b)' in err


def test_optimize_for_the_fpga_saves_the_lowered_design(sdfgs, cora_x, tmp_path, capsys):
    """``optimize --target fpga`` saves what is built (``opt.lowered``: the design's kernel
    states and FPGA memory), which the editor opens; ``run`` refuses it with a hint instead
    of failing in the C++ compiler."""
    out_sdfg = tmp_path / 'spmv_fpga.sdfg'
    code, out, err = _run(['optimize', sdfgs['spmv'], '--target', 'fpga', '-o', out_sdfg], capsys)
    assert code == 0, err
    assert 'lowered for the FPGA' in out
    saved = dace.SDFG.from_file(str(out_sdfg))
    assert fpga_storage(saved), 'the saved SDFG holds no FPGA memory: it is the program, not its lowering'
    assert fpga_storage(dace.SDFG.from_file(sdfgs['spmv'])) == []
    folder, _ = cora_x
    code, _, err = _run(['run', out_sdfg, '--arg', f'A={CORA}', '--arg', f'x={folder / "x.npy"}'], capsys)
    assert code == 2 and 'lowered for the FPGA' in err and 'target="fpga"' in err


def test_annotate_records_sizes_and_statistics(sdfgs, gcn_data, tmp_path, capsys):
    folder, _, _ = gcn_data
    out_sdfg = tmp_path / 'gcn_annotated.sdfg'
    code, out, err = _run(['annotate', sdfgs['gcn'], '--arg', f'A={folder / "A.mtx"}', '--arg',
                           f'X={folder / "X.npy"}', '-o', out_sdfg], capsys)
    assert code == 0, err
    assert 'K=6' in out and 'N=40' in out and 'A: CSR, nnz' in out
    nnz = sp.csr_array(scipy.io.mmread(str(folder / 'A.mtx'))).nnz
    assert f'nnz(A)={nnz}' in out and '_n1=' not in out  # the user's name, not the format layer's symbol
    from sdfgsparse.transformations.examples import recorded, recorded_stats
    sdfg = dace.SDFG.from_file(str(out_sdfg))
    assert recorded(sdfg)['sizes']['N'] == 40 and recorded(sdfg)['sizes']['K'] == 6
    stats, given = recorded_stats(sdfg, 'A')
    assert given == 'CSR' and stats['nnz'] == sp.csr_array(scipy.io.mmread(str(folder / 'A.mtx'))).nnz
    code, _, err = _run(['annotate', sdfgs['gcn'], '-o', out_sdfg], capsys)
    assert code == 2 and 'give example arguments' in err
    code, _, err = _run(['annotate', sdfgs['gcn'], '--arg', f'Q={folder / "A.mtx"}', '-o', out_sdfg], capsys)
    assert code == 2 and 'Q is not an argument of test_sdfg_cli_gcn (arguments: A, X, W, b)' in err


# ---------------------------------------------------------------------------------- run


@pytest.fixture(scope='module')
def cora_x(tmp_path_factory):
    folder = tmp_path_factory.mktemp('cora')
    x = np.random.default_rng(3).standard_normal(2708)
    np.save(folder / 'x.npy', x)
    np.save(folder / 'x_short.npy', x[:100])
    return folder, x


def test_run_spmv_on_mtx_gz_and_npy(sdfgs, cora_x, tmp_path, capsys):
    folder, x = cora_x
    y = tmp_path / 'y.npy'
    code, out, err = _run(['run', sdfgs['spmv'], '--arg', f'A={CORA}', '--arg', f'x={folder / "x.npy"}', '-o', y],
                          capsys)
    assert code == 0, err
    A = sp.csr_array(scipy.io.mmread(CORA))
    np.testing.assert_allclose(np.load(y), A @ x, rtol=1e-12, atol=1e-12)


def test_run_wrong_shape_names_the_argument(sdfgs, cora_x, capsys):
    folder, _ = cora_x
    code, out, err = _run(['run', sdfgs['spmv'], '--arg', f'A={CORA}', '--arg', f'x={folder / "x_short.npy"}'],
                          capsys)
    assert code == 2 and out == ''
    assert err.splitlines() == ['sdfgsparse run: x: has shape (100,), the program expects (N) with N = 2708 (from A)']


def test_run_missing_or_unknown_argument(sdfgs, capsys):
    code, _, err = _run(['run', sdfgs['spmv'], '--arg', f'A={CORA}'], capsys)
    assert code == 2
    assert err.splitlines()[0] == 'sdfgsparse run: missing argument x (x: float64 array of shape (N,))'
    code, _, err = _run(['run', sdfgs['spmv'], '--arg', f'A={CORA}', '--arg', 'xx=1.0'], capsys)
    assert code == 2 and 'xx is not an argument of test_sdfg_cli_spmv (arguments: A, x)' in err
    assert 'hint: did you mean x?' in err


def test_run_symbol_not_fixed_by_the_arguments(sdfgs, cora_x, capsys):
    folder, _ = cora_x
    code, _, err = _run(['run', sdfgs['repeat'], '--arg', f'x={folder / "x.npy"}'], capsys)
    assert code == 2 and 'symbol T: not fixed by the arguments' in err and 'hint: --symbol T=VALUE' in err
    code, _, err = _run(['run', sdfgs['repeat'], '--arg', f'x={folder / "x.npy"}', '--symbol', 'T=2', '--symbol',
                         'N=5'], capsys)
    assert code == 2 and '--symbol N=5: the arguments fix N = 2708' in err


def test_run_sparse_result_written_as_mtx(sdfgs, tmp_path, capsys):
    out_mtx = tmp_path / 'AA.mtx'
    code, out, err = _run(['run', sdfgs['add'], '--arg', f'A={CORA}', '-o', out_mtx], capsys)
    assert code == 0, err
    assert 'CSR sparse matrix 2708 x 2708' in out
    A = sp.csr_array(scipy.io.mmread(CORA))
    got = sp.csr_array(scipy.io.mmread(str(out_mtx)))
    assert abs(got - (A + A)).max() == 0 and got.nnz == A.nnz
    code, _, err = _run(['run', sdfgs['add'], '--arg', f'A={CORA}', '-o', tmp_path / 'AA.npy'], capsys)
    assert code == 2 and 'the result is a sparse matrix; write it as .mtx' in err
    code, out, err = _run(['run', sdfgs['add'], '--arg', f'A={CORA}'], capsys)  # printed: a summary
    assert code == 0 and out.splitlines() == ['result: CSR sparse matrix 2708 x 2708, nnz 10556, float64']


# ---------------------------------------------------------------------------------- files, help, warnings


def test_argument_files_follow_the_declared_parameter(tmp_path, rng):
    A = sp.random_array((6, 5), density=0.4, format='coo', rng=rng)
    scipy.io.mmwrite(str(tmp_path / 'A.mtx'), A)
    got = files.read_argument('A', str(tmp_path / 'A.mtx'), ss.CSC[dace.float32, M, N])
    assert got.format == 'csc' and got.dtype == np.float32 and got.indices.dtype == np.int32
    np.testing.assert_allclose(got.toarray(), A.toarray(), rtol=1e-6)
    dense = files.read_argument('A', str(tmp_path / 'A.mtx'), dace.data.Array(dace.float32, [M, N]))
    assert dense.dtype == np.float32 and dense.shape == (6, 5)
    alpha = dace.data.Scalar(dace.float64)
    assert files.read_argument('alpha', '1.5', alpha) == 1.5
    with pytest.raises(files.ScriptingError, match=r'alpha=two: not a float64 number'):
        files.read_argument('alpha', 'two', alpha)
    with pytest.raises(files.ScriptingError, match=r'x=nothere: no such file \(x takes float64 array'):
        files.read_argument('x', 'nothere', dace.data.Array(dace.float64, [N]))
    (tmp_path / 'bad.mtx').write_text('%%MatrixMarket nonsense\n')
    with pytest.raises(files.ScriptingError, match=r'not a readable Matrix Market file'):
        files.read_argument('A', str(tmp_path / 'bad.mtx'), dace.data.Array(dace.float64, [M, N]))


def test_result_paths():
    assert files.result_paths('y.npy', ['result'], [False]) == ['y.npy']
    assert files.result_paths('out', ['result_0', 'result_1'], [False, True]) == [
        os.path.join('out', 'result_0.npy'), os.path.join('out', 'result_1.mtx')]
    with pytest.raises(files.ScriptingError, match=r'the program has 2 results \(result_0, result_1\); -o takes a '
                       'folder'):
        files.result_paths('y.npy', ['result_0', 'result_1'], [False, False])
    with pytest.raises(files.ScriptingError, match=r'give a .npy or .mtx file'):
        files.result_paths('y.txt', ['result'], [False])


@pytest.mark.parametrize('command', [['xforms'], ['xforms', 'list'], ['xforms', 'apply'], ['optimize'], ['annotate'],
                                     ['run'], ['analyze']])
def test_help(command, capsys):
    with pytest.raises(SystemExit) as exc:
        main(command + ['--help'])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith('usage: sdfgsparse ' + ' '.join(command))
    if command != ['analyze']:  # (analyze keeps its own help)
        assert 'examples:\n  sdfgsparse ' + command[0] in out


def test_top_level_help_lists_every_command(capsys):
    with pytest.raises(SystemExit):
        main(['--help'])
    out = capsys.readouterr().out
    for command in ('analyze', 'xforms', 'optimize', 'annotate', 'run'):
        assert f'    {command} ' in out
    import sdfgsparse.cli
    for command in ('analyze', 'xforms', 'optimize', 'annotate', 'run'):
        assert f'sdfgsparse {command} ' in sdfgsparse.cli.__doc__


# ---------------------------------------------------------------------------------- hostile input


def test_an_sdfg_file_is_read_as_json_never_unpickled(tmp_path, capsys):
    import gzip
    import pickle
    marker = tmp_path / 'ran'

    class Payload:

        def __reduce__(self):
            return (os.system, (f'touch {marker}', ))

    evil = tmp_path / 'evil.sdfgz'
    evil.write_bytes(gzip.compress(pickle.dumps(Payload())))
    for argv in (['xforms', 'list', evil], ['analyze', evil]):
        code, _, err = _run(argv, capsys)
        assert code == 2 and 'not a readable SDFG' in err and 'Traceback' not in err
    assert not marker.exists()


def test_run_non_square_matrix_for_a_square_parameter(sdfgs, gcn_data, tmp_path, capsys):
    folder, args, _ = gcn_data
    scipy.io.mmwrite(str(tmp_path / 'A.mtx'), sp.random_array((40, 30), density=0.1, format='csr', rng=1))
    np.save(tmp_path / 'X.npy', np.ones((30, 6)))  # N = 30 from A's columns would fit X
    argv = ['run', sdfgs['gcn'], f'--arg=A={tmp_path / "A.mtx"}', f'--arg=X={tmp_path / "X.npy"}', *args[2:]]
    code, out, err = _run(argv, capsys)
    assert code == 2 and out == ''
    assert err.splitlines() == ['sdfgsparse run: A: its rows (40) and cols (30) differ, but the program declares '
                                'both as N (ss.CSR[double, N, N, index=int])']


def test_argument_values_that_do_not_fit_the_declared_dtype(tmp_path):
    ivec = dace.data.Array(dace.int32, [N])
    (tmp_path / 'frac.mtx').write_text('%%MatrixMarket matrix array real general\n2 1\n1.7\n2\n')
    with pytest.raises(files.ScriptingError, match=r'the value 1.7 is not an integer \(x takes int32 array'):
        files.read_argument('x', str(tmp_path / 'frac.mtx'), ivec)
    (tmp_path / 'big.mtx').write_text('%%MatrixMarket matrix array integer general\n2 1\n1\n3000000000\n')
    with pytest.raises(files.ScriptingError, match=r'the value 3000000000 is out of the range of int32'):
        files.read_argument('x', str(tmp_path / 'big.mtx'), ivec)
    (tmp_path / 'huge.mtx').write_text('%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1 1e300\n')
    with pytest.raises(files.ScriptingError, match=r'the value 1e\+300 overflows float32'):
        files.read_argument('A', str(tmp_path / 'huge.mtx'), ss.CSR[dace.float32, N, N])
    with pytest.raises(files.ScriptingError, match=r'k=3000000000: out of the range of int32'):
        files.read_argument('k', '3000000000', dace.data.Scalar(dace.int32))
    with pytest.raises(files.ScriptingError, match=r'alpha=1e400: out of the range of float64'):
        files.read_argument('alpha', '1e400', dace.data.Scalar(dace.float64))
    assert np.isinf(files.read_argument('alpha', '-inf', dace.data.Scalar(dace.float64)))
    np.save(tmp_path / 'k.npy', np.int64(2**40))
    with pytest.raises(files.ScriptingError, match=r'dtype is int64, k takes an int32 number'):
        files.read_argument('k', str(tmp_path / 'k.npy'), dace.data.Scalar(dace.int32))
    assert files.read_argument('k', str(tmp_path / 'k.npy'), dace.data.Scalar(dace.int64)) == 2**40
    with pytest.raises(files.ScriptingError, match=r'is a folder, not a file'):
        files.read_argument('A', str(tmp_path), ss.CSR[dace.float64, N, N])


def test_output_paths_are_checked_before_any_work(sdfgs, cora_x, tmp_path, capsys):
    folder, _ = cora_x
    spmv_args = ['--arg', f'A={CORA}', '--arg', f'x={folder / "x.npy"}']
    (tmp_path / 'afile').write_text('')
    (tmp_path / 'out.npy').mkdir()
    before = (folder / 'x.npy').read_bytes()
    for out, message in ((tmp_path / 'out.npy', 'is a folder; give a file name'),
                         (tmp_path / 'afile' / 'y.npy', 'afile is a file, not a folder'),
                         (folder / 'x.npy', 'the file of argument x')):
        code, stdout, err = _run(['run', sdfgs['spmv'], *spmv_args, '-o', out], capsys)
        assert code == 2 and stdout == '' and message in err and 'Traceback' not in err, err
    assert (folder / 'x.npy').read_bytes() == before
    code, stdout, err = _run(['xforms', 'apply', sdfgs['gcn'], 'MapTiling', '-o', tmp_path], capsys)
    assert code == 2 and stdout == '' and 'is a folder; give a file name' in err


def test_one_line_errors_of_xforms_and_matrices(sdfgs, tmp_path, capsys):
    code, _, err = _run(['xforms', 'apply', sdfgs['gcn'], 'MapTiling', '--set', 'prefix=[1,2]', '-o',
                         tmp_path / 'x.sdfg'], capsys)  # DaCe's own error spans lines
    assert code == 1 and len(err.splitlines()) == 1 and 'MapTiling failed at' in err
    code, _, err = _run(['xforms', 'apply', sdfgs['gcn'], 'MapTiling', '--set', 'tile_sizes', '-o',
                         tmp_path / 'x.sdfg'], capsys)
    assert code == 2 and err.splitlines()[1] == 'hint: e.g. --set tile_sizes=[32]'
    code, _, err = _run(['optimize', sdfgs['gcn'], '--matrices', DATA, '-o', tmp_path / 'x.sdfg'], capsys)
    assert code == 2 and len(err.splitlines()) == 2 and 'cora_A.mtx.gz' in err.splitlines()[0]
    assert not (tmp_path / 'x.sdfg').exists()
