"""sdfgsparse's side of the benchmark: one ``@dace.program`` per kernel, their compile
times, the :class:`SdfgsparseSystem` that the runner times like any peer, and
:class:`OptimizedSystem` (``--optimize``): the same programs through ``ss.optimize``.

Shapes are symbols, so one build serves every matrix and every K of a kernel.

Compile time (:func:`measure_compile`), per program:

- ``cold_s``: the first call in this process with DaCe's build folder pointed at a fresh
  temporary folder — parsing, library-node expansion, code generation, CMake, g++ and
  loading, plus one run on a tiny matrix. (If this process already compiled the program,
  DaCe's in-memory cache answers and the figure is small; ``in_memory`` says so.)
  ``cmake_seeded``: CMake's compiler detection came from a seed (:mod:`sdfgsparse.build.cmake_seed`:
  any earlier build on this machine with the same toolchain and flags leaves one), as
  for every build after the first; false: this build paid it (a fixed cost of CMake's
  configure, see docs/performance.md).
- ``warm_cache_s``: the first call of the same program in a *second process* with that
  build folder already filled (timed inside that process, imports excluded) — what a
  user pays on the next run when DaCe's cache hits: parsing, expansion and code
  generation, with CMake and make finding nothing to do. (In the same process DaCe would
  rename a second copy of a loaded program and build it again.) ``warm_cache_rebuilt``
  is true when a library in the folder was built again or a new one appeared, i.e. the
  cache missed.

``--optimize`` (:class:`OptimizedSystem`, system ``sdfgsparse-opt``): per kernel and
matrix, ``ss.optimize(program, matrices=<that matrix's inputs by argument name>)`` — what
a user does with example inputs, so that tiling sees the real sizes — then ``.compile()``,
both before (and outside) the checking and timed calls. Each optimisation is recorded:
``{"kernel", "matrix", "heuristics_ms"`` (``OptimizedProgram.heuristics_s``: the pipeline's
analyses and transformations, C++ compilation excluded), ``"optimize_s"`` (the whole
``ss.optimize`` call, including building the SDFG from the Python source), ``"build_s"``
(``.compile()``: code generation, CMake, g++ — small when DaCe's hash cache already holds
an identical SDFG), ``"steps"`` ({transformation: times applied}), ``"error"}``.
"""
import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from typing import Any, Callable, Dict, List, Optional

import dace
import numpy as np
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.build import cmake_seed
from sdfgsparse.bench.kernels import Kernel

__all__ = ['PROGRAMS', 'SdfgsparseSystem', 'OptimizedSystem', 'MKLSystem', 'OPT_SYSTEM', 'MKL_SYSTEM', 'measure_compile',
           'build_folder']

M, N, K, J, D, E = (dace.symbol(s) for s in 'MNKJDE')

OPT_SYSTEM = 'sdfgsparse-opt'
MKL_SYSTEM = 'sdfgsparse-mkl'


