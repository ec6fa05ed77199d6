"""The FPGA resource and performance model (``sdfgsparse.targets.fpga.model``) on the
streaming CSR SpMM prototypes of ``docs/fpga-probe/streaming`` (built by the test helper
``fpga_prototypes``: the plain 4-PE design and the pumpable 6-PE one, multi-pumped by 2
and 4 by its ``pump()``), on a row-pointer SpMV written in DaCe's FPGA-sample style, and on
a program lowered by ``to_fpga``. Every figure is compared with a count by hand from the
model's documented rules (op costs, trips, II), so a change of rule or table shows up here.
No compilation."""
import functools

import dace
import numpy as np
import pytest
import sympy
from dace.memlet import Memlet

import fpga_prototypes
from fpga_prototypes import FPGA_Device, FPGA_Global, M, N, NNZ, pump
from sdfgsparse import errors
from sdfgsparse.targets.fpga import model as fm

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')  # DaCe's memlet propagation on t % P, dynamic ranges
BIG = dict(M=1000, NNZ=10000)


# the prototype's designs (tests/fpga_prototypes.py); the model only reads them, so the plain one is cached
plain = functools.lru_cache(maxsize=None)(fpga_prototypes.plain)


def pumpable(W: int, K: int, dt=dace.float32) -> dace.SDFG:
    """The pumpable 6-PE design with the prototype's distinct FIFO depths (8, 9 for vb_s, 10 for pr_s)."""
    return fpga_prototypes.pumpable(W, K, dt, depth=8, distinct_depths=True)


@functools.lru_cache(maxsize=None)
def pumped_model(W, K, F, dt=dace.float32, board='u280'):
    sdfg = pumpable(W, K, dt)
    if F > 1:
        sdfg.name += f'_f{F}'
        pump(sdfg, F)
    return fm.model_design(sdfg, board=board)


