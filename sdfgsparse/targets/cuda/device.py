"""Arguments of GPU programs.

A GPU program (``ss.compile(..., target='gpu')``, ``ss.optimize(..., target='gpu')``)
reads and writes its array arguments in device memory (:mod:`.lower`): the caller passes
device arrays — torch CUDA tensors, CuPy arrays, anything with
``__cuda_array_interface__``, or a :class:`DeviceArray` made by :func:`to_device` — and
the program copies nothing between host and device. A host array (NumPy, a CPU torch
tensor, a scipy matrix) there is an error naming the argument
(:func:`check_device_arguments`), never a silent copy per call.

Sparse arguments and results in device memory: :mod:`sdfgsparse.runtime.device`.

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

__all__ = ['DeviceArray', 'to_device', 'is_device_array', 'host_kind', 'check_device_arguments', 'device_argument']

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


def to_device(array) -> DeviceArray:
    """A :class:`DeviceArray` copy of a NumPy array (or anything ``np.asarray`` takes).
    Sparse matrices: ``ss.to_device`` (:func:`sdfgsparse.runtime.device.to_device`)."""
    if hasattr(array, 'tocoo') or type(array).__name__ == 'SparseMatrix' or \
            str(getattr(array, 'layout', 'torch.strided')) != 'torch.strided':
        raise errors.UnsupportedOperationError(f'to_device: {type(array).__name__} is sparse; use ss.to_device, '
                                               'which copies and checks sparse matrices')
    return DeviceArray.from_host(np.asarray(array))


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
            fix = f'pass ss.to_device({name}) (copied and checked once) or a torch CUDA sparse tensor'
        else:
            fix = (f'pass a device array: a torch CUDA tensor ({name}.cuda()), a CuPy array, '
                   f'or ss.to_device({name})')
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
