"""Building blocks of the portable kernels (:mod:`sdfgsparse.lowering.graph`) whose sparse
operand meets dense matrices: products along a dense dimension (SpMM, dense x sparse,
SDDMM, sampled attention).

What :class:`~sdfgsparse.lowering.graph.Kernel` does not offer is added here, on top of
it (maps and Python tasklets only, no C++ text):

*Locals* (:class:`Local`): a transient scalar that lives inside a map scope, one per
iteration of the enclosing maps (DaCe allocates a transient in the innermost scope that
holds all its accesses). :func:`reduce_local` accumulates into one over a nest of inner
sequential maps with a write-conflict resolution that ends at the local, so no atomics
and no shared workspace (a dot product per stored entry); :func:`emit` writes a tasklet
that reads locals and writes arrays (each output with its own ``wcr``) or locals.

*Bound coordinates* (:func:`bind`): a coordinate read from storage (``crd1(p1)``) made
the parameter of a one-iteration map, so that dense accesses through it are exact
memlets (``B[__j, h]``) rather than whole-array reads indexed in the tasklet; DaCe's
transformations then see them (``Vectorization`` matches SpMM's column map).

*Dense passes*: :func:`entry_maps` opens the maps over a sparse operand's stored entries
with an optional dense loop inside, strip-mined into tiles whose loop is hoisted
outward (:func:`tile_ranges`); :func:`spmm_pass` and :func:`sampled_pass` are the two
products the nodes share.

Two helpers stand in for :class:`Kernel` methods that do not fit here (see their
docstrings): :func:`fill` (a 2-D :meth:`Kernel.fill` leaves its inner map unreachable)
and :func:`epilogue_pass` (``graph.epilogue_pass`` does not rename an epilogue's extra
inputs).
"""
from typing import Dict, List, Optional, Sequence, Tuple, Union

import dace
import sympy
from dace import dtypes
from dace.sdfg import nodes

from sdfgsparse._symbolic import pyexpr
from sdfgsparse.lowering.graph import SUM, Kernel, Operand, Scope, read

__all__ = ['Local', 'local', 'reduce_local', 'emit', 'fill', 'epilogue_pass', 'tile_ranges', 'bind', 'entry_maps',
           'owns_rows', 'coordinate_binds', 'spmm_pass', 'dot_local', 'sampled_pass']

Target = Union[Tuple[str, Sequence], 'Local']


def _reads(expr) -> List[sympy.Expr]:
    """Array reads (applications of undefined functions) in ``expr``, innermost first."""
    if not isinstance(expr, sympy.Basic):
        return []
    return [a for a in sympy.postorder_traversal(expr) if isinstance(a, sympy.core.function.AppliedUndef)]


class Local:
    """A transient scalar inside a scope: ``name`` (a symbol of that name stands for its
    value in kernel expressions), ``depth`` (how many maps of the scope enclose it) and
    ``node``, the access node holding its latest value."""

    def __init__(self, name: str, depth: int, node: nodes.AccessNode):
        self.name = name
        self.depth = depth
        self.node = node

    @property
    def symbol(self) -> sympy.Symbol:
        return sympy.Symbol(self.name)


def _chain(scope: Scope):
    """Connect each map entry of ``scope`` to the next one by an empty memlet where no edge
    does yet: a body without inputs reaches only the innermost entry, and DaCe needs every
    nested map reachable from its parent's entry."""
    state = scope.state
    for outer, inner in zip(scope.entries, scope.entries[1:]):
        if not state.edges_between(outer, inner):
            state.add_nedge(outer, inner, dace.Memlet())


def local(k: Kernel, scope: Scope, hint: str, dtype, value=0) -> Local:
    """A new local of ``dtype`` inside ``scope``, set to ``value`` (a tasklet with no
    inputs, ordered after the scope's innermost map entry)."""
    name, _ = k.sdfg.add_scalar(f'__{hint}', dtype, transient=True, find_new_name=True)
    state = scope.state
    t = state.add_tasklet(f'init_{name}', set(), {'__o'}, f'__o = {pyexpr(sympy.sympify(value))}')
    if scope.entries:
        _chain(scope)
        state.add_nedge(scope.entries[-1], t, dace.Memlet())
    node = state.add_access(name)
    state.add_edge(t, '__o', node, None, dace.Memlet(f'{name}[0]'))
    return Local(name, len(scope.entries), node)


