"""Sparse tensors of any rank on the host: pydata/sparse arrays read as coordinate lists, and
the storage of a coordinate list in ``COO<n>`` and ``CSF<n>``.

A tensor of rank ``n`` arrives as a coordinate list — ``n`` coordinate arrays, one per
dimension, and the values — whatever library holds it: pydata/sparse's ``COO`` (its
``coords`` are one C-ordered ``(ndim, nnz)`` array, whose rows are contiguous views: passed
zero-copy) and its other formats (``GCXS``, ``DOK``: through ``asformat('coo')``, a copy),
scipy's N-D ``coo_array`` (``coords``, a tuple: :func:`sdfgsparse.runtime.convert.scipy_members`)
and torch's sparse COO tensors (``_indices()``: :func:`sdfgsparse.runtime.marshal._torch_members`).
Its format is ``COO<n>`` (:func:`sdfgsparse.formats.catalogue.coo_of_rank`; ``COO`` for a
matrix). pydata/sparse is optional: its objects are recognised by their module, never
imported here.

:func:`tensor_storage` stores a coordinate list in a tensor format (``ss.convert(T, ss.CSF)``):
``COO<n>`` as it is (:func:`coo_storage`), any format of dense and compressed levels that
each store one dimension (``CSF<n>`` in any mode order, ``BatchedCSR``, the matrix formats CSR,
CSC and DCSR) by :func:`level_storage`: the entries sorted lexicographically in level order,
duplicates summed, then level by level. :func:`batched_csr_members` and
:func:`batched_csr_parts` translate between torch's batched CSR (positions per batch) and
``BatchedCSR`` (global positions).
"""
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from sdfgsparse import errors
from sdfgsparse.formats import SparseFormat
from sdfgsparse.formats.catalogue import csf_of_rank
from sdfgsparse.formats.levels import Compressed, Dense, Singleton

__all__ = ['is_pydata', 'pydata_members', 'pydata_problem', 'scipy_tensor_problem', 'csf_storage', 'coo_storage',
           'level_storage', 'tensor_storage', 'batched_csr_members', 'batched_csr_parts']


def is_pydata(obj) -> bool:
    """Whether ``obj`` is a pydata/sparse array (``sparse.COO``, ``sparse.GCXS``, ...),
    recognised by its class's module, so that the check imports nothing."""
    mod = type(obj).__module__
    return (mod == 'sparse' or mod.startswith('sparse.')) and hasattr(obj, 'asformat') and hasattr(obj, 'fill_value')


def _pydata_coo(obj):
    return obj if type(obj).__name__ == 'COO' and hasattr(obj, 'coords') else obj.asformat('coo')


def pydata_problem(obj) -> Optional[str]:
    """What is wrong with the shapes of a pydata/sparse array before it is read as a
    coordinate list (None: nothing): no dimension, or coordinate and data arrays of other
    shapes than ``(ndim, nnz)`` and ``(nnz,)`` (pydata checks them when it builds the array,
    not when they are assigned)."""
    if obj.ndim < 1:
        return 'a 0-D pydata/sparse array; sparse tensors have at least one dimension'
    if type(obj).__name__ != 'COO':
        return None  # (asformat('coo') builds them)
    coords, data = obj.coords, obj.data
    if not isinstance(coords, np.ndarray) or not isinstance(data, np.ndarray):
        return f'coords and data are {type(coords).__name__} and {type(data).__name__}, not NumPy arrays'
    if data.ndim != 1:
        return f'data has shape {data.shape}; a pydata COO array keeps it in 1 dimension'
    if coords.shape != (obj.ndim, data.shape[0]):
        return f'coords has shape {coords.shape}, expected (ndim, nnz) = ({obj.ndim}, {data.shape[0]})'
    return None


