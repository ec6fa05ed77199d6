"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.mul_dense.SparseMulDense`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse.ops.mul_dense import SparseMulDense, portable_kernel
from sdfgsparse.targets.cpu.builder import CpuKernel
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandSparseMulDenseCPU']


@dace.library.expansion
class ExpandSparseMulDenseCPU(ExpandTransformation):
    """Each stored entry reads ``D[i, j]``; value slots are distinct, so the outer level runs
    in parallel (:func:`~sdfgsparse.ops.mul_dense.portable_kernel` in a cpu kernel)."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'SparseMulDense', state, sdfg):
        k = CpuKernel(node, state, sdfg)
        portable_kernel(k, node, state)
        return k.build()


register(SparseMulDense, 'cpu', ExpandSparseMulDenseCPU, default=True)
