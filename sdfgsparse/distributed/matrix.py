"""A sparse matrix spread over the processes of a communicator, and vectors spread to match.

:func:`distribute` partitions (see :mod:`~sdfgsparse.distributed.partition`), gives each
process its stored entries as one local matrix in a catalogue format, and plans the
exchange (:mod:`~sdfgsparse.distributed.exchange`). The local matrix's rows are this
process's rows of ``y`` (ascending) followed by the rows it holds partial sums of, grouped
by owner; its columns are this process's entries of ``x`` followed by the received ones,
grouped by sender. A product is then one local product over ``[x_own, halo]``, or two
(own columns, then halo columns) when the exchange overlaps the first.
"""
import dataclasses
import threading
import zlib
from typing import Dict, Optional, Tuple

import numpy as np
import scipy.sparse as sp

from sdfgsparse import errors
from sdfgsparse.analysis.communication import Assignment, ExchangeCounts, exchange_counts
from sdfgsparse.distributed.collective import agree, check_comm, collectively, oversubscribed, private_comm
from sdfgsparse.distributed.exchange import Halo, request_plan
from sdfgsparse.distributed.partition import PARTITIONS, assignment
from sdfgsparse.formats import BSR, CSR, SparseFormat
from sdfgsparse.runtime.host_convert import convert
from sdfgsparse.runtime.marshal import torch_on_host

__all__ = ['Layout', 'DistributedVector', 'DistributedMatrix', 'distribute']


class Layout:
    """Which global indices of a length-``size`` vector this process holds (``own``,
    ascending: the order of its local part). Shared by the vectors of one matrix side."""

    def __init__(self, comm, size: int, own: np.ndarray):
        self.comm, self.size, self.own = comm, int(size), np.asarray(own, np.int64)
        self._all_own = {}

    def __len__(self):
        return int(self.own.size)

    def same_as(self, other: 'Layout') -> bool:
        return other is self or (other.size == self.size and other.comm is self.comm and
                                 np.array_equal(other.own, self.own))

    def all_own(self, root: int):
        """Collective (once per root): every process's ``own`` on ``root`` (None elsewhere)."""
        if root not in self._all_own:
            self._all_own[root] = self.comm.gather(self.own, root=root)
        return self._all_own[root]


@dataclasses.dataclass
class DistributedVector:
    """This process's part (``local``: its entries in ``layout.own`` order; 1-D, or 2-D
    with one row per entry for the dense blocks of SpMM) of a vector or row block spread
    over ``layout.comm``. :func:`sdfgsparse.distributed.gather` collects it."""
    local: np.ndarray
    layout: Layout

    @property
    def comm(self):
        return self.layout.comm

    @property
    def shape(self) -> tuple:
        return (self.layout.size,) + tuple(self.local.shape[1:])

    @property
    def dtype(self):
        return self.local.dtype


@dataclasses.dataclass
class _Plan:
    n_own_rows: int
    n_own_cols: int
    n_ext_rows: int
    n_ext_cols: int
    expand_send: Dict[int, np.ndarray]
    expand_recv: Dict[int, Tuple[int, int]]
    fold_send: Dict[int, Tuple[int, int]]
    fold_recv: Dict[int, np.ndarray]


def _grouped(indices: np.ndarray, owner_of: np.ndarray):
    """Distinct ``indices``, grouped by owner (ascending within a group), and their owners."""
    distinct = np.unique(indices)
    owners = owner_of[distinct]
    order = np.lexsort((distinct, owners))
    return distinct[order], owners[order]


def _piece(A: sp.csr_array, asg: Assignment, rank: int) -> dict:
    """What process ``rank`` keeps of ``A`` under ``asg``: its entries (global indices),
    its own rows / columns, and the other rows / columns it touches with their owners."""
    mask = asg.entry_rank == rank
    rows = np.repeat(np.arange(A.shape[0], dtype=np.int64), np.diff(A.indptr))[mask]
    cols = A.indices[mask].astype(np.int64)
    far_rows, far_row_owner = _grouped(rows[asg.row_owner[rows] != rank], asg.row_owner)
    far_cols, far_col_owner = _grouped(cols[asg.col_owner[cols] != rank], asg.col_owner)
    return dict(shape=A.shape, rows=rows, cols=cols, vals=A.data[mask],
                own_rows=np.flatnonzero(asg.row_owner == rank), own_cols=np.flatnonzero(asg.col_owner == rank),
                far_rows=far_rows, far_row_owner=far_row_owner, far_cols=far_cols, far_col_owner=far_col_owner,
                square_layout=asg.row_owner is asg.col_owner or np.array_equal(asg.row_owner, asg.col_owner))


