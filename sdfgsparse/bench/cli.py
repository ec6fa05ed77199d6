"""``sdfgsparse bench``: sdfgsparse against scipy, torch, GraphBLAS, pydata/sparse and MKL.

    sdfgsparse bench [--matrices DIR] [--kernels spmv,spmm,...] [--threads N] [--repeat R]
                     [--peers scipy,torch,graphblas,pydata,mkl] [--json FILE] [--plot FILE.png]
                     [--quick] [--no-progress] [--stream-mib MIB] [--optimize]
                     [--isolation same|separate] [--march ARCH] [--check] [--with-mkl] [--busy [N]]
                     [--target cpu|fpga [--board u280] [--clock-mhz 300]]

``--optimize`` adds the system ``sdfgsparse-opt`` (each kernel's program through
``ss.optimize`` with the matrix's inputs as examples) next to the unoptimised
``sdfgsparse``; ``gcn`` then means ``gcn+bias``, and without ``--kernels`` the kernels are
gcn, attention, atb and cg.

``--isolation separate`` times each system in a process of its own
(:mod:`sdfgsparse.bench.isolation`); the default ``same`` times them all in one process,
calls alternating (every system after every other equally often), as a user runs them
side by side.

``--march ARCH`` builds the generated code for ``-march=ARCH`` (e.g. ``x86-64-v3``) instead
of ``native`` (:mod:`sdfgsparse.targets.cpu.march`): set before anything compiles, it reaches
the re-executed child and every child process (``--isolation separate``, the warm-cache
build, ``--busy``'s single-thread run) through ``--march`` and ``DACE_compiler_cpu_args``.
A target the compiler refuses or this CPU cannot run is a bad option. The report's header
names the CPU, the compiler, the target flags (``-march`` and what native resolves to,
vector bytes) and the threads.

Every run that timed scipy ends with one line: how many of our kernel x matrix pairs were
at least as fast as scipy's (one thread), and which were slower. ``--check``
(:mod:`sdfgsparse.bench.check`) makes it a gate for scripts: every sdfgsparse (and
sdfgsparse-opt) result slower than scipy's is listed loudly and the exit status is 3; a
pair without a timed scipy result is reported as unchecked.

``--with-mkl`` adds the system ``sdfgsparse-mkl`` (our SpMV, SpMM and SpGEMM programs with
MKL's products: the ``mkl`` implementation, needs the ``[mkl]`` extra); it is slower than
the default implementations today, so it is timed only where asked.

``--busy [N]`` (:mod:`sdfgsparse.bench.busy`): the run (the quiet run) is followed by our
single-thread run (a child process: ``--threads 1``, no peers) and by the same run again
while N spinning processes (default 1) hold cores, the last one first (the busy run); both tables are printed, then a
busy summary per kernel and matrix (our busy time against our own single-thread time, goal
>= 0.9x, and against the fastest peer's busy time, goal >= 0.8x). ``--json`` then holds the
quiet run with ``busy``, ``single_thread`` and ``busy_summary`` beside it.

``--target fpga`` runs :mod:`sdfgsparse.bench.fpga` instead: the designs ``ss.optimize``
chooses for the FPGA, their model per matrix and a C-simulation check (no timing of peers).

The top-level command adds this sub-command with :func:`add_parser`; :func:`run` runs it.

Threads: OpenMP reads ``OMP_NUM_THREADS`` once, when the runtime loads, so :func:`run`
re-executes itself in a child process (``python -m sdfgsparse.bench.cli``) with
``OMP_NUM_THREADS`` and ``MKL_NUM_THREADS`` set to ``--threads`` and
``OPENBLAS_NUM_THREADS=1`` (:func:`thread_env`) unless the environment already says so.
torch, GraphBLAS and MKL are also set through their own APIs; scipy.sparse and
pydata/sparse are sequential. NumPy's OpenBLAS (the vector dot products and dense
products of scipy's composed kernels) runs on one thread: its threads busy-wait for a
while after each multi-threaded call and take a core from whatever runs next (figures in
``docs/performance.md``).

Exit status:

* 0: every sdfgsparse (and sdfgsparse-opt) result agreed with scipy (and, with ``--check``,
  none was slower than scipy's);
* 1: one of ours disagreed with scipy or failed (in any run of ``--busy``); this wins over 3;
* 2: bad options (a bad ``--march`` included), or unreadable matrices;
* 3: ``--check``: one of ours was slower than scipy on some kernel and matrix.

Wrong peer results are reported, not an error of the run.
"""
import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from typing import Optional, Sequence

