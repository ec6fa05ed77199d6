"""``np.concatenate((A, B, ...), axis)`` of sparse matrices, materialised: the parts
(any catalogue format, transposed or sliced views) into one canonical CSR or CSC.

The frontend keeps a concatenation as a view while only linear operations read it
(``np.vstack((A, B)) @ x`` runs one SpMV per part into its rows of ``y``); it inserts this
node where the concatenation itself is needed: returned, converted, or read by an
operation that does not split over parts (element-wise, SDDMM, ...)."""
import dace
import dace.library
import sympy
from dace import properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse.lowering.graph import Kernel
from sdfgsparse.lowering.graph_compress import Rows, canonical_rows
from sdfgsparse.lowering.graph_shape import concat_rows
from sdfgsparse.ops.base import SparseLibraryNode, member_conn
from sdfgsparse.ops.validation import Wiring, concat_size

__all__ = ['portable_kernel', 'SparseConcat', 'part_prefix']

OUT_POS, OUT_CRD, OUT_VALS = (member_conn('out', m) for m in ('pos1', 'crd1', 'vals'))


def part_prefix(p: int) -> str:
    """The operand prefix of part ``p``."""
    return f'A{p}'


@dace.library.expansion
class ExpandSparseConcatPure(ExpandTransformation):
    """The portable SDFG: each part as canonical rows (its own storage where it is a CSR,
    or a CSC read transposed; else its entries sorted and compressed,
    :func:`~sdfgsparse.lowering.graph_compress.canonical_rows`), then the rows copied at
    their offsets (:func:`~sdfgsparse.lowering.graph_shape.concat_rows`: two parallel
    passes and a prefix sum). A CSC result is the CSR storage of the transposed
    concatenation: the transposed parts, concatenated along the other axis."""
    environments = []

    @staticmethod
    def expansion(node: 'SparseConcat', state, sdfg):
        k = Kernel(node, state, sdfg)
        portable_kernel(k, node, state)
        return k.build()


def portable_kernel(k: Kernel, node: 'SparseConcat', state, rows_of=canonical_rows) -> None:
    """The steps of the portable expansion built into ``k``: each part as rows by
    ``rows_of(k, label, operand)`` (:func:`~sdfgsparse.lowering.graph_compress.canonical_rows`;
    the ``cpu`` expansion passes its own), then the rows concatenated."""
    out = node.sparse_type(state, 'out')
    csc = out.fmt.name == 'CSC'
    axis = 1 - node.axis if csc else node.axis
    parts = []
    offset = sympy.Integer(0)
    for p in range(node.parts):
        st = node.operand_type(state, part_prefix(p))
        st = st.T if csc else st
        rows = rows_of(k, f'cat{p}', k.operand(part_prefix(p), st))
        parts.append((rows, offset, 0) if axis == 0 else (rows, 0, offset))
        offset = offset + (st.rows if axis == 0 else st.cols)
    rows = out.cols if csc else out.rows
    concat_rows(k, 'cat', parts, rows, Rows(OUT_POS, OUT_CRD, OUT_VALS, rows))


@dace.library.node
class SparseConcat(SparseLibraryNode):
    """Members of parts ``A0``, ``A1``, ... -> members of ``out`` (CSR or CSC), the parts
    concatenated along ``axis`` (0: rows, 1: columns)."""
    implementations = {'pure': ExpandSparseConcatPure}
    default_implementation = 'pure'
    ACCEPTS_VIEWS = True
    SPARSE_OUTPUTS = ('out', )

    axis = properties.Property(dtype=int, default=0, desc='0: stack rows (vstack), 1: stack columns (hstack)')
    parts = properties.Property(dtype=int, default=2, desc='Number of parts (operands A0, A1, ...)')

    def __init__(self, name='sparse_concat', axis=0, parts=2, *args, **kwargs):
        super().__init__(name, *args, inputs=set(), outputs=set(), **kwargs)
        self.axis = axis
        self.parts = parts

    @property
    def SPARSE_INPUTS(self):
        return tuple(part_prefix(p) for p in range(self.parts))

    def validate(self, sdfg, state):
        """The members of each of the ``parts`` operands, a CSR or CSC result whose size along
        ``axis`` is the parts' together and across it each part's, of the dtype of their
        values together (:mod:`sdfgsparse.ops.validation`)."""
        w = Wiring(self, sdfg, state)
        parts = [w.sparse(part_prefix(p)) for p in range(self.parts)]
        out = w.sparse('out', output=True)
        w.format_in(out, ('CSR', 'CSC'))
        rows = self.axis == 0
        w.same(concat_size(parts, rows=rows), out.rows if rows else out.cols)
        w.same(*(p.cols if rows else p.rows for p in parts), out.cols if rows else out.rows)
        w.computes(out, *parts)
        w.finish()
