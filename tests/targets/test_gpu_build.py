"""The GPU target's build plumbing: CUDA 13 compatibility (:mod:`sdfgsparse.targets.cuda.compat`,
``sdfgsparse/targets/cuda/compat.py``), ``ss.compile(..., target='gpu')`` /
``ss.optimize(..., target='gpu')`` with ``.build()``, and the call-time checks (no device,
host arguments).

Builds need nvcc, not a GPU; they are shared by module fixtures (three builds, ~10 s
each cold; the DaCe cache keeps them for later runs). Tests marked ``gpu`` run programs
on a real device and are skipped elsewhere.
"""
import glob
import os

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.build import policy
from sdfgsparse.ops.spmv import SpMV
from sdfgsparse.targets.cuda import compat, device, lower, toolchain

needs_nvcc = pytest.mark.skipif(toolchain.nvcc_path() is None, reason='no nvcc on this machine')
pytestmark = pytest.mark.filterwarnings('ignore:No `gpu_block_size` property specified:UserWarning')

N = dace.symbol('N')
M = dace.symbol('M')


@dace.program
def gpu_dense(A: dace.float64[N, N], x: dace.float64[N], y: dace.float64[N]):
    y[:] = A @ x + 1


@dace.program
def gpu_sums(A: dace.float64[M, N], rows: dace.float64[M], total: dace.float64[1]):
    rows[:] = np.sum(A, axis=1)
    total[0] = np.sum(A)


@dace.program
def gpu_spmv(A: ss.CSR[dace.float64, M, N], x: dace.float64[N], y: dace.float64[M]):
    y[:] = A @ x


def _built(prog) -> str:
    """The build folder of an ss.compile / ss.optimize program built for the GPU, after
    checking it holds the library and the generated CUDA source."""
    compiled = prog.compiled if hasattr(prog, 'compiled') else prog._compiled.compiled
    assert os.path.isfile(compiled.filename)
    folder = os.path.dirname(os.path.dirname(compiled.filename))
    cu = glob.glob(os.path.join(folder, 'src', 'cuda', '*.cu'))
    assert len(cu) == 1 and '__global__' in open(cu[0]).read()
    return folder


@pytest.fixture(scope='module')
def dense_gpu():
    """``ss.compile(..., target='gpu').build()`` of a dense program (a GEMV and a map)."""
    if toolchain.nvcc_path() is None:
        pytest.skip('no nvcc on this machine')
    return ss.compile(gpu_dense, target='gpu').build()


@pytest.fixture(scope='module')
def sums_gpu():
    """``ss.optimize(..., target='gpu').build()`` of two reductions, expanded with CUB
    (``dace/reduction.h``'s strided iterator: the CUB names CUDA 13 removed)."""
    if toolchain.nvcc_path() is None:
        pytest.skip('no nvcc on this machine')
    opt = ss.optimize(gpu_sums, target='gpu')
    reduces = [n for n, _ in opt.sdfg.all_nodes_recursive() if isinstance(n, dace.libraries.standard.Reduce)]
    assert len(reduces) == 2
    for node in reduces:
        node.implementation = 'CUDA (device)'
    return opt.build()


# ---------------------------------------------------------------- configuration
def test_cuda_arch_default(monkeypatch):
    """DaCe's default arch (60, rejected by nvcc 13) becomes 90 while our programs are built;
    a user's choice is kept, and DaCe's own setting is left as it is for other programs."""
    path = ('compiler', 'cuda', 'cuda_arch')
    monkeypatch.delenv('DACE_compiler_cuda_cuda_arch', raising=False)
    before = dace.Config.get(*path)
    try:
        dace.Config.set(*path, value=compat.DACE_DEFAULT_ARCH)
        assert compat.our_arch() == '90'
        with policy.applied():
            assert dace.Config.get(*path) == '90'
        assert dace.Config.get(*path) == compat.DACE_DEFAULT_ARCH  # (outside our builds: DaCe's)
        dace.Config.set(*path, value='80,90')
        assert compat.our_arch() is None
        with policy.applied():
            assert dace.Config.get(*path) == '80,90'
        dace.Config.set(*path, value=compat.DACE_DEFAULT_ARCH)
        monkeypatch.setenv('DACE_compiler_cuda_cuda_arch', '75')  # (DaCe reads it before its settings)
        assert compat.our_arch() is None
    finally:
        monkeypatch.delenv('DACE_compiler_cuda_cuda_arch', raising=False)
        dace.Config.set(*path, value=before)