import dace

from sdfgsparse.bench.argv import to_argv
from sdfgsparse.bench.busy import busy_summary, format_busy_summary, spinners, spinning_text
from sdfgsparse.bench.check import check_against_scipy
from sdfgsparse.bench.isolation import run_separate
from sdfgsparse.bench.results import OURS, BenchResult
from sdfgsparse.errors import DeviceError
from sdfgsparse.targets.cpu import march

__all__ = ['add_parser', 'run', 'main', 'config_from_args', 'to_argv', 'thread_env', 'set_march']

CHILD_ENV = 'SDFGSPARSE_BENCH_CHILD'
STREAM_MIB, QUICK_STREAM_MIB = 512, 256


def _busy_count(text: str) -> int:
    """``--busy N``: a number of spinning processes, at least 1."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'--busy takes a number of spinning processes, got {text!r}') from None
    if n < 1:
        raise argparse.ArgumentTypeError(f'--busy takes a number of spinning processes of at least 1, got {n}')
    return n


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``bench`` sub-command to ``subparsers`` (from ``parser.add_subparsers()``)."""
    from sdfgsparse.bench.kernels import ALL_KERNELS, DEFAULT_FULL, DEFAULT_OPTIMIZE, DEFAULT_QUICK
    from sdfgsparse.bench.peers import PEER_NAMES
    p = subparsers.add_parser(
        'bench',
        help='benchmark sdfgsparse against scipy, torch, GraphBLAS, pydata/sparse and MKL',
        description='Time sdfgsparse kernels against peer libraries in the same process, check every '
        'result against scipy, and report medians, GFLOP/s, effective GB/s against a STREAM triad, '
        'compile times and peak memory.')
    p.add_argument('--matrices', metavar='DIR', default=None,
                   help='folder of .mtx / .mtx.gz files (default: the shipped small matrices plus generated '
                   'R-MAT and banded ones up to ~20M nonzeros)')
    p.add_argument('--kernels', default=None, metavar='LIST',
                   help=f'comma-separated, from {", ".join(ALL_KERNELS)}; spmm:K, sddmm:K, gcn:K, atb:K, '
                   f'gcn+bias:K, attention:K choose the dense width (default {DEFAULT_FULL}; --quick: {DEFAULT_QUICK}; '
                   f'--optimize: {DEFAULT_OPTIMIZE})')
    p.add_argument('--threads', type=int, default=2, metavar='N', help='threads for every system (default 2)')
    p.add_argument('--repeat', type=int, default=10, metavar='R', help='timed runs per system (default 10)')
    p.add_argument('--peers', default=','.join(PEER_NAMES), metavar='LIST',
                   help=f'comma-separated peers (default {",".join(PEER_NAMES)}); missing ones are skipped')
    p.add_argument('--json', metavar='FILE', default=None, help='write all results as JSON')
    p.add_argument('--plot', metavar='FILE.png', default=None, help='write a PNG (needs matplotlib)')
    p.add_argument('--quick', action='store_true',
                   help='about a minute: shipped matrices plus one small generated one, spmv and spmm')
    p.add_argument('--no-progress', action='store_true', help='no progress bar on the terminal')
    p.add_argument('--stream-mib', type=int, default=None, metavar='MIB',
                   help=f'size of each STREAM triad array (default {STREAM_MIB}; --quick: {QUICK_STREAM_MIB}); '
                   'keep it several times the last-level cache')
    p.add_argument('--optimize', action='store_true',
                   help='also run every kernel through ss.optimize (system sdfgsparse-opt, with the matrix as '
                   'example input) and report its heuristics time; gcn then includes a bias (gcn+bias)')
    p.add_argument('--isolation', choices=('same', 'separate'), default='same',
                   help='same (default): every system in one process, calls alternating (every system after every '
                   'other equally often), as '
                   'a user runs them side by side; separate: each system in a process of its own (no other '
                   'library\'s threads or OpenMP runtime loaded)')
    p.add_argument('--march', default=None, metavar='ARCH',
                   help='build the generated code for -march=ARCH (e.g. x86-64-v3, x86-64-v4; default: DaCe\'s flags, '
                   '-march=native); refused when the compiler or this CPU cannot')
    p.add_argument('--check', action='store_true',
                   help='after the run, fail (exit status 3) when any sdfgsparse result is slower than scipy\'s '
                   '(single-threaded) on some kernel and matrix, listing them')
    p.add_argument('--with-mkl', action='store_true',
                   help='also time sdfgsparse-mkl: our programs with MKL\'s products (the mkl implementation; needs '
                   'the [mkl] extra)')
    p.add_argument('--busy', nargs='?', type=_busy_count, const=1, default=0, metavar='N',
                   help='run again while N spinning processes (default 1) hold cores (the last core first, then '
                   'downwards), and compare that busy run with our own single-thread time (goal >= 0.9x) and with '
                   'the fastest peer (goal >= 0.8x)')
    p.add_argument('--only', default=None, help=argparse.SUPPRESS)  # one system: a child of --isolation separate
    p.add_argument('--suite', choices=('kernels', 'ml', 'shape', 'tensor'), default='kernels',
                   help='kernels (default): sparse kernels against peer libraries; ml: sparse torch models '
                   '(GCN inference and training step, sparse MLP) compiled with ss.torch.compile against eager '
                   'dense torch and torch.sparse (needs torch); shape: slices of sparse matrices, alone and fused '
                   'with SpMV, SpMM and sums, against scipy, pydata/sparse (where installed) and the same program '
                   'with the slice materialised; tensor: MTTKRP and TTV of generated sparse 3-D tensors (CSF and COO) '
                   'against pydata/sparse einsum (where installed) and NumPy (--quick: the 480K-entry tensor only)')
    p.add_argument('--target', choices=('cpu', 'gpu', 'fpga'), default='cpu',
                   help='cpu (default): time against the peers; gpu: our GPU programs (spmv, spmm:16, spmm:64) '
                   'against torch cuSPARSE with every operand in device memory (needs a CUDA device; --quick: the '
                   'shipped matrices and the two largest generated ones); fpga: the FPGA designs ss.optimize '
                   'chooses for '
                   'spmv, spmm:K, gcn:K and sddmm:K, their resource and performance model per matrix and a '
                   'C-simulation '
                   'check against scipy (needs g++; default matrices: the --quick set)')
    p.add_argument('--distributed', action='store_true',
                   help='distributed SpMV, SpMM and CG over MPI (run under mpiexec; needs the [mpi] extra): time per '
                   'call, bytes each process sent, the partition\'s lower bound and the communication model, then '
                   'its prediction for 1 to 1,000 nodes (sdfgsparse.bench.distributed)')
    p.add_argument('--partitions', default=None, metavar='LIST',
                   help='--distributed: partitions to run (default rows,2d,arrow)')
    p.add_argument('--predict-grid', type=int, default=None, metavar='SIDE',
                   help='--distributed: also model SpMV of the 5-point Laplacian of a SIDE x SIDE grid on 1 to 1,000 '
                   'nodes (partitioned for each node count, not run)')
    p.add_argument('--board', default='u280', help='--target fpga: the board of the model (u250, u280, u55c)')
    p.add_argument('--clock-mhz', type=float, default=300, metavar='MHZ',
                   help='--target fpga: the kernel clock of the model (default 300)')
    p.set_defaults(func=run)
    return p


