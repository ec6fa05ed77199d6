"""Portable kernels built with DaCe's SDFG API: the ``pure`` expansions.

A :class:`Kernel` is the SDFG of one library node's expansion: one array per connector
(typed like the data connected to it), states in sequence, maps and tasklets. Nothing
in it is C++ text and nothing is re-parsed from generated source, so DaCe's
transformations (``MapTiling``, ``Vectorization``, ``GPUTransformSDFG``,
``FPGATransformSDFG``), the SOAP analysis and every code generator see the whole loop
nest.

Expressions are sympy expressions in which a read of an array is the application of a
function named after it (:func:`read`, :func:`sdfgsparse.formats.levels.member`): the
iteration of a format (:meth:`sdfgsparse.formats.SparseFormat.loops`) and an operation's
body are written in the same language. :meth:`Kernel.compute` turns them into a tasklet:
a read whose index is known from the enclosing maps becomes a scalar connector with an
exact memlet (``crd1[p1]``); a read whose index is itself read from memory (``x[crd1[p1]]``)
becomes a whole-array connector indexed in the tasklet (a dynamic memlet), as DaCe's own
frontend does for indirection.

Loops over stored entries are maps: a counted level is a map over its symbolic range, a
compressed level below the root a map whose range is read from the parent's positions
(a *dynamic map range*: the bounds enter the map entry as connectors), a singleton level
no loop. Accumulations are write-conflict resolutions (``wcr``); DaCe emits them as plain
updates where the enclosing maps make the written element private (the inner maps are
sequential and the outer parameter is in the index) and as atomics elsewhere (a scatter
through a transposed view). Sequential data-dependent steps (prefix sums, appends) are
state-machine loops (:meth:`Kernel.loop`).
"""
import itertools
from typing import Dict, List, Optional, Sequence, Tuple, Union

import dace
import sympy
from dace import dtypes
from dace.sdfg import nodes
from dace.sdfg.state import SDFGState

from sdfgsparse._symbolic import integral, pyexpr
from sdfgsparse.formats import SparseType, is_sparse_desc
from sdfgsparse.formats.format import matrix_coord
from sdfgsparse.formats.levels import LevelLoop

__all__ = ['Kernel', 'connector_desc', 'Operand', 'Scope', 'Local', 'read', 'array_reads', 'emit', 'local', 'reduce_local', 'fill', 'leaf',
           'epilogue_pass', 'epilogue_code', 'chain', 'SUM',
           'MAX', 'MIN']

SUM = 'lambda a, b: a + b'
MAX = 'lambda a, b: max(a, b)'
MIN = 'lambda a, b: min(a, b)'


def read(array: str, *index) -> sympy.Expr:
    """A read of ``array[index]`` in a kernel expression."""
    return sympy.Function(array)(*(sympy.sympify(i) for i in index))


def array_reads(expr) -> List[sympy.Expr]:
    """Array reads in ``expr``, innermost first."""
    if not isinstance(expr, sympy.Basic):
        return []
    return [a for a in sympy.postorder_traversal(expr) if isinstance(a, sympy.core.function.AppliedUndef)]


def _has_read(expr) -> bool:
    return bool(array_reads(expr))


def _s(e) -> str:
    """A map range's bound (or a loop's), as DaCe's symbolic parser reads it."""
    return pyexpr(e, subset=True)


def connector_desc(sdfg: dace.SDFG, edge, rank: Optional[int] = None) -> dace.data.Data:
    """The data a node's connector takes through ``edge``: the connected descriptor, or,
    where the memlet selects part of it (``X[0:N, 0]`` once DaCe has removed the view
    ``X[:, 0]``), an array of that part's shape and the data's strides, without the unit
    dimensions beyond ``rank`` (None: without every unit dimension). Kernels built from the
    whole 2-D descriptor indexed a strided column as a matrix: a wrong result."""
    desc = sdfg.arrays[edge.data.data]
    subset = edge.data.subset
    if not isinstance(desc, dace.data.Array) or isinstance(desc, dace.data.View) or subset is None or \
            subset == dace.subsets.Range.from_array(desc):
        return desc
    sizes = subset.size()
    keep = list(range(len(sizes)))
    for d in range(len(sizes)):
        if len(keep) <= (rank or 0):
            break
        if str(sizes[d]) == '1':
            keep.remove(d)
    if not keep:
        keep = [len(sizes) - 1]
    return dace.data.Array(desc.dtype, [sizes[d] for d in keep], strides=[desc.strides[d] for d in keep],
                           total_size=desc.total_size, storage=desc.storage)


