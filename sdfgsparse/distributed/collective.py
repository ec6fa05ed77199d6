"""Failing together: every collective step of :mod:`sdfgsparse.distributed` runs its local
part, then all processes agree whether any failed (one integer all-reduce); if one did,
every process raises :class:`~sdfgsparse.errors.DistributedError` naming the failing ranks
and their errors, the failing one with its own error as the cause. No process is left
waiting in a collective that another has abandoned.

Also here: the communicator check, a private duplicate of the user's communicator for our
messages (tags of ours never meet the user's), and waits that yield the core while
polling when processes outnumber cores (MPICH spins in ``Waitall``: four processes on two
cores would take the core from the process being waited for).
"""
import os
import threading

import numpy as np

from sdfgsparse.errors import ArgumentError, DistributedError

__all__ = ['check_comm', 'private_comm', 'agree', 'collectively', 'wait_all', 'oversubscribed']

_PRIVATE = {}
_OVERSUBSCRIBED = {}
#: Tags of the exchange on the private communicator: every product completes all its
#: requests before it returns, and MPI keeps the order of messages between two processes
#: with one tag, so the products of every matrix can share them.
EXPAND_TAG, FOLD_TAG = 11, 12
_LOCK = threading.Lock()


def check_comm(comm, name: str = 'comm'):
    """``comm`` if it is an mpi4py intra-communicator, else an ArgumentError."""
    try:
        from mpi4py import MPI
    except ImportError as exc:  # the [mpi] extra
        raise ArgumentError("sdfgsparse.distributed needs mpi4py: pip install 'sdfgsparse[mpi]' "
                            "(mpi4py with MPICH from PyPI)") from exc
    if not isinstance(comm, MPI.Intracomm):
        raise ArgumentError(f'{name}: expected an mpi4py intra-communicator (e.g. MPI.COMM_WORLD), got '
                            f'{type(comm).__name__}')
    if comm == MPI.COMM_NULL:
        raise ArgumentError(f'{name} is MPI.COMM_NULL')
    return comm


def private_comm(comm):
    """A duplicate of ``comm`` made once (collectively, at the first call on every process)
    and kept: the point-to-point messages of our exchanges travel on it."""
    with _LOCK:
        entry = _PRIVATE.get(id(comm))
        if entry is None or entry[0] is not comm:
            entry = _PRIVATE[id(comm)] = (comm, comm.Dup())
        return entry[1]


def agree(comm, error, same=None, what: str = 'a value') -> None:
    """Collective: raise :class:`DistributedError` on every process if ``error`` (this
    process's exception, or None) is set on any, or if ``same`` (an integer, e.g. the
    columns of a dense block) differs between processes (``what`` names it)."""
    from mpi4py import MPI
    value = 0 if same is None else int(same)
    flag = np.array([0 if error is None else 1, value, -value], np.int64)
    total = np.zeros(3, np.int64)
    comm.Allreduce(flag, total, op=MPI.MAX)
    if total[0] == 0 and total[1] == -total[2]:
        return
    if total[0] == 0:
        values = comm.allgather(value)
        raise DistributedError(f'{what} differs between processes (by rank: {values}); every process must pass '
                               'the same', tuple(range(comm.Get_size())), ())
    report = None if error is None else f'{type(error).__name__}: {error}'
    reports = comm.allgather(report)
    ranks = [r for r, m in enumerate(reports) if m is not None]
    messages = [reports[r] for r in ranks]
    detail = '; '.join(f'rank {r}: {m}' for r, m in zip(ranks, messages))
    raise DistributedError(f'failed on {len(ranks)} of {comm.Get_size()} processes ({detail})', ranks,
                           messages) from error


def collectively(comm, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` on every process, then :func:`agree`; returns its result."""
    result, error = None, None
    try:
        result = fn(*args, **kwargs)
    except Exception as exc:  # reported to every process by agree
        error = exc
    agree(comm, error)
    return result


def oversubscribed(comm) -> bool:
    """Whether this node runs more of ``comm``'s processes than it has cores (computed
    once per communicator)."""
    cached, key = _OVERSUBSCRIBED, id(comm)
    if key not in cached:
        from mpi4py import MPI
        local = comm.Split_type(MPI.COMM_TYPE_SHARED)
        cores = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()
        cached[key] = local.Get_size() > (cores or 1)
        local.Free()
    return cached[key]


def wait_all(requests, polite: bool) -> None:
    """Complete ``requests``; ``polite``: poll and yield the core between polls."""
    from mpi4py import MPI
    if not requests:
        return
    if not polite:
        MPI.Request.Waitall(requests)
        return
    while not MPI.Request.Testall(requests):
        os.sched_yield()