def _positions(keys: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Position in ``keys`` (distinct, any order) of each of ``wanted``."""
    order = np.argsort(keys, kind='stable')
    return order[np.searchsorted(keys[order], wanted)]


def _local_matrix(piece: dict) -> sp.csr_array:
    row_keys = np.concatenate([piece['own_rows'], piece['far_rows']])
    col_keys = np.concatenate([piece['own_cols'], piece['far_cols']])
    lr = _positions(row_keys, piece['rows']) if row_keys.size else piece['rows']
    lc = _positions(col_keys, piece['cols']) if col_keys.size else piece['cols']
    L = sp.csr_array((piece['vals'], (lr, lc)), shape=(row_keys.size, col_keys.size))
    L.sum_duplicates()
    L.sort_indices()
    return L


def _blocked(L: sp.csr_array, fmt: SparseFormat) -> sp.csr_array:
    """``L`` with zero rows / columns appended up to a multiple of ``fmt``'s block."""
    R, C = getattr(fmt, 'block', None) or (1, 1)
    m, n = L.shape
    M, N = m + -m % R, n + -n % C
    if (M, N) == (m, n):
        return L
    indptr = np.concatenate([L.indptr, np.full(M - m, L.indptr[-1], L.indptr.dtype)])
    return sp.csr_array((L.data, L.indices, indptr), shape=(M, N))


def _as_csr(A, name: str = 'A') -> sp.csr_array:
    if A is None or isinstance(A, (str, bytes)):
        raise errors.ArgumentError(f'{name}: expected a scipy or torch sparse matrix, got {type(A).__name__}')
    A = torch_on_host(A, name)
    if not (sp.issparse(A) or isinstance(A, np.ndarray)):
        raise errors.ArgumentError(f'{name}: expected a scipy or torch sparse matrix, got {type(A).__name__}')
    if A.ndim != 2:
        raise errors.ShapeError(f'{name}: expected a matrix, got {A.ndim} dimensions')
    if not (np.issubdtype(A.dtype, np.floating) or np.issubdtype(A.dtype, np.integer)):
        raise errors.DTypeError(f'{name}: values of dtype {A.dtype} (expected float32 or float64)')
    dtype = A.dtype if A.dtype in (np.float32, np.float64) else np.float64
    C = sp.csr_array(A, dtype=dtype, copy=True)  # canonicalised below: never the caller's arrays
    C.sum_duplicates()
    C.sort_indices()
    return C


def _checksum(C: sp.csr_array) -> int:
    """CRC-32 of the canonical CSR arrays: matrices passed on every process must agree."""
    crc = zlib.crc32(np.ascontiguousarray(C.indptr).view(np.uint8))
    crc = zlib.crc32(np.ascontiguousarray(C.indices).view(np.uint8), crc)
    return zlib.crc32(np.ascontiguousarray(C.data).view(np.uint8), crc)


class DistributedMatrix:
    """This process's part of a matrix spread over ``comm`` (made by :func:`distribute`).

    ``local``: the local matrix in ``format`` (rows: own then partial; columns: own then
    received); ``row_layout`` / ``col_layout``: the layouts of ``y`` and ``x`` (the same
    object for a square matrix partitioned symmetrically, so a product's result can be
    its next input); ``counts``: the partition's
    :class:`~sdfgsparse.analysis.communication.ExchangeCounts` (every process's words and
    messages per product, its lower bound); ``bytes_sent`` / ``messages_sent``: what this
    process has sent in products so far. Use it from one thread at a time (calls are
    serialised by a lock)."""

    def __init__(self, comm, shape, partition, fmt, index_dtype, piece, counts: Optional[ExchangeCounts], overlap):
        self.comm, self.shape, self.partition, self.format = comm, tuple(shape), partition, fmt
        self.dtype = piece['vals'].dtype
        self.counts = counts
        self.overlap = overlap
        self._overlap_choices = {}  # operand width -> split or not (chooses_overlap)
        self._lock = threading.Lock()
        self._halos = {}
        self.bytes_sent = 0
        self.messages_sent = 0
        self.products = 0
        self.row_layout = Layout(comm, shape[0], piece['own_rows'])
        self.col_layout = self.row_layout if piece['square_layout'] and shape[0] == shape[1] else \
            Layout(comm, shape[1], piece['own_cols'])
        L = _local_matrix(piece)
        self.nnz_local = int(L.nnz)
        self.local_csr = L
        self.index_dtype = np.dtype(index_dtype) if index_dtype is not None else \
            np.dtype(np.int32 if max(L.shape + (L.nnz,)) < 2**31 - 1 else np.int64)
        self.local = convert(_blocked(L, fmt), fmt, self.index_dtype)
        n_own_cols = piece['own_cols'].size
        self._split = None  # (own columns, halo columns) in format, made when overlapping
        self._n_own_cols = n_own_cols
        self._piece = piece
        self.plan = None

    def _make_plan(self) -> None:
        """Collective: the exchange plan (every process says what it needs from whom)."""
        piece, local_shape = self._piece, self.local_csr.shape
        comm = self._pcomm = private_comm(self.comm)
        # collective too: here, where every process is, never in a product (a process whose
        # operand is refused does not reach the product's buffers, and the others would wait)
        self._oversubscribed = oversubscribed(self.comm)
        own_rows, own_cols = piece['own_rows'], piece['own_cols']
        expand_send, bad_x = request_plan(comm, piece['far_cols'], piece['far_col_owner'], own_cols)
        fold_recv, bad_y = request_plan(comm, piece['far_rows'], piece['far_row_owner'], own_rows)
        agree(self.comm, RuntimeError(f'processes {sorted(bad_x | bad_y)} asked for entries this process does '
                                      'not own') if bad_x or bad_y else None)
        expand_recv, fold_send = {}, {}
        for target, owners, base in ((expand_recv, piece['far_col_owner'], own_cols.size),
                                     (fold_send, piece['far_row_owner'], 0)):
            if owners.size:
                cuts = np.flatnonzero(np.diff(owners)) + 1
                starts = np.concatenate([[0], cuts])
                ends = np.concatenate([cuts, [owners.size]])
                for a, b in zip(starts, ends):
                    target[int(owners[a])] = (base + int(a), base + int(b))
        blocked = _blocked(sp.csr_array(local_shape), self.format).shape
        self.plan = _Plan(own_rows.size, own_cols.size, blocked[0], blocked[1], expand_send, expand_recv, fold_send,
                          fold_recv)
        self._piece = None

    def halo(self, tail: tuple, dtype) -> Halo:
        """The persistent exchange for operands of trailing shape ``tail`` (made once)."""
        key = (tuple(tail), np.dtype(dtype).str)
        halo = self._halos.get(key)
        if halo is None:
            halo = self._halos[key] = Halo(self._pcomm, self.plan, tuple(tail), dtype, self._oversubscribed)
        return halo

    def split(self):
        """The local matrix as (own columns in ``format``, own padded width, the halo
        columns' nonempty rows in ``format``, those rows' positions, halo padded width):
        the halo's product then touches only the rows that have halo entries."""
        if self._split is None:
            L = self.local_csr
            own = _blocked(sp.csr_array(L[:, :self._n_own_cols]), self.format)
            far = sp.csr_array(L[:, self._n_own_cols:])
            rows = np.flatnonzero(np.diff(far.indptr))
            far = _blocked(sp.csr_array(far[rows]), self.format)
            self._split = (convert(own, self.format, self.index_dtype), own.shape[1],
                           convert(far, self.format, self.index_dtype), rows, far.shape[1])
        return self._split

    def free(self) -> None:
        """Free the persistent requests (the matrix is unusable afterwards)."""
        for h in self._halos.values():
            h.free()
        self._halos = {}

    def __repr__(self):
        return (f'<DistributedMatrix {self.shape[0]}x{self.shape[1]} {self.partition} on rank '
                f'{self.comm.Get_rank()}/{self.comm.Get_size()}: {self.nnz_local} local entries in {self.format!r}>')


def _check_partition(partition, A_shape):
    if partition not in PARTITIONS:
        raise errors.ArgumentError(f'partition={partition!r}: expected one of {", ".join(map(repr, PARTITIONS))}')
    if partition == 'arrow' and A_shape[0] != A_shape[1]:
        raise errors.ShapeError(f"partition='arrow' needs a square (graph) matrix, A is {A_shape[0]}x{A_shape[1]}")


def distribute(A, comm, partition: str = 'rows', format=None, index_dtype=None, root=None, overlap=None,
               **options) -> DistributedMatrix:
    """Collective: spread sparse matrix ``A`` over the processes of ``comm``.

    ``A``: a scipy or torch sparse matrix (or dense array), either the same on every
    process (``root=None``: each process takes its part; shape and entry count are
    checked to agree) or on process ``root`` only (pass None elsewhere: ``root`` partitions
    and sends each process its part). ``partition``: 'rows' (1-D, balanced by entries),
    '2d' (a process grid) or 'arrow' (the arrow decomposition of a graph matrix; options
    ``width``, ``head_factor``, ``max_levels``; see
    :mod:`sdfgsparse.distributed.partition`). ``format``: the catalogue format of each
    process's local matrix (default ``ss.CSR``); ``index_dtype``: its index width.
    ``overlap``: overlap the exchange with the local product over own columns (True,
    False, or None: where the communication model says it pays).

    Every process raises :class:`~sdfgsparse.errors.DistributedError` if any fails (bad
    input on one process included)."""
    comm = check_comm(comm)
    fmt = CSR if format is None else format
    if isinstance(fmt, type(BSR)) and not isinstance(fmt, SparseFormat):
        fmt = fmt.with_block(2, 2)  # ss.BSR: 2x2 blocks, as ss.convert takes it
    rank, p = comm.Get_rank(), comm.Get_size()

    def local_checks():
        if not isinstance(fmt, SparseFormat):
            raise errors.ArgumentError(f'format: expected a catalogue format such as ss.CSR, got {fmt!r}')
        if root is not None and not (isinstance(root, (int, np.integer)) and 0 <= root < p):
            raise errors.ArgumentError(f'root={root!r}: expected a rank in 0..{p - 1} or None')
        if overlap not in (None, True, False):
            raise errors.ArgumentError(f'overlap={overlap!r}: expected True, False or None')
        if root is None or rank == root:
            C = _as_csr(A)
            _check_partition(partition, C.shape)
            return C
        if A is not None:
            raise errors.ArgumentError(f'A: with root={root}, pass A on process {root} only (None here)')
        return None

    C = collectively(comm, local_checks)
    if root is None:
        descriptions = comm.allgather((C.shape, C.nnz, C.dtype.str, _checksum(C)))
        if len(set(descriptions)) > 1:
            raise errors.DistributedError(
                'A differs between processes (shape, entries, dtype, checksum by rank: ' +
                ', '.join(f'{r}: {d}' for r, d in enumerate(descriptions)) + '); pass it on every process '
                'alike, or on one with root=', ranks=tuple(range(p)))

    def partitioned():
        asg = assignment(C, p, partition, **options)
        return asg, exchange_counts(C, asg)

    if root is None and partition != 'arrow':
        asg, counts = collectively(comm, partitioned)  # deterministic: each process alike
        piece = collectively(comm, _piece, C, asg, rank)
    elif root is None:  # the arrow decomposition's orders use floating point: rank 0 decides
        made = collectively(comm, partitioned if rank == 0 else (lambda: None))
        asg, counts = comm.bcast(made, root=0)
        piece = collectively(comm, _piece, C, asg, rank)
    else:
        made = collectively(comm, partitioned) if rank == root else collectively(comm, lambda: None)
        counts = made[1] if rank == root else None
        pieces = collectively(comm, lambda: [_piece(C, made[0], r) for r in range(p)] if rank == root else None)
        piece = comm.scatter(pieces, root=root)
        counts = comm.bcast(counts, root=root)
    D = collectively(comm, DistributedMatrix, comm, piece['shape'], partition, fmt, index_dtype, piece, counts,
                     overlap)
    D._make_plan()
    return D
