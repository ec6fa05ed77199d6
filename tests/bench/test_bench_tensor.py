"""``sdfgsparse bench --suite tensor`` (sdfgsparse/bench/tensor.py): the generated tensors, the
suite on a small tensor (results checked, every system timed, pydata where installed) and its
table; the command line accepts the suite."""
import numpy as np
import pytest

from sdfgsparse.bench import cli
from sdfgsparse.bench.tensor import TENSORS, format_tensor, power_law_tensor, run_tensor


def test_power_law_tensor():
    T = power_law_tensor((300, 40, 50), 2000, skewed=(0, ), seed=3)
    assert T.shape == (300, 40, 50) and T.nnz == 2000
    flat = np.ravel_multi_index(T.coords, T.shape)
    assert np.all(np.diff(flat) > 0)  # distinct coordinates, canonical order
    assert all(c.flags.c_contiguous and c.dtype == np.int64 for c in T.coords)
    counts = np.bincount(T.coords[0], minlength=300)
    assert counts.max() > 20 * max(np.median(counts), 1)  # the first mode is skewed
    again = power_law_tensor((300, 40, 50), 2000, skewed=(0, ), seed=3)
    assert np.array_equal(again.data, T.data)
    assert TENSORS['powerlaw-20000x4000x3000'][:2] == ((20000, 4000, 3000), 480_000)


def test_the_suite_on_a_small_tensor():
    lines = []
    results = run_tensor(repeat=1, log=lines.append, tensors={'small': ((60, 30, 40), 900, (0, 1))})
    assert [r.kernel for r in results] == ['MTTKRP', 'TTV', 'T+U', 'T*U', 'permute']
    for r in results:
        assert r.correct, (r.kernel, r.errors)
        assert {'ours-csf', 'ours-coo'} <= set(r.seconds) and not r.errors
    assert 'numpy' in results[0].seconds
    table = format_tensor(results)
    assert 'MTTKRP  small' in table and 'TTV     small' in table and 'permute small' in table and ' yes' in table
    assert ' NO' not in table
    assert any('small' in line for line in lines)


def _parser():
    import argparse
    parser = argparse.ArgumentParser(prog='sdfgsparse')
    cli.add_parser(parser.add_subparsers(dest='command', required=True))
    return parser


def test_the_command_line_takes_the_suite():
    args = _parser().parse_args(['bench', '--suite', 'tensor', '--quick'])
    assert args.suite == 'tensor' and args.quick
    with pytest.raises(SystemExit):
        _parser().parse_args(['bench', '--suite', 'tensors'])
