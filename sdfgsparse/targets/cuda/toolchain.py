"""What this machine has for the GPU target: nvcc (to build) and a CUDA device (to run).

Building needs only nvcc; running needs a device. DaCe 1.0.2's generated library loads
without a GPU (it needs only ``libcudart``), but its initialisation fails there and the
first call then dereferences a NULL state: the process segfaults. So a GPU program asks
:func:`device_count` before its first call (:func:`require_device`).

Answers are computed once per process and kept in :data:`_CACHE` (tests replace it).
"""
import ctypes
import ctypes.util
import os
import re
import shutil
import subprocess
import threading
from typing import Optional, Tuple

from sdfgsparse import errors

__all__ = ['nvcc_path', 'nvcc_version', 'device_count', 'device_arch', 'require_device', 'require_nvcc']

_CACHE = {}
_LOCK = threading.RLock()  # (answers ask each other: nvcc_version asks nvcc_path)


def _cached(key, compute):
    with _LOCK:
        if key not in _CACHE:
            _CACHE[key] = compute()
        return _CACHE[key]


def nvcc_path() -> Optional[str]:
    """The nvcc DaCe's CMake will find: ``compiler.cuda.path``/bin, ``$CUDACXX``, the
    ``PATH``, ``$CUDA_HOME``/bin or ``/usr/local/cuda/bin``; None without one."""

    def find():
        import dace
        root = dace.Config.get('compiler', 'cuda', 'path')
        candidates = [os.path.join(root, 'bin', 'nvcc')] if root else []
        candidates += [os.environ.get('CUDACXX') or '', shutil.which('nvcc') or '']
        candidates += [os.path.join(os.environ[k], 'bin', 'nvcc') for k in ('CUDA_HOME', 'CUDA_PATH')
                       if k in os.environ]
        candidates.append('/usr/local/cuda/bin/nvcc')
        return next((c for c in candidates if c and os.path.isfile(c) and os.access(c, os.X_OK)), None)

    return _cached('nvcc', find)


def nvcc_version() -> Optional[Tuple[int, int]]:
    """``(major, minor)`` of :func:`nvcc_path` (``nvcc --version``), or None."""

    def find():
        nvcc = nvcc_path()
        if nvcc is None:
            return None
        try:
            out = subprocess.run([nvcc, '--version'], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            return None
        m = re.search(r'release (\d+)\.(\d+)', out)
        return (int(m.group(1)), int(m.group(2))) if m else None

    return _cached('nvcc_version', find)


def _driver():
    """The CUDA driver library (``libcuda``), initialised, or None. The driver API, not
    the runtime's: no toolkit is needed to ask, and ``cuInit`` creates no context."""
    for name in ('libcuda.so.1', 'libcuda.so', ctypes.util.find_library('cuda')):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        try:
            if lib.cuInit(ctypes.c_uint(0)) != 0:  # CUDA_ERROR_NO_DEVICE, no driver loaded, ...
                return None
        except AttributeError:
            return None
        return lib
    return None


def device_count() -> int:
    """How many CUDA devices this process can use (0 without a driver or a device;
    ``CUDA_VISIBLE_DEVICES`` is honoured). Asked once per process."""

    def find():
        lib = _driver()
        if lib is None:
            return 0
        n = ctypes.c_int(0)
        return n.value if lib.cuDeviceGetCount(ctypes.byref(n)) == 0 else 0

    return _cached('devices', find)


def device_arch(ordinal: int = 0) -> Optional[str]:
    """Compute capability of a device as DaCe's ``cuda_arch`` writes it (``'90'``), or None."""

    def find():
        if device_count() <= ordinal:
            return None
        lib = _driver()
        dev, major, minor = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
        if lib is None or lib.cuDeviceGet(ctypes.byref(dev), ordinal) != 0:
            return None
        # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75, _MINOR = 76
        if lib.cuDeviceGetAttribute(ctypes.byref(major), 75, dev) or \
                lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev):
            return None
        return f'{major.value}{minor.value}'

    return _cached(('arch', ordinal), find)


def require_device(what: str) -> None:
    """Raise :class:`~sdfgsparse.errors.DeviceError` when no CUDA device is usable
    (``what`` names the program for the message)."""
    if device_count() > 0:
        return
    visible = os.environ.get('CUDA_VISIBLE_DEVICES')
    hint = f' (CUDA_VISIBLE_DEVICES={visible!r})' if visible is not None else ''
    raise errors.DeviceError(f'{what} was built for the GPU, but this machine has no usable CUDA device{hint}; '
                             f"build it for the CPU instead (target='cpu'), or run it where a GPU is")


def require_nvcc(what: str) -> str:
    """The path of nvcc, or :class:`~sdfgsparse.errors.DeviceError` (``what`` names the
    program) where there is none: a GPU program cannot be built here."""
    nvcc = nvcc_path()
    if nvcc is None:
        raise errors.DeviceError(f'{what}: building for the GPU needs nvcc (the CUDA toolkit), which was not found '
                                 '(PATH, $CUDACXX, $CUDA_HOME, compiler.cuda.path); build for the CPU instead '
                                 "(target='cpu')")
    return nvcc