class Operand:
    """A sparse operand inside a kernel: its type and its loop nest, with storage reads
    named by the kernel's connectors (``crd1`` -> ``_A_crd1``)."""

    def __init__(self, st: SparseType, conns: Dict[str, str]):
        self.type = st
        self.conns = dict(conns)
        nest = st.fmt.loops(st.shape, st.sizes)
        ren = {sympy.Function(m): sympy.Function(c) for m, c in conns.items()}

        def rn(e):
            if not isinstance(e, sympy.Basic):
                return e
            return e.replace(lambda a: isinstance(a, sympy.core.function.AppliedUndef) and a.func in ren,
                             lambda a: ren[a.func](*a.args))

        self.levels: List[LevelLoop] = [
            LevelLoop(l.kind, rn(l.coord), rn(l.pos), l.var, rn(l.begin), rn(l.end), rn(l.guard), rn(l.base))
            for l in nest.levels
        ]
        self.coords = tuple(rn(c) for c in nest.coords)
        self.pos = rn(nest.value_pos)

    @property
    def row(self) -> sympy.Expr:
        """A matrix entry's row (:attr:`coords` of a tensor of any rank)."""
        return matrix_coord(self.coords, 0)

    @property
    def col(self) -> sympy.Expr:
        return matrix_coord(self.coords, 1)

    @property
    def vals(self) -> str:
        return self.conns['vals']

    @property
    def value(self) -> sympy.Expr:
        """The stored value of the current entry."""
        return read(self.vals, self.pos)

    @property
    def guard(self) -> Optional[sympy.Basic]:
        gs = [l.guard for l in self.levels if l.guard is not None]
        return sympy.And(*gs) if gs else None

    @property
    def nvals(self):
        st = self.type
        return st.fmt.counts(st.shape, st.sizes)[-1]


class Scope:
    """A nest of maps open in a state: ``entries``/``exits`` outermost first, and the map
    parameters in scope."""

    def __init__(self, state: SDFGState, entries, exits, params):
        self.state = state
        self.entries: List[nodes.MapEntry] = entries
        self.exits: List[nodes.MapExit] = exits
        self.params: List[str] = params

    @staticmethod
    def at(state: SDFGState) -> 'Scope':
        """The empty scope of a state (its top level, no map open)."""
        return Scope(state, [], [], [])


