"""The row tasklets of the cpu kernels: one-line calls of the C++ leaves in
``include/sdfgsparse_rows.h`` (and ``sdfgsparse_kernel_checks.h`` for the checked SpMV
row), added to a :class:`~sdfgsparse.targets.cpu.builder.CpuKernel`.

Each function adds one tasklet inside a scope (the row map of a
:class:`~sdfgsparse.targets.cpu.builder.RowWalk`, usually); the algorithms, their
constants and the measurements behind them are documented beside the C++ in the header.
Why C++ here at all: a loop over a row's entries that feeds a loop over ``K`` dense
columns is what the C++ compiler must vectorise, with register panels and gathers; the
leaves hold those SIMD row walks. The loop nest around them (rows, their schedule, the
team, the branches chosen per call) is the SDFG's.

Tasklets that walk a whole row read the index and value arrays through dynamic memlets:
they touch the row's entries ``[pos[i], pos[i + 1])`` only, a data-dependent part of the
arrays, and the SOAP analysis (``analysis/sdfg_extract.py``) treats them as such. A map
variable a call needs as a value (the row) reaches the tasklet as a local set from it
(:func:`index`), never by its name in the C++ text: DaCe renames symbols in Python code,
not in C++.
"""
from typing import Dict

import dace
import sympy

from sdfgsparse._symbolic import pyexpr
from sdfgsparse.lowering.graph import Local, Scope, emit, local, read
from sdfgsparse.targets.cpu.builder import CpuKernel, RowWalk, cpp, leaf
from sdfgsparse.targets.cpu.dense_loops import (GEMM_ROWS, SDDMM_GROUP, axpy_row_call,
                                                regular_rows_call, dot_rows_call, rows_of, spmm_row_call)

__all__ = ['index', 'result', 'values', 'spmv_row', 'spmv_row_chunks', 'regular_rows', 'spmm_row', 'axpy_row', 'axpy_tile',
           'sddmm_row', 'dot_rows', 'transposed_rows', 'gemm_row_block']


def index(k: CpuKernel, scope: Scope, expr, hint: str = 'idx') -> Local:
    """An int64 local of ``scope`` set to ``expr`` (of the scope's map variables)."""
    return local(k, scope, hint, dace.int64, sympy.sympify(expr))


def result(k: CpuKernel, scope: Scope, hint: str, dtype) -> Local:
    """A transient scalar of ``scope`` that a tasklet writes (no initial value)."""
    name = k.scalar(f'__{hint}', dtype)
    return Local(name, len(scope.entries), None)  # (its node: the writer's)


def values(k: CpuKernel, scope: Scope, exprs: Dict[str, tuple]) -> Dict[str, Local]:
    """Locals of ``scope`` set to kernel expressions (reads of storage included), for a
    leaf's value inputs: connector -> ``(expression, dtype)``."""
    out = {conn: result(k, scope, conn.strip('_'), dtype) for conn, (_, dtype) in exprs.items()}
    emit(k, scope, [(out[conn], e, None) for conn, (e, _) in exprs.items()], label='values')
    return out


def spmv_row(k: CpuKernel, scope: Scope, walk: RowWalk, vals: str, x: str, out, ctype: str, order: int,
             sizes: Dict[str, object]) -> None:
    """``out = sum_p vals[p] * x[crd[p]]`` over the row's stored entries, checking that part
    of the storage as it reads it (``spmv_row_checked``; ``order`` and ``sizes``: a
    :class:`sdfgsparse.targets.cpu.kernel_checks.RowCheck`'s order and the scalar inputs
    of :meth:`~sdfgsparse.targets.cpu.kernel_checks.RowCheck.add_scalars`). ``out``:
    ``(array, index)`` or a :class:`Local`."""
    leaf(k, scope, 'spmv_row', f'_ty = sdfgsparse::spmv_row_checked<{ctype}, {order}>(_tc, _tv, ss_in(_tx), _tlo, '
         '_thi, _tknnz, _tkext);', scalars={'_tlo': walk.lo, '_thi': walk.hi, **sizes},
         arrays={'_tc': walk.crd, '_tv': vals, '_tx': x}, outs={'_ty': out})


def spmv_row_chunks(k: CpuKernel, scope: Scope, walk: RowWalk, vals: str, x: str, out, width: int) -> None:
    """``out = sum_p vals[p] * x[crd[p]]`` over the row's stored entries (A, x and y of one
    dtype), ``width`` entries at a time (``spmv_row_chunks``; ``width`` 1: one entry per
    step); no chunk reads past the last row's end."""
    leaf(k, scope, 'spmv_row', f'_ty = sdfgsparse::spmv_row_chunks<{max(width, 1)}>(_tc, _tv, ss_in(_tx), _tlo, '
         '_thi, _tend);', scalars={'_tlo': walk.lo, '_thi': walk.hi, '_tend': walk.end},
         arrays={'_tc': walk.crd, '_tv': vals, '_tx': x}, outs={'_ty': out})


