"""``ss.convert``: a user's matrix stored in another catalogue format, on the host."""
import dace
import numpy as np

from sdfgsparse import errors
from sdfgsparse.formats import SparseFormat, is_sparse_desc, sparse_type_of
from sdfgsparse.formats.catalogue import _BSRFamily
from sdfgsparse.runtime.container import SparseMatrix
from sdfgsparse.runtime.convert import has_scipy_twin, to_scipy_twin, to_storage
from sdfgsparse.runtime.marshal import check_value, is_sparse_value, torch_on_host

__all__ = ['convert']


def convert(A, fmt, index_dtype=None, prune=False):
    """Convert a matrix into the catalogue format ``fmt`` (a copy).

    Returns a scipy sparse array when the format has a scipy twin, else a
    :class:`SparseMatrix`. ``fmt`` may be a format (``ss.ELL``, ``ss.NM[2, 4]``), a BSR
    with a block shape (``ss.BSR.with_block(4, 4)``) or an annotation
    (``ss.CSR[dace.float32, M, N]``, whose value and index dtypes are then applied).
    ``prune=True`` (structured formats only) keeps each group's largest magnitudes where
    ``A`` does not fit the pattern; by default such an ``A`` raises ``PatternError``.
    """
    dtype = None
    if isinstance(fmt, _BSRFamily):
        fmt = fmt.with_block(2, 2)
    elif isinstance(fmt, dace.data.Structure) and is_sparse_desc(fmt):
        st = sparse_type_of(fmt)
        fmt, dtype, index_dtype = st.fmt, st.dtype.type, index_dtype or st.index_dtype.type
    elif not isinstance(fmt, SparseFormat):
        raise TypeError(f'convert: fmt must be a catalogue format such as ss.CSR, got {fmt!r}')
    if is_sparse_value(A):
        check_value('A', A)
    elif isinstance(A, (str, bytes)) or A is None:
        raise errors.ArgumentError(f'convert: A must be a sparse matrix or an array, got {type(A).__name__}')
    A = torch_on_host(A, 'convert: A')
    if prune and getattr(fmt, 'pattern', None) is None:
        raise errors.ArgumentError(f'convert: prune=True needs a structured format (ss.NM, ss.GNM, ss.VNM), '
                                   f'got {fmt!r}')
    arrays, shape = to_storage(A, fmt, index_dtype or np.int32, prune=bool(prune))
    if dtype is not None:
        arrays['vals'] = arrays['vals'].astype(dtype, copy=False)
    m = SparseMatrix(fmt, arrays, shape)
    return to_scipy_twin(m) if has_scipy_twin(fmt) else m
