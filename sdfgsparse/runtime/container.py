"""``SparseMatrix``: a matrix in any catalogue format, as named storage arrays.

scipy and torch objects are used directly where they have a twin format; formats without
one (ELL, DCSR, or a BSR block shape of your choice) travel as ``SparseMatrix``.
"""
from typing import Dict, Tuple

import numpy as np
import scipy.sparse as sp

from sdfgsparse import errors
from sdfgsparse.formats import SparseFormat, get_format
from sdfgsparse.runtime.convert import storage_to_coo

__all__ = ['SparseMatrix']


class SparseMatrix:
    """A sparse matrix stored as the member arrays of a catalogue format.

    :param fmt: the :class:`SparseFormat` (``ss.ELL``) or its name.
    :param arrays: member name -> 1-D NumPy array (``pos1``, ``crd1``, ``vals``, ...).
    :param shape: ``(rows, cols)``.

    Examples
    --------
    >>> import sdfgsparse as ss, scipy.sparse as sp
    >>> E = ss.convert(sp.eye(3, format='csr'), ss.ELL)
    >>> E.format.name, E.shape, E.nnz
    ('ELL', (3, 3), 3)
    >>> (E.to_scipy() != sp.eye(3)).nnz
    0
    """

    def __init__(self, fmt, arrays: Dict[str, np.ndarray], shape: Tuple[int, int]):
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
        try:
            if len(shape) != 2:
                raise TypeError
            self.shape = (int(shape[0]), int(shape[1]))
        except (TypeError, ValueError):
            raise errors.ShapeError(f'SparseMatrix({self.format.name}): shape must be (rows, cols), got {shape!r}')
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
    def nnz(self) -> int:
        """Number of stored entries that lie inside the matrix (padding excluded)."""
        return int(self.to_coo_arrays()[0].size)

    def to_coo_arrays(self):
        """(rows, cols, vals) of every stored entry inside the matrix, in storage order."""
        return storage_to_coo(self.format, self.arrays, self.shape)

    def to_scipy(self, format: str = None):
        """The matrix as a scipy sparse array (``format``: scipy format name, default the
        twin format or CSR). Duplicates are kept where the scipy format allows them."""
        r, c, v = self.to_coo_arrays()
        coo = sp.coo_array((v, (r, c)), shape=self.shape)
        return coo.asformat(format or self.format.scipy_format or 'csr')

    def toarray(self) -> np.ndarray:
        return self.to_scipy('coo').toarray()

    def __repr__(self):
        return f'<SparseMatrix {self.format.name} {self.shape[0]}x{self.shape[1]}, {self.dtype}, ' \
               f'{self.arrays["vals"].size} stored values>'