def regular_rows(k: CpuKernel, state, walk: RowWalk) -> str:
    """In ``state``, a new int64 scalar set to 1 when the rows look regular
    (``regular_rows``: a sample of :data:`REGULAR_SAMPLE` rows, at most
    :data:`REGULAR_MAX_MEAN` entries per row on average); O(1) per call. Returns its name."""
    name = k.scalar('_regular', dace.int64)
    k.set_scalar(state, name, regular_rows_call('__o', '_tpos', cpp(walk.rows)), {'_tpos': walk.pos},
                 cpp_code=True)
    return name


def spmm_row(k: CpuKernel, scope: Scope, walk: RowWalk, vals: str, b: str, y: str, kcols, b_stride, ctype: str,
             outs: bool = True) -> dace.nodes.Tasklet:
    """One whole row ``y[i, 0:K] = sum_p vals[p] * b[crd[p], 0:K]`` over the row's stored
    entries (``spmm_row``: register panels of :data:`SPMM_PANEL` vectors, ``y`` written
    once). ``kcols``, ``b_stride``: expressions (the kernel's symbols). ``outs=False``: the
    caller connects the output ``_ty`` (:func:`~sdfgsparse.targets.cpu.builder.row_epilogue`)."""
    return leaf(k, scope, 'spmm_row', spmm_row_call('_ty', '_tb', '_tc', '_tv', '_tlo', '_thi', cpp(kcols),
                                                    cpp(b_stride), ctype),
                scalars={'_tlo': walk.lo, '_thi': walk.hi}, arrays={'_tc': walk.crd, '_tv': vals, '_tb': b},
                outs={'_ty': (y, f'{walk.var}, 0:{pyexpr(sympy.sympify(kcols))}')} if outs else None)


def axpy_row(k: CpuKernel, scope: Scope, y: str, i, b: str, j, a, kcols, b_stride, ctype: str,
             guard=None) -> dace.nodes.Tasklet:
    """``y[i, 0:K] += a * b[j, 0:K]`` where ``guard`` holds (``axpy_row``; rows contiguous):
    ``i`` an index the scope's maps know (a memlet), ``j``, ``a`` and ``guard`` any kernel
    expressions (reads included; computed for every entry, used where the guard holds)."""
    locs = values(k, scope, {'_tj': (j, dace.int64), '_ta': (a, k.sdfg.arrays[y].dtype)})
    cond = _guard(k, scope, guard, locs)
    row = f'{pyexpr(sympy.sympify(i))}, 0:{pyexpr(sympy.sympify(kcols))}'
    return leaf(k, scope, 'axpy_row', cond + axpy_row_call('_ty', '_tb', '_tj', cpp(b_stride), '_ta', cpp(kcols), ctype),
                arrays={'_tb': b, '_tyi': (y, row)}, locals_in=locs, outs={'_ty': (y, row)})


def axpy_tile(k: CpuKernel, scope: Scope, y: str, ri: str, ci: str, vals: str, q: str, b: str, c0, c1, y_stride,
              b_stride, ctype: str) -> dace.nodes.Tasklet:
    """``y[ri[q], c0:c1] += vals[q] * b[ci[q], c0:c1]`` where the row ``ri[q]`` is
    data-dependent (a scatter; ``axpy_tile``): ``y`` is passed whole, so concurrent tasklets
    must touch disjoint columns (tiles). ``c0``, ``c1``: expressions of the scope."""
    qs = sympy.Symbol(q)
    locs = {'_tc0': index(k, scope, c0, 'c0'), '_tc1': index(k, scope, c1, 'c1')}
    return leaf(k, scope, 'axpy_tile',
                f'if (_ti >= 0) sdfgsparse::axpy_tile<{ctype}>(_ty, _ti, {cpp(y_stride)}, ss_in(_tb), _tj, '
                f'{cpp(b_stride)}, _ta, _tc0, _tc1);',
                scalars={'_ta': read(vals, qs), '_ti': read(ri, qs), '_tj': read(ci, qs)}, arrays={'_tb': b, '_tyi': y},
                locals_in=locs, outs={'_ty': (y, None)})


def _guard(k: CpuKernel, scope: Scope, guard, locs: Dict[str, Local]) -> str:
    """With a guard: the local ``_tg`` (0, set to 1 where the guard holds) added to
    ``locs``, and the C++ condition that puts a leaf call behind it; else ``''``."""
    if guard is None:
        return ''
    locs['_tg'] = local(k, scope, 'g', dace.int64, 0)
    emit(k, scope, [(locs['_tg'], 1, None)], guard=guard, label='guard')
    return 'if (_tg) '


