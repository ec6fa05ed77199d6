"""The cpu kernels' SDFG builder: :class:`~sdfgsparse.lowering.graph.Kernel` (the ``pure``
expansions' builder) and what the tuned kernels add to it.

A cpu kernel is an SDFG built with DaCe's API, as a ``pure`` one: maps over the levels of
the sparse operands (:meth:`CpuKernel.entries`, :meth:`CpuKernel.rows`), sequential loops,
branches chosen per call (:meth:`CpuKernel.branch`) and tasklets. Where the loop nest of a
row is where the time goes (the SIMD row walks, register panels and gathers of
``include/*.h``), the body of a row is one C++ tasklet that calls a leaf function of those
headers (:func:`leaf`): a one-line call whose scalar inputs are exact memlets (``pos[i]``,
``pos[i + 1]``) and whose array inputs are dynamic memlets of the whole array (the row's
entries, a data-dependent part). Scheduling is recorded on the SDFG: rows whose costs
differ are scheduled dynamically (:meth:`CpuKernel.balance`), and a row loop's thread
count is chosen per call (:meth:`CpuKernel.team`, :mod:`sdfgsparse.targets.cpu.team`).
Nothing is written as Python source and parsed.

The generic walks (:func:`accumulate`, :func:`coordinates`) take every catalogue format:
the loops come from the format's level description (:meth:`SparseFormat.loops`), as in
the ``pure`` expansions, with the cpu kernels' choices of how the outer loop runs
(:func:`strategy`): a register accumulator per row where the outer level is the rows, in
place updates where it owns them, the dense columns in parallel around a flat walk where
rows are scattered.
"""
from typing import Dict, List, Optional, Sequence, Tuple

import dace
import sympy
from dace import dtypes
from dace.codegen.targets.cpp import sym2cpp
from dace.sdfg import nodes

from sdfgsparse._symbolic import pyexpr
from sdfgsparse.formats import SparseType, is_sparse_desc
from sdfgsparse.formats.levels import COUNTED, SEGMENT, member
from sdfgsparse.lowering.graph import (SUM, Kernel, Local, Operand, Scope, chain, emit, epilogue_code, epilogue_pass,
                                       local, read, reduce_local)
from sdfgsparse.lowering.graph_compress import ROW, Rows, scan, sequential_scan
from sdfgsparse.targets.cpu import storage_check
from sdfgsparse.targets.cpu.team import TeamWork, add_teams, row_maps

__all__ = ['CpuKernel', 'cpp', 'leaf', 'strategy', 'row_walk', 'accumulate', 'coordinates', 'store', 'update',
           'row_epilogue', 'ROW_CHUNK', 'RowWalk', 'schedule_rows', 'plain_row_walk', 'count_fill', 'ROW_STEPS']

#: Rows per chunk of a dynamically scheduled row map (:meth:`CpuKernel.balance`). Against
#: OpenMP's static halves it wins on power-law rows and loses a few percent where rows cost
#: alike; chunks of 2048 rows lost on small matrices (figures: docs/performance.md).
ROW_CHUNK = 256


def schedule_rows(sdfg: dace.SDFG, variables) -> None:
    """Schedule the outermost parallel maps of ``sdfg`` over ``variables`` dynamically,
    :data:`ROW_CHUNK` iterations at a time."""
    for _, entry in row_maps(sdfg, variables) if variables else ():
        entry.map.omp_schedule = dtypes.OMPScheduleType.Dynamic
        entry.map.omp_chunk_size = ROW_CHUNK


def cpp(e) -> str:
    """The C++ text of a size or index expression (``Min`` / ``Max`` / ``int_floor`` as
    DaCe's runtime spells them)."""
    return sym2cpp(dace.symbolic.pystr_to_symbolic(e) if isinstance(e, str) else sympy.sympify(e))


