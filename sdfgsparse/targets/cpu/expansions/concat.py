"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.concat.SparseConcat`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse.ops.concat import SparseConcat, portable_kernel
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
    positions summed and each row copied at its offset by the ``copy_row`` leaf (two
    ``memcpy`` per row where the column offset is 0; the portable steps of
    :func:`~sdfgsparse.ops.concat.portable_kernel`, whose row copies the kernel makes:
    :meth:`~sdfgsparse.targets.cpu.builder.CpuKernel.concat_fill`). A CSC result is the CSR
    storage of the transposed concatenation."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'SparseConcat', state, sdfg):
        k = CpuKernel(node, state, sdfg)
        portable_kernel(k, node, state, rows_of=operand_rows)
        return k.build()


register(SparseConcat, 'cpu', ExpandSparseConcatCPU, default=True)
