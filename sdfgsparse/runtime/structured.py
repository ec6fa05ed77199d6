"""Host conversions into the structured layouts (``ss.NM``, ``ss.GNM``, ``ss.VNM``).

A matrix becomes the storage arrays of a pattern in row chunks, each made dense for the
choice (a chunk is at most :data:`CHUNK` values, so a large sparse matrix never becomes
dense whole). Two modes:

* strict (``prune=False``, what ``ss.convert`` does by default): every non-zero must fit
  the pattern, else :class:`~sdfgsparse.errors.PatternError` names the row and the
  columns of the first group that holds too many;
* by magnitude (``prune=True``): each group keeps its ``n`` largest magnitudes (GNM and
  VNM choose the shared columns by the sum of magnitudes over the rows that share them).
  A NaN counts as the largest magnitude, so it is never dropped in favour of a number.

Groups with fewer entries than slots store zeros at the lowest unused offsets; slots of a
group hold increasing offsets.
"""
from typing import Dict, Tuple

import numpy as np
import scipy.sparse as sp

from sdfgsparse import errors
from sdfgsparse.formats.structured import VNM_KEPT, pattern_of

__all__ = ['structured_storage', 'CHUNK']

#: dense values per row chunk of a conversion
CHUNK = 1 << 22


def _magnitude(w: np.ndarray) -> np.ndarray:
    mag = np.abs(w).astype(np.float64)
    mag[np.isnan(mag)] = np.inf
    return mag


def _top(score: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest scores along the last axis, in increasing index order
    (ties: the lower index)."""
    order = np.argsort(-score, axis=-1, kind='stable')[..., :k]
    return np.sort(order, axis=-1)


def _too_many(count: np.ndarray, limit: int, fmt, what: str, row_of, col_of) -> None:
    bad = np.argwhere(count > limit)
    if bad.size:
        at = tuple(int(i) for i in bad[0])
        r0, r1 = row_of(at)
        c0, c1 = col_of(at)
        rows = f'row {r0}' if r1 == r0 + 1 else f'rows {r0}..{r1 - 1}'
        raise errors.PatternError(f'convert: {rows}, columns {c0}..{c1 - 1} hold {int(count[at])} {what}; '
                                  f'{fmt!r} keeps at most {limit}. Pass prune=True to keep the largest magnitudes')


def _chunks(A, rows: int, cols: int, step: int):
    """Dense row chunks ``(r0, W)`` of ``A`` (scipy or dense), each a multiple of ``step`` rows."""
    per = max(step, (CHUNK // max(cols, 1)) // step * step)
    for r0 in range(0, rows, per):
        r1 = min(rows, r0 + per)
        W = A[r0:r1].toarray() if sp.issparse(A) else A[r0:r1]
        yield r0, np.asarray(W)


def structured_storage(A, fmt, index_dtype=np.int32, prune: bool = False) -> Tuple[Dict[str, np.ndarray], tuple]:
    """Member arrays of ``A`` (a scipy sparse matrix or a 2-D array) in the structured
    format ``fmt``, and its shape."""
    pat = pattern_of(fmt)
    if pat is None:
        raise errors.FormatMismatchError(f'convert: {fmt!r} is not a structured format')
    if sp.issparse(A):
        A = sp.csr_array(A)
        A.sum_duplicates()
    else:
        A = np.asarray(A)
        if A.ndim != 2:
            raise errors.ShapeError(f'convert: A has shape {A.shape}; expected a matrix')
    rows, cols = A.shape
    R, C = fmt.block
    if rows % R or cols % C:
        raise errors.ShapeError(f'convert: shape {(rows, cols)} is not a multiple of the block {R}x{C} of {fmt!r}')
    it = np.dtype(index_dtype)
    n, m = pat.n, pat.m
    G = cols // m
    crds, vals, sels = [], [], []
    for r0, W in _chunks(A, rows, cols, R):
        if pat.kind == 'nm':
            W3 = W.reshape(W.shape[0], G, m)
            if not prune:
                _too_many((W3 != 0).sum(axis=2), n, fmt, 'non-zeros', lambda a: (r0 + a[0], r0 + a[0] + 1),
                          lambda a: (a[1] * m, a[1] * m + m))
            idx = _top(_magnitude(W3), n)  # [r, G, n]
            crds.append(idx.reshape(-1))
            vals.append(np.take_along_axis(W3, idx, axis=2).reshape(-1))
        elif pat.kind == 'gnm':
            g = pat.rows
            W4 = W.reshape(W.shape[0] // g, g, G, m)
            if not prune:
                _too_many((W4 != 0).any(axis=1).sum(axis=2), n, fmt, 'non-zero columns',
                          lambda a: (r0 + a[0] * g, r0 + a[0] * g + g), lambda a: (a[1] * m, a[1] * m + m))
            idx = _top(_magnitude(W4).sum(axis=1), n)  # [rb, G, n]
            crds.append(idx.reshape(-1))
            # values [rb, G, n, g]: the g rows of a slot side by side
            vals.append(np.take_along_axis(W4.transpose(0, 2, 3, 1), idx[..., None], axis=2).reshape(-1))
        else:  # vnm
            v = pat.rows
            W4 = W.reshape(W.shape[0] // v, v, G, m).transpose(0, 2, 1, 3)  # [rb, G, v, m]
            if not prune:
                _too_many((W4 != 0).any(axis=2).sum(axis=2), VNM_KEPT, fmt, 'non-zero columns',
                          lambda a: (r0 + a[0] * v, r0 + a[0] * v + v), lambda a: (a[1] * m, a[1] * m + m))
                _too_many((W4 != 0).sum(axis=3), n, fmt, 'non-zeros',
                          lambda a: (r0 + a[0] * v + a[2], r0 + a[0] * v + a[2] + 1),
                          lambda a: (a[1] * m, a[1] * m + m))
            sel = _top(_magnitude(W4).sum(axis=2), VNM_KEPT)  # [rb, G, 4]
            Wsel = np.take_along_axis(W4, np.broadcast_to(sel[:, :, None, :], W4.shape[:3] + (VNM_KEPT, )), axis=3)
            meta = _top(_magnitude(Wsel), n)  # [rb, G, v, n]
            kept = np.take_along_axis(Wsel, meta, axis=3)
            # storage is row-major: [rb, v, G, n]
            crds.append(meta.transpose(0, 2, 1, 3).reshape(-1))
            vals.append(kept.transpose(0, 2, 1, 3).reshape(-1))
            sels.append(sel.reshape(-1))
    k = len(fmt.levels) - 1
    dtype = A.dtype
    arrays = {
        f'crd{k}': np.concatenate(crds).astype(it) if crds else np.zeros(0, it),
        'vals': np.concatenate(vals).astype(dtype, copy=False) if vals else np.zeros(0, dtype)
    }
    if pat.kind == 'vnm':
        arrays[f'sel{k}'] = np.concatenate(sels).astype(it) if sels else np.zeros(0, it)
    # the singleton level of NM / GNM is level 3 (GNM has its row level below it)
    if pat.kind == 'gnm':
        arrays = {'crd3' if name == f'crd{k}' else name: a for name, a in arrays.items()}
    return arrays, (rows, cols)
