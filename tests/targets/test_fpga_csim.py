"""The FPGA target: programs lowered for the FPGA, DaCe's Xilinx code generated, and run as a
g++ C-simulation (``sdfgsparse.targets.fpga``), against scipy over the zoo in every format.

One program per (format, signature) computes the dense-result operations, a transposed
view and sparse results on A's pattern, so each compiles once (~4 s); data-dependent
results and intermediates in CSR; the C-simulation host shim is also tested on its own
(kernels running concurrently, a kernel's error reported)."""
import os
import subprocess
import textwrap
import warnings

import dace
import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.targets.fpga import csim, lower, streaming, toolchain
from sparse_zoo import FORMATS, REAL, as_format, dense, real_matrix, zoo

pytestmark = [pytest.mark.filterwarnings('ignore::UserWarning'), pytest.mark.xdist_group('fpga')]

M, N, K = dace.symbol('M'), dace.symbol('N'), dace.symbol('K')
SIGNATURES = [(dace.float32, dace.int32), (dace.float64, dace.int64)]
OPS = ['A@x', 'relu(A@B+bias)', 'xt@A', 'A.sum(0)', 'A.sum(1)', 'D-A', 'A+D', 'A.T@xt', 'sddmm', '2*A', 'relu(A)']
_PROGRAMS = {}


def fpga_program(fmt, vt, it):
    """Dense results, a transposed view, and sparse results on A's pattern."""
    key = (fmt, vt, it)
    if key not in _PROGRAMS:
        F = ss.BSR.with_block(2, 2) if fmt == 'BSR' else getattr(ss, fmt)
        T = F[vt, M, N, it]

        @dace.program
        def fpga_ops(A: T, x: vt[N], xt: vt[M], B: vt[N, K], bias: vt[K], D: vt[M, N], X: vt[M, K], Y: vt[K, N]):
            return (A @ x, np.maximum(A @ B + bias, 0), xt @ A, A.sum(axis=0), A.sum(axis=1), D - A, A + D, A.T @ xt,
                    ss.sddmm(A, X, Y), 2 * A, ss.relu(A))

        _PROGRAMS[key] = ss.compile(fpga_ops, target='fpga')
    return _PROGRAMS[key]


def run_case(prog, fmt, it, A, npv, seed=0):
    rng = np.random.default_rng(seed)
    m, n = A.shape
    args = [rng.standard_normal(s).astype(npv) for s in (n, m, (n, 3), 3, (m, n), (m, 3), (3, n))]
    x, xt, B, bias, D, X, Y = args
    keep = [v.copy() for v in args]
    a = as_format(A, fmt, np.dtype(it.type), rng)
    out = prog(a, *args)
    Ad = A.toarray()
    ref = [Ad @ x, np.maximum(Ad @ B + bias, 0), xt @ Ad, Ad.sum(axis=0), Ad.sum(axis=1), D - Ad, Ad + D, Ad.T @ xt,
           Ad * (X @ Y), 2 * Ad, np.maximum(Ad, 0)]
    tol = dict(rtol=1e-4, atol=1e-4) if npv == np.float32 else dict(rtol=1e-10, atol=1e-10)
    for name, got, want in zip(OPS, out, ref):
        assert got.dtype == npv, name
        if name in ('sddmm', '2*A', 'relu(A)'):  # sparse, in A's format
            assert sp.issparse(got) or isinstance(got, ss.SparseMatrix), f'{name}: {type(got)}'
            if sp.issparse(a):
                assert got.format == a.format, name
        np.testing.assert_allclose(dense(got), want, **tol, err_msg=f'{fmt} {npv}: {name}')
    for before, after in zip(keep, args):
        np.testing.assert_array_equal(before, after)  # the caller's arrays are not written


@pytest.mark.parametrize('fmt,vt,it', [pytest.param(f, *sig, id=f'{f}-{sig[0].to_string()}-{sig[1].to_string()}')
                                       for f in FORMATS for sig in (SIGNATURES if f == 'CSR' else SIGNATURES[:1])])
