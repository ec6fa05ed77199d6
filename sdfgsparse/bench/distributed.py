"""``sdfgsparse bench --distributed``: distributed SpMV, SpMM and CG under MPI.

    mpiexec -n 4 python -m sdfgsparse bench --distributed [--matrices DIR] [--quick]
        [--partitions rows,2d,arrow] [--kernels spmv,spmm:64,cg] [--repeat R] [--json FILE]

Every process runs it (``mpiexec`` starts them; OpenMP threads per process from
``OMP_NUM_THREADS``, default 1 here). Per matrix, partition and kernel, rank 0 prints:

- ``time``: the median over ``--repeat`` calls of the slowest process's time per call;
  ``1-rank``: the same kernel on the whole matrix on rank 0 alone (its local program, no
  exchange), measured in the same run; ``speedup`` = 1-rank / time;
- ``sent``: bytes per call, summed over processes and for the busiest process (counted by
  the exchange itself); ``bound``: the partition's lower bound
  (:func:`sdfgsparse.analysis.communication.exchange_counts`); ``allgather``: what an
  all-gather of x would deliver instead; ``msgs``: messages of the busiest process;
- ``model``: :class:`~sdfgsparse.analysis.communication.CommunicationModel`: each process's
  local products timed alone in this run (all at once, sharing the node), ``alpha`` /
  ``beta`` from a ping-pong between ranks 0 and 1, and the fixed cost of a call (a dense
  P x P product less its local call and message latency); for CG also two all-reduces and
  the vector work on each process's rows (timed, all processes at once); ``err``: model /
  time - 1.

Then a prediction for 1 to 1,000 nodes of the largest matrix (one process per node, the
partition computed for that many processes, the network of :data:`NETWORK`).

Exit status: 0 when every result agreed with scipy, 1 when one did not, 2 for bad options.
"""
import json
import os
import statistics
import sys
import time

import numpy as np
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.analysis.communication import CommunicationModel, allgather_words, exchange_counts
from sdfgsparse.bench.kernels import spd
from sdfgsparse.bench.matrices import MatrixSource, banded, from_folder, rmat, shipped_folder
from sdfgsparse.bench.runner import cpu_model
from sdfgsparse.distributed.products import chooses_overlap, local_program

__all__ = ['run', 'NETWORK', 'grid_laplacian', 'default_matrices', 'predict']

#: The network of the 1,000-node prediction: HDR InfiniBand (100 Gb/s links), 1.5 us per
#: message, one process per node.
NETWORK = {'alpha': 1.5e-6, 'beta': 1 / 12.5e9, 'name': 'HDR InfiniBand: 1.5 us latency, 12.5 GB/s per node'}
NODES = (1, 10, 100, 1000)


def grid_laplacian(side: int) -> sp.csr_array:
    """The 5-point Laplacian of a ``side x side`` grid (rows in grid order): 4 on the
    diagonal, -1 to each neighbour; symmetric positive definite."""
    n = side * side
    main = np.full(n, 4.0)
    horizontal = -np.ones(n - 1)
    horizontal[np.arange(1, side) * side - 1] = 0.0  # no neighbour across a grid row's end
    vertical = -np.ones(n - side)
    A = sp.diags_array([main, horizontal, horizontal, vertical, vertical], offsets=[0, 1, -1, side, -side],
                       shape=(n, n), format='csr')
    A.eliminate_zeros()
    return sp.csr_array(A)


def default_matrices(quick: bool):
    folder = shipped_folder()
    out = from_folder(folder) if folder else []
    out.append(MatrixSource('grid-256', lambda: grid_laplacian(256), 'generated', '5-point Laplacian, 256x256 grid'))
    if not quick:
        out.append(MatrixSource('rmat-s16', lambda: rmat(16, 16), 'generated', 'R-MAT scale 16, edge factor 16'))
        out.append(MatrixSource('banded-200k', lambda: banded(200_000, 4), 'generated', 'band of 9 diagonals'))
        out.append(MatrixSource('grid-1024', lambda: grid_laplacian(1024), 'generated',
                                '5-point Laplacian, 1024x1024 grid'))
    return out


def _parse_kernels(text):
    kernels = []
    for item in text.split(','):
        name, _, k = item.strip().partition(':')
        if name not in ('spmv', 'spmm', 'cg'):
            raise ValueError(f'--kernels: unknown kernel {name!r} (spmv, spmm:K, cg)')
        kernels.append((name, int(k) if k else (64 if name == 'spmm' else 1)))
    return kernels