def test_cuda_arch_left_as_it_was_on_import():
    if 'DACE_compiler_cuda_cuda_arch' not in os.environ:
        assert dace.Config.get('compiler', 'cuda', 'cuda_arch') == compat.DACE_DEFAULT_ARCH


def test_cuda_cmake_options_carry_the_rules():
    """Patch 14: DaCe's CUDA code generator asks CMake for the rules file (only CUDA
    builds ask it), and both shipped files exist."""
    from dace.codegen.targets.cuda import CUDACodeGen
    assert f'-DCMAKE_USER_MAKE_RULES_OVERRIDE_CUDA="{compat.RULES}"' not in CUDACodeGen.cmake_options()  # (not ours)
    with policy.applied():
        options = CUDACodeGen.cmake_options()
    assert f'-DCMAKE_USER_MAKE_RULES_OVERRIDE_CUDA="{compat.RULES}"' in options
    assert os.path.isfile(compat.RULES) and os.path.isfile(compat.HEADER)
    assert 'CMAKE_CUDA_STANDARD 17' in open(compat.RULES).read()
    assert 'thrust::transform_iterator' in open(compat.HEADER).read()


def test_toolchain_answers():
    """Answers that ask each other (nvcc_version asks nvcc_path, device_arch asks
    device_count) under the cache's lock."""
    assert (toolchain.nvcc_version() is None) == (toolchain.nvcc_path() is None)
    if toolchain.nvcc_path():
        assert toolchain.nvcc_version() >= (11, 0)
    assert (toolchain.device_arch() is None) == (toolchain.device_count() == 0)


def test_unknown_target_is_refused():
    with pytest.raises(ss.errors.UnsupportedOperationError, match="target 'tpu' is not supported"):
        ss.compile(gpu_dense, target='tpu')
    with pytest.raises(ss.errors.UnsupportedOperationError, match="target 'tpu' is not supported"):
        ss.optimize(gpu_dense, target='tpu')


def test_lowering_moves_arguments_to_the_device():
    sdfg = lower.to_gpu(gpu_dense.to_sdfg())
    assert lower.is_lowered(sdfg)
    assert all(sdfg.arrays[n].storage == dace.StorageType.GPU_Global for n in ('A', 'x', 'y'))
    assert lower.to_gpu(sdfg) is sdfg  # already lowered: left as it is


def test_node_without_pure_expansion_is_named(monkeypatch):
    sdfg = gpu_spmv.to_sdfg()
    monkeypatch.setattr(SpMV, 'implementations', {'cpu': None})
    with pytest.raises(ss.errors.UnsupportedOperationError,
                       match=r"\(SpMV\) has neither a 'cuda' nor the portable 'pure' expansion"):
        lower.to_gpu(sdfg)


def test_every_sparse_node_has_a_cuda_implementation_and_the_lowering_takes_it(monkeypatch):
    from sdfgsparse.ops.base import SparseLibraryNode
    from sdfgsparse.targets.cuda import expansions

    def subclasses(c):
        for s in c.__subclasses__():
            yield s
            yield from subclasses(s)

    nodes = {c for c in subclasses(SparseLibraryNode) if 'pure' in getattr(c, 'implementations', {})}
    assert nodes and nodes <= set(expansions.NODES)
    assert all('cuda' in c.implementations for c in expansions.NODES)
    taken = []
    cuda = SpMV.implementations['cuda'].expansion

    def spy(node, state, sdfg, *a, **k):  # SpMV's cuda expansion, recording which implementation asked
        taken.append(node.implementation)
        return cuda(node, state, sdfg, *a, **k)

    monkeypatch.setattr(SpMV.implementations['cuda'], 'expansion', staticmethod(spy))
    lowered = lower.to_gpu(gpu_spmv.to_sdfg())
    assert taken == ['cuda'] and lower.is_lowered(lowered)


