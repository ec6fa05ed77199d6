"""The GPU (CUDA) target.

- :mod:`.toolchain` — nvcc and CUDA devices on this machine;
- :mod:`.compat` — what makes DaCe 1.0.2's CUDA build work with CUDA 13 (applied by
  ``_dace_compat`` patch 14);
- :mod:`.lower` — a sparse SDFG turned into a GPU SDFG (:func:`to_gpu`);
- :mod:`.device` — arguments of GPU programs: device arrays, host-argument checks.

Nothing here is imported with ``sdfgsparse`` except :mod:`.compat` (light): the other
modules load on first use.
"""
__all__ = ['to_gpu', 'to_device', 'DeviceArray', 'device_count', 'nvcc_path']


def __getattr__(name):
    if name == 'to_gpu':
        from sdfgsparse.targets.cuda.lower import to_gpu
        return to_gpu
    if name in ('to_device', 'DeviceArray'):
        from sdfgsparse.targets.cuda import device
        return getattr(device, name)
    if name in ('device_count', 'nvcc_path'):
        from sdfgsparse.targets.cuda import toolchain
        return getattr(toolchain, name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