def pydata_members(obj) -> Tuple[Dict[str, np.ndarray], tuple]:
    """The ``COO<n>`` members (``crd0`` .. ``crd<n-1>``, ``vals``) and shape of a pydata/sparse
    array: views of a ``COO``'s arrays (zero-copy), or of its ``asformat('coo')`` copy. An
    array whose fill value is not zero is an UnsupportedOperationError: its unstored entries
    are not zeros, so it is no sparse value of ours."""
    fill = obj.fill_value
    try:
        nonzero = bool(np.any(fill != 0))
    except (TypeError, ValueError):
        nonzero = True
    if nonzero:
        raise errors.UnsupportedOperationError(f'a pydata/sparse array whose fill value is {fill!r}: the entries '
                                               'a sparse argument does not store are zeros (fill_value=0)')
    coo = _pydata_coo(obj)
    coords = coo.coords
    arrays = {f'crd{k}': coords[k] for k in range(coords.shape[0])}
    arrays['vals'] = coo.data
    return arrays, tuple(int(s) for s in obj.shape)


def scipy_tensor_problem(obj) -> Optional[str]:
    """What keeps a scipy sparse array of other than two dimensions from being read as a
    coordinate list (None: nothing; a format other than coo is refused by
    :func:`~sdfgsparse.runtime.marshal.format_of_value`)."""
    if obj.ndim < 1:
        return 'a 0-D scipy array; sparse tensors have at least one dimension'
    if obj.format != 'coo':
        return None
    coords, data = getattr(obj, 'coords', None), getattr(obj, 'data', None)
    if not isinstance(data, np.ndarray):
        return f'data is a {type(data).__name__}, not a NumPy array'
    if data.ndim != 1:
        return f'data has shape {data.shape}; a scipy coo array keeps it in 1 dimension'
    if not isinstance(coords, tuple) or len(coords) != obj.ndim:
        return f'coords is not a tuple of {obj.ndim} index arrays (one per dimension)'
    for k, c in enumerate(coords):
        if not isinstance(c, np.ndarray) or c.shape != data.shape:
            return f'coords[{k}] has shape {getattr(c, "shape", None)}, expected ({data.shape[0]},) as data'
    return None


def _index_array(a: np.ndarray, it: np.dtype, name: str) -> np.ndarray:
    """``a`` (int64 coordinates or positions) as ``it``, or an IndexOverflowError."""
    if a.size and it.itemsize < 8 and int(a.max()) > np.iinfo(it).max:
        raise errors.IndexOverflowError(f'convert: {name} holds {int(a.max())}, which does not fit {it.name} '
                                        'indices; pass index_dtype=np.int64')
    return a.astype(it)


def coo_storage(coords: Sequence[np.ndarray], vals: np.ndarray, index_dtype) -> Dict[str, np.ndarray]:
    """The ``COO<n>`` members of a coordinate list: the entries as they are (order and
    duplicates kept, as scipy's COO keeps them), with ``index_dtype`` coordinates."""
    it = np.dtype(index_dtype)
    arrays = {f'crd{k}': _index_array(np.asarray(c, dtype=np.int64), it, f'crd{k}') for k, c in enumerate(coords)}
    arrays['vals'] = np.array(vals, copy=True)
    return arrays


def csf_storage(coords: Sequence[np.ndarray], vals: np.ndarray, index_dtype) -> Dict[str, np.ndarray]:
    """The ``CSF<n>`` members of a coordinate list (duplicates summed, any order): level ``k``
    has a node per distinct prefix ``(c0, ..., ck)``; ``crd<k>`` holds the last coordinate of
    each, and ``pos<k>`` (``k > 0``) where the children of each node of level ``k - 1`` start
    (the root level has no ``pos``; the last level's nodes are the entries, ``vals``). See
    :func:`level_storage`."""
    return level_storage(csf_of_rank(len(coords)), coords, vals, None, index_dtype)


def _is_coo(fmt: SparseFormat) -> bool:
    """Whether ``fmt`` is a coordinate list: a non-unique compressed root over singletons."""
    root = fmt.levels[0]
    return isinstance(root, Compressed) and not root.unique and all(
        isinstance(lvl, Singleton) and not lvl.padded for lvl in fmt.levels[1:])


def _level_storable(fmt: SparseFormat) -> bool:
    """Whether :func:`level_storage` stores ``fmt``: every level dense (of the tensor's
    extent) or compressed, ordered and unique, and each storing one dimension."""
    return fmt.level_dims is not None and all(
        (isinstance(lvl, Dense) and not lvl.size_key) or (isinstance(lvl, Compressed) and lvl.ordered and lvl.unique)
        for lvl in fmt.levels)


