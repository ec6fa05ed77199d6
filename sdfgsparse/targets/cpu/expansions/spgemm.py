"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.spgemm.SpGEMM`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse import errors
from sdfgsparse.lowering.graph_compress import Rows, row_major
from sdfgsparse.targets.cpu.builder import CpuKernel
from sdfgsparse.targets.cpu.gustavson import gustavson
from sdfgsparse.ops.base import member_conn
from sdfgsparse.ops.spgemm import SpGEMM, product_kernel
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandSpGEMMCPU']


@dace.library.expansion
class ExpandSpGEMMCPU(ExpandTransformation):
    """Row-parallel Gustavson (:mod:`~sdfgsparse.targets.cpu.gustavson`) when A and B walk
    as CSR and the result is CSR; else the portable expand–sort–compress product
    (:func:`~sdfgsparse.ops.spgemm.product_kernel`: parallel expansion, counting sorts,
    row-parallel summing)."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'SpGEMM', state, sdfg):
        sta = node.operand_type(state, 'A')
        stb = node.operand_type(state, 'B')
        k = CpuKernel(node, state, sdfg)
        b = row_major(k.operand('B', stb))
        if b is None:
            raise errors.UnsupportedOperationError(f'{node.label}: B must iterate as CSR (got {stb.fmt.name}); '
                                                   'the frontend converts it')
        a = row_major(k.operand('A', sta))
        if a is not None and node.sparse_type(state, 'out').fmt.name == 'CSR':
            out = Rows(*(member_conn('out', m) for m in ('pos1', 'crd1', 'vals')), sta.rows)
            gustavson(k, stb.cols, a, b, out, k.sdfg.arrays[out.vals].dtype, k.sdfg.arrays[out.crd].dtype)
        else:
            product_kernel(k, node, state)
        return k.build()


register(SpGEMM, 'cpu', ExpandSpGEMMCPU, default=True)
