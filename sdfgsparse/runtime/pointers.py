"""The address of a NumPy array's data, fast.

``array.ctypes.data`` and ``array.__array_interface__`` build Python objects on every
call, and the warm call path needs several addresses per call. ``PyArrayObject``
starts with the object header followed by ``char *data`` — part of NumPy's ABI, since the
``PyArray_DATA`` macro compiles to this read — so the address is read from there (several
times faster; docs/performance.md), after checking on import that both ways agree.
"""
import ctypes

import numpy as np

__all__ = ['data_pointer']

_read = ctypes.c_void_p.from_address
_OFFSET = object.__basicsize__


def _by_interface(a: np.ndarray) -> int:
    return a.__array_interface__['data'][0]


def _by_header(a: np.ndarray) -> int:
    return _read(id(a) + _OFFSET).value or 0


def _pick():
    probes = [np.arange(5, dtype=t)[1:] for t in (np.float64, np.int32, np.int8)] + [np.ones((3, 4))]
    try:
        if all(_by_header(a) == _by_interface(a) for a in probes):
            return _by_header
    except Exception:  # pragma: no cover - another NumPy layout
        pass
    return _by_interface  # pragma: no cover


#: ``data_pointer(array) -> int``: the address of the array's first element (exact
#: ``np.ndarray`` instances; the call path checks the type first).
data_pointer = _pick()