def config_from_args(args):
    """The :class:`~sdfgsparse.bench.runner.BenchConfig` of parsed arguments (raises a
    :class:`~sdfgsparse.bench.errors.BenchError` naming the bad option)."""
    from sdfgsparse.bench.kernels import DEFAULT_FULL, DEFAULT_OPTIMIZE, DEFAULT_QUICK, parse_kernels
    from sdfgsparse.bench.matrices import default_matrices, from_folder
    from sdfgsparse.bench.peers import parse_peers
    from sdfgsparse.bench.errors import OptionError
    from sdfgsparse.bench.runner import BenchConfig
    mib = args.stream_mib if args.stream_mib is not None else (QUICK_STREAM_MIB if args.quick else STREAM_MIB)
    if mib < 1:
        raise OptionError(f'--stream-mib {mib}: expected a positive size in MiB')
    optimize = getattr(args, 'optimize', False)
    default = DEFAULT_OPTIMIZE if optimize else DEFAULT_QUICK if args.quick else DEFAULT_FULL
    kernels = parse_kernels(args.kernels or default, optimize=optimize)
    peers = parse_peers(args.peers)
    matrices = from_folder(args.matrices) if args.matrices else default_matrices(quick=args.quick)
    config = BenchConfig(kernels=kernels, matrices=matrices, peers=peers, threads=args.threads, repeat=args.repeat,
                         quick=args.quick, stream_elements=mib * 2**20 // 8,
                         progress=False if args.no_progress else None, optimize=optimize,
                         only=getattr(args, 'only', None), with_mkl=getattr(args, 'with_mkl', False))
    config.validate()
    return config


