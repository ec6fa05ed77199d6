"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.einsum_sparse.SparsePrefixEinsum`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse.ops.einsum_sparse import SparsePrefixEinsum, prefix_kernel
from sdfgsparse.targets.cpu.builder import CpuKernel
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU
from sdfgsparse.targets.registry import register

__all__ = ['ExpandSparsePrefixEinsumCPU']


@dace.library.expansion
class ExpandSparsePrefixEinsumCPU(ExpandTransformation):
    """The walk of :func:`~sdfgsparse.ops.einsum_sparse.prefix_kernel` in a cpu kernel (each
    entry adds into the value slot of its outer fiber: distinct slices of a CSF tensor, or
    distinct entries of a COO one, write distinct slots)."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: SparsePrefixEinsum, state, sdfg):
        k = CpuKernel(node, state, sdfg)
        prefix_kernel(k, node, state)
        return k.build()


register(SparsePrefixEinsum, 'cpu', ExpandSparsePrefixEinsumCPU, default=True)
