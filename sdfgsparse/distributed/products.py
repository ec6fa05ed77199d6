"""Distributed ``y = A @ x`` and ``Y = A @ X``: the exchange around one compiled local
product per process (a ``@dace.program`` per local format and dtypes, cached), plus
vectors in and out (:func:`vector`, :func:`gather`).

A product: pack and start the expand; either wait and multiply the local matrix by
``[x_own, halo]`` (one program call), or (overlap) multiply the own columns while the
halo travels, wait, and add the halo columns' product; then fold the partial rows to
their owners. Every process checks its inputs first and all agree before any message
(:func:`~sdfgsparse.distributed.collective.agree`); an error in the local product is
agreed on after the exchange, so no process is left waiting.
"""
from typing import Optional, Tuple

import dace
import numpy as np

from sdfgsparse import errors
from sdfgsparse.analysis.communication import CommunicationModel
from sdfgsparse.distributed.collective import agree, check_comm, checksum
from sdfgsparse.distributed.matrix import DistributedMatrix, DistributedVector

__all__ = ['spmv', 'spmm', 'vector', 'gather', 'dot', 'local_program', 'chooses_overlap', 'NODE_MODEL']

M, N, K = dace.symbol('M'), dace.symbol('N'), dace.symbol('K')
_PROGRAMS = {}

#: What decides overlap on one node (shared memory, no progress outside MPI calls): with
#: nothing hidden, a split product pays where copying its own ``x`` next to the halo
#: (``beta_copy``) costs more than touching the halo rows twice (``seconds_per_row``),
#: adding them back (``beta_add``: gather, add, scatter) and a second call. Measured on a
#: 2-core AMD EPYC (Zen 4) VM (docs/performance.md, 2026-12-05): split faster on grid-1024
#: (35 vs 54 ms at k = 64) and delaunay_n16 arrow, slower on pubmed_A and soc-brightkite.
NODE_MODEL = CommunicationModel(alpha=2e-6, beta=1 / 13e9, seconds_per_entry=1.3e-10, seconds_per_row=7.5e-10,
                                call_overhead=3e-5, beta_pack=1 / 6e9, beta_copy=1 / 13e9, beta_add=1 / 5e9,
                                local_call=1.5e-5, progress=0.0)


def local_program(fmt, dtype, index_dtype, block: bool):
    """The compiled-once ``@dace.program`` of one local product: ``A @ x`` (``block``
    False) or ``A @ X`` for a local matrix in ``fmt``."""
    vt = dace.dtype_to_typeclass(np.dtype(dtype).type)
    it = dace.dtype_to_typeclass(np.dtype(index_dtype).type)
    key = (fmt.name if hasattr(fmt, 'name') else repr(fmt), getattr(fmt, 'block', None), vt, it, block)
    prog = _PROGRAMS.get(key)
    if prog is None:
        T = fmt[vt, M, N, it]
        if block:
            @dace.program
            def distributed_local_spmm(A: T, X: vt[N, K]):
                return A @ X
            prog = distributed_local_spmm
        else:
            @dace.program
            def distributed_local_spmv(A: T, x: vt[N]):
                return A @ x
            prog = distributed_local_spmv
        _PROGRAMS[key] = prog
    return prog


def _local_input(D: DistributedMatrix, x, name: str, ndim: int) -> Tuple[np.ndarray, int]:
    """This process's entries of ``x`` (a DistributedVector in D's column layout, or the
    whole array, the same on every process) as a C-contiguous array of D's dtype, and the
    checksum of a whole array (0 for a DistributedVector), for the agreement."""
    layout = D.col_layout
    digest = 0
    if isinstance(x, DistributedVector):
        if not x.layout.same_as(layout):
            raise errors.ShapeError(f'{name}: a distributed vector of another layout (length {x.layout.size}, '
                                    f'{len(x.layout)} entries here; the matrix has {D.shape[1]} columns, '
                                    f'{len(layout)} here)')
        local = x.local
    else:
        if x is None or isinstance(x, (str, bytes, dict)):
            raise errors.ArgumentError(f'{name}: expected an array or a DistributedVector, got {type(x).__name__}')
        try:
            arr = np.asarray(x)
        except Exception as exc:
            raise errors.ArgumentError(f'{name}: cannot be read as an array ({exc})') from exc
        if arr.dtype == object:
            raise errors.ArgumentError(f'{name}: expected a numeric array, got dtype object')
        if arr.ndim != ndim:
            raise errors.ShapeError(f'{name}: expected {ndim} dimension(s), got shape {arr.shape}')
        if arr.shape[0] != D.shape[1]:
            raise errors.ShapeError(f'{name}: {arr.shape[0]} rows, the matrix has {D.shape[1]} columns')
        digest = 1 + checksum(arr)
        local = arr[layout.own]
    if local.ndim != ndim:
        raise errors.ShapeError(f'{name}: expected {ndim} dimension(s), got shape {local.shape}')
    if not (np.issubdtype(local.dtype, np.number) or local.dtype == bool) or np.issubdtype(local.dtype,
                                                                                          np.complexfloating):
        raise errors.DTypeError(f'{name}: dtype {local.dtype} (the matrix holds {D.dtype})')
    if not np.can_cast(local.dtype, D.dtype, 'safe'):
        raise errors.DTypeError(f'{name}: dtype {local.dtype} does not convert to the matrix dtype {D.dtype} '
                                'without loss; cast it first')
    return np.ascontiguousarray(local, D.dtype), digest


