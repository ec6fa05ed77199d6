"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.concat.SparseConcat`."""
import dace
import dace.library
import sympy
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse.lowering.graph_compress import Rows
from sdfgsparse.lowering.graph_shape import concat_rows
from sdfgsparse.ops.concat import OUT_CRD, OUT_POS, OUT_VALS, SparseConcat, part_prefix
from sdfgsparse.targets.cpu.builder import CpuKernel
from sdfgsparse.targets.cpu.row_union import operand_rows
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandSparseConcatCPU']


@dace.library.expansion
class ExpandSparseConcatCPU(ExpandTransformation):
    """Each part as sorted rows (its storage where it walks as CSR, a row-major copy of a
    column-major part, else sorted and compressed:
    :func:`~sdfgsparse.targets.cpu.row_union.operand_rows`), then the rows counted, their
    positions summed and each row copied at its offset (:func:`~sdfgsparse.lowering.graph_shape.concat_rows`
    with the ``copy_row`` leaf: two ``memcpy`` per row where the column offset is 0). A CSC
    result is the CSR storage of the transposed concatenation."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'SparseConcat', state, sdfg):
        out = node.sparse_type(state, 'out')
        csc = out.fmt.name == 'CSC'
        axis = 1 - node.axis if csc else node.axis
        k = CpuKernel(node, state, sdfg)
        parts = []
        offset = sympy.Integer(0)
        for p in range(node.parts):
            st = node.operand_type(state, part_prefix(p))
            st = st.T if csc else st
            rows = operand_rows(k, f'cat{p}', k.operand(part_prefix(p), st))
            parts.append((rows, offset, 0) if axis == 0 else (rows, 0, offset))
            offset = offset + (st.rows if axis == 0 else st.cols)
        rows = out.cols if csc else out.rows
        concat_rows(k, 'cat', parts, rows, Rows(OUT_POS, OUT_CRD, OUT_VALS, rows))
        return k.build()


register(SparseConcat, 'cpu', ExpandSparseConcatCPU, default=True)
