"""Every sparse operation as a GPU program: generated and compiled with nvcc (no GPU
needed), and its algorithm — the same SDFG with CPU schedules
(:func:`sdfgsparse.targets.cuda.lower.with_cpu_schedules`) — run on the CPU against scipy
over the zoo. On a machine with a GPU (``-m gpu``) the GPU build itself runs.

Three GPU programs in all (one per group of operations, and one made by DaCe's own
``SDFG.apply_gpu_transformations()``; up to ~1 min of nvcc each, kept by the DaCe cache),
so the CPU-schedule runs share their SDFGs."""
import copy
import warnings

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.targets.cuda import lower, toolchain
from sparse_zoo import dense, tol, zoo

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
needs_nvcc = pytest.mark.skipif(toolchain.nvcc_path() is None, reason='no nvcc on this machine')

M, N, K = dace.symbol('M'), dace.symbol('N'), dace.symbol('K')
T = ss.CSR[dace.float64, M, N]


@dace.program
def gpu_dense_ops(A: T, x: dace.float64[N], xt: dace.float64[M], B: dace.float64[N, K], P: dace.float64[K, M],
                  D: dace.float64[M, N], X: dace.float64[M, K], Y: dace.float64[K, N]):
    return (A @ x, A @ B, xt @ A, P @ A, A.sum(axis=0), A.sum(axis=1), A * D, D - A, ss.sddmm(A, X, Y), 2 * A,
            ss.relu(A), A.T @ xt, ss.softmax(A))


def dense_reference(A, x, xt, B, P, D, X, Y):
    Ad = A.toarray()
    e = np.where(Ad != 0, np.exp(Ad - np.max(np.where(Ad != 0, Ad, -np.inf), axis=1, keepdims=True,
                                             initial=-np.inf)), 0)
    soft = np.divide(e, e.sum(axis=1, keepdims=True), out=np.zeros_like(e), where=e.sum(axis=1, keepdims=True) > 0)
    return [Ad @ x, Ad @ B, xt @ Ad, P @ Ad, Ad.sum(axis=0), Ad.sum(axis=1), Ad * D, D - Ad, Ad * (X @ Y), 2 * Ad,
            np.maximum(Ad, 0), Ad.T @ xt, soft]


@dace.program
def gpu_sparse_ops(A: T, B: ss.CSR[dace.float64, M, N], C: ss.CSR[dace.float64, N, M], x: dace.float64[N]):
    return A + B, A - B, A * B, A @ C, ss.convert(A, ss.CSC), A.T + C, (A + B) * B, (A * B).sum(axis=1), (A - B) @ x


def sparse_reference(A, B, C, x):
    Ad, Bd, Cd = A.toarray(), B.toarray(), C.toarray()
    return [Ad + Bd, Ad - Bd, Ad * Bd, Ad @ Cd, Ad, Ad.T + Cd, (Ad + Bd) * Bd, (Ad * Bd).sum(axis=1), (Ad - Bd) @ x]