def _multiply(prog, A, x, rows: int, tail: tuple, dtype) -> np.ndarray:
    if A is None or rows == 0 or x.shape[0] == 0 or getattr(A, 'nnz', 1) == 0 or (tail and tail[0] == 0):
        return np.zeros((rows,) + tail, dtype)
    return np.asarray(prog(A, x))


def chooses_overlap(D: DistributedMatrix, width: int) -> bool:
    """Split the product (own columns while the halo travels, then the halo's columns)
    where the node model says it pays (:meth:`CommunicationModel.overlap_pays`)."""
    if D.overlap is not None:
        return D.overlap
    if not D.plan.expand_recv:
        return False
    choice = D._overlap_choices.get(width)
    if choice is None:  # once per width (NODE_MODEL is a constant): the model costs more than a small product
        choice = D._overlap_choices[width] = NODE_MODEL.overlap_pays(D.counts, D.comm.Get_rank(), width,
                                                                     D.dtype.itemsize)
    return choice


def _product(D: DistributedMatrix, x, name: str, block: bool, overlap: Optional[bool]):
    if not isinstance(D, DistributedMatrix):
        raise errors.ArgumentError(f'D: expected a DistributedMatrix (sdfgsparse.distributed.distribute), got '
                                   f'{type(D).__name__}')
    ndim = 2 if block else 1
    error, local, width, digest = None, None, 1, 0
    try:
        if overlap not in (None, True, False):
            raise errors.ArgumentError(f'overlap={overlap!r}: expected True, False or None')
        local, digest = _local_input(D, x, name, ndim)
        width = local.shape[1] if block else 1
        D.halo(tuple(local.shape[1:]), D.dtype)  # its buffers, before any message (no collective)
    except Exception as exc:
        error = exc
    # one agreement: an error anywhere, and what must be the same everywhere (a replicated
    # operand by its checksum: different ones would give a mix that equals no product)
    agree(D.comm, error, same={f'the columns of {name}': width, f'{name} (checksum; 0: a DistributedVector)': digest,
                               'overlap': (None, False, True).index(overlap) if error is None else 0})
    with D._lock:
        return _exchange_and_multiply(D, local, block, overlap)


def _exchange_and_multiply(D: DistributedMatrix, local: np.ndarray, block: bool, overlap) -> DistributedVector:
    tail = tuple(local.shape[1:])
    plan = D.plan
    halo = D.halo(tail, D.dtype)
    use_overlap = chooses_overlap(D, tail[0] if tail else 1) if overlap is None else overlap
    error = None
    if local.shape[0] != plan.n_own_cols:  # an internal caller's mistake: still exchange, then fail together
        error = errors.ShapeError(f'{local.shape[0]} rows of x here, this process owns {plan.n_own_cols}')
        local = np.zeros((plan.n_own_cols,) + tail, D.dtype)
    error = halo.start_expand(local) or error
    y_ext = None
    try:
        if error is not None:
            raise error
        prog = local_program(D.format, D.dtype, D.index_dtype, block)
        if use_overlap:
            own, n_own_pad, far, far_rows, n_far_pad = D.split()
            x_own = local if n_own_pad == plan.n_own_cols else _padded(local, n_own_pad)
            y_ext = _multiply(prog, own, x_own, plan.n_ext_rows, tail, D.dtype)
            halo.finish_expand()
            halo_x = halo.x_ext[plan.n_own_cols:plan.n_own_cols + n_far_pad]
            if halo_x.shape[0] < n_far_pad:
                halo_x = _padded(halo_x, n_far_pad)
            _add_rows(y_ext, far_rows, _halo_part(prog, far, halo_x, halo, tail), halo)
        elif not plan.expand_recv and plan.n_ext_cols == plan.n_own_cols:  # no halo: x as it is
            halo.finish_expand()
            y_ext = _multiply(prog, D.local, local, plan.n_ext_rows, tail, D.dtype)
        else:
            halo.fill_own(local)
            halo.finish_expand()
            y_ext = _multiply(prog, D.local, halo.x_ext, plan.n_ext_rows, tail, D.dtype)
    except Exception as exc:  # agreed on below, after the exchange every process waits for
        error = exc
        halo.finish_expand()  # (a second wait on completed requests returns at once)
        y_ext = np.zeros((plan.n_ext_rows,) + tail, D.dtype)
    y_own = y_ext[:plan.n_own_rows]  # a view: the partial rows behind it are few
    error = halo.fold(y_ext, y_own) or error
    D.bytes_sent += halo.bytes_per_product
    D.messages_sent += halo.messages_per_product
    D.products += 1
    agree(D.comm, error)
    return DistributedVector(y_own, D.row_layout)