def thread_env(threads: int) -> dict:
    """The thread settings the benchmark process runs with (see the module docstring)."""
    n = str(threads)
    return {'OMP_NUM_THREADS': n, 'MKL_NUM_THREADS': n, 'OPENBLAS_NUM_THREADS': '1'}


def set_march(arch: Optional[str]) -> None:
    """Build generated code for ``-march=arch`` in this process and in every child it starts
    (``DACE_compiler_cpu_args``); raises :class:`~sdfgsparse.errors.DeviceError` where the
    compiler or this CPU cannot (see :func:`sdfgsparse.targets.cpu.march.set_target`)."""
    if arch is None:
        return
    march.set_target(arch)
    os.environ['DACE_compiler_cpu_args'] = dace.Config.get('compiler', 'cpu', 'args')


def _reexec(args) -> int:
    env = dict(os.environ)
    env.update({CHILD_ENV: '1', **thread_env(args.threads)})
    sys.stdout.flush()
    sys.stderr.flush()
    return subprocess.call([sys.executable, '-m', 'sdfgsparse.bench.cli'] + to_argv(args), env=env)


def run(args) -> int:
    """Run ``bench`` with parsed ``args``; returns the exit status (see the module docstring)."""
    from sdfgsparse.bench.errors import BenchError
    if getattr(args, 'distributed', False):  # every MPI process runs it; threads from the environment
        try:
            from sdfgsparse.bench import distributed
            import mpi4py  # noqa: F401
        except ImportError:
            print("sdfgsparse bench --distributed: needs the [mpi] extra (pip install 'sdfgsparse[mpi]')",
                  file=sys.stderr)
            return 2
        return distributed.run(args)
    if getattr(args, 'target', 'cpu') == 'fpga':
        return _run_fpga(args)
    if getattr(args, 'target', 'cpu') == 'gpu':
        return _run_gpu(args)
    try:
        config = config_from_args(args)
    except BenchError as exc:
        print(f'sdfgsparse bench: {exc}', file=sys.stderr)
        return 2
    try:
        set_march(getattr(args, 'march', None))
    except DeviceError as exc:
        print(f'sdfgsparse bench: --march: {exc}', file=sys.stderr)
        return 2
    wanted = thread_env(args.threads)
    loaded = ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS')  # read when OpenMP and NumPy loaded, before us
    if any(os.environ.get(k) != wanted[k] for k in loaded) and not os.environ.get(CHILD_ENV):
        return _reexec(args)
    os.environ.setdefault('MKL_NUM_THREADS', wanted['MKL_NUM_THREADS'])  # MKL loads with its peer, later

    if getattr(args, 'suite', 'kernels') == 'ml':
        return _run_ml(args, config)
    if getattr(args, 'suite', 'kernels') == 'shape':
        return _run_shape(args, config)
    if getattr(args, 'suite', 'kernels') == 'tensor':
        return _run_tensor(args)
    from sdfgsparse.bench.plot import write_plot
    from sdfgsparse.bench.report import format_report
    log = lambda line: print(f'sdfgsparse bench: {line}', flush=True)  # noqa: E731
    busy = getattr(args, 'busy', False)
    runs = []  # (label, result)
    extra = {}
    try:
        result = _measure(args, config, log)
        runs.append(('quiet run' if busy else '', result))
        if busy:
            log('our single-thread time on the quiet machine: a child process with --threads 1 and no peers')
            single = _single_thread(args, log)
            with spinners(busy) as spinning_now:
                log('busy run: the same run again while ' + ', '.join(
                    f'process {s.pid} spins on core {s.core}' for s in spinning_now))
                busy_result = _measure(args, config, log)
            busy_result.machine['busy_core'] = spinning_now[0].core
            busy_result.machine['busy_cores'] = [s.core for s in spinning_now]
            runs.append(('busy run', busy_result))
            rows = busy_summary(busy_result, single)
            extra = {'busy': busy_result.to_dict(), 'single_thread': single.to_dict() if single else None,
                     'busy_summary': [r.to_dict() for r in rows]}
    except BenchError as exc:  # a matrix whose header read but whose entries do not
        print(f'sdfgsparse bench: {exc}', file=sys.stderr)
        return 2
    for label, res in runs:
        if label:
            print(f'\n==== {label}' + (f' ({spinning_text(res.machine["busy_cores"])})'
                                        if 'busy_cores' in res.machine else ''), flush=True)
        print(format_report(res), flush=True)
    if busy:
        print('\n' + format_busy_summary(rows, core=busy_result.machine['busy_cores']), flush=True)
    if args.json:
        result.write_json(args.json, extra=extra)
        print(f'sdfgsparse bench: results written to {args.json}')
    if args.plot:
        why = write_plot(result, args.plot)
        print(f'sdfgsparse bench: --plot: {why}' if why else f'sdfgsparse bench: plot written to {args.plot}')
    wrong = any(not r.correct for _, res in runs for r in res.results if r.system in OURS)
    slow = False
    for label, res in runs:
        verdict = check_against_scipy(res, label=label)
        if getattr(args, 'check', False):
            print('\n' + verdict.format(), flush=True)
            slow = slow or not verdict.ok
        elif any(r.system == 'scipy' for r in res.results):
            print(verdict.summary(), flush=True)
    return 1 if wrong else 3 if slow else 0


