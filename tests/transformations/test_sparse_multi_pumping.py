"""``SparseMultiPumping`` on a streaming CSR SpMM whose multiply PE only talks through
W-wide vector streams, C-simulated (:mod:`sdfgsparse.targets.fpga.csim`) and compared with
scipy and with the same design unpumped, for (W, F) = (4, 2), (4, 4), (2, 2).

The design (``Y = A @ X``, A in CSR, K a build-time constant), the pumpable prototype of
``docs/fpga-probe/streaming`` built by the test helper ``fpga_prototypes``::

    read_rows    : fpga_pos            -> len_s (int32)
    read_entries : fpga_vals, fpga_crd -> val_s (f32), crd_s (i32)
    gather       : val_s, crd_s, fpga_X -> xv_s = X[c, kb], vb_s = broadcast(v)  (vec W, K/W per entry)
    multiply     : vb_s, xv_s          -> pr_s = vb * xv   map t in 0:NNZ*K/W    <- the pumpable PE
    accumulate   : len_s, pr_s         -> out_s (row sums in registers)
    write_y      : out_s               -> fpga_Y

Every stream has the same depth, so that two streams of one PE have equal descriptors
(``_dace_compat`` patch 20). A C-simulation that deadlocks never returns: each call runs in
a thread and the test fails after ``CALL_TIMEOUT`` seconds.
"""
import copy
import os
import re
import threading

import dace
import numpy as np
import pytest
import scipy.sparse as sp
from dace import dtypes

from fpga_prototypes import NNZ, pumpable, random_csr
from sdfgsparse.targets.fpga import csim, pumping, toolchain
from sdfgsparse.transformations import SparseMultiPumping

pytestmark = [pytest.mark.filterwarnings('ignore::UserWarning'), pytest.mark.xdist_group('fpga')]

K = 8
DEPTH = 8
CALL_TIMEOUT = 60
PES = ['read_rows', 'read_entries', 'gather', 'multiply', 'accumulate', 'write_y']


def build_pumpable(W: int, name: str) -> dace.SDFG:
    """The design of the module docstring: the prototype's (:func:`fpga_prototypes.pumpable`),
    every stream ``DEPTH`` deep."""
    return pumpable(W, K, dace.float32, depth=DEPTH, distinct_depths=False, name=name)


def pumped(W: int, F: int) -> dace.SDFG:
    sdfg = build_pumpable(W, f'spmm_pump_w{W}_f{F}')
    if F:
        pe, = [p for p in pumping.pumpable_elements(sdfg, F) if p.pumpable]
        SparseMultiPumping(factor=F).apply_to(sdfg, pe)
        sdfg.validate()
    return sdfg


# ---------------------------------------------------------------------- builds and calls
_BUILT = {}


@pytest.fixture(scope='module')
def build(tmp_path_factory):
    """``build(W, F)``: the C-simulation of :func:`pumped` (F = 0: unpumped), once per module."""
    if toolchain.compiler() is None or toolchain.ap_types_dir() is None:
        pytest.skip('no FPGA C-simulation toolchain (a C++17 compiler and the ap_int headers)')
    folder = str(tmp_path_factory.mktemp('pump'))

    def get(W, F):
        if (W, F) not in _BUILT:
            with dace.config.set_temporary('default_build_folder', value=folder):
                _BUILT[W, F] = csim.compile_csim(pumped(W, F))
        return _BUILT[W, F]

    yield get
    _BUILT.clear()


def matrices():
    rng = np.random.default_rng(7)
    return {'random 23x17': random_csr(23, 17, 0.25, rng),
            'empty rows 12x9': random_csr(12, 9, 0.4, rng, empty_rows=(0, 3, 4, 11)),
            'nnz=0 6x5': sp.csr_matrix((6, 5), dtype=np.float32)}


