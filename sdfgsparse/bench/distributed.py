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
- ``model``: :class:`~sdfgsparse.analysis.communication.CommunicationModel`, which
  composes the phases of every process into the product's time (who waits for whom
  without progress outside MPI calls, the fold after the senders' products, cores shared
  where processes outnumber them). Its inputs, measured in this run: each process's
  phases timed apart (:func:`_phase_seconds`: packing, copies, transfers after a barrier,
  local product(s), adds, in the caches' state of a product), ``alpha`` from a ping-pong
  between ranks 0 and 1, and the fixed cost of a call (a dense P x P product less its
  modelled time); for CG also two all-reduces and the vector work on each process's rows;
  ``err``: model / time - 1; ``again``: a second measurement of ``time`` after the model's
  (the run-to-run spread, the floor of any model's error).

The header also gives the ping-pong's bandwidth by message size (MPICH over shared memory
switches protocols: a 4 MiB message moved at 22 GB/s, a 3.7 MB one at 14 GB/s, in one run).
Then a prediction for 1 to 1,000 nodes of the largest matrix (one process per node, the
partition computed for that many processes, the network of :data:`NETWORK`).

Exit status: 0 when every result agreed with scipy, 1 when one did not, 2 for bad options.
"""
import dataclasses
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
from sdfgsparse.distributed.collective import wait_all
from sdfgsparse.distributed.products import _add_rows, _halo_part, _multiply, chooses_overlap, local_program

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


#: Message sizes of the bandwidth table in the header (bytes). MPICH over shared memory
#: moved a 4 MiB message at 22 GB/s and a 3.7 MB one at 14 GB/s here (one run), so no
#: single size stands for a halo: the model takes each process's rate from its transfers.
TABLE_SIZES = tuple(1 << e for e in range(10, 25, 2))


def ping_pong(comm, repeat: int = 50):
    """(alpha, beta table) between ranks 0 and 1: half the round trip of an 8-byte
    message, and per message size of :data:`TABLE_SIZES` the seconds per byte when both
    send to each other at once (as a halo exchange does), rotating over 64 buffers each
    way (out of cache from 1 MiB: 64 MiB and more). (None, None) with one process."""
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
    table = []
    for size in TABLE_SIZES:
        slots = min(max(2, (64 << 20) // size), 64)
        if rank in (0, 1):  # the others only take part in the barriers
            out, into = np.ones((slots, size // 8)), np.ones((slots, size // 8))
        times = []
        for i in range(2 * slots if size > (1 << 20) else 40):
            comm.Barrier()
            t0 = time.perf_counter()
            if rank in (0, 1):
                comm.Sendrecv(out[i % slots], 1 - rank, recvbuf=into[i % slots], source=1 - rank)
            if i >= min(slots, 10):
                times.append(time.perf_counter() - t0)
        table.append((size, max(statistics.median(times) - alpha, 0.0) / size))
    return comm.bcast((alpha, tuple(table)), root=0)


def _median_max(comm, fn, repeat):
    """Median over ``repeat`` calls of the slowest process's seconds for ``fn()``, after
    three calls that are not timed (the first calls of a size page in their buffers)."""
    from mpi4py import MPI
    times = []
    for _ in range(3):
        fn()
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
        for _ in range(3):  # paging in, as _median_max
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
    _polite_barrier(comm)  # the others sleep meanwhile (MPICH's bcast would spin on a core)
    return comm.bcast(seconds, root=0)


def _polite_barrier(comm) -> None:
    """A barrier whose waiting processes sleep (MPICH's barrier spins, taking a core from
    the process being measured)."""
    request = comm.Ibarrier()
    while not request.Test():
        time.sleep(5e-5)


def _take_turns(comm, fn, times: int) -> None:
    """Collective: ``fn()`` ``times`` times on every process, one process at a time while
    the others sleep (``fn`` records what it measures)."""
    rank = comm.Get_rank()
    for _ in range(times):
        for turn in range(comm.Get_size()):
            if turn == rank:
                fn()
            _polite_barrier(comm)


def _phase_seconds(comm, D, block: bool, k: int, repeat: int, in_turn: bool) -> dict:
    """Every process's median seconds for each phase of its product, timed apart, in the
    state of the caches a product leaves them in (a rehearsal of the whole product per
    repetition: timed alone, a phase whose data stay in cache ran about twice as fast as
    inside a product, e.g. pubmed_A k = 64), gathered on every process as arrays:

    ``pack`` (the entries others need), ``copy`` (own x next to the halo; partial rows
    out), ``transfer`` (the messages of both phases, started together after a barrier, so
    no process waits for another), ``compute`` (the local call(s) as the product makes
    them: one, or own and halo columns where it splits), ``add`` (adding a split's halo
    rows back; received partial rows). ``in_turn`` (processes outnumber cores): the local phases
    rehearsed one process at a time while the others sleep (receives simulated by writing
    the same bytes), the transfers all at once."""
    from mpi4py import MPI
    prog = local_program(D.format, D.dtype, D.index_dtype, block)
    tail = (k,) if block else ()
    plan = D.plan
    halo = D.halo(tail, D.dtype)
    x_own = np.ones((plan.n_own_cols,) + tail, D.dtype)
    split = chooses_overlap(D, k)
    if split:
        own, own_cols, far, far_rows, far_cols = D.split()
        x_pad = x_own if own_cols == plan.n_own_cols else np.ones((own_cols,) + tail, D.dtype)
        x_far = halo.x_ext[plan.n_own_cols:plan.n_own_cols + far_cols]
        if x_far.shape[0] < far_cols:
            x_far = np.ones((far_cols,) + tail, D.dtype)

    def moved(exchange: bool, requests, received) -> float:
        """Seconds of one phase's messages, started together after a barrier; without the
        exchange, the received buffers written as a receive would (no seconds)."""
        if not exchange:
            for buf in received:
                buf[...] = 1.0
            return 0.0
        comm.Barrier()
        t = time.perf_counter()
        if requests:
            MPI.Prequest.Startall(requests)
        wait_all(requests, halo.polite)
        return time.perf_counter() - t

    def rehearse(exchange: bool) -> list:
        """One product's phases: seconds of pack, copy, transfer, compute, add."""
        t0 = time.perf_counter()
        for q, idx in plan.expand_send.items():
            np.take(x_own, idx, axis=0, out=halo.send_x[q])
        t1 = time.perf_counter()
        if not split and plan.expand_recv:
            halo.fill_own(x_own)
        t2 = time.perf_counter()
        transfer = moved(exchange, halo.x_requests, [halo.x_ext[plan.n_own_cols:]])
        t3 = time.perf_counter()
        add = 0.0
        if split:
            y_ext = _multiply(prog, own, x_pad, plan.n_ext_rows, tail, D.dtype)
            part = _halo_part(prog, far, x_far, halo, tail)
            t4 = time.perf_counter()
            compute = t4 - t3
            _add_rows(y_ext, far_rows, part, halo)
            add += time.perf_counter() - t4
        else:  # as the product: x itself where there is no halo (x_ext's pages never touched
            # would all be the zero page, faster to read than any x: 27 vs 37 ms, grid-1024 2-D)
            x = x_own if not plan.expand_recv and plan.n_ext_cols == plan.n_own_cols else halo.x_ext
            y_ext = _multiply(prog, D.local, x, plan.n_ext_rows, tail, D.dtype)
            compute = time.perf_counter() - t3
        t5 = time.perf_counter()
        copy = t2 - t1
        if plan.n_ext_rows > plan.n_own_rows:
            halo.send_y[...] = y_ext[plan.n_own_rows:]
        copy += time.perf_counter() - t5
        transfer += moved(exchange, halo.y_requests, list(halo.recv_y.values()))
        t6 = time.perf_counter()
        halo.add_received(y_ext)
        add += time.perf_counter() - t6
        return [t1 - t0, copy, transfer, compute, add]

    names = ('pack', 'copy', 'transfer', 'compute', 'add')
    for _ in range(3):
        rehearse(True)
    together = np.median([rehearse(True) for _ in range(repeat)], axis=0)
    mine = together
    if in_turn:
        alone = []
        _take_turns(comm, lambda: alone.append(rehearse(False)), repeat + 3)
        mine = np.median(alone[3:], axis=0)
        mine[2] = together[2]
    gathered = np.array(comm.allgather(mine))
    return {name: gathered[:, i] for i, name in enumerate(names)}


def _rate(seconds: np.ndarray, words: np.ndarray, width_bytes: int) -> np.ndarray:
    """Seconds per byte from measured seconds and words moved (0 where nothing moves)."""
    words = np.asarray(words, np.float64) * width_bytes
    return np.where(words > 0, seconds / np.maximum(words, 1), 0.0)


def _vector_seconds(comm, D, repeat: int, in_turn: bool = False, cores: int = 1) -> float:
    """Seconds of one CG iteration's vector work (two dot products and three updates) on
    every process's rows of ``D``, each time after its local product (untimed: the caches
    as in CG, where the product evicts the vectors); the slowest process, all processes
    at once (on one node they share its memory bandwidth, so this does not shrink as 1/P);
    ``in_turn`` (more processes than cores): each alone, then shared over the ``cores``."""
    n = len(D.row_layout)
    x, r, p, Ap = (np.ones(n) for _ in range(4))
    prog = local_program(D.format, D.dtype, D.index_dtype, False)
    plan = D.plan
    x_ext = np.ones(plan.n_ext_cols, D.dtype)
    seconds = []

    def work():
        _multiply(prog, D.local, x_ext, plan.n_ext_rows, (), D.dtype)
        t0 = time.perf_counter()
        float(np.dot(p, Ap)), float(np.dot(r, r))
        x.__iadd__(0.5 * p)
        r.__isub__(0.5 * Ap)
        p.__imul__(0.5)
        p.__iadd__(r)
        seconds.append(time.perf_counter() - t0)
    if in_turn:
        _take_turns(comm, work, repeat + 3)
        alone = np.array(comm.allgather(statistics.median(seconds[3:])))
        return float(max(alone.max(), alone.sum() / max(cores, 1)))
    for _ in range(repeat + 3):
        comm.Barrier()
        work()
    return float(max(comm.allgather(statistics.median(seconds[3:]))))


def _model(comm, D, block: bool, k: int, repeat: int, alpha: float, overhead: float, shared_cores):
    """The :class:`CommunicationModel` of ``D``'s product on this node, with every
    process's phases measured at its own sizes (:func:`_phase_seconds`: rates per
    process, ``beta`` from its transfers), ``alpha`` from :func:`ping_pong`, no progress outside MPI calls
    (MPICH over shared memory), the node's ``shared_cores`` shared by its processes where
    they outnumber them (else None); and the measured compute and overlap choices to pass
    to :meth:`~CommunicationModel.seconds`."""
    in_turn = shared_cores is not None
    phases = _phase_seconds(comm, D, block, k, repeat, in_turn)
    choices = np.array(comm.allgather(chooses_overlap(D, k)), bool)
    c, w = D.counts, k * D.dtype.itemsize
    halo = c.expand_in > 0
    owned = c.owned_cols
    links = [x for x in (c.expand_links, c.fold_links) if x is not None and x.size]
    messages = sum(np.maximum(np.bincount(x[:, 0], minlength=c.entries.size),
                              np.bincount(x[:, 1], minlength=c.entries.size)) for x in links) if links else 0
    moved = np.maximum(c.expand_out, c.expand_in) + np.maximum(c.fold_out, c.fold_in)
    model = CommunicationModel(
        alpha=alpha, beta=_rate(np.maximum(phases['transfer'] - alpha * messages, 0.0), moved, w),
        seconds_per_entry=0.0, call_overhead=overhead, progress=0.0,
        beta_pack=_rate(phases['pack'], c.expand_out, w),
        beta_copy=_rate(phases['copy'], owned * (halo & ~choices) + c.fold_out, w),
        beta_add=_rate(phases['add'], c.halo_rows * (halo & choices) + c.fold_in, w),
        cores=shared_cores)
    return model, phases['compute'], choices


def _inputs(model: CommunicationModel, compute, choices, allreduce: float, vector: float) -> dict:
    """The model's inputs of one row, for the JSON (to evaluate other models offline)."""
    out = {f.name: getattr(model, f.name) for f in dataclasses.fields(model)}
    out.update(compute=compute, choices=choices, allreduce=allreduce, vector=vector)
    return {key: value.tolist() if isinstance(value, np.ndarray) else value for key, value in out.items()}


def _call_overhead(comm, block: bool, k: int, repeat: int, alpha: float, shared_cores) -> float:
    """Seconds of a distributed product beyond what the model's phases account for: the
    product of a dense P x P matrix of ones (partitioned by rows: one message to every
    other process), less its modelled seconds without overhead; the least of three such
    estimates (a disturbance only adds time), once per run and operand width. (Measured
    once per matrix, one in ten came out 3-35x the usual ~65 us with four processes on two
    cores; measured once per run, a single such outlier, 215 us, spoilt a whole run.)"""
    p = comm.Get_size()
    D = ss.distributed.distribute(sp.csr_array(np.ones((p, p))), comm)
    x = ss.distributed.vector(np.ones((p, k)) if block else np.ones(p), D)
    call = (lambda: ss.distributed.spmm(D, x)) if block else (lambda: ss.distributed.spmv(D, x))  # noqa: E731
    call()
    estimates = []
    for _ in range(3):
        whole = _median_max(comm, call, max(repeat, 20))
        model, compute, choices = _model(comm, D, block, k, max(repeat, 20), alpha, 0.0, shared_cores)
        estimates.append(whole - model.seconds(D.counts, k, D.dtype.itemsize, overlap=choices, compute=compute))
    D.free()
    return max(min(estimates), 0.0)


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
    repeat = args.repeat if args.repeat else 20
    alpha, table = ping_pong(comm)
    alpha = alpha or 0.0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    # decided together: the calibration's collectives differ between the two ways
    cores = comm.allreduce(max(1, (cores or 1) // max(1, int(os.environ.get('OMP_NUM_THREADS', '1')))), op=MPI.MIN)
    crowded = comm.allreduce(node.Get_size() > cores, op=MPI.LOR)
    say(f'# sdfgsparse bench --distributed: {P} processes ({node.Get_size()} on this node), '
        f'OMP_NUM_THREADS={os.environ.get("OMP_NUM_THREADS", "?")}, {cores} cores on this node ({cpu_model()}), '
        f'MPI {MPI.Get_library_version().splitlines()[0].strip()}')
    shared_cores = cores if crowded else None
    node.Free()
    if P > 1:
        say(f'# ping-pong rank 0 <-> 1: alpha {alpha * 1e6:.2f} us; GB/s by message size: ' +
            ', '.join(f'{size >> 10} KiB {1 / rate / 1e9 if rate else float("inf"):.1f}' for size, rate in table) +
            '; model phases measured per process ' +
            ('one at a time (processes > cores)' if shared_cores else 'all at once'))
    say('matrix            rows      nnz  partition kernel     time_ms  1rank_ms speedup  sent_total   sent_max'
        '      bound  bound_x allgather  msgs model_ms  err again')
    rows, failed = [], False
    largest = None
    overheads = {}
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
            if (name == 'spmm', k) not in overheads:  # a property of the processes and the width
                overheads[name == 'spmm', k] = _call_overhead(comm, name == 'spmm', k, repeat, alpha, shared_cores)
            overhead = overheads[name == 'spmm', k]
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
                itemsize = D.dtype.itemsize
                bound = counts.total * k * itemsize
                model, local, choices = _model(comm, D, name == 'spmm', k, repeat, alpha, overhead,
                                               shared_cores)
                predicted = model.seconds(counts, k, itemsize, compute=local, overlap=choices)
                vector = 0.0
                if name == 'cg':  # two all-reduces and the vector work, measured on these rows
                    vector = _vector_seconds(comm, D, repeat, shared_cores is not None, shared_cores or 1)
                    predicted += 2 * allreduce + vector
                again = _median_max(comm, call, repeat) / (5 if name == 'cg' else 1)  # the run-to-run spread
                if rank == 0:
                    total, busiest = sum(sent_all), max(sent_all)
                    err = predicted / seconds - 1
                    row = dict(matrix=source.name, rows=A.shape[0], nnz=A.nnz, partition=part, kernel=f'{name}:{k}'
                               if name == 'spmm' else name, processes=P, seconds=seconds, one_rank_seconds=base,
                               speedup=base / seconds, bytes_total=total, bytes_max=busiest, bound_bytes=bound,
                               allgather_bytes=allgather_words(M.shape[1], P) * k * itemsize,
                               messages_max=int(counts.messages_out.max()), model_seconds=predicted, model_error=err,
                               again_seconds=again, spread=again / seconds - 1,
                               model_inputs=_inputs(model, local, choices, allreduce, vector),
                               entries_max_over_mean=float(counts.entries.max() / max(counts.entries.mean(), 1e-300)))
                    rows.append(row)
                    say(f'{source.name[:16]:16} {A.shape[0]:>7} {A.nnz:>8}  {part:9} {row["kernel"]:8} '
                        f'{seconds * 1e3:9.3f} {base * 1e3:9.3f} {base / seconds:6.2f}x {total:>11} {busiest:>10} '
                        f'{bound:>10} {total / bound if bound else 1.0:7.2f}x {row["allgather_bytes"]:>9} '
                        f'{row["messages_max"]:>4} {predicted * 1e3:8.3f} {err * 100:+4.0f}% '
                        f'{(again / seconds - 1) * 100:+4.0f}%')
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
            json.dump(dict(processes=P, alpha=alpha, beta_table=table, rows=rows), f, indent=1)
    failed = comm.bcast(failed, root=0)
    return 1 if failed else 0
