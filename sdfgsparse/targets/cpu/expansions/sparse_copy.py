"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.sparse_copy.SparseCopy`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse.ops.sparse_copy import SparseCopy, portable_kernel
from sdfgsparse.targets.cpu.builder import CpuKernel
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandSparseCopyCPU']


@dace.library.expansion
class ExpandSparseCopyCPU(ExpandTransformation):
    """Each member array copied whole, one ``memcpy`` each (DaCe's copy of an access node to
    another: :func:`~sdfgsparse.ops.sparse_copy.portable_kernel`), in a cpu kernel."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'SparseCopy', state, sdfg):
        k = CpuKernel(node, state, sdfg)
        portable_kernel(k, node, state)
        return k.build()


register(SparseCopy, 'cpu', ExpandSparseCopyCPU, default=True)
