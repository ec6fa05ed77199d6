"""Host-side conversions between scipy / torch objects and catalogue storage arrays.

``to_storage`` turns a matrix into the member arrays of a format (zero-copy for the
twin scipy format); ``storage_to_coo`` enumerates stored entries of any format by
walking its levels in NumPy, so it serves every format the catalogue can compose, of
matrices and of tensors of any rank (``COO3``, ``CSF4``: :mod:`sdfgsparse.runtime.tensors`).
"""
from typing import Dict, Tuple

import numpy as np
import scipy.sparse as sp

from sdfgsparse import errors
from sdfgsparse._symbolic import integer_function
from sdfgsparse.formats import SparseFormat
from sdfgsparse.formats.levels import Compressed, Dense, Indirect, Offset, Singleton
from sdfgsparse.runtime.structured import structured_storage

__all__ = ['to_storage', 'storage_to_coo', 'slot_coordinates', 'scipy_members', 'to_scipy_twin', 'has_scipy_twin']


#: The scipy attribute holding each member of a CSR / CSC twin (the warm call's binder
#: reads them by these names too, runtime/_binder.c).
SCIPY_COMPRESSED = {'pos1': 'indptr', 'crd1': 'indices', 'vals': 'data'}


def scipy_members(obj, fmt: SparseFormat) -> Dict[str, np.ndarray]:
    """The member arrays of a scipy object whose format is ``fmt``'s twin (no copies)."""
    f = obj.format
    if f in ('csr', 'csc'):
        return {m: getattr(obj, a) for m, a in SCIPY_COMPRESSED.items()}
    if f == 'bsr':
        return {'pos1': obj.indptr, 'crd1': obj.indices, 'vals': obj.data.reshape(-1)}
    if f == 'coo':
        if obj.ndim != 2:  # an N-D coo_array (format COO<n>): its coordinates, dimension by dimension
            return {**{f'crd{k}': c for k, c in enumerate(obj.coords)}, 'vals': obj.data}
        return {'crd0': obj.row, 'crd1': obj.col, 'vals': obj.data}
    if f == 'dia':
        return {'off1': obj.offsets, 'vals': np.ascontiguousarray(obj.data).reshape(-1)}
    raise errors.FormatMismatchError(f'scipy format {f!r} has no catalogue twin')


def storage_to_coo(fmt: SparseFormat, arrays: Dict[str, np.ndarray], shape) -> Tuple[np.ndarray, ...]:
    """(row, col, val) of every stored entry of a matrix in format ``fmt`` — of a tensor of
    another rank, its coordinates in each dimension, then val — walking its levels
    (padding and out-of-range diagonal slots are dropped)."""
    *coords, slots = slot_coordinates(fmt, arrays, shape)
    return (*coords, arrays['vals'][slots])


