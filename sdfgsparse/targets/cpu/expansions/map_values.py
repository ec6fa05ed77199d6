"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.map_values.MapValues`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse.ops.map_values import MapValues, portable_kernel
from sdfgsparse.targets.cpu.builder import CpuKernel
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandMapValuesCPU']


@dace.library.expansion
class ExpandMapValuesCPU(ExpandTransformation):
    """The portable kernel (:func:`~sdfgsparse.ops.map_values.portable_kernel`: parallel maps
    copying the index arrays and applying the function to every value slot, a Python
    tasklet ``out[q] = f(A[q])`` that DaCe vectorises) in a cpu kernel: the storage
    checks of the warm call go with it."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'MapValues', state, sdfg):
        k = CpuKernel(node, state, sdfg)
        portable_kernel(k, node, state)
        return k.build()


register(MapValues, 'cpu', ExpandMapValuesCPU, default=True)
