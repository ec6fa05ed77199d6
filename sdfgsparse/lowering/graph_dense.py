"""Building blocks of the portable kernels (:mod:`sdfgsparse.lowering.graph`) whose sparse
operand meets dense matrices: products along a dense dimension (SpMM, dense x sparse,
SDDMM, sampled attention).

Built on :mod:`sdfgsparse.lowering.graph` (its locals and :func:`~sdfgsparse.lowering.graph.emit`):

*Bound coordinates* (:func:`bind`): a coordinate read from storage (``crd1(p1)``) made
the parameter of a one-iteration map, so that dense accesses through it are exact
memlets (``B[__j, h]``) rather than whole-array reads indexed in the tasklet; DaCe's
transformations then see them (``Vectorization`` matches SpMM's column map).

*Dense passes*: :func:`entry_maps` opens the maps over a sparse operand's stored entries
with an optional dense loop inside, strip-mined into tiles whose loop is hoisted
outward (:func:`tile_ranges`); :func:`spmm_pass` and :func:`sampled_pass` are the two
products the nodes share.
"""
from typing import Dict, List, Optional, Sequence, Tuple

import dace
import sympy
from dace import dtypes
from dace.symbolic import int_floor

from sdfgsparse._symbolic import pyexpr
from sdfgsparse.lowering.graph import SUM, Kernel, Local, Operand, Scope, array_reads, emit, read, reduce_local

__all__ = ['tile_ranges', 'bind', 'entry_maps', 'owns_rows', 'coordinate_binds', 'spmm_pass', 'dot_local',
           'sampled_pass']



# ---------------------------------------------------------------------- dense passes
def owns_rows(A: Operand) -> bool:
    """Whether distinct iterations of A's outermost level write distinct rows (CSR, DCSR,
    BSR, ELL, DIA; not CSC, COO or a transposed view of a row format)."""
    return A.type.fmt.outer_dim == 0


def tile_ranges(var: str, extent, tile: int) -> Tuple[Tuple[str, object, object], Tuple[str, object, object]]:
    """``for var in range(0, extent)`` strip-mined into tiles of ``tile``: the tile range
    ``(t, 0, ceil(extent / tile))`` and the range of ``var`` within tile ``t``,
    ``[t * tile, min(t * tile + tile, extent))``."""
    t = sympy.Symbol(f'{var}_tile', integer=True, nonnegative=True)
    ext = sympy.sympify(extent)
    first = t * tile
    return (str(t), 0, dace.symbolic.int_ceil(ext, tile)), (var, first, sympy.Min(first + tile, ext))


def bind(k: Kernel, scope: Scope, var: str, expr, extent) -> Optional[Scope]:
    """Make the coordinate ``expr`` (which reads storage, e.g. ``crd1(p1)``) the parameter
    ``var`` of a one-iteration sequential map opened inside ``scope``: a dynamic map range
    ``[max(expr, 0), min(expr + 1, extent))``, its reads entering the map entry as
    connectors. Dense accesses indexed by ``var`` then have exact memlets (``B[var, h]``)
    that DaCe's transformations can see (``Vectorization``), where a read through
    ``expr`` indexes the whole array in the tasklet. A coordinate outside ``[0, extent)``
    (ELL padding, a diagonal slot outside the matrix) gives an empty range, so nothing is
    read out of bounds; the levels' guards still decide what is an entry.

    Returns the scope with the map added, or None when ``expr`` reads at an index that
    itself reads (the caller then keeps the indirect access)."""
    expr = sympy.sympify(expr)
    reads = [r for r in array_reads(expr) if not any(r in array_reads(a) for a in array_reads(expr) if a is not r)]
    if not reads or any(array_reads(sympy.Tuple(*r.args)) for r in reads):
        return None
    if expr.atoms(int_floor, sympy.Mod, sympy.Min, sympy.Max):
        return None  # (a view's divided coordinate: DaCe 1.0.2 does not parse it in a map range)
    conns = {r: sympy.Symbol(f'__c{var}{n}') for n, r in enumerate(reads)}
    local_expr = expr.xreplace(conns)
    begin, end = sympy.Max(local_expr, 0), sympy.Min(local_expr + 1, sympy.sympify(extent))
    state = scope.state
    me, mx = state.add_map(f'{k.sdfg.name}_{var}', {var: f'{pyexpr(begin)}:{pyexpr(end)}'},
                           schedule=dtypes.ScheduleType.Sequential)
    for r, c in conns.items():
        arr = r.func.__name__
        me.add_in_connector(str(c))
        state.add_memlet_path(state.add_read(arr), *scope.entries, me, dst_conn=str(c),
                              memlet=dace.Memlet(f'{arr}[{", ".join(pyexpr(a) for a in r.args)}]'))
    return Scope(state, scope.entries + [me], scope.exits + [mx], scope.params + [var])


