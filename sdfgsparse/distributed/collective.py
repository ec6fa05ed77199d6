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
import zlib

import numpy as np

from sdfgsparse.errors import ArgumentError, DistributedError

__all__ = ['check_comm', 'private_comm', 'agree', 'checksum', 'collectively', 'wait_all', 'oversubscribed']

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
    process's exception, or None) is set on any, or if a value that must be the same on
    every process differs. ``same``: an integer named ``what`` (e.g. the columns of a dense
    block), or ``{name: integer}`` (widths, checksums of replicated operands, options; the
    same names on every process). One all-reduce when all agree."""
    from mpi4py import MPI
    values = {} if same is None else dict(same) if isinstance(same, dict) else {what: same}
    ints = [int(v) for v in values.values()]
    flag = np.array([0 if error is None else 1] + [x for v in ints for x in (v, -v)], np.int64)
    total = np.zeros_like(flag)
    comm.Allreduce(flag, total, op=MPI.MAX)
    differ = [name for i, name in enumerate(values) if total[1 + 2 * i] != -total[2 + 2 * i]]
    if total[0] == 0 and not differ:
        return
    if total[0] == 0:
        by_rank = comm.allgather(ints)
        shown = '; '.join(f'{name} by rank: {[r[list(values).index(name)] for r in by_rank]}' for name in differ)
        raise DistributedError(f'{" and ".join(differ)} differ{"s" if len(differ) == 1 else ""} between processes '
                               f'({shown}); every process must pass the same', tuple(range(comm.Get_size())), ())
    report = None if error is None else f'{type(error).__name__}: {error}'
    reports = comm.allgather(report)
    ranks = [r for r, m in enumerate(reports) if m is not None]
    messages = [reports[r] for r in ranks]
    detail = '; '.join(f'rank {r}: {m}' for r, m in zip(ranks, messages))
    raise DistributedError(f'failed on {len(ranks)} of {comm.Get_size()} processes ({detail})', ranks,
                           messages) from error


def checksum(arr: np.ndarray) -> int:
    """A checksum of ``arr``'s shape, dtype and bytes for :func:`agree` (a replicated operand
    must be the same on every process): any change of one entry changes it, and so does a
    permutation that moves entries between positions that differ modulo 64. About one read
    of the array (a sum of its 64-bit words in 64 lanes)."""
    arr = np.ascontiguousarray(arr)
    raw = arr.reshape(-1).view(np.uint8)
    head = raw[:raw.size // 512 * 512].view(np.uint64).reshape(-1, 64)
    lanes = head.sum(axis=0, dtype=np.uint64) if head.size else np.zeros(64, np.uint64)
    tail = raw[raw.size // 512 * 512:]
    meta = f'{arr.shape}{arr.dtype.str}'.encode()
    return zlib.crc32(tail.tobytes(), zlib.crc32(lanes.tobytes(), zlib.crc32(meta))) & 0x7fffffff


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