def ping_pong(comm, repeat: int = 50):
    """(alpha, beta) between ranks 0 and 1: half the round trip of an 8-byte message, and
    the seconds per byte when both send 4 MiB to each other at once (as a halo exchange
    does). (None, None) with one process."""
    if comm.Get_size() < 2:
        return None, None
    rank = comm.Get_rank()
    small = np.zeros(1)
    times = []
    for _ in range(repeat):
        comm.Barrier()
        t0 = time.perf_counter()
        if rank == 0:
            comm.Send(small, 1)
            comm.Recv(small, 1)
        elif rank == 1:
            comm.Recv(small, 0)
            comm.Send(small, 0)
        times.append((time.perf_counter() - t0) / 2)
    alpha = statistics.median(times)
    out, into = np.ones(1 << 19), np.empty(1 << 19)
    times = []
    for _ in range(10):
        comm.Barrier()
        t0 = time.perf_counter()
        if rank in (0, 1):
            comm.Sendrecv(out, 1 - rank, recvbuf=into, source=1 - rank)
        times.append(time.perf_counter() - t0)
    beta = max(statistics.median(times) - alpha, 0.0) / out.nbytes
    return comm.bcast((alpha, beta), root=0)


def _median_max(comm, fn, repeat):
    """Median over ``repeat`` calls of the slowest process's seconds for ``fn()``."""
    from mpi4py import MPI
    times = []
    for _ in range(repeat):
        comm.Barrier()
        t0 = time.perf_counter()
        fn()
        times.append(comm.allreduce(time.perf_counter() - t0, op=MPI.MAX))
    return statistics.median(times)


def _one_rank_seconds(comm, A, name, k, repeat):
    """Rank 0 alone: the local program on the whole matrix (the 1-rank baseline)."""
    seconds = None
    if comm.Get_rank() == 0:
        C = sp.csr_array(A)
        prog = local_program(ss.CSR, C.dtype, np.int32, name == 'spmm')
        x = np.ones((C.shape[1], k)) if name == 'spmm' else np.ones(C.shape[1])
        prog(C, x)
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            prog(C, x)
            times.append(time.perf_counter() - t0)
        seconds = statistics.median(times)
        if name == 'cg':  # an iteration: the SpMV plus five vector passes
            v = np.ones(C.shape[0])
            t0 = time.perf_counter()
            for _ in range(repeat):
                v @ v, v @ v
                v + 0.5 * v, v - 0.5 * v, v + 0.5 * v
            seconds += (time.perf_counter() - t0) / repeat
    return comm.bcast(seconds, root=0)


def _local_seconds(comm, D, block: bool, k: int, repeat: int) -> np.ndarray:
    """Every process's seconds for its local products alone, as a product runs them (one
    call, or own and halo columns apart where it overlaps), all processes at once (they
    share the node's memory bandwidth); gathered on every process."""
    prog = local_program(D.format, D.dtype, D.index_dtype, block)
    tail = (k,) if block else ()
    if chooses_overlap(D, k):
        own, own_cols, far, _, far_cols = D.split()
        work = [(own, np.ones((own_cols,) + tail, D.dtype)), (far, np.ones((far_cols,) + tail, D.dtype))]
    else:
        work = [(D.local, np.ones((D.plan.n_ext_cols,) + tail, D.dtype))]  # touched pages, not the zero page
    work = [(A, x) for A, x in work if getattr(A, 'nnz', 1) and A.shape[0] and x.shape[0]]
    for A, x in work:
        prog(A, x)
    times = []
    for _ in range(repeat):
        comm.Barrier()
        t0 = time.perf_counter()
        for A, x in work:
            prog(A, x)
        times.append(time.perf_counter() - t0)
    return np.array(comm.allgather(statistics.median(times)))


def _vector_seconds(comm, n: int, repeat: int) -> float:
    """The slowest process's seconds for one CG iteration's vector work on its ``n`` rows
    (two dot products and three updates), all processes at once: on one node they share
    its memory bandwidth, so this does not shrink as 1/P."""
    x, r, p, Ap = (np.ones(n) for _ in range(4))

    def work():
        float(np.dot(p, Ap)), float(np.dot(r, r))
        x.__iadd__(0.5 * p)
        r.__isub__(0.5 * Ap)
        p.__imul__(0.5)
        p.__iadd__(r)
    work()
    return _median_max(comm, work, repeat)


def _call_overhead(comm, block: bool, k: int, repeat: int, alpha: float) -> float:
    """Seconds of a distributed product beyond its local program calls and its messages'
    latency: the product of a dense P x P matrix of ones (partitioned by rows: one
    message to every other process), less its local call and ``alpha`` per message."""
    p = comm.Get_size()
    D = ss.distributed.distribute(sp.csr_array(np.ones((p, p))), comm)
    x = ss.distributed.vector(np.ones((p, k)) if block else np.ones(p), D)
    call = (lambda: ss.distributed.spmm(D, x)) if block else (lambda: ss.distributed.spmv(D, x))  # noqa: E731
    call()
    whole = _median_max(comm, call, max(repeat, 20))
    local = _local_seconds(comm, D, block, k, max(repeat, 20)).max()
    D.free()
    return max(whole - local - alpha * (p - 1), 0.0)