@dace.program
def dace_gpu_ops(A: T, B: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x, A + B, (A - B) @ x, ss.relu(A).sum(axis=0)


def dace_gpu_reference(A, B, x):
    Ad, Bd = A.toarray(), B.toarray()
    return [Ad @ x, Ad + Bd, (Ad - Bd) @ x, np.maximum(Ad, 0).sum(axis=0)]


_SDFGS = {}


def gpu_sdfg(prog):
    """The program lowered for the GPU (once per session): by ``ss``'s GPU target, or for
    ``dace_gpu_ops`` by DaCe's own ``SDFG.apply_gpu_transformations()``."""
    if prog.name not in _SDFGS:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            sdfg = copy.deepcopy(prog.to_sdfg())
            if prog is dace_gpu_ops:
                sdfg.apply_gpu_transformations()
            else:
                lower.to_gpu(sdfg)
            _SDFGS[prog.name] = sdfg
    return _SDFGS[prog.name]


def _device_to_device_copies(sdfg):
    """Copies between two arrays in device memory (views count as what they view)."""
    found = []
    for node, state in sdfg.all_nodes_recursive():
        if not isinstance(node, dace.nodes.AccessNode):
            continue
        for e in state.out_edges(node):
            if isinstance(e.dst, dace.nodes.AccessNode) and 'views' not in (e.src_conn, e.dst_conn):
                g = state.sdfg
                if all(g.arrays[n.data].storage == dace.StorageType.GPU_Global for n in (node, e.dst)):
                    found.append(f'{node.data} -> {e.dst.data}')
    return found


def _dense_args(A, rng):
    m, n = A.shape
    return dict(x=rng.standard_normal(n), xt=rng.standard_normal(m), B=rng.standard_normal((n, 3)),
                P=rng.standard_normal((3, m)), D=rng.standard_normal((m, n)), X=rng.standard_normal((m, 3)),
                Y=rng.standard_normal((3, n)))


def _cases():
    return {k: sp.csr_array(v) for k, v in zoo(np.float64).items()}


@pytest.mark.parametrize('prog', [gpu_dense_ops, gpu_sparse_ops, dace_gpu_ops],
                         ids=['dense-results', 'sparse-results', 'dace-transformation'])
def test_gpu_program_is_a_gpu_program(prog):
    """Every map that is not nested in another runs as a GPU kernel, every argument
    array is in device memory, and no sparse library node is left; the only C++ tasklets
    are one-statement calls of the CUDA leaves (``include/*.cuh``) inside kernels: SpMV's
    merge-path (``A @ x`` of a CSR matrix), SpMM's thread per element (``A @ B``) and SDDMM's
    warp per row."""
    from dace.sdfg.scope import is_devicelevel_gpu
    sdfg = gpu_sdfg(prog)
    assert lower.is_lowered(sdfg)
    kernels, leaves = 0, set()
    for node, state in sdfg.all_nodes_recursive():
        assert not isinstance(node, ss.ops.SparseLibraryNode), node
        if isinstance(node, dace.nodes.Tasklet) and node.language != dace.Language.Python:
            code = node.code.as_string.strip()
            assert code.startswith('sdfgsparse::cuda::') and code.count(';') == 1, (node.label, code)
            assert is_devicelevel_gpu(state.parent, state, node), node.label
            leaves.add(code.split('<')[0])
        if isinstance(node, dace.nodes.MapEntry) and node.map.schedule == dace.ScheduleType.GPU_Device:
            kernels += 1
    assert kernels >= (4 if prog is dace_gpu_ops else 10)
    spmv = {'sdfgsparse::cuda::spmv_merge_thread', 'sdfgsparse::cuda::spmv_merge_fixup_thread'}
    # (each program computes an SpMV of a CSR matrix; gpu_dense_ops an SpMM and an SDDMM too)
    dense = {'sdfgsparse::cuda::spmm_row_col', 'sdfgsparse::cuda::sddmm_row_lane'}
    assert leaves == (spmv | dense if prog is gpu_dense_ops else spmv)
    assert lower.host_accesses(sdfg) == []
    assert _device_to_device_copies(sdfg) == []


def test_dace_gpu_transformation_copies_sparse_arguments_member_by_member():
    """``SDFG.apply_gpu_transformations()`` (:func:`sdfgsparse.targets.cuda.lower.install`): the sparse
    arguments get device twins (host structs of device arrays), read ones are copied in
    member by member, the written sparse result is copied out, nothing else."""
    sdfg = gpu_sdfg(dace_gpu_ops)
    twins = {n: d for n, d in sdfg.arrays.items() if n in ('gpu_A', 'gpu_B', 'gpu___return_1')}
    assert len(twins) == 3
    for name, desc in twins.items():
        assert desc.storage == dace.StorageType.Default
        assert all(m.storage == dace.StorageType.GPU_Global for m in desc.members.values()
                   if isinstance(m, dace.data.Array))
    read, written = set(), set()  # members of the caller's structures, in host memory
    for state in sdfg.states():
        for e in state.edges():
            if isinstance(e.src, dace.nodes.AccessNode) and e.src.data in ('A', 'B', '__return_1'):
                read.add(e.data.data)
            if isinstance(e.dst, dace.nodes.AccessNode) and e.dst.data in ('A', 'B', '__return_1'):
                written.add(e.data.data)
    assert read == {f'{s}.{m}' for s in 'AB' for m in ('crd1', 'pos1', 'vals')}
    assert written == {f'__return_1.{m}' for m in ('crd1', 'pos1', 'vals')}


@pytest.mark.parametrize('prog,reference', [(gpu_dense_ops, dense_reference), (gpu_sparse_ops, sparse_reference),
                                            (dace_gpu_ops, dace_gpu_reference)],
                         ids=['dense-results', 'sparse-results', 'dace-transformation'])
def test_gpu_algorithm_on_the_cpu(prog, reference, rng):
    """The GPU program's graph, with CPU schedules, agrees with scipy over the zoo."""
    cpu = ss.compile(lower.with_cpu_schedules(gpu_sdfg(prog)))
    for name, A in _cases().items():
        if prog is gpu_dense_ops:
            args = dict(A=A, **_dense_args(A, rng))
        elif prog is dace_gpu_ops:
            args = dict(A=A, B=sp.csr_array(sp.random(*A.shape, density=0.3, random_state=7)),
                        x=rng.standard_normal(A.shape[1]))
        else:
            args = dict(A=A, B=sp.csr_array(sp.random(*A.shape, density=0.3, random_state=7)),
                        C=sp.csr_array(sp.random(A.shape[1], A.shape[0], density=0.3, random_state=8)),
                        x=rng.standard_normal(A.shape[1]))
        got = cpu(**args)
        want = reference(**args)
        for k, (g, w) in enumerate(zip(got, want)):
            np.testing.assert_allclose(dense(g).reshape(w.shape), w, **tol(np.float64), err_msg=f'{name}: result {k}')


@pytest.mark.parametrize('prog', [gpu_dense_ops, gpu_sparse_ops, dace_gpu_ops],
                         ids=['dense-results', 'sparse-results', 'dace-transformation'])
def test_every_stream_a_kernel_uses_is_created(prog):
    """Fix 4 of :mod:`sdfgsparse.targets.cuda.compat`: DaCe made 5 streams for
    ``dace_gpu_ops`` and launched ``ss.relu(A)``'s kernels on ``streams[5]`` (a segfault
    on the GPU). The generated code creates every stream it uses."""
    import re
    code = '\n'.join(c.code for c in copy.deepcopy(gpu_sdfg(prog)).generate_code())
    created = int(re.search(r'new dace::cuda::Context\((\d+), \d+\)', code).group(1))
    used = {int(k) for k in re.findall(r'streams\[(\d+)\]', code)}
    assert used and max(used) < created, (sorted(used), created)


_BUILT = {}


def gpu_built(prog):
    """The program built for the GPU with nvcc (once per session)."""
    if prog.name not in _BUILT:
        _BUILT[prog.name] = ss.compile(gpu_sdfg(prog), target='gpu').build()
    return _BUILT[prog.name]


@needs_nvcc
@pytest.mark.parametrize('prog', [gpu_dense_ops, gpu_sparse_ops, dace_gpu_ops],
                         ids=['dense-results', 'sparse-results', 'dace-transformation'])
def test_gpu_program_compiles_with_nvcc(prog):
    assert gpu_built(prog).compiled is not None


def _fetched(r):
    """A GPU program's result in host memory, dense."""
    return dense(r.get() if hasattr(r, 'get') else r)


@pytest.mark.gpu
@pytest.mark.skipif(toolchain.device_count() == 0, reason='no CUDA device')
@pytest.mark.parametrize('prog,reference', [(gpu_dense_ops, dense_reference), (gpu_sparse_ops, sparse_reference)],
                         ids=['dense-results', 'sparse-results'])
def test_gpu_program_runs_on_the_gpu(prog, reference, rng):
    """Every operation run on the device, with the sparse arguments copied there by
    ``to_device`` (and the dense ones as device arrays), agrees with scipy over the zoo;
    results come back in device memory (sparse ones as ``DeviceSparseMatrix``)."""
    from sdfgsparse.runtime.device import DeviceSparseMatrix
    from sdfgsparse.targets.cuda import device
    built = gpu_built(prog)
    for name, A in _cases().items():
        if prog is gpu_dense_ops:
            args = dict(A=A, **_dense_args(A, rng))
        else:
            args = dict(A=A, B=sp.csr_array(sp.random(*A.shape, density=0.3, random_state=7)),
                        C=sp.csr_array(sp.random(A.shape[1], A.shape[0], density=0.3, random_state=8)),
                        x=rng.standard_normal(A.shape[1]))
        got = built(**{k: ss.to_device(v) for k, v in args.items()})
        assert all(isinstance(r, (device.DeviceArray, DeviceSparseMatrix)) for r in got)
        for k, (g, w) in enumerate(zip(got, reference(**args))):
            np.testing.assert_allclose(_fetched(g).reshape(w.shape), w, **tol(np.float64),
                                       err_msg=f'{name}: result {k}')


@pytest.mark.gpu
@pytest.mark.skipif(toolchain.device_count() == 0, reason='no CUDA device')
def test_gpu_program_takes_torch_cuda_tensors(rng):
    """torch CUDA sparse tensors (CSR, with torch's int64 indices where the program has
    int32: converted, with a warning) and dense tensors in; torch CUDA tensors out."""
    torch = pytest.importorskip('torch')
    built = gpu_built(gpu_sparse_ops)
    A = sp.csr_array(sp.random(30, 20, density=0.2, random_state=1))
    B = sp.csr_array(sp.random(30, 20, density=0.3, random_state=2))
    C = sp.csr_array(sp.random(20, 30, density=0.3, random_state=3))
    x = rng.standard_normal(20)

    def cuda(M):
        return torch.sparse_csr_tensor(torch.from_numpy(M.indptr.astype(np.int64)),
                                       torch.from_numpy(M.indices.astype(np.int64)), torch.from_numpy(M.data),
                                       size=M.shape).cuda()

    with pytest.warns(UserWarning, match='copying them'):
        got = built(cuda(A), cuda(B), cuda(C), torch.from_numpy(x).cuda())
    for k, (g, w) in enumerate(zip(got, sparse_reference(A, B, C, x))):
        assert g.device.type == 'cuda', k
        g = g.to_dense() if g.layout != torch.strided else g
        np.testing.assert_allclose(g.cpu().numpy().reshape(w.shape), w, **tol(np.float64), err_msg=f'result {k}')


@dace.program
def gpu_coo_spmv(A: ss.COO[dace.float64, M, N], x: dace.float64[N], y: dace.float64[M]):
    y[:] = A @ x


@pytest.mark.gpu
@pytest.mark.skipif(toolchain.device_count() == 0, reason='no CUDA device')
def test_uncoalesced_torch_cuda_coo_tensor(rng):
    """An uncoalesced torch CUDA COO tensor (duplicates, unsorted): checked and passed as
    its coalesced entries (the sum of the duplicates), and the caller's tensor is unchanged."""
    torch = pytest.importorskip('torch')
    built = ss.compile(gpu_coo_spmv, target='gpu').build()
    idx = torch.tensor([[3, 0, 3, 1, 0], [2, 1, 2, 0, 1]])
    A = torch.sparse_coo_tensor(idx, torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], dtype=torch.float64), (4, 3)).cuda()
    x = rng.standard_normal(3)
    y = torch.zeros(4, dtype=torch.float64, device='cuda')
    built(A, torch.from_numpy(x).cuda(), y)
    np.testing.assert_allclose(y.cpu().numpy(), A.cpu().to_dense().numpy() @ x, rtol=1e-12)
    assert not A.is_coalesced() and A._nnz() == 5


