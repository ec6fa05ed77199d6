"""``ss.convert``: a user's matrix or tensor stored in another catalogue format, on the host."""
import re

import dace
import numpy as np
import scipy.sparse as sp

from sdfgsparse import errors
from sdfgsparse.formats import SparseFormat, is_sparse_desc, sparse_type_of
from sdfgsparse.formats.catalogue import _BSRFamily, _CSFFamily
from sdfgsparse.runtime.container import SparseMatrix
from sdfgsparse.runtime.convert import has_scipy_twin, storage_to_coo, to_scipy_twin, to_storage
from sdfgsparse.runtime.marshal import _rank_words, check_value, is_sparse_value, marshal_sparse, torch_on_host
from sdfgsparse.runtime.tensors import is_pydata, tensor_storage

__all__ = ['convert']

#: The names of the formats of tensors (``COO3``, ``CSF2``, ``CSF3_201``, ``BatchedCSR``; ``COO`` is the
#: matrix one), stored from coordinate lists (:func:`~sdfgsparse.runtime.tensors.tensor_storage`).
_TENSOR_FORMAT = re.compile(r'(COO|CSF)\d+(_[0-9x]+)?|BatchedCSR')


def convert(A, fmt, index_dtype=None, prune=False):
    """Convert a matrix or tensor into the catalogue format ``fmt`` (a copy).

    Returns a scipy sparse array when the format has a scipy twin, else a
    :class:`SparseMatrix`. ``fmt`` may be a format (``ss.ELL``, ``ss.NM[2, 4]``), a BSR
    with a block shape (``ss.BSR.with_block(4, 4)``) or an annotation
    (``ss.CSR[dace.float32, M, N]``, whose value and index dtypes are then applied).
    ``prune=True`` (structured formats only) keeps each group's largest magnitudes where
    ``A`` does not fit the pattern; by default such an ``A`` raises ``PatternError``.

    Tensors: ``ss.convert(T, ss.CSF)`` and ``ss.convert(T, ss.COO)`` take the rank from
    ``T`` (pydata/sparse, scipy's N-D ``coo_array``, a torch sparse COO or dense tensor, a
    NumPy array, a :class:`SparseMatrix` of any format) and return a :class:`SparseMatrix`
    in ``CSF<n>`` (entries sorted, duplicates summed) or ``COO<n>`` (entries as they are);
    ``ss.CSF[dace.float32, I, J, K, dace.int64]`` applies its dtypes too. A matrix
    converted to ``ss.CSF`` is ``CSF2`` (DCSR's levels). ``ss.CSF.with_order(2, 0, 1)`` (or
    an annotation with a mode order, ``ss.CSF[dt, I, J, K, (2, 0, 1)]``) stores level ``k``
    as dimension ``order[k]`` (``CSF3_201``); ``ss.BatchedCSR`` a rank-3 tensor as a CSR
    matrix per batch (global positions). Both from any of those values, and from torch's
    batched CSR tensors.
    """
    dtype, annotated = None, False
    if isinstance(fmt, _BSRFamily):
        fmt = fmt.with_block(2, 2)
    elif isinstance(fmt, dace.data.Structure) and is_sparse_desc(fmt):
        st = sparse_type_of(fmt)
        fmt, dtype, index_dtype = st.fmt, st.dtype.type, index_dtype or st.index_dtype.type
        annotated = True
    elif not isinstance(fmt, (SparseFormat, _CSFFamily)):
        raise TypeError(f'convert: fmt must be a catalogue format such as ss.CSR, got {fmt!r}')
    if isinstance(A, (str, bytes)) or A is None:
        raise errors.ArgumentError(f'convert: A must be a sparse matrix or an array, got {type(A).__name__}')
    A = _on_host(A)
    rank = _rank_of(A)
    if not annotated:
        try:  # the value gives the rank (ss.COO: COO for a matrix, COO3 for a rank-3 tensor)
            fmt = fmt.with_rank(rank)
        except (errors.ShapeError, ValueError) as exc:
            raise errors.ShapeError(f'convert: A is {_rank_words(rank)}: {exc}') from None
    elif fmt.rank != rank:
        raise errors.ShapeError(f'convert: A is {_rank_words(rank)}, the annotation {st!r} '
                                f'{_rank_words(fmt.rank)}')
    if rank != 2 or _TENSOR_FORMAT.fullmatch(fmt.name) or is_pydata(A):
        if prune:
            raise errors.ArgumentError(f'convert: prune=True needs a structured format (ss.NM, ss.GNM, ss.VNM), '
                                       f'got {fmt!r}')
        coords, vals, shape = _coordinates(A)
        if not _TENSOR_FORMAT.fullmatch(fmt.name):  # a pydata matrix into a matrix format
            A = sp.coo_array((vals, tuple(coords)), shape=shape)
        else:
            arrays = tensor_storage(fmt, coords, vals, shape, index_dtype or np.int32)
            if dtype is not None:
                arrays['vals'] = arrays['vals'].astype(dtype, copy=False)
            return SparseMatrix(fmt, arrays, shape)
    elif is_sparse_value(A):
        check_value('A', A)
    A = torch_on_host(A, 'convert: A')
    if prune and getattr(fmt, 'pattern', None) is None:
        raise errors.ArgumentError(f'convert: prune=True needs a structured format (ss.NM, ss.GNM, ss.VNM), '
                                   f'got {fmt!r}')
    arrays, shape = to_storage(A, fmt, index_dtype or np.int32, prune=bool(prune))
    if dtype is not None:
        arrays['vals'] = arrays['vals'].astype(dtype, copy=False)
    m = SparseMatrix(fmt, arrays, shape)
    return to_scipy_twin(m) if has_scipy_twin(fmt) else m


def _on_host(A):
    """A torch tensor detached and on the CPU (a dense one as a NumPy array); a scipy
    sparse array of other than two dimensions in scipy's coo (the only format that stores
    every rank); anything else as it is."""
    if type(A).__module__.split('.')[0] == 'torch' and hasattr(A, 'layout') and hasattr(A, 'detach'):
        A = A.detach().cpu()
        return A.numpy() if str(A.layout) == 'torch.strided' else A
    if sp.issparse(A) and A.ndim != 2 and A.format != 'coo':
        return A.tocoo()
    return A


def _rank_of(A) -> int:
    if isinstance(A, SparseMatrix) or sp.issparse(A) or is_pydata(A):
        return len(A.shape)
    if hasattr(A, 'dim') and hasattr(A, 'layout'):  # torch
        return A.dim()
    return np.ndim(A)


def _coordinates(A):
    """``(coords, vals, shape)`` of every stored entry of a sparse value (checked as a
    program argument is), or of every nonzero of a dense array."""
    if is_sparse_value(A):
        arg = marshal_sparse('A', A, None)
        *coords, vals = storage_to_coo(arg.type.fmt, arg.arrays, arg.shape)
        return coords, vals, arg.shape
    X = np.asarray(A)
    if X.ndim < 1:
        raise errors.ShapeError('convert: A is a 0-D array; sparse tensors have at least one dimension')
    coords = np.nonzero(X)
    return list(coords), X[coords], X.shape
