"""Every consumer reads the examples recorded on an SDFG (``ss.record_examples``,
``sdfgsparse annotate``) through transformations/examples.py, also after a save and reload:
``ss.optimize`` and ``sdfgsparse optimize`` without matrices (format selection, tiling), and
the SparseIOLowerBound pass on programs whose sparse arguments no analysed node reads
(SDDMM before loop ordering, ``(A - B).T @ x``, attention). Nothing compiles here."""
import re

import dace
import numpy as np
import pytest
import scipy.sparse as sp
from dace.transformation.pass_pipeline import Pipeline

import sdfgsparse as ss
from sdfgsparse.cli import main
from sdfgsparse.transformations import SparseIOLowerBound
from sdfgsparse.transformations.examples import recorded_sizes
from test_format_guard import _band, power  # (tests/transformations is on the path)

M, N, K, D, F = (dace.symbol(s) for s in 'MNKDF')


@dace.program
def atb(A: ss.CSR[dace.float64, N, M], B: dace.float64[N, K]):
    return A.T @ B


@dace.program
def sddmm(S: ss.CSR[dace.float64, M, N], X: dace.float64[M, K], Y: dace.float64[N, K]):
    return S * (X @ Y.T)


@dace.program
def difference_t(A: ss.CSR[dace.float64, M, N], B: ss.CSR[dace.float64, M, N], x: dace.float64[M]):
    return (A - B).T @ x


@dace.program
def attention(S: ss.CSR[dace.float64, M, N], Q: dace.float64[M, D], Kt: dace.float64[N, D], V: dace.float64[N, F]):
    return ss.softmax(S * (Q @ Kt.T)) @ V


def _annotated(prog, examples, tmp_path, **kw):
    """The program's SDFG with recorded examples, saved and reloaded (as a file arrives)."""
    sdfg = prog.to_sdfg()
    ss.record_examples(sdfg, examples, **kw)
    path = str(tmp_path / f'{prog.name}.sdfg')
    sdfg.save(path)
    return path, dace.SDFG.from_file(path)


def _applied(opt):
    return {s.name: s.applied for s in opt.steps}


def test_optimize_without_matrices_reads_the_record(tmp_path, rng):
    band = _band(500)
    path, sdfg = _annotated(power, {'A': band, 'y': np.ones(500)}, tmp_path)
    opt = ss.optimize(sdfg)
    assert _applied(opt)['SparseFormatSelection'] == 1 and opt.conversions == {'A': 'DIA'}
    assert opt.conversions == ss.optimize(power, matrices={'A': band, 'y': np.ones(500)}).conversions
    A = sp.random_array((1000, 1000), density=0.05, format='csr', random_state=5)
    _, sdfg = _annotated(atb, {'A': A, 'B': rng.standard_normal((1000, 64))}, tmp_path, threads=1,
                         cache_bytes=2000 * 8 * 8)
    opt = ss.optimize(sdfg)
    assert _applied(opt)['SparseDenseTiling'] == 1 and 'dense tiles' in opt.report()


def test_command_line_optimize_reads_the_record(tmp_path, capsys):
    path, _ = _annotated(power, {'A': _band(500), 'y': np.ones(500)}, tmp_path)
    out = str(tmp_path / 'out.sdfg')
    assert main(['optimize', path, '-o', out]) == 0
    text = capsys.readouterr().out
    assert 'SparseFormatSelection  applied 1x  A -> DIA' in text and 'no matrices given' not in text
    from sdfgsparse.formats import sparse_type_of
    assert sparse_type_of(dace.SDFG.from_file(out).arrays['A']).fmt.name == 'DIA'


@pytest.mark.parametrize('name', ['sddmm', 'difference_t', 'attention'])
def test_io_bound_pass_with_recorded_examples(name, tmp_path, rng):
    S = sp.random_array((50, 40), density=0.1, format='csr', random_state=1)
    examples = {
        'sddmm': {'S': S, 'X': rng.random((50, 8)), 'Y': rng.random((40, 8))},
        'difference_t': {'A': S, 'B': sp.random_array((50, 40), density=0.1, format='csr', random_state=2),
                         'x': rng.random(50)},
        'attention': {'S': S, 'Q': rng.random((50, 4)), 'Kt': rng.random((40, 4)), 'V': rng.random((40, 3))},
    }[name]
    prog = globals()[name]
    _, sdfg = _annotated(prog, examples, tmp_path)
    with pytest.warns(UserWarning, match='not analysed'):  # (the nodes the bound skips, as without examples)
        result = Pipeline([SparseIOLowerBound(cache_words=4096)]).apply_pass(sdfg, {})['SparseIOLowerBound']
    notes = sdfg.sparse_notes['io_lower_bound']
    at = notes['at_examples']
    sizes = recorded_sizes(sdfg)
    assert at['words'] == pytest.approx(result.evaluate(**{s.name: sizes[s.name] for s in result.total.free_symbols}))
    assert at['words'] >= 50 + 40  # reads the dense operands at least once
    # the user's names, never the internal symbols (15a)
    first = next(iter(examples))
    assert at['sizes'][f'nnz({first})'] == S.nnz
    if name != 'sddmm':  # (the unreordered SDDMM's bound is dense: K*M*N/32)
        assert f'Q >= ' in str(result) and 'nnz(' in str(result).split('\n')[1]
    assert not re.search(r'ss[0-9a-f]+_n1', str(notes) + str(result) + repr(result)), str(result)
    # the same statistic given by hand for an argument no analysed node reads is accepted too
    from sdfgsparse.analysis import io_lower_bound
    with pytest.warns(UserWarning, match='not analysed'):
        io_lower_bound(prog.to_sdfg(), 4096, stats={next(iter(examples)): {'nnz': S.nnz}})
    with pytest.raises(ss.errors.SparseError, match="stats\\['Z'\\]: the program has no sparse operand 'Z'"), \
            pytest.warns(UserWarning, match='not analysed'):
        io_lower_bound(prog.to_sdfg(), 4096, stats={'Z': {'nnz': 3}})


def test_reports_name_sizes_as_the_user_does(tmp_path, rng):
    """opt.report() and the bound's text say nnz(A), never the format layer's symbol (15a)."""
    A = sp.random_array((1000, 1000), density=0.05, format='csr', random_state=5)
    opt = ss.optimize(atb, matrices={'A': A, 'B': rng.standard_normal((1000, 64))})
    text = opt.report()
    assert 'nnz(A)' in text and not re.search(r'ss[0-9a-f]+_n\d', text), text
    from sdfgsparse.analysis import io_lower_bound
    result = io_lower_bound(atb, 4096)
    assert 'nnz(A)' in result.table() and not re.search(r'ss[0-9a-f]+_n\d', result.table() + result.to_json())
    assert result.evaluate(**{s.name: 10 for s in result.total.free_symbols}) > 0  # (evaluate keeps the symbols)