@pytest.mark.gpu
@pytest.mark.skipif(toolchain.device_count() == 0, reason='no CUDA device')
def test_dace_gpu_transformation_runs_on_host_arguments(rng):
    """``SDFG.apply_gpu_transformations()``: the program copies its host arguments in and
    its results out itself."""
    built = gpu_built(dace_gpu_ops)
    for name, A in _cases().items():
        B = sp.csr_array(sp.random(*A.shape, density=0.3, random_state=7))
        x = rng.standard_normal(A.shape[1])
        for k, (g, w) in enumerate(zip(built(A, B, x), dace_gpu_reference(A, B, x))):
            np.testing.assert_allclose(_fetched(g).reshape(w.shape), w, **tol(np.float64),
                                       err_msg=f'{name}: result {k}')


# ---------------------------------------------------------------- structured layouts
@dace.program
def gpu_structured_ops(A: ss.NM[2, 4][dace.float64, M, N], V: ss.VNM[4, 2, 8][dace.float64, M, N],
                       Gp: ss.GNM[2, 2, 4][dace.float64, M, N], x: dace.float64[N], B: dace.float64[N, K],
                       G: dace.float64[M, K], X: dace.float64[M, K], Y: dace.float64[K, N]):
    return A @ x, A @ B, A.T @ G, V @ B, Gp @ x, ss.sddmm(A, X, Y), V.T @ G, Gp.sum(axis=0)


