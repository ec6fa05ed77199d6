"""Read statements, iteration domains and access functions from an SDFG.

What is read
------------
* **Maps** (any nesting; ranges may depend on outer variables, e.g. triangular nests).
* **Loops**: ``LoopRegion`` s, and state-machine loops (guard/latch states), which are
  first lifted into ``LoopRegion`` s with DaCe's ``LoopLifting`` on a *copy* of the SDFG —
  the analysed SDFG is never modified. A loop whose range cannot be read is analysed as
  if its body ran once (a valid, weaker bound) and noted.
* **Nested SDFGs**: connector memlets translate inner indices into the outer array
  (``outer_begin + inner_index`` over the outer dimensions that are not squeezed);
  inner transients get names prefixed by the nested SDFG's label.
* **Statements**: tasklets in the same scope joined through scalar temporaries (the
  ``_Mult_ -> __tmp1 -> assign`` chains the Python frontend makes) form one statement.
  Its accesses are the memlets crossing the group's boundary. A write with write-conflict
  resolution, or a read and a write of the same element in one statement, is an
  ``update`` (``C[i, j] += ...``).
* **Library nodes**: ``MatMul``/``Gemm`` (2-D, matrix-vector, batched) become statements
  over their known domain; sparse nodes (``SpMV``, ``SpMM``, ``SDDMM``, ``SpGEMM``, the einsum nodes, by class
  name; ``DenseSpMM`` is ``B @ A`` = ``(A.T @ B.T).T``) become
  :class:`~sdfgsparse.analysis.program_model.LibraryCall` s for the sparse
  models; any other library node is skipped and listed in ``ProgramModel.skipped``.
"""
import copy
from typing import Callable, Dict, List, Optional, Set, Tuple

import dace
import networkx as nx
import sympy
from dace.sdfg import nodes
from dace.sdfg.state import ConditionalBlock, ControlFlowRegion, LoopRegion, SDFGState

from sdfgsparse.formats import is_sparse_desc
from sdfgsparse.analysis.program_model import (READ, UPDATE, WRITE, Access, Dim, LibraryCall, ProgramModel, Scope,
                                               Statement)

__all__ = ['extract', 'SPARSE_OPS']

#: library-node class names handled by :mod:`sdfgsparse.analysis.sparse_models`
SPARSE_OPS = ('SpMV', 'SpMM', 'SDDMM', 'SpGEMM', 'DenseSpMM', 'SparseEinsum', 'SparsePrefixEinsum')

Mapper = Callable[[Tuple], Optional[Tuple]]


def _identity(idx):
    return idx


def _sym(v) -> sympy.Expr:
    if isinstance(v, str):
        return dace.symbolic.pystr_to_symbolic(v)
    return sympy.sympify(v)


class _Ctx:
    """What is in scope while walking: iteration variables, symbol renaming and arrays."""

    def __init__(self, dims, subs, arrays, prefix, scope):
        self.dims: List[Dim] = dims
        self.subs: Dict[str, sympy.Expr] = subs
        self.arrays: Dict[str, Optional[Tuple[str, Mapper]]] = arrays
        self.prefix: str = prefix
        self.scope: Scope = scope

    def child(self, dims=None, subs=None, scope=None):
        return _Ctx(self.dims + list(dims or []), {
            **self.subs,
            **(subs or {})
        }, self.arrays, self.prefix, scope if scope is not None else self.scope)

    def expr(self, e) -> Optional[sympy.Expr]:
        """``e`` with loop/map variables and nested-SDFG symbols renamed."""
        if e is None:
            return None
        e = _sym(e)
        rep = {s: self.subs[s.name] for s in e.free_symbols if s.name in self.subs}
        return e.xreplace(rep) if rep else e

    def array(self, name: str) -> Optional[Tuple[str, Mapper]]:
        if name in self.arrays:
            return self.arrays[name]
        return (self.prefix + name, _identity)