def _measure(args, config, log):
    """One run of ``config``: in this process, or a process per system (``--isolation separate``)."""
    from sdfgsparse.bench.runner import run_benchmark
    if getattr(args, 'isolation', 'same') == 'separate' and not args.only:
        return run_separate(args, config, log)
    return run_benchmark(config, log=log)


def _single_thread(args, log):
    """Our systems on one thread on the quiet machine, measured in a child process
    (``--threads 1``, no peers, the same kernels, matrices, repeats and ``--march``); None
    (logged) where the child failed."""
    with tempfile.TemporaryDirectory(prefix='sdfgsparse-bench-') as tmp:
        path = os.path.join(tmp, 'single.json')
        child = argparse.Namespace(**{**vars(args), 'threads': 1, 'peers': '', 'isolation': 'same', 'only': None,
                                      'json': path, 'plot': None, 'no_progress': True, 'busy': False,
                                      'check': False, 'stream_mib': 1})
        env = dict(os.environ)
        env.update({CHILD_ENV: '1', **thread_env(1)})
        proc = subprocess.run([sys.executable, '-m', 'sdfgsparse.bench.cli'] + to_argv(child), env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if not os.path.exists(path):
            tail = ' | '.join(proc.stdout.strip().splitlines()[-3:])
            log(f'single-thread run failed (exit status {proc.returncode}): {tail}')
            return None
        with open(path) as f:
            return BenchResult.from_dict(json.load(f))


def _run_ml(args, config) -> int:
    from sdfgsparse.bench.errors import BenchError
    from sdfgsparse.bench.ml import format_ml, run_ml
    from sdfgsparse.bench.ml_structured import FULL, QUICK
    try:
        results = run_ml(config.matrices, repeat=args.repeat, seqs=(512, ) if args.quick else (512, 1024, 2048),
                         log=lambda line: print(f'sdfgsparse bench: {line}', flush=True),
                         structured=QUICK if args.quick else FULL)
    except BenchError as exc:
        print(f'sdfgsparse bench: {exc}', file=sys.stderr)
        return 2
    return _suite_done(args, results, format_ml(results))


def _run_shape(args, config) -> int:
    from sdfgsparse.bench.shape import format_shape, run_shape
    results = run_shape(config.matrices, repeat=args.repeat,
                        log=lambda line: print(f'sdfgsparse bench: {line}', flush=True))
    return _suite_done(args, results, format_shape(results))


def _run_tensor(args) -> int:
    from sdfgsparse.bench.tensor import format_tensor, run_tensor
    results = run_tensor(quick=args.quick, repeat=min(args.repeat, 10),
                         log=lambda line: print(f'sdfgsparse bench: {line}', flush=True))
    return _suite_done(args, results, format_tensor(results))


def _suite_done(args, results, table: str) -> int:
    """Print a suite's table, write its results to ``--json``; exit status 1 when any
    result is wrong."""
    print(table, flush=True)
    if args.json:
        import json
        with open(args.json, 'w') as f:
            json.dump([r.__dict__ for r in results], f, indent=1)
        print(f'sdfgsparse bench: results written to {args.json}')
    return 1 if any(not r.correct for r in results) else 0


def _run_fpga(args) -> int:
    from sdfgsparse.bench.errors import BenchError
    from sdfgsparse.bench.fpga import DEFAULT_KERNELS, format_fpga, run_fpga
    from sdfgsparse.bench.matrices import default_matrices, from_folder
    from sdfgsparse.targets.fpga.model import BOARDS
    if args.board not in BOARDS:
        print(f'sdfgsparse bench: --board {args.board}: unknown (known: {", ".join(sorted(BOARDS))})', file=sys.stderr)
        return 2
    if not args.clock_mhz > 0:
        print(f'sdfgsparse bench: --clock-mhz {args.clock_mhz}: expected a positive clock', file=sys.stderr)
        return 2
    try:
        matrices = from_folder(args.matrices) if args.matrices else default_matrices(quick=True)
        kernels = args.kernels.split(',') if args.kernels else DEFAULT_KERNELS
        result = run_fpga(matrices, kernels, board=args.board, clock_mhz=args.clock_mhz,
                          log=lambda line: print(f'sdfgsparse bench: {line}', flush=True))
    except BenchError as exc:
        print(f'sdfgsparse bench: {exc}', file=sys.stderr)
        return 2
    print(format_fpga(result, args.board), flush=True)
    for label, text in result['designs'].items():
        print(f'\n{label}: {text}')
    if args.json:
        import json
        with open(args.json, 'w') as f:
            json.dump({'rows': [r.__dict__ for r in result['rows']], 'pumping': result['pumping']}, f, indent=1)
        print(f'sdfgsparse bench: results written to {args.json}')
    return 1 if any(not r.correct for r in result['rows']) else 0


def _run_gpu(args) -> int:
    from sdfgsparse.bench.errors import BenchError
    from sdfgsparse.bench.gpu import DEFAULT_KERNELS, format_gpu, quick_matrices, run_gpu
    from sdfgsparse.bench.matrices import default_matrices, from_folder
    try:
        matrices = (from_folder(args.matrices) if args.matrices else quick_matrices() if args.quick else
                    default_matrices())
        kernels = args.kernels.split(',') if args.kernels else DEFAULT_KERNELS
        result = run_gpu(matrices, kernels, repeat=max(args.repeat, 20),
                         log=lambda line: print(f'sdfgsparse bench: {line}', flush=True))
    except (BenchError, DeviceError) as exc:
        print(f'sdfgsparse bench: --target gpu: {exc}', file=sys.stderr)
        return 2
    print(format_gpu(result), flush=True)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'device': result['device'], 'warm_call_us': result['warm_call_us'],
                       'rows': [dataclasses.asdict(r) for r in result['rows']]}, f, indent=1)
        print(f'sdfgsparse bench: results written to {args.json}')
    return 1 if any(not r.correct for r in result['rows']) else 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Stand-alone entry point: ``python -m sdfgsparse.bench.cli bench [...]``."""
    import sdfgsparse  # noqa: F401  (DaCe patches and DACE_cache=hash before anything is built)
    parser = argparse.ArgumentParser(prog='sdfgsparse')
    sub = parser.add_subparsers(dest='command', required=True)
    add_parser(sub)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == '__main__':  # pragma: no cover
    sys.exit(main())