def spmm(compiled, A, X):
    """``A @ X`` by the C-simulation; fails the test when it does not finish (deadlock)."""
    m, n = A.shape
    Y = np.full((m, K), np.nan, dtype=np.float32)  # every row must be written
    args = dict(pos=np.array(A.indptr, np.int32), crd=np.array(A.indices, np.int32),
                vals=np.array(A.data, np.float32), X=X, Y=Y, M=m, N=n, NNZ=int(A.nnz))
    box = {}

    def run():
        try:
            compiled(**args)
            csim.check_error(compiled)
        except BaseException as ex:  # reported by the test's thread
            box['error'] = ex

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(CALL_TIMEOUT)
    if worker.is_alive():
        pytest.fail(f'{compiled.sdfg.name}: the C-simulation did not finish in {CALL_TIMEOUT} s (deadlock)')
    if 'error' in box:
        raise box['error']
    return Y


# ---------------------------------------------------------------------- applicability
def test_pumpable_elements_names_the_multiply_pe_only():
    for W, F in ((4, 2), (4, 4), (2, 2)):
        pes = pumping.pumpable_elements(build_pumpable(W, 'probe'), F)
        assert [pe.name for pe in pes] == PES
        assert [pe.name for pe in pes if pe.pumpable] == ['multiply'], (W, F, pes)
        why = {pe.name: pe.reason for pe in pes}
        assert 'global array fpga_pos at its boundary' in why['read_rows']
        assert 'scalar stream len_s (int32)' in why['read_rows']
        assert 'global array fpga_X' in why['gather'] and 'scalar stream val_s' in why['gather']
        assert re.search(r'data-dependent map range of acc_entries \(rl\), where pr_s is accessed', why['accumulate'])
        assert 'global array fpga_Y' in why['write_y']
    pes = pumping.pumpable_elements(build_pumpable(2, 'probe'), 4)
    assert not [pe for pe in pes if pe.pumpable]
    multiply = next(pe for pe in pes if pe.name == 'multiply')
    assert multiply.reasons == tuple(f'stream {s} carries 2 lanes, not a multiple of factor 4'
                                     for s in ('vb_s', 'xv_s', 'pr_s'))


def test_factor_must_be_2_or_4():
    for bad in (3, 1, 8, True, 2.5, '2'):
        with pytest.raises(ValueError, match='factor must be one of'):
            SparseMultiPumping(factor=bad)
    xf = SparseMultiPumping()
    assert xf.factor == 2 and SparseMultiPumping.CATEGORY == 'Sparse'
    with pytest.raises(ValueError, match=r'factor=3'):
        xf.factor = 3
    assert xf.factor == 2
    xf.factor = 4
    again = SparseMultiPumping.from_json(xf.to_json())
    assert type(again) is SparseMultiPumping and again.factor == 4
    sdfg = build_pumpable(4, 'probe')
    pe = next(p for p in pumping.pumpable_elements(sdfg, 2) if p.pumpable)
    with pytest.raises(ValueError, match='factor must be one of'):
        SparseMultiPumping.apply_to(sdfg, pe, factor=3)
    assert all(p.reasons == ('factor 3 is not one of (2, 4)', ) for p in pumping.pumpable_elements(sdfg, 3))
    assert not any(isinstance(n, dace.nodes.MapEntry) and n.map.schedule == dtypes.ScheduleType.FPGA_Multi_Pumped
                   for n, _ in sdfg.all_nodes_recursive())


def test_other_pes_are_refused_and_left_alone():
    sdfg = build_pumpable(4, 'probe')
    before = sdfg.to_json()
    gather = next(pe for pe in pumping.pumpable_elements(sdfg, 2) if pe.name == 'gather')
    assert not SparseMultiPumping(factor=2).can_be_applied_to(sdfg, gather)
    with pytest.raises(ValueError, match="cannot pump PE 'gather'.*global array fpga_X"):
        SparseMultiPumping(factor=2).apply_to(sdfg, gather)
    # DaCe's own subgraph-transformation entry points agree
    assert not SparseMultiPumping(factor=2).can_be_applied(sdfg, gather.subgraph)
    multiply = next(pe for pe in pumping.pumpable_elements(sdfg, 2) if pe.name == 'multiply')
    assert SparseMultiPumping(factor=2).can_be_applied(sdfg, multiply.subgraph)
    nodes_of_two = list(gather.subgraph.nodes())[:1] + list(multiply.subgraph.nodes())[:1]
    with pytest.raises(ValueError, match='span 2 processing elements'):
        SparseMultiPumping.apply_to(sdfg, *nodes_of_two)
    assert sdfg.to_json() == before