def _needs_lifting(sdfg: dace.SDFG) -> bool:
    for cfg in sdfg.all_control_flow_regions(recursive=True):
        if isinstance(cfg, (ControlFlowRegion, dace.SDFG)) and not nx.is_directed_acyclic_graph(cfg.nx):
            return True
    return False


def _structured(sdfg: dace.SDFG, notes: List[str]) -> dace.SDFG:
    """A copy of ``sdfg`` with state-machine loops lifted into ``LoopRegion`` s (or ``sdfg``
    itself when it has none)."""
    if not _needs_lifting(sdfg):
        return sdfg
    from dace.transformation.interstate.loop_lifting import LoopLifting
    work = copy.deepcopy(sdfg)
    try:
        work.apply_transformations_repeated([LoopLifting], validate=False)
    except Exception as exc:  # pragma: no cover - depends on DaCe internals
        notes.append(f'loop lifting failed ({exc}); loops are analysed as straight-line code')
    return work


DATA_DEPENDENT_NOTE = ('data-dependent iteration domain (e.g. a lowered sparse kernel): not bounded; '
                       'analyse the SDFG before expanding its library nodes')


class _Extractor:

    def __init__(self, sdfg: dace.SDFG):
        self.notes: List[str] = []
        self.sdfg = _structured(sdfg, self.notes)
        self.statements: List[Statement] = []
        self.calls: List[LibraryCall] = []
        self.skipped: List[str] = []
        self.transients: Set[str] = set()
        self.order = 0
        self.used_names: Set[str] = {str(s) for s in sdfg.free_symbols}
        self.program_symbols: Set[sympy.Symbol] = set()

    # ------------------------------------------------------------------ names
    def fresh(self, name: str) -> sympy.Symbol:
        base, n = name, 0
        while name in self.used_names:
            n += 1
            name = f'{base}_{n}'
        self.used_names.add(name)
        return sympy.Symbol(name, integer=True)

    def next_order(self) -> int:
        self.order += 1
        return self.order

    # ------------------------------------------------------------------ control flow
    def run(self) -> ProgramModel:
        root = Scope('root', label=self.sdfg.label)
        for name, desc in self.sdfg.arrays.items():
            if desc.transient:
                self.transients.add(name)
        ctx = _Ctx([], {}, {}, '', root)
        self.walk_region(self.sdfg, ctx)
        self.mark_data_dependence()
        sparse_args = {n for n, d in self.sdfg.arrays.items() if not d.transient and is_sparse_desc(d)}
        return ProgramModel(root, self.statements, self.calls, self.skipped, self.transients, self.program_symbols,
                            self.notes, sparse_args)

    def mark_data_dependence(self):
        """Symbols that are neither program parameters nor iteration variables hold values read
        from memory (interstate assignments, dynamic map ranges): indices using them are
        indirect (opaque), and ranges using them make the statement's domain data-dependent."""
        params = {str(s) for s in self.sdfg.free_symbols}
        dims = {s for st in self.statements for s in st.syms} | {d.sym for c in self.calls for d in c.dims}

        def foreign(e) -> bool:
            return any(s not in dims and s.name not in params for s in sympy.sympify(e).free_symbols)

        for st in self.statements:
            if any(foreign(d.start) or foreign(d.stop) or foreign(d.step) for d in st.dims):
                if not st.data_dependent:
                    st.data_dependent = True
                    st.notes.append(DATA_DEPENDENT_NOTE)
            for a in st.accesses:
                if any(i is not None and foreign(i) for i in a.index):
                    a.index = tuple(None if i is None or foreign(i) else i for i in a.index)
                    a.exact = False
            for d in st.dims:
                for e in (d.start, d.stop):
                    self.program_symbols |= {x for x in sympy.sympify(e).free_symbols if x.name in params}
            for a in st.accesses:
                for i in a.index:
                    if i is not None:
                        self.program_symbols |= {x for x in i.free_symbols if x.name in params}
            if any(not a.exact for a in st.accesses) and not any('opaque' in n for n in st.notes):
                st.notes.append('some indices are ranges or data-dependent; treated as opaque')

    def ordered_blocks(self, region) -> list:
        if nx.is_directed_acyclic_graph(region.nx):
            order = {b: i for i, b in enumerate(region.nodes())}
            return list(nx.lexicographical_topological_sort(region.nx, key=lambda b: order[b]))
        self.notes.append(f'unstructured control flow in {region.label}: loops there are analysed as straight-line')
        return list(region.bfs_nodes(region.start_block))

    def walk_region(self, region, ctx: _Ctx):
        for block in self.ordered_blocks(region):
            if isinstance(block, LoopRegion):
                self.walk_loop(block, ctx)
            elif isinstance(block, ConditionalBlock):
                self.notes.append(f'conditional {block.label}: every branch is counted as executed')
                for _, branch in block.branches:
                    if branch is not None:
                        self.walk_region(branch, ctx)
            elif isinstance(block, ControlFlowRegion):
                self.walk_region(block, ctx)
            elif isinstance(block, SDFGState):
                self.walk_state(block, ctx)

    def walk_loop(self, loop: LoopRegion, ctx: _Ctx):
        from dace.transformation.passes.analysis import loop_analysis as la
        var = loop.loop_variable
        try:
            start, end, step = la.get_init_assignment(loop), la.get_loop_end(loop), la.get_loop_stride(loop)
        except Exception:  # pragma: no cover - malformed loop code
            start = end = step = None
        if not var or start is None or end is None or step is None or not (_sym(step).is_number and step != 0):
            self.notes.append(f'loop {loop.label}: range not recognised; its body is counted once')
            self.walk_region(loop, ctx)
            return
        start, end, step = ctx.expr(start), ctx.expr(end), int(step)
        if step < 0:
            start, end, step = end, start, -step
        sym = self.fresh(var)
        dim = Dim(sym, var, start, end + 1, sympy.Integer(step), sequential=True)
        scope = Scope('loop', [dim], label=loop.label)
        ctx.scope.children.append(scope)
        self.walk_region(loop, ctx.child([dim], {var: sym}, scope))

    # ------------------------------------------------------------------ dataflow
    def walk_state(self, state: SDFGState, ctx: _Ctx):
        topo = {n: i for i, n in enumerate(dace.sdfg.utils.dfs_topological_sort(state))}
        children = state.scope_children()
        self.walk_scope(state, None, children, topo, ctx)

    def is_local(self, state: SDFGState, node) -> bool:
        """A scalar temporary: links tasklets of one statement, is not a real array."""
        if not isinstance(node, nodes.AccessNode):
            return False
        desc = node.desc(state.parent)
        if not desc.transient or isinstance(desc, dace.data.View):
            return False
        size = desc.total_size
        return isinstance(desc, dace.data.Scalar) or (sympy.sympify(size).is_number and int(size) == 1)

    def walk_scope(self, state, entry, children, topo, ctx: _Ctx):
        members = sorted(children[entry], key=lambda n: topo.get(n, 0))
        # tasklets joined through scalar temporaries (or directly) form one statement
        parent = {}

        def find(x):
            while parent[x] is not x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        tasklets = [n for n in members if isinstance(n, nodes.Tasklet)]
        for t in tasklets:
            parent[t] = t
        for n in members:
            linked = []
            if self.is_local(state, n):
                linked = [e.src for e in state.in_edges(n)] + [e.dst for e in state.out_edges(n)]
            elif isinstance(n, nodes.Tasklet):
                linked = [e.dst for e in state.out_edges(n)] + [n]
            ts = [m for m in linked if m in parent]
            for a, b in zip(ts, ts[1:]):
                parent[find(a)] = find(b)
        groups: Dict[object, List[nodes.Tasklet]] = {}
        for t in tasklets:
            groups.setdefault(find(t), []).append(t)
        first_of = {id(g[0]): g for g in groups.values()}

        label = entry.map.label if isinstance(entry, nodes.MapEntry) else state.label
        count = 0
        for n in members:
            if isinstance(n, nodes.Tasklet) and id(n) in first_of:
                g = first_of[id(n)]
                name = label if count == 0 else f'{label}#{count}'
                count += 1
                self.add_statement(state, g, name, ctx)
            elif isinstance(n, nodes.MapEntry):
                self.walk_map(state, n, children, topo, ctx)
            elif isinstance(n, nodes.NestedSDFG):
                self.walk_nested(state, n, ctx)
            elif isinstance(n, nodes.LibraryNode):
                self.library(state, n, ctx)
            elif isinstance(n, nodes.EntryNode):
                self.skipped.append(f'{type(n).__name__} {n.label} (only maps are analysed)')

    def walk_map(self, state, entry: nodes.MapEntry, children, topo, ctx: _Ctx):
        dims, subs = [], {}
        inner = ctx.child()
        for p, (b, e, s) in zip(entry.map.params, entry.map.range.ndrange()):
            sym = self.fresh(p)
            s = inner.expr(s)
            dims.append(Dim(sym, p, inner.expr(b), inner.expr(e) + 1, s, sequential=False))
            subs[p] = sym
        dyn = [c for c in entry.in_connectors if not c.startswith('IN_')]
        if dyn:
            seg = self.segment(state, entry, dyn, ctx)
            if seg is not None:
                dims, subs = seg
            else:
                self.notes.append(f'map {entry.map.label}: data-dependent range ({", ".join(sorted(dyn))})')
        scope = Scope('map', dims, label=entry.map.label)
        ctx.scope.children.append(scope)
        self.walk_scope(state, entry, children, topo, ctx.child(dims, subs, scope))

    def segment(self, state, entry: nodes.MapEntry, dyn, ctx: _Ctx):
        """A map over one segment of a compressed level, ``p in [pos[d], pos[d + 1])`` for an
        enclosing dimension ``d`` of extent ``E`` (the range read through dynamic map
        inputs): over all ``d`` it runs ``T`` times, ``T`` the length of the arrays it
        indexes by ``p`` (the level's ``crd`` / ``vals``). Modelled as ``T / E`` iterations
        per ``d``, ``p = d * T / E + t`` — the same total and the same elements of every array
        indexed by ``p``, spread evenly. Returns ``(dims, subs)`` or None (another pattern)."""
        if len(entry.map.params) != 1:
            return None
        (p, ) = entry.map.params
        (b, e, st) = entry.map.range.ndrange()[0]
        if st != 1:
            return None
        reads = {ed.dst_conn: ed.data for ed in state.in_edges(entry) if ed.dst_conn in dyn}
        bounds = []
        for bound, shift in ((b, 0), (e, -1)):  # DaCe's ranges are inclusive: e = pos[d + 1] - 1
            bound = _sym(bound) - shift
            conn = str(bound)
            if conn not in reads or reads[conn].data is None or len(reads[conn].subset) != 1:
                return None
            (lo, hi, _), = reads[conn].subset.ndrange()
            if lo != hi:
                return None
            bounds.append((reads[conn].data, ctx.expr(lo)))
        (arr_b, f_b), (arr_e, f_e) = bounds
        if arr_b != arr_e or sympy.expand(f_e - f_b) != 1:
            return None
        outer = [d for d in ctx.dims if d.sym == f_b]
        if not outer:
            return None
        total = None
        sdfg = state.parent
        for ed in state.scope_subgraph(entry).edges():
            m = ed.data
            if m.data is None or m.is_empty() or len(m.subset) != 1 or m.data not in sdfg.arrays:
                continue
            (lo, hi, _), = m.subset.ndrange()
            if lo == hi and str(lo) == p:
                total = ctx.expr(sdfg.arrays[m.data].shape[0])
                break
        if total is None:
            total = self.fresh(f'nnz_{arr_b}')
        per = total / outer[0].extent
        t = self.fresh(f'{p}_t')
        self.notes.append(f'map {entry.map.label}: the segment {arr_b}[{f_b}]:{arr_b}[{f_b} + 1] is modelled as '
                          f'{per} iterations per {f_b} ({total} in all)')
        return [Dim(t, p, sympy.Integer(0), per, sympy.Integer(1), sequential=False)], {p: outer[0].sym * per + t}

    # ------------------------------------------------------------------ accesses
    def index_of(self, subset, ctx: _Ctx) -> Tuple[Tuple, bool]:
        idx, exact = [], True
        for b, e, _ in subset.ndrange():
            b, e = ctx.expr(b), ctx.expr(e)
            if b == e or (sympy.expand(e - b) == 0):
                idx.append(b)
            else:
                idx.append(None)
                exact = False
        return tuple(idx), exact

    def make_access(self, ctx: _Ctx, array: str, subset, kind: str) -> Optional[Access]:
        if subset is None:
            return None
        idx, exact = self.index_of(subset, ctx)
        return self.map_access(ctx, array, idx, exact, kind)

    def map_access(self, ctx: _Ctx, array: str, idx: Tuple, exact: bool, kind: str) -> Optional[Access]:
        target = ctx.array(array)
        if target is None:
            return None
        name, mapper = target
        out = mapper(tuple(idx))
        if out is None:
            return None
        exact = exact and all(i is not None for i in out)
        return Access(name, tuple(out), kind, exact)

    def trace_in(self, state, e, group, acc, seen):
        src = e.src
        if e.data.is_empty() or (id(e) in seen):
            return
        seen.add(id(e))
        if src in group:
            return
        if self.is_local(state, src):
            for e2 in state.in_edges(src):
                self.trace_in(state, e2, group, acc, seen)
            return
        if isinstance(src, nodes.AccessNode):
            acc.append((src.data, e.data.get_src_subset(e, state) or e.data.subset, READ))
        elif e.data.data is not None:
            acc.append((e.data.data, e.data.subset, READ))

    def trace_out(self, state, e, group, acc, seen):
        dst = e.dst
        if e.data.is_empty() or (id(e) in seen):
            return
        seen.add(id(e))
        if dst in group:
            return
        kind = UPDATE if e.data.wcr is not None else WRITE
        if self.is_local(state, dst):
            for e2 in state.out_edges(dst):
                self.trace_out(state, e2, group, acc, seen)
            return
        if isinstance(dst, nodes.AccessNode):
            acc.append((dst.data, e.data.get_dst_subset(e, state) or e.data.subset, kind))
        elif e.data.data is not None:
            acc.append((e.data.data, e.data.subset, kind))

    def add_statement(self, state, group, name, ctx: _Ctx):
        raw, seen = [], set()
        gset = set(group)
        for t in group:
            for e in state.in_edges(t):
                self.trace_in(state, e, gset, raw, seen)
            for e in state.out_edges(t):
                self.trace_out(state, e, gset, raw, seen)
        accesses = [a for a in (self.make_access(ctx, arr, sub, kind) for arr, sub, kind in raw) if a is not None]
        st = self.emit_statement(name, ctx, accesses)
        # a dynamic read: the tasklet itself walks a data-dependent part of an array (a
        # whole-row tasklet of a lowered sparse kernel loops over [pos[i], pos[i + 1]))
        # (a Python tasklet's dynamic input is an indirection: it reads one element)
        if any(e.data.dynamic and not e.data.is_empty() and t.language != dace.Language.Python for t in group
               for e in state.in_edges(t)):
            st.data_dependent = True
            st.notes.append(DATA_DEPENDENT_NOTE)

    def emit_statement(self, name, ctx: _Ctx, accesses: List[Access], notes=None):
        accesses = merge_updates(accesses)
        st = Statement(name, list(ctx.dims), accesses, self.next_order(), list(notes or []))
        self.statements.append(st)
        ctx.scope.children.append(st)
        return st

    # ------------------------------------------------------------------ nested SDFGs
    def connector_map(self, ctx: _Ctx, outer: str, subset, inner_desc) -> Optional[Tuple[str, Mapper]]:
        target = ctx.array(outer)
        if target is None:
            return None
        name, parent_map = target
        ranges = subset.ndrange()
        begins = [ctx.expr(b) for b, _, _ in ranges]
        nonunit = [d for d, (b, e, _) in enumerate(ranges) if sympy.expand(_sym(e) - _sym(b)) != 0]
        nd = len(inner_desc.shape)
        if nd == len(ranges):
            positions = list(range(nd))
        elif nd == len(nonunit):
            positions = nonunit
        elif not nonunit:
            positions = []
        else:
            return None

        def mapper(idx, begins=begins, positions=positions, parent_map=parent_map):
            out = list(begins)
            for q, p in enumerate(positions):
                if q >= len(idx) or idx[q] is None or out[p] is None:
                    out[p] = None
                else:
                    out[p] = out[p] + idx[q]
            return parent_map(tuple(out))

        return (name, mapper)

    def walk_nested(self, state, node: nodes.NestedSDFG, ctx: _Ctx):
        inner = node.sdfg
        subs = {}
        for k, v in node.symbol_mapping.items():
            subs[str(k)] = ctx.expr(v)
        arrays: Dict[str, Optional[Tuple[str, Mapper]]] = {}
        for e in state.in_edges(node):
            if e.dst_conn and not e.data.is_empty() and e.dst_conn in inner.arrays:
                arrays[e.dst_conn] = self.connector_map(ctx, e.data.data, e.data.subset, inner.arrays[e.dst_conn])
        for e in state.out_edges(node):
            if e.src_conn and not e.data.is_empty() and e.src_conn in inner.arrays:
                arrays[e.src_conn] = self.connector_map(ctx, e.data.data, e.data.subset, inner.arrays[e.src_conn])
        prefix = f'{ctx.prefix}{node.label}/'
        for name, desc in inner.arrays.items():
            if name not in arrays and desc.transient:
                self.transients.add(prefix + name)
        if any(v is None for v in arrays.values()):
            self.notes.append(f'nested SDFG {node.label}: some connectors could not be mapped to outer arrays')
        self.walk_region(inner, _Ctx(list(ctx.dims), subs, arrays, prefix, ctx.scope))

    # ------------------------------------------------------------------ library nodes
    def library(self, state, node: nodes.LibraryNode, ctx: _Ctx):
        cls = type(node).__name__
        if cls in SPARSE_OPS:
            self.sparse_call(state, node, ctx)
        elif cls in ('MatMul', 'Gemm'):
            if not self.matmul(state, node, ctx):
                self.skipped.append(f'{cls} {node.label} (operand shapes not supported)')
        elif cls == 'Reduce':
            if not self.reduce(state, node, ctx):
                self.skipped.append(f'{cls} {node.label} (operand shapes not supported)')
        else:
            self.skipped.append(f'{cls} {node.label}')

    def _conn_edges(self, state, node):
        res = {}
        for e in state.in_edges(node):
            if e.dst_conn and not e.data.is_empty():
                res[e.dst_conn] = e
        for e in state.out_edges(node):
            if e.src_conn and not e.data.is_empty():
                res[e.src_conn] = e
        return res

    def matmul(self, state, node, ctx: _Ctx) -> bool:
        conns = self._conn_edges(state, node)
        if not all(c in conns for c in ('_a', '_b', '_c')):
            return False

        def operand(c):
            e = conns[c]
            sub = e.data.get_src_subset(e, state) if c != '_c' else e.data.get_dst_subset(e, state)
            sub = sub or e.data.subset
            arr = e.src.data if c != '_c' and isinstance(e.src, nodes.AccessNode) else (
                e.dst.data if c == '_c' and isinstance(e.dst, nodes.AccessNode) else e.data.data)
            ranges = sub.ndrange()
            nonunit = [(ctx.expr(b), ctx.expr(e_) - ctx.expr(b) + 1, d) for d, (b, e_, _) in enumerate(ranges)]
            return arr, ranges, nonunit

        (an, ar, a), (bn, br, b), (cn, cr, c) = operand('_a'), operand('_b'), operand('_c')
        ta, tb = bool(getattr(node, 'transA', False)), bool(getattr(node, 'transB', False))
        if ta and len(a) == 2:
            a = a[::-1]
        if tb and len(b) == 2:
            b = b[::-1]
        la, lb = len(a), len(b)
        if (la, lb) == (2, 2):
            names, sizes = ('i', 'j', 'k'), (a[0][1], b[1][1], a[1][1])
            pat_a, pat_b, pat_c = ('i', 'k'), ('k', 'j'), ('i', 'j')
        elif (la, lb) == (2, 1):
            names, sizes = ('i', 'k'), (a[0][1], a[1][1])
            pat_a, pat_b, pat_c = ('i', 'k'), ('k', ), ('i', )
        elif (la, lb) == (1, 2):
            names, sizes = ('j', 'k'), (b[1][1], a[0][1])
            pat_a, pat_b, pat_c = ('k', ), ('k', 'j'), ('j', )
        elif (la, lb) == (3, 3):
            names, sizes = ('b', 'i', 'j', 'k'), (a[0][1], a[1][1], b[2][1], a[2][1])
            pat_a, pat_b, pat_c = ('b', 'i', 'k'), ('b', 'k', 'j'), ('b', 'i', 'j')
        else:
            return False
        if len(c) != len(pat_c):
            return False
        dims = [Dim(self.fresh(n), n, sympy.Integer(0), sz) for n, sz in zip(names, sizes)]
        by = {n: d.sym for n, d in zip(names, dims)}
        scope = Scope('map', dims, label=node.label)
        ctx.scope.children.append(scope)
        inner = ctx.child(dims, {}, scope)

        def acc(arr, ops, pat, kind):
            # ops are (begin, size, array dimension) in the order the operation sees them
            full = [None] * len(ops)
            for q, (begin, _, d) in enumerate(ops):
                full[d] = begin + by[pat[q]]
            return self.map_access(inner, arr, tuple(full), True, kind)

        accesses = [acc(an, a, pat_a, READ), acc(bn, b, pat_b, READ), acc(cn, c, pat_c, UPDATE)]
        self.emit_statement(f'{node.label} ({type(node).__name__})', inner, [x for x in accesses if x is not None],
                            ['library node analysed by its known domain'])
        return True

    def reduce(self, state, node, ctx: _Ctx) -> bool:
        """``Reduce``: one statement over the input's shape, the output updated over the kept axes."""
        ins = [e for e in state.in_edges(node) if not e.data.is_empty()]
        outs = [e for e in state.out_edges(node) if not e.data.is_empty()]
        if len(ins) != 1 or len(outs) != 1:
            return False
        ie, oe = ins[0], outs[0]
        isub = ie.data.get_src_subset(ie, state) or ie.data.subset
        osub = oe.data.get_dst_subset(oe, state) or oe.data.subset
        iarr = ie.src.data if isinstance(ie.src, nodes.AccessNode) else ie.data.data
        oarr = oe.dst.data if isinstance(oe.dst, nodes.AccessNode) else oe.data.data
        ranges = isub.ndrange()
        axes = list(range(len(ranges))) if node.axes is None else [a % len(ranges) for a in node.axes]
        kept = [d for d in range(len(ranges)) if d not in axes]
        dims = [Dim(self.fresh(f'r{d}'), f'r{d}', sympy.Integer(0), ctx.expr(e) - ctx.expr(b) + 1)
                for d, (b, e, _) in enumerate(ranges)]
        scope = Scope('map', dims, label=node.label)
        ctx.scope.children.append(scope)
        inner = ctx.child(dims, {}, scope)
        iidx = tuple(ctx.expr(b) + d.sym for (b, _, _), d in zip(ranges, dims))
        obegin = [ctx.expr(b) for b, _, _ in osub.ndrange()]
        nonunit = [q for q, (b, e, _) in enumerate(osub.ndrange()) if sympy.expand(_sym(e) - _sym(b)) != 0]
        if len(nonunit) != len(kept):
            return False
        oidx = list(obegin)
        for q, d in zip(nonunit, kept):
            oidx[q] = oidx[q] + dims[d].sym
        accesses = [self.map_access(inner, iarr, iidx, True, READ), self.map_access(inner, oarr, tuple(oidx), True,
                                                                                       UPDATE)]
        self.emit_statement(f'{node.label} (Reduce)', inner, [a for a in accesses if a is not None],
                            ['library node analysed by its known domain'])
        return True

    def sparse_call(self, state, node, ctx: _Ctx):
        conns = self._conn_edges(state, node)
        prefixes = list(getattr(node, 'SPARSE_INPUTS', ())) + list(getattr(node, 'SPARSE_OUTPUTS', ()))
        if not prefixes:
            prefixes = sorted({c.split('_')[1] for c in conns if c.count('_') >= 2 and c.startswith('_')})
        sparse = {}
        outputs = set(getattr(node, 'SPARSE_OUTPUTS', ()))
        for p in prefixes:
            info = {'name': p, 'rows': None, 'cols': None, 'nnz': None, 'output': p in outputs,
                    'transposed': bool(getattr(node, f'transpose_{p}', False))}
            for c, e in conns.items():
                if c.startswith(f'_{p}_'):
                    view = e.src if e.dst is node else e.dst
                    near = state.in_edges(view) if e.dst is node else state.out_edges(view)
                    for ve in near:
                        if ve.data.data:
                            info['name'] = ve.data.data.split('.')[0]
                    break
            try:
                st = node.operand_type(state, p)
                info['shape'] = tuple(ctx.expr(v) for v in st.shape)
                info['nnz'] = ctx.expr(st.member_shapes()['vals'])
                if st.rank == 2:
                    info['rows'], info['cols'] = info['shape']
            except Exception:  # the ops package is optional and evolving: fall back to symbols
                pass
            if isinstance(getattr(node, 'spec', None), str) and p == prefixes[0]:
                info['spec'], info['position'] = node.spec, int(getattr(node, 'sparse', 0))  # (a contraction's)
            target = ctx.array(info['name'])
            if target is not None:
                info['name'] = target[0]
            sparse[p] = info
        dense = {}
        for c, e in conns.items():
            if any(c.startswith(f'_{p}_') for p in prefixes):
                continue
            sub = e.data.subset
            shape = tuple(ctx.expr(s) for s in sub.size()) if sub is not None else ()
            target = ctx.array(e.data.data) if e.data.data else None
            dense[c] = (target[0] if target else e.data.data, shape, 'in' if e.dst is node else 'out')
        self.calls.append(LibraryCall(node.label, type(node).__name__, dense, sparse, list(ctx.dims),
                                      self.next_order()))


def merge_updates(accesses: List[Access]) -> List[Access]:
    """Fold a read and a write of the same element into one ``update``; drop duplicates."""
    out: List[Access] = []
    keys = {}
    for a in accesses:
        key = (a.array, a.index)
        if key in keys and a.exact:
            prev = keys[key]
            if prev.kind != a.kind:
                prev.kind = UPDATE
            continue
        b = Access(a.array, a.index, a.kind, a.exact)
        keys[key] = b
        out.append(b)
    return out


def extract(sdfg: dace.SDFG) -> ProgramModel:
    """The :class:`~sdfgsparse.analysis.program_model.ProgramModel` of ``sdfg`` (not modified)."""
    return _Extractor(sdfg).run()