# ---------------------------------------------------------------- builds (nvcc, no GPU needed)
@needs_nvcc
def test_dense_program_builds_for_the_gpu(dense_gpu):
    folder = _built(dense_gpu)
    makefiles = glob.glob(os.path.join(folder, 'build', 'CMakeFiles', '*.dir', 'flags.make'))
    flags = [line for f in makefiles for line in open(f) if line.startswith('CUDA_FLAGS')]
    assert len(flags) == 1
    assert '--pre-include=' + compat.HEADER in flags[0]  # the rules file took effect ...
    assert '-std=c++17' in flags[0] and 'c++14' not in flags[0]  # ... after DaCe's set(... 14)
    assert 'arch=compute_90' in flags[0] or toolchain.device_count()  # (a GPU: its own arch)


@needs_nvcc
def test_reduction_program_builds_for_the_gpu(sums_gpu):
    assert any(s.name == 'GPU lowering' for s in sums_gpu.steps)
    folder = _built(sums_gpu)
    cu = open(glob.glob(os.path.join(folder, 'src', 'cuda', '*.cu'))[0]).read()
    assert 'cub::DeviceSegmentedReduce' in cu and 'cub::DeviceReduce' in cu


@needs_nvcc
@pytest.mark.skipif('pure' not in SpMV.implementations, reason="SpMV has no 'pure' expansion yet")
def test_sparse_program_builds_for_the_gpu():
    prog = ss.compile(gpu_spmv, target='gpu').build()
    _built(prog)
    assert prog.sdfg.arrays['A'].storage == dace.StorageType.Default  # a host struct ...
    assert all(m.storage == dace.StorageType.GPU_Global for m in prog.sdfg.arrays['A'].members.values()
               if isinstance(m, dace.data.Array))  # ... of device arrays
    with pytest.MonkeyPatch.context() as mp:  # a host scipy matrix is named, on any machine
        mp.setitem(toolchain._CACHE, 'devices', 1)
        A = sp.random(5, 4, density=0.5, format='csr', random_state=0)
        with pytest.raises(ss.errors.DeviceError, match=r'A: a scipy sparse matrix \(csr_matrix\) is in host memory'):
            prog(A, np.ones(4), np.ones(5))


# ---------------------------------------------------------------- calls
def test_call_without_a_device_raises(monkeypatch):
    """Checked before building and before calling: DaCe's GPU library segfaults the
    process when called without a device."""
    monkeypatch.setitem(toolchain._CACHE, 'devices', 0)
    prog = ss.compile(gpu_dense, target='gpu')
    with pytest.raises(ss.errors.DeviceError, match=r'\w*gpu_dense\(\) was built for the GPU, but this machine has no '
                       'usable CUDA device'):
        prog(np.ones((3, 3)), np.ones(3), np.ones(3))
    assert prog._compiled is None  # nothing was built for it
    with pytest.raises(ss.errors.DeviceError, match='no usable CUDA device'):
        device.to_device(np.ones(3))


@needs_nvcc
def test_call_without_a_device_raises_after_build(dense_gpu, monkeypatch):
    monkeypatch.setitem(toolchain._CACHE, 'devices', 0)
    with pytest.raises(ss.errors.DeviceError, match='no usable CUDA device'):
        dense_gpu(np.ones((3, 3)), np.ones(3), np.ones(3))


def test_host_arguments_are_named(monkeypatch):
    monkeypatch.setitem(toolchain._CACHE, 'devices', 1)  # pretend: the check comes before any build or call
    prog = ss.compile(gpu_dense, target='gpu')
    with pytest.raises(ss.errors.DeviceError, match=r'A: a NumPy array is in host memory, but the GPU program '
                       r'\w*gpu_dense\(\) reads it in device memory; pass a device array: a torch CUDA tensor'):
        prog(np.ones((3, 3)), np.ones(3), np.ones(3))
    torch = pytest.importorskip('torch')
    with pytest.raises(ss.errors.DeviceError, match='x: a CPU torch tensor is in host memory'):
        prog(A=device_stub((3, 3)), x=torch.ones(3, dtype=torch.float64), y=device_stub((3, )))
    assert prog._compiled is None


