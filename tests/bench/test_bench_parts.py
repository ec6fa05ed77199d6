"""The harness's parts without compiling anything: option parsing, matrices, result
checking, interleaved timing (with a fake clock), peak memory, report, plot, CLI errors."""
import argparse
import gzip
import sys

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from sdfgsparse.bench import cli
from sdfgsparse.bench.errors import BenchError, KernelSpecError, MatrixError, OptionError, PeerSpecError
from sdfgsparse.bench.kernels import Kernel, check_result, parse_kernels, sddmm_numpy
from sdfgsparse.bench.matrices import banded, canonical, default_matrices, from_folder, load_mtx, rmat
from sdfgsparse.bench.peers import PEER_NAMES, parse_peers
from sdfgsparse.bench.plot import write_plot
from sdfgsparse.bench.report import format_report, geomean, noise_warning
from sdfgsparse.bench.results import BenchResult, Result
from sdfgsparse.bench.runner import BenchConfig
from sdfgsparse.bench.timing import call_sequence, interleaved, peak_memory


# ---------------------------------------------------------------- option parsing
def test_parse_kernels_defaults_and_widths():
    assert parse_kernels('spmm') == [Kernel('spmm', 64)]
    assert parse_kernels('spmv, spmm:16,spmm:16,spmm:256') == [Kernel('spmv'), Kernel('spmm', 16), Kernel('spmm', 256)]
    assert [k.label for k in parse_kernels('sddmm,gcn,atb,spgemm,add')] == ['sddmm:64', 'gcn:64', 'atb:64', 'spgemm', 'add']
    assert parse_kernels('gcn')[0].dtype == np.float32


@pytest.mark.parametrize('text, match', [
    ('spmv,fft', "unknown kernel 'fft'"),
    ('spmv:8', 'spmv takes no dense width'),
    ('spmm:0', 'K must be a positive integer'),
    ('spmm:x', 'K must be a positive integer'),
    (' , ', 'no kernel given'),
])
def test_parse_kernels_errors_name_the_option(text, match):
    with pytest.raises(KernelSpecError, match=match) as info:
        parse_kernels(text)
    assert str(info.value).startswith('--kernels')
    assert isinstance(info.value, ValueError)


def test_parse_peers():
    assert parse_peers('torch,scipy,torch') == ['torch', 'scipy']
    assert parse_peers('') == []
    assert PEER_NAMES == ['scipy', 'torch', 'graphblas', 'pydata', 'mkl']
    with pytest.raises(PeerSpecError, match=r"--peers: unknown peer 'cusparse'"):
        parse_peers('scipy,cusparse')


def test_config_validation():
    with pytest.raises(OptionError, match='--threads 0'):
        BenchConfig(kernels=[], matrices=[], threads=0).validate()
    with pytest.raises(OptionError, match='--repeat 0'):
        BenchConfig(kernels=[], matrices=[], repeat=0).validate()


def _parse(argv):
    parser = argparse.ArgumentParser(prog='sdfgsparse')
    cli.add_parser(parser.add_subparsers(dest='command', required=True))
    return parser.parse_args(argv)


def test_cli_argv_round_trip_for_the_reexecuted_child():
    args = _parse(['bench', '--kernels', 'spmv,spmm:16', '--threads', '3', '--repeat', '12', '--peers', 'scipy',
                   '--json', 'x.json', '--plot', 'x.png', '--quick', '--no-progress', '--stream-mib', '64'])
    again = _parse(cli.to_argv(args))
    assert vars(again) == vars(args)
    defaults = _parse(['bench'])
    assert (defaults.threads, defaults.repeat, defaults.quick) == (2, 10, False)
    assert defaults.func is cli.run


@pytest.mark.parametrize('argv, match', [
    (['--kernels', 'nope'], "--kernels: unknown kernel 'nope'"),
    (['--peers', 'blas'], "--peers: unknown peer 'blas'"),
    (['--threads', '0'], '--threads 0'),
    (['--matrices', '/nonexistent/folder'], "--matrices '/nonexistent/folder': no such folder"),
    (['--stream-mib', '0'], '--stream-mib 0'),
])
def test_cli_bad_options_exit_2_with_a_message(argv, match, capsys):
    assert cli.main(['bench'] + argv) == 2
    err = capsys.readouterr().err
    assert err.startswith('sdfgsparse bench: ') and match in err


