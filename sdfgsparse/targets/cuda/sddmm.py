"""The ``cuda`` implementation of :class:`~sdfgsparse.ops.sddmm.SDDMM` over a row walk: a warp per
row of ``S``, the reduced dimension across its lanes.

For a plain row walk of ``S`` (CSR, or CSC seen as ``S.T``), no view, and S, X, Y and the result
of one floating dtype with X's and Y's rows contiguous, the kernel is S's index arrays copied to
the result's (a map each, as in the portable expansion), then one map over ``(row, lane)``,
``lane`` in ``0:32`` on ``threadIdx.x`` (blocks of :data:`BLOCK`), whose tasklet calls
``sddmm_row_lane`` of ``include/sdfgsparse_cuda_sddmm.cuh``: for each entry of the row the
warp's lanes split the dot product of X's row with Y's column (coalesced reads of X's row,
and of Y's row where Y holds the transpose, ``y_layout='NK'``), reduce it with shuffles, and
lane 0 writes the entry. Every other SDDMM takes the generic level walk.

Not yet here (issue 61): X's row kept in registers across the row's entries (Sputnik), rows
split for balance, narrower groups for small K, speed measured on a device.
"""
import dace
import dace.library
import sympy
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse.lowering.graph import local
from sdfgsparse.lowering.graph_values import copy_index_members
from sdfgsparse.ops.base import member_conn
from sdfgsparse.ops.sddmm import SDDMM, X, Y
from sdfgsparse.targets.cpu.builder import leaf
from sdfgsparse.targets.cuda.environment import SdfgsparseCUDA
from sdfgsparse.targets.cuda.expansions import IMPLEMENTATION, portable
from sdfgsparse.targets.cuda.leaves import start, takes
from sdfgsparse.targets.registry import register

__all__ = ['ExpandSDDMMCUDA', 'BLOCK', 'LANES', 'applies']

#: Lanes per row (``SDDMM_LANES`` of the header: a warp).
LANES = 32
#: The kernel's block: a warp per row, 8 rows.
BLOCK = [LANES, 8, 1]

OUT_VALS = member_conn('out', 'vals')


def applies(node: SDDMM, state, sdfg) -> bool:
    """Whether the warp-per-row kernel takes this node (see the module)."""
    if node.views or any(len(node.connected(state, c).shape) != 2 for c in (X, Y)):
        return False
    return takes(node, state, (X, Y, OUT_VALS), sparse='S')


@dace.library.expansion
class ExpandSDDMMCUDA(ExpandTransformation):
    """``out = S * (X @ Y)`` on S's pattern with a warp per row (see the module); the generic
    level walk where it does not apply."""
    environments = [SdfgsparseCUDA]

    @staticmethod
    def expansion(node: SDDMM, state, sdfg):
        if not applies(node, state, sdfg):
            return portable(node, state, sdfg)
        k, st, S, walk = start(node, state, sdfg, sparse='S')
        copy_index_members(k, k.add_state('copy_indices'), st.fmt.member_names, 'S', 'out')
        x, y = k.sdfg.arrays[X], k.sdfg.arrays[Y]
        # Y's element (k, c): KN holds it at [k, c], NK (the transpose) at [c, k]
        syk, syc = (y.strides[1], y.strides[0]) if node.y_layout == 'NK' else (y.strides[0], y.strides[1])
        sc = k.grid(k.add_state('sddmm'), [('r', 0, walk.rows), ('l', 0, LANES)], BLOCK)
        lv = lambda hint, value: local(k, sc, hint, dace.int64, value)  # noqa: E731
        leaf(k, sc, 'sddmm_row_lane',
             f'sdfgsparse::cuda::sddmm_row_lane<{st.dtype.ctype}>(_tr, _tl, _tp, _tc, _tv, _tx, _tldx, _ty, _tsyk, '
             '_tsyc, _tk, _to);',
             arrays={'_tp': walk.pos, '_tc': walk.crd, '_tv': S.vals, '_tx': X, '_ty': Y},
             locals_in={'_tr': lv('r', sympy.Symbol('r')), '_tl': lv('l', sympy.Symbol('l')),
                        '_tldx': lv('ldx', x.strides[0]), '_tsyk': lv('syk', syk), '_tsyc': lv('syc', syc),
                        '_tk': lv('k', x.shape[1])},
             outs={'_to': (OUT_VALS, None)})
        return k.build()


register(SDDMM, IMPLEMENTATION, ExpandSDDMMCUDA)
