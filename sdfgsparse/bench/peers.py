"""The peers sdfgsparse is measured against, one adapter each, all in this process.

Every adapter has the same small protocol (the runner also drives
:class:`~sdfgsparse.bench.programs.SdfgsparseSystem` through it):

- ``name``: ``scipy``, ``torch``, ``graphblas``, ``pydata`` or ``mkl`` (the JSON ``system``).
- ``available() -> None | str``: None when usable, else a one-line reason (not installed).
- ``version() -> str``.
- ``setup(threads)``: the peer's own thread setting, where it has one.
- ``prepare(kernel, inputs) -> callable | None``: converts the scipy/NumPy inputs into the
  peer's own types *outside* the timed region and returns the zero-argument call that is
  timed; None when the peer has no such kernel (it is then left out, not failed).
- ``to_host(result)``: the peer's result as scipy / NumPy, for the check against scipy
  (outside the timed region).

The timed call computes the whole kernel from the peer's native inputs to its native
result (e.g. for ``atb`` the transposition is inside the call, as in sdfgsparse).
Dense parts that a peer has no fast path for (gcn's X @ W in GraphBLAS and MKL, the bias
of ``gcn+bias`` there and in pydata) use NumPy inside the timed call.

Composed kernels (``gcn+bias``, ``attention``, ``cg``; see
:mod:`sdfgsparse.bench.kernels`): every peer with ``gcn`` has ``gcn+bias``; ``attention``
and ``cg`` are scipy's (the reference composition: SDDMM by NumPy gathers, a segmented
softmax, CSR @ V; one CG iteration with SpMV and NumPy vector operations) and torch's
(``sampled_addmm``, a softmax over the CSR values by ``scatter_reduce`` / ``index_add``,
CSR @ V; CSR @ p and torch vector operations).
"""
import importlib
import os
import sys
from typing import Any, List, Optional

import numpy as np
import scipy.sparse as sp

from sdfgsparse.bench.errors import PeerSpecError
from sdfgsparse.bench.kernels import Kernel, attention_numpy, cg_step_numpy, sddmm_numpy

__all__ = ['PEER_NAMES', 'ScipyPeer', 'TorchPeer', 'GraphBLASPeer', 'PydataPeer', 'MKLPeer', 'make_peers', 'parse_peers']

PEER_NAMES = ['scipy', 'torch', 'graphblas', 'pydata', 'mkl']


def _missing(module: str, pip_name: str) -> Optional[str]:
    try:
        importlib.import_module(module)
    except ImportError as exc:
        return (f"not installed (pip install {pip_name}, or all peers: pip install -e '.[bench]'): "
                f'{str(exc).splitlines()[0][:120]}')
    except Exception as exc:  # a broken installation (e.g. a native library missing)
        return f'unusable ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})'
    return None


def _version(module: str) -> str:
    mod = sys.modules.get(module) or importlib.import_module(module)
    return str(getattr(mod, '__version__', '?'))


class ScipyPeer:
    """scipy.sparse (sequential C++ kernels); the reference every result is checked against."""
    name = 'scipy'

    def available(self):
        return None

    def version(self):
        return _version('scipy')

    def setup(self, threads):
        """scipy.sparse has no threads."""

    def prepare(self, kernel: Kernel, inp):
        A = inp['A']
        ops = {
            'spmv': lambda x=inp.get('x'): A @ x,
            'spmm': lambda B=inp.get('B'): A @ B,
            'spgemm': lambda: A @ A,
            'add': lambda: A + A.T,
            'gcn': lambda X=inp.get('X'), W=inp.get('W'): np.maximum(A @ (X @ W), 0),
            'gcn+bias': lambda X=inp.get('X'), W=inp.get('W'), b=inp.get('b'): np.maximum(A @ (X @ W) + b, 0),
            'atb': lambda B=inp.get('B'): A.T @ B,
        }
        if kernel.name == 'sddmm':  # no SDDMM in scipy: NumPy gathers and row-wise dots
            return lambda X=inp['X'], Y=inp['Y']: sddmm_numpy(A, X, Y)
        if kernel.name == 'attention':
            return lambda Q=inp['Q'], K=inp['K'], V=inp['V']: attention_numpy(A, Q, K, V)
        if kernel.name == 'cg':
            return lambda x=inp['x'], r=inp['r'], p=inp['p'], rs=inp['rs_old']: cg_step_numpy(A, x, r, p, rs)
        return ops.get(kernel.name)

    def to_host(self, result):
        return result


