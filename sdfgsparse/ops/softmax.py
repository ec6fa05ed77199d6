"""Row-wise softmax over the stored entries: ``ss.softmax(A, axis=1)``.

For every row ``i`` of ``A`` with stored entries ``v_q`` (explicit zeros included, each
duplicate of a COO matrix on its own, the zero fill of BSR blocks included, ELL padding
and out-of-range DIA slots excluded)::

    out_q = exp(v_q - max_q v_q) / sum_q exp(v_q - max_q v_q)

The result has A's format and pattern (index arrays copied); a row without stored
entries stays empty. ``axis=0`` does the same over the columns (the rows of ``A.T``).
Integer values give a float64 result.
"""

import dace
import dace.library
import numpy as np
import sympy
from dace import properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse import errors
from sdfgsparse.formats import SparseType
from sdfgsparse.lowering.graph import MAX, SUM, Kernel, read
from sdfgsparse.lowering.graph_values import copy_index_members as copy_members
from sdfgsparse.lowering.graph_values import entry_pass, exact_float
from sdfgsparse.ops.base import SparseLibraryNode, member_conn
from sdfgsparse.ops.validation import Wiring

__all__ = ['portable_kernel', 'SparseSoftmax', 'normalise_axis', 'owns_single_rows', 'lowest_value']



def normalise_axis(axis) -> int:
    """``1``/``-1`` -> 1 (rows), ``0``/``-2`` -> 0 (columns); anything else raises
    :class:`~sdfgsparse.errors.UnsupportedOperationError`."""
    if isinstance(axis, (int, np.integer)) and not isinstance(axis, bool):
        if int(axis) in (1, -1):
            return 1
        if int(axis) in (0, -2):
            return 0
    raise errors.UnsupportedOperationError(f'ss.softmax(A, axis={axis!r}): axis must be 1 (rows, the default) or '
                                           '0 (columns) for a sparse matrix')


def owns_single_rows(st: SparseType) -> bool:
    """Whether each iteration of the outermost level is exactly one matrix row, distinct
    across iterations (CSR, ELL, DIA, DCSR): then per-row values are plain scalars of the
    outer loop body and the outer loop may run in parallel."""
    return st.fmt.dims[0] == 'c0' and st.fmt.levels[0].unique


def lowest_value(dtype: dace.typeclass) -> float:
    """The most negative finite value of a float dtype (start of a running maximum)."""
    return float(np.finfo(dtype.as_numpy_dtype()).min)


@dace.library.expansion
class ExpandSparseSoftmaxPure(ExpandTransformation):
    """The portable SDFG, one shape for every format: A's index members copied, the
    result's values zeroed (ELL padding and out-of-range DIA slots stay 0), per-row
    workspaces ``mx`` (the lowest finite value) and ``sm`` (0), then four parallel passes
    over the stored entries (``A`` seen along ``axis``: its rows, or the rows of ``A.T``):

    1. ``mx[row] = max(mx[row], v)`` (write-conflict resolution ``max``);
    2. ``out[q] = exp(v - mx[row])``;
    3. ``sm[row] += out[q]`` (write-conflict resolution ``+``);
    4. ``out[q] = out[q] / sm[row]``.

    DaCe emits the resolutions as plain updates where the enclosing maps make the row
    private (the outer level is the row: CSR, DCSR, ELL, DIA) and as atomic ones elsewhere
    (BSR's block rows, scattered rows: CSC, COO, the ``A.T`` views).
    A row without entries is never touched; a row whose entries are all ``-inf`` gives NaN,
    as the ``cpu`` expansion and NumPy do."""
    environments = []

    @staticmethod
    def expansion(node: 'SparseSoftmax', state, sdfg):
        k = Kernel(node, state, sdfg)
        portable_kernel(k, node, state)
        return k.build()


def portable_kernel(k: Kernel, node: 'SparseSoftmax', state) -> None:
    """The steps of the portable expansion built into ``k`` (the ``cpu`` expansion builds
    them into its own kernel where it has no tuned walk)."""
    st = node.operand_type(state, 'A')
    if node.axis == 0:
        st = st.T
    A = k.operand('A', st)
    out = member_conn('out', 'vals')
    T = k.sdfg.arrays[out].dtype
    mx = k.transient('__mx', [st.rows], T)
    sm = k.transient('__sm', [st.rows], T)
    init = k.add_state('init')
    copy_members(k, init, node.member_arrays(state, 'out'), 'A', 'out')
    if A.guard is not None:
        k.fill(init, out)
    k.fill(init, mx, exact_float(lowest_value(T)))
    k.fill(init, sm)
    par = node.schedule_hint != 'sequential'
    row = A.row
    entry_pass(k, 'row_max', A, (mx, [row]), A.value, wcr=MAX, parallel=par)
    entry_pass(k, 'exp', A, (out, [A.pos]), sympy.exp(A.value - read(mx, row)), parallel=par)
    entry_pass(k, 'row_sum', A, (sm, [row]), read(out, A.pos), wcr=SUM, parallel=par)
    entry_pass(k, 'normalise', A, (out, [A.pos]), read(out, A.pos) / read(sm, row), parallel=par)


@dace.library.node
class SparseSoftmax(SparseLibraryNode):
    """Softmax over the stored entries of each row (``axis=1``) or column (``axis=0``):
    members of ``A`` -> members of ``out`` (A's pattern and format, float values).
    ``transpose_A`` reads A's storage as ``A.T`` (no copy)."""
    implementations = {'pure': ExpandSparseSoftmaxPure}
    default_implementation = 'pure'
    SPARSE_INPUTS = ('A', )
    SPARSE_OUTPUTS = ('out', )

    transpose_A = properties.Property(dtype=bool, default=False, desc='Use the transposed view of A (no copy)')
    axis = properties.Property(dtype=int,
                               default=1,
                               desc='1: softmax over each row\'s stored entries; 0: over each column\'s')

    def __init__(self, name='softmax', axis=1, *args, **kwargs):
        super().__init__(name, *args, inputs=set(), outputs=set(), **kwargs)
        self.axis = normalise_axis(axis)

    def validate(self, sdfg, state):
        """A's members, the result with A's pattern, of A's float dtype (float64 for integer
        values) (:mod:`sdfgsparse.ops.validation`)."""
        w = Wiring(self, sdfg, state)
        A, out = w.sparse('A'), w.sparse('out', output=True)
        w.same_pattern(out, A)
        if A.dtype is not None:
            w.computes(out, A, dtype=A.dtype if A.dtype in (dace.float32, dace.float64) else dace.float64)
        w.finish()
