"""Sparse matrices in GPU memory: arguments and results of GPU programs.

Sparse arguments in device memory are a :class:`DeviceSparseMatrix` (``ss.to_device`` of a
scipy matrix, a torch sparse tensor or a ``SparseMatrix``: checked once, on the host, as
it is copied) or a torch CUDA sparse tensor (CSR, CSC, COO, BSR: checked on every call
through a host copy of its arrays, which costs a transfer per call; ``ss.to_device`` is
the way to pass one matrix to many calls). The argument checks run on a host copy that
carries the device members (:func:`device_sparse_value`), and the argument struct points at
those (:meth:`sdfgsparse.runtime.marshal.SparseArg.make_struct`). Sparse results of a GPU
program come back as :class:`DeviceSparseMatrix` (``.get()``: the scipy matrix), or as
torch CUDA sparse tensors where a torch tensor was passed. Dense device arrays:
:mod:`sdfgsparse.targets.cuda.device`.
"""
from typing import Dict

import numpy as np

from sdfgsparse import errors
from sdfgsparse.runtime.container import SparseMatrix
from sdfgsparse.runtime.convert import has_scipy_twin, to_scipy_twin
from sdfgsparse.runtime.marshal import TORCH_COMPRESSED, _torch_layout, is_sparse_value, marshal_sparse
from sdfgsparse.targets.cuda.device import DeviceArray
from sdfgsparse.targets.cuda.device import to_device as dense_to_device

__all__ = ['DeviceSparseMatrix', 'to_device', 'device_sparse_value', 'device_return']