@dace.program
def bench_spmv(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


@dace.program
def bench_spmm(A: ss.CSR[dace.float64, M, N], B: dace.float64[N, K]):
    return A @ B


@dace.program
def bench_sddmm(A: ss.CSR[dace.float64, M, N], X: dace.float64[M, K], Y: dace.float64[K, N]):
    return ss.sddmm(A, X, Y)


@dace.program
def bench_spgemm(A: ss.CSR[dace.float64, M, N], B: ss.CSR[dace.float64, N, K]):
    return A @ B


@dace.program
def bench_add(A: ss.CSR[dace.float64, N, N]):
    return A + A.T


@dace.program
def bench_gcn(A: ss.CSR[dace.float32, N, N], X: dace.float32[N, K], W: dace.float32[K, J]):
    return np.maximum(A @ (X @ W), 0)


@dace.program
def bench_atb(A: ss.CSR[dace.float64, M, N], B: dace.float64[M, K]):
    return A.T @ B


@dace.program
def bench_gcn_bias(A: ss.CSR[dace.float32, N, N], X: dace.float32[N, K], W: dace.float32[K, J], b: dace.float32[J]):
    return np.maximum(A @ (X @ W) + b, 0)


@dace.program
def bench_attention(A: ss.CSR[dace.float64, M, N], Q: dace.float64[M, D], K: dace.float64[N, D],
                    V: dace.float64[N, E]):
    return ss.softmax(ss.sddmm(A, Q, K.T), axis=1) @ V


@dace.program
def bench_cg(A: ss.CSR[dace.float64, N, N], x: dace.float64[N], r: dace.float64[N], p: dace.float64[N],
             rs_old: dace.float64):
    # the body of samples/cg.py's cg_step (tests/bench/test_bench_optimize.py checks it)
    Ap = A @ p
    alpha = rs_old / np.dot(p, Ap)
    x_new = x + alpha * p
    r_new = r - alpha * Ap
    rs_new = np.dot(r_new, r_new)
    p_new = r_new + (rs_new / rs_old) * p
    return x_new, r_new, p_new, rs_new


PROGRAMS = {
    'spmv': bench_spmv,
    'spmm': bench_spmm,
    'sddmm': bench_sddmm,
    'spgemm': bench_spgemm,
    'add': bench_add,
    'gcn': bench_gcn,
    'atb': bench_atb,
    'gcn+bias': bench_gcn_bias,
    'attention': bench_attention,
    'cg': bench_cg,
}


def _arguments(kernel: Kernel, inp: Dict[str, Any]) -> tuple:
    A = inp['A']
    return {
        'spmv': lambda: (A, inp['x']),
        'spmm': lambda: (A, inp['B']),
        'sddmm': lambda: (A, inp['X'], inp['Y']),
        'spgemm': lambda: (A, A),
        'add': lambda: (A, ),
        'gcn': lambda: (A, inp['X'], inp['W']),
        'atb': lambda: (A, inp['B']),
        'gcn+bias': lambda: (A, inp['X'], inp['W'], inp['b']),
        'attention': lambda: (A, inp['Q'], inp['K'], inp['V']),
        'cg': lambda: (A, inp['x'], inp['r'], inp['p'], inp['rs_old']),
    }[kernel.name]()


_BUILD_FOLDER: Dict[str, str] = {}


def build_folder() -> str:
    """This process's temporary DaCe build folder for the benchmark (removed at exit)."""
    if 'path' not in _BUILD_FOLDER:
        import atexit
        path = tempfile.mkdtemp(prefix='sdfgsparse-bench-')
        _BUILD_FOLDER['path'] = path
        atexit.register(shutil.rmtree, path, True)
    return _BUILD_FOLDER['path']


@contextmanager
def building_in(folder: str):
    """Point DaCe's ``default_build_folder`` at ``folder`` for the duration, then restore it."""
    old = dace.Config.get('default_build_folder')
    dace.Config.set('default_build_folder', value=folder)
    try:
        yield folder
    finally:
        dace.Config.set('default_build_folder', value=old)


def _entries(folder: str) -> int:
    return len(os.listdir(folder)) if os.path.isdir(folder) else 0


def _libraries(folder: str) -> Dict[str, int]:
    """Every compiled library under ``folder`` with its modification time."""
    found = {}
    for root, _, files in os.walk(folder):
        for f in files:
            if f.endswith('.so') or f.endswith('.dylib') or f.endswith('.dll'):
                path = os.path.join(root, f)
                found[path] = os.stat(path).st_mtime_ns
    return found


_WARM_CALL = """
import json, sys, time
import dace
from sdfgsparse.bench.kernels import parse_kernels
from sdfgsparse.bench.programs import PROGRAMS, _arguments, _tiny
kernel = parse_kernels(sys.argv[1])[0]
args = _arguments(kernel, _tiny(kernel))
with dace.config.set_temporary('default_build_folder', value=sys.argv[2]):
    t0 = time.perf_counter()
    PROGRAMS[kernel.name](*args)
    print(json.dumps(time.perf_counter() - t0))
"""


def _call_in_new_process(kernel: Kernel, folder: str) -> float:
    """Seconds of the first call of ``kernel``'s program in a new Python process building
    in ``folder`` (measured there: interpreter start and imports excluded)."""
    import json
    import subprocess
    import sys
    out = subprocess.run([sys.executable, '-c', _WARM_CALL, kernel.label, folder], capture_output=True, text=True,
                         check=True)
    return float(json.loads(out.stdout.strip().splitlines()[-1]))


def _tiny(kernel: Kernel) -> Dict[str, Any]:
    A = sp.csr_array(sp.random_array((8, 8), density=0.3, format='csr', rng=np.random.default_rng(0)))
    A.indices = A.indices.astype(np.int32)
    A.indptr = A.indptr.astype(np.int32)
    return kernel.inputs(A, seed=0)


def measure_compile(kernels: List[Kernel], warm_cache: bool = True) -> List[Dict[str, Any]]:
    """Compile the program of each distinct kernel and time it (see the module docstring).

    Returns one record per program: ``{"kernel", "cold_s", "in_memory", "cmake_seeded", "warm_cache_s",
    "warm_cache_rebuilt", "error"}`` (``warm_cache_*`` None when ``warm_cache`` is False;
    ``error`` None unless the build failed, in which case the kernel cannot run)."""
    records = []
    seen = set()
    for kernel in kernels:
        if kernel.name in seen:
            continue
        seen.add(kernel.name)
        prog = PROGRAMS[kernel.name]
        rec = {'kernel': kernel.name, 'cold_s': None, 'in_memory': False, 'cmake_seeded': False, 'warm_cache_s': None,
               'warm_cache_rebuilt': None, 'error': None}
        args = _arguments(kernel, _tiny(kernel))
        with building_in(build_folder()) as folder:
            try:
                before, planted = _entries(folder), cmake_seed.SEEDS['planted']
                t0 = time.perf_counter()
                prog(*args)
                rec['cold_s'] = time.perf_counter() - t0
                rec['in_memory'] = _entries(folder) == before
                rec['cmake_seeded'] = cmake_seed.SEEDS['planted'] > planted
                if warm_cache:
                    before = _libraries(folder)
                    rec['warm_cache_s'] = _call_in_new_process(kernel, folder)
                    rec['warm_cache_rebuilt'] = _libraries(folder) != before
            except Exception as exc:  # a failed build is reported, the kernel is then skipped
                rec['error'] = f'{type(exc).__name__}: {exc}'.splitlines()[0][:300]
        records.append(rec)
    return records


class SdfgsparseSystem:
    """The system under test: calls the kernel's ``@dace.program`` with the scipy inputs
    (zero-copy) exactly as a user would; the result is what the program returns."""
    name = 'sdfgsparse'

    def available(self) -> Optional[str]:
        return None

    def version(self) -> str:
        return ss.__version__

    def setup(self, threads: int) -> None:
        """OpenMP threads are fixed when the process starts (``OMP_NUM_THREADS``); see cli."""

    def prepare(self, kernel: Kernel, inp: Dict[str, Any]) -> Optional[Callable[[], Any]]:
        prog = PROGRAMS[kernel.name]
        args = _arguments(kernel, inp)
        return lambda: prog(*args)

    def to_host(self, result):
        return result


class MKLSystem:
    """``sdfgsparse-mkl``: the SpMV, SpMM and SpGEMM programs with their products taking the
    ``mkl`` implementation (MKL's sparse BLAS, :mod:`sdfgsparse.targets.mkl`; the ``[mkl]``
    extra), parsed and built once per kernel outside the timed calls; no other kernel."""
    name = MKL_SYSTEM
    KERNELS = ('spmv', 'spmm', 'spgemm')

    def __init__(self):
        self._programs: Dict[str, Any] = {}

    def available(self) -> Optional[str]:
        from sdfgsparse.targets import mkl
        return mkl.missing()

    def version(self) -> str:
        return ss.__version__

    def setup(self, threads: int) -> None:
        """OpenMP threads are fixed when the process starts (``OMP_NUM_THREADS``); see cli."""

    def prepare(self, kernel: Kernel, inp: Dict[str, Any]) -> Optional[Callable[[], Any]]:
        if kernel.name not in self.KERNELS:
            return None
        prog = self._programs.get(kernel.name)
        if prog is None:
            with ss.targets.use_implementation('mkl'):
                sdfg = PROGRAMS[kernel.name].to_sdfg()
            prog = self._programs[kernel.name] = ss.compile(sdfg)
            prog.compiled  # build now, not in the first timed call
        kwargs = dict(zip(('A', 'x') if kernel.name == 'spmv' else ('A', 'B'), _arguments(kernel, inp)))
        return lambda: prog(**kwargs)

    def to_host(self, result):
        return result


class OptimizedSystem:
    """``sdfgsparse-opt``: the kernel's program through ``ss.optimize`` with the inputs of
    each matrix as examples (see the module docstring), called like the program. Every
    optimisation is appended to :attr:`records`."""
    name = OPT_SYSTEM

    def __init__(self):
        self.records: List[Dict[str, Any]] = []

    def available(self) -> Optional[str]:
        return None

    def version(self) -> str:
        return ss.__version__

    def setup(self, threads: int) -> None:
        """As :class:`SdfgsparseSystem`."""

    def optimize(self, program, examples: Dict[str, Any]):
        """``ss.optimize(program, matrices=examples)`` (a separate method, so that a test can
        put a wrong optimiser in its place)."""
        return ss.optimize(program, matrices=examples)

    def prepare(self, kernel: Kernel, inp: Dict[str, Any], matrix: Optional[str] = None) -> Callable[[], Any]:
        prog = PROGRAMS[kernel.name]
        args = _arguments(kernel, inp)
        rec = {'kernel': kernel.label, 'matrix': matrix, 'heuristics_ms': None, 'optimize_s': None, 'build_s': None,
               'steps': {}, 'error': None}
        self.records.append(rec)
        try:
            t0 = time.perf_counter()
            opt = self.optimize(prog, dict(zip(prog.argnames, args)))
            rec['optimize_s'] = time.perf_counter() - t0
            rec['heuristics_ms'] = opt.heuristics_s * 1e3
            rec['steps'] = {s.name: s.applied for s in opt.steps}
            with building_in(build_folder()):
                t0 = time.perf_counter()
                opt.compile()
                rec['build_s'] = time.perf_counter() - t0
        except Exception as exc:  # recorded here and, raised again, as the system's failure
            rec['error'] = f'{type(exc).__name__}: {exc}'.splitlines()[0][:300]
            raise
        return lambda: opt(*args)

    def to_host(self, result):
        return result
