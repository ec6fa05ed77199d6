"""Arguments of GPU programs.

A GPU program (``ss.compile(..., target='gpu')``, ``ss.optimize(..., target='gpu')``)
reads and writes its array arguments in device memory (:mod:`.lower`): the caller passes
device arrays — torch CUDA tensors, CuPy arrays, anything with
``__cuda_array_interface__``, or a :class:`DeviceArray` made by :func:`to_device` — and
the program copies nothing between host and device. A host array (NumPy, a CPU torch
tensor, a scipy matrix) there is an error naming the argument
(:func:`check_device_arguments`), never a silent copy per call.

Sparse arguments in device memory are a :class:`DeviceSparseMatrix` (``to_device`` of a
scipy matrix, a torch sparse tensor or a ``SparseMatrix``: checked once, on the host, as
it is copied) or a torch CUDA sparse tensor (CSR, CSC, COO, BSR: checked on every call
through a host copy of its arrays, which costs a transfer per call; ``to_device`` is the
way to pass one matrix to many calls). Sparse results of a GPU program come back as
:class:`DeviceSparseMatrix` (``.get()``: the scipy matrix), or as torch CUDA sparse
tensors where a torch tensor was passed.

:class:`DeviceArray` needs only the CUDA runtime library (``libcudart``, which every
GPU program links anyway), not CuPy or a CUDA build of torch.
"""
import ctypes
import os
from typing import Any, Dict, Optional

import dace
import numpy as np

from sdfgsparse import errors
from sdfgsparse.targets.cuda import toolchain

__all__ = ['DeviceArray', 'DeviceSparseMatrix', 'to_device', 'device_sparse_value', 'device_return', 'is_device_array', 'host_kind', 'check_device_arguments', 'device_argument']

_HOST_TO_DEVICE, _DEVICE_TO_HOST = 1, 2  # cudaMemcpyKind


def _cudart():
    """The CUDA runtime library (loaded once), or a :class:`~sdfgsparse.errors.DeviceError`."""

    def load():
        names = ['libcudart.so', 'libcudart.so.13', 'libcudart.so.12', 'libcudart.so.11.0']
        nvcc = toolchain.nvcc_path()
        if nvcc:
            lib64 = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))), 'lib64')
            names += [os.path.join(lib64, n) for n in names]
        for name in names:
            try:
                lib = ctypes.CDLL(name)
            except OSError:
                continue
            lib.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
            lib.cudaFree.argtypes = [ctypes.c_void_p]
            lib.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
            lib.cudaMemset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
            lib.cudaGetErrorString.restype = ctypes.c_char_p
            return lib
        return None

    lib = toolchain._cached('cudart', load)
    if lib is None:
        raise errors.DeviceError('the CUDA runtime library (libcudart) was not found; install the CUDA toolkit '
                                 'or add its lib64 folder to LD_LIBRARY_PATH')
    return lib


def _check(lib, code: int, what: str) -> None:
    if code != 0:
        raise errors.DeviceError(f'{what} failed: {lib.cudaGetErrorString(code).decode()} (CUDA error {code})')