@pytest.mark.parametrize('W,F', [(4, 2), (4, 4), (2, 2)])
def test_pumped_iteration_counts(W, F):
    """DaCe 1.0.2 doubles the pumped map's range whatever the factor: the map runs F times
    the original count over W/F-wide vectors, and each gearbox converts every wide vector."""
    KB = K // W
    sdfg = build_pumpable(W, 'probe')
    state = next(s for s in sdfg.states() if s.label == 'spmm_kernel')
    entry = next(n for n in state.nodes() if isinstance(n, dace.nodes.MapEntry) and n.map.label == 'multiply')
    # any node of the PE names it; called on the class with the factor as keyword
    assert SparseMultiPumping.apply_to(sdfg, entry, factor=F) is entry
    sdfg.validate()
    assert entry.map.schedule == dtypes.ScheduleType.FPGA_Multi_Pumped
    assert dace.symbolic.simplify(entry.map.range.num_elements() - F * KB * NNZ) == 0
    gearboxes = [n for n in state.nodes() if type(n).__name__ == 'Gearbox']
    assert len(gearboxes) == 3
    assert all(dace.symbolic.simplify(g.size - KB * NNZ) == 0 for g in gearboxes)
    for s in ('vb_s', 'xv_s', 'pr_s'):
        assert sdfg.arrays[f'{s}_pumped'].veclen == W // F
    assert pumping.pumped_factors(sdfg) == {F}
    assert pumping.kernel_clocks(sdfg) == f'"0:300\\|1:{300 * F}"'
    assert pumping.kernel_clocks(sdfg, memory_mhz=250) == f'"0:250\\|1:{250 * F}"'
    before = dace.Config.get('compiler', 'xilinx', 'frequency')
    with pumping.clock_config(sdfg) as clocks:
        assert dace.Config.get('compiler', 'xilinx', 'frequency') == clocks
    assert dace.Config.get('compiler', 'xilinx', 'frequency') == before
    why = {pe.name: pe.reason for pe in pumping.pumpable_elements(sdfg, F)}
    assert why['multiply'] == 'already multi-pumped'
    assert pumping.kernel_clocks(build_pumpable(W, 'probe')) is None


# ---------------------------------------------------------------------- generated code
def _device_code(sdfg):
    from dace.codegen import codegen
    return {o.name: o.clean_code for o in codegen.generate_code(copy.deepcopy(sdfg)) if o.target_type == 'device'}


def test_equal_depth_streams_cross_into_the_pumped_kernel(monkeypatch):
    """``_dace_compat`` patch 20: xv_s and vb_s (gather), pr_s and out_s (accumulate) have
    equal descriptors; the streams to and from the pumped kernel must be kernel ports, not
    FIFOs local to the slow kernel (which DaCe 1.0.2 made them: deadlock)."""
    from dace.codegen.targets import fpga
    sdfg = pumped(4, 2)
    local = re.compile(r'^\s*dace::FIFO<[^>]*> (\w+)\("', re.MULTILINE)
    code = _device_code(sdfg)
    assert local.findall(code['spmm_kernel_0_0']) == []
    for s in ('xv_s', 'vb_s', 'pr_s'):
        assert f'#pragma HLS INTERFACE axis port={s}' in code['spmm_kernel_0_0']
    assert sorted(local.findall(code['spmm_kernel_0_0_pumped'])) == ['pr_s_pumped', 'vb_s_pumped', 'xv_s_pumped']
    monkeypatch.setattr(fpga, 'is_external_stream', fpga.is_external_stream.__wrapped__)  # DaCe's own
    assert sorted(local.findall(_device_code(sdfg)['spmm_kernel_0_0'])) == ['pr_s', 'vb_s', 'xv_s']