class CpuKernel(Kernel):
    """The SDFG of one cpu expansion.

    >>> k = CpuKernel(node, state, sdfg)                                   # doctest: +SKIP
    >>> A = k.operand('A', node.operand_type(state, 'A'))                  # doctest: +SKIP
    >>> st = k.add_state('rows')                                           # doctest: +SKIP
    >>> walk = row_walk(A)                                                 # doctest: +SKIP
    >>> sc = k.rows(st, walk, scale='1')                                   # doctest: +SKIP
    >>> leaf(k, sc, 'row', '_ty = f(_tlo, _thi, _tc, _tv, ss_in(_tx));',  # doctest: +SKIP
    ...      scalars={'_tlo': walk.lo, '_thi': walk.hi}, arrays={'_tc': walk.crd, '_tv': A.vals, '_tx': '_x'},
    ...      outs={'_ty': ('_y', [walk.row])})
    """

    def __init__(self, node, state, sdfg: dace.SDFG, name: Optional[str] = None):
        super().__init__(node, state, sdfg, name)
        # sparse data reach the node member by member: their storage checks go along
        self.sparse_operands = [d for d in sdfg.arrays.values() if is_sparse_desc(d)]
        self.balanced: set = set()
        self.teams: Dict[str, TeamWork] = {}

    def balance(self, var: str) -> None:
        """Schedule the outermost parallel maps over ``var`` (rows whose costs differ: a
        power-law row length) dynamically, :data:`ROW_CHUNK` iterations at a time."""
        self.balanced.add(var)

    def team(self, var: str, work: TeamWork) -> None:
        """Choose the thread count of the outermost parallel maps over ``var`` per call
        (:mod:`sdfgsparse.targets.cpu.team`)."""
        self.teams[var] = work

    def scalar(self, hint: str, dtype) -> str:
        """A new transient scalar of the kernel."""
        name, _ = self.sdfg.add_scalar(hint, dtype, transient=True, find_new_name=True)
        return name

    def set_scalar(self, state, name: str, code: str, reads: Dict[str, str] = None, cpp_code: bool = False):
        """In ``state``, ``name = code`` by one tasklet whose inputs are ``reads``
        (connector -> an array read whole); ``cpp_code``: ``code`` is a C++ statement
        assigning ``__o``."""
        reads = reads or {}
        t = state.add_tasklet(f'set_{name}', set(reads), {'__o'}, code if cpp_code else f'__o = {code}',
                              language=dtypes.Language.CPP if cpp_code else dtypes.Language.Python)
        for conn, arr in reads.items():
            state.add_edge(state.add_read(arr), None, t, conn, dace.Memlet.from_array(arr, self.sdfg.arrays[arr]))
        state.add_edge(t, '__o', state.add_write(name), None, dace.Memlet(f'{name}[0]'))
        return t

    def branch(self, condition: str, then, orelse) -> None:
        """``if condition: then(state) else: orelse(state)`` after the previous state:
        each callable fills the first state of its branch (and may add more states with
        :meth:`add_state`); later states run after both."""
        before = self._last if self._last is not None else self.add_state('branch')
        end = self.sdfg.add_state('branch_end')
        for n, (cond, fill_branch) in enumerate(((condition, then), (f'not ({condition})', orelse))):
            first = self.sdfg.add_state(f'branch{n}')
            self.sdfg.add_edge(before, first, dace.InterstateEdge(condition=cond))
            self._last = first
            fill_branch(first)
            self.sdfg.add_edge(self._last, end, dace.InterstateEdge())
        self._last = end

    def rows(self, state, walk: 'RowWalk', scale=1) -> Scope:
        """The parallel map over the rows of a :func:`row_walk` in ``state`` (a state of its
        own: the team's states go around it). Rows are taken in dynamic chunks, and the
        thread count is chosen per call from the walk's entries times ``scale`` (the
        multiply-adds per entry, an expression of the kernel's symbols)."""
        var = walk.var
        self.balance(var)
        self.team(var, TeamWork(walk.pos, pyexpr(sympy.sympify(walk.rows)), pyexpr(sympy.sympify(scale))))
        return self.scope(state, [(var, 0, walk.rows)], [dtypes.ScheduleType.Default])

    def scan(self, label: str, counts: str, positions: str, n) -> None:
        """:func:`~sdfgsparse.lowering.graph_compress.scan` as one sequential loop (a cpu
        kernel's loop of states is a C loop; the pieces' parallel maps would cost two OpenMP
        regions per prefix sum)."""
        sequential_scan(self, label, counts, positions, n)

    def row_step(self, label: str, kind: str, rows, out: Rows, inputs: Dict[str, str], fill_inputs: Dict[str, str],
                 sign: int = 1) -> None:
        """The count and fill steps of :func:`~sdfgsparse.lowering.graph_compress.row_step`
        as calls of the leaves of ``include/sdfgsparse_row_union.h`` (:data:`ROW_STEPS`)."""
        if kind not in ROW_STEPS:
            raise ValueError(f'row_step: unknown kind {kind!r}; use one of {sorted(ROW_STEPS)}')
        count, fill = ROW_STEPS[kind]
        vt = self.sdfg.arrays[out.vals].dtype
        count_fill(self, label, rows, out, count, fill.format(v=vt.ctype, sign=int(sign)), inputs, fill_inputs)

    def capacity(self, label: str, out: Rows) -> str:
        """A new scalar set, in a state of its own, to the capacity of ``out`` (its ``crd``'s
        length) by a Python tasklet: DaCe 1.0.2 passes a kernel only the symbols its memlets
        and Python tasklets use, and the enclosing program allocates an intermediate result
        from the capacity's symbols. The fill leaves take it (``_tcap``)."""
        cap = self.scalar(f'{label}_cap', dace.int64)
        size = self.sdfg.arrays[out.crd].shape[0]
        self.set_scalar(self.add_state(f'{label}_capacity'), cap, pyexpr(sympy.sympify(size)))
        return cap

    def concat_fill(self, label: str, parts, cur: str, offsets: str, out: Rows) -> None:
        """The fill step of :func:`~sdfgsparse.lowering.graph_shape.concat_rows`: per part, a
        parallel map over its rows, each copied at its cursor ``cur[row offset + r]`` by the
        ``copy_row`` leaf (one ``memcpy`` of the indices and one of the values where the
        column offset is 0 and the types agree), the cursor advanced."""
        cap = self.capacity(label, out)
        vt = self.sdfg.arrays[out.vals].dtype
        for p, (src, r0, _) in enumerate(parts):
            state = self.add_state(f'{label}_fill{p}')
            var = f'{label}_r{p}'
            sc = self.scope(state, [(var, 0, src.rows)], [dtypes.ScheduleType.Default])
            self.balance(var)
            r = sympy.Symbol(var)
            at = sympy.sympify(r0) + r
            leaf(self, sc, f'{label}_fill{p}',
                 f'_tcur = sdfgsparse::copy_row<{vt.ctype}>(_oc, _ov, _ap, _ac, _av, _ti, _tcin, _tco, _tcap);',
                 scalars={'_tcin': read(cur, at), '_tco': read(offsets, p), '_tcap': read(cap, 0)},
                 arrays={'_ap': src.pos, '_ac': src.crd, '_av': src.vals},
                 locals_in={'_ti': local(self, sc, 'row', dace.int64, r)},
                 outs={'_oc': (out.crd, None), '_ov': (out.vals, None), '_tcur': (cur, [at])})

    def build(self) -> dace.SDFG:
        sdfg = super().build()
        schedule_rows(sdfg, self.balanced)
        add_teams(sdfg, self.teams)
        for d in self.sparse_operands:  # the warm call path's argument checks
            storage_check.add_to(sdfg, d)
        return sdfg


