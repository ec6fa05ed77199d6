"""Sparse return values: allocation before the call, conversion to scipy / torch after.

A program that returns a sparse value has a non-transient ``__return`` structure. Before
the call its member arrays are allocated from the symbols of the call (for results whose
number of entries depends on the data, the structure's size symbol is a *capacity* and
the real count is read back from the position array); after the call the struct becomes
a scipy sparse array of the op's natural format (or a :class:`SparseMatrix`).
"""
from typing import Dict

import dace
import numpy as np
import scipy.sparse as sp

from sdfgsparse.formats import sparse_type_of
from sdfgsparse.runtime.container import SparseMatrix
from sdfgsparse.runtime.convert import has_scipy_twin, to_scipy_twin
from sdfgsparse.runtime.marshal import struct_class

__all__ = ['allocate_return', 'struct_to_python', 'scipy_to_torch', 'is_sparse_return']


def is_sparse_return(obj) -> bool:
    return hasattr(obj, '_ss_result_type')


def allocate_return(desc: dace.data.Structure, syms: Dict[str, int]):
    """Allocate the member arrays of a sparse return structure; returns its struct."""
    st = sparse_type_of(desc)
    arrays = {}
    for name, size in st.member_shapes().items():
        n = int(dace.symbolic.evaluate(size, syms)) if dace.symbolic.issymbolic(size) else int(size)
        dt = st.dtype if name == 'vals' else st.index_dtype
        arrays[name] = np.zeros(max(n, 0), dtype=dt.as_numpy_dtype())
    shape = tuple(int(dace.symbolic.evaluate(e, syms)) if dace.symbolic.issymbolic(e) else int(e)
                  for e in (st.rows, st.cols))
    fields = {m: a.ctypes.data for m, a in arrays.items()}
    fields.update({k: v for k, v in zip(('rows', 'cols'), shape) if k in desc.members})
    obj = struct_class(desc)(**fields)
    obj._ss_keepalive = arrays
    obj._ss_result_type = st
    obj._ss_shape = shape
    return obj


def struct_to_python(obj):
    """The scipy sparse array (or ``SparseMatrix``) a returned struct stands for."""
    st = obj._ss_result_type
    a = dict(obj._ss_keepalive)
    fmt = st.fmt
    # Trim capacity-sized arrays to the real count recorded in the position array.
    if 'pos1' in a and fmt.name in ('CSR', 'CSC') or fmt.name.startswith('BSR'):
        n = int(a['pos1'][-1]) if a['pos1'].size else 0
        R, C = fmt.block
        a['crd1'] = a['crd1'][:n]
        a['vals'] = a['vals'][:n * R * C]
    m = SparseMatrix(fmt, a, obj._ss_shape)
    return to_scipy_twin(m) if has_scipy_twin(fmt) else m


def scipy_to_torch(A):
    """A scipy sparse array as the torch sparse tensor of the same layout (CSR/CSC/COO/BSR)."""
    import torch
    if A.format == 'csr':
        return torch.sparse_csr_tensor(torch.from_numpy(A.indptr), torch.from_numpy(A.indices),
                                       torch.from_numpy(A.data), size=A.shape)
    if A.format == 'csc':
        return torch.sparse_csc_tensor(torch.from_numpy(A.indptr), torch.from_numpy(A.indices),
                                       torch.from_numpy(A.data), size=A.shape)
    if A.format == 'bsr':
        return torch.sparse_bsr_tensor(torch.from_numpy(A.indptr), torch.from_numpy(A.indices),
                                       torch.from_numpy(A.data), size=A.shape)
    A = A.tocoo()
    idx = torch.from_numpy(np.vstack([A.row, A.col]).astype(np.int64))
    return torch.sparse_coo_tensor(idx, torch.from_numpy(A.data), size=A.shape)