def _halo_part(prog, far, halo_x: np.ndarray, halo, tail: tuple):
    """``far @ halo_x`` (the halo columns' rows of a split product) into the halo's kept
    buffer (None where there is nothing to multiply): a split product allocates nothing
    per call beyond its result (a fresh buffer of megabytes is page-faulted in on every
    call: measured 2.9 -> 7.5 ms on pubmed_A, k = 64)."""
    if far.shape[0] == 0 or getattr(far, 'nnz', 1) == 0 or halo_x.shape[0] == 0 or (tail and tail[0] == 0):
        return None
    far_y = halo.scratch('far_y', (far.shape[0],) + tail)
    prog(far, halo_x, out=far_y)
    return far_y


def _add_rows(y_ext: np.ndarray, rows: np.ndarray, part, halo) -> None:
    """``y_ext[rows] += part[:rows.size]`` through a kept buffer (``part`` None: nothing)."""
    if part is None or rows.size == 0:
        return
    gathered = halo.scratch('rows', (rows.size,) + y_ext.shape[1:])
    np.take(y_ext, rows, axis=0, out=gathered)
    gathered += part[:rows.size]
    y_ext[rows] = gathered


def _padded(a: np.ndarray, rows: int) -> np.ndarray:
    out = np.zeros((rows,) + a.shape[1:], a.dtype)
    out[:a.shape[0]] = a
    return out


def spmv(D: DistributedMatrix, x, overlap: Optional[bool] = None) -> DistributedVector:
    """Collective: ``y = A @ x`` with ``A`` distributed as ``D``; ``x`` a
    :class:`DistributedVector` in D's column layout (e.g. a previous result of a square
    matrix) or the whole vector on every process. Returns this process's part of ``y``
    (:func:`gather` collects it). ``overlap`` overrides ``D.overlap`` for this call."""
    return _product(D, x, 'x', False, overlap)


def spmm(D: DistributedMatrix, X, overlap: Optional[bool] = None) -> DistributedVector:
    """Collective: ``Y = A @ X`` for a dense block ``X`` (n x k), as :func:`spmv`; the
    rows of ``X`` travel (k values per exchanged entry)."""
    return _product(D, X, 'X', True, overlap)