def test_sparse_values_in_device_memory_pass_their_device_members():
    """A sparse value in device memory reaches the checks as its host copy carrying its
    device members (:func:`sdfgsparse.runtime.device.device_sparse_value`): the
    struct points at the device members, and a member the checks convert (another index
    width) is copied to the device converted."""
    from sdfgsparse.formats import sparse_type_of
    from sdfgsparse.runtime.container import SparseMatrix
    from sdfgsparse.runtime.marshal import marshal_sparse
    A = sp.random(6, 5, density=0.4, format='csr', random_state=0)
    host = SparseMatrix(ss.CSR, {'pos1': A.indptr, 'crd1': A.indices, 'vals': A.data}, A.shape)
    host._ss_device = {'pos1': (0x1000, np.dtype(np.int32)), 'crd1': (0x2000, np.dtype(np.int32)),
                       'vals': (0x3000, np.dtype(np.float64))}
    host._ss_keep = 'the device arrays'
    uploads = []
    host._ss_upload = lambda a: (uploads.append(a.dtype) or 0x4000 + len(uploads), f'converted {a.dtype}')
    desc = ss.CSR[dace.float64, M, N]
    s = marshal_sparse('A', host, sparse_type_of(desc)).make_struct(desc)
    assert (s.pos1, s.crd1, s.vals) == (0x1000, 0x2000, 0x3000) and uploads == []
    assert s._ss_keepalive == ['the device arrays']
    wide = ss.CSR[dace.float64, M, N, dace.int64]
    with pytest.warns(UserWarning, match='copying them'):
        s = marshal_sparse('A', host, sparse_type_of(wide)).make_struct(wide)
    assert {s.pos1, s.crd1} == {0x4001, 0x4002} and s.vals == 0x3000 and uploads == [np.int64, np.int64]
    host.arrays['crd1'] = np.where(A.indices == A.indices.max(), 5, A.indices).astype(np.int32)  # column 5 of 5
    with pytest.raises(ss.errors.InvalidIndexError, match='A:'):  # checked on the host copy
        marshal_sparse('A', host, sparse_type_of(desc))


def device_stub(shape, dtype=np.float64):
    """An object that says it is a device array (never dereferenced: the call fails first)."""

    class Stub:
        __cuda_array_interface__ = {'shape': shape, 'typestr': np.dtype(dtype).str, 'data': (0, False),
                                    'strides': None, 'version': 3}

    s = Stub()
    s.shape = shape
    return s


# ---------------------------------------------------------------- on a real GPU
@pytest.mark.gpu
@pytest.mark.skipif(toolchain.device_count() == 0, reason='no CUDA device')
@pytest.mark.parametrize('n', [1, 37])
def test_dense_program_runs_on_the_gpu(dense_gpu, n, rng):
    A, x = rng.standard_normal((n, n)), rng.standard_normal(n)
    dA, dx, dy = device.to_device(A), device.to_device(x), device.to_device(np.zeros(n))
    dense_gpu(dA, dx, dy)
    np.testing.assert_allclose(dy.get(), A @ x + 1, rtol=1e-12, atol=1e-12)


@pytest.mark.gpu
@pytest.mark.skipif(toolchain.device_count() == 0, reason='no CUDA device')
def test_reductions_run_on_the_gpu(sums_gpu, rng):
    A = rng.standard_normal((7, 33))
    rows, total = device.to_device(np.zeros(7)), device.to_device(np.zeros(1))
    sums_gpu(device.to_device(A), rows, total)
    np.testing.assert_allclose(rows.get(), A.sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose(total.get(), [A.sum()], rtol=1e-12)