def entry_maps(k: Kernel, state, A: Operand, dense: Optional[Tuple[str, object]] = None, tile: int = 0,
               parallel: bool = True,
               binds: Sequence[Tuple[str, object, object]] = ()) -> Tuple[Scope, Dict[str, sympy.Expr]]:
    """Maps over the stored entries of ``A`` (its levels' loops), then one-iteration maps
    binding coordinates to parameters (``binds``: ``(var, expr, extent)``, see
    :func:`bind`), then, with ``dense = (var, extent)``, a sequential map over
    ``range(extent)``. Returns the scope and, for each bind, the expression that stands
    for the coordinate: its parameter where :func:`bind` could make one, else ``expr``.

    Untiled, the outer level runs in parallel (``parallel``) and the rest sequentially.
    With ``tile > 0`` the dense loop is strip-mined into tiles of ``tile`` and the tile
    loop hoisted outside the walk: where A's outer level owns the rows the tiles run in
    sequence around a parallel walk (one tile of the dense operand stays in cache for the
    whole walk), otherwise the tiles run in parallel, each walking all entries."""
    levels = [(str(l.var), l.begin, l.end) for l in A.levels if l.has_loop]
    par, seq = dtypes.ScheduleType.Default, dtypes.ScheduleType.Sequential
    within = None
    if dense is not None and tile > 0:
        tiles, within = tile_ranges(dense[0], dense[1], tile)
        ranges = [tiles] + levels
        if not parallel:
            scheds = [seq] * len(ranges)
        elif owns_rows(A) and levels:
            scheds = [seq, par] + [seq] * (len(ranges) - 2)
        else:
            scheds = [par] + [seq] * (len(ranges) - 1)
    else:
        if dense is not None:
            within = (dense[0], 0, dense[1])
        ranges = levels
        scheds = [par if parallel else seq] + [seq] * (len(ranges) - 1)
    sc = k.scope(state, ranges, scheds) if ranges else Scope.at(state)
    coords = {}
    for var, expr, extent in binds:
        bound = bind(k, sc, var, expr, extent)
        coords[var] = sympy.Symbol(var) if bound is not None else sympy.sympify(expr)
        sc = bound or sc
    if within is not None:
        sc = k.scope(state, [within], [par if not sc.entries else seq], outer=sc if sc.entries else None)
    return sc, coords


def coordinate_binds(k: Kernel, uses: Sequence[Tuple[str, object, str, int]]) -> List[Tuple[str, object, object]]:
    """The binds (:func:`bind`) for ``uses``: ``(var, coordinate, array, dim)``, a
    coordinate that indexes dimension ``dim`` of a dense ``array``. Only coordinates that
    read storage need one, and none for an array that reached the kernel as a scalar."""
    binds = []
    for var, coord, arr, dim in uses:
        desc = k.sdfg.arrays[arr]
        if array_reads(coord) and not isinstance(desc, dace.data.Scalar):
            binds.append((var, coord, desc.shape[dim]))
    return binds


def spmm_pass(k: Kernel, state, A: Operand, out: str, dense: str, extent, value=None, tile: int = 0,
              parallel: bool = True):
    """In ``state``: ``out[row, h] += value * dense[col, h]`` for every stored entry of
    ``A`` (guards applied) and ``h`` in ``range(extent)`` (``value``: A's stored value
    unless given, e.g. a probability held in a slot array). A write-conflict resolution
    (a plain update where the walk owns the rows, atomic for a scatter); ``out`` must
    hold its initial value. Coordinates read from storage are bound to map parameters
    (:func:`bind`), so both dense accesses are exact memlets."""
    h = sympy.Symbol('__h')
    binds = coordinate_binds(k, [('__i', A.row, out, 0), ('__j', A.col, dense, 0)])
    sc, coords = entry_maps(k, state, A, (str(h), extent), tile, parallel, binds)
    row, col = coords.get('__i', A.row), coords.get('__j', A.col)
    v = A.value if value is None else value
    return emit(k, sc, [((out, [row, h]), v * read(dense, col, h), SUM)], guard=A.guard, label='spmm')


def dot_local(k: Kernel, scope: Scope, row, col, X: str, Y: str, extent, y_rows: bool, dtype, guard=None) -> Local:
    """The local ``sum_h X[row, h] * Y[h, col]`` (``Y[col, h]`` when ``y_rows``: Y holds
    the right operand transposed), ``h`` in ``range(extent)``, where ``guard`` holds."""
    h = sympy.Symbol('__d')
    y = read(Y, col, h) if y_rows else read(Y, h, col)
    return reduce_local(k, scope, [(str(h), 0, extent)], read(X, row, h) * y, dtype, guard=guard, hint='dot',
                        label='dot')


def sampled_pass(k: Kernel, state, A: Operand, X: str, Y: str, extent, y_rows: bool, dtype, parallel: bool = True,
                 more=lambda score: ()):
    """In ``state``, for every stored entry of ``A`` (guards applied) its score ``s =
    A_value * sum_h X[row, h] * Y[h, col]`` (:func:`dot_local`; ``Y[col, h]`` when
    ``y_rows``), written by ``more(s)``: ``(target, value, wcr)`` assignments of one
    tasklet (:func:`emit`). Coordinates read from storage are bound to map parameters
    (:func:`bind`), so the dense accesses are exact memlets."""
    binds = coordinate_binds(k, [('__i', A.row, X, 0), ('__j', A.col, Y, 0 if y_rows else 1)])
    sc, coords = entry_maps(k, state, A, parallel=parallel, binds=binds)
    row, col = coords.get('__i', A.row), coords.get('__j', A.col)
    acc = dot_local(k, sc, row, col, X, Y, extent, y_rows, dtype, guard=A.guard)
    return emit(k, sc, list(more(A.value * acc.symbol)), guard=A.guard, locals_in=[acc], label='sampled')
