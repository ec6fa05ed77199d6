"""One benchmark run: STREAM triad, sdfgsparse compile times, then every kernel on every
matrix for sdfgsparse and each available peer.

Per (matrix, kernel):

1. skip it (with the reason recorded) if the kernel does not apply to the matrix or would
   exceed the memory budget (:meth:`Kernel.skip_reason`);
2. make seeded inputs and the scipy reference;
3. per system: prepare native inputs (untimed), call once and check the result against
   scipy — a wrong result or an exception is recorded (``correct: false``) and that system
   is not timed;
4. time the correct systems interleaved (:func:`~sdfgsparse.bench.timing.interleaved`:
   ``warmup`` more calls each, then ``repeat`` rounds);
5. one more untimed call per system for its peak memory.

``optimize`` (``--optimize``): the systems are ``sdfgsparse-opt`` (the program through
``ss.optimize`` with this matrix's inputs as examples, optimised and compiled in step 3's
untimed preparation; :class:`~sdfgsparse.bench.programs.OptimizedSystem`), ``sdfgsparse``
and the peers; the optimisations are recorded in ``BenchResult.optimize``.

A system whose checking call took longer than ``slow_call_s`` (default 10 s) is not
called again: that call is its only run (``runs: 1``, and ``note`` says so), its peak
memory is the one of that call. This keeps a full run to about an hour when one system
is orders of magnitude slower than the others on the 20M-nonzero matrices.

Matrices are loaded one at a time and dropped after their kernels ran.
"""
import datetime
import os
import platform
import resource
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

import numpy as np
import scipy.sparse as sp

from sdfgsparse.bench.errors import OptionError
from sdfgsparse.errors import CopyWarning
from sdfgsparse.bench.kernels import Kernel, check_result
from sdfgsparse.bench.matrices import MatrixSource, canonical
from sdfgsparse.bench.peers import make_peers
from sdfgsparse.bench.programs import (OPT_SYSTEM, MKLSystem, OptimizedSystem, SdfgsparseSystem, build_folder,
                                       building_in, measure_compile)
from sdfgsparse.bench.progress import Progress
from sdfgsparse.bench.results import BenchResult, Result
from sdfgsparse.bench.stream import DEFAULT_ELEMENTS, stream_triad
from sdfgsparse.bench.timing import Stats, interleaved, measure_peak
from sdfgsparse.targets.cpu import march, openmp

__all__ = ['BenchConfig', 'run_benchmark', 'machine_info']


@dataclass
class BenchConfig:
    """What to run. ``repeat`` timed runs per system (at least 10 for real measurements;
    fewer only for smoke tests), ``warmup`` extra untimed calls after the checking call.
    ``mem_budget``: bytes of dense operands plus result above which a kernel is skipped on
    a matrix (each system and the check hold copies, so the process peaks at a few times
    that). ``slow_call_s`` and ``optimize``: see the module docstring."""
    kernels: List[Kernel]
    matrices: List[MatrixSource]
    peers: List[str] = field(default_factory=lambda: ['scipy', 'torch', 'graphblas', 'pydata', 'mkl'])
    threads: int = 2
    repeat: int = 10
    warmup: int = 1
    quick: bool = False
    stream_elements: int = DEFAULT_ELEMENTS
    measure_warm_cache: bool = True
    mem_budget: int = 2 << 30
    slow_call_s: float = 10.0
    progress: Optional[bool] = None
    seed: int = 0
    optimize: bool = False
    #: also time ``sdfgsparse-mkl`` (our programs with MKL's products, the ``mkl`` implementation;
    #: slower than the default ones today, so only where asked: ``--with-mkl``)
    with_mkl: bool = False
    only: Optional[str] = None  # run this one system (a child of ``--isolation separate``)
    #: last-level cache of the SpMV traffic model (:meth:`Kernel.bytes`); None: this machine's
    cache_bytes: Optional[int] = None
    #: rounds of the warm-call measurement (:func:`warm_call`; runs with an SpMV kernel);
    #: None: 15, or 7 with ``quick``; 0: not measured
    warm_call_rounds: Optional[int] = None

    def validate(self) -> None:
        if self.threads < 1:
            raise OptionError(f'--threads {self.threads}: expected a positive number of threads')
        if self.repeat < 1:
            raise OptionError(f'--repeat {self.repeat}: expected at least 1 timed run (10 or more for real numbers)')
        if self.warmup < 0:
            raise OptionError(f'warmup={self.warmup}: expected 0 or more warm-up calls')
        if self.only is not None:
            from sdfgsparse.bench.isolation import system_names
            if self.only not in system_names(self):
                raise OptionError(f'--only {self.only}: not one of this run\'s systems '
                                  f'({", ".join(system_names(self))})')


