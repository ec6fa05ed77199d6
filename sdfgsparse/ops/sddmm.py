"""SDDMM: ``ss.sddmm(S, X, Y) = S ∘ (X @ Y)`` on S's pattern (S sparse M x N, X: M x K, Y: K x N)."""
import dace
import dace.library
from dace import properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse.lowering.graph import Kernel, fill
from sdfgsparse.lowering.graph_dense import sampled_pass
from sdfgsparse.lowering.graph_values import copy_index_members as copy_index_arrays
from sdfgsparse.ops.base import SparseLibraryNode, member_conn
from sdfgsparse.ops.validation import Wiring

__all__ = ['SDDMM']

X, Y = '_X', '_Y'


@dace.library.expansion
class ExpandSDDMMPure(ExpandTransformation):
    """The portable SDFG: S's index arrays copied to the result's (one parallel map each);
    where S's levels have guards (ELL padding, out-of-range DIA slots) the result's values
    zeroed first; then maps over S's stored entries, each computing its dot product
    ``sum_k X[row, k] * Y[k, col]`` (``Y[col, k]`` with ``y_layout='NK'``) in a local
    accumulator over a sequential map and writing ``S[row, col] * dot`` to its own value
    slot (no write conflicts: the outer level runs in parallel unless ``schedule_hint``
    says ``sequential``). Coordinates read from storage are parameters of one-iteration
    maps (:func:`~sdfgsparse.lowering.graph_dense.bind`), so X and Y are read through
    exact memlets."""
    environments = []

    @staticmethod
    def expansion(node: 'SDDMM', state, sdfg):
        k = Kernel(node, state, sdfg)
        S = k.operand('S', node.operand_type(state, 'S'))
        vals = member_conn('out', 'vals')
        copies = k.add_state('copy_indices')
        copy_index_arrays(k, copies, S.type.fmt.member_names, 'S', 'out')
        if S.guard is not None:  # slots the walk skips hold 0
            fill(k, copies, vals)
        extent = node.connected(state, X).shape[1]  # (a one-element X reaches the kernel as a scalar)
        sampled_pass(k, k.add_state('sddmm'), S, X, Y, extent, node.y_layout == 'NK', k.sdfg.arrays[vals].dtype,
                     parallel=node.schedule_hint != 'sequential', more=lambda s: [((vals, [S.pos]), s, None)])
        return k.build()


@dace.library.node
class SDDMM(SparseLibraryNode):
    """Sampled dense-dense product: members of ``S``, ``_X`` (M x K), ``_Y`` (K x N) ->
    members of ``out`` (S's pattern and format)."""
    implementations = {'pure': ExpandSDDMMPure}
    default_implementation = 'pure'
    SPARSE_INPUTS = ('S', )
    SPARSE_OUTPUTS = ('out', )

    transpose_S = properties.Property(dtype=bool, default=False, desc='Use the transposed view of S (no copy)')
    y_layout = properties.Property(dtype=str,
                                   default='KN',
                                   choices=['KN', 'NK'],
                                   desc='KN: _Y is the K x N right operand; NK: _Y holds its transpose (N x K, '
                                   'e.g. the keys of K.T), read by contiguous rows')

    def __init__(self, name='sddmm', *args, **kwargs):
        super().__init__(name, *args, inputs={X, Y}, outputs=set(), **kwargs)

    def validate(self, sdfg, state):
        """S's members, matrices ``_X`` (S's rows x K) and ``_Y`` (K x S's columns, or its
        transpose with ``y_layout='NK'``), the result with S's pattern and the dtype of
        ``S * (X @ Y)`` (:mod:`sdfgsparse.ops.validation`)."""
        w = Wiring(self, sdfg, state)
        S, x, y = w.sparse('S'), w.dense(X, (2, )), w.dense(Y, (2, ))
        out = w.sparse('out', output=True)
        n, k = (0, 1) if self.y_layout == 'NK' else (1, 0)
        w.same(S.rows, x.dim(0))
        w.same(x.dim(1), y.dim(k))
        w.same(S.cols, y.dim(n))
        w.same_pattern(out, S)
        w.computes(out, S, x, y)
        w.finish()