class Kernel:
    """The SDFG of a library node's portable expansion.

    >>> k = Kernel(node, state, sdfg)                                    # doctest: +SKIP
    >>> A = k.operand('A', node.operand_type(state, 'A'))                # doctest: +SKIP
    >>> st = k.add_state('spmv')                                         # doctest: +SKIP
    >>> sc = k.entries(st, A)                                            # doctest: +SKIP
    >>> k.compute(sc, ('_y', [A.row]), A.value * read('_x', A.col), wcr=SUM, guard=A.guard)  # doctest: +SKIP
    """

    def __init__(self, node, state: SDFGState, sdfg: dace.SDFG, name: Optional[str] = None):
        self.sdfg = dace.SDFG(name or node.label)
        self.parent = sdfg
        self._names = itertools.count()
        self._last: Optional[SDFGState] = None
        for e in list(state.in_edges(node)) + list(state.out_edges(node)):
            conn = e.dst_conn if e.dst is node else e.src_conn
            if conn and conn not in self.sdfg.arrays and e.data.data is not None:
                self._param(conn, connector_desc(sdfg, e, (getattr(node, 'dense_ranks', None) or {}).get(conn)))
        # sparse data reach the node member by member; the sizes of its structure name
        # symbols the views may not (their index dtypes are those of the structures)
        for d in sdfg.arrays.values():
            if is_sparse_desc(d):
                self._symbols(d)

    # ------------------------------------------------------------------ data
    def _symbols(self, desc):
        self._add_symbols(desc.free_symbols)

    def _add_symbols(self, symbols):
        for s in symbols:
            if str(s) not in self.sdfg.symbols:
                self.sdfg.add_symbol(str(s), self.parent.symbols.get(str(s), getattr(s, 'dtype', dace.int64)))

    def _param(self, name: str, desc: dace.data.Data):
        d = desc.clone()
        d.transient = False
        if isinstance(d, dace.data.View):  # strides kept: ``X[:, 0]`` reaches the kernel as a strided vector
            d = dace.data.Array(d.dtype, d.shape, strides=d.strides, total_size=d.total_size)
        if isinstance(d, dace.data.Array) and all(str(s) == '1' for s in d.shape):
            # a one-element operand: DaCe passes it to the nested kernel by value
            d = dace.data.Scalar(d.dtype)
        self.sdfg.add_datadesc(name, d)
        self._symbols(d)

    def operand(self, prefix: str, st: SparseType) -> Operand:
        """The sparse operand wired to the node's ``_<prefix>_<member>`` connectors, seen as ``st``."""
        self._add_symbols(s for e in (*st.shape, *getattr(st.fmt, 'symbol_exprs', ()))  # a view's bounds
                          for s in sympy.sympify(e).free_symbols)
        return Operand(st, {m: f'_{prefix}_{m}' for m in st.fmt.member_names})

    def transient(self, name: str, shape, dtype) -> str:
        name, _ = self.sdfg.add_array(name, [integral(s) for s in shape], dtype, transient=True,
                                      find_new_name=True)
        return name

    def add_state(self, label: str) -> SDFGState:
        """A new state, run after the previous one."""
        st = self.sdfg.add_state(label, is_start_block=self._last is None)
        if self._last is not None:
            self.sdfg.add_edge(self._last, st, dace.InterstateEdge())
        self._last = st
        return st

    def loop(self, label: str, var: str, begin, end) -> SDFGState:
        """A sequential loop ``for var in range(begin, end)`` after the previous state; returns
        its body state (one state: the loop body). Later states run after the loop."""
        before = self._last if self._last is not None else self.add_state(f'{label}_init')
        body = self.sdfg.add_state(f'{label}_body')
        after = self.sdfg.add_state(f'{label}_end')
        if var not in self.sdfg.symbols:
            self.sdfg.add_symbol(var, dace.int64)
        self.sdfg.add_loop(before, body, after, var, _s(begin), f'{var} < {_s(end)}', f'{var} + 1')
        self._last = after
        return body

    # ------------------------------------------------------------------ scopes
    def _access(self, state: SDFGState, name: str, cache: Dict[str, nodes.AccessNode]) -> nodes.AccessNode:
        if name not in cache:
            cache[name] = state.add_read(name)
        return cache[name]

    def scope(self, state: SDFGState, ranges: Sequence[Tuple[str, object, object]],
              schedules: Optional[Sequence] = None, outer: Optional[Scope] = None) -> Scope:
        """Open maps over ``ranges`` (``(param, begin, end)``, end exclusive), one map per
        range, inside ``outer`` if given. A bound that reads an array becomes a dynamic map
        range input. The first map is ``Default`` (parallel where DaCe may), inner ones
        ``Sequential`` unless ``schedules`` says otherwise."""
        entries = list(outer.entries) if outer else []
        exits = list(outer.exits) if outer else []
        params = list(outer.params) if outer else []
        reads: Dict[str, nodes.AccessNode] = {}
        for n, (var, b, e) in enumerate(ranges):
            sched = schedules[n] if schedules else (dtypes.ScheduleType.Default
                                                    if not entries else dtypes.ScheduleType.Sequential)
            dyn = {}
            bounds = []
            for tag, bound in (('b', b), ('e', e)):
                bound = sympy.sympify(bound)
                if _has_read(bound):
                    conn = f'__{tag}_{var}'
                    dyn[conn] = bound
                    bounds.append(conn)
                else:
                    bounds.append(_s(bound))
            me, mx = state.add_map(f'{self.sdfg.name}_{var}', {var: f'{bounds[0]}:{bounds[1]}'}, schedule=sched)
            for conn, bound in dyn.items():
                (r, ) = array_reads(bound)
                if r != bound or _has_read(sympy.Tuple(*r.args)):
                    raise NotImplementedError(f'map bound {bound}: only a direct read is supported')
                arr = r.func.__name__
                me.add_in_connector(conn)
                subset = ', '.join(_s(a) for a in r.args)
                state.add_memlet_path(self._access(state, arr, reads), *entries, me, dst_conn=conn,
                                      memlet=dace.Memlet(f'{arr}[{subset}]'))
            entries.append(me)
            exits.append(mx)
            params.append(var)
        return Scope(state, entries, exits, params)

    def grid(self, state: SDFGState, ranges: Sequence[Tuple[str, object, object]],
             block: Optional[Sequence[int]] = None) -> Scope:
        """One map over all of ``ranges`` (``(param, begin, end)``, end exclusive; bounds that
        read no array), ``Default`` schedule: where :meth:`scope` opens a map per range (the
        inner ones sequential), every dimension here is parallel. ``block``: the map's
        ``gpu_block_size`` (DaCe's GPU code puts the last range on ``threadIdx.x``)."""
        bounds = {}
        for var, b, e in ranges:
            b, e = sympy.sympify(b), sympy.sympify(e)
            if _has_read(b) or _has_read(e):
                raise NotImplementedError(f'grid bound of {var}: a bound that reads an array needs scope()')
            bounds[var] = f'{_s(b)}:{_s(e)}'
        me, mx = state.add_map(f'{self.sdfg.name}_{"".join(bounds)}', bounds, schedule=dtypes.ScheduleType.Default)
        if block is not None:
            me.map.gpu_block_size = list(block)
        return Scope(state, [me], [mx], list(bounds))

    def entries(self, state: SDFGState, A: Operand, inner: Sequence[Tuple[str, object, object]] = (),
                parallel: bool = True, outer: Optional[Scope] = None) -> Scope:
        """Maps over the stored entries of ``A`` (its levels' loops, outermost first), then
        over ``inner`` dense ranges. ``parallel=False`` makes the outer map sequential."""
        ranges = [(str(l.var), l.begin, l.end) for l in A.levels if l.has_loop] + list(inner)
        scheds = [dtypes.ScheduleType.Default if parallel and not outer else dtypes.ScheduleType.Sequential
                  ] + [dtypes.ScheduleType.Sequential] * (len(ranges) - 1)
        return self.scope(state, ranges, scheds, outer)

    def compute(self, scope: Scope, target: Tuple[str, Sequence], value, wcr: Optional[str] = None,
                guard=None, label: str = 'body', more: Sequence[Tuple[Tuple[str, Sequence], object]] = ()):
        """``target = value`` (or ``target wcr= value``) inside ``scope``, where ``guard``
        holds; ``target`` is ``(array, index expressions)``; ``more`` adds further
        ``(target, value)`` assignments to the same tasklet (same ``wcr``); see :func:`emit`."""
        return emit(self, scope, [(target, value, wcr)] + [(t, v, wcr) for t, v in more], guard=guard, label=label)

    def fill(self, state: SDFGState, arr: str, value=0):
        """``arr[...] = value`` over the whole array, in ``state``."""
        return fill(self, state, arr, value)

    def build(self) -> dace.SDFG:
        if self._last is None:
            self.add_state('empty')
        return self.sdfg


