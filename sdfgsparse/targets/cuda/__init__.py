"""The GPU (CUDA) target.

- :mod:`.toolchain` — nvcc and CUDA devices on this machine;
- :mod:`.compat` — what makes DaCe 1.0.2's CUDA build work with CUDA 13;
- :mod:`.lower` — a sparse SDFG turned into a GPU SDFG (:func:`to_gpu`);
- :mod:`.spmv`, :mod:`.spmm`, :mod:`.sddmm` — SpMV's merge-path kernel, SpMM's thread per
  element and SDDMM's warp per row (leaves of ``include/sdfgsparse_cuda_*.cuh``,
  :mod:`.environment`; :mod:`.leaves`: which products they take);
- :mod:`.device` — arguments of GPU programs: device arrays, host-argument checks.

:func:`install` (run on ``import sdfgsparse``) installs the CUDA 13 build fixes
(:func:`.compat.install`) and the sparse-aware ``GPUTransformSDFG`` (:func:`.lower.install`);
:mod:`.device` and :mod:`.toolchain` load on first use.
"""
from sdfgsparse.targets.cuda import compat, lower
from sdfgsparse.targets.cuda.lower import to_gpu

__all__ = ['to_gpu', 'to_device', 'DeviceArray', 'device_count', 'nvcc_path', 'install']


def install() -> None:
    """The CUDA 13 build fixes and the sparse-aware GPU transformation; once each."""
    compat.install()
    lower.install()


def __getattr__(name):
    if name in ('to_device', 'DeviceArray'):
        from sdfgsparse.targets.cuda import device
        return getattr(device, name)
    if name in ('device_count', 'nvcc_path'):
        from sdfgsparse.targets.cuda import toolchain
        return getattr(toolchain, name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
