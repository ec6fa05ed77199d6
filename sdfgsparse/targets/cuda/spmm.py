"""The ``cuda`` implementation of :class:`~sdfgsparse.ops.spmm.SpMM` over a row walk: a thread
per element of ``Y``, the columns across a warp.

For a plain row walk (CSR, or CSC seen as ``A.T``) with A, B and Y of one floating dtype and
B's and Y's rows contiguous, the kernel is one map over ``(row, column)`` of Y whose tasklet
calls ``spmm_row_col`` of ``include/sdfgsparse_cuda_spmm.cuh``. The column is the map's last
dimension, which DaCe's GPU code generator puts on ``threadIdx.x``, in blocks of
:data:`BLOCK` (32 columns by 8 rows): a warp reads one entry of A (one address, broadcast)
and 32 consecutive elements of B's row (coalesced) per step. Every other SpMM takes the
generic level walk.

Not yet here (issue 61): the row's entries staged in shared memory or registers for the
warp (GE-SpMM's row caching), rows split for balance, widths not a multiple of 32 handled
by narrower groups, speed measured on a device.
"""
import dace
import dace.library
import sympy
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse.lowering.graph import local
from sdfgsparse.ops.spmm import B, SpMM, Y
from sdfgsparse.targets.cpu.builder import leaf
from sdfgsparse.targets.cuda.environment import SdfgsparseCUDA
from sdfgsparse.targets.cuda.expansions import IMPLEMENTATION, portable
from sdfgsparse.targets.cuda.leaves import start, takes
from sdfgsparse.targets.registry import register

__all__ = ['ExpandSpMMCUDA', 'BLOCK', 'applies']

#: The kernel's block: 32 columns (a warp) by 8 rows.
BLOCK = [32, 8, 1]


def applies(node: SpMM, state, sdfg) -> bool:
    """Whether the column-per-thread kernel takes this node (see the module)."""
    return all(len(node.connected(state, c).shape) == 2 for c in (B, Y)) and takes(node, state, (B, Y))


@dace.library.expansion
class ExpandSpMMCUDA(ExpandTransformation):
    """Y = A @ B with a thread per element of Y (see the module); the generic level walk where
    it does not apply."""
    environments = [SdfgsparseCUDA]

    @staticmethod
    def expansion(node: SpMM, state, sdfg):
        if not applies(node, state, sdfg):
            return portable(node, state, sdfg)
        k, st, A, walk = start(node, state, sdfg)
        b, y = k.sdfg.arrays[B], k.sdfg.arrays[Y]
        cols = y.shape[1]
        sc = k.grid(k.add_state('spmm'), [('r', 0, walk.rows), ('c', 0, cols)], BLOCK)
        r, c = sympy.Symbol('r'), sympy.Symbol('c')
        leaf(k, sc, 'spmm_row_col',
             f'sdfgsparse::cuda::spmm_row_col<{st.dtype.ctype}>(_tr, _tcol, _tp, _tc, _tv, _tb, _tldb, _ty, _tldy);',
             arrays={'_tp': walk.pos, '_tc': walk.crd, '_tv': A.vals, '_tb': B},
             locals_in={'_tr': local(k, sc, 'r', dace.int64, r), '_tcol': local(k, sc, 'c', dace.int64, c),
                        '_tldb': local(k, sc, 'ldb', dace.int64, b.strides[0]),
                        '_tldy': local(k, sc, 'ldy', dace.int64, y.strides[0])},
             outs={'_ty': (Y, None)})
        return k.build()


register(SpMM, IMPLEMENTATION, ExpandSpMMCUDA)