Target = Union[Tuple[str, Sequence], 'Local']


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


def chain(scope: Scope):
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
        chain(scope)
        state.add_nedge(scope.entries[-1], t, dace.Memlet())
    node = state.add_access(name)
    state.add_edge(t, '__o', node, None, dace.Memlet(f'{name}[0]'))
    return Local(name, len(scope.entries), node)


def emit(k: Kernel, scope: Scope, assigns: Sequence[Tuple[Target, object, Optional[str]]], guard=None,
         locals_in: Sequence[Local] = (), label: str = 'body', guarded_reads: bool = False) -> nodes.Tasklet:
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
    are read and written at 0. ``guarded_reads``: the values' reads happen where the guard
    holds only (all through whole-array connectors), for indices that are valid only there
    (a padding slot's column, a diagonal's column past the edge)."""
    state = scope.state
    known = set(scope.params) | set(k.sdfg.symbols)
    scalar_in: Dict[sympy.Expr, str] = {}
    whole_in: Dict[str, str] = {}
    loc_in = {l.name: (l, f'__loc{n}') for n, l in enumerate(locals_in)}

    def scalar(arr) -> bool:
        return isinstance(k.sdfg.arrays[arr], dace.data.Scalar)

    def exact(idx) -> bool:
        return all(not array_reads(i) and {str(s) for s in sympy.sympify(i).free_symbols} <= known for i in idx)

    def lower(e, hoist=True):
        e = sympy.sympify(e)
        for r in array_reads(e):
            if r in scalar_in or not (scalar(r.func.__name__) or (hoist and exact(r.args))):
                continue  # (a one-element operand is a value: always read before)
            scalar_in[r] = f'__in{len(scalar_in)}'
        e = e.xreplace({r: sympy.Symbol(c) for r, c in scalar_in.items()})
        for r in array_reads(e):
            whole_in.setdefault(r.func.__name__, f'__arr_{r.func.__name__}')
        return e.xreplace({sympy.Symbol(n): sympy.Symbol(c) for n, (_, c) in loc_in.items()})

    code, outs, temps = [], [], {}
    stores = []
    # guarded_reads: only the guard's reads before the tasklet's condition; the values'
    # reads inside it (an index that is a coordinate of a padding slot may be out of range)
    hoist = not (guarded_reads and guard is not None)
    g = lower(guard) if not hoist else None
    for n, (target, value, wcr) in enumerate(assigns):
        val = pyexpr(lower(value, hoist), whole_in)
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
            outs.append((conn, arr, ', '.join(pyexpr(i, subset=True) for i in idx), False, wcr))
            stores.append(f'{conn} = {val}')
        else:
            conn = f'__outarr{n}'
            outs.append((conn, arr, None, True, wcr))
            where = []
            for d, i in enumerate(idx):
                text = pyexpr(lower(i), whole_in)
                if array_reads(lower(i)):  # a read inside a read (V:N:M's sel[crd[p]]): DaCe's code
                    stores.append(f'__idx{n}_{d} = {text}')  # for a wcr store takes no subscript in its index
                    text = f'__idx{n}_{d}'
                where.append(text)
            stores.append(f'{conn}[{", ".join(where)}] = {val}')
    code += stores
    if hoist and guard is not None:
        g = lower(guard)
    dynamic = g is not None and g is not sympy.true
    text = (f'if {pyexpr(g, whole_in)}:\n' + '\n'.join('    ' + c for c in code)) if dynamic else '\n'.join(code)
    t = state.add_tasklet(label, set(scalar_in.values()) | set(whole_in.values()) | {c for _, c in loc_in.values()},
                          {o[0] for o in outs}, text)
    reads: Dict[str, nodes.AccessNode] = {}

    def source(arr):
        return k._access(state, arr, reads)

    for r, conn in scalar_in.items():
        arr = r.func.__name__
        subset = '0' if scalar(arr) else ', '.join(pyexpr(a, subset=True) for a in r.args)
        state.add_memlet_path(source(arr), *scope.entries, t, dst_conn=conn, memlet=dace.Memlet(f'{arr}[{subset}]'))
    for arr, conn in whole_in.items():
        state.add_memlet_path(source(arr), *scope.entries, t, dst_conn=conn,
                              memlet=dace.Memlet(data=arr, subset=dace.subsets.Range.from_array(k.sdfg.arrays[arr]),
                                                 dynamic=True))
    for l, conn in loc_in.values():
        state.add_memlet_path(l.node, *scope.entries[l.depth:], t, dst_conn=conn, memlet=dace.Memlet(f'{l.name}[0]'))
    if not scalar_in and not whole_in and not loc_in and scope.entries:
        chain(scope)
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
                 wcr: str = SUM, identity=0, guard=None, hint: str = 'acc', label: str = 'reduce',
                 guarded_reads: bool = False) -> Local:
    """A local of ``scope`` holding ``identity`` combined (``wcr``) with ``value`` over
    sequential maps on ``ranges`` opened inside ``scope``, where ``guard`` holds: e.g. the
    dot product ``sum_h X[i, h] * Y[h, j]`` of one stored entry. The accumulation ends at
    the local, so it needs no atomics whatever the enclosing maps' schedules.
    ``guarded_reads`` as for :func:`emit`."""
    acc = local(k, scope, hint, dtype, identity)
    inner = k.scope(scope.state, ranges, [dtypes.ScheduleType.Sequential] * len(ranges), outer=scope)
    scope.state.add_nedge(acc.node, inner.entries[len(scope.entries)], dace.Memlet())
    emit(k, inner, [(acc, value, wcr)], guard=guard, label=label, guarded_reads=guarded_reads)
    return acc


def fill(k: Kernel, state, arr: str, value=0):
    """In ``state``, ``arr[...] = value`` over the whole array, one parallel map per dimension."""
    shape = list(k.sdfg.arrays[arr].shape)
    idx = [f'__f{arr}{d}' for d in range(len(shape))]
    sc = k.scope(state, [(v, 0, s) for v, s in zip(idx, shape)], [dtypes.ScheduleType.Default] * len(shape))
    return emit(k, sc, [((arr, [sympy.Symbol(v) for v in idx]), value, None)], label=f'fill_{arr}')


def leaf(k: Kernel, state, label: str, call: str, reads: Sequence[str], writes: Sequence[str]):
    """In ``state``, one C++ tasklet that calls a leaf function of a target's header:
    ``call`` is the C++ statement, in which ``ss_<array>`` names each array of ``reads``
    (read whole) and ``writes`` (written whole). Arrays arrive as pointers, one-element
    arrays (scalars of the kernel) as values: ``call`` takes their address through the
    header's ``ss_in`` / ``ss_out``. Returns the tasklet."""
    t = state.add_tasklet(label, {f'ss_{a}' for a in reads}, {f'ss_{a}' for a in writes}, call,
                          language=dtypes.Language.CPP)
    for a in reads:
        state.add_edge(state.add_read(a), None, t, f'ss_{a}', dace.Memlet.from_array(a, k.sdfg.arrays[a]))
    for a in writes:
        state.add_edge(t, f'ss_{a}', state.add_write(a), None, dace.Memlet.from_array(a, k.sdfg.arrays[a]))
    return t