def test_ops_match_scipy(fmt, vt, it):
    """Every operation of :func:`fpga_program` in C-simulation over the zoo (and the real
    matrices in CSR); float32 / int32 in every format, float64 / int64 in CSR (the lowering
    is the same for every dtype; each program is a ~4 s build)."""
    prog = fpga_program(fmt, vt, it)
    npv = np.dtype(vt.type)
    cases = list(zoo(npv).items())
    if fmt == 'BSR':
        cases = [(k, A) for k, A in cases if A.shape[0] % 2 == 0 and A.shape[1] % 2 == 0]
    if fmt == 'CSR' and vt == dace.float64:
        cases += [(name, real_matrix(name)) for name in REAL]
    for name, A in cases:
        try:
            run_case(prog, fmt, it, A, npv)
        except AssertionError as ex:
            raise AssertionError(f'matrix {name}: {ex}') from ex


def test_lowered_program_kernels_do_not_race():
    """The lowered SDFG: flat arrays for the sparse argument and results, FPGA-global
    twins, and FPGA kernel states in which no processing element reads what another
    writes (they run concurrently: ``relu(A @ B + bias)`` is three kernels in a row)."""
    prog = fpga_program('CSR', dace.float32, dace.int32)
    sdfg = prog.lowered
    assert lower.is_lowered(sdfg) and not lower.is_lowered(prog.sdfg), 'the caller\'s SDFG is not lowered'
    # one array per member, though each operation read it through a view of its own
    flat = lower.flat_arguments(sdfg)
    assert flat['A'] == {'pos1': 'A_pos1', 'crd1': 'A_crd1', 'vals': 'A_vals'}
    assert sorted(flat) == ['A', '__return_10', '__return_8', '__return_9']  # and the sparse results
    assert not any(isinstance(d, dace.data.Structure) for d in sdfg.arrays.values())
    kernels = [st for st in sdfg.states() if dace.sdfg.utils.is_fpga_kernel(sdfg, st)]
    assert len(kernels) >= 3
    # the CSR products A @ x and A @ B and the SDDMM are streaming designs (ss.compile fuses
    # no epilogue)
    designs = sorted((d['op'], bool(d['epilogue'])) for d in map(streaming.design_of, kernels) if d)
    assert designs == [('sddmm', False), ('spmm', False), ('spmv', False)], designs
    for st in kernels:
        comps = lower._computations(st)
        for c in comps:  # (a stream between elements is how they talk: not a race)
            reads = {e.src.data for e in st.in_edges(c) if isinstance(e.src, dace.nodes.AccessNode)
                     and not isinstance(e.src.desc(sdfg), dace.data.Stream)}
            for other in comps:
                if other is not c:
                    assert not reads & {a.data for a in lower._outputs(st, other)}, (st.label, c, other)
    assert {d.storage for n, d in sdfg.arrays.items() if n.startswith('fpga_')} == {dace.StorageType.FPGA_Global}
    folder = os.path.dirname(os.path.dirname(prog.build().compiled.filename))
    device = os.path.join(folder, 'src', 'xilinx', 'device')
    code = ''.join(open(os.path.join(device, f)).read() for f in os.listdir(device) if f.endswith('.cpp'))
    assert '#pragma HLS INTERFACE m_axi' in code and '#pragma HLS DATAFLOW' in code


_CHILD = """
import sys, warnings
import dace, numpy as np, scipy.sparse as sp
import sdfgsparse as ss
from sdfgsparse.targets.fpga import csim
warnings.simplefilter('ignore')
if sys.argv[2] == 'warm':  # a warm load generates no code and builds nothing
    from dace.codegen import codegen

    def refuse(*args, **kwargs):
        raise AssertionError('built again')

    codegen.generate_code = csim._build = refuse
M, N = dace.symbol('M'), dace.symbol('N')


def fpga_warm(A: ss.CSC[dace.float32, M, N, dace.int32], x: dace.float32[N]):
    return A @ x + 1


A = sp.random_array((30, 20), density=0.2, format='csc', dtype=np.float32, rng=np.random.default_rng(3))
x = np.random.default_rng(4).random(20).astype(np.float32)
with dace.config.set_temporary('default_build_folder', value=sys.argv[1]):
    y = ss.compile(dace.program(fpga_warm), target='fpga')(A, x)
np.testing.assert_allclose(y, A @ x + 1, rtol=1e-5)
print('RESULT OK')
"""


