"""Row-parallel Gustavson SpGEMM: ``C = A @ B`` with ``A`` and ``B`` walked as CSR, a CSR ``C``.

The generic lowering (:mod:`sdfgsparse.targets.cpu.compress`) appends every product to one
list, sorts it and compresses it — sequentially, through ``flops``-long buffers (an order
of magnitude slower than scipy; docs/performance.md). When both operands iterate
row-major, the rows of ``C`` are independent, so this lowering computes them in parallel
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

Each per-row step is a one-line tasklet inside the generated map that calls
``gustavson_count`` / ``gustavson_fill`` of ``include/sdfgsparse_gustavson.h`` (the loop
over a row's products has data-dependent bounds and a scattered accumulator, which DaCe
1.0.2's frontend turns into atomics). *Workspaces* (the marker, the bitmaps, the accumulator and
the column list: about 16 bytes per column of B) belong to one call: a thread makes its
own on its first row and the kernel's last step frees them all, through a table of one
pointer per OpenMP thread number (a kernel transient), so nothing stays allocated between
calls and concurrent calls share nothing. Large workspaces are pages of their own
(``mmap``): zero without a memset, touched only where used, returned to the system when
freed (the allocator would keep them). Explicit zeros from cancellation are kept, as in
the generic lowering.
"""
import dace

from sdfgsparse._symbolic import pyexpr
from sdfgsparse.targets.cpu.kernel import KernelBuilder, cpp_tasklet
from sdfgsparse.targets.cpu.rowwise import emit_count_fill

__all__ = ['emit_gustavson', 'build_gustavson', 'guided_rows', 'SLOTS', 'PREFETCH']

#: Entries of the workspace table: OpenMP thread numbers below it use a workspace for the
#: whole call; a thread beyond it (only with more threads than this) makes one per row
#: (``SS_GW_SLOTS`` of ``include/sdfgsparse_gustavson.h``).
SLOTS = 1024

#: How many entries of A's row ahead both row loops prefetch B's rows (``SS_GW_PREFETCH``).
PREFETCH = 2

#: The C++ of the workspaces (``include/sdfgsparse_gustavson.h``), once per library.
GLOBAL_CODE = '#include "sdfgsparse_gustavson.h"\n'


def emit_gustavson(kb: KernelBuilder, rows, cols, cap, a: dict, b: dict, out: dict, vt: dace.typeclass,
                   it: dace.typeclass):
    """Emit the three steps into ``kb`` (:func:`~sdfgsparse.targets.cpu.rowwise.emit_count_fill`),
    with the call's workspace table before them and its release after them. Build the
    kernel with :func:`build_gustavson`.

    :param rows, cols: the result's shape (``cols`` is B's column count).
    :param cap: the result's capacity.
    :param a, b, out: connector names of ``pos1``, ``crd1``, ``vals`` of A, B and the result.
    :param vt, it: the result's value and index types.
    """
    kb.globals['np'] = __import__('numpy')
    kb.symbols_of(cols)
    L = kb.line
    L(f'ncols = dace.int64({pyexpr(cols)})')
    L(f'gwws = np.empty(({SLOTS},), dtype=dace.uint64)')
    for l in cpp_tasklet([], [('_tws', 'gwws')], 'ss_gw_clear(_tws);'):
        L(l)
    ins = [('_tnc', 'ncols'), ('_ap', a['pos1']), ('_ac', a['crd1']), ('_bp', b['pos1']), ('_bc', b['crd1'])]
    fill_inputs = ins + [('_av', a['vals']), ('_bv', b['vals']), ('_op', out['pos1'])]
    count = f'_tcnt = sdfgsparse::gustavson_count<{vt.ctype}, {it.ctype}>(_tws, _tnc, _ap, _ac, _bp, _bc, _ti);'
    fill = (f'sdfgsparse::gustavson_fill<{vt.ctype}, {it.ctype}>(_tws, _tnc, _oc, _ov, _ap, _ac, _av, _bp, _bc, _bv, '
            '_op, _ti);')
    emit_count_fill(kb, 'gw', rows, cap, ins, fill_inputs, out, count, fill, workspaces=[('_tws', 'gwws')])
    for l in cpp_tasklet([('_tws', 'gwws')], [], 'ss_gw_release(_tws);', side_effects=True):
        L(l)


def build_gustavson(kb: KernelBuilder) -> dace.SDFG:
    """The kernel SDFG of ``kb`` (filled by :func:`emit_gustavson`): its row maps with the
    guided schedule, the workspace helpers in its global code."""
    sdfg = kb.build()
    guided_rows(sdfg)
    sdfg.append_global_code(GLOBAL_CODE)
    return sdfg


def guided_rows(sdfg: dace.SDFG):
    """Give the row maps of a built Gustavson kernel (the maps around its C++ tasklets)
    OpenMP's guided schedule."""
    for node, state in sdfg.all_nodes_recursive():
        if isinstance(node, dace.nodes.MapEntry) and any(
                isinstance(n, dace.nodes.Tasklet) and n.language == dace.Language.CPP
                for n in state.scope_subgraph(node).nodes()):
            node.map.omp_schedule = dace.dtypes.OMPScheduleType.Guided
