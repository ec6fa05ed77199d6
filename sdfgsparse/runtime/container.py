"""``SparseMatrix``: a matrix (or a tensor of any rank) in any catalogue format, as named
storage arrays.

scipy and torch objects are used directly where they have a twin format; formats without
one (ELL, DCSR, or a BSR block shape of your choice) travel as ``SparseMatrix``, and so do
tensors stored in ``COO<n>`` / ``CSF<n>`` (``ss.SparseTensor`` is the same class).
"""
from typing import Dict, Tuple

import numpy as np
import scipy.sparse as sp

from sdfgsparse import errors
from sdfgsparse.formats import SparseFormat, get_format
from sdfgsparse.runtime.convert import storage_to_coo

__all__ = ['SparseMatrix', 'SparseTensor']


class SparseMatrix:
    """A sparse matrix — or a tensor of the format's rank — stored as the member arrays of a
    catalogue format.

    :param fmt: the :class:`SparseFormat` (``ss.ELL``, ``CSF3``) or its name.
    :param arrays: member name -> 1-D NumPy array (``pos1``, ``crd1``, ``vals``, ...).
    :param shape: ``(rows, cols)`` of a matrix; of a tensor, one size per dimension of the
                  format's rank (``(I, J, K)`` for ``COO3`` and ``CSF3``).

    Examples
    --------
    >>> import sdfgsparse as ss, scipy.sparse as sp
    >>> E = ss.convert(sp.eye(3, format='csr'), ss.ELL)
    >>> E.format.name, E.shape, E.nnz
    ('ELL', (3, 3), 3)
    >>> (E.to_scipy() != sp.eye(3)).nnz
    0

    A tensor (``ss.SparseTensor`` names the same class):

    >>> import numpy as np
    >>> X = np.zeros((2, 2, 2)); X[0, 0, 0] = X[0, 1, 1] = X[1, 1, 0] = 1.0
    >>> T = ss.convert(X, ss.CSF)
    >>> T.format.name, T.shape, T.nnz, T.arrays['crd0'].tolist(), T.arrays['pos1'].tolist()
    ('CSF3', (2, 2, 2), 3, [0, 1], [0, 2, 3])
    """

    def __init__(self, fmt, arrays: Dict[str, np.ndarray], shape: Tuple[int, ...]):
        self.format: SparseFormat = get_format(fmt) if isinstance(fmt, str) else fmt
        if not isinstance(arrays, dict):
            raise errors.ArgumentError(f'SparseMatrix({self.format.name}): arrays must be a dict of member name -> '
                                       f'1-D array, got {type(arrays).__name__}')
        self.arrays = {}
        for name, a in arrays.items():
            if isinstance(a, (str, bytes)) or a is None:
                raise errors.ArgumentError(f'SparseMatrix({self.format.name}): member {name} is '
                                           f'{type(a).__name__}, not an array')
            a = np.asarray(a)  # lists and tuples become arrays (NumPy's dtype for them)
            if a.ndim != 1:
                raise errors.ShapeError(f'SparseMatrix({self.format.name}): member {name} has shape {a.shape}; '
                                        'members are 1-D arrays')
            self.arrays[name] = a
        rank = self.format.rank
        try:
            if len(shape) != rank:
                raise TypeError
            self.shape = (int(shape[0]), int(shape[1])) if rank == 2 else tuple(int(s) for s in shape)
        except (TypeError, ValueError):
            if rank == 2:
                raise errors.ShapeError(f'SparseMatrix({self.format.name}): shape must be (rows, cols), '
                                        f'got {shape!r}') from None
            raise errors.ShapeError(f'SparseMatrix({self.format.name}): shape must be {rank} sizes (a rank-{rank} '
                                    f'tensor), got {shape!r}') from None
        if min(self.shape) < 0:
            raise errors.ShapeError(f'SparseMatrix({self.format.name}): shape {self.shape} is negative')
        missing = set(self.format.member_names) - set(self.arrays)
        if missing:
            raise errors.ShapeError(f'SparseMatrix({self.format.name}): missing member arrays {sorted(missing)}')
        unknown = set(self.arrays) - set(self.format.member_names)
        if unknown:
            raise errors.ShapeError(f'SparseMatrix({self.format.name}): unknown member arrays {sorted(unknown)} '
                                    f'(the format has {", ".join(self.format.member_names)})')

    @property
    def dtype(self):
        return self.arrays['vals'].dtype

    @property
    def index_dtype(self):
        for name, arr in self.arrays.items():
            if name != 'vals':
                return arr.dtype
        return np.dtype(np.int32)

    @property
    def ndim(self) -> int:
        """The number of dimensions (2: a matrix)."""
        return len(self.shape)

    @property
    def nnz(self) -> int:
        """Number of stored entries that lie inside the matrix (padding excluded)."""
        return int(self.to_coo_arrays()[0].size)

    def to_coo_arrays(self):
        """(rows, cols, vals) of every stored entry inside the matrix, in storage order; of
        a tensor of another rank, ``(*coords, vals)``: one coordinate array per dimension."""
        return storage_to_coo(self.format, self.arrays, self.shape)

    def to_scipy(self, format: str = None):
        """The matrix as a scipy sparse array (``format``: scipy format name, default the
        twin format or CSR). Duplicates are kept where the scipy format allows them. A
        tensor of another rank: scipy's N-D ``coo_array`` (the only scipy format of most
        ranks; ``format`` another that scipy has for that rank)."""
        if len(self.shape) != 2:
            *coords, v = self.to_coo_arrays()
            coo = sp.coo_array((v, tuple(coords)), shape=self.shape)
            if format in (None, 'coo'):
                return coo
            try:
                return coo.asformat(format)
            except (ValueError, NotImplementedError) as exc:
                raise errors.UnsupportedOperationError(f'SparseMatrix({self.format.name}).to_scipy: scipy has no '
                                                       f'{format!r} array of {len(self.shape)} dimensions ({exc}); '
                                                       'use format=\'coo\'') from None
        r, c, v = self.to_coo_arrays()
        coo = sp.coo_array((v, (r, c)), shape=self.shape)
        return coo.asformat(format or self.format.scipy_format or 'csr')

    def toarray(self) -> np.ndarray:
        """The dense array (duplicates summed)."""
        if len(self.shape) != 2:
            *coords, v = self.to_coo_arrays()
            out = np.zeros(self.shape, dtype=v.dtype)
            np.add.at(out, tuple(coords), v)
            return out
        return self.to_scipy('coo').toarray()

    def __repr__(self):
        kind = 'SparseMatrix' if len(self.shape) == 2 else 'SparseTensor'
        return f'<{kind} {self.format.name} {"x".join(map(str, self.shape))}, {self.dtype}, ' \
               f'{self.arrays["vals"].size} stored values>'


#: The same class, by the name that reads better for a tensor of rank other than 2.
SparseTensor = SparseMatrix
