"""Sums of stored values: ``A.sum()``, ``A.sum(axis=0)``, ``A.sum(axis=1)``."""
import dace
import dace.library
import numpy as np
from dace import properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse import errors
from sdfgsparse.lowering.graph import SUM, Kernel
from sdfgsparse.lowering.graph_values import entry_pass
from sdfgsparse.ops.base import SparseLibraryNode
from sdfgsparse.ops.validation import Size, Wiring

__all__ = ['SparseSum', 'sum_dtype']

OUT = '_out'


def sum_dtype(dtype: dace.typeclass) -> dace.typeclass:
    """The dtype of a sum of ``dtype`` values, by NumPy's rule (``np.sum``, scipy's
    ``A.sum()``): bool and signed integers narrower than the platform's ``long``
    accumulate in ``int64``, unsigned ones in ``uint64``; floats keep their dtype.

    >>> [sum_dtype(t) == w for t, w in ((dace.int32, dace.int64), (dace.uint8, dace.uint64),
    ...                                 (dace.float32, dace.float32))]
    [True, True, True]
    """
    return dace.dtypes.dtype_to_typeclass(np.zeros(0, dtype.as_numpy_dtype()).sum().dtype.type)


@dace.library.expansion
class ExpandSparseSumPure(ExpandTransformation):
    """The portable SDFG: ``out = 0``, then maps over A's stored entries (guards applied:
    ELL padding and out-of-range DIA slots are no entries) adding the value (or 1 when
    counting) to ``out[row]`` (``axis=1``), ``out[col]`` (``axis=0``) or ``out[0]`` as a
    write-conflict resolution: plain updates where the outer level owns the written
    element, atomic ones elsewhere."""
    environments = []

    @staticmethod
    def expansion(node: 'SparseSum', state, sdfg):
        k = Kernel(node, state, sdfg)
        A = k.operand('A', node.operand_type(state, 'A'))
        k.fill(k.add_state('zero'), OUT)
        index = 0 if node.axis < 0 else A.row if node.axis == 1 else A.col
        entry_pass(k, 'sum', A, (OUT, [index]), 1 if node.count else A.value, wcr=SUM,
                   parallel=node.schedule_hint != 'sequential')
        return k.build()


@dace.library.node
class SparseSum(SparseLibraryNode):
    """Sum of A's stored values: ``axis=-1`` (all, output of length 1), ``0`` (per column)
    or ``1`` (per row). The output's dtype is the accumulator: :func:`sum_dtype` of A's
    (``int64`` for ``int32`` values, as NumPy and scipy), which every expansion adds in."""
    implementations = {'pure': ExpandSparseSumPure}
    default_implementation = 'pure'
    SPARSE_INPUTS = ('A', )
    ACCEPTS_VIEWS = True

    axis = properties.Property(dtype=int, default=-1, desc='-1: total, 0: per column, 1: per row')
    count = properties.Property(dtype=bool, default=False, desc='Count stored entries instead of summing values')
    transpose_A = properties.Property(dtype=bool, default=False, desc='Use the transposed view of A (no copy)')

    def __init__(self, name='sparse_sum', axis=-1, *args, **kwargs):
        super().__init__(name, *args, inputs=set(), outputs={OUT}, **kwargs)
        self.axis = axis

    def validate(self, sdfg, state):
        """``axis`` in (-1, 0, 1), A's members, a vector ``_out`` of one element (``axis=-1``),
        of A's columns (0) or of A's rows (1), of the accumulator's dtype
        (:mod:`sdfgsparse.ops.validation`)."""
        w = Wiring(self, sdfg, state)
        if self.axis not in (-1, 0, 1):
            w.fail(errors.UnsupportedOperationError, f'axis {self.axis} is not -1 (all), 0 (per column) or 1 (per row)')
        A, out = w.sparse('A'), w.dense(OUT, (1, ), output=True)
        w.same(out.dim(0), Size(1, 'one element (axis=-1)') if self.axis < 0 else A.rows if self.axis == 1 else A.cols)
        w.computes(out, A, dtype=dace.int64 if self.count else sum_dtype(A.dtype) if A.dtype is not None else None)
        w.finish()