def test_warm_load_in_another_process(tmp_path):
    """A second process loads the complete build (record, library and SDFG agree)
    without generating code or compiling."""
    import sys
    script = tmp_path / 'child.py'
    script.write_text(_CHILD)
    for mode in ('cold', 'warm'):
        done = subprocess.run([sys.executable, str(script), str(tmp_path / 'cache'), mode], capture_output=True,
                              text=True, timeout=300, env=dict(os.environ, OMP_NUM_THREADS='1', DACE_cache='hash'))
        assert done.returncode == 0 and 'RESULT OK' in done.stdout, f'{mode}: {done.stdout[-2000:]}{done.stderr[-3000:]}'


def test_bad_arguments_are_named_before_running():
    prog = fpga_program('CSR', dace.float32, dace.int32)
    A = sp.random_array((6, 5), density=0.4, format='csr', dtype=np.float32, rng=np.random.default_rng(0))
    rest = [np.zeros(s, np.float32) for s in (6, (5, 2), 2, (6, 5), (6, 2), (2, 5))]
    with pytest.raises(ss.errors.ShapeError, match='x'):
        prog(A, np.zeros(4, np.float32), *rest)
    with pytest.raises(ss.errors.DTypeError):
        prog(A.astype(np.float64), np.zeros(5, np.float32), *rest)
    bad = A.copy()
    bad.indices[0] = 99
    with pytest.raises(ss.errors.InvalidIndexError):
        prog(bad, np.zeros(5, np.float32), *rest)
    with pytest.raises(ss.errors.ArgumentError, match='missing'):
        prog(A, np.zeros(5, np.float32))


def test_data_dependent_results_and_intermediates():
    """Results whose pattern depends on the data (A + B, A * B, SpGEMM: their capacity
    from the arguments, trimmed after the call) and sparse intermediates ((A + B) @ x)."""
    T = ss.CSR[dace.float32, M, N, dace.int32]

    @dace.program
    def fpga_sparse_sparse(A: T, B: T, C: ss.CSR[dace.float32, N, K, dace.int32], y: dace.float32[N]):
        return A + B, A * B, A @ C, (A + B) @ y, (A * B).sum(axis=1)

    prog = ss.compile(fpga_sparse_sparse, target='fpga')
    for seed, (m, n, k) in enumerate([(20, 15, 9), (1, 7, 3), (12, 12, 12)]):
        rng = np.random.default_rng(seed)
        A, B = (sp.random_array((m, n), density=0.25, format='csr', dtype=np.float32, rng=rng) for _ in range(2))
        C = sp.random_array((n, k), density=0.25, format='csr', dtype=np.float32, rng=rng)
        y = rng.standard_normal(n).astype(np.float32)
        got = prog(A, B, C, y)
        want = [A + B, A * B, A @ C, (A + B) @ y, (A * B).sum(axis=1)]
        for i, (g, w) in enumerate(zip(got, want)):
            assert sp.issparse(g) == sp.issparse(w), i
            np.testing.assert_allclose(dense(g), dense(w), rtol=1e-5, atol=1e-6, err_msg=f'{(m, n, k)}: result {i}')


def test_missing_headers_are_named(monkeypatch):
    monkeypatch.setitem(toolchain._CACHE, 'found', ('/usr/bin/g++', None))
    with pytest.raises(ss.errors.DeviceError, match='fetch-ap-types'):
        toolchain.require_csim('prog')