def dot_rows(k: CpuKernel, scope: Scope, out: Local, x: str, i, y: str, j, kcols, x_stride, y_stride, ctype: str,
             y_pointer: bool = False, guard=None) -> dace.nodes.Tasklet:
    """``out = dot(x[i, 0:K], y[j, 0:K])`` where ``guard`` holds (rows contiguous; ``i``,
    ``j`` and ``guard`` any kernel expressions; ``dot_rows``; elsewhere ``out`` is left
    unset). ``y_pointer``: ``y`` is an int64 scalar holding the address of the rows
    (:func:`transposed_rows`)."""
    locs = values(k, scope, {'_ti': (i, dace.int64), '_tj': (j, dace.int64)})
    cond = _guard(k, scope, guard, locs)
    code = dot_rows_call('_to', '_tx', '_ti', cpp(x_stride), rows_of('_ty', ctype, y_pointer), '_tj', cpp(y_stride),
                         cpp(kcols), ctype)
    return leaf(k, scope, 'dot_rows', cond + code, arrays={'_tx': x, '_ty': y}, locals_in=locs, outs={'_to': out})


def transposed_rows(k: CpuKernel, state, src: str, rows, cols, src_stride, ctype: str) -> str:
    """In ``state``, a new int64 scalar set to the address of ``src.T`` (``src``: ``rows x
    cols``) stored by contiguous rows in a buffer of the calling thread
    (``transposed_rows``), for :func:`dot_rows` / :func:`sddmm_row` with ``y_pointer``.
    Returns its name."""
    name = k.scalar('_ytp', dace.int64)
    k.set_scalar(state, name, f'__o = sdfgsparse::transposed_rows<{ctype}>(ss_in(_ts), {cpp(rows)}, {cpp(cols)}, '
                 f'{cpp(src_stride)});', {'_ts': src}, cpp_code=True)
    return name


def sddmm_row(k: CpuKernel, scope: Scope, walk: RowWalk, vals: str, x: str, y: str, out: str, out_crd: str, kcols,
              x_stride, y_stride, ctype: str, y_pointer: bool = False) -> dace.nodes.Tasklet:
    """One whole row of SDDMM: for the row's stored entries ``p``, ``out[p] = vals[p] *
    dot(x[i, 0:K], y[crd[p], 0:K])`` and ``out_crd[p] = crd[p]`` (``sddmm_row``:
    :data:`SDDMM_GROUP` entries' dot products at a time). ``y_pointer`` as in
    :func:`dot_rows`."""
    row = index(k, scope, walk.row, 'row')
    scalars: Dict[str, object] = {'_tlo': walk.lo, '_thi': walk.hi}
    arrays = {'_tx': x, '_tc': walk.crd, '_tv': vals}
    if y_pointer:
        scalars['_ty'] = read(y, 0)
    else:
        arrays['_ty'] = y
    code = (f'sdfgsparse::sddmm_row<{SDDMM_GROUP}, {ctype}>(_to, _toc, ss_in(_tx) + _ti * ({cpp(x_stride)}), '
            f'{rows_of("_ty", ctype, y_pointer)}, {cpp(y_stride)}, _tc, _tv, _tlo, _thi, {cpp(kcols)});')
    return leaf(k, scope, 'sddmm_row', code, scalars=scalars, arrays=arrays, locals_in={'_ti': row},
                outs={'_to': (out, None), '_toc': (out_crd, None)})


def gemm_row_block(k: CpuKernel, scope: Scope, c: str, a: str, b: str, m, kd, n, lda, ldb, ldc,
                   ctype: str) -> dace.nodes.Tasklet:
    """Rows ``GEMM_ROWS*ib ...`` (at most :data:`GEMM_ROWS`, fewer at the end) of the dense
    product ``c = a @ b`` (``m x k`` times ``k x n``, rows contiguous, ``ld*`` elements
    between rows; ``gemm_row_block``: register blocks), ``ib`` the scope's map variable.
    ``c`` is passed whole; blocks write disjoint rows."""
    ib = index(k, scope, sympy.Symbol(scope.params[-1]), 'ib')
    code = (f'sdfgsparse::gemm_row_block<{GEMM_ROWS}, {ctype}>(_tc, ss_in(_ta), ss_in(_tb), _tib, {cpp(m)}, '
            f'{cpp(kd)}, {cpp(n)}, {cpp(lda)}, {cpp(ldb)}, {cpp(ldc)});')
    return leaf(k, scope, 'gemm_rows', code, arrays={'_ta': a, '_tb': b}, locals_in={'_tib': ib},
                outs={'_tc': (c, None)})
