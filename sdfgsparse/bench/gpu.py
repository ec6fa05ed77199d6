"""``sdfgsparse bench --target gpu``: our GPU programs against torch's cuSPARSE, in one
process, with every operand already in device memory.

Per kernel (``spmv``, ``spmm:K``) and matrix: our program built by
``ss.compile(..., target='gpu')`` called on a :class:`~sdfgsparse.runtime.device.
DeviceSparseMatrix` and device arrays, timed call to call with the device synchronised
(so a time includes our Python call path, the launches and the kernels), against torch's
CSR product on the same data (int32 and int64 indices; the faster counts); the error
relative to scipy's result; the bytes the kernel must move, as a rate. One line more: the
warm call of a 100 x 100 SpMV, which is all fixed cost. Needs a CUDA device, nvcc and a
CUDA build of torch for the peer (without one, only our times).

Matrices: ``--quick``, the shipped ones (which fit in the GPU's L2: launch and call costs
decide) plus the two largest generated ones of the full set (R-MAT scale 20, ~15M
entries; a band of 2M rows, ~18M entries); the full set is the CPU benchmark's.
"""
import dataclasses
import time
import warnings
from typing import Callable, List, Optional, Sequence

import numpy as np

__all__ = ['GpuRow', 'run_gpu', 'format_gpu', 'DEFAULT_KERNELS']

DEFAULT_KERNELS = ('spmv', 'spmm:16', 'spmm:64')
#: Operand size (bytes of the dense input and output of SpMM) above which a row is skipped.
MAX_DENSE_BYTES = 8 * 2**30


@dataclasses.dataclass
class GpuRow:
    kernel: str
    matrix: str
    rows: int
    nnz: int
    ours_ms: float
    ours_median_ms: float
    peer_ms: Optional[float]
    error: float
    gbps: float
    correct: bool = True

    @property
    def ratio(self) -> Optional[float]:
        """Peer time over ours (above 1: we are faster)."""
        return self.peer_ms / self.ours_ms if self.peer_ms else None


def _programs():
    import dace
    import sdfgsparse as ss
    M, N, K = dace.symbol('M'), dace.symbol('N'), dace.symbol('K')
    f = dace.float64

    @dace.program
    def bench_gpu_spmv(A: ss.CSR[f, M, N], x: f[N], y: f[M]):
        y[:] = A @ x

    @dace.program
    def bench_gpu_spmm(A: ss.CSR[f, M, N], B: f[N, K], C: f[M, K]):
        C[:] = A @ B

    return (ss.compile(bench_gpu_spmv, target='gpu').build(), ss.compile(bench_gpu_spmm, target='gpu').build())


def _torch_cuda():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def _timed(fn, sync, repeat: int):
    fn()
    sync()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t)
    return min(times) * 1e3, float(np.median(times)) * 1e3


