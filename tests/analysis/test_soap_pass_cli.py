"""The analysis as a DaCe Pass, the ``analyze`` command line, and the error paths."""
import argparse
import json

import dace
import numpy as np
import pytest
import sympy
from dace.transformation import pass_pipeline as ppl

from sdfgsparse.analysis import (S, InvalidCacheSizeError, IOBoundResult, IOLowerBoundPass, SymbolClashError,
                                 UnboundSymbolError, UnsupportedProgramError, io_lower_bound)
from sdfgsparse.scripting import analyze as cli
from soap_kernels import K, M, N


# ---------------------------------------------------------------------- Pass
def test_pass_contract():
    p = IOLowerBoundPass()
    assert IOLowerBoundPass.CATEGORY == 'Analysis'
    assert p.modifies() == ppl.Modifies.Nothing
    assert p.should_reapply(ppl.Modifies.Everything) is False
    assert 'cache_words' in type(p).__properties__
    assert type(p).__properties__['cache_words'].desc


def test_pass_in_a_pipeline(kernel_sdfg):
    sdfg = kernel_sdfg('gemm')
    results = {}
    ppl.Pipeline([IOLowerBoundPass(cache_words=64)]).apply_pass(sdfg, results)
    res = results['IOLowerBoundPass']
    assert isinstance(res, IOBoundResult)
    assert sympy.expand(res.total - N * M * K / 4) == 0


def test_pass_symbolic_by_default(kernel_sdfg):
    res = IOLowerBoundPass().apply_pass(kernel_sdfg('gemm'), {})
    assert sympy.expand(res.total - 2 * N * M * K / sympy.sqrt(S)) == 0
    assert 'Q >=' in IOLowerBoundPass().report(res)


def test_pass_properties_serialise():
    p = IOLowerBoundPass(cache_words=512)
    d = p.to_json()
    assert d['transformation'] == 'IOLowerBoundPass' and d['CATEGORY'] == 'Analysis'
    assert d['cache_words'] == 512


# ---------------------------------------------------------------------- command line
def _parse(argv):
    parser = argparse.ArgumentParser(prog='sdfgsparse')
    add = parser.add_subparsers(dest='command', required=True)
    cli.add_parser(add)
    return parser.parse_args(argv)


def test_cli_table(kernel_sdfg, tmp_path, capsys):
    path = tmp_path / 'mm.sdfg'
    kernel_sdfg('gemm').save(str(path))
    args = _parse(['analyze', str(path), '--cache-words', '4096'])
    assert args.func is cli.run
    assert cli.run(args) == 0
    out = capsys.readouterr().out
    assert 'Q >= K*M*N/32' in out and 'A[i, k] read' in out


def test_cli_json(kernel_sdfg, tmp_path, capsys):
    path = tmp_path / 'mm.sdfg'
    kernel_sdfg('gemm').save(str(path))
    assert cli.main(['analyze', str(path), '--json']) == 0
    data = json.loads(capsys.readouterr().out)
    assert data['total'] == '2*K*M*N/sqrt(S)' and data['statements'][0]['tiles']['i'] == 'sqrt(S)'


def test_cli_missing_file(tmp_path, capsys):
    assert cli.run(_parse(['analyze', str(tmp_path / 'nope.sdfg')])) == 2
    assert 'no such file' in capsys.readouterr().err


def test_cli_unreadable_file(tmp_path, capsys):
    bad = tmp_path / 'bad.sdfg'
    bad.write_text('{not json')
    assert cli.run(_parse(['analyze', str(bad)])) == 2
    assert 'not a readable SDFG' in capsys.readouterr().err


@pytest.mark.parametrize('words', ['0', '-5', 'lots'])
def test_cli_rejects_bad_cache_words(words, capsys):
    with pytest.raises(SystemExit):
        _parse(['analyze', 'x.sdfg', '--cache-words', words])
    assert '--cache-words' in capsys.readouterr().err


# ---------------------------------------------------------------------- errors
@pytest.mark.parametrize('obj', [42, 'prog.sdfg', np.ones(3)])
def test_rejects_non_programs(obj):
    with pytest.raises(UnsupportedProgramError, match='expected a dace.SDFG or a @dace.program'):
        io_lower_bound(obj)


@pytest.mark.parametrize('size', [0, -1, 2.5, True, '64'])
def test_rejects_bad_cache_sizes(kernel_sdfg, size):
    with pytest.raises(InvalidCacheSizeError, match='cache_size='):
        io_lower_bound(kernel_sdfg('gemm'), cache_size=size)


def test_accepts_numpy_cache_size(kernel_sdfg):
    res = io_lower_bound(kernel_sdfg('gemm'), cache_size=np.int64(64))
    assert sympy.expand(res.total - N * M * K / 4) == 0


def test_symbol_named_S_clashes():
    S_ = dace.symbol('S')

    @dace.program
    def scale(A: dace.float64[S_]):
        for i in dace.map[0:S_]:
            A[i] = 2 * A[i]

    with pytest.raises(SymbolClashError, match='own symbol S'):
        io_lower_bound(scale)
    assert io_lower_bound(scale, cache_size=8).total.free_symbols == {S_}


def test_program_that_fails_to_convert():

    class Broken:

        def to_sdfg(self):
            raise RuntimeError('cannot parse')

    with pytest.raises(UnsupportedProgramError, match='to_sdfg\\(\\) failed'):
        io_lower_bound(Broken())


def test_evaluate_names_missing_symbols(kernel_sdfg):
    res = io_lower_bound(kernel_sdfg('gemm'))
    with pytest.raises(UnboundSymbolError, match='no value for symbol'):
        res.evaluate(N=4)
    assert res.evaluate(N=4, M=4, K=4, S=16) == pytest.approx(32)
