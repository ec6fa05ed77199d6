"""``ss.optimize(target='fpga')`` models each candidate design on the program as it will be
built (``select.choose_design(program=...)``): the report's chosen row, its choice line and
the total of the lowered program read one number per resource (a GCN layer's choice said
280 DSPs, its total 408: the candidates were modelled on the SpMM alone, without the fused
bias + relu ``write`` stage), the fit to the board counts every stage, and the sizes come
from the recorded examples (``ss.record_examples``, saved and reloaded) as from
``matrices=``. Nothing here is compiled: the programs are lowered and modelled only (K = 2:
six candidates each)."""
import dataclasses
import re
import threading

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.build.naming import content_hash
from sdfgsparse.targets.fpga import model, select

pytestmark = [pytest.mark.filterwarnings('ignore::UserWarning'), pytest.mark.xdist_group('fpga')]

M, N, K = dace.symbol('M'), dace.symbol('N'), dace.symbol('K')
CSR = ss.CSR[dace.float32, M, N, dace.int32]


@dace.program
def choice_gcn(A: CSR, X: dace.float32[N, K], b: dace.float32[K]):
    return np.maximum(A @ X + b, 0)


@dace.program
def choice_spmm(A: CSR, X: dace.float32[N, K]):
    return A @ X


@dace.program
def choice_sddmm(A: CSR, X: dace.float32[M, K], Y: dace.float32[K, N]):
    return ss.sddmm(A, X, Y)


def _examples(name):
    rng = np.random.default_rng(7)
    A = sp.random_array((60, 40), density=0.1, format='csr', dtype=np.float32, rng=rng)
    if name == 'sddmm':
        return {'A': A, 'X': rng.standard_normal((60, 2)).astype(np.float32),
                'Y': rng.standard_normal((2, 40)).astype(np.float32)}
    out = {'A': A, 'X': rng.standard_normal((40, 2)).astype(np.float32)}
    if name == 'gcn':
        out['b'] = rng.standard_normal(2).astype(np.float32)
    return out


PROGRAMS = {'gcn': choice_gcn, 'spmm': choice_spmm, 'sddmm': choice_sddmm}


def _figures(report: str) -> dict:
    """DSP, LUT, FF, BRAM18 (and time) of the report's total, its starred row and its
    choice line."""
    total = re.search(r'^Total: DSP (\d+)/\d+, LUT (\d+)/\d+, FF (\d+)/\d+, BRAM18 (\d+)/', report, re.M)
    ms = re.search(r'^Cycles: [\d,]+ = ([\d.e+-]+) ms', report, re.M)
    (star, ) = [line.split() for line in report.splitlines() if line.startswith('*')]
    line = re.search(r'chosen W=\d+, P=\d+, pumping \d+ \(DSP (\d+), LUT (\d+), FF (\d+), BRAM18 (\d+)\)', report)
    assert total and ms and line, report
    return {'total': tuple(map(int, total.groups())), 'row': tuple(int(x) for x in star[5:9]),
            'line': tuple(map(int, line.groups())), 'total_ms': float(ms.group(1)), 'row_ms': float(star[4][:-2])}


@pytest.mark.parametrize('name', ['gcn', 'spmm', 'sddmm'])
def test_choice_line_chosen_row_and_total_read_one_number(name):
    opt = ss.optimize(PROGRAMS[name], target='fpga', matrices=_examples(name))
    c = opt.fpga_choice
    assert c.op == ('sddmm' if name == 'sddmm' else 'spmm') and c.sizes['k'] == 2 and c.sizes['nnz'] == 240
    f = _figures(opt.fpga_report())
    assert f['total'] == f['row'] == f['line'], f
    assert f['total'] == (c.row['dsp'], c.row['lut'], c.row['ff'], c.row['bram18'])
    assert f['total_ms'] == pytest.approx(f['row_ms'], rel=2e-3, abs=1e-3)
    assert c.program == opt.sdfg.name and 'whole program modelled per candidate' in opt.fpga_report()
    if name == 'gcn':  # the fused bias + relu write stage is in every candidate's figures
        low = model.model_design(opt.lowered)
        assert low.pe('write').dsp > 0 and c.row['dsp'] == low.dsp