def vector(x, D: DistributedMatrix, root: Optional[int] = None, side: str = 'cols') -> DistributedVector:
    """Collective: the :class:`DistributedVector` of ``x`` in D's column layout (``side``
    'rows': the row layout). ``x``: the whole array on every process (``root=None``) or on
    process ``root`` only (None elsewhere; it sends each process its entries)."""
    if not isinstance(D, DistributedMatrix):
        raise errors.ArgumentError(f'D: expected a DistributedMatrix, got {type(D).__name__}')
    layout = D.col_layout if side == 'cols' else D.row_layout
    comm, rank = D.comm, D.comm.Get_rank()
    error, local, width, digest = None, None, 0, 0
    try:
        if side not in ('cols', 'rows'):
            raise errors.ArgumentError(f"side={side!r}: expected 'cols' or 'rows'")
        if root is None or rank == root:
            arr = np.asarray(x) if x is not None and not isinstance(x, (str, bytes)) else None
            if arr is None or arr.dtype == object:
                raise errors.ArgumentError(f'x: expected an array, got {type(x).__name__}')
            if arr.ndim not in (1, 2) or arr.shape[0] != layout.size:
                raise errors.ShapeError(f'x: shape {arr.shape}, expected ({layout.size},) or ({layout.size}, k)')
            local = arr
            width = arr.shape[1] if arr.ndim == 2 else 0
            digest = checksum(arr) if root is None else 0
        elif x is not None:
            raise errors.ArgumentError(f'x: with root={root}, pass x on process {root} only (None here)')
    except Exception as exc:
        error = exc
    # a replicated x must be the same everywhere (its parts would otherwise mix); with a root
    # only the root holds x (digest 0 everywhere); one shape of agreement either way
    agree(comm, error, same={'the columns of x': width if root is None else 0, 'x (checksum)': digest})
    if root is None:
        return DistributedVector(np.ascontiguousarray(local[layout.own]), layout)
    owns = layout.all_own(root)
    parts = [np.ascontiguousarray(local[o]) for o in owns] if rank == root else None
    return DistributedVector(comm.scatter(parts, root=root), layout)


def gather(y: DistributedVector, comm=None, root: Optional[int] = 0) -> Optional[np.ndarray]:
    """Collective: the whole of ``y`` on process ``root`` (None elsewhere; ``root=None``:
    on every process), entries in their global order. ``comm``: checked to be ``y``'s. A
    bad ``y`` or ``comm`` on one process is a DistributedError on every process (where it
    still has a communicator to say so: ``y``'s or ``comm``)."""
    if not isinstance(y, DistributedVector):
        if comm is None:
            raise errors.ArgumentError(f'y: expected a DistributedVector, got {type(y).__name__}')
        agree(check_comm(comm), errors.ArgumentError(f'y: expected a DistributedVector, got {type(y).__name__}'),
              same=_gather_agreement(0, -1))  # the same shape of agreement as the others' below
    error = None
    try:
        if comm is not None:
            check_comm(comm)
            if comm is not y.comm:
                from mpi4py import MPI
                if MPI.Comm.Compare(comm, y.comm) not in (MPI.IDENT, MPI.CONGRUENT):
                    raise errors.ArgumentError('comm: not the communicator y is spread over')
        if root is not None and not (isinstance(root, (int, np.integer)) and not isinstance(root, bool) and
                                     0 <= root < y.comm.Get_size()):
            raise errors.ArgumentError(f'root={root!r}: expected a rank from 0 to {y.comm.Get_size() - 1} or None')
    except Exception as exc:
        error = exc
    width = y.local.shape[1] if y.local.ndim == 2 else 0
    agree(y.comm, error, same=_gather_agreement(width, -1 if root is None or error else root))
    layout, c = y.layout, y.comm
    if root is None:
        parts = c.allgather(y.local)
        owns = c.allgather(layout.own)
    else:
        parts = c.gather(y.local, root=root)
        owns = layout.all_own(root)
        if c.Get_rank() != root:
            return None
    out = np.zeros((layout.size,) + tuple(y.local.shape[1:]), y.local.dtype)
    for own, part in zip(owns, parts):
        out[own] = part
    return out


def _gather_agreement(width: int, root: int) -> dict:
    return {'the columns of y': width, 'root': root}


def dot(u: DistributedVector, v: DistributedVector) -> float:
    """Collective: ``u @ v`` of two vectors in the same layout (an operand that is not a
    DistributedVector on one process fails on every process, through the other's
    communicator)."""
    from mpi4py import MPI
    owner = u if isinstance(u, DistributedVector) else v if isinstance(v, DistributedVector) else None
    if owner is None:
        raise errors.ArgumentError('dot: expected two DistributedVectors')
    error, part = None, 0.0
    try:
        if not isinstance(u, DistributedVector) or not isinstance(v, DistributedVector):
            raise errors.ArgumentError(f'dot: expected two DistributedVectors, got {type(u).__name__} and '
                                       f'{type(v).__name__}')
        if not u.layout.same_as(v.layout):
            raise errors.ShapeError('dot: the vectors are in different layouts')
        if u.local.ndim != 1 or v.local.ndim != 1:
            raise errors.ShapeError(f'dot: expected vectors, got local parts of shapes {u.local.shape}, '
                                    f'{v.local.shape}')
        part = float(np.dot(u.local, v.local))
    except Exception as exc:
        error = exc
    agree(owner.comm, error)
    return owner.comm.allreduce(part, op=MPI.SUM)