def pack_seconds_per_byte(repeat: int = 20) -> float:
    """Seconds per byte of gathering scattered rows into a buffer (``np.take``), as the
    exchange packs and the receiver adds: 4096 rows of 64 doubles out of 65536."""
    source = np.ones((65536, 64))
    rows = np.sort(np.random.default_rng(0).choice(65536, 4096, replace=False))
    out = np.empty((4096, 64))
    np.take(source, rows, axis=0, out=out)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        np.take(source, rows, axis=0, out=out)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) / out.nbytes


def add_seconds_per_byte(repeat: int = 20) -> float:
    """Seconds per byte of adding rows into scattered rows (``y[rows] += part``), as a
    split product adds its halo part: 4096 rows of 64 doubles into 65536."""
    y = np.ones((65536, 64))
    rows = np.sort(np.random.default_rng(1).choice(65536, 4096, replace=False))
    part = np.ones((4096, 64))
    y[rows] += part
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        y[rows] += part
        times.append(time.perf_counter() - t0)
    return statistics.median(times) / part.nbytes


def _allreduce_seconds(comm, repeat: int) -> float:
    from mpi4py import MPI
    return _median_max(comm, lambda: comm.allreduce(1.0, op=MPI.SUM), max(repeat, 20))


def predict(A, partition, seconds_per_entry, k=1, nodes=NODES, network=NETWORK):
    """Seconds per product on each of ``nodes`` (one process per node) by the model."""
    model = CommunicationModel(alpha=network['alpha'], beta=network['beta'], seconds_per_entry=seconds_per_entry)
    out = {}
    for p in nodes:
        counts = exchange_counts(A, ss.distributed.assignment(A, p, partition))
        out[p] = model.seconds(counts, k)
    return out


