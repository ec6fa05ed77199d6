"""Element-wise functions of stored values, usable inside ``@dace.program`` (``ss.relu(A)``)
and on host values (scipy / ``SparseMatrix``) alike."""
import numpy as np
import scipy.sparse as sp

__all__ = ['relu', 'exp', 'sqrt', 'abs', 'sin', 'tanh', 'square', 'sigmoid', 'sddmm']

_NUMPY = {
    'relu': lambda v: np.maximum(v, 0),
    'exp': np.exp,
    'sqrt': np.sqrt,
    'abs': np.abs,
    'sin': np.sin,
    'tanh': np.tanh,
    'square': np.square,
    'sigmoid': lambda v: 1 / (1 + np.exp(-v)),
}


def _host(name):

    def f(A):
        if sp.issparse(A):
            B = A.copy()
            if B.format == 'dia':
                B = B.tocsr()
            B.data = _NUMPY[name](B.data)
            return B
        return _NUMPY[name](np.asarray(A))

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


def sddmm(S, X, Y):
    """Sampled dense-dense product ``S ∘ (X @ Y)`` on S's pattern, without forming X @ Y.

    On host values S is a scipy sparse matrix (result: CSR with S's pattern); inside a
    ``@dace.program`` it becomes an ``SDDMM`` library node that keeps S's format.
    """
    S = sp.csr_array(S)
    X, Y = np.asarray(X), np.asarray(Y)
    rows = np.repeat(np.arange(S.shape[0]), np.diff(S.indptr))
    dots = np.einsum('ij,ji->i', X[rows], Y[:, S.indices]) if S.nnz else np.zeros(0, X.dtype)
    return sp.csr_array((S.data * dots, S.indices.copy(), S.indptr.copy()), shape=S.shape)
