"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.einsum.SparseEinsum`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse.ops.einsum import SparseEinsum, portable_kernel
from sdfgsparse.targets.cpu.builder import CpuKernel
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU
from sdfgsparse.targets.registry import register

__all__ = ['ExpandSparseEinsumCPU']


@dace.library.expansion
class ExpandSparseEinsumCPU(ExpandTransformation):
    """The walk of :func:`~sdfgsparse.ops.einsum.portable_kernel` in a cpu kernel: the outer
    level of the sparse operand in parallel where its coordinates own slices of the result,
    else sequential (no atomic additions)."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: SparseEinsum, state, sdfg):
        k = CpuKernel(node, state, sdfg)
        portable_kernel(k, node, state, atomics=False)
        return k.build()


register(SparseEinsum, 'cpu', ExpandSparseEinsumCPU, default=True)