class TorchPeer:
    """torch.sparse CSR tensors (MKL inside torch's CPU build for SpMV/SpMM), int32 indices."""
    name = 'torch'

    def available(self):
        return _missing('torch', 'torch')

    def version(self):
        return _version('torch')

    def setup(self, threads):
        import torch
        torch.set_num_threads(threads)

    @staticmethod
    def _csr(A):
        import torch
        return torch.sparse_csr_tensor(torch.from_numpy(A.indptr), torch.from_numpy(A.indices),
                                       torch.from_numpy(A.data), size=A.shape, check_invariants=False)

    def prepare(self, kernel: Kernel, inp):
        import torch
        T = self._csr(inp['A'])
        t = {k: torch.from_numpy(v) for k, v in inp.items() if isinstance(v, np.ndarray) and k != 'A'}
        if kernel.name == 'spmv':
            return lambda: T @ t['x']
        if kernel.name == 'spmm':
            return lambda: T @ t['B']
        if kernel.name == 'sddmm':

            def sddmm():
                S = torch.sparse.sampled_addmm(T, t['X'], t['Y'], beta=0.0)
                return torch.sparse_csr_tensor(S.crow_indices(), S.col_indices(), S.values() * T.values(), size=S.shape,
                                               check_invariants=False)

            return sddmm
        if kernel.name == 'spgemm':
            return lambda: T @ T
        if kernel.name == 'add':
            return lambda: T + T.t().to_sparse_csr()
        if kernel.name == 'gcn':
            return lambda: torch.relu(T @ (t['X'] @ t['W']))
        if kernel.name == 'gcn+bias':
            return lambda: torch.relu(T @ (t['X'] @ t['W']) + t['b'])
        if kernel.name == 'atb':
            return lambda: T.t() @ t['B']
        if kernel.name == 'attention':
            return lambda: self._attention(T, t['Q'], t['K'], t['V'])
        if kernel.name == 'cg':
            return lambda: self._cg_step(T, t['x'], t['r'], t['p'], float(inp['rs_old']))
        return None

    @staticmethod
    def _attention(T, Q, K, V):
        import torch
        S = torch.sparse.sampled_addmm(T, Q, K.t(), beta=0.0)
        crow, col = S.crow_indices(), S.col_indices()
        scores = S.values() * T.values()
        m = T.shape[0]
        rows = torch.repeat_interleave(torch.arange(m), crow[1:] - crow[:-1])
        peak = torch.full((m, ), -torch.inf, dtype=scores.dtype).scatter_reduce(0, rows, scores, 'amax')
        e = torch.exp(scores - peak[rows])
        total = torch.zeros(m, dtype=scores.dtype).index_add_(0, rows, e)
        P = torch.sparse_csr_tensor(crow, col, e / total[rows], size=T.shape, check_invariants=False)
        return P @ V

    @staticmethod
    def _cg_step(T, x, r, p, rs_old):
        import torch
        Ap = T @ p
        alpha = rs_old / torch.dot(p, Ap)
        x = x + alpha * p
        r = r - alpha * Ap
        rs_new = torch.dot(r, r)
        p = r + (rs_new / rs_old) * p
        return x, r, p, rs_new

    def to_host(self, result):
        import torch
        if isinstance(result, tuple):
            return tuple(self.to_host(t) for t in result)
        if result.layout == torch.sparse_csr:
            return sp.csr_array((result.values().numpy(), result.col_indices().numpy(), result.crow_indices().numpy()),
                                shape=tuple(result.shape))
        return result.numpy()