#: The leaf calls of the row steps (:meth:`CpuKernel.row_step`): count, fill.
ROW_STEPS = {
    'dedupe': ('sdfgsparse::dedupe_count(_ap, _ac, _ti)',
               'sdfgsparse::dedupe_fill<{v}>(_oc, _ov, _ap, _ac, _av, _op, _ti, _tcap)'),
    'union': ('sdfgsparse::union_count(_ap, _ac, _bp, _bc, _ti)',
              'sdfgsparse::union_fill<{v}>(_oc, _ov, _ap, _ac, _av, _bp, _bc, _bv, _op, _ti, _tcap, {sign})'),
    'intersect': ('sdfgsparse::intersect_count(_ap, _ac, _bp, _bc, _ti)',
                  'sdfgsparse::intersect_fill<{v}>(_oc, _ov, _ap, _ac, _av, _bp, _bc, _bv, _op, _ti, _tcap)'),
}


def _whole(k: Kernel, arr: str) -> dace.Memlet:
    return dace.Memlet(data=arr, subset=dace.subsets.Range.from_array(k.sdfg.arrays[arr]), dynamic=True)


def _subset(k: Kernel, arr: str, index) -> str:
    if isinstance(k.sdfg.arrays[arr], dace.data.Scalar):
        return f'{arr}[0]'
    if isinstance(index, str):
        return f'{arr}[{index}]'
    return f'{arr}[{", ".join(pyexpr(sympy.sympify(i), subset=True) for i in index)}]'


