"""The ``cuda`` implementation of :class:`~sdfgsparse.ops.spmv.SpMV` over a row walk: merge-path.

For a plain row walk (CSR, or CSC seen as ``A.T``) with A, x and y of one floating dtype
(float32 or float64) and x and y of unit stride, the kernel is two maps that DaCe's GPU
transformation makes kernels, each a one-line tasklet calling a leaf of
``include/sdfgsparse_cuda_spmv.cuh``:

1. ``spmv_merge_thread`` over ``ceil((rows + entries) / SPMV_ITEMS)`` threads: each takes
   an equal piece of the merge of the row ends with the entries (Merrill and Garland's
   merge-path), found by a binary search, writes the rows it finishes and leaves a carry
   (the partial sum of the row it stops inside) in a scratch pair of arrays;
2. ``spmv_merge_fixup_thread`` over the same threads: each carry added to its row
   (atomically).

The entries are ``pos[rows]``, read by each thread on the device (the index array's
length only bounds the thread count), so no host read of device memory sizes a launch.
Every other SpMV (other formats, mixed dtypes, strided vectors, a fused epilogue) takes the
generic level walk (:func:`~sdfgsparse.targets.cuda.expansions.generic_expansion`).

Not yet here (issue 61): the row-group ("vector") kernel of the same header for regular
matrices, chosen per call from the row statistics; scratch kept between calls instead of the
carries allocated per call; speed measured on a device.
"""
import dace
import dace.library
import sympy
from dace import dtypes
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse.lowering.graph import local, read
from sdfgsparse.ops.spmv import SpMV, X, Y
from sdfgsparse.targets.cpu.builder import leaf
from sdfgsparse.targets.cuda.environment import SdfgsparseCUDA
from sdfgsparse.targets.cuda.expansions import IMPLEMENTATION, portable
from sdfgsparse.targets.cuda.leaves import start, takes
from sdfgsparse.targets.registry import register

__all__ = ['ExpandSpMVCUDA', 'ITEMS', 'applies']

#: Merge-path items per thread (``SPMV_ITEMS`` of the header).
ITEMS = 8


def applies(node: SpMV, state, sdfg) -> bool:
    """Whether the merge-path kernel takes this node (see the module)."""
    return takes(node, state, (X, Y))


@dace.library.expansion
class ExpandSpMVCUDA(ExpandTransformation):
    """Merge-path SpMV from the leaves of ``include/sdfgsparse_cuda_spmv.cuh`` (see the
    module); the generic level walk where it does not apply."""
    environments = [SdfgsparseCUDA]

    @staticmethod
    def expansion(node: SpMV, state, sdfg):
        if not applies(node, state, sdfg):
            return portable(node, state, sdfg)
        k, st, A, walk = start(node, state, sdfg)
        entries = k.sdfg.arrays[walk.crd].shape[0]  # (bounds the entries, pos[rows])
        # (int_ceil: sympy's ceiling of a quotient became M / 8 + n / 8 in integers, too few)
        threads = dace.symbolic.int_ceil(sympy.sympify(walk.rows) + sympy.sympify(entries), ITEMS)
        ctype = st.dtype.ctype
        carry_row = k.transient('carry_row', [threads], dace.int64)
        carry_value = k.transient('carry_value', [threads], st.dtype)
        t = sympy.Symbol('t')

        walk_state = k.add_state('spmv_merge')
        sc = k.scope(walk_state, [('t', 0, threads)], [dtypes.ScheduleType.Default])
        leaf(k, sc, 'spmv_merge',
             f'sdfgsparse::cuda::spmv_merge_thread<{ctype}>(_tt, {ITEMS}, _trows, (long long)_tnnz, _tp, _tc, _tv, '
             'sdfgsparse::cuda::ss_cuda_in(_tx), _ty, _tcr, _tcv);',
             scalars={'_tnnz': read(walk.pos, sympy.sympify(walk.rows))},
             arrays={'_tp': walk.pos, '_tc': walk.crd, '_tv': A.vals, '_tx': X},
             locals_in={'_tt': local(k, sc, 't', dace.int64, t), '_trows': local(k, sc, 'rows', dace.int64,
                                                                                  walk.rows)},
             outs={'_ty': (Y, None), '_tcr': (carry_row, None), '_tcv': (carry_value, None)})

        fix_state = k.add_state('spmv_merge_fixup')
        sc = k.scope(fix_state, [('t', 0, threads)], [dtypes.ScheduleType.Default])
        leaf(k, sc, 'spmv_fixup',
             f'sdfgsparse::cuda::spmv_merge_fixup_thread<{ctype}>(_tt, _trows, _tcr, _tcv, _ty);',
             arrays={'_tcr': carry_row, '_tcv': carry_value, '_tyi': Y},
             locals_in={'_tt': local(k, sc, 't', dace.int64, t), '_trows': local(k, sc, 'rows', dace.int64,
                                                                                  walk.rows)},
             outs={'_ty': (Y, None)})
        return k.build()


register(SpMV, IMPLEMENTATION, ExpandSpMVCUDA)