class DeviceArray:
    """A C-ordered array in CUDA device memory, freed with the object. Pass it to GPU
    programs; :meth:`get` copies it back to a NumPy array.

    >>> d = to_device(np.arange(4.0))   # doctest: +SKIP
    >>> d.get()                         # doctest: +SKIP
    array([0., 1., 2., 3.])
    """

    def __init__(self, shape, dtype=np.float64):
        toolchain.require_device('DeviceArray')
        self.shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape, )))
        self.dtype = np.dtype(dtype)
        self._lib = _cudart()
        self._ptr = ctypes.c_void_p(0)
        if self.nbytes:
            _check(self._lib, self._lib.cudaMalloc(ctypes.byref(self._ptr), self.nbytes), f'cudaMalloc({self.nbytes})')

    @classmethod
    def zeros(cls, shape, dtype=np.float64) -> 'DeviceArray':
        out = cls(shape, dtype)
        if out.nbytes:
            _check(out._lib, out._lib.cudaMemset(out._ptr, 0, out.nbytes), 'cudaMemset')
        return out

    @classmethod
    def from_host(cls, array) -> 'DeviceArray':
        host = np.ascontiguousarray(array)
        out = cls(host.shape, host.dtype)
        out.set(host)
        return out

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))
    nbytes = property(lambda self: self.size * self.dtype.itemsize)

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        return {'shape': self.shape, 'typestr': self.dtype.str, 'data': (self._ptr.value or 0, False),
                'strides': None, 'version': 3}

    def set(self, host) -> None:
        """Copy the host array ``host`` (same shape and dtype) into this array."""
        host = np.ascontiguousarray(host)
        if host.shape != self.shape or host.dtype != self.dtype:
            raise errors.ShapeError(f'DeviceArray.set: got {host.dtype}{list(host.shape)}, the array is '
                                    f'{self.dtype}{list(self.shape)}')
        if self.nbytes:
            _check(self._lib, self._lib.cudaMemcpy(self._ptr, host.ctypes.data, self.nbytes, _HOST_TO_DEVICE),
                   'cudaMemcpy to the device')

    def get(self) -> np.ndarray:
        """A NumPy copy of this array, after all work queued on the device (DaCe launches
        kernels on its own non-blocking streams, which ``cudaMemcpy`` does not wait for)."""
        out = np.empty(self.shape, self.dtype)
        if self.nbytes:
            _check(self._lib, self._lib.cudaDeviceSynchronize(), 'cudaDeviceSynchronize')
            _check(self._lib, self._lib.cudaMemcpy(out.ctypes.data, self._ptr, self.nbytes, _DEVICE_TO_HOST),
                   'cudaMemcpy to the host')
        return out

    @property
    def pointer(self) -> int:
        return self._ptr.value or 0

    def __del__(self):
        ptr, lib = getattr(self, '_ptr', None), getattr(self, '_lib', None)
        if ptr is not None and ptr.value and lib is not None:
            lib.cudaFree(ptr)
            self._ptr = None  # (not a new ctypes object: at exit the ctypes module may be gone)

    def __repr__(self):
        return f'DeviceArray({self.dtype}{list(self.shape)})'


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
        self.shape = (int(shape[0]), int(shape[1]))
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
        from sdfgsparse.runtime.container import SparseMatrix
        from sdfgsparse.runtime.convert import has_scipy_twin, to_scipy_twin
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
            return torch.sparse_coo_tensor(torch.stack([t['crd0'], t['crd1']]).long(), t['vals'], size=shape)
        if name.startswith('BSR'):
            return torch.sparse_bsr_tensor(t['pos1'], t['crd1'], t['vals'].reshape(-1, *self.format.block),
                                           size=shape)
        raise errors.UnsupportedOperationError(f'DeviceSparseMatrix.to_torch: torch has no {name} layout; '
                                               'use .get()')

    def __repr__(self):
        return f'DeviceSparseMatrix({self.format.name}, {self.dtype}, shape={self.shape})'


def _host_sparse(name: str, value, index_dtype=None):
    """The checked host ``SparseMatrix`` of a sparse value (a copy: the caller's arrays are
    never the ones handed on), in its own format, with ``index_dtype`` indices."""
    from sdfgsparse.runtime.container import SparseMatrix
    from sdfgsparse.runtime.marshal import marshal_sparse
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
    from sdfgsparse.runtime.marshal import is_sparse_value
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
    return DeviceArray.from_host(np.asarray(array))


def _torch_pointer(t) -> int:
    return int(t.data_ptr())


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
        host._ss_upload = lambda a: (lambda d: (d.pointer, d))(DeviceArray.from_host(a))
        return host
    if type(v).__module__.split('.')[0] != 'torch' or getattr(getattr(v, 'device', None), 'type', 'cpu') == 'cpu':
        return None
    from sdfgsparse.runtime.marshal import TORCH_COMPRESSED, _torch_layout, is_sparse_value
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
    else:
        idx = v.indices()
        members = {'crd0': idx[0].contiguous(), 'crd1': idx[1].contiguous(), 'vals': v.values()}
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