def leaf(k: Kernel, scope: Scope, label: str, code: str, scalars: Dict[str, object] = None,
         arrays: Dict[str, str] = None, outs: Dict[str, object] = None,
         locals_in: Dict[str, Local] = None) -> nodes.Tasklet:
    """One C++ tasklet inside ``scope`` (or at a state's top level: a :class:`Scope`
    without maps) calling a leaf of ``include/*.h``: ``code`` is one statement.

    :param scalars: connector -> a read of one element (``read('_A_pos1', i)``, a sympy
                    application) whose index the enclosing maps know (an exact memlet).
    :param arrays: connector -> an array read whole (a dynamic memlet: the tasklet reads a
                   data-dependent part, e.g. a row's entries), or ``(array, subset)``
                   (a part the maps know, as for ``outs``).
    :param outs: connector -> ``(array, index)``: ``index`` a list of index expressions
                 (one element), a subset string (``'i, 0:K'``: part of a row), or None
                 (the whole array, dynamic: the caller guarantees that concurrent tasklets
                 write disjoint parts); or a :class:`Local` of the scope (its node then
                 moves to the one written here).
    :param locals_in: connector -> a :class:`Local` of the scope read by the tasklet.
    """
    state = scope.state
    scalars, arrays, outs, locals_in = scalars or {}, arrays or {}, outs or {}, locals_in or {}
    t = state.add_tasklet(label, set(scalars) | set(arrays) | set(locals_in), set(outs), code,
                          language=dtypes.Language.CPP)
    reads: Dict[str, nodes.AccessNode] = {}

    def source(arr):
        return k._access(state, arr, reads)

    for conn, r in scalars.items():
        arr = r.func.__name__
        subset = _subset(k, arr, list(r.args))
        state.add_memlet_path(source(arr), *scope.entries, t, dst_conn=conn, memlet=dace.Memlet(subset))
    for conn, arr in arrays.items():
        if isinstance(arr, tuple):  # (array, subset): a part the maps know
            arr, part = arr
            m = dace.Memlet(_subset(k, arr, part))
        else:
            m = _whole(k, arr)
        state.add_memlet_path(source(arr), *scope.entries, t, dst_conn=conn, memlet=m)
    for conn, l in locals_in.items():
        state.add_memlet_path(l.node, *scope.entries[l.depth:], t, dst_conn=conn, memlet=dace.Memlet(f'{l.name}[0]'))
    if not (scalars or arrays or locals_in) and scope.entries:
        chain(scope)
        state.add_nedge(scope.entries[-1], t, dace.Memlet())
    writes: Dict[str, nodes.AccessNode] = {}
    for conn, target in outs.items():
        if isinstance(target, Local):
            node = state.add_access(target.name)
            state.add_memlet_path(t, *reversed(scope.exits[target.depth:]), node, src_conn=conn,
                                  memlet=dace.Memlet(f'{target.name}[0]'))
            target.node = node
            continue
        arr, index = target
        if arr not in writes:
            writes[arr] = state.add_write(arr)
        if index is None:
            m = _whole(k, arr)
        else:
            m = dace.Memlet(_subset(k, arr, index))
        state.add_memlet_path(t, *reversed(scope.exits), writes[arr], src_conn=conn, memlet=m)
    return t