class GraphBLASPeer:
    """python-graphblas over SuiteSparse:GraphBLAS; dense operands as full GraphBLAS matrices
    (SDDMM's Y stored by columns, the layout its masked dot-product method wants)."""
    name = 'graphblas'

    def available(self):
        return _missing('graphblas', 'python-graphblas')

    def version(self):
        return _version('graphblas')

    def setup(self, threads):
        import graphblas as gb
        gb.ss.config['nthreads'] = threads

    def prepare(self, kernel: Kernel, inp):
        import graphblas as gb
        G = gb.io.from_scipy_sparse(inp['A'])
        if kernel.name == 'spmv':
            v = gb.Vector.from_dense(inp['x'])
            return lambda: G.mxv(v).new()
        if kernel.name == 'spmm':
            B = gb.Matrix.from_dense(inp['B'])
            return lambda: G.mxm(B).new()
        if kernel.name == 'sddmm':
            # Y stored by columns (Y.T row-major, then a transposed view): the layout with
            # which SuiteSparse computes only the masked dot products.
            X, Yt = gb.Matrix.from_dense(inp['X']), gb.Matrix.from_dense(np.ascontiguousarray(inp['Y'].T))

            def sddmm():
                return X.mxm(Yt.T).new(mask=G.S).ewise_mult(G).new()

            return sddmm
        if kernel.name == 'spgemm':
            return lambda: G.mxm(G).new()
        if kernel.name == 'add':
            return lambda: G.ewise_add(G.T).new()
        if kernel.name == 'gcn':
            X, W = inp['X'], inp['W']

            def gcn():
                XW = gb.Matrix.from_dense(X @ W)
                return G.mxm(XW).new().apply(gb.binary.max, right=0).new()

            return gcn
        if kernel.name == 'gcn+bias':  # empty rows become relu(b): the epilogue is dense, in NumPy
            X, W, b = inp['X'], inp['W'], inp['b']

            def gcn_bias():
                XW = gb.Matrix.from_dense(X @ W)
                return np.maximum(G.mxm(XW).new().to_dense(fill_value=0) + b, 0)

            return gcn_bias
        if kernel.name == 'atb':
            B = gb.Matrix.from_dense(inp['B'])
            return lambda: G.T.mxm(B).new()
        return None

    def to_host(self, result):
        import graphblas as gb
        if isinstance(result, np.ndarray):
            return result
        if isinstance(result, gb.Vector):
            return result.to_dense(fill_value=0)
        if result.ss.format.startswith('full'):
            return result.to_dense(fill_value=0)
        return gb.io.to_scipy_sparse(result, format='csr')


class PydataPeer:
    """pydata ``sparse`` (GCXS, numba kernels, mostly sequential)."""
    name = 'pydata'

    def available(self):
        return _missing('sparse', 'sparse')

    def version(self):
        return _version('sparse')

    def setup(self, threads):
        """numba's thread count is fixed at import; pydata's matmul kernels are sequential."""

    def prepare(self, kernel: Kernel, inp):
        import sparse
        S = sparse.GCXS.from_scipy_sparse(inp['A'])
        ops = {
            'spmv': lambda x=inp.get('x'): S @ x,
            'spmm': lambda B=inp.get('B'): S @ B,
            'spgemm': lambda: S @ S,
            'add': lambda: S + S.T,
            'gcn': lambda X=inp.get('X'), W=inp.get('W'): np.maximum(S @ (X @ W), 0),
            'gcn+bias': lambda X=inp.get('X'), W=inp.get('W'), b=inp.get('b'): np.maximum(S @ (X @ W) + b, 0),
            'atb': lambda B=inp.get('B'): S.T @ B,
        }
        return ops.get(kernel.name)  # no SDDMM in pydata/sparse

    def to_host(self, result):
        import sparse
        if isinstance(result, sparse.SparseArray):
            return sp.csr_array(result.to_scipy_sparse())
        return np.asarray(result)


