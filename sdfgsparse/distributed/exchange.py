"""The halo exchange: each process receives exactly the entries of ``x`` its stored entries
need from their owners (*expand*) and sends its partial sums of rows owned elsewhere to
their owners (*fold*), one message per pair of processes and direction, over persistent
requests (``Send_init`` / ``Recv_init`` set up once per operand shape; a product only
packs, starts and waits).

:func:`request_plan` builds the plan collectively: every process says which indices it
needs from whom (an ``Alltoall`` of counts and an ``Alltoallv`` of indices, once); the
owner keeps the positions to send.
"""
from typing import Dict, Tuple

import numpy as np

from sdfgsparse.distributed.collective import EXPAND_TAG, FOLD_TAG, wait_all

__all__ = ['request_plan', 'Halo']


def request_plan(comm, wanted: np.ndarray, owners: np.ndarray, own: np.ndarray) -> Tuple[Dict[int, np.ndarray], set]:
    """Collective. This process wants global indices ``wanted`` (grouped by ``owners``,
    ascending within a group) from their owners; returns, for every process ``q`` that
    wants some of this process's indices ``own`` (ascending), their positions in ``own``
    in the order ``q`` listed them, and the set of processes that asked for indices this
    process does not own (raise after every process has finished: see
    :func:`~sdfgsparse.distributed.collective.agree`)."""
    from mpi4py import MPI
    p = comm.Get_size()
    counts = np.bincount(owners, minlength=p).astype(np.int64) if owners.size else np.zeros(p, np.int64)
    incoming = np.array(comm.alltoall(counts.tolist()), np.int64)
    send = np.ascontiguousarray(wanted, np.int64)
    recv = np.empty(int(incoming.sum()), np.int64)
    comm.Alltoallv([send, (counts, _displacements(counts)), MPI.INT64_T],
                   [recv, (incoming, _displacements(incoming)), MPI.INT64_T])
    plan, bad, start = {}, set(), 0
    for q in range(p):
        part = recv[start:start + incoming[q]]
        start += incoming[q]
        if part.size:
            at = np.searchsorted(own, part)
            if np.any(at >= own.size) or np.any(own[np.minimum(at, own.size - 1)] != part):
                bad.add(q)
            plan[q] = np.minimum(at, max(own.size - 1, 0)).astype(np.intp)
    return plan, bad


def _displacements(counts: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)


class Halo:
    """The persistent requests of one matrix's exchange for one operand shape (``tail``:
    ``()`` for a vector, ``(k,)`` for a block of k columns) and dtype.

    Expand: ``x_ext[:n_own]`` is this process's ``x``, ``x_ext[n_own:]`` the received
    entries in the plan's order (grouped by sending process). Fold: the partial rows
    ``y_ext[n_own_rows:]`` go to their owners, who add them in."""

    def __init__(self, comm, plan, tail: tuple, dtype, polite: bool):
        self.comm, self.plan, self.polite = comm, plan, polite
        self.dtype = np.dtype(dtype)
        width = int(np.prod(tail)) if tail else 1
        # expand
        self.x_ext = np.zeros((plan.n_ext_cols,) + tail, self.dtype)
        self.send_x = {q: np.empty((idx.size,) + tail, self.dtype) for q, idx in plan.expand_send.items()}
        self.x_requests = [comm.Recv_init(self.x_ext[a:b], q, EXPAND_TAG) for q, (a, b) in plan.expand_recv.items()]
        self.x_requests += [comm.Send_init(buf, q, EXPAND_TAG) for q, buf in self.send_x.items()]
        # fold
        self.send_y = np.empty((plan.n_ext_rows - plan.n_own_rows,) + tail, self.dtype)
        self.recv_y = {q: np.empty((idx.size,) + tail, self.dtype) for q, idx in plan.fold_recv.items()}
        self.y_requests = [comm.Recv_init(buf, q, FOLD_TAG) for q, buf in self.recv_y.items()]
        self.y_requests += [comm.Send_init(self.send_y[a:b], q, FOLD_TAG) for q, (a, b) in plan.fold_send.items()]
        item = self.dtype.itemsize * width
        self.bytes_per_product = item * (sum(i.size for i in plan.expand_send.values()) +
                                         sum(b - a for a, b in plan.fold_send.values()))
        self.messages_per_product = len(plan.expand_send) + len(plan.fold_send)
        self._scratch = {}

    def start_expand(self, x_own: np.ndarray):
        """Pack and start sending this process's entries others need; start receiving.
        The messages start even if packing fails (NaN is sent; the error is returned, to
        be agreed on after the exchange), so no other process waits forever."""
        from mpi4py import MPI
        error = None
        for q, idx in self.plan.expand_send.items():
            try:
                np.take(x_own, idx, axis=0, out=self.send_x[q])
            except Exception as exc:
                error = error or exc
                self.send_x[q][...] = np.nan
        if self.x_requests:
            MPI.Prequest.Startall(self.x_requests)
        return error

    def fill_own(self, x_own: np.ndarray) -> None:
        self.x_ext[:self.plan.n_own_cols] = x_own

    def finish_expand(self) -> None:
        wait_all(self.x_requests, self.polite)

    def fold(self, y_ext: np.ndarray, y_own: np.ndarray):
        """Send the partial rows of ``y_ext``; add the received ones into ``y_own``. As
        :meth:`start_expand`, the messages go even if copying fails (the error is returned)."""
        from mpi4py import MPI
        if not self.y_requests:
            return None
        error = None
        try:
            self.send_y[...] = y_ext[self.plan.n_own_rows:]
        except Exception as exc:
            error = exc
            self.send_y[...] = np.nan
        MPI.Prequest.Startall(self.y_requests)
        wait_all(self.y_requests, self.polite)
        try:
            self.add_received(y_own)
        except Exception as exc:
            error = error or exc
        return error

    def add_received(self, y_own: np.ndarray) -> None:
        """Add the received partial rows into ``y_own`` (their owner's rows)."""
        for q, idx in self.plan.fold_recv.items():  # unique positions per sender
            y_own[idx] += self.recv_y[q]

    def scratch(self, name: str, shape: tuple) -> np.ndarray:
        """A buffer of this halo's dtype kept between products (the split product's halo
        part); made again only when ``shape`` changes."""
        buf = self._scratch.get(name)
        if buf is None or buf.shape != tuple(shape):
            buf = self._scratch[name] = np.empty(shape, self.dtype)
        return buf

    def free(self) -> None:
        self._scratch = {}
        for r in self.x_requests + self.y_requests:
            r.Free()
        self.x_requests, self.y_requests = [], []