def store(k: Kernel, scope: Scope, source: Local, target: str, index: Sequence, node=None) -> nodes.Tasklet:
    """``target[index] = source`` inside ``scope`` (``source`` a local of the scope), through
    ``node``'s fused epilogue when it has one."""
    idx = [pyexpr(sympy.sympify(i)) for i in index]
    if node is not None and getattr(node, 'epilogue', ''):
        code, inputs = epilogue_code(k, node, '__v', '__o', idx)
    else:
        code, inputs = '__o = __v', {}
    state = scope.state
    t = state.add_tasklet('store', {'__v'} | set(inputs), {'__o'}, code)
    state.add_memlet_path(source.node, *scope.entries[source.depth:], t, dst_conn='__v',
                          memlet=dace.Memlet(f'{source.name}[0]'))
    for conn, m in inputs.items():
        state.add_memlet_path(state.add_read(m.data), *scope.entries, t, dst_conn=conn, memlet=m)
    state.add_memlet_path(t, *reversed(scope.exits), state.add_write(target), src_conn='__o',
                          memlet=dace.Memlet(_subset(k, target, index)))
    return t


def row_epilogue(k: Kernel, scope: Scope, tasklet: nodes.Tasklet, conn: str, target: str, row, extent, node) -> None:
    """``tasklet`` (inside ``scope``) writes the row ``target[row, 0:extent]`` through
    ``conn``; this applies ``node``'s epilogue to that row right after it, in the same
    scope (a sequential map over the row's elements; the row is still in cache)."""
    state = scope.state
    part = f'{target}[{pyexpr(sympy.sympify(row))}, 0:{pyexpr(sympy.sympify(extent))}]'
    tasklet.add_out_connector(conn)
    mid = state.add_access(target)
    state.add_edge(tasklet, conn, mid, None, dace.Memlet(part))
    inner = k.scope(state, [('__e', 0, extent)], [dtypes.ScheduleType.Sequential], outer=scope)
    element = f'{target}[{pyexpr(sympy.sympify(row))}, __e]'
    code, inputs = epilogue_code(k, node, '__v', '__o', [pyexpr(sympy.sympify(row)), '__e'])
    t = state.add_tasklet('epilogue', {'__v'} | set(inputs), {'__o'}, code)
    state.add_memlet_path(mid, inner.entries[-1], t, dst_conn='__v', memlet=dace.Memlet(element))
    for conn, m in inputs.items():
        state.add_memlet_path(state.add_read(m.data), *inner.entries, t, dst_conn=conn, memlet=m)
    # (straight out to the caller's node: an access node of the target between the maps'
    # exits would be a copy of the row, which DaCe 1.0.2 writes to the array's start)
    state.add_memlet_path(t, inner.exits[-1], *reversed(scope.exits), state.add_write(target), src_conn='__o',
                          memlet=dace.Memlet(element))


# ---------------------------------------------------------------------------- level walks
def strategy(st: SparseType, written_dim: Optional[int], hint: str = 'auto') -> str:
    """How the outer loop over ``st``'s entries may run when the body writes along matrix
    dimension ``written_dim`` (None: writes to distinct value positions only):

    ``acc``
        the outer level is that dimension and its coordinate *is* the index (CSR rows):
        parallel, one register accumulator per outer iteration;
    ``owned``
        the outer level owns the written dimension (BSR block rows, DCSR): parallel,
        updates in place;
    ``sequential``
        anything else (a scatter through a transposed view, COO), or ``hint`` says so;
    ``parallel-unsafe``
        a scatter that ``hint='parallel'`` asks to run in parallel anyway.
    """
    if hint == 'sequential':
        return 'sequential'
    if written_dim is None:
        return 'owned'
    if st.fmt.outer_dim != written_dim:
        return 'parallel-unsafe' if hint == 'parallel' else 'sequential'
    full = st.fmt.levels[0].full
    return 'acc' if (st.fmt.dims[written_dim] == 'c0' and full) else 'owned'


class RowWalk:
    """A walk over all rows around one compressed level whose entries ``[pos[row],
    pos[row + 1])`` are the row's (CSR, or CSC seen as ``A.T``): ``var`` the row map's
    variable, ``rows`` the row count, ``pos`` / ``crd`` the connectors of the position and
    index arrays; :attr:`lo` / :attr:`hi` the reads of the row's first and end position."""

    def __init__(self, var: str, rows, pos: str, crd: str):
        self.var, self.rows, self.pos, self.crd = var, rows, pos, crd
        self.row = sympy.Symbol(var)

    @property
    def lo(self):
        return read(self.pos, self.row)

    @property
    def hi(self):
        return read(self.pos, self.row + 1)

    @property
    def end(self):
        """The read of the last row's end position (the number of stored entries)."""
        return read(self.pos, sympy.sympify(self.rows))