def _locate_mkl_rt() -> None:
    """sparse_dot_mkl finds libmkl_rt through the loader path or ``$MKL_RT``; the ``mkl``
    wheel puts it in ``<prefix>/lib``, which is not on that path: point ``$MKL_RT`` there.

    Also ``MKL_THREADING_LAYER=GNU`` (unless set): MKL then runs on the GNU OpenMP pool
    that torch and the DaCe-generated code share, instead of a second runtime (Intel's,
    whose threads spin for 200 ms after each call and, interleaved with the other systems
    on few cores, slowed whichever system ran next many times over; docs/performance.md)."""
    os.environ.setdefault('MKL_THREADING_LAYER', 'GNU')
    if 'MKL_RT' in os.environ:
        return
    libdir = os.path.join(sys.prefix, 'lib')
    if os.path.isdir(libdir):
        for f in sorted(os.listdir(libdir)):
            if f.startswith('libmkl_rt.so'):
                os.environ['MKL_RT'] = os.path.join(libdir, f)
                return


class MKLPeer:
    """Intel MKL's inspector-executor sparse BLAS through ``sparse_dot_mkl`` (extra ``bench``)."""
    name = 'mkl'

    def available(self):
        _locate_mkl_rt()
        return _missing('sparse_dot_mkl', 'sparse_dot_mkl mkl')

    def version(self):
        import sparse_dot_mkl
        return f'{_version("sparse_dot_mkl")} (MKL {sparse_dot_mkl.mkl_get_version_string()})'

    def setup(self, threads):
        import sparse_dot_mkl
        sparse_dot_mkl.mkl_set_num_threads(threads)

    def prepare(self, kernel: Kernel, inp):
        from sparse_dot_mkl import dot_product_mkl
        A = sp.csr_matrix(inp['A'])  # shares the arrays
        ops = {
            'spmv': lambda x=inp.get('x'): dot_product_mkl(A, x),
            'spmm': lambda B=inp.get('B'): dot_product_mkl(A, B),
            'spgemm': lambda: dot_product_mkl(A, A),
            'gcn': lambda X=inp.get('X'), W=inp.get('W'): np.maximum(dot_product_mkl(A, X @ W), 0),
            'gcn+bias': lambda X=inp.get('X'), W=inp.get('W'), b=inp.get('b'): np.maximum(
                dot_product_mkl(A, X @ W) + b, 0),
            'atb': lambda B=inp.get('B'): dot_product_mkl(A.T, B),
        }
        return ops.get(kernel.name)  # no SDDMM or sparse + sparse in sparse_dot_mkl

    def to_host(self, result):
        return sp.csr_array(result) if sp.issparse(result) else np.asarray(result)


_CLASSES = {'scipy': ScipyPeer, 'torch': TorchPeer, 'graphblas': GraphBLASPeer, 'pydata': PydataPeer, 'mkl': MKLPeer}


def parse_peers(text: str) -> List[str]:
    """``'scipy,torch'`` -> peer names, in order, without repeats; ``''`` -> no peer.

    Raises :class:`PeerSpecError` naming the entry when it is unknown."""
    out = []
    for item in (s.strip() for s in text.split(',')):
        if not item:
            continue
        if item not in _CLASSES:
            raise PeerSpecError(f'--peers: unknown peer {item!r}; choose from {", ".join(PEER_NAMES)}')
        if item not in out:
            out.append(item)
    return out


def make_peers(names: List[str]) -> List[Any]:
    """Adapter objects for ``names`` (availability is checked by the runner)."""
    return [_CLASSES[n]() for n in names]
