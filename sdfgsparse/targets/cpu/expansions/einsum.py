"""The ``cpu`` implementations of :class:`~sdfgsparse.ops.einsum.SparseEinsum` and
:class:`~sdfgsparse.ops.einsum.SparsePrefixEinsum`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse.ops.einsum import SparseEinsum, SparsePrefixEinsum, portable_kernel, prefix_kernel
from sdfgsparse.targets.cpu.builder import CpuKernel
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU
from sdfgsparse.targets.registry import register

__all__ = ['ExpandSparseEinsumCPU', 'ExpandSparsePrefixEinsumCPU']


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


@dace.library.expansion
class ExpandSparsePrefixEinsumCPU(ExpandTransformation):
    """The walk of :func:`~sdfgsparse.ops.einsum.prefix_kernel` in a cpu kernel."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: SparsePrefixEinsum, state, sdfg):
        k = CpuKernel(node, state, sdfg)
        prefix_kernel(k, node, state)
        return k.build()


register(SparsePrefixEinsum, 'cpu', ExpandSparsePrefixEinsumCPU, default=True)