def run_gpu(matrices, kernels: Sequence[str] = DEFAULT_KERNELS, repeat: int = 20,
            log: Callable[[str], None] = print) -> dict:
    """Time each kernel on each matrix (see the module docstring); ``{'rows': [GpuRow],
    'warm_call_us': float, 'peer': str}``."""
    from sdfgsparse.bench.errors import OptionError
    from sdfgsparse.runtime.device import to_device as to_sparse_device
    from sdfgsparse.targets.cuda import device, toolchain
    if toolchain.device_count() == 0:
        from sdfgsparse.errors import DeviceError
        raise DeviceError('needs a CUDA device, and this machine has none')
    for k in kernels:
        if k != 'spmv' and not (k.startswith('spmm:') and k[5:].isdigit() and int(k[5:]) > 0):
            raise OptionError(f'--target gpu: kernel {k!r}: expected spmv or spmm:K')
    torch = _torch_cuda()
    sync = torch.cuda.synchronize if torch else (lambda: device.DeviceArray((0, )).get())
    t0 = time.perf_counter()
    spmv, spmm = _programs()
    log(f'built the GPU programs in {time.perf_counter() - t0:.1f} s')
    rng = np.random.default_rng(0)
    rows: List[GpuRow] = []
    for source in matrices:
        A = source.load()
        m, n = A.shape
        dA = to_sparse_device(A)
        tA = None
        if torch:
            warnings.filterwarnings('ignore', message='Sparse (CSR tensor support|invariant checks)')  # torch's notes
            tA = [torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(it)), torch.from_numpy(A.indices.astype(it)),
                                          torch.from_numpy(A.data), size=A.shape,
                                              check_invariants=False).cuda() for it in (np.int32, np.int64)]
        for kernel in kernels:
            k = 1 if kernel == 'spmv' else int(kernel[5:])
            if (m + n) * k * 8 > MAX_DENSE_BYTES:
                log(f'{kernel} on {source.name}: skipped (dense operands over {MAX_DENSE_BYTES >> 30} GiB)')
                continue
            X = rng.standard_normal(n if kernel == 'spmv' else (n, k))
            dX, dY = device.to_device(X), device.DeviceArray((m, ) if kernel == 'spmv' else (m, k))
            prog = spmv if kernel == 'spmv' else spmm
            ours = _timed(lambda: prog(dA, dX, dY), sync, repeat)
            want = A @ X
            scale = max(float(np.abs(want).max(initial=0)), 1e-300)
            error = float(np.abs(dY.get() - want).max(initial=0)) / scale
            peer = None
            if torch:
                tX = torch.from_numpy(X).cuda()
                peer = min(_timed(lambda: t @ tX, sync, repeat)[0] for t in tA)
            moved = A.nnz * (A.data.itemsize + A.indices.itemsize) + (m + 1) * 4 + (n + m) * k * 8
            rows.append(GpuRow(kernel, source.name, m, A.nnz, ours[0], ours[1], peer, error,
                               moved / ours[0] / 1e6, correct=error <= 1e-10))
            log(f'{kernel} on {source.name}: ours {ours[0]:.3f} ms' + (f', cuSPARSE {peer:.3f} ms' if peer else ''))
    import scipy.sparse as sp
    small = sp.random(100, 100, density=0.05, format='csr', random_state=1)
    d_small, dx, dy = to_sparse_device(small), device.to_device(np.ones(100)), device.DeviceArray((100, ))
    warm = _timed(lambda: spmv(d_small, dx, dy), sync, 200)[0] * 1e3
    name = torch.cuda.get_device_name(0) if torch else f'CUDA device sm_{toolchain.device_arch()}'
    return {'rows': rows, 'warm_call_us': warm, 'peer': 'torch cuSPARSE' if torch else None, 'device': name}


def quick_matrices():
    """The ``--quick`` set: the shipped matrices and the two largest generated ones."""
    from sdfgsparse.bench.matrices import default_matrices
    full = default_matrices(quick=False)
    return [m for m in full if m.kind != 'generated'] + [m for m in full if m.name in ('rmat-s20', 'banded-2M')]


def format_gpu(result: dict) -> str:
    """The table of :func:`run_gpu`'s result."""
    from sdfgsparse.targets.cuda import toolchain
    lines = [f'GPU: {result["device"]}; nvcc {".".join(map(str, toolchain.nvcc_version() or ()))}; '
             f'peer: {result["peer"] or "none (no CUDA build of torch)"}',
             f'{"kernel":<9} {"matrix":<22} {"rows":>9} {"nnz":>10} {"ours ms":>9} {"median":>8} {"peer ms":>9} '
             f'{"peer/ours":>9} {"GB/s":>6} {"rel err":>8}']
    for r in result['rows']:
        peer = f'{r.peer_ms:9.3f}' if r.peer_ms else f'{"-":>9}'
        ratio = f'{r.ratio:8.2f}x' if r.ratio else f'{"-":>9}'
        lines.append(f'{r.kernel:<9} {r.matrix[:22]:<22} {r.rows:>9} {r.nnz:>10} {r.ours_ms:9.3f} {r.ours_median_ms:8.3f} '
                     f'{peer} {ratio} {r.gbps:6.0f} {r.error:8.1e}' + ('' if r.correct else '  WRONG'))
    ratios = [r.ratio for r in result['rows'] if r.ratio]
    if ratios:
        lines.append(f'geomean peer/ours: {float(np.exp(np.mean(np.log(ratios)))):.2f}x (above 1: ours faster)')
    lines.append(f'warm call, 100 x 100 SpMV in device memory: {result["warm_call_us"]:.1f} us')
    return '\n'.join(lines)