class DeviceSparseMatrix:
    """A sparse matrix whose storage arrays (the format's members: ``pos1``, ``crd1``,
    ``vals``, ...) are :class:`DeviceArray` s. Made by :func:`to_device` from a host
    matrix (checked once, as it is copied) or returned by a GPU program; pass it to GPU
    programs, :meth:`get` copies it back.

    >>> dA = to_device(scipy.sparse.random(5, 4, density=0.5, format='csr'))  # doctest: +SKIP
    >>> prog(dA, to_device(x), dy)                                                # doctest: +SKIP
    >>> dA.get()                                                                  # doctest: +SKIP
    <Compressed Sparse Row sparse array of dtype 'float64' ...>
    """

    def __init__(self, fmt, arrays: Dict[str, DeviceArray], shape, host=None, count=None):
        self.format = fmt
        self.arrays = arrays
        self.shape = tuple(int(s) for s in shape)  # (rows, cols); of a tensor, a size per dimension
        self._host = host  # the checked host SparseMatrix it was copied from (None for results)
        self._count = count  # stored entries of a capacity-sized result (None: all of them)

    dtype = property(lambda self: self.arrays['vals'].dtype)
    index_dtype = property(lambda self: next((a.dtype for m, a in self.arrays.items() if m != 'vals'),
                                             np.dtype(np.int32)))

    def _trimmed(self, host: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        if self._count is None:
            return host
        R, C = self.format.block
        return {**host, 'crd1': host['crd1'][:self._count], 'vals': host['vals'][:self._count * R * C]}

    def get(self):
        """The matrix in host memory: a scipy sparse array for formats with a scipy twin,
        else a :class:`~sdfgsparse.runtime.container.SparseMatrix`."""
        m = SparseMatrix(self.format, self._trimmed({k: a.get() for k, a in self.arrays.items()}), self.shape)
        return to_scipy_twin(m) if has_scipy_twin(self.format) else m

    def to_torch(self):
        """The matrix as a torch CUDA sparse tensor (CSR, CSC, COO, BSR), copied on the device."""
        import torch
        t = {k: torch.as_tensor(a, device='cuda').clone() for k, a in self.arrays.items()}
        if self._count is not None:
            t['crd1'], t['vals'] = t['crd1'][:self._count], t['vals'][:self._count * int(np.prod(self.format.block))]
        name, shape = self.format.name, self.shape
        if name in ('CSR', 'CSC'):
            make = torch.sparse_csr_tensor if name == 'CSR' else torch.sparse_csc_tensor
            return make(t['pos1'], t['crd1'], t['vals'], size=shape)
        if name == 'COO':
            return torch.sparse_coo_tensor(torch.stack([t['crd0'], t['crd1']]).long(), t['vals'], size=shape,
                                           check_invariants=False)
        if name.startswith('BSR'):
            return torch.sparse_bsr_tensor(t['pos1'], t['crd1'], t['vals'].reshape(-1, *self.format.block),
                                           size=shape, check_invariants=False)
        raise errors.UnsupportedOperationError(f'DeviceSparseMatrix.to_torch: torch has no {name} layout; '
                                               'use .get()')

    def __repr__(self):
        return f'DeviceSparseMatrix({self.format.name}, {self.dtype}, shape={self.shape})'


def _host_sparse(name: str, value, index_dtype=None):
    """The checked host ``SparseMatrix`` of a sparse value (a copy: the caller's arrays are
    never the ones handed on), in its own format, with ``index_dtype`` indices."""
    arg = marshal_sparse(name, value, None)
    arrays = {k: np.array(a, copy=True) for k, a in arg.arrays.items()}
    if index_dtype is not None:
        it = np.dtype(index_dtype)
        if it not in (np.dtype(np.int32), np.dtype(np.int64)):
            raise errors.DTypeError(f'{name}: index_dtype must be int32 or int64, got {it}')
        for k, a in arrays.items():
            if k != 'vals' and a.dtype != it:
                if a.size and int(a.max()) > np.iinfo(it).max:
                    raise errors.IndexOverflowError(f'{name}: {k} holds {int(a.max())}, which does not fit {it}')
                arrays[k] = a.astype(it)
    return SparseMatrix(arg.type.fmt, arrays, arg.shape)


def to_device(array, index_dtype=None):
    """A device copy: a :class:`DeviceArray` of a NumPy array (or anything ``np.asarray``
    takes), or a :class:`DeviceSparseMatrix` of a sparse matrix (scipy, a CPU torch
    sparse tensor, a ``SparseMatrix``), checked as a program argument would be.

    :param index_dtype: for a sparse matrix, the index dtype to store (``np.int64`` for a
                        program annotated with ``dace.int64`` indices); default: its own.
    """
    if is_sparse_value(array):
        if type(array).__module__.split('.')[0] == 'torch' and array.device.type != 'cpu':
            array = array.cpu()
        host = _host_sparse('to_device', array, index_dtype)
        devices = {k: DeviceArray.from_host(a) for k, a in host.arrays.items()}
        host._ss_checked = True  # a private copy: its checks hold for every call
        return DeviceSparseMatrix(host.format, devices, host.shape, host=host)
    if hasattr(array, 'tocoo') and hasattr(array, 'format'):
        raise errors.UnsupportedOperationError(f'to_device: {type(array).__name__} is not supported; convert it to '
                                               'CSR, CSC, COO, BSR or DIA first')
    return dense_to_device(array)


def _torch_pointer(t) -> int:
    return int(t.data_ptr())


def _upload(a: np.ndarray):
    """``(pointer, keep-alive)`` of a device copy of the converted member ``a``."""
    d = DeviceArray.from_host(a)
    return d.pointer, d


def device_sparse_value(name: str, v):
    """What the argument checks take for a sparse value in device memory (None: ``v`` is
    not one): a host ``SparseMatrix`` whose checks stand for ``v``, carrying ``v``'s device
    members (``_ss_device``: member -> (pointer, dtype)) and how to copy a converted member
    to the device (``_ss_upload``), which :meth:`SparseArg.make_struct` puts in the struct."""
    if isinstance(v, DeviceSparseMatrix):
        if v._host is None:  # a program's result: checked by copying it back once
            v._host = _host_sparse(name, v.get())
            v._host._ss_checked = True
        host = v._host
        host._ss_device = {k: (a.pointer, a.dtype) for k, a in v.arrays.items()}
        host._ss_keep = v
        host._ss_upload = _upload
        return host
    if type(v).__module__.split('.')[0] != 'torch' or getattr(getattr(v, 'device', None), 'type', 'cpu') == 'cpu':
        return None
    if not is_sparse_value(v):
        return None
    lay = _torch_layout(v)
    if lay == 'sparse_coo':  # (the host copy and the device members must hold the same entries)
        v = v.coalesce()
    host = _host_sparse(name, v.cpu())  # checked on every call: torch's arrays may change between calls
    if lay in TORCH_COMPRESSED:
        pos, crd = TORCH_COMPRESSED[lay]
        members = {'pos1': getattr(v, pos)(), 'crd1': getattr(v, crd)(), 'vals': v.values()}
    elif lay == 'sparse_bsr':
        members = {'pos1': v.crow_indices(), 'crd1': v.col_indices(), 'vals': v.values().reshape(-1)}
    else:  # COO of any rank: a coordinate array per dimension
        idx = v.indices()
        members = {**{f'crd{k}': idx[k].contiguous() for k in range(idx.shape[0])}, 'vals': v.values()}
    members = {k: t.contiguous() for k, t in members.items()}
    host._ss_device = {k: (_torch_pointer(t), np.dtype(str(t.dtype).replace('torch.', ''))) for k, t in members.items()}
    host._ss_keep = members
    host._ss_torch = True  # (results come back as torch tensors)

    def upload(a):
        import torch
        t = torch.as_tensor(a).to('cuda')
        return _torch_pointer(t), t

    host._ss_upload = upload
    return host


def device_return(arrays_spec, fields, dims_values, cls, shape):
    """The argument struct of a sparse result in device memory: ``arrays_spec`` lists
    (member, size, dtype) to allocate (zeroed), ``fields`` the struct's field order."""
    arrays = {name: DeviceArray.zeros(max(size, 0), dt) for name, size, dt in arrays_spec}
    obj = cls(*[arrays[f].pointer if f in arrays else dims_values.get(f, 0) for f in fields])
    obj._ss_keepalive = arrays
    obj._ss_shape = shape
    return obj
