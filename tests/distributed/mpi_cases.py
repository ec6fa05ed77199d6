"""The distributed cases, run by every process under ``mpiexec -n P`` (test_mpi.py starts it
for P = 1..4). Each case compares the distributed result, gathered on rank 0, with scipy's
single-process one; counts the bytes each process sent against the partition's lower bound
(:func:`sdfgsparse.analysis.communication.exchange_counts`); and checks that an error on
one process raises DistributedError on all. Prints ``CASES OK <n>`` on rank 0 when every
case passed; the first failure raises (mpiexec then ends every process).

    mpiexec -n 3 python tests/distributed/mpi_cases.py [case-substring]
"""
import os
import sys

import dace
import numpy as np
import scipy.sparse as sp
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import sdfgsparse as ss  # noqa: E402
from sdfgsparse import errors  # noqa: E402
from sdfgsparse.distributed import products  # noqa: E402
from sdfgsparse.bench.kernels import spd  # noqa: E402
from sdfgsparse.bench.programs import bench_cg as cg_step  # noqa: E402 (samples/cg.py's step)
from sparse_zoo import format_of, real_matrix  # noqa: E402

comm = MPI.COMM_WORLD
rank, P = comm.Get_rank(), comm.Get_size()
dist = ss.distributed
FORMATS = ['CSR', 'CSC', 'COO', 'DCSR', 'BSR', 'ELL', 'DIA']
CASES = []


def case(fn):
    CASES.append(fn)
    return fn


