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

:func:`csf_storage` stores a coordinate list as compressed sparse fibers (``ss.convert(T,
ss.CSF)``): the entries sorted lexicographically, duplicates summed, then per level the
coordinates where the prefix of the coordinates changes.
"""
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from sdfgsparse import errors

__all__ = ['is_pydata', 'pydata_members', 'pydata_problem', 'scipy_tensor_problem', 'csf_storage', 'coo_storage']


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
    """The ``CSF<n>`` members of a coordinate list (duplicates summed, any order).

    The entries are sorted lexicographically by their coordinates (``np.lexsort``, the
    first dimension most significant) and duplicates summed. Level ``k`` then has a node
    per distinct prefix ``(c0, ..., ck)``: ``crd<k>`` holds the last coordinate of each,
    and ``pos<k>`` (``k > 0``) where the children of each node of level ``k - 1`` start
    (the root level has no ``pos``; the last level's nodes are the entries, ``vals``).
    """
    it = np.dtype(index_dtype)
    coords = [np.asarray(c, dtype=np.int64) for c in coords]
    vals = np.asarray(vals)
    n = vals.shape[0]
    order = np.lexsort(coords[::-1]) if n else np.zeros(0, dtype=np.intp)
    coords = [c[order] for c in coords]
    vals = vals[order]
    # new[k][i]: entry i starts a new node of level k (its prefix c0..ck differs from entry i-1's)
    new = []
    changed = np.zeros(n, dtype=bool)
    if n:
        changed[0] = True
    for c in coords:
        changed = changed.copy()
        changed[1:] |= c[1:] != c[:-1]
        new.append(changed)
    starts = np.flatnonzero(new[-1])  # the distinct entries
    if starts.size != n:  # duplicates: summed into the first of each run
        vals = np.add.reduceat(vals, starts) if n else vals
        coords = [c[starts] for c in coords]
        new = [m[starts] for m in new]
    else:
        vals = vals.copy()
    arrays = {}
    parent_of = None  # per entry: the index of its node at the level above
    for k, c in enumerate(coords):
        nodes = np.flatnonzero(new[k])
        arrays[f'crd{k}'] = _index_array(c[nodes], it, f'crd{k}')
        if k:
            parents = parent_of[nodes]  # nondecreasing: the nodes of level k in order
            count = int(new[k - 1].sum())
            arrays[f'pos{k}'] = _index_array(np.searchsorted(parents, np.arange(count + 1)), it, f'pos{k}')
        parent_of = np.cumsum(new[k]) - 1
    arrays['vals'] = vals
    return arrays