def test_quick_config_is_small():
    config = cli.config_from_args(_parse(['bench', '--quick']))
    assert [k.label for k in config.kernels] == ['spmv', 'spmm:64']
    assert config.repeat >= 10
    assert len(config.matrices) <= 4 and config.matrices[-1].kind == 'generated'


# ---------------------------------------------------------------- matrices
def test_load_mtx_plain_gzip_and_pattern(tmp_path):
    A = sp.random_array((9, 7), density=0.3, format='coo', rng=np.random.default_rng(0))
    scipy.io.mmwrite(str(tmp_path / 'a.mtx'), sp.coo_matrix(A))
    with open(tmp_path / 'a.mtx', 'rb') as f, gzip.open(tmp_path / 'b.mtx.gz', 'wb') as g:
        g.write(f.read())
    scipy.io.mmwrite(str(tmp_path / 'p.mtx'), sp.coo_matrix(A), field='pattern')
    (tmp_path / 'notes.txt').write_text('not a matrix')
    sources = from_folder(str(tmp_path))
    assert [s.name for s in sources] == ['a', 'b', 'p']
    a, b, p = (s.load() for s in sources)
    for M in (a, b, p):
        assert M.shape == (9, 7) and M.nnz == A.nnz and M.has_canonical_format
        assert M.indices.dtype == np.int32 and M.indptr.dtype == np.int32 and M.dtype == np.float64
    np.testing.assert_allclose(a.toarray(), A.toarray())
    np.testing.assert_allclose(b.toarray(), A.toarray())
    assert np.all((p.data >= 0.5) & (p.data < 1.5))  # pattern: seeded values, not all ones
    np.testing.assert_array_equal(p.data, load_mtx(str(tmp_path / 'p.mtx')).data)


def test_matrix_errors_name_the_option(tmp_path):
    with pytest.raises(MatrixError, match='no such folder'):
        from_folder(str(tmp_path / 'missing'))
    with pytest.raises(MatrixError, match=r'holds no \.mtx or \.mtx\.gz file'):
        from_folder(str(tmp_path))
    (tmp_path / 'bad.mtx').write_text('this is not matrix market\n')
    with pytest.raises(MatrixError, match=r'--matrices: .*bad\.mtx: not a readable Matrix Market file'):
        load_mtx(str(tmp_path / 'bad.mtx'))
    C = sp.coo_matrix(np.array([[1 + 2j, 0], [0, 1]]))
    scipy.io.mmwrite(str(tmp_path / 'c.mtx'), C)
    with pytest.raises(MatrixError, match='complex matrices are not benchmarked'):
        load_mtx(str(tmp_path / 'c.mtx'))
    assert issubclass(MatrixError, BenchError) and issubclass(BenchError, ValueError)


def test_rmat_is_seeded_power_law_and_canonical():
    A, B, C = rmat(10, 8, seed=1), rmat(10, 8, seed=1), rmat(10, 8, seed=2)
    assert A.shape == (1024, 1024) and A.has_canonical_format and A.indices.dtype == np.int32
    assert (A != B).nnz == 0 and (A != C).nnz > 0
    assert 0.6 * 8 * 1024 < A.nnz <= 8 * 1024  # duplicates summed
    rows = np.diff(A.indptr)
    assert rows.max() > 8 * rows.mean()  # skewed degrees
    with pytest.raises(MatrixError, match='rmat: scale=0'):
        rmat(0)
    with pytest.raises(MatrixError, match='rmat: probs='):
        rmat(4, probs=(0.6, 0.3, 0.3))


def test_banded_structure():
    A = banded(10, 2, seed=3)
    assert A.nnz == 10 * 5 - 2 * (1 + 2)
    r, c = A.nonzero()
    assert np.abs(r - c).max() == 2
    assert (banded(10, 2, seed=3) != A).nnz == 0
    assert banded(1, 3).nnz == 1
    with pytest.raises(MatrixError, match='banded: n=0'):
        banded(0)


def test_default_matrices_are_lazy_and_bounded():
    full, quick = default_matrices(), default_matrices(quick=True)
    assert {s.name for s in quick} < {s.name for s in full} | {'rmat-s12'}
    assert {'rmat-s20', 'banded-2M'} <= {s.name for s in full}
    assert quick[-1].load().nnz < 100_000