def plain_row_walk(nest) -> bool:
    """Whether a format's loop nest (:meth:`SparseFormat.loops`) is a loop over all rows
    around one compressed level whose entries ``[pos1[row], pos1[row + 1])`` are the row's."""
    if len(nest.levels) != 2:
        return False
    outer, inner = nest.levels
    if outer.kind != COUNTED or inner.kind != SEGMENT or outer.guard is not None or inner.guard is not None:
        return False
    return not (outer.base is not None or outer.begin != 0 or inner.begin != member('pos1', outer.var) or
                nest.row != outer.var or nest.col != member('crd1', inner.var) or nest.value_pos != inner.var)


def row_walk(A: Operand) -> Optional[RowWalk]:
    """The :class:`RowWalk` of ``A`` when its loop nest is a plain row walk, else None."""
    st = A.type
    nest = st.fmt.loops(st.shape, st.sizes)
    if not plain_row_walk(nest) or 'pos1' not in A.conns or 'crd1' not in A.conns:
        return None
    outer = nest.levels[0]
    return RowWalk(str(outer.var), outer.end, A.conns['pos1'], A.conns['crd1'])


def _loops(A: Operand) -> List[Tuple[str, object, object]]:
    return [(str(l.var), l.begin, l.end) for l in A.levels if l.has_loop]


def accumulate(k: CpuKernel, state, A: Operand, target: str, index, term, written_dim: int, hint: str, dtype,
               shape: Sequence, node=None) -> None:
    """``target[index] += term`` over all stored entries of ``A`` in ``state`` (``index``
    runs along matrix dimension ``written_dim``; ``target`` 1-D; ``term`` a kernel
    expression of the entry, :meth:`Operand.value` and reads): one register accumulator
    per outer iteration when the outer level is that dimension, updates otherwise (see
    :func:`strategy`); the node's epilogue on each final value (inline on the
    accumulator, else a pass after)."""
    strat = strategy(A.type, written_dim, hint)
    loops = _loops(A)
    if strat == 'acc' and loops:
        outer = k.scope(state, loops[:1], [dtypes.ScheduleType.Default])
        # (under a guard, reads where it holds: a padding slot's column may lie outside x)
        acc = reduce_local(k, outer, loops[1:], term, dtype, SUM, 0, guard=A.guard,
                           guarded_reads=True) if len(loops) > 1 else None
        if acc is None:  # (one level: one entry per row)
            acc = local(k, outer, 'acc', dtype, 0)
            emit(k, outer, [(acc, term, SUM)], guard=A.guard, label='entry', guarded_reads=True)
        store(k, outer, acc, target, [index], node)
        return
    k.fill(state, target)
    body = k.add_state('accumulate')
    sc = k.scope(body, loops, [dtypes.ScheduleType.Default if strat != 'sequential' else dtypes.ScheduleType.Sequential
                               ] + [dtypes.ScheduleType.Sequential] * (len(loops) - 1))
    update(k, sc, (target, [index]), term, A.guard)
    if node is not None:
        epilogue_pass(k, node, target, shape)


def update(k: Kernel, scope: Scope, target: Tuple[str, Sequence], term, guard=None) -> nodes.Tasklet:
    """``target += term`` inside ``scope`` as a plain read-modify-write, no write-conflict
    resolution: the caller guarantees that no two concurrent iterations update one element
    (the outer level owns the written rows). An index read from memory (DCSR's row
    ``crd0[c0]``) reads and writes the whole array in the tasklet, not through atomics;
    under a guard every read happens where it holds (a padding slot's coordinates may lie
    outside the arrays)."""
    arr, idx = target
    return emit(k, scope, [((arr, idx), read(arr, *idx) + sympy.sympify(term), None)], guard=guard, label='update',
                guarded_reads=True)