def test_patch_pumped_host(tmp_path):
    host = tmp_path / 'src' / 'xilinx' / 'host'
    host.mkdir(parents=True)
    text = ('//DACE_EXPORTED void k_0_0_pumped(int NNZ, dace::FIFO<float, 4, 8> &pr_s);\n'
            'DACE_EXPORTED void k_0_0(int *x);\n'
            '    auto a = program.MakeKernel(k_0_0, "k_0_0", x);\n'
            '    auto b = program.MakeKernel("k_0_0_pumped_top", NNZ,  hlslib::ocl::SimulationOnly(pr_s));\n')
    (host / 'prog.cpp').write_text(text)
    (host / 'plain.cpp').write_text(text.splitlines(keepends=True)[1])
    assert pumping.patch_pumped_host(str(tmp_path)) == [str(host / 'prog.cpp')]
    assert (host / 'prog.cpp').read_text() == (
        'DACE_EXPORTED void k_0_0_pumped(int NNZ, dace::FIFO<float, 4, 8> &pr_s);\n'
        'DACE_EXPORTED void k_0_0(int *x);\n'
        '    auto a = program.MakeKernel(k_0_0, "k_0_0", x);\n'
        '    auto b = program.MakeKernel(k_0_0_pumped, "k_0_0_pumped_top", NNZ,  hlslib::ocl::SimulationOnly(pr_s));\n')
    assert pumping.patch_pumped_host(str(tmp_path)) == []  # idempotent
    assert pumping.patch_pumped_host(str(tmp_path / 'missing')) == []


# ---------------------------------------------------------------------- C-simulation
@pytest.fixture(scope='module')
def unpumped_results(build):
    """Y of the unpumped W=4 design for each matrix (and the X it used)."""
    compiled = build(4, 0)
    rng = np.random.default_rng(11)
    out = {}
    for name, A in matrices().items():
        X = rng.standard_normal((A.shape[1], K)).astype(np.float32)
        out[name] = (A, X, spmm(compiled, A, X))
    return out


@pytest.mark.parametrize('W,F', [(4, 2), (4, 4), (2, 2)])
def test_pumped_matches_scipy_and_unpumped(build, unpumped_results, W, F):
    compiled = build(W, F)
    for name, (A, X, unpumped) in unpumped_results.items():
        Y = spmm(compiled, A, X)
        ref = A.astype(np.float64) @ X.astype(np.float64)
        np.testing.assert_allclose(Y, ref, rtol=1e-4, atol=1e-4, err_msg=f'W={W} F={F}: {name}')
        np.testing.assert_array_equal(Y, unpumped, err_msg=f'W={W} F={F}: {name} (pumped vs unpumped)')


def test_host_launches_the_pumped_kernel(build):
    compiled = build(4, 2)
    folder = os.path.dirname(os.path.dirname(compiled.filename))
    host_dir = os.path.join(folder, 'src', 'xilinx', 'host')
    host = ''.join(open(os.path.join(host_dir, f)).read() for f in os.listdir(host_dir))
    assert re.search(r'^DACE_EXPORTED void spmm_kernel_0_0_pumped\(', host, re.MULTILINE)
    assert '//DACE_EXPORTED' not in host
    assert 'MakeKernel(spmm_kernel_0_0_pumped, "spmm_kernel_0_0_pumped_top",' in host
    device = os.listdir(os.path.join(folder, 'src', 'xilinx', 'device'))
    assert 'spmm_kernel_0_0_pumped.ip.cpp' in device and 'spmm_kernel_0_0_pumped_top.v' in device
