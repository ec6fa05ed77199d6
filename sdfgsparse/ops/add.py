"""``A + B`` and ``A - B`` for sparse A and B (any formats): a CSR or CSC result on the
union of the patterns, in the format :func:`result_format` gives (scipy's rule). CSR / CSC
operands (as the operation sees them) are merged in parallel, row by row for a CSR result
and column by column for a CSC one (:mod:`sdfgsparse.targets.cpu.row_union`); other formats
by expand–sort–compress."""
import dace
import dace.library
from dace import properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse import errors
from sdfgsparse.formats import CSC, CSR, SparseFormat, SparseType
from sdfgsparse.lowering.graph import Kernel
from sdfgsparse.lowering.graph_compress import Rows, canonical_rows, merge_rows
from sdfgsparse.ops.base import SparseLibraryNode, member_conn
from sdfgsparse.ops.validation import Wiring

__all__ = ['SparseAdd', 'result_format', 'pure_merge', 'merge_into', 'may_repeat', 'validate_merge']


def result_format(a: SparseType) -> SparseFormat:
    """The format of ``A + B``, ``A - B`` and ``A * B`` (both operands sparse), from ``a``,
    the type of ``A`` as the operation sees it: CSC when ``A`` is CSC (a CSC matrix, or the
    ``.T`` of a CSR one), else CSR.

    This is scipy's rule where our result formats allow: scipy returns the left operand's
    format for CSR and CSC (``csc + csr`` is CSC, ``csr * csc`` is CSR) and CSR for COO,
    LIL and DOK (``coo + coo`` is CSR). It keeps BSR (``bsr + x``), DIA (``dia ± dia``, and
    ``dia + csc`` gives CSC) and DOK (``dok + x``) where these give CSR.

    >>> import dace, sdfgsparse as ss
    >>> from sdfgsparse.formats import sparse_type_of
    >>> st = sparse_type_of(ss.CSR[dace.float64, 4, 5])
    >>> result_format(st).name, result_format(st.T).name
    ('CSR', 'CSC')
    """
    return CSC if a.fmt.name == 'CSC' else CSR


def pure_merge(node, state, sdfg, mode: str, sign: int = 1) -> dace.SDFG:
    """The portable SDFG of ``A ± B`` (``mode='union'``) and ``A ∘ B`` (``'intersect'``):
    :func:`merge_into` a new kernel."""
    k = Kernel(node, state, sdfg)
    merge_into(k, node, state, mode, sign)
    return k.build()


def merge_into(k: Kernel, node, state, mode: str, sign: int = 1, rows_of=canonical_rows) -> None:
    """Each operand as canonical rows by ``rows_of(k, label, operand)`` (by default its own
    storage when it walks as CSR, else expanded, sorted and compressed,
    :func:`~sdfgsparse.lowering.graph_compress.canonical_rows`), then a row-parallel merge
    (:func:`~sdfgsparse.lowering.graph_compress.merge_rows`) into ``k``. A CSC result is
    the CSR storage of ``A.T ± B.T``: the same steps on the transposed views."""
    seen = {p: node.operand_type(state, p) for p in ('A', 'B')}
    if node.sparse_type(state, 'out').fmt.name == 'CSC':
        seen = {p: t.T for p, t in seen.items()}
    rows = {p: rows_of(k, f'rows{p}', k.operand(p, t)) for p, t in seen.items()}
    out = Rows(*(member_conn('out', m) for m in ('pos1', 'crd1', 'vals')), seen['A'].rows)
    merge_rows(k, 'merge', rows['A'], rows['B'], out, mode, sign)


def may_repeat(st: SparseType) -> bool:
    """Whether format ``st`` may store a coordinate twice (COO): an intersection of such an
    operand would be ambiguous."""
    return not all(l.unique for l in st.fmt.levels)


def validate_merge(node, sdfg, state, unique: bool = False) -> None:
    """The checks of ``A ± B`` and (``unique``) ``A ∘ B`` (:mod:`sdfgsparse.ops.validation`):
    the members of A and B (with ``unique``: of formats that store each coordinate once), a
    CSR or CSC result, all three of one shape, the result of the dtype of ``A + B``."""
    w = Wiring(node, sdfg, state)
    A, B, out = w.sparse('A'), w.sparse('B'), w.sparse('out', output=True)
    for op in (A, B) if unique else ():
        if op.seen is not None and may_repeat(op.seen):
            w.fail(errors.UnsupportedOperationError, f'operand {op.shown} ({op.seen.fmt.name}) may store a '
                   'coordinate twice; convert it to CSR first')
    w.format_in(out, ('CSR', 'CSC'))
    w.same(A.rows, B.rows, out.rows)
    w.same(A.cols, B.cols, out.cols)
    w.computes(out, A, B)
    w.finish()


@dace.library.expansion
class ExpandSparseAddPure(ExpandTransformation):
    """The portable SDFG: per row, a two-pointer merge of the operands' sorted rows
    (count, prefix sum into ``pos``, fill), after storing by rows any operand that does
    not walk as CSR (:func:`pure_merge`)."""
    environments = []

    @staticmethod
    def expansion(node: 'SparseAdd', state, sdfg):
        return pure_merge(node, state, sdfg, 'union', node.sign_B)


@dace.library.node
class SparseAdd(SparseLibraryNode):
    """Members of ``A`` and ``B`` -> members of ``out`` = A + sign_B * B, on the union of
    the patterns, explicit zeros from cancellation kept.

    ``out`` is CSR or CSC; the frontend chooses :func:`result_format` (scipy's rule: CSC
    when A is CSC, else CSR), ``SparseFormatInference`` may change it.
    """
    implementations = {'pure': ExpandSparseAddPure}
    default_implementation = 'pure'
    SPARSE_INPUTS = ('A', 'B')
    SPARSE_OUTPUTS = ('out', )

    sign_B = properties.Property(dtype=int, default=1, desc='+1 for A + B, -1 for A - B')
    transpose_A = properties.Property(dtype=bool, default=False, desc='Use the transposed view of A (no copy)')
    transpose_B = properties.Property(dtype=bool, default=False, desc='Use the transposed view of B (no copy)')

    def __init__(self, name='sparse_add', sign_B=1, *args, **kwargs):
        super().__init__(name, *args, inputs=set(), outputs=set(), **kwargs)
        self.sign_B = sign_B

    def validate(self, sdfg, state):
        """:func:`validate_merge`."""
        validate_merge(self, sdfg, state)