def _structured_args(rng, m=8, n=16, k=3):
    W = rng.standard_normal((m, n))
    W[rng.random(W.shape) < 0.4] = 0
    W[1] = 0  # an empty row
    mats = {name: ss.convert(W, F, prune=True) for name, F in (('A', ss.NM[2, 4]), ('V', ss.VNM[4, 2, 8]),
                                                               ('Gp', ss.GNM[2, 2, 4]))}
    return dict(mats, x=rng.standard_normal(n), B=rng.standard_normal((n, k)), G=rng.standard_normal((m, k)),
                X=rng.standard_normal((m, k)), Y=rng.standard_normal((k, n)))


def structured_reference(A, V, Gp, x, B, G, X, Y):
    Ad, Vd, Gd = A.toarray(), V.toarray(), Gp.toarray()
    return [Ad @ x, Ad @ B, Ad.T @ G, Vd @ B, Gd @ x, Ad * (X @ Y), Vd.T @ G, Gd.sum(axis=0)]


def test_structured_gpu_algorithm_on_the_cpu(rng):
    """ss.NM / ss.VNM / ss.GNM in the GPU program's graph (the level walk; V:N:M's column
    table read inside a scattered index), with CPU schedules, agree with the dense reference."""
    cpu = ss.compile(lower.with_cpu_schedules(gpu_sdfg(gpu_structured_ops)))
    for m, n in ((8, 16), (16, 32)):
        args = _structured_args(rng, m, n)
        for k, (g, w) in enumerate(zip(cpu(**args), structured_reference(**args))):
            np.testing.assert_allclose(dense(g).reshape(w.shape), w, **tol(np.float64), err_msg=f'{m}x{n}: {k}')