def test_fetch_ap_types_from_a_wheel(tmp_path):
    """The headers are taken from the wheel without the proprietary hls_stream.h, with the
    wheel's licence."""
    import zipfile
    wheel = tmp_path / 'hls4ml-1.3.0-py3-none-any.whl'
    prefix = toolchain.AP_TYPES_SOURCE[2]
    with zipfile.ZipFile(wheel, 'w') as z:
        z.writestr(prefix + 'ap_int.h', '// ap_int\n')
        z.writestr(prefix + 'etc/ap_private.h', '// private\n')
        z.writestr(prefix + 'hls_stream.h', '// proprietary\n')
        z.writestr('hls4ml-1.3.0.dist-info/licenses/LICENSE', 'Apache License 2.0\n')
    dest = toolchain.fetch_ap_types(str(tmp_path / 'ap'), wheel=str(wheel))
    assert sorted(os.listdir(dest)) == ['LICENSE.hls4ml', 'SOURCE', 'ap_int.h', 'etc']
    assert os.path.isfile(os.path.join(dest, 'etc', 'ap_private.h'))


SHIM_TEST = textwrap.dedent(r'''
    #include <cstdio>
    #include <stdexcept>
    #include <vector>
    #include "hlslib/xilinx/OpenCL.h"
    #include "hlslib/xilinx/Stream.h"
    extern "C" int sdfgsparse_csim_error(char *, int);
    using namespace hlslib::ocl;

    void producer(const int *in, hlslib::Stream<int> &s, int n) { for (int i = 0; i < n; ++i) s.Push(in[i] * 2); }
    void consumer(hlslib::Stream<int> &s, int *out, int n) { for (int i = 0; i < n; ++i) out[i] = s.Pop() + 1; }
    void failing(int *out) { out[0] = 1; throw std::runtime_error("index out of range"); }

    int main() {
      Context context(0);
      Program program = context.MakeProgram("unused.xclbin");
      const int n = 1000;  // more than the stream holds: the kernels must run at the same time
      std::vector<int> in(n), out(n);
      for (int i = 0; i < n; ++i) in[i] = i;
      auto a = context.MakeBuffer<int, Access::readWrite>(StorageType::DDR, -1, n);
      auto b = context.MakeBuffer<int, Access::readWrite>(StorageType::DDR, -1, n);
      a.CopyFromHost(0, n, in.data());
      hlslib::Stream<int> s("s");  // depth 2
      std::vector<Event> events;
      events.push_back(program.MakeKernel(producer, "producer", a, SimulationOnly(s), n).ExecuteTaskAsync());
      events.push_back(program.MakeKernel(consumer, "consumer", SimulationOnly(s), b, n).ExecuteTaskAsync());
      WaitForEvents(events);
      b.CopyToHost(0, n, out.data());
      for (int i = 0; i < n; ++i) if (out[i] != 2 * i + 1) { std::printf("wrong %d\n", i); return 1; }
      char msg[256];
      if (sdfgsparse_csim_error(msg, sizeof msg) != 0) { std::printf("spurious error\n"); return 1; }
      std::vector<Event> more{program.MakeKernel(failing, "failing", b).ExecuteTaskAsync()};
      WaitForEvents(more);
      if (sdfgsparse_csim_error(msg, sizeof msg) == 0) { std::printf("no error\n"); return 1; }
      std::printf("%s|", msg);
      std::vector<Event> rtl{program.MakeKernel("pumped_top", b).ExecuteTaskAsync()};
      WaitForEvents(rtl);
      sdfgsparse_csim_error(msg, sizeof msg);
      std::printf("%s\n", msg);
      return sdfgsparse_csim_error(msg, sizeof msg) == 0 ? 0 : 1;  // read once, then cleared
    }
''')


