"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.materialise.SparseMaterialise`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse.ops.materialise import SparseMaterialise, portable_kernel
from sdfgsparse.targets.cpu.builder import CpuKernel
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU
from sdfgsparse.targets.registry import register

__all__ = ['ExpandSparseMaterialiseCPU']


@dace.library.expansion
class ExpandSparseMaterialiseCPU(ExpandTransformation):
    """The passes of :func:`~sdfgsparse.ops.materialise.portable_kernel` in a cpu kernel (its
    prefix sum the kernel's sequential one)."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: SparseMaterialise, state, sdfg):
        k = CpuKernel(node, state, sdfg)
        portable_kernel(k, node, state)
        return k.build()


register(SparseMaterialise, 'cpu', ExpandSparseMaterialiseCPU, default=True)