def slot_coordinates(fmt: SparseFormat, arrays: Dict[str, np.ndarray], shape) -> Tuple[np.ndarray, ...]:
    """(row, col, slot) of every stored entry of a matrix — of a tensor of another rank,
    its coordinates in each of the ``fmt.rank`` dimensions, then slot: its coordinates
    (``fmt.dims``, expressions of the levels' coordinates) and the position of its value in
    ``vals``, in storage order (padding and out-of-range diagonal slots dropped)."""
    if len(shape) != fmt.rank:
        raise errors.ShapeError(f'{fmt.name}: a shape of {len(shape)} dimensions {tuple(shape)} for a '
                                f'rank-{fmt.rank} format')
    ext = [None if e is None else int(e) for e in fmt.extents(*shape)]
    pos = np.zeros(1, dtype=np.int64)  # positions of the current level
    coords = []  # per level: coordinate of each current position
    keep = np.ones(1, dtype=bool)
    for k, lvl in enumerate(fmt.levels):
        if isinstance(lvl, Dense):
            # a sized level (ELL's K slots) holds vals / (entries of the levels above) positions
            size = ext[k] if not lvl.size_key else (arrays['vals'].size // pos.size if pos.size else 0)
            c = np.tile(np.arange(size, dtype=np.int64), pos.size)
            parent = np.repeat(np.arange(pos.size), size)
            pos = pos[parent] * size + c
        elif isinstance(lvl, Compressed):
            crd = arrays[f'crd{k}'].astype(np.int64)
            if k == 0:
                parent = np.zeros(crd.size, dtype=np.int64)
                newpos = np.arange(crd.size, dtype=np.int64)
            else:
                ptr = arrays[f'pos{k}'].astype(np.int64)
                counts = ptr[pos + 1] - ptr[pos]
                parent = np.repeat(np.arange(pos.size), counts)
                starts = np.repeat(ptr[pos], counts)
                offs = np.arange(counts.sum(), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
                newpos = starts + offs
            c = crd[newpos]
            pos = newpos
        elif isinstance(lvl, Singleton):
            c = arrays[f'crd{k}'].astype(np.int64)[pos]
            parent = np.arange(pos.size)
        elif isinstance(lvl, Indirect):
            t = lvl.table_row(coords, ext)
            c = arrays[f'sel{k}'].astype(np.int64)[t * lvl.width + arrays[f'crd{k}'].astype(np.int64)[pos]]
            parent = np.arange(pos.size)
        elif isinstance(lvl, Offset):
            off = arrays[f'off{k}'].astype(np.int64)
            L = arrays['vals'].size // max(off.size, 1) if off.size else 0
            parent = np.repeat(np.arange(pos.size), off.size)
            d = np.tile(np.arange(off.size), pos.size)
            c = coords[k - 1][parent] + off[d]
            ok = (c >= 0) & (c < ext[k]) & (c < L)
            c = np.where(ok, c, 0)
            pos = d * L + c
            coords = [x[parent] for x in coords]
            keep = keep[parent] & ok
            coords.append(c)
            continue
        else:  # pragma: no cover
            raise NotImplementedError(type(lvl))
        coords = [x[parent] for x in coords]
        keep = keep[parent]
        if isinstance(lvl, Singleton) and lvl.padded:
            keep = keep & (c >= 0)
        coords.append(c)
    env = {f'c{k}': x for k, x in enumerate(coords)}
    dims = ((integer_function(d, np.minimum, np.maximum)(env) if coords else np.zeros(0, np.int64))
            for d in fmt.dims)
    return (*(np.broadcast_to(x, pos.shape)[keep] for x in dims), pos[keep])


def _csr_parts(A, index_dtype):
    A = sp.csr_array(A)
    A.sum_duplicates()
    A.sort_indices()
    return A.indptr.astype(index_dtype), A.indices.astype(index_dtype), A.data


def to_storage(A, fmt: SparseFormat, index_dtype=np.int32, prune: bool = False) -> Tuple[Dict[str, np.ndarray], tuple]:
    """Member arrays of ``A`` (scipy, dense or ``SparseMatrix``) stored as ``fmt`` (copies).
    ``prune``: for a structured format (``ss.NM[2, 4]``), keep each group's largest
    magnitudes instead of raising :class:`~sdfgsparse.errors.PatternError` where the
    matrix does not fit (see :mod:`sdfgsparse.runtime.structured`)."""
    if hasattr(A, 'to_coo_arrays'):  # a SparseMatrix (runtime/container.py)
        r, c, v = A.to_coo_arrays()
        A = sp.coo_array((v, (r, c)), shape=A.shape)
    if getattr(fmt, 'pattern', None) is not None:
        return structured_storage(A, fmt, index_dtype, prune)
    if not sp.issparse(A):
        A = sp.coo_array(np.asarray(A))
    shape = A.shape
    name = fmt.name
    it = np.dtype(index_dtype)
    if name == 'CSR':
        p, c, v = _csr_parts(A, it)
        return {'pos1': p, 'crd1': c, 'vals': v}, shape
    if name == 'CSC':
        B = sp.csc_array(A)
        B.sum_duplicates()
        B.sort_indices()
        return {'pos1': B.indptr.astype(it), 'crd1': B.indices.astype(it), 'vals': B.data}, shape
    if name == 'COO':
        B = sp.coo_array(A)
        return {'crd0': B.row.astype(it), 'crd1': B.col.astype(it), 'vals': B.data}, shape
    if name.startswith('BSR'):
        R, C = fmt.block
        if shape[0] % R or shape[1] % C:
            raise errors.ShapeError(f'convert: shape {shape} is not a multiple of the block shape {R}x{C}')
        B = sp.bsr_array(A, blocksize=(R, C))
        B.sum_duplicates()
        B.sort_indices()
        return {'pos1': B.indptr.astype(it), 'crd1': B.indices.astype(it), 'vals': B.data.reshape(-1).copy()}, shape
    if name == 'DIA':
        B = sp.dia_array(A)
        return {'off1': B.offsets.astype(it), 'vals': np.ascontiguousarray(B.data).reshape(-1)}, shape
    if name == 'DCSR':
        p, c, v = _csr_parts(A, it)
        nonempty = np.flatnonzero(np.diff(p)).astype(it)
        pos1 = np.concatenate([[0], np.cumsum(np.diff(p)[nonempty])]).astype(it)
        return {'crd0': nonempty, 'pos1': pos1, 'crd1': c, 'vals': v}, shape
    if name == 'ELL':
        p, c, v = _csr_parts(A, it)
        lens = np.diff(p)
        K = int(lens.max()) if lens.size else 0
        crd = np.full((shape[0], K), -1, dtype=it)
        vals = np.zeros((shape[0], K), dtype=v.dtype)
        row = np.repeat(np.arange(shape[0]), lens)
        slot = np.arange(c.size) - np.repeat(p[:-1], lens)
        crd[row, slot] = c
        vals[row, slot] = v
        return {'crd2': crd.reshape(-1), 'vals': vals.reshape(-1)}, shape
    raise errors.FormatMismatchError(f'convert: no conversion into {name}')


def has_scipy_twin(fmt: SparseFormat) -> bool:
    return fmt.scipy_format is not None


def to_scipy_twin(m):
    """The scipy sparse array sharing the storage arrays of a ``SparseMatrix`` whose format
    has a scipy twin (CSR, CSC, COO, BSR, DIA)."""
    a, f = m.arrays, m.format
    if f.name == 'CSR':
        return sp.csr_array((a['vals'], a['crd1'], a['pos1']), shape=m.shape)
    if f.name == 'CSC':
        return sp.csc_array((a['vals'], a['crd1'], a['pos1']), shape=m.shape)
    if f.name == 'COO':
        return sp.coo_array((a['vals'], (a['crd0'], a['crd1'])), shape=m.shape)
    if f.name == 'DIA':
        nd = a['off1'].size
        return sp.dia_array((a['vals'].reshape(nd, -1) if nd else np.zeros((0, m.shape[1]), a['vals'].dtype),
                             a['off1']),
                            shape=m.shape)
    R, C = f.block
    return sp.bsr_array((a['vals'].reshape(-1, R, C), a['crd1'], a['pos1']), shape=m.shape)