def _random(m, n, density, seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return sp.random_array((m, n), density=density, format='csr', rng=rng, dtype=dtype,
                           data_sampler=lambda size: rng.standard_normal(size))


def matrices():
    """Named square and rectangular matrices with empty rows / columns, fewer rows than
    processes, one row holding everything, and no entries at all."""
    e = _random(23, 17, 0.2, 1).tolil()
    e[3, :] = 0
    e[11:15, :] = 0
    e[:, 2] = 0
    mats = {'rect_empty_rows': sp.csr_array(e), 'square': _random(40, 40, 0.1, 2), 'tiny_2x3': _random(2, 3, 0.9, 3),
            'one_row_owns_all': sp.csr_array(np.vstack([np.arange(1.0, 9.0), np.zeros((5, 8))])),
            'no_entries': sp.csr_array((6, 6)), 'one_by_one': sp.csr_array(np.array([[2.5]])),
            'cora_A': real_matrix('cora_A')}
    return mats


def close(got, want, what, rtol=1e-12):
    scale = max(1.0, float(np.abs(want).max()) if np.size(want) else 1.0)
    err = float(np.abs(got - want).max()) if np.size(want) else 0.0
    if got.shape != want.shape or err > rtol * scale * 10:
        raise AssertionError(f'{what}: shape {got.shape} vs {want.shape}, max error {err:.3g}')


def bound_met(D, k, what):
    """The bytes this process sent per product equal its share of the partition's lower
    bound (expand entries it owns that others need, plus its partial rows)."""
    sent = D.bytes_sent
    want = int(D.counts.sent[rank]) * k * D.dtype.itemsize * D.products if D.products else 0
    if sent != want:
        raise AssertionError(f'{what}: rank {rank} sent {sent} bytes, the lower bound is {want}')


@case
def every_format_and_partition():
    rng = np.random.default_rng(5)
    for name, A in matrices().items():
        x = rng.standard_normal(A.shape[1])
        X = rng.standard_normal((A.shape[1], 3))
        for partition in dist.PARTITIONS:
            if partition == 'arrow' and A.shape[0] != A.shape[1]:
                continue
            for fmt in FORMATS if name in ('rect_empty_rows', 'square') else ['CSR', 'COO']:
                for overlap in (False, True):
                    D = dist.distribute(A, comm, partition=partition, format=format_of(fmt), overlap=overlap)
                    what = f'{name} {partition} {fmt} overlap={overlap}'
                    y = dist.gather(dist.spmv(D, x), comm)
                    Y = dist.gather(dist.spmm(D, X), comm)
                    want = int(D.counts.sent[rank]) * D.dtype.itemsize * (1 + 3)  # x, then 3 columns
                    if D.bytes_sent != want:
                        raise AssertionError(f'{what}: rank {rank} sent {D.bytes_sent} bytes, bound {want}')
                    if rank == 0:
                        close(y, A @ x, what + ' spmv')
                        close(Y, A @ X, what + ' spmm')
                    if name == 'square':  # no columns at all (the split path multiplies nothing)
                        Y0 = dist.gather(dist.spmm(D, np.zeros((A.shape[1], 0))), comm)
                        if rank == 0 and Y0.shape != (A.shape[0], 0):
                            raise AssertionError(f'{what}: spmm of 0 columns gave shape {Y0.shape}')
                    D.free()


@case
def bytes_at_the_lower_bound():
    A = real_matrix('cora_A')
    x = np.ones(A.shape[0])
    for partition in dist.PARTITIONS:
        for k in (1, 4):
            D = dist.distribute(A, comm, partition=partition)
            y = dist.spmv(D, x) if k == 1 else dist.spmm(D, np.ones((A.shape[0], k)))
            for _ in range(2):
                y = dist.spmv(D, y) if k == 1 else dist.spmm(D, y)
            bound_met(D, k, f'cora_A {partition} k={k}')
            total = comm.allreduce(D.bytes_sent)
            if total != D.counts.total * k * 8 * 3:
                raise AssertionError(f'{partition}: {total} bytes in all, bound {D.counts.total * k * 24}')


@case
def matrix_on_root_only():
    A = _random(31, 31, 0.15, 7)
    x = np.random.default_rng(1).standard_normal(31)
    for partition in dist.PARTITIONS:
        D = dist.distribute(A if rank == 0 else None, comm, partition=partition, root=0)
        xv = dist.vector(x if rank == 0 else None, D, root=0)
        y = dist.gather(dist.spmv(D, xv), comm)
        if rank == 0:
            close(y, A @ x, f'root-only {partition}')


@case
def dtypes_and_index_widths():
    for dtype, itype in ((np.float32, np.int64), (np.float64, np.int64), (np.float32, np.int32)):
        A = _random(25, 19, 0.2, 11, dtype)
        x = np.random.default_rng(2).standard_normal(19).astype(dtype)
        D = dist.distribute(A, comm, partition='rows', index_dtype=itype)
        y = dist.gather(dist.spmv(D, x), comm)
        if rank == 0:
            if y.dtype != dtype:
                raise AssertionError(f'{dtype}: result dtype {y.dtype}')
            close(y.astype(np.float64), (A @ x).astype(np.float64), f'{dtype} {itype}', rtol=1e-5)


@case
def fortran_strided_and_integer_operands():
    A = _random(26, 26, 0.2, 13)
    rng = np.random.default_rng(3)
    X = np.asfortranarray(rng.standard_normal((26, 4)))
    wide = rng.standard_normal(52)
    for partition in dist.PARTITIONS:
        D = dist.distribute(A, comm, partition=partition)
        Y = dist.gather(dist.spmm(D, X), comm)
        y = dist.gather(dist.spmv(D, wide[::2]), comm)  # a strided view
        z = dist.gather(dist.spmv(D, np.arange(26)), comm)  # integers convert without loss
        Xv = dist.vector(X, D)
        Xv.local = np.asfortranarray(Xv.local)  # a Fortran-ordered local part
        W = dist.gather(dist.spmm(D, Xv), comm)
        if rank == 0:
            close(Y, A @ X, f'Fortran X {partition}')
            close(W, A @ X, f'Fortran local part {partition}')
            close(y, A @ wide[::2], f'strided x {partition}')
            close(z, A @ np.arange(26.0), f'integer x {partition}')
    D = dist.distribute(_random(26, 26, 0.2, 13, np.float32), comm)
    raises_everywhere(lambda: dist.spmv(D, np.ones(26)), 'float64 x, float32 matrix', 'without loss')


@case
def results_feed_back_and_layouts_agree():
    A = sp.csr_array(_random(30, 30, 0.1, 3) + sp.eye_array(30))
    x = np.random.default_rng(4).standard_normal(30)
    for partition in dist.PARTITIONS:
        D = dist.distribute(A, comm, partition=partition)
        y = dist.spmv(D, dist.spmv(D, x))
        got = dist.gather(y, comm, root=None)  # every process
        close(got, A @ (A @ x), f'A @ (A @ x) {partition}')


@case
def conjugate_gradients_follow_scipy():
    S = spd(real_matrix('cryg2500'))  # samples/cg.py's matrix
    b = np.random.default_rng(0).standard_normal(S.shape[0])
    # the same iteration in NumPy (samples/cg.py's numpy_step)
    x, r = np.zeros_like(b), b.copy()
    p, rs = r.copy(), r @ r
    want = [np.sqrt(rs)]
    for _ in range(15):
        Ap = S @ p
        alpha = rs / (p @ Ap)
        x, r = x + alpha * p, r - alpha * Ap
        rs_new = r @ r
        p, rs = r + rs_new / rs * p, rs_new
        want.append(np.sqrt(rs))
    for partition in dist.PARTITIONS:
        D = dist.distribute(S, comm, partition=partition)
        res = dist.cg(D, b, rtol=0, maxiter=15)
        close(res.residuals, np.array(want), f'cg residuals {partition}', rtol=1e-9)
        solved = dist.cg(D, b, rtol=1e-10)
        xs = dist.gather(solved.x, comm)
        if rank == 0 and (not solved.converged or np.linalg.norm(S @ xs - b) > 1e-9 * np.linalg.norm(b)):
            raise AssertionError(f'cg {partition}: not solved ({solved})')


N, K = dace.symbol('N'), dace.symbol('K')


@dace.program
def block_step(A: ss.CSR[dace.float64, N, N], X: dace.float64[N, K]):
    Y = A @ X
    return np.maximum(Y, 0.0) + X, X.T @ Y, np.max(Y), np.max(Y, axis=0), np.sum(Y, axis=0)


@case
def compiled_programs_run_distributed():
    S = spd(real_matrix('cryg2500'))  # samples/cg.py's matrix
    b = np.random.default_rng(0).standard_normal(S.shape[0])
    want_x, want_r, want_p, want_rs = b * 0, b.copy(), b.copy(), b @ b
    for _ in range(6):
        want_x, want_r, want_p, want_rs = cg_step.f(S, want_x, want_r, want_p, want_rs)
    X = np.random.default_rng(1).standard_normal((S.shape[0], 3))
    want_block = block_step.f(S, X)
    for partition in dist.PARTITIONS:
        step = ss.compile(cg_step, distributed=comm, partition=partition)
        x, r, p, rs = np.zeros_like(b), b, b, float(b @ b)
        for _ in range(6):
            x, r, p, rs = step(S, x, r, p, rs)  # scipy S: distributed once, kept for later calls
            rs = float(np.asarray(rs).reshape(-1)[0])
        close(np.array([rs]), np.array([want_rs]), f'compiled cg rs {partition}', rtol=1e-10)
        got_x = dist.gather(x, comm, root=None)
        close(got_x, want_x, f'compiled cg x {partition}', rtol=1e-10)
        blocks = ss.compile(block_step, distributed=comm, partition=partition, gather=0)
        Y, G, mx, col_max, col_sum = blocks(S, X)
        close(np.asarray(G), want_block[1], f'compiled X.T @ Y {partition}', rtol=1e-10)
        close(np.asarray(mx).reshape(-1), np.asarray(want_block[2]).reshape(-1), f'compiled max {partition}')
        close(np.asarray(col_max), want_block[3], f'compiled column max {partition}')
        close(np.asarray(col_sum), want_block[4], f'compiled column sums {partition}', rtol=1e-10)
        if rank == 0:
            close(Y, want_block[0], f'compiled block {partition}', rtol=1e-10)
        elif Y is not None:
            raise AssertionError('gather=0 returned a result on another rank')
    bad = np.ones(S.shape[0] - (rank == P - 1))
    raises_everywhere(lambda: step(S, bad, b, b, 1.0), 'compiled program, bad x on one process', 'first dimension')
    if P > 1:  # replicated arguments that differ between processes: refused, not mixed
        raises_everywhere(lambda: step(S, b * (1 + rank), b, b, 1.0), 'compiled program, x differs', 'x (checksum')
        raises_everywhere(lambda: step(S, b, b, b, 1.0 + rank), 'compiled program, rs differs', 'rs_old (checksum')
    D2 = dist.distribute(S, comm, partition='2d' if P > 1 else 'rows')
    if P > 1:  # a matrix distributed unlike the vectors' layout
        raises_everywhere(lambda: step(D2, x, r, p, 1.0), 'vectors of another layout', 'another layout')
    raises_everywhere(lambda: ss.compile(writes_argument, distributed=comm)(S, b, b.copy()), 'written argument',
                      'writes its argument')


@dace.program
def writes_argument(A: ss.CSR[dace.float64, N, N], x: dace.float64[N], out: dace.float64[N]):
    out[:] = A @ x


def raises_everywhere(fn, what, match=None):
    try:
        fn()
    except errors.DistributedError as exc:
        if match and match not in str(exc):
            raise AssertionError(f'{what}: DistributedError without {match!r}: {exc}')
        return exc
    raise AssertionError(f'{what}: rank {rank} raised nothing')


@case
def one_process_failing_fails_all():
    A = _random(20, 20, 0.2, 9)
    D = dist.distribute(A, comm)
    bad = np.ones(19) if rank == P - 1 else np.ones(20)  # wrong length on the last process only
    exc = raises_everywhere(lambda: dist.spmv(D, bad), 'bad x on one process', 'rows, the matrix has 20 columns')
    if list(exc.ranks) != [P - 1]:
        raise AssertionError(f'failing ranks {exc.ranks}, expected [{P - 1}]')
    raises_everywhere(lambda: dist.spmv(D, 'x' if rank == 0 else np.ones(20)), 'a string on rank 0', 'got str')
    # the local product itself fails on the last process, after the exchange started
    original = products.local_program

    def broken(*args, **kwargs):
        raise MemoryError('injected failure')
    if rank == P - 1:
        products.local_program = broken
    try:
        raises_everywhere(lambda: dist.spmv(D, np.ones(20)), 'failing local product', 'injected failure')
    finally:
        products.local_program = original
    y = dist.gather(dist.spmv(D, np.ones(20)), comm)  # and the matrix still works afterwards
    if rank == 0:
        close(y, A @ np.ones(20), 'after failures')
    # A that differs between processes; a partition that does not exist
    if P > 1:
        raises_everywhere(lambda: dist.distribute(_random(20 + (rank == 0), 20, 0.2, 1), comm), 'A differs',
                          'A differs between processes')
    raises_everywhere(lambda: dist.distribute(A, comm, partition='columns'), 'bad partition', "partition='columns'")
    raises_everywhere(lambda: dist.distribute(_random(5, 7, 0.5, 1), comm, partition='arrow'), 'arrow rect',
                      'square')
    if P > 1:
        raises_everywhere(lambda: dist.distribute(A, comm, root=0), 'A on every process with root',
                          'pass A on process 0 only')
    try:
        dist.distribute(A, 'comm')
    except errors.ArgumentError as exc:
        if 'intra-communicator' not in str(exc):
            raise
    else:
        raise AssertionError('a string as comm was accepted')


@case
def bad_operands_fail_everywhere_at_once():
    """A bad or disagreeing operand on one process, on a matrix over a new communicator
    (its first product: the check used to skip a collective that the others entered, and
    every process waited forever), is a DistributedError on every process, within a
    second; replicated operands that differ between processes are refused by checksum."""
    import time
    A = _random(20, 20, 0.2, 9)
    fresh = comm.Dup()
    D = dist.distribute(A, fresh)
    last = P - 1
    start = time.perf_counter()
    raises_everywhere(lambda: dist.spmv(D, np.ones(19) if rank == last else np.ones(20)), 'short x, first product',
                      'rows, the matrix has 20 columns')
    if time.perf_counter() - start > 1.0:
        raise AssertionError(f'the refusal took {time.perf_counter() - start:.2f} s')
    if P > 1:
        raises_everywhere(lambda: dist.spmv(D, np.full(20, float(rank))), 'x differs', 'x (checksum')
        raises_everywhere(lambda: dist.spmm(D, np.ones((20, 3 + (rank == last)))), 'X widths differ',
                          'the columns of X')
        xd = dist.vector(np.ones(20), D)
        raises_everywhere(lambda: dist.spmv(D, xd if rank == 0 else np.ones(20)), 'vector and array', 'x (checksum')
        raises_everywhere(lambda: dist.spmv(D, np.ones(20), overlap=True if rank == 0 else None), 'overlap',
                          'overlap')
        raises_everywhere(lambda: dist.vector(np.full(20, float(rank)), D), 'replicated x differs', 'x (checksum)')
        raises_everywhere(lambda: dist.dot(xd, xd if rank == 0 else 'v'), 'dot on a string', 'DistributedVector')
        raises_everywhere(lambda: dist.gather(xd, root=0 if rank == 0 else 1), 'gather roots differ', 'root')
        raises_everywhere(lambda: dist.gather(xd if rank == 0 else None, fresh), 'gather of None', 'DistributedVector')
        S = dist.distribute(A + A.T + 20 * sp.eye_array(20, format='csr'), fresh)
        raises_everywhere(lambda: dist.cg(S, np.full(20, float(rank))), 'cg: b differs', 'b (checksum')
        raises_everywhere(lambda: dist.cg(S, np.ones(20), maxiter=3 + rank), 'cg: maxiter differs', 'maxiter')
    y = dist.gather(dist.spmv(D, np.ones(20)), fresh)  # and everything still works
    if rank == 0:
        close(y, A @ np.ones(20), 'after the refusals')


def main():
    only = sys.argv[1] if len(sys.argv) > 1 else ''
    ran = 0
    for fn in CASES:
        if only in fn.__name__:
            fn()
            comm.Barrier()
            ran += 1
            if rank == 0:
                print(f'case {fn.__name__} passed on {P} processes', flush=True)
    if rank == 0:
        print(f'CASES OK {ran}', flush=True)


if __name__ == '__main__':
    main()