# ---------------------------------------------------------------- kernels and checks
def test_skip_reasons():
    R = canonical(sp.random_array((6, 4), density=0.5, rng=np.random.default_rng(0)))
    assert 'needs a square matrix, got 6x4' in Kernel('spgemm').skip_reason(R, 1 << 30)
    assert Kernel('spmv').skip_reason(R, 1 << 30) is None
    assert 'budget' in Kernel('spmm', 256).skip_reason(R, 100)


def test_check_result_catches_wrong_values_shapes_and_patterns():
    rng = np.random.default_rng(0)
    A = canonical(sp.random_array((8, 8), density=0.4, rng=rng))
    ref = sp.csr_array(A @ A)
    assert check_result(ref.copy(), ref, np.float64)[0]
    C = ref.tocoo()
    i, j = np.argwhere(ref.toarray() == 0)[0]
    explicit = sp.csr_array((np.append(C.data, 0.0), (np.append(C.row, i), np.append(C.col, j))), shape=ref.shape)
    assert explicit.nnz == ref.nnz + 1 and check_result(explicit, ref, np.float64)[0]  # stored zeros do not matter
    dropped = ref.copy()
    dropped.data[0] = 0.0
    ok, detail = check_result(dropped, ref, np.float64)
    assert not ok and 'max abs error' in detail
    y = A @ np.ones(8)
    ok, detail = check_result(y[:7], y, np.float64)
    assert not ok and 'shape (7,), expected (8,)' in detail
    assert check_result((y * (1 + 1e-6)).astype(np.float32), y.astype(np.float32), np.float32)[0]
    assert not check_result(y * (1 + 1e-6), y, np.float64)[0]
    assert not check_result(np.full(8, np.nan), y, np.float64)[0]


def test_sddmm_reference_and_work_counts():
    rng = np.random.default_rng(1)
    A = canonical(sp.random_array((7, 5), density=0.4, rng=rng))
    X, Y = rng.standard_normal((7, 3)), rng.standard_normal((3, 5))
    want = A.toarray() * (X @ Y)
    np.testing.assert_allclose(sddmm_numpy(A, X, Y, chunk=2).toarray(), want)
    k = Kernel('spmm', 3)
    inp = k.inputs(A, seed=0)
    assert k.flops(inp) == 2 * A.nnz * 3
    ref = k.reference(inp)
    assert k.bytes(inp, ref) == A.data.nbytes + A.indices.nbytes + A.indptr.nbytes + inp['B'].nbytes + ref.nbytes
    assert Kernel('spgemm').flops({'A': sp.eye_array(4, format='csr')}) == 8


# ---------------------------------------------------------------- timing
def test_interleaved_alternates_systems_and_reports_stats():
    order = []
    ticks = iter(range(1000))
    calls = {n: (lambda n=n: order.append(n)) for n in 'abc'}
    stats = interleaved(calls, repeat=12, warmup=1, clock=lambda: float(next(ticks)))
    assert order[:3] == ['a', 'b', 'c']  # warm-up
    timed = order[3:]
    assert sorted(timed) == sorted('abc' * 12)  # each timed 12 times (two per period of six calls)
    assert all(x != y for x, y in zip(timed, timed[1:]))  # never the same system twice in a row
    order2 = []
    interleaved({n: (lambda n=n: order2.append(n)) for n in 'abc'}, repeat=12, warmup=1)
    assert order2 == order  # seeded: the same order every run
    for s in stats.values():
        assert s.times == [1.0] * 12 and s.median == s.min == s.max == 1.0 and not s.noisy


@pytest.mark.parametrize('n', [1, 2, 3, 4, 5, 6])
def test_call_sequence_gives_every_predecessor_equally_often(n):
    import random
    from collections import Counter
    names = [f's{i}' for i in range(n)]
    cut = call_sequence(names, 10, random.Random(5))
    assert Counter(cut) == Counter({x: 10 for x in names})  # exactly `repeat` calls each
    per = max(1, n - 1)
    seq = call_sequence(names, 3 * per, random.Random(5))  # three whole periods
    assert Counter(seq) == Counter({x: 3 * per for x in names})
    if n > 1:
        period = n * (n - 1)
        assert len(seq) % period == 0
        # over the periodic sequence (its wrap-around included): every ordered pair once per period
        follows = Counter(zip(seq, seq[1:] + seq[:1]))
        periods = len(seq) // period
        assert all(follows[(x, y)] == periods for x in names for y in names if x != y), follows
        assert sum(follows.values()) == len(seq)
    assert call_sequence(names, 3 * per, random.Random(5)) == seq  # seeded
    assert call_sequence([], 10, random.Random(5)) == [] and call_sequence(names, 0, random.Random(5)) == []