def test_a_design_that_fits_only_without_the_write_stage_is_refused(monkeypatch):
    """A board with the DSPs of the GCN layer's smallest design: the SpMM-only ranking (the
    probe, what the choice was made on) picks a design that fits it, but not once the bias
    + relu stage is counted; the choice is one that fits with it, and the report's total
    fits the board."""
    ex = _examples('gcn')
    full = ss.optimize(choice_gcn, target='fpga', matrices=ex).fpga_choice  # (on the U280: everything fits)
    dsp = min(r['dsp'] for r in full.rows)
    monkeypatch.setitem(model.BOARDS, 'gcn_sized', dataclasses.replace(model.BOARDS['u280'], name='gcn_sized', dsp=dsp))
    old = select.choose_design('float32', 'int32', full.sizes, board='gcn_sized')  # (the old ranking)
    assert not old.row['why_not'] and old.row['dsp'] <= dsp  # the SpMM alone fits...
    built = next(r for r in full.rows if r['design'] == old.design)
    assert built['dsp'] > dsp  # ...the program built with it does not
    opt = ss.optimize(choice_gcn, target='fpga', matrices=ex, fpga_board='gcn_sized')
    c = opt.fpga_choice
    refused = next(r for r in c.rows if r['design'] == old.design)
    assert refused['why_not'].startswith('does not fit: dsp'), refused
    assert c.design != old.design and not c.row['why_not'] and c.row['dsp'] <= dsp
    f = _figures(opt.fpga_report())
    assert f['total'] == f['row'] and f['total'][0] <= dsp
    assert re.search(rf'^Total: DSP {c.row["dsp"]}/{dsp}, ', opt.fpga_report(), re.M)


def test_recorded_examples_choose_as_the_matrices_do(tmp_path):
    """An SDFG annotated by ss.record_examples, saved and reloaded, optimised for the FPGA
    without matrices= picks the design (and sizes) it picks with them; the picker read only
    matrices= before (default sizes: 100000 rows, K = 16)."""
    ex = _examples('gcn')
    given = ss.optimize(choice_gcn, target='fpga', matrices=ex).fpga_choice
    sdfg = choice_gcn.to_sdfg()
    ss.record_examples(sdfg, ex)
    path = str(tmp_path / 'annotated.sdfg')
    sdfg.save(path)
    opt = ss.optimize(dace.SDFG.from_file(path), target='fpga')
    c = opt.fpga_choice
    assert c.sizes == given.sizes == {'rows': 60, 'cols': 40, 'nnz': ex['A'].nnz, 'k': 2}
    assert c.design == given.design and c.row['dsp'] == given.row['dsp']
    assert 'at the example matrices' in opt.report()
    f = _figures(opt.fpga_report())
    assert f['total'] == f['row'] and 'K=2' in opt.fpga_report() and 'M=60' in opt.fpga_report()


def test_choosing_from_threads_reads_the_program_only():
    """Four threads choose a design for one SDFG at once: one choice, the same figures, and
    the SDFG unchanged (each candidate is lowered on a copy, once)."""
    sdfg = choice_spmm.to_sdfg()
    before = content_hash(sdfg)
    sizes = {'rows': 60, 'cols': 40, 'nnz': 240, 'k': 2}
    out = [None] * 4

    def work(i):
        out[i] = select.choose_design('float32', 'int32', sizes, program=sdfg, symbols={'M': 60, 'N': 40, 'K': 2})

    threads = [threading.Thread(target=work, args=(i, )) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(c is not None for c in out)
    assert {c.design for c in out} == {out[0].design} and {c.report() for c in out} == {out[0].report()}
    assert all(c.models[d] is out[0].models[d] for c in out for d in c.models)  # (modelled once)
    assert content_hash(sdfg) == before and out[0].program == sdfg.name and not out[0].assumed