def emit(k: Kernel, scope: Scope, assigns: Sequence[Tuple[Target, object, Optional[str]]], guard=None,
         locals_in: Sequence[Local] = (), label: str = 'body') -> nodes.Tasklet:
    """One tasklet inside ``scope`` doing every ``(target, value, wcr)`` of ``assigns``
    where ``guard`` holds (each ``target wcr= value``, or ``target = value`` for a wcr of
    None). A target is ``(array, index expressions)`` or a :class:`Local` (written through
    the maps opened inside it; its ``node`` then moves to the new access node). Values may
    read the ``locals_in`` (by their :attr:`Local.symbol`). All values are computed (each
    distinct one once) before any target is written, so a target may be a slot that the
    values read (an update in place).

    Reads follow :meth:`Kernel.compute`: a read at an index known from the scope's maps is
    a scalar connector with an exact memlet, any other read indexes the whole array in
    the tasklet (a dynamic memlet); one-element operands reaching the kernel as scalars
    are read and written at 0."""
    state = scope.state
    known = set(scope.params) | set(k.sdfg.symbols)
    scalar_in: Dict[sympy.Expr, str] = {}
    whole_in: Dict[str, str] = {}
    loc_in = {l.name: (l, f'__loc{n}') for n, l in enumerate(locals_in)}

    def scalar(arr) -> bool:
        return isinstance(k.sdfg.arrays[arr], dace.data.Scalar)

    def exact(idx) -> bool:
        return all(not _reads(i) and {str(s) for s in sympy.sympify(i).free_symbols} <= known for i in idx)

    def lower(e):
        e = sympy.sympify(e)
        for r in _reads(e):
            if r in scalar_in or not (scalar(r.func.__name__) or exact(r.args)):
                continue
            scalar_in[r] = f'__in{len(scalar_in)}'
        e = e.xreplace({r: sympy.Symbol(c) for r, c in scalar_in.items()})
        for r in _reads(e):
            whole_in.setdefault(r.func.__name__, f'__arr_{r.func.__name__}')
        return e.xreplace({sympy.Symbol(n): sympy.Symbol(c) for n, (_, c) in loc_in.items()})

    code, outs, temps = [], [], {}
    stores = []
    for n, (target, value, wcr) in enumerate(assigns):
        val = pyexpr(lower(value), whole_in)
        if len(assigns) > 1:  # every value is computed before any is stored (a slot may be updated in place)
            if val not in temps:
                temps[val] = f'__t{len(temps)}'
                code.append(f'{temps[val]} = {val}')
            val = temps[val]
        if isinstance(target, Local):
            conn = f'__out{n}'
            outs.append((conn, target, None, False, wcr))
            stores.append(f'{conn} = {val}')
            continue
        arr, idx = target
        idx = [sympy.Integer(0)] if scalar(arr) else [sympy.sympify(i) for i in idx]
        if exact(idx):
            conn = f'__out{n}'
            outs.append((conn, arr, ', '.join(pyexpr(i) for i in idx), False, wcr))
            stores.append(f'{conn} = {val}')
        else:
            conn = f'__outarr{n}'
            outs.append((conn, arr, None, True, wcr))
            stores.append(f'{conn}[{", ".join(pyexpr(lower(i), whole_in) for i in idx)}] = {val}')
    code += stores
    g = lower(guard) if guard is not None else None
    dynamic = g is not None and g is not sympy.true
    text = (f'if {pyexpr(g, whole_in)}:\n' + '\n'.join('    ' + c for c in code)) if dynamic else '\n'.join(code)
    t = state.add_tasklet(label, set(scalar_in.values()) | set(whole_in.values()) | {c for _, c in loc_in.values()},
                          {o[0] for o in outs}, text)
    reads: Dict[str, nodes.AccessNode] = {}

    def source(arr):
        if arr not in reads:
            reads[arr] = state.add_read(arr)
        return reads[arr]

    for r, conn in scalar_in.items():
        arr = r.func.__name__
        subset = '0' if scalar(arr) else ', '.join(pyexpr(a) for a in r.args)
        state.add_memlet_path(source(arr), *scope.entries, t, dst_conn=conn, memlet=dace.Memlet(f'{arr}[{subset}]'))
    for arr, conn in whole_in.items():
        state.add_memlet_path(source(arr), *scope.entries, t, dst_conn=conn,
                              memlet=dace.Memlet(data=arr, subset=dace.subsets.Range.from_array(k.sdfg.arrays[arr]),
                                                 dynamic=True))
    for l, conn in loc_in.values():
        state.add_memlet_path(l.node, *scope.entries[l.depth:], t, dst_conn=conn, memlet=dace.Memlet(f'{l.name}[0]'))
    if not scalar_in and not whole_in and not loc_in and scope.entries:
        _chain(scope)
        state.add_nedge(scope.entries[-1], t, dace.Memlet())
    writes: Dict[str, nodes.AccessNode] = {}
    for conn, target, subset, whole, wcr in outs:
        if isinstance(target, Local):
            node = state.add_access(target.name)
            state.add_memlet_path(t, *reversed(scope.exits[target.depth:]), node, src_conn=conn,
                                  memlet=dace.Memlet(f'{target.name}[0]', wcr=wcr, dynamic=dynamic))
            target.node = node
            continue
        if target not in writes:
            writes[target] = state.add_write(target)
        if whole:
            m = dace.Memlet(data=target, subset=dace.subsets.Range.from_array(k.sdfg.arrays[target]), dynamic=True,
                            wcr=wcr)
        else:
            m = dace.Memlet(f'{target}[{subset}]', wcr=wcr, dynamic=dynamic)
        state.add_memlet_path(t, *reversed(scope.exits), writes[target], src_conn=conn, memlet=m)
    return t