def tensor_storage(fmt: SparseFormat, coords: Sequence[np.ndarray], vals: np.ndarray, shape,
                   index_dtype) -> Dict[str, np.ndarray]:
    """The members of ``fmt`` of a coordinate list of a tensor of ``shape``: a coordinate
    list format's as they are (:func:`coo_storage`), the others' by :func:`level_storage`;
    a FormatMismatchError for a format neither stores."""
    if _is_coo(fmt):
        return coo_storage(coords, vals, index_dtype)
    return level_storage(fmt, coords, vals, shape, index_dtype)


def level_storage(fmt: SparseFormat, coords: Sequence[np.ndarray], vals: np.ndarray, shape,
                  index_dtype) -> Dict[str, np.ndarray]:
    """The members of ``fmt`` (dense and compressed levels, each storing the dimension
    :attr:`~sdfgsparse.formats.format.SparseFormat.level_dims` names) of a coordinate list
    (duplicates summed, any order) of a tensor of ``shape`` (needed for dense levels only).

    The entries are sorted lexicographically by their level coordinates (``np.lexsort``,
    the root level's most significant) and duplicates summed. Walking the levels, each
    entry's position on the current level is: on a dense level of extent ``e``, ``parent *
    e + c`` (no storage); on a compressed level, the index of its node, a node per distinct
    (parent position, coordinate): ``crd<k>`` holds each node's coordinate and ``pos<k>``
    (``k > 0``) where the nodes of each parent position start. ``vals`` holds each entry's
    value at its position on the last level (zeros where a dense last level stores no entry).
    """
    if not _level_storable(fmt):
        raise errors.FormatMismatchError(f'convert: no conversion of a coordinate list into {fmt.name} (its levels '
                                         'are not all dense or compressed ones storing a dimension each)')
    it = np.dtype(index_dtype)
    keys = [np.asarray(coords[d], dtype=np.int64) for d in fmt.level_dims]
    vals = np.asarray(vals)
    n = vals.shape[0]
    order = np.lexsort(keys[::-1]) if n else np.zeros(0, dtype=np.intp)
    keys = [c[order] for c in keys]
    vals = vals[order]  # (a copy)
    if n > 1:
        same = np.ones(n - 1, dtype=bool)
        for c in keys:
            same &= c[1:] == c[:-1]
        if same.any():  # duplicates: summed into the first of each run
            starts = np.flatnonzero(np.concatenate([[True], ~same]))
            vals = np.add.reduceat(vals, starts)
            keys = [c[starts] for c in keys]
            n = vals.shape[0]
    extents = fmt.extents(*shape) if shape is not None else None
    arrays = {}
    at = np.zeros(n, dtype=np.int64)  # per entry: its position on the current level
    count = 1  # positions of the current level
    for k, (lvl, c) in enumerate(zip(fmt.levels, keys)):
        if isinstance(lvl, Dense):
            if extents is None:
                raise errors.ShapeError(f'convert: {fmt.name} has a dense level; its extent needs the shape')
            e = int(extents[k])
            if c.size and (c.min() < 0 or c.max() >= e):
                bad = int(np.flatnonzero((c < 0) | (c >= e))[0])
                raise errors.InvalidIndexError(f'convert: coordinate {int(c[bad])} of dimension {fmt.level_dims[k]} '
                                               f'is out of range for its size {e}')
            at, count = at * e + c, count * e
            continue
        new = np.ones(n, dtype=bool)
        new[1:] = (at[1:] != at[:-1]) | (c[1:] != c[:-1])
        nodes = np.flatnonzero(new)
        arrays[f'crd{k}'] = _index_array(c[nodes], it, f'crd{k}')
        if k:
            arrays[f'pos{k}'] = _index_array(np.searchsorted(at[nodes], np.arange(count + 1)), it, f'pos{k}')
        at, count = np.cumsum(new) - 1, int(nodes.size)
    if count == n:  # (a compressed last level: the entries in order)
        arrays['vals'] = vals
    else:
        arrays['vals'] = np.zeros(count, dtype=vals.dtype)
        arrays['vals'][at] = vals
    return arrays


