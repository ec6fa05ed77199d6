"""``ss.convert(A, ss.CSR)`` / ``ss.convert(A, ss.CSC)`` inside a program: any catalogue
format (or transposed view) into canonical CSR or CSC (sorted, duplicates summed).

The frontend also inserts this node itself where an operation needs a row-accessible
or duplicate-free operand (SpGEMM's right operand, the intersection of a COO)."""
import dace
import dace.library
from dace import properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse.targets.cpu.compress import compress_kernel, emit_append
from sdfgsparse.targets.cpu.entries import Entries
from sdfgsparse.ops.base import SparseLibraryNode, member_conn

__all__ = ['Convert', 'TARGETS']

TARGETS = ('CSR', 'CSC')


@dace.library.expansion
class ExpandConvertCPU(ExpandTransformation):
    """Expand the entries of A (any format), sort, compress (see :mod:`..targets/cpu/compress`);
    the result's type (CSR or CSC) decides the compressed dimension."""
    environments = []

    @staticmethod
    def expansion(node: 'Convert', state, sdfg):
        st = node.operand_type(state, 'A')
        ent = Entries(st, {m: member_conn('A', m) for m in st.fmt.member_names})

        def expand(kb, vt):
            ent.emit(kb, emit_append(ent.i, ent.j, ent.val), parallel=False)

        # a CSC result (the type of ``out``) is compressed by columns in compress_kernel
        return compress_kernel(node, state, sdfg, expand, st.rows, st.cols)


@dace.library.node
class Convert(SparseLibraryNode):
    """Members of ``A`` -> members of ``out`` in format ``target`` (CSR or CSC)."""
    implementations = {'cpu': ExpandConvertCPU}
    default_implementation = 'cpu'
    SPARSE_INPUTS = ('A', )
    SPARSE_OUTPUTS = ('out', )

    target = properties.Property(dtype=str, default='CSR', choices=list(TARGETS), desc='Result format')
    transpose_A = properties.Property(dtype=bool, default=False, desc='Use the transposed view of A (no copy)')

    def __init__(self, name='convert', target='CSR', *args, **kwargs):
        super().__init__(name, *args, inputs=set(), outputs=set(), **kwargs)
        self.target = target