def epilogue_code(k: Kernel, node, value: str, out: str, index: Sequence[str]) -> Tuple[str, Dict[str, dace.Memlet]]:
    """``(code, inputs)`` of a Python tasklet ``out = epilogue(value)`` applying ``node``'s
    fused epilogue (:mod:`sdfgsparse.lowering.epilogue`) at output ``index`` (kernel
    expressions of the output indices): ``inputs`` maps the tasklet's connectors of the
    epilogue's extra inputs to their memlets — an array read whole and indexed in the code
    by its template, a one-element input (a scalar of the kernel) read as a value."""
    from sdfgsparse.lowering.epilogue import VALUE, compose, epilogue_expression
    inputs = dict(node.epilogue_inputs)
    scalars = {c for c in inputs if isinstance(k.sdfg.arrays[c], dace.data.Scalar)}
    renamed = compose(f'__o = {node.epilogue}', VALUE, {c: f'__sc{c}' if c in scalars else f'__arr{c}' for c in inputs},
                      VALUE)
    expr = epilogue_expression(renamed, value, {f'__arr{c}': t for c, t in inputs.items() if c not in scalars}, index)
    memlets = {(f'__sc{c}' if c in scalars else f'__arr{c}'):
               (dace.Memlet(f'{c}[0]') if c in scalars else
                dace.Memlet(data=c, subset=dace.subsets.Range.from_array(k.sdfg.arrays[c]), dynamic=True))
               for c in inputs}
    return f'{out} = {expr}', memlets


