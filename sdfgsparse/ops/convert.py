"""``ss.convert(A, ss.CSR)`` / ``ss.convert(A, ss.CSC)`` inside a program: any catalogue
format (or transposed view) into canonical CSR or CSC (sorted, duplicates summed).

The frontend also inserts this node itself where an operation needs a row-accessible
or duplicate-free operand (SpGEMM's right operand, the intersection of a COO)."""
import dace
import dace.library
from dace import properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse.lowering.graph import Kernel
from sdfgsparse.lowering.graph_compress import Rows, compress_lists, expand_entries
from sdfgsparse.ops.base import SparseLibraryNode, member_conn
from sdfgsparse.ops.validation import Wiring

__all__ = ['Convert', 'TARGETS']

TARGETS = ('CSR', 'CSC')


#: Connectors of the result's members (CSR or CSC: the same names)
OUT_POS, OUT_CRD, OUT_VALS = (member_conn('out', m) for m in ('pos1', 'crd1', 'vals'))


@dace.library.expansion
class ExpandConvertPure(ExpandTransformation):
    """The portable SDFG (:mod:`sdfgsparse.lowering.graph_compress`): A's entries as lists
    indexed by value slot (a parallel map over its levels' loops), two stable counting sorts
    (by column, then by row), and a row-parallel pass summing equal coordinates into the
    result. A CSC result is the CSR storage of ``A.T``: the same steps on A's transposed
    view. The result's ``crd`` / ``vals`` have A's slot count as capacity; ``pos[rows]`` is
    the real count."""
    environments = []

    @staticmethod
    def expansion(node: 'Convert', state, sdfg):
        st = node.operand_type(state, 'A')
        if node.sparse_type(state, 'out').fmt.name == 'CSC':
            st = st.T  # the CSR storage of A.T is the CSC storage of A
        k = Kernel(node, state, sdfg)
        A = k.operand('A', st)
        vdtype = k.sdfg.arrays[OUT_VALS].dtype
        lists = expand_entries(k, 'cv', A, vdtype)
        compress_lists(k, 'cv', lists, A.nvals, st.rows, st.cols, Rows(OUT_POS, OUT_CRD, OUT_VALS, st.rows))
        return k.build()


@dace.library.node
class Convert(SparseLibraryNode):
    """Members of ``A`` -> members of ``out`` in format ``target`` (CSR or CSC)."""
    implementations = {'pure': ExpandConvertPure}
    default_implementation = 'pure'
    SPARSE_INPUTS = ('A', )
    ACCEPTS_VIEWS = True
    SPARSE_OUTPUTS = ('out', )

    target = properties.Property(dtype=str, default='CSR', choices=list(TARGETS), desc='Result format')
    transpose_A = properties.Property(dtype=bool, default=False, desc='Use the transposed view of A (no copy)')

    def __init__(self, name='convert', target='CSR', *args, **kwargs):
        super().__init__(name, *args, inputs=set(), outputs=set(), **kwargs)
        self.target = target

    def validate(self, sdfg, state):
        """A's members, a CSR or CSC result of A's shape and dtype
        (:mod:`sdfgsparse.ops.validation`)."""
        w = Wiring(self, sdfg, state)
        A, out = w.sparse('A'), w.sparse('out', output=True)
        w.format_in(out, TARGETS)
        w.same(out.rows, A.rows)
        w.same(out.cols, A.cols)
        w.computes(out, A)
        w.finish()