def cpu_model() -> str:
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _llc_mib() -> Optional[float]:
    base = '/sys/devices/system/cpu/cpu0/cache'
    best = None
    try:
        for d in sorted(os.listdir(base)):
            if not d.startswith('index'):
                continue
            with open(os.path.join(base, d, 'size')) as f:
                size = f.read().strip()
            value = float(size[:-1]) * {'K': 1 / 1024, 'M': 1, 'G': 1024}.get(size[-1], 1 / 2**20)
            best = value if best is None else max(best, value)
    except (OSError, ValueError):
        return None
    return best


def machine_info(threads: int) -> Dict[str, Any]:
    """Hardware, software versions, thread settings and the compile target of generated
    code (``target``: :func:`sdfgsparse.targets.cpu.march.describe`) of this process."""
    import dace
    import scipy
    import sdfgsparse
    try:
        mem = os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30
    except (ValueError, OSError, AttributeError):
        mem = 0.0
    return {
        'threads': threads,
        'cpu': cpu_model(),
        'cores': os.cpu_count(),
        'memory_GiB': mem,
        'llc_MiB': _llc_mib(),
        'omp_num_threads_env': os.environ.get('OMP_NUM_THREADS'),
        'mkl_num_threads_env': os.environ.get('MKL_NUM_THREADS'),
        'openblas_num_threads_env': os.environ.get('OPENBLAS_NUM_THREADS'),
        'platform': platform.platform(),
        'target': march.describe(),
        'versions': {
            'python': platform.python_version(),
            'numpy': np.__version__,
            'scipy': scipy.__version__,
            'dace': dace.__version__,
            'sdfgsparse': sdfgsparse.__version__,
        },
        'timestamp': datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds'),
    }


def _line(text: str, log: Optional[Callable[[str], None]]) -> None:
    if log is not None:
        log(text)


