"""The FPGA design choice (``sdfgsparse.targets.fpga.select``), ``ss.optimize(target='fpga')``
with example matrices and ``fpga_report()``, and ``sdfgsparse bench --target fpga``."""
import dataclasses
import gzip
import io
import os
from contextlib import redirect_stdout

import dace
import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse import errors
from sdfgsparse.targets.fpga import design_of, model, select

pytestmark = [pytest.mark.filterwarnings('ignore::UserWarning'), pytest.mark.xdist_group('fpga')]

M, N, K = dace.symbol('M'), dace.symbol('N'), dace.symbol('K')
SIZES = {'rows': 3000, 'cols': 3000, 'nnz': 30000, 'k': 4}


def rows_of(choice, **want):
    return [r for r in choice.rows if all(getattr(r['design'], k) == v for k, v in want.items())]


def test_pumping_halves_the_multiply_dsps_at_equal_time():
    """The model's claim, on the generated designs: pumping the multiply element by 2
    halves its DSPs (by 4: a quarter) and leaves the modelled time unchanged; at 300 MHz a
    4x clock (1200 MHz) is refused, so the choice is the 2x pump of the fastest design."""
    choice = select.choose_design('float32', 'int32', SIZES, board='u280', clock_mhz=300)
    for d in {dataclasses.replace(r['design'], pumping=1) for r in choice.rows if r['design'].pumping == 1}:
        if d.vector_width < 2:
            continue
        mults = {}
        for f in (1, 2, 4):
            if d.vector_width % f == 0:
                m = select._model('float32', 'int32', dataclasses.replace(d, pumping=f), 'u280', 300.0)
                mults[f] = (m.pe('multiply').dsp, select._evaluate(m, {**select.DEFAULT_SIZES, **SIZES})['cycles'])
        assert mults[2][0] * 2 == mults[1][0], (d, mults)
        assert mults[2][1] == pytest.approx(mults[1][1], rel=1e-3)
        if 4 in mults:
            assert mults[4][0] * 4 == mults[1][0]
    assert all('1200 MHz above 650 MHz' in r['why_not'] for r in rows_of(choice, pumping=4))
    fastest = min(r['seconds'] for r in choice.rows if not r['why_not'])
    assert choice.design.pumping == 2
    twins = rows_of(choice, vector_width=choice.design.vector_width, accumulators=choice.design.accumulators)
    chosen = next(r for r in twins if r['design'].pumping == 2)
    unpumped = next(r for r in twins if r['design'].pumping == 1)
    assert chosen['seconds'] <= fastest * 1.02 and unpumped['seconds'] == pytest.approx(chosen['seconds'], rel=1e-3)
    assert unpumped['dsp'] > chosen['dsp']
    assert 'fewest DSPs' in choice.rule and 'pumped by 2 at 600 MHz' in choice.rule
    text = choice.report()
    assert text.count('\n') == len(choice.rows) + 2 and '* ' in text


def test_a_slower_clock_allows_pumping_by_four():
    choice = select.choose_design('float32', 'int32', SIZES, clock_mhz=150)
    assert choice.design.pumping == 4 and 'at 600 MHz' in choice.rule
    assert not any(r['why_not'] for r in choice.rows)


def test_a_board_too_small_limits_the_vector_width(monkeypatch):
    """On a board of 40 DSPs the widest designs do not fit; the choice is the fastest one
    that does."""
    tiny = dataclasses.replace(model.BOARDS['u280'], name='tiny', dsp=40)
    monkeypatch.setitem(model.BOARDS, 'tiny', tiny)
    choice = select.choose_design('float32', 'int32', SIZES, board='tiny')
    fits = [r for r in choice.rows if not r['why_not']]
    assert fits and all(r['dsp'] <= 40 for r in fits)
    assert any(r['why_not'].startswith('does not fit: dsp') for r in choice.rows)
    best = rows_of(choice, vector_width=choice.design.vector_width, accumulators=choice.design.accumulators,
                   pumping=choice.design.pumping)[0]
    assert best['dsp'] <= 40 and best['seconds'] <= min(r['seconds'] for r in fits) * 1.02


def test_candidates():
    assert {d.vector_width for d in select.candidates(1)} == {1, 2}
    assert max(d.vector_width for d in select.candidates(64)) == 16
    assert all(d.vector_width % d.pumping == 0 for d in select.candidates(16))