def is_device_array(v) -> bool:
    """Whether ``v`` lives in CUDA device memory (``__cuda_array_interface__``, a torch
    CUDA tensor, a CuPy array)."""
    if type(v).__module__.split('.')[0] == 'torch':
        return getattr(getattr(v, 'device', None), 'type', None) == 'cuda'
    try:
        return hasattr(v, '__cuda_array_interface__')
    except Exception:  # torch raises for some tensors
        return False


def host_kind(v) -> Optional[str]:
    """What host-memory array ``v`` is (for messages), or None when it is not one."""
    if isinstance(v, np.ndarray):
        return 'a NumPy array'
    if hasattr(v, 'tocoo') and hasattr(v, 'format'):
        return f'a scipy sparse matrix ({type(v).__name__})'
    if type(v).__module__.split('.')[0] == 'torch' and getattr(getattr(v, 'device', None), 'type', None) == 'cpu':
        return 'a CPU torch tensor'
    if not is_device_array(v) and hasattr(v, '__array_interface__'):
        return f'a host array ({type(v).__name__})'
    return None


def _in_device_memory(desc) -> bool:
    if isinstance(desc, dace.data.Structure):
        return any(getattr(m, 'storage', None) == dace.StorageType.GPU_Global for m in desc.members.values())
    return isinstance(desc, dace.data.Array) and desc.storage == dace.StorageType.GPU_Global


def check_device_arguments(program: str, values: Dict[str, Any], sdfg: dace.SDFG) -> None:
    """Raise :class:`~sdfgsparse.errors.DeviceError` for the first argument in host memory
    where the GPU program ``program`` reads device memory, naming it and the fix."""
    for name, v in values.items():
        desc = sdfg.arrays.get(name)
        kind = host_kind(v) if desc is not None and _in_device_memory(desc) else None
        if kind is None:
            continue
        if isinstance(desc, dace.data.Structure):
            fix = (f'pass sdfgsparse.targets.cuda.to_device({name}) (copied and checked once) or a torch CUDA '
                   'sparse tensor')
        else:
            fix = (f'pass a device array: a torch CUDA tensor ({name}.cuda()), a CuPy array, '
                   f'or sdfgsparse.targets.cuda.to_device({name})')
        raise errors.DeviceError(f'{name}: {kind} is in host memory, but the GPU program {program} reads it in device '
                                 f'memory; {fix}')


def device_argument(name: str, v, desc) -> None:
    """Check a device array ``v`` against the array descriptor ``desc``: its dtype and
    number of dimensions (sizes are checked with the call's symbols)."""
    iface = getattr(v, '__cuda_array_interface__', None) if not hasattr(v, 'data_ptr') else None
    if iface is not None:
        dtype, ndim = np.dtype(iface['typestr']), len(iface['shape'])
        contiguous = iface.get('strides') is None or iface['strides'] == _c_strides(iface['shape'], dtype.itemsize)
    else:  # torch
        dtype, ndim, contiguous = np.dtype(str(v.dtype).replace('torch.', '')), v.dim(), v.is_contiguous()
    want = np.dtype(desc.dtype.as_numpy_dtype())
    if dtype != want:
        raise errors.DTypeError(f'{name}: dtype is {dtype}, the program expects {want}')
    if ndim != len(desc.shape):
        raise errors.ShapeError(f'{name}: has {ndim} dimensions, the program expects {len(desc.shape)} '
                                f'({", ".join(map(str, desc.shape))})')
    if not contiguous:
        raise errors.ArgumentError(f'{name}: a strided device array; the program reads C-ordered arrays: pass a '
                                   'contiguous copy')


def _c_strides(shape, itemsize):
    strides, step = [], itemsize
    for s in reversed(shape):
        strides.append(step)
        step *= s
    return tuple(reversed(strides))