def reduce_local(k: Kernel, scope: Scope, ranges: Sequence[Tuple[str, object, object]], value, dtype,
                 wcr: str = SUM, identity=0, guard=None, hint: str = 'acc', label: str = 'reduce') -> Local:
    """A local of ``scope`` holding ``identity`` combined (``wcr``) with ``value`` over
    sequential maps on ``ranges`` opened inside ``scope``, where ``guard`` holds: e.g. the
    dot product ``sum_h X[i, h] * Y[h, j]`` of one stored entry. The accumulation ends at
    the local, so it needs no atomics whatever the enclosing maps' schedules."""
    acc = local(k, scope, hint, dtype, identity)
    inner = k.scope(scope.state, ranges, [dtypes.ScheduleType.Sequential] * len(ranges), outer=scope)
    scope.state.add_nedge(acc.node, inner.entries[len(scope.entries)], dace.Memlet())
    emit(k, inner, [(acc, value, wcr)], guard=guard, label=label)
    return acc


def fill(k: Kernel, state, arr: str, value=0):
    """In ``state``, ``arr[...] = value`` over the whole array, one parallel map per
    dimension (:meth:`Kernel.fill` leaves the inner maps of a 2-D fill unreachable from the
    outer one's entry, which DaCe rejects)."""
    shape = list(k.sdfg.arrays[arr].shape)
    idx = [f'__f{arr}{d}' for d in range(len(shape))]
    sc = k.scope(state, [(v, 0, s) for v, s in zip(idx, shape)], [dtypes.ScheduleType.Default] * len(shape))
    return emit(k, sc, [((arr, [sympy.Symbol(v) for v in idx]), value, None)], label=f'fill_{arr}')


def epilogue_pass(k: Kernel, node, target: str, shape: Sequence):
    """A new state with a parallel pass applying ``node``'s fused epilogue (see
    :mod:`sdfgsparse.lowering.epilogue`) to every element of ``target`` (nothing when the
    node has none). Each extra input ``_epi_<n>`` is read through a whole-array connector
    ``__arr_epi_<n>`` indexed by its template (``graph.epilogue_pass`` leaves the input's
    name in the code unrenamed, so the tasklet reads the outer pointer)."""
    from sdfgsparse.lowering.epilogue import VALUE, compose, epilogue_expression
    if not getattr(node, 'epilogue', ''):
        return
    state = k.add_state('epilogue')
    idx = [f'__z{d}' for d in range(len(shape))]
    sc = k.scope(state, [(v, 0, s) for v, s in zip(idx, shape)], [dtypes.ScheduleType.Default] * len(shape))
    inputs = dict(node.epilogue_inputs)
    renamed = compose(f'__o = {node.epilogue}', VALUE, {c: f'__arr{c}' for c in inputs}, VALUE)
    expr = epilogue_expression(renamed, '__v', {f'__arr{c}': t for c, t in inputs.items()}, idx)
    t = state.add_tasklet('epilogue', {'__v'} | {f'__arr{c}' for c in inputs}, {'__o'}, f'__o = {expr}')
    el = f'{target}[{", ".join(idx)}]'
    state.add_memlet_path(state.add_read(target), *sc.entries, t, dst_conn='__v', memlet=dace.Memlet(el))
    for c in inputs:
        state.add_memlet_path(state.add_read(c), *sc.entries, t, dst_conn=f'__arr{c}',
                              memlet=dace.Memlet(data=c, subset=dace.subsets.Range.from_array(k.sdfg.arrays[c]),
                                                 dynamic=True))
    state.add_memlet_path(t, *reversed(sc.exits), state.add_write(target), src_conn='__o', memlet=dace.Memlet(el))


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
    reads = [r for r in _reads(expr) if not any(r in _reads(a) for a in _reads(expr) if a is not r)]
    if not reads or any(_reads(sympy.Tuple(*r.args)) for r in reads):
        return None
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
    sc = k.scope(state, ranges, scheds) if ranges else Scope(state, [], [], [])
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
        if _reads(coord) and not isinstance(desc, dace.data.Scalar):
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