def run_benchmark(config: BenchConfig,
                  systems: Optional[List[Any]] = None,
                  log: Optional[Callable[[str], None]] = None) -> BenchResult:
    """Run ``config``; returns the :class:`BenchResult` (nothing is printed but ``log`` lines).

    ``systems`` replaces the default list (sdfgsparse — preceded by sdfgsparse-opt with
    ``config.optimize`` — followed by the adapters of ``config.peers``); every object follows the protocol of :mod:`sdfgsparse.bench.peers`.
    Unavailable peers are dropped with a one-line message through ``log``. Library warnings
    (beta-feature notices, DaCe's code-generation remarks) are silenced during the run;
    sdfgsparse's own ``CopyWarning`` (an argument copied instead of passed zero-copy) is
    kept in the result's ``note``."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return _run(config, systems, log)


def _run(config: BenchConfig, systems, log) -> BenchResult:
    config.validate()
    out = BenchResult(machine=machine_info(config.threads))
    m = out.machine
    cache_bytes = config.cache_bytes or (int(m['llc_MiB'] * 2**20) if m.get('llc_MiB') else None)
    m['model_cache_MiB'] = cache_bytes / 2**20 if cache_bytes else None
    m.update(repeat=config.repeat, warmup=config.warmup, quick=config.quick, peers_skipped={},
             kernels=[k.label for k in config.kernels], matrices=[s.name for s in config.matrices])
    if config.optimize:
        m['optimize'] = True
    if systems is None:
        mkl = [MKLSystem()] if config.with_mkl and any(k.name in MKLSystem.KERNELS for k in config.kernels) else []
        # (MISSING without the [mkl] extra: listed with peers_skipped)
        systems = ([OptimizedSystem()] if config.optimize else []) + [SdfgsparseSystem()] + mkl + make_peers(config.peers)
    if config.only is not None:
        systems = [s for s in systems if s.name == config.only]
    usable = []
    for s in systems:
        why = s.available()
        if why:
            m['peers_skipped'][s.name] = why
            _line(f'peer {s.name}: MISSING, {why}; the best-peer ratios leave it out', log)
            continue
        s.setup(config.threads)
        m['versions'][s.name] = s.version()
        usable.append(s)
    systems = usable
    names = [s.name for s in systems]

    progress = Progress(len(config.matrices) * len(config.kernels) + 2, enabled=config.progress)
    progress.note('STREAM triad')
    with building_in(build_folder()):
        triad = stream_triad(config.stream_elements)
    m.update(stream_triad_GBps=triad['GBps'], stream_method=triad['method'], stream_array_MiB=triad['array_MiB'])
    progress.step('compiling sdfgsparse programs')

    compile_errors: Dict[str, str] = {}
    if 'sdfgsparse' in names:
        out.compile = measure_compile(config.kernels, warm_cache=config.measure_warm_cache)
        compile_errors = {c['kernel']: c['error'] for c in out.compile if c['error']}
    progress.step()

    spmv = next((k for k in config.kernels if k.name == 'spmv'), None)
    rounds = config.warm_call_rounds if config.warm_call_rounds is not None else 7 if config.quick else 15
    if spmv is not None and 'spmv' not in compile_errors and rounds > 0:
        progress.note('warm call')
        m['warm_call'] = warm_call(spmv, systems, config.seed, rounds=rounds)

    for source in config.matrices:
        progress.note(f'loading {source.name}')
        A = source.load()
        for kernel in config.kernels:
            label = f'{kernel.label} {source.name}'
            progress.note(label)
            why = kernel.skip_reason(A, config.mem_budget)
            if why:
                out.skipped.append({'kernel': kernel.label, 'matrix': source.name, 'reason': why})
                progress.step(label)
                continue
            out.results += _run_one(kernel, source.name, A, systems, compile_errors, config, progress,
                                    m['stream_triad_GBps'], cache_bytes)
            progress.step(label)
        del A
    progress.close()
    for s in systems:
        out.optimize += getattr(s, 'records', [])
    m['process_peak_rss_MiB'] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    m['isolation'] = 'same'  # one process (isolation.run_separate merges a process per system)
    m['openmp'] = openmp.describe()  # after the run: every runtime the systems loaded
    return out


#: The warm-call measurement's matrix: rows, columns, density (500 entries).
WARM_CALL_MATRIX = (100, 100, 0.05)


def warm_call(kernel: Kernel, systems, seed: int, rounds: int = 15, calls: int = 2000) -> Dict[str, Any]:
    """What a call costs beside its arithmetic: microseconds per SpMV (``kernel``) of a 100 x
    100 matrix with 500 entries, per system (those whose result is right), the minimum and
    median over ``rounds`` rounds of ``calls`` calls, the systems alternating round by round.
    Argument checks, dispatch, allocation of the result and a kernel's fixed costs (thread
    start-up) decide it; the arithmetic is about 0.5 us."""
    m, n, density = WARM_CALL_MATRIX
    A = canonical(sp.random(m, n, density=density, format='csr', random_state=seed))
    inp = kernel.inputs(A, seed=seed)
    ref = kernel.reference(inp)
    fns: Dict[str, Callable[[], Any]] = {}
    for s in systems:
        if s.name == OPT_SYSTEM:
            continue  # (optimised per matrix of the run)
        try:
            fn = s.prepare(kernel, inp)
            if fn is None or not check_result(s.to_host(fn()), ref, kernel.dtype)[0]:
                continue
            for _ in range(min(calls, 200)):
                fn()
        except Exception:  # a peer that fails here fails in the run proper, where it is reported
            continue
        fns[s.name] = fn
    times: Dict[str, List[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            times[name].append((time.perf_counter() - t0) / calls * 1e6)
    return {'matrix': f'{m} x {n}, {A.nnz} entries', 'rounds': rounds, 'calls': calls,
            'min_us': {k: min(v) for k, v in times.items()},
            'median_us': {k: float(np.median(v)) for k, v in times.items()}}


def _run_one(kernel: Kernel, matrix: str, A, systems, compile_errors, config: BenchConfig, progress: Progress,
             stream_gbps: float, cache_bytes: Optional[int]) -> List[Result]:
    inp = kernel.inputs(A, seed=config.seed)
    ref = kernel.reference(inp)
    flops, nbytes = kernel.flops(inp), kernel.bytes(inp, ref, cache_bytes=cache_bytes)
    A = inp['A']  # the matrix the kernel runs on (cg: its SPD symmetrisation)
    results: Dict[str, Result] = {}
    calls: Dict[str, Callable[[], Any]] = {}
    for s in systems:
        base = Result(kernel.label, matrix, s.name, nnz=int(A.nnz), rows=int(A.shape[0]), cols=int(A.shape[1]),
                      flops=flops, bytes=nbytes)
        if s.name == 'sdfgsparse' and kernel.name in compile_errors:
            base.error = f'failed: build: {compile_errors[kernel.name]}'
            results[s.name] = base
            continue
        progress.note(f'{kernel.label} {matrix} {s.name} (check)')
        try:
            fn = s.prepare(kernel, inp, matrix=matrix) if s.name == OPT_SYSTEM else s.prepare(kernel, inp)
            if fn is None:
                continue  # the peer has no such kernel
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter('always')
                t0 = time.perf_counter()
                raw, peak = measure_peak(fn)
                elapsed = time.perf_counter() - t0
                got = s.to_host(raw)
                del raw
            copies = sorted({str(w.message) for w in caught if issubclass(w.category, CopyWarning)})
            if copies:
                base.note = '; '.join(copies)[:300]
        except Exception as exc:  # a peer's failure is a result, not a crash of the run
            base.error = f'failed: {type(exc).__name__}: {exc}'.splitlines()[0][:300]
            results[s.name] = base
            continue
        ok, detail = check_result(got, ref, kernel.dtype)
        del got
        if not ok:
            base.error = f'wrong result (not timed): {detail}'
        elif elapsed > config.slow_call_s:
            base.correct = True
            _timed(base, [elapsed], flops, nbytes, stream_gbps)
            base.peak_mem_bytes = peak
            slow = f'one run only: the call took {elapsed:.1f} s (> {config.slow_call_s:g} s)'
            base.note = f'{base.note}; {slow}' if base.note else slow
        else:
            base.correct = True
            calls[s.name] = fn
        results[s.name] = base
    stats = interleaved(calls, config.repeat, config.warmup,
                        on_call=lambda name: progress.note(f'{kernel.label} {matrix} {name}'))
    for name, st in stats.items():
        r = results[name]
        if st.error:
            r.correct, r.error = False, f'failed: {st.error}'
            continue
        _timed(r, st.times, flops, nbytes, stream_gbps)
        try:
            r.peak_mem_bytes = measure_peak(calls[name])[1]
        except Exception:  # memory is a side measurement; never fail the run for it
            r.peak_mem_bytes = None
    return list(results.values())


def _timed(r: Result, times: List[float], flops: float, nbytes: float, stream_gbps: float) -> None:
    stats = Stats(list(times))
    r.median_s, r.min_s, r.max_s, r.runs = stats.median, stats.min, stats.max, len(times)
    if r.median_s > 0:
        r.gflops = flops / r.median_s / 1e9
        r.gbps = nbytes / r.median_s / 1e9
        r.bw_fraction = r.gbps / stream_gbps if stream_gbps else None
