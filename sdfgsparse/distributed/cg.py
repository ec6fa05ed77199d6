"""Distributed conjugate gradients: the iteration of ``samples/cg.py`` (one SpMV, two dot
products, three vector updates) with the SpMV distributed and each dot product one
all-reduce; vector updates are local."""
from typing import Optional

import numpy as np

from sdfgsparse import errors
from sdfgsparse.distributed.collective import agree, checksum
from sdfgsparse.distributed.matrix import DistributedMatrix, DistributedVector
from sdfgsparse.distributed.products import _exchange_and_multiply, _local_input

__all__ = ['cg', 'CGResult']


class CGResult:
    """``x``: the solution (a DistributedVector); ``iterations``; ``residuals``: ``||r||``
    after each iteration (the first is ``||b - A x0||``); ``converged``."""

    def __init__(self, x, iterations, residuals, converged):
        self.x, self.iterations, self.residuals, self.converged = x, iterations, residuals, converged

    def __repr__(self):
        return (f'<CGResult {self.iterations} iterations, ||r|| {self.residuals[-1]:.3g}, '
                f'converged={self.converged}>')


def _allreduce_dot(comm, a: np.ndarray, b: np.ndarray) -> float:
    from mpi4py import MPI
    return comm.allreduce(float(np.dot(a, b)), op=MPI.SUM)


def cg(D: DistributedMatrix, b, x0=None, rtol: float = 1e-8, atol: float = 0.0, maxiter: Optional[int] = None,
       overlap: Optional[bool] = None) -> CGResult:
    """Collective: solve ``A x = b`` for symmetric positive definite ``A`` (distributed as
    ``D``; not checked, as scipy does not) by conjugate gradients from ``x0`` (default 0).
    ``b`` / ``x0``: DistributedVectors in D's layout or whole vectors on every process.
    Stops when ``||r|| <= max(rtol * ||b||, atol)`` or after ``maxiter`` iterations
    (default ``10 * n``)."""
    if not isinstance(D, DistributedMatrix):
        raise errors.ArgumentError(f'D: expected a DistributedMatrix, got {type(D).__name__}')
    comm = D.comm
    error, b_loc, x_loc, digests = None, None, None, (0, 0)
    try:
        if D.shape[0] != D.shape[1] or not D.row_layout.same_as(D.col_layout):
            raise errors.ShapeError(f'cg needs a square matrix distributed alike by rows and columns; '
                                    f'A is {D.shape[0]}x{D.shape[1]} ({D.partition})')
        b_loc, db = _local_input(D, b, 'b', 1)
        x_loc, dx = (np.zeros_like(b_loc), 0) if x0 is None else _local_input(D, x0, 'x0', 1)
        b_loc, x_loc, digests = b_loc.copy(), x_loc.copy(), (db, dx)
        for name, value in (('rtol', rtol), ('atol', atol)):
            if not isinstance(value, (int, float, np.floating)) or not value >= 0:
                raise errors.ArgumentError(f'{name}={value!r}: expected a number >= 0')
        if overlap not in (None, True, False):
            raise errors.ArgumentError(f'overlap={overlap!r}: expected True, False or None')
        if maxiter is not None and (not isinstance(maxiter, (int, np.integer)) or maxiter < 0):
            raise errors.ArgumentError(f'maxiter={maxiter!r}: expected an integer >= 0')
    except Exception as exc:
        error = exc
    # what every process must share (a process that stopped sooner would leave the others
    # in the next all-reduce): replicated b and x0 by checksum, the options
    options = None if error else checksum(np.array([rtol, atol, -1 if maxiter is None else maxiter,
                                                    (None, False, True).index(overlap)], np.float64))
    agree(comm, error, same={'b (checksum; 0: a DistributedVector)': digests[0],
                             'x0 (checksum; 0: a DistributedVector or none)': digests[1],
                             'rtol, atol, maxiter and overlap (checksum)': options or 0})
    maxiter = 10 * D.shape[0] if maxiter is None else int(maxiter)
    with D._lock:
        r = b_loc - (_exchange_and_multiply(D, x_loc, False, overlap).local if x0 is not None else 0)
        p = r.copy()
        rs = _allreduce_dot(comm, r, r)
        bnorm = np.sqrt(_allreduce_dot(comm, b_loc, b_loc))
        goal = max(rtol * bnorm, atol)
        residuals = [np.sqrt(rs)]
        iterations = 0
        while residuals[-1] > goal and iterations < maxiter:
            Ap = _exchange_and_multiply(D, p, False, overlap).local
            pAp = _allreduce_dot(comm, p, Ap)
            if pAp <= 0:  # not positive definite (or converged to round-off): every process sees it
                break
            alpha = rs / pAp
            x_loc += alpha * p
            r -= alpha * Ap
            rs_new = _allreduce_dot(comm, r, r)
            p *= rs_new / rs  # p = r + beta p, in place
            p += r
            rs = rs_new
            residuals.append(np.sqrt(rs))
            iterations += 1
    return CGResult(DistributedVector(x_loc, D.row_layout), iterations, np.array(residuals),
                    bool(residuals[-1] <= goal))