# ---- multi-pumping --------------------------------------------------------------------
def test_pumping_divides_multiply_dsp_at_equal_throughput():
    """The claim: pumping the multiply PE by F keeps its throughput (F times the trips at F
    times the clock) with the DSPs of W/F lanes: fmul f32 = 3 DSP a lane, W=4 -> 12, 6, 3.
    The accumulator (4 fadd lanes, 2 DSP each) is not pumped; gearboxes have no DSP."""
    base = pumped_model(4, 16, 1)
    ref = base.evaluate(**BIG)
    for F, dsp in ((1, 12), (2, 6), (4, 3)):
        mdl = pumped_model(4, 16, F)
        mul = mdl.pe('multiply')
        assert (mul.pumping, mul.dsp, mul.clock_mhz, mul.ops) == (F, dsp, 300.0 * F, {'mul.f32': 4 // F})
        assert mul.schedule == ('FPGA_Multi_Pumped' if F > 1 else 'FPGA_Device')
        assert sympy.simplify(mul.trips - 4 * NNZ * F) == 0  # fast-clock iterations
        assert mdl.pe('accumulate').dsp == 8 and mdl.dsp == dsp + 8
        gearboxes = [p for p in mdl.pes if p.name.startswith('gearbox(')]
        assert len(gearboxes) == (3 if F > 1 else 0) and all(g.dsp == 0 and g.lut > 0 for g in gearboxes)
        assert all(g.pumping == F for g in gearboxes)
        r = mdl.evaluate(**BIG)
        assert r['pe_cycles']['multiply'] == pytest.approx(4 * BIG['NNZ'], rel=1e-3)  # 4 vectors per entry a cycle
        assert r['cycles'] == pytest.approx(ref['cycles'], rel=1e-3)
        assert len(mdl.pes) == 6 + len(gearboxes)
    assert base.dsp / pumped_model(4, 16, 2).dsp == pytest.approx(20 / 14)


def test_dsp_scales_with_vector_width_and_unrolling():
    """The multiply PE has one fmul per lane (3 W DSP), the accumulator one fadd per lane
    (2 W); the plain design's compute PE one fmul + fadd per lane and unrolled kb (5 K)."""
    for W in (2, 4):
        mdl = pumped_model(W, 16, 1)
        assert (mdl.pe('multiply').dsp, mdl.pe('accumulate').dsp) == (3 * W, 2 * W)
        assert mdl.pe('gather').dsp == 0 and mdl.pe('read_rows').dsp == 0  # int32 subtraction: LUTs
    for W, K in ((2, 8), (4, 16), (4, 8)):
        comp = fm.model_design(plain(W, K)).pe('compute_rows')
        assert comp.dsp == 5 * K and comp.ops == {'add.f32': K, 'mul.f32': K}


def test_float64_costs_more_dsp():
    f32, f64 = pumped_model(4, 16, 1), pumped_model(4, 16, 1, dace.float64)
    assert (f64.pe('multiply').dsp, f64.pe('accumulate').dsp) == (11 * 4, 3 * 4)  # dmul 11, dadd 3 a lane
    assert f64.dsp > f32.dsp and f64.lut > f32.lut
    assert f64.pe('accumulate').ii == 2  # dadd 8 cycles over 4 partial sums
    assert pumped_model(4, 16, 2, dace.float64).pe('multiply').dsp == 22


# ---- trips, II, cycles --------------------------------------------------------------------
def test_accumulator_ii_falls_with_more_partial_sums():
    """acc[t % P] with P = K/W partial sums: II = ceil(fadd latency 7 / P)."""
    for K, ii in ((4, 7), (8, 4), (16, 2), (32, 1), (64, 1)):
        acc = pumped_model(4, K, 1).pe('accumulate')
        loop = next(lp for lp in acc.loops if lp.label == 'acc_entries')
        assert (acc.ii, loop.ii) == (ii, ii), K
        assert [v for r, v in loop.ii_reasons.items() if r.startswith('recurrence on acc')] == [ii]
    # the plain design updates acc[kb] every entry: one element, the full adder latency
    loop = next(lp for lp in fm.model_design(plain(4, 16)).pe('compute_rows').loops if lp.label == 'compute_entries')
    assert [v for r, v in loop.ii_reasons.items() if r.startswith('recurrence')] == [7]
    assert loop.ii == 16  # but 4 random reads of X per entry dominate: 4 * 64 / 16


def test_trips_of_dynamic_loops_sum_to_nnz():
    """Rule 1 (FIFO conservation): the per-row loop pops val_s (plain) or pr_s (pumpable) once
    an iteration, so over a call it runs NNZ (plain) or NNZ*K/W (pumpable) times."""
    comp = fm.model_design(plain(4, 16)).pe('compute_rows')
    loops = {lp.label: lp for lp in comp.loops}
    assert (str(loops['compute_entries'].trips), str(loops['compute_entries'].entries)) == ('NNZ', 'M')
    assert loops['compute_entries'].trips_rule == 'pops of val_s'
    assert sympy.simplify(loops['flush_row'].trips - 4 * M) == 0
    acc = {lp.label: lp for lp in pumped_model(4, 16, 2).pe('accumulate').loops}
    assert sympy.simplify(acc['acc_entries'].trips - 4 * NNZ) == 0  # pushed by the packing gearbox
    assert acc['acc_entries'].trips_rule == 'pops of pr_s'
    rows = fm.model_design(plain(4, 16)).pe('read_rows')
    assert rows.ii == 2 and str(rows.trips) == 'M'  # two reads of fpga_pos per iteration on one port


def test_cycles_by_hand_and_linear_in_nnz_and_k():
    """gather: per entry a pop (1), a loop iteration (1), K/W random reads of X at II 4 and the
    restarted pipeline's depth (1 + 1 + 64): NNZ * (68 + 4 K/W), the bottleneck."""
    mdl = pumped_model(4, 16, 1)
    r = mdl.evaluate(**BIG)
    assert r['pe_cycles']['gather'] == 10000 * (68 + 4 * 4) and r['bottleneck'] == 'gather'
    assert r['pe_cycles']['accumulate'] == 10000 * 4 * 2 + 1000 * (8 + 3 + 4 + 2)
    assert r['seconds'] == pytest.approx(r['cycles'] / 300e6)
    by_nnz = [mdl.evaluate(M=1000, NNZ=n)['cycles'] for n in (2000, 4000, 6000)]
    assert by_nnz[2] - by_nnz[1] == pytest.approx(by_nnz[1] - by_nnz[0]) and by_nnz[1] > by_nnz[0]
    assert by_nnz[1] - by_nnz[0] == 2000 * (68 + 16)
    by_k = [pumped_model(4, K, 1).evaluate(**BIG)['cycles'] for K in (16, 32, 48)]
    assert by_k[2] - by_k[1] == pytest.approx(by_k[1] - by_k[0]) and by_k[1] - by_k[0] == 10000 * 4 * 4


# ---- memory -------------------------------------------------------------------------------
def test_bandwidth_matches_hand_count():
    """Per call: pos twice per row (8 M), vals and crd (4 NNZ each), X one vector of K/W per
    entry and kb (NNZ * K/W * 16), Y written once (M * K/W * 16); W=4, K=8."""
    mdl = pumped_model(4, 8, 2)
    want = {'fpga_pos': 8 * 10, 'fpga_vals': 4 * 30, 'fpga_crd': 4 * 30, 'fpga_X': 30 * 2 * 16, 'fpga_Y': 10 * 2 * 16}
    r = mdl.evaluate(rows=10, nnz=30)
    assert r['bytes'] == want and r['bytes_total'] == 1600
    assert {p.array: (p.read_bytes != 0, p.write_bytes != 0) for p in mdl.ports}['fpga_Y'] == (False, True)
    assert r['gbps_needed'] == pytest.approx(1600 / r['seconds'] / 1e9)
    assert r['gbps_board'] == pytest.approx(32 * 14.375 + 2 * 19.2)
    bank = r['banks'][('HBM', '0')]  # no bank assigned: every port on HBM bank 0
    assert sorted(bank['arrays']) == sorted(want) and bank['gbps_peak'] == 14.375
    assert not r['memory_bound']
    u250 = pumped_model(4, 8, 2, board='u250').evaluate(rows=10, nnz=30)
    assert u250['banks'][('DDR', '0')]['gbps_peak'] == 19.2 and u250['gbps_board'] == pytest.approx(76.8)
    assert u250['utilisation']['dsp'] == pytest.approx(mdl.dsp / 12288)


def _spmv_sample(wcr: bool = True) -> dace.SDFG:
    """SpMV in DaCe's FPGA-sample style: a row map around a map over pos[i]:pos[i+1]
    (dynamic range), y[i] accumulated with a WCR in global memory, x read at crd[p]."""
    sdfg = dace.SDFG('spmv_sample' + ('' if wcr else '_nowcr'))
    for a, shape, t in (('pos', [M + 1], dace.int32), ('crd', [NNZ], dace.int32), ('vals', [NNZ], dace.float32),
                        ('x', [N], dace.float32), ('y', [M], dace.float32)):
        sdfg.add_array('fpga_' + a, shape, t, transient=True, storage=FPGA_Global)
    st = sdfg.add_state('spmv')
    rme, rmx = st.add_map('rows', {'i': '0:M'}, schedule=FPGA_Device)
    eme, emx = st.add_map('entries', {'p': 'b:e'}, schedule=FPGA_Device)
    pos = st.add_read('fpga_pos')
    for conn, idx in (('b', 'i'), ('e', 'i + 1')):
        eme.add_in_connector(conn)
        st.add_memlet_path(pos, rme, eme, dst_conn=conn, memlet=Memlet(f'fpga_pos[{idx}]'))
    t = st.add_tasklet('mac', {'v', 'c', 'xs'}, {'o'}, 'o = v * xs[c]')
    st.add_memlet_path(st.add_read('fpga_vals'), rme, eme, t, dst_conn='v', memlet=Memlet('fpga_vals[p]'))
    st.add_memlet_path(st.add_read('fpga_crd'), rme, eme, t, dst_conn='c', memlet=Memlet('fpga_crd[p]'))
    st.add_memlet_path(st.add_read('fpga_x'), rme, eme, t, dst_conn='xs', memlet=Memlet('fpga_x[0:N]'))
    st.add_memlet_path(t, emx, rmx, st.add_write('fpga_y'), src_conn='o',
                       memlet=Memlet('fpga_y[i]', wcr='lambda a, b: a + b'))
    sdfg.validate()
    return sdfg


def test_row_pointer_range_telescopes_and_global_wcr_is_a_recurrence():
    """Rule 2: pos[i]:pos[i+1] over every row sums to the length of vals/crd (NNZ); the WCR
    on y[i] in global memory is a recurrence of fadd + m_axi latency (7 + 64 = 71)."""
    mdl = fm.model_design(_spmv_sample())
    pe = mdl.pe('rows')
    loop = next(lp for lp in pe.loops if lp.label == 'entries')
    assert (str(loop.trips), str(loop.entries)) == ('NNZ', 'M') and 'telescopes' in loop.trips_rule
    assert loop.ii == 71 and (pe.dsp, pe.ops) == (5, {'mul.f32': 1, 'add.f32': 1})
    assert mdl.aliases['nnz'] == 'NNZ' and mdl.aliases['rows'] == 'M'
    r = mdl.evaluate(rows=100, nnz=1000)
    # pos read twice a row (its two range bounds), vals/crd/x once an entry, y read and written per entry (WCR)
    assert r['bytes'] == {'fpga_pos': 800, 'fpga_vals': 4000, 'fpga_crd': 4000, 'fpga_x': 4000, 'fpga_y': 8000}


# ---- report and errors --------------------------------------------------------------------
def test_report_names_every_pe():
    mdl = pumped_model(4, 16, 2)
    names = ['read_rows', 'read_entries', 'gather', 'multiply', 'accumulate', 'write_y', 'gearbox(xv_s->xv_s_pumped)',
             'gearbox(vb_s->vb_s_pumped)', 'gearbox(pr_s_pumped->pr_s)']
    assert sorted(p.name for p in mdl.pes) == sorted(names)
    text = mdl.table(M=1000, NNZ=10000)
    for name in names:
        assert name in text
    assert 'Alveo U280' in text and 'bottleneck gather' in text and 'GB/s' in text and 'mul.f32 x2' in text
    assert 'NNZ' in mdl.table()  # symbolic without values
    assert 'beyond what UltraScale+' in pumped_model(4, 16, 4).table()  # 1200 MHz is noted


def test_model_reads_the_sdfg_only():
    sdfg = pump(pumpable(4, 8), 2)
    before = sdfg.hash_sdfg()
    fm.model_design(sdfg)
    assert sdfg.hash_sdfg() == before


def test_errors_name_the_argument():
    with pytest.raises(errors.ArgumentError, match="board='vu9p' is not one of"):
        fm.model_design(plain(2, 4), board='vu9p')
    with pytest.raises(errors.ArgumentError, match='clock_mhz=0'):
        fm.model_design(plain(2, 4), clock_mhz=0)
    mdl = fm.model_design(plain(2, 4))
    with pytest.raises(errors.ArgumentError, match=r"needs values for \['NNZ'\]"):
        mdl.evaluate(M=10)
    with pytest.raises(errors.ArgumentError, match='Q=3 is not a symbol'):
        mdl.evaluate(M=10, NNZ=3, Q=3)
    with pytest.raises(errors.ArgumentError, match="'nothing' names 0 PEs"):
        mdl.pe('nothing')
    host = dace.SDFG('host_only')
    host.add_array('a', [4], dace.float32)
    st = host.add_state()
    st.add_mapped_tasklet('m', {'i': '0:4'}, {}, 'o = 1', {'o': Memlet('a[i]')}, external_edges=True)
    with pytest.raises(errors.UnsupportedOperationError, match='no FPGA kernel state'):
        fm.model_design(host)


def test_lowered_program():
    """A program lowered by ``to_fpga`` (whatever design it streams): every PE is in the
    report, the aliases find nnz and rows, no trip count is left unknown, and the cycles
    grow with nnz."""
    import sdfgsparse as ss
    Ms, Ns = dace.symbol('Ms'), dace.symbol('Ns')

    @dace.program
    def model_spmv(A: ss.CSR[dace.float32, Ms, Ns, dace.int32], x: dace.float32[Ns]):
        return A @ x

    mdl = fm.model_design(ss.compile(model_spmv, target='fpga').lowered)
    assert {'nnz', 'rows'} <= set(mdl.aliases) and not any('_trips' in n for n in mdl.notes)
    values = {s: 100 for s in mdl.symbols}
    text = mdl.table(**values)
    assert all(p.name in text for p in mdl.pes) and mdl.dsp > 0
    small = mdl.evaluate(**dict(values, nnz=1000))['cycles']
    assert mdl.evaluate(**dict(values, nnz=4000))['cycles'] > small
    assert np.isfinite(small)


def test_streaming_designs_recurrences_and_a_reloaded_sdfg(tmp_path):
    """On the generated designs: the SpMM's accumulator, updated every P * L products,
    runs at II 1 (its recurrence is hidden); the SDDMM's per-entry sum, zeroed in every
    iteration, carries nothing (II = the P pops of its FIFO, no recurrence); an SDFG saved
    and loaded again gives the same figures."""
    import sdfgsparse as ss
    from sdfgsparse.targets.fpga import Design
    Ms, Ns, Ks = dace.symbol('Ms'), dace.symbol('Ns'), dace.symbol('Ks')

    @dace.program
    def model_spmm_sddmm(A: ss.CSR[dace.float32, Ms, Ns, dace.int32], B: dace.float32[Ns, Ks],
                         X: dace.float32[Ms, Ks], Y: dace.float32[Ks, Ns]):
        return A @ B, ss.sddmm(A, X, Y)

    low = ss.compile(model_spmm_sddmm, target='fpga', design=Design(vector_width=4, accumulators=2)).lowered
    mdl = fm.model_design(low)
    acc = next(lp for p in mdl.pes if p.name.endswith('/accumulate') for lp in p.loops if lp.label == 'accumulate_row')
    assert acc.ii == 1 and any('recurrence on acc' in r and 'over 8 element' in r for r in acc.ii_reasons), acc
    red = next(lp for p in mdl.pes if p.name.endswith('/reduce') for lp in p.loops if lp.label == 'reduce')
    assert red.ii == 2 and not any('recurrence' in r for r in red.ii_reasons), red
    values = {s: 50 for s in mdl.symbols}
    path = tmp_path / 'lowered.sdfg'
    low.save(str(path))
    again = fm.model_design(dace.SDFG.from_file(str(path)))
    for key in ('cycles', 'dsp', 'lut', 'ff', 'bram18', 'bytes_total', 'bottleneck'):
        assert again.evaluate(**values)[key] == mdl.evaluate(**values)[key], key
    assert len(again.table(**values)) == len(mdl.table(**values))
