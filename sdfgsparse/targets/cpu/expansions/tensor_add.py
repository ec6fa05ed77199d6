"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.tensor_add.SparseTensorAdd`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse.ops.tensor_add import SparseTensorAdd, portable_kernel
from sdfgsparse.targets.cpu.builder import CpuKernel
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU
from sdfgsparse.targets.registry import register

__all__ = ['ExpandSparseTensorAddCPU']


@dace.library.expansion
class ExpandSparseTensorAddCPU(ExpandTransformation):
    """The passes of :func:`~sdfgsparse.ops.tensor_add.portable_kernel` in a cpu kernel (its
    prefix sums the kernel's sequential ones)."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: SparseTensorAdd, state, sdfg):
        k = CpuKernel(node, state, sdfg)
        portable_kernel(k, node, state)
        return k.build()


register(SparseTensorAdd, 'cpu', ExpandSparseTensorAddCPU, default=True)