@needs_nvcc
def test_structured_gpu_program_compiles_with_nvcc():
    assert gpu_built(gpu_structured_ops).compiled is not None


@pytest.mark.gpu
@pytest.mark.skipif(toolchain.device_count() == 0, reason='no CUDA device')
def test_structured_gpu_program_runs_on_the_gpu(rng):
    built = gpu_built(gpu_structured_ops)
    args = _structured_args(rng, 16, 32)
    got = built(**{k: ss.to_device(v) for k, v in args.items()})
    for k, (g, w) in enumerate(zip(got, structured_reference(**args))):
        np.testing.assert_allclose(_fetched(g).reshape(w.shape), w, **tol(np.float64), err_msg=f'result {k}')


@dace.program
def gpu_merges(A: T, B: ss.CSR[dace.float64, M, N]):
    return A + B, A - B, A * B


@pytest.mark.parametrize('rows', [1, 1023, 1024, 1025, 2600])  # (SCAN_CHUNK is 1024)
def test_merges_on_the_gpu_launch_kernels_per_step_not_per_row(rows, rng):
    """``A ± B`` and ``A * B`` on the GPU: count, prefix sum, fill as maps and tasklets (the
    prefix sum in pieces of ``SCAN_CHUNK`` rows: three kernels, no loop of states, which
    would launch a kernel per row); with CPU schedules they agree with scipy at the pieces'
    boundaries."""
    sdfg = gpu_sdfg(gpu_merges)
    assert not [e for g in sdfg.all_sdfgs_recursive() for e in g.edges() if e.data.assignments]
    cpu = _SDFGS.setdefault('gpu_merges_cpu', ss.compile(lower.with_cpu_schedules(sdfg)))
    A = sp.random_array((rows, 37), density=0.1, format='csr', rng=rng)
    B = sp.random_array((rows, 37), density=0.1, format='csr', rng=rng)
    for got, want in zip(cpu(A=A, B=B), (A + B, A - B, A * B)):
        got = sp.csr_array(got)
        np.testing.assert_array_equal(got.indptr, want.indptr)
        np.testing.assert_allclose(got.toarray(), want.toarray(), rtol=1e-14, atol=0)