def run(args) -> int:
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    rank, P = comm.Get_rank(), comm.Get_size()
    say = (lambda line: print(line, flush=True)) if rank == 0 else (lambda line: None)
    try:
        kernels = _parse_kernels(args.kernels or 'spmv,spmm:64,cg')
        partitions = (args.partitions or 'rows,2d,arrow').split(',')
        for part in partitions:
            if part not in ss.distributed.PARTITIONS:
                raise ValueError(f'--partitions: unknown partition {part!r}')
        sources = from_folder(args.matrices) if args.matrices else default_matrices(args.quick)
    except Exception as exc:
        if rank == 0:
            print(f'sdfgsparse bench --distributed: {exc}', file=sys.stderr)
        return 2
    repeat = args.repeat if args.repeat else 10
    alpha, beta = ping_pong(comm)
    beta_pack = comm.bcast(pack_seconds_per_byte(), root=0)
    beta_add = comm.bcast(add_seconds_per_byte(), root=0)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    per_core = node.Get_size() * int(os.environ.get('OMP_NUM_THREADS', '1')) / max(cores, 1)
    say(f'# sdfgsparse bench --distributed: {P} processes, OMP_NUM_THREADS={os.environ.get("OMP_NUM_THREADS", "?")}, '
        f'{cores} cores on this node ({cpu_model()}), MPI {MPI.Get_library_version().splitlines()[0].strip()}')
    if alpha is not None:
        say(f'# ping-pong rank 0 <-> 1: alpha {alpha * 1e6:.2f} us, beta {1 / beta / 1e9 if beta else float("inf"):.2f} '
            f'GB/s; packing rows {1 / beta_pack / 1e9:.2f} GB/s, adding rows {1 / beta_add / 1e9:.2f} GB/s')
    say('matrix            rows      nnz  partition kernel     time_ms  1rank_ms speedup  sent_total   sent_max'
        '      bound  bound_x allgather  msgs model_ms  err')
    rows, failed = [], False
    largest = None
    for source in sources:
        A = sp.csr_array(source.load())
        A.sum_duplicates()
        square = A.shape[0] == A.shape[1]
        if largest is None or A.nnz > largest[1].nnz:
            largest = (source.name, A)
        for name, k in kernels:
            if name == 'cg' and not square:
                continue
            M = spd(A) if name == 'cg' else A  # CG's matrix as samples/cg.py makes it
            base = _one_rank_seconds(comm, M, name, k, repeat)
            per_entry = base / max(M.nnz * k, 1)
            overhead = _call_overhead(comm, name == 'spmm', k, repeat, alpha or 0.0)
            allreduce = _allreduce_seconds(comm, repeat)
            for part in partitions:
                if part == 'arrow' and not square:
                    continue
                D = ss.distributed.distribute(M, comm, partition=part)
                rng = np.random.default_rng(0)
                x = rng.standard_normal((M.shape[1], k)) if name == 'spmm' else rng.standard_normal(M.shape[1])
                xv = ss.distributed.vector(x, D)
                if name == 'cg':
                    call = lambda: ss.distributed.cg(D, xv, rtol=0, maxiter=5)  # noqa: E731
                else:
                    call = (lambda: ss.distributed.spmm(D, xv)) if name == 'spmm' else \
                        (lambda: ss.distributed.spmv(D, xv))  # noqa: E731
                got = call() if name != 'cg' else None
                if got is not None:
                    full = ss.distributed.gather(got, comm)
                    if rank == 0 and not np.allclose(full, M @ x, rtol=1e-10, atol=1e-10 * max(1, abs(M).max())):
                        say(f'!! {source.name} {part} {name}: result differs from scipy')
                        failed = True
                before = D.bytes_sent
                products = D.products
                seconds = _median_max(comm, call, repeat)
                if name == 'cg':
                    seconds /= 5
                sent = (D.bytes_sent - before) // max(D.products - products, 1)
                sent_all = comm.gather(sent, root=0)
                counts = D.counts
                itemsize = 8
                bound = counts.total * k * itemsize
                local = _local_seconds(comm, D, name == 'spmm', k, repeat)
                model = CommunicationModel(alpha=alpha or 0.0, beta=beta or 0.0, seconds_per_entry=per_entry,
                                           call_overhead=overhead, ranks_per_core=per_core,
                                           beta_pack=beta_pack, beta_add=beta_add, progress=0.0)
                choices = comm.allgather(chooses_overlap(D, k))
                predicted = model.seconds(counts, k, itemsize, compute=local, overlap=choices)
                if name == 'cg':  # two all-reduces and the vector work, measured on these rows
                    predicted += 2 * allreduce + _vector_seconds(comm, len(D.row_layout), repeat)
                if rank == 0:
                    total, busiest = sum(sent_all), max(sent_all)
                    err = predicted / seconds - 1
                    row = dict(matrix=source.name, rows=A.shape[0], nnz=A.nnz, partition=part, kernel=f'{name}:{k}'
                               if name == 'spmm' else name, processes=P, seconds=seconds, one_rank_seconds=base,
                               speedup=base / seconds, bytes_total=total, bytes_max=busiest, bound_bytes=bound,
                               allgather_bytes=allgather_words(M.shape[1], P) * k * itemsize,
                               messages_max=int(counts.messages_out.max()), model_seconds=predicted, model_error=err,
                               entries_max_over_mean=float(counts.entries.max() / max(counts.entries.mean(), 1e-300)))
                    rows.append(row)
                    say(f'{source.name[:16]:16} {A.shape[0]:>7} {A.nnz:>8}  {part:9} {row["kernel"]:8} '
                        f'{seconds * 1e3:9.3f} {base * 1e3:9.3f} {base / seconds:6.2f}x {total:>11} {busiest:>10} '
                        f'{bound:>10} {total / bound if bound else 1.0:7.2f}x {row["allgather_bytes"]:>9} '
                        f'{row["messages_max"]:>4} {predicted * 1e3:8.3f} {err * 100:+4.0f}%')
                D.free()
    grid = getattr(args, 'predict_grid', None)
    if grid and rank == 0:
        largest = (f'grid-{grid}', grid_laplacian(grid))
    if largest is not None and rank == 0:
        name, A = largest
        spmv_rows = [r for r in rows if r.get('kernel') == 'spmv']
        base_entry = None
        for r in spmv_rows:  # the 1-process rate of the largest SpMV run (per stored entry)
            if r['matrix'] == max(spmv_rows, key=lambda q: q['nnz'])['matrix']:
                base_entry = r['one_rank_seconds'] / r['nnz']
        if base_entry:
            say(f'# model: SpMV of {name} ({A.shape[0]} rows, {A.nnz} entries) on 1..1,000 nodes, one process '
                f'per node at this machine\'s 1-process rate of the largest SpMV run ({base_entry * 1e9:.2f} ns '
                f'per entry), {NETWORK["name"]}, no overlap')
            for part in partitions:
                if part == 'arrow' and A.shape[0] != A.shape[1]:
                    continue
                pred = predict(A, part, base_entry)
                say(f'#   {part:6} ' + '  '.join(f'{p} nodes: {s * 1e6:9.1f} us' for p, s in pred.items()))
                rows.append(dict(matrix=name, partition=part, prediction_seconds=pred))
    if args.json and rank == 0:
        with open(args.json, 'w') as f:
            json.dump(dict(processes=P, alpha=alpha, beta=beta, rows=rows), f, indent=1)
    failed = comm.bcast(failed, root=0)
    return 1 if failed else 0