def epilogue_pass(k: Kernel, node, target: str, shape: Sequence):
    """A new state with a parallel pass applying ``node``'s fused epilogue (see
    :mod:`sdfgsparse.lowering.epilogue`) to every element of ``target`` (nothing when the
    node has none); the extra inputs as :func:`epilogue_code` reads them."""
    if not getattr(node, 'epilogue', ''):
        return
    state = k.add_state('epilogue')
    idx = [f'__z{d}' for d in range(len(shape))]
    sc = k.scope(state, [(v, 0, s) for v, s in zip(idx, shape)], [dtypes.ScheduleType.Default] * len(shape))
    code, inputs = epilogue_code(k, node, '__v', '__o', idx)
    t = state.add_tasklet('epilogue', {'__v'} | set(inputs), {'__o'}, code)
    one = isinstance(k.sdfg.arrays[target], dace.data.Scalar)  # a one-element result
    el = f'{target}[0]' if one else f'{target}[{", ".join(idx)}]'
    state.add_memlet_path(state.add_read(target), *sc.entries, t, dst_conn='__v', memlet=dace.Memlet(el))
    for conn, m in inputs.items():
        state.add_memlet_path(state.add_read(m.data), *sc.entries, t, dst_conn=conn, memlet=m)
    state.add_memlet_path(t, *reversed(sc.exits), state.add_write(target), src_conn='__o', memlet=dace.Memlet(el))