I3, J3, K3, R3 = (dace.symbol(s) for s in ('I3', 'J3', 'K3', 'R3'))


@dace.program
def gpu_tensor_ops(T: ss.CSF[dace.float64, I3, J3, K3], U: ss.COO[dace.float64, I3, J3, K3],
                   B: dace.float64[J3, R3], C: dace.float64[K3, R3], v: dace.float64[K3]):
    return np.einsum('ijk,jr,kr->ir', T, B, C), np.einsum('ijk,jr,kr->ir', U, B, C), np.einsum('ijk,k->ij', T, v)


def test_tensor_einsums_on_the_gpu_algorithm_on_the_cpu(rng):
    """N-D tensors (CSF and COO) in a GPU program: every access on the device, and the graph
    with CPU schedules agrees with NumPy (MTTKRP of both formats, TTV's sparse result)."""
    sdfg = gpu_sdfg(gpu_tensor_ops)
    assert lower.is_lowered(sdfg) and lower.host_accesses(sdfg) == []
    cpu = ss.compile(lower.with_cpu_schedules(sdfg))
    for shape, density in (((7, 6, 5), 0.3), ((3, 1, 4), 0.5), ((5, 4, 3), 0.0)):
        T = sp.random_array(shape, density=density, format='coo', rng=rng)
        D = T.toarray()
        B, C, v = rng.random((shape[1], 3)), rng.random((shape[2], 3)), rng.random(shape[2])
        a, b, c = cpu(T=ss.convert(T, ss.CSF), U=T, B=B, C=C, v=v)
        want = np.einsum('ijk,jr,kr->ir', D, B, C)
        np.testing.assert_allclose(a, want, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(b, want, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(dense(c), np.einsum('ijk,k->ij', D, v), rtol=1e-12, atol=1e-12)


@needs_nvcc
def test_tensor_einsums_compile_with_nvcc():
    gpu_built(gpu_tensor_ops)


@dace.program
def gpu_tensor_views(T: ss.CSF[dace.float64, I3, J3, K3], U: ss.COO[dace.float64, I3, J3, K3],
                     v: dace.float64[I3]):
    return (np.moveaxis(T, 0, 2)[:, 1:], T + U, T * U, ss.relu(U - T),
            np.einsum('jki,i->jk', np.moveaxis(U, 0, 2), v))


def test_tensor_views_sums_and_products_on_the_gpu_algorithm_on_the_cpu(rng):
    """Views made data, T + U, T * U and a coalesced tensor (counting sorts, a sequential
    pass) in a GPU program: every access on the device, and the graph with CPU schedules
    agrees with NumPy."""
    sdfg = gpu_sdfg(gpu_tensor_views)
    assert lower.is_lowered(sdfg) and lower.host_accesses(sdfg) == []
    cpu = ss.compile(lower.with_cpu_schedules(sdfg))
    for shape, density in (((5, 4, 3), 0.4), ((2, 3, 1), 0.0)):
        T = sp.random_array(shape, density=density, format='coo', rng=rng)
        U = sp.random_array(shape, density=0.5, format='coo', rng=rng)
        D, DU = T.toarray(), U.toarray()
        v = rng.random(shape[0])
        got = cpu(T=ss.convert(T, ss.CSF), U=U, v=v)
        want = [np.moveaxis(D, 0, 2)[:, 1:], D + DU, D * DU, np.maximum(DU - D, 0),
                np.einsum('jki,i->jk', np.moveaxis(DU, 0, 2), v)]
        for k, (g, w) in enumerate(zip(got, want)):
            np.testing.assert_allclose(dense(g), w, rtol=1e-12, atol=1e-12, err_msg=f'result {k}')


@needs_nvcc
def test_tensor_views_sums_and_products_compile_with_nvcc():
    gpu_built(gpu_tensor_views)
