"""Row-parallel Gustavson SpGEMM: ``C = A @ B`` with ``A`` and ``B`` walked as CSR, a CSR ``C``.

The portable lowering (:func:`~sdfgsparse.ops.spgemm.product_kernel`) writes every product
to ``flops``-long lists, sorts and compresses them (an order of magnitude slower than
scipy; docs/performance.md). When both operands iterate row-major, the rows of ``C`` are
independent, so this lowering computes them in parallel
(a DaCe map over rows, guided schedule: power-law rows differ by orders of magnitude):

1. *count* — per row, the distinct columns reached through ``A[i, k] * B[k, :]``, found
   with a marker array (a tag per row, so it is never cleared);
2. *positions* — ``pos`` as the prefix sum of the counts (sequential over rows);
3. *fill* — per row again, the products summed into a dense accumulator in the order of
   A's then B's entries (the generic lowering's order, so results agree to the last bit);
   a bitmap marks the row's columns. The row is written at ``pos[i]`` in column order
   (scipy's canonical format; scipy's own product is not sorted) in one of three ways, by
   how many of the row's columns fall on a word of the bitmap in the row's range:

   - two or more on average: every word in the range, bit by bit;
   - fewer: only the non-empty words, found through a second bitmap (a bit per word,
     made from the row's column list) — about (its words in the range) + (non-empty
     words) + (columns) steps, the first two columns of a word read without a branch;
   - far fewer (a wide range: more than 4 words of the second bitmap per column): the
     column list, sorted.

Both row loops prefetch the rows of B that the next entries of A's row will read (the
product is bound by those scattered reads once B leaves the cache).

Each per-row step is a one-line tasklet inside a row map that calls ``gustavson_count`` /
``gustavson_fill`` of ``include/sdfgsparse_gustavson.h``
(:func:`~sdfgsparse.targets.cpu.builder.count_fill`). *Workspaces* (the marker, the bitmaps, the accumulator and
the column list: about 16 bytes per column of B) belong to one call: a thread makes its
own on its first row and the kernel's last step frees them all, through a table of one
pointer per OpenMP thread number (a kernel transient), so nothing stays allocated between
calls and concurrent calls share nothing. Large workspaces are pages of their own
(``mmap``): zero without a memset, touched only where used, returned to the system when
freed (the allocator would keep them). Explicit zeros from cancellation are kept, as in
the generic lowering.
"""
import dace
import sympy

from sdfgsparse.lowering.graph import Scope
from sdfgsparse.lowering.graph_compress import Rows
from sdfgsparse._symbolic import pyexpr
from sdfgsparse.targets.cpu.builder import CpuKernel, count_fill, leaf

__all__ = ['gustavson', 'SLOTS', 'PREFETCH']

#: Entries of the workspace table: OpenMP thread numbers below it use a workspace for the
#: whole call; a thread beyond it (only with more threads than this) makes one per row
#: (``SS_GW_SLOTS`` of ``include/sdfgsparse_gustavson.h``).
SLOTS = 1024

#: How many entries of A's row ahead both row loops prefetch B's rows (``SS_GW_PREFETCH``).
PREFETCH = 2

#: The C++ of the workspaces (``include/sdfgsparse_gustavson.h``), once per library.
GLOBAL_CODE = '#include "sdfgsparse_gustavson.h"\n'


def gustavson(k: CpuKernel, cols, a: Rows, b: Rows, out: Rows, vt: dace.typeclass, it: dace.typeclass) -> None:
    """The three steps of ``out = a @ b`` in ``k`` (``cols``: B's column count; ``vt``,
    ``it``: the result's value and index types), with the call's workspace table cleared
    before them and released after them."""
    table = k.transient('gw_workspaces', [SLOTS], dace.uint64)
    leaf(k, Scope.at(k.add_state('gw_clear')), 'gw_clear', 'ss_gw_clear(_tws);', outs={'_tws': (table, None)})
    nc = k.scalar('gw_ncols', dace.int64)
    k.set_scalar(k.add_state('gw_ncols'), nc, pyexpr(sympy.sympify(cols)))
    types = f'{vt.ctype}, {it.ctype}'
    count_fill(k, 'gw', out.rows, out, f'sdfgsparse::gustavson_count<{types}>(_tws, _tnc, _ap, _ac, _bp, _bc, _ti)',
               f'sdfgsparse::gustavson_fill<{types}>(_tws, _tnc, _oc, _ov, _ap, _ac, _av, _bp, _bc, _bv, _op, _ti, '
               '_tcap)', {'_ap': a.pos, '_ac': a.crd, '_bp': b.pos, '_bc': b.crd}, {'_av': a.vals, '_bv': b.vals},
               workspace=table, guided=True, scalars={'_tnc': nc})
    t = leaf(k, Scope.at(k.add_state('gw_release')), 'gw_release', 'ss_gw_release(_tws);',
             outs={'_tws': (table, None)})
    t.side_effects = True
    k.sdfg.append_global_code(GLOBAL_CODE)
