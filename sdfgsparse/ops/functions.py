"""Element-wise functions of stored values, usable inside ``@dace.program`` (``ss.relu(A)``)
and on host values (scipy / ``SparseMatrix``) alike.

Inside a program DaCe's frontend replaces each function by its library node (by this
module's qualified names: ``frontends/numpy.py``). On host values they check a sparse
argument as a program call does: with the runtime's argument check, which the runtime
registers here when it is imported (:func:`register_host_check`; ``ops/`` does not import
``runtime/``).
"""
from typing import Callable, Optional

import numpy as np
import scipy.sparse as sp

from sdfgsparse import errors
from sdfgsparse.ops.softmax import normalise_axis

__all__ = ['relu', 'exp', 'sqrt', 'abs', 'sin', 'tanh', 'square', 'sigmoid', 'spones', 'sddmm', 'softmax']

_NUMPY = {
    'relu': lambda v: np.maximum(v, 0),
    'exp': np.exp,
    'sqrt': np.sqrt,
    'abs': np.abs,
    'sin': np.sin,
    'tanh': np.tanh,
    'square': np.square,
    'sigmoid': lambda v: 1 / (1 + np.exp(-v)),
    'spones': np.ones_like,
}


#: ``check(argname, value)``: the checks of a sparse program argument (typed errors)
_HOST_CHECK: Optional[Callable] = None


def register_host_check(check: Callable) -> None:
    """Set the check of sparse host values (``sdfgsparse.runtime.marshal.check_value``)."""
    global _HOST_CHECK
    _HOST_CHECK = check


def _check(argname, A):
    """The argument checks of a program argument, for a host value (typed errors)."""
    if _HOST_CHECK is None:  # (only where sdfgsparse.runtime was never imported)
        raise RuntimeError('sdfgsparse: the host functions need sdfgsparse.runtime; import sdfgsparse first')
    _HOST_CHECK(argname, A)


def _dense(argname, X):
    if isinstance(X, (str, bytes)) or X is None:
        raise errors.ArgumentError(f'{argname}: expected an array, got {type(X).__name__}')
    X = np.asarray(X)
    if X.dtype.kind not in 'biuf':
        raise errors.DTypeError(f'{argname}: dtype {X.dtype} is not a number type')
    return X


def _host(name):

    def f(A):
        if sp.issparse(A):
            _check('A', A)
            B = A.copy()
            if B.format == 'dia':
                B = B.tocsr()
            B.data = _NUMPY[name](B.data)
            return B
        A = _dense('A', A)  # (a string or None is an error naming A, not NumPy's)
        if name == 'spones':
            return (A != 0).astype(A.dtype)
        return _NUMPY[name](A)

    f.__name__ = name
    f.__qualname__ = name
    f.__doc__ = (f'``{name}`` of the stored values of a sparse matrix (pattern kept). Inside a '
                 f'``@dace.program`` it becomes a ``MapValues`` library node.')
    return f


relu = _host('relu')
exp = _host('exp')
sqrt = _host('sqrt')
abs = _host('abs')
sin = _host('sin')
tanh = _host('tanh')
square = _host('square')
sigmoid = _host('sigmoid')
spones = _host('spones')
spones.__doc__ = ('1 at every stored entry of a sparse matrix (its pattern as a matrix, explicit zeros '
                  'included); of a dense array, 1 where it is nonzero (MATLAB\'s ``spones``). Inside a '
                  '``@dace.program`` it becomes a ``MapValues`` library node.')


def sddmm(S, X, Y):
    """Sampled dense-dense product ``S ∘ (X @ Y)`` on S's pattern, without forming X @ Y.

    On host values S is a scipy sparse matrix (result: CSR with S's pattern); inside a
    ``@dace.program`` it becomes an ``SDDMM`` library node that keeps S's format.
    """
    _check('S', S)
    S = sp.csr_array(S)
    X, Y = _dense('X', X), _dense('Y', Y)
    if X.ndim != 2 or Y.ndim != 2:
        raise errors.ShapeError(f'ss.sddmm(S, X, Y): X and Y must be 2-D, got shapes {X.shape} and {Y.shape}')
    if X.shape[1] != Y.shape[0] or (X.shape[0], Y.shape[1]) != S.shape:
        raise errors.ShapeError(f'ss.sddmm(S, X, Y): S {S.shape}, X {X.shape} and Y {Y.shape} do not fit: '
                                'X @ Y must have the shape of S')
    rows = np.repeat(np.arange(S.shape[0]), np.diff(S.indptr))
    dots = np.einsum('ij,ji->i', X[rows], Y[:, S.indices]) if S.nnz else np.zeros(0, X.dtype)
    return sp.csr_array((S.data * dots, S.indices.copy(), S.indptr.copy()), shape=S.shape)


def softmax(S, axis=1):
    """Softmax over the stored entries of each row (``axis=1``) or column (``axis=0``) of a
    sparse matrix; numerically stable (the row maximum is subtracted).

    Every stored entry takes part: explicit zeros, each duplicate of a COO matrix and the
    zero fill of BSR blocks; a row without stored entries stays empty. On host values ``S``
    is a scipy sparse matrix and the result has its format and pattern (DIA becomes CSR);
    inside a ``@dace.program`` it becomes a ``SparseSoftmax`` library node that keeps S's
    format.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> P = softmax(sp.csr_array(np.array([[1.0, 0, 1.0], [0, 0, 0]])))
    >>> P.toarray()
    array([[0.5, 0. , 0.5],
           [0. , 0. , 0. ]])
    """
    axis = normalise_axis(axis)
    if not sp.issparse(S):
        raise errors.UnsupportedOperationError(f'ss.softmax(S): S must be a scipy sparse matrix here, got '
                                               f'{type(S).__name__}; use it inside a @dace.program for other inputs')
    _check('S', S)
    B = S.copy() if S.format != 'dia' else sp.csr_array(S)
    C = B if B.format == 'coo' else B.tocoo()  # keeps explicit zeros, duplicates, storage order
    line = np.asarray(C.row if axis == 1 else C.col, dtype=np.int64)
    v = B.data.reshape(-1).astype(np.result_type(B.dtype, np.float32) if B.dtype.kind == 'f' else np.float64)
    n = B.shape[0] if axis == 1 else B.shape[1]
    mx = np.full(n, -np.inf, dtype=v.dtype)
    np.maximum.at(mx, line, v)
    e = np.exp(v - mx[line]) if v.size else v
    sm = np.zeros(n, dtype=v.dtype)
    np.add.at(sm, line, e)
    out = e / sm[line] if v.size else e
    B = B.astype(out.dtype)
    B.data = out.reshape(B.data.shape)
    return B