def test_optimize_chooses_and_reports_the_design():
    """``ss.optimize(target='fpga', matrices=...)``: the design chosen at the example's
    sizes, the GCN layer streamed and pumped as chosen, ``fpga_report()`` with every
    element and the candidates, and results equal to scipy."""

    @dace.program
    def fpga_select_gcn(A: ss.CSR[dace.float32, M, N, dace.int32], X: dace.float32[N, K], b: dace.float32[K]):
        return np.maximum(A @ X + b, 0)

    rng = np.random.default_rng(4)
    A = sp.random_array((300, 200), density=0.05, format='csr', dtype=np.float32, rng=rng)
    X = rng.standard_normal((200, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    opt = ss.optimize(fpga_select_gcn, target='fpga', matrices={'A': A, 'X': X, 'b': b})
    c = opt.fpga_choice
    assert c.sizes == {'rows': 300, 'cols': 200, 'nnz': A.nnz, 'k': 4}
    low = opt.lowered
    (info, ) = [design_of(st) for st in low.states() if design_of(st)]
    assert info['design'] == c.design and info['epilogue']
    assert 'FPGA design' in opt.report() and f'W={c.design.vector_width}' in opt.report()
    report = opt.fpga_report()
    for pe in ('read_rows', 'read_entries', 'gather', 'multiply', 'accumulate', 'write', 'Cycles:', 'chosen W='):
        assert pe in report, pe
    assert 'M=300' in report and 'K=4' in report
    values = {s: 10 for s in model.model_design(low).symbols}
    assert 'M=10,' in opt.fpga_report(**values) and 'M=300' not in opt.fpga_report(**values)
    np.testing.assert_allclose(opt(A, X, b), np.maximum(A.toarray() @ X + b, 0), rtol=1e-5, atol=1e-5)
    # the example gives A only: the report takes the dense width the design was chosen at
    only_a = ss.optimize(fpga_select_gcn, target='fpga', matrices={'A': A})
    assert only_a.fpga_choice.sizes['k'] == select.DEFAULT_SIZES['k']
    assert f'K={select.DEFAULT_SIZES["k"]}, M=300' in only_a.fpga_report()
    with pytest.raises(errors.ArgumentError, match='fpga_clock_mhz must be a positive'):
        ss.optimize(fpga_select_gcn, target='fpga', fpga_clock_mhz=0)
    with pytest.raises(errors.ArgumentError, match="fpga_board 'u999'"):
        ss.optimize(fpga_select_gcn, target='fpga', fpga_board='u999')
    sdfg = fpga_select_gcn.to_sdfg()  # (an SDFG is optimised in place: refused before any change)
    before = sdfg.hash_sdfg()
    with pytest.raises(errors.ArgumentError, match="fpga_board 'u999'"):
        ss.optimize(sdfg, target='fpga', fpga_board='u999')
    assert sdfg.hash_sdfg() == before
    with pytest.raises(errors.UnsupportedOperationError, match="not 'fpga'"):
        ss.optimize(fpga_select_gcn).fpga_report()


def _write_mtx(folder, name, A):
    buf = io.BytesIO()
    scipy.io.mmwrite(buf, sp.coo_matrix(A))
    with gzip.open(os.path.join(folder, name + '.mtx.gz'), 'wb') as f:
        f.write(buf.getvalue())


def test_bench_target_fpga(tmp_path):
    """``sdfgsparse bench --target fpga``: the table per kernel and matrix (model and
    C-simulation check), the pumping comparison and the choice; bad options exit 2."""
    from sdfgsparse.bench.cli import main
    rng = np.random.default_rng(8)
    _write_mtx(tmp_path, 'small', sp.random(120, 90, density=0.05, random_state=rng))
    out = io.StringIO()
    with redirect_stdout(out):
        rc = main(['bench', '--target', 'fpga', '--matrices', str(tmp_path), '--kernels', 'spmv,spmm:4,sddmm:4',
                   '--no-progress'])
    text = out.getvalue()
    assert rc == 0, text
    rows = [line for line in text.splitlines() if line.startswith(('spmv ', 'spmm:4 ', 'sddmm:4 '))]
    assert len(rows) == 3 and all('small' in r and ' 120 ' in r and 'WRONG' not in r for r in rows), text
    assert 'FPGA design for an SDDMM' in text
    assert 'Multi-pumping at the largest matrix' in text and '-50% multiply DSP' in text
    assert 'chosen W=' in text
    with redirect_stdout(io.StringIO()) as out:  # the board and clock reach the choice and the model
        assert main(['bench', '--target', 'fpga', '--matrices', str(tmp_path), '--kernels', 'spmm:4', '--board', 'u250',
                     '--clock-mhz', '150']) == 0
    text = out.getvalue()  # (U250: 4 DDR banks, 76.8 GB/s; the element clocks are the kernel's 150 MHz times F)
    assert 'on u250 at 150 MHz' in text and '/76.8 ' in text and 'DSP at 150 MHz' in text, text
    for bad in (['--board', 'u999'], ['--kernels', 'spmv:4'], ['--kernels', 'sddmm:0'], ['--kernels', 'spgemm'],
                ['--clock-mhz', '0']):
        with redirect_stdout(io.StringIO()):
            assert main(['bench', '--target', 'fpga', '--matrices', str(tmp_path)] + bad) == 2, bad


def test_lowered_is_the_built_sdfg_for_every_target():
    """``opt.lowered`` is public for every target: for 'fpga' the lowered copy (kernel
    states with the design; ``opt.sdfg`` keeps the program's sparse signature), which
    survives a JSON round trip; for 'cpu' and 'gpu' the optimised SDFG itself."""

    @dace.program
    def lowered_spmv(A: ss.CSR[dace.float32, M, N, dace.int32], x: dace.float32[N]):
        return A @ x

    rng = np.random.default_rng(5)
    A = sp.random_array((60, 40), density=0.1, format='csr', dtype=np.float32, rng=rng)
    x = rng.standard_normal(40).astype(np.float32)
    fpga = ss.optimize(lowered_spmv, target='fpga', matrices={'A': A, 'x': x})
    low = fpga.lowered
    assert low is not fpga.sdfg and low is fpga.lowered
    assert [design_of(st) for st in low.states() if design_of(st)], 'no FPGA kernel state'
    assert not [st for st in fpga.sdfg.states() if design_of(st)]
    assert any(d.storage == dace.StorageType.FPGA_Global for d in low.arrays.values())
    again = dace.SDFG.from_json(low.to_json())
    again.validate()
    assert sorted(again.arrays) == sorted(low.arrays)
    np.testing.assert_allclose(fpga(A, x), A @ x, rtol=1e-4, atol=1e-5)
    cpu, gpu = (ss.optimize(lowered_spmv, target=t, matrices={'A': A, 'x': x}) for t in ('cpu', 'gpu'))
    assert cpu.lowered is cpu.sdfg and gpu.lowered is gpu.sdfg
    assert any(d.storage == dace.StorageType.GPU_Global for d in gpu.lowered.arrays.values())