def test_interleaved_keeps_going_when_one_call_raises():
    count = {'n': 0}

    def flaky():
        count['n'] += 1
        if count['n'] == 3:
            raise ValueError('third call fails')

    stats = interleaved({'ok': lambda: None, 'flaky': flaky}, repeat=4, warmup=1)
    assert len(stats['ok'].times) == 4 and stats['ok'].error is None
    assert stats['flaky'].error == 'ValueError: third call fails' and len(stats['flaky'].times) == 1


def test_peak_memory_sees_a_large_allocation():
    peak = peak_memory(lambda: np.ones(64 << 17))  # 64 MiB
    assert 32 << 20 < peak < 1 << 30


# ---------------------------------------------------------------- report and plot
def _synthetic():
    res = BenchResult(machine={'threads': 2, 'stream_triad_GBps': 10.0, 'cpu': 'x', 'cores': 2, 'memory_GiB': 1,
                               'repeat': 10, 'warmup': 1, 'peers_skipped': {'mkl': 'not installed'}})
    for m, (ours, peer) in {'m1': (2e-3, 1e-3), 'm2': (1e-3, 4e-3)}.items():
        for system, t in (('sdfgsparse', ours), ('scipy', peer)):
            res.results.append(Result('spmv', m, system, t, t * 0.9, t * (3.0 if m == 'm2' else 1.1), True, 1.0, 2.0,
                                      0.2, 0, 10, 1000, 10, 10, 2e6, 4e6))
    res.results.append(Result('spmv', 'm1', 'torch', error='wrong result (not timed): max abs error 1'))
    return res


def test_report_table_geomean_and_noise():
    res = _synthetic()
    text = format_report(res)
    assert 'spmv  (median ms' in text and 'geomean' in text and 'WRONG' in text
    assert abs(geomean([0.5, 4.0]) - 2 ** 0.5) < 1e-12 and geomean([]) is None
    line = [l for l in text.splitlines() if l.startswith('geomean')][0]
    assert '1.41' in line  # geomean of speedups 0.5 and 4
    warning = noise_warning(res)
    assert warning.startswith('warning: 2 of 4 timings') and 'noisy' in warning and warning in text


def test_plot_without_matplotlib_is_a_message(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, 'matplotlib', None)
    why = write_plot(_synthetic(), str(tmp_path / 'p.png'))
    assert 'matplotlib is not installed' in why and not (tmp_path / 'p.png').exists()


def test_plot_with_matplotlib(tmp_path):
    pytest.importorskip('matplotlib')
    assert write_plot(_synthetic(), str(tmp_path / 'p.png')) is None
    assert (tmp_path / 'p.png').read_bytes()[:4] == b'\x89PNG'


def test_gpu_target_without_a_device_exits_2(monkeypatch, capsys):
    from sdfgsparse.targets.cuda import toolchain
    monkeypatch.setitem(toolchain._CACHE, 'devices', 0)
    assert cli.main(['bench', '--target', 'gpu', '--quick']) == 2
    assert '--target gpu: needs a CUDA device, and this machine has none' in capsys.readouterr().err


def test_gpu_quick_matrices_and_report():
    """``--target gpu --quick``: the shipped matrices and the two largest generated ones;
    the table names the device and the peer, flags a wrong result and gives the geomean."""
    from sdfgsparse.bench.gpu import GpuRow, format_gpu, quick_matrices
    names = [m.name for m in quick_matrices()]
    assert names[-2:] == ['rmat-s20', 'banded-2M'] and len(names) > 2
    rows = [GpuRow('spmv', 'cryg2500', 2500, 12349, 0.020, 0.021, 0.010, 1e-16, 7.5),
            GpuRow('spmm:16', 'cryg2500', 2500, 12349, 0.040, 0.041, 0.080, 1e-3, 9.0, correct=False)]
    text = format_gpu({'rows': rows, 'warm_call_us': 180.0, 'peer': 'torch cuSPARSE', 'device': 'NVIDIA H200'})
    assert 'GPU: NVIDIA H200' in text and 'peer: torch cuSPARSE' in text
    assert '0.50x' in text and '2.00x' in text and text.count('WRONG') == 1
    assert 'geomean peer/ours: 1.00x' in text and '180.0 us' in text
