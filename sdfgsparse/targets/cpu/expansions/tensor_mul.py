"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.tensor_mul.SparseTensorMul`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse.ops.tensor_mul import SparseTensorMul, portable_kernel
from sdfgsparse.targets.cpu.builder import CpuKernel
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU
from sdfgsparse.targets.registry import register

__all__ = ['ExpandSparseTensorMulCPU']


@dace.library.expansion
class ExpandSparseTensorMulCPU(ExpandTransformation):
    """The passes of :func:`~sdfgsparse.ops.tensor_mul.portable_kernel` in a cpu kernel."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: SparseTensorMul, state, sdfg):
        k = CpuKernel(node, state, sdfg)
        portable_kernel(k, node, state)
        return k.build()


register(SparseTensorMul, 'cpu', ExpandSparseTensorMulCPU, default=True)