def test_host_shim_runs_kernels_concurrently_and_reports_errors(tmp_path):
    cxx, ap_types = toolchain.require_csim('shim test')
    src = tmp_path / 'shim.cpp'
    src.write_text(SHIM_TEST)
    exe = tmp_path / 'shim'
    cmd = [cxx] + csim.CXXFLAGS + [f'-I{os.path.join(csim.HERE, "csim_include")}', f'-I{toolchain.hlslib_include()}',
                                   f'-I{ap_types}', str(src), os.path.join(csim.HERE, 'csim_runtime.cpp'), '-o',
                                   str(exe)]
    built = subprocess.run(cmd, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    ran = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.strip() == ('kernel failing: index out of range|'
                                  'kernel pumped_top: the kernel has no C++ function to simulate')


def test_optimize_for_the_fpga_fuses_the_gcn_layer():
    """``ss.optimize(target='fpga')``: the pipeline (the epilogue fused into the SpMM), then
    the lowered copy; the optimised program takes the sparse matrix as before."""

    @dace.program
    def fpga_gcn_layer(A: ss.CSR[dace.float32, M, N, dace.int32], X: dace.float32[N, K], b: dace.float32[K]):
        return np.maximum(A @ X + b, 0)

    opt = ss.optimize(fpga_gcn_layer, target='fpga')
    report = opt.report()
    assert 'SparseEpilogueFusion' in report and 'FPGA lowering' in report and 'A -> A_pos1, A_crd1, A_vals' in report
    assert next(s for s in opt.steps if s.name == 'SparseEpilogueFusion').applied >= 1
    assert not any(s.name == 'dense nodes' for s in opt.steps), 'CPU tasklets are not for the FPGA'
    low = opt.lowered  # the layer is one streaming kernel, bias and relu in its writer
    designs = [streaming.design_of(st) for st in low.states() if streaming.design_of(st)]
    # relu in the writer, as the NaN-propagating maximum (_dace_compat patch 23: a > b or a != a)
    assert [(d['op'], '!=' in d['epilogue'] and '>' in d['epilogue']) for d in designs] == [('spmm', True)]
    assert sum(dace.sdfg.utils.is_fpga_kernel(low, st) for st in low.states()) == 1
    rng = np.random.default_rng(5)
    A = sp.random_array((40, 30), density=0.1, format='csr', dtype=np.float32, rng=rng)
    X, b = rng.standard_normal((30, 8)).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    np.testing.assert_allclose(opt(A, X, b), np.maximum(A @ X + b, 0), rtol=1e-5, atol=1e-5)


def test_a_transient_written_in_a_kernel_is_not_copied_in_first():
    """``relu(A @ (X @ W) + b)``: ``X @ W`` is a transient the first kernel writes and the
    streaming SpMM reads. Its twin was copied in from the uninitialised host array before
    that kernel (DaCe: 'Use of uninitialized transient'); now only what an earlier state
    wrote, or an argument, is."""

    @dace.program
    def fpga_gcn_two_products(A: ss.CSR[dace.float32, M, N, dace.int32], X: dace.float32[N, K],
                              W: dace.float32[K, K], b: dace.float32[K]):
        return np.maximum(A @ (X @ W) + b, 0)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')  # (the module ignores UserWarnings)
        program = ss.compile(fpga_gcn_two_products, target='fpga')
        program.build()
    assert not [str(w.message) for w in caught if 'uninitialized' in str(w.message)]
    low = program.lowered
    for st in low.states():  # every host transient copied in was written by an earlier state
        for n in st.data_nodes():
            if st.label.startswith('pre_') and low.arrays[n.data].transient and st.out_degree(n) \
                    and not st.in_degree(n) and not n.data.startswith('fpga_'):
                assert any(x.data == n.data and s.in_degree(x) for s in nx.ancestors(low.nx, st)
                           for x in s.data_nodes()), f'{st.label} copies in {n.data}, written by nothing before'
    rng = np.random.default_rng(9)
    A = sp.random_array((40, 30), density=0.1, format='csr', dtype=np.float32, rng=rng)
    X, W = rng.standard_normal((30, 8)).astype(np.float32), rng.standard_normal((8, 8)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    np.testing.assert_allclose(program(A, X, W, b), np.maximum(A @ (X @ W) + b, 0), rtol=1e-4, atol=1e-4)