def coordinates(k: CpuKernel, A: Operand, row: str = 'ri', col: str = 'ci') -> Tuple[str, str, object]:
    """Flat coordinate arrays (transients): row ``ri[q]`` and column ``ci[q]`` of every
    value slot ``q`` (``ri[q] = -1`` where the slot holds no entry: padding, out-of-range
    diagonals, unused capacity), filled in parallel over the outer level (slots are
    distinct). Returns ``(ri, ci, slots)``."""
    n = A.nvals
    ri = k.transient(row, [n], dace.int64)
    ci = k.transient(col, [n], dace.int64)
    k.fill(k.add_state('coordinates_init'), ri, -1)
    st = k.add_state('coordinates')
    sc = k.entries(st, A, parallel=True)
    emit(k, sc, [((ri, [A.pos]), A.row, None), ((ci, [A.pos]), A.col, None)], guard=A.guard, label='coordinates')
    return ri, ci, n


# ---------------------------------------------------------------------- rows of data-dependent length
def count_fill(k: CpuKernel, label: str, rows, out: Rows, count: str, fill: str, inputs: Dict[str, str],
               fill_inputs: Dict[str, str], workspace: Optional[str] = None, guided: bool = False,
               scalars: Dict[str, str] = None) -> None:
    """Count, positions and fill of ``out`` (``rows`` rows) in ``k``: the two-pass shape of
    the row-parallel kernels whose result rows have data-dependent lengths (SpGEMM, the
    merges of :meth:`CpuKernel.row_step`). A parallel map counts each result row (a leaf
    call), a sequential prefix sum turns the counts into ``out.pos``, and a second parallel
    map fills each row at ``pos[row]`` (a leaf writing through ``_oc`` / ``_ov``, the
    result's ``crd`` / ``vals`` passed whole: rows write disjoint parts).

    Both leaves get the row as the local ``_ti``; the fill leaf also gets the result's
    capacity as ``_tcap`` (:meth:`CpuKernel.capacity`). Per-thread workspaces of
    a call (``workspace``: a table of them) are an array both leaves write through a
    pointer; writing it orders a later step that frees them.

    :param count: the count leaf's call (an expression of the connectors, ``_ti`` the row).
    :param fill: the fill leaf's call (a statement without ``;``; ``_oc`` / ``_ov`` the
                 result's ``crd`` / ``vals``, ``_op`` its ``pos``, ``_tcap`` its capacity).
    :param inputs, fill_inputs: connector -> array read whole, for both leaves / the fill only.
    :param workspace: an array both leaves write whole through the connector ``_tws``.
    :param scalars: connector -> a transient scalar of ``k`` (:meth:`CpuKernel.scalar`) that
                    both leaves read.
    :param guided: OpenMP's guided schedule for the row maps (else dynamic chunks of
                   :data:`ROW_CHUNK` rows).
    """
    cnt = k.transient(f'{label}_rowcnt', [rows], dace.int64)
    cap = k.capacity(label, out)
    values = {conn: read(name, 0) for conn, name in (scalars or {}).items()}
    ws = {'_tws': (workspace, None)} if workspace else {}
    for step in ('count', 'fill'):
        state = k.add_state(f'{label}_{step}')
        sc = k.scope(state, [(ROW, 0, rows)], [dtypes.ScheduleType.Default])
        if guided:
            sc.entries[0].map.omp_schedule = dtypes.OMPScheduleType.Guided
        else:
            k.balance(ROW)
        row = local(k, sc, 'row', dace.int64, sympy.Symbol(ROW))
        if step == 'count':
            leaf(k, sc, f'{label}_count', f'_tcnt = {count};', scalars=values, arrays=dict(inputs),
                 locals_in={'_ti': row}, outs={'_tcnt': (cnt, [sympy.Symbol(ROW)]), **ws})
            scan(k, f'{label}_pos', cnt, out.pos, rows)
        else:
            leaf(k, sc, f'{label}_fill', f'{fill};', scalars=dict(values, _tcap=read(cap, 0)),
                 arrays=dict(inputs, **fill_inputs, _op=out.pos), locals_in={'_ti': row},
                 outs={'_oc': (out.crd, None), '_ov': (out.vals, None), **ws})
