"""Sparse products over MPI (``pip install 'sdfgsparse[mpi]'``: mpi4py with MPICH).

    mpiexec -n 4 python my_solver.py

>>> from mpi4py import MPI                                          # doctest: +SKIP
>>> import sdfgsparse as ss
>>> D = ss.distributed.distribute(A, MPI.COMM_WORLD, partition='rows')   # doctest: +SKIP
>>> y = ss.distributed.spmv(D, x)                 # this process's rows of A @ x  # doctest: +SKIP
>>> full = ss.distributed.gather(y, MPI.COMM_WORLD)     # on rank 0, None elsewhere  # doctest: +SKIP

:func:`distribute` partitions a matrix ('rows', '2d', 'arrow') and keeps each process's
part in a catalogue format; :func:`spmv`, :func:`spmm` and :func:`cg` run on it, sending
only the entries each process needs (the partition's lower bound,
:func:`sdfgsparse.analysis.communication.exchange_counts`); :func:`vector` and
:func:`gather` move whole vectors in and out. Any error on one process raises
:class:`~sdfgsparse.errors.DistributedError` on all of them.

Every call is collective: all processes of the communicator make the same calls in the
same order, from one thread per process at a time (as MPI requires of collectives on one
communicator; a lock per matrix serialises its products within a process). Run scripts
with ``python -m mpi4py`` so that an uncaught error on one process ends every process.
"""
from sdfgsparse.distributed.cg import CGResult, cg
from sdfgsparse.distributed.matrix import DistributedMatrix, DistributedVector, Layout, distribute
from sdfgsparse.distributed.partition import PARTITIONS, assignment
from sdfgsparse.distributed.products import dot, gather, spmm, spmv, vector

__all__ = ['distribute', 'spmv', 'spmm', 'cg', 'gather', 'vector', 'dot', 'DistributedMatrix', 'DistributedVector',
           'Layout', 'CGResult', 'PARTITIONS', 'assignment']