def batched_csr_members(crow: np.ndarray, col: np.ndarray, values: np.ndarray) -> Dict[str, np.ndarray]:
    """The ``BatchedCSR`` members of torch's batched CSR arrays: ``crow`` (B, M + 1) the
    positions of each batch's rows counted from the batch's first entry, ``col`` and
    ``values`` (B, k), k entries per batch. ``pos2`` holds the global positions (``crow[b,
    i] + b * k``, then ``B * k``: a new array, in ``crow``'s dtype where they fit, else int64);
    ``crd2`` and ``vals`` are ``col`` and ``values`` read flat (views where they are
    C-contiguous). A batch whose positions do not start at 0 or end at k is an IndptrError
    naming ``crow_indices``; the rest (monotone positions, sorted and in-range columns) is
    checked on the global arrays, as for every ``BatchedCSR`` value."""
    if crow.ndim != 2 or col.ndim != 2 or values.ndim != 2:
        raise errors.ShapeError(f'a batched CSR tensor has crow_indices, col_indices and values of 2 dimensions '
                                f'(batch, ...), got shapes {crow.shape}, {col.shape} and {values.shape}')
    B, rows1 = crow.shape
    k = col.shape[1]
    if col.shape[0] != B or values.shape != col.shape or rows1 < 1:
        raise errors.ShapeError(f'a batched CSR tensor of {B} batches has crow_indices {crow.shape}, col_indices '
                                f'{col.shape} and values {values.shape}; expected (B, M + 1), (B, nnz) and (B, nnz)')
    if B:
        first, last = crow[:, 0], crow[:, -1]
        if np.any(first != 0):
            b = int(np.flatnonzero(first != 0)[0])
            raise errors.IndptrError(f'crow_indices[{b}, 0] = {int(first[b])}, expected 0 (each batch\'s positions '
                                     'start at 0)')
        if np.any(last != k):
            b = int(np.flatnonzero(last != k)[0])
            raise errors.IndptrError(f'crow_indices[{b}, {rows1 - 1}] = {int(last[b])} is not the number of entries '
                                     f'of each batch ({k}, col_indices.shape[1])')
    pos = np.empty(B * (rows1 - 1) + 1, dtype=np.int64)
    pos[:-1] = (crow[:, :-1].astype(np.int64) + (np.arange(B, dtype=np.int64) * k)[:, None]).reshape(-1)
    pos[-1] = B * k
    if crow.dtype != np.int64 and np.issubdtype(crow.dtype, np.integer) and pos[-1] <= np.iinfo(crow.dtype).max:
        pos = pos.astype(crow.dtype)
    return {'pos2': pos, 'crd2': col.reshape(-1), 'vals': values.reshape(-1)}


def batched_csr_parts(arrays: Dict[str, np.ndarray], shape) -> Optional[Tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``(crow, col, values)`` of torch's batched CSR holding the ``BatchedCSR`` members
    ``arrays`` of a tensor of ``shape`` (B, M, N): shapes (B, M + 1), (B, k), (B, k), positions
    counted per batch (``col`` and ``values`` views of ``crd2`` and ``vals``); None where the
    batches store different numbers of entries (torch's batched layout needs one k)."""
    B, M = int(shape[0]), int(shape[1])
    pos = arrays['pos2']
    crd, vals = arrays['crd2'], arrays['vals']
    if M:
        per = np.diff(pos[::M].astype(np.int64))  # (B + 1 batch starts: pos2[b * M])
    else:
        per = np.zeros(B, dtype=np.int64)
    k = int(per[0]) if per.size else 0
    if per.size and np.any(per != k) or crd.size != B * k:
        return None
    crow = np.empty((B, M + 1), dtype=pos.dtype)
    crow[:, :M] = pos[:-1].reshape(B, M) - (np.arange(B, dtype=pos.dtype) * k)[:, None]
    crow[:, M] = k
    return crow, crd.reshape(B, k), vals.reshape(B, k)
