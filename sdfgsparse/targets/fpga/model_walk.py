"""The SDFG walker of the FPGA model (:mod:`sdfgsparse.targets.fpga.model`).

:class:`_Walker` visits the FPGA kernel states of an SDFG (:func:`_kernel_states`), splits
each into processing elements and, scope by scope, counts the operations of the tasklets
(:class:`_Ops`, from their Python ``ast``), the trips, initiation interval and pipeline depth
of each loop, the storage of FIFOs and local arrays, and the global memory traffic and
FIFO pushes per call. The rules it applies are those of :mod:`~sdfgsparse.targets.fpga.model`'s
docstring; the costs it charges come from :mod:`~sdfgsparse.targets.fpga.model_costs`.
It yields the per-element records :class:`PEModel`, :class:`LoopModel` and
:class:`FifoModel` (defined here, so that this module does not import the public one, and
re-exported there); :func:`~sdfgsparse.targets.fpga.model.model_design` runs it and
assembles the :class:`~sdfgsparse.targets.fpga.model.DesignModel`.
"""
import ast
import functools
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Tuple

import dace
import sympy
from dace import data as dt
from dace import dtypes
from dace.sdfg import nodes

from sdfgsparse.targets.fpga.model_costs import (_BITS, _DEFAULT_PUMP, _FABRIC_MHZ, _LOCAL_LATENCY, _LOOP_FF,
                                                 _LOOP_LUT, _LUTRAM_BITS, _PE_FF, _PE_LUT, _RANK, MAXI_LATENCY,
                                                 MAXI_OUTSTANDING, OP_COSTS, SRL_MAX_DEPTH, Board, _bram18)

#: ``sympy.simplify``, remembered: the walk is repeated until the FIFO counts settle, and
#: the candidates of one program differ in a few constants, so most expressions recur
#: (simplifying them was most of a model's time).
_simplify = functools.lru_cache(maxsize=8192)(sympy.simplify)


@dataclass
class LoopModel:
    """One loop of a PE: trips and entries over one call, II, pipeline depth, cycles (PE clock)."""
    label: str
    pipelined: bool
    trips: sympy.Expr
    entries: sympy.Expr
    ii: int
    depth: int
    cycles: sympy.Expr
    ii_reasons: Dict[str, int] = field(default_factory=dict)
    trips_rule: str = 'range'


@dataclass
class PEModel:
    """One processing element. ``trips`` sums its pipelined loops' trips and ``cycles`` is at the
    base clock (a pumped PE runs ``pumping`` times faster); ``ops`` counts operator lanes by
    ``kind.dtype`` (per iteration of the loop that holds them, hence also the hardware instances)."""
    name: str
    state: str
    schedule: str
    pumping: int
    clock_mhz: float
    loops: List[LoopModel]
    trips: sympy.Expr
    ii: int
    ops: Dict[str, int]
    dsp: int
    lut: int
    ff: int
    bram18: int
    uram: int
    cycles: sympy.Expr
    depth: int


@dataclass
class FifoModel:
    """A stream between PEs: depth, width, implementation (SRL or BRAM) and cost."""
    name: str
    depth: int
    bits: int
    impl: str
    lut: int
    ff: int
    bram18: int


def _int(expr, default: int = 1) -> int:
    try:
        return int(sympy.sympify(expr))
    except (TypeError, ValueError):
        return default


# ---- operations in a tasklet -------------------------------------------------------------
_FREE_CALLS = {'abs', 'fabs', 'float', 'int', 'round', 'floor', 'ceil'}
_EXP_CALLS = {'exp', 'log', 'log2', 'log10', 'tanh', 'sigmoid', 'pow', 'sin', 'cos'}


def _type_class(t) -> Optional[Tuple[str, int]]:
    """(type class, lanes) of a DaCe typeclass; None for void."""
    if t is None:
        return None
    if isinstance(t, dtypes.pointer):
        t = t.base_type
    lanes = int(t.veclen) if isinstance(t, dtypes.vector) else 1  # (a reloaded SDFG gives a sympy Integer)
    base = t.base_type if isinstance(t, dtypes.vector) else t
    if base.type is None:
        return None
    if base.type in (dtypes.float16.type, dtypes.float32.type):
        return 'f32', lanes
    if base.type == dtypes.float64.type:
        return 'f64', lanes
    return ('i64' if base.bytes > 4 else 'i32'), lanes


class _Ops:
    """Counts the operations of a Python tasklet and the critical path of its outputs.
    ``ready`` gives the cycle at which each input is available (a missing input never is:
    with one input at 0 the output's time is the latency of the path from that input)."""

    def __init__(self, types: Dict[str, Tuple[str, int]], ready: Dict[str, int]):
        self.types, self.ready = dict(types), dict(ready)
        self.ops: Counter = Counter()
        self.calls: List[str] = []

    def _op(self, kind, t, lanes, times, *inputs):
        live = [r for r in inputs if r is not None]
        if kind is None or t is None:
            return max(live) if live else None
        self.ops[(kind, t)] += lanes * times
        cost = OP_COSTS.get((kind, t))
        lat = cost.latency if cost is not None else 1
        return max(live) + lat * times if live else None

    @staticmethod
    def _promote(a, b):
        if a is None or b is None:
            return a or b
        return (a[0] if _RANK[a[0]] >= _RANK[b[0]] else b[0]), max(a[1], b[1])

    def expr(self, node) -> Tuple[Optional[Tuple[str, int]], Optional[int]]:
        if isinstance(node, ast.Name):
            return self.types.get(node.id), self.ready.get(node.id)
        if isinstance(node, ast.Constant):
            return None, None
        if isinstance(node, ast.Subscript):
            t, r = self.expr(node.value)
            return t, r  # the index is address generation
        if isinstance(node, ast.UnaryOp):
            return self.expr(node.operand)
        if isinstance(node, ast.BinOp):
            (ta, ra), (tb, rb) = self.expr(node.left), self.expr(node.right)
            t = self._promote(ta, tb)
            if t is None:
                return None, None
            literal = isinstance(node.left, ast.Constant) or isinstance(node.right, ast.Constant)
            op = type(node.op)
            if op in (ast.Add, ast.Sub):
                kind = 'add'
            elif op in (ast.Mult, ast.Pow):
                kind = None if (literal and t[0][0] == 'i') else 'mul'
            elif op in (ast.Div, ast.FloorDiv, ast.Mod):
                kind = None if (literal and t[0][0] == 'i') else 'div'
            else:
                kind = 'logic'
            if kind == 'logic':
                self.ops[('logic', t[0])] += t[1]
                return t, max([x for x in (ra, rb) if x is not None], default=None)
            return t, self._op(kind, t[0], t[1], 1, ra, rb)
        if isinstance(node, ast.Compare):
            t, r = self.expr(node.left)
            rs = [r]
            for c in node.comparators:
                tc, rc = self.expr(c)
                t = self._promote(t, tc)
                rs.append(rc)
            out = self._op('cmp', t and t[0], t[1] if t else 1, len(node.comparators), *rs)
            return ('i32', t[1] if t else 1), out
        if isinstance(node, ast.BoolOp):
            parts = [self.expr(x) for x in node.values]
            self.ops[('logic', 'i32')] += len(node.values) - 1
            return ('i32', 1), max([r for _, r in parts if r is not None], default=None)
        if isinstance(node, ast.IfExp):
            _, rt = self.expr(node.test)
            (ta, ra), (tb, rb) = self.expr(node.body), self.expr(node.orelse)
            t = self._promote(ta, tb)
            if t is not None:
                self.ops[('sel', t[0])] += t[1]
            return t, max([x for x in (rt, ra, rb) if x is not None], default=None)
        if isinstance(node, ast.Call):
            fname = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, 'id', '?')
            args = [self.expr(a) for a in node.args]
            t = None
            for ta, _ in args:
                t = self._promote(t, ta)
            rs = [r for _, r in args]
            if t is None or fname in _FREE_CALLS:
                return t, max([r for r in rs if r is not None], default=None)
            if fname in ('max', 'min'):
                out = self._op('cmp', t[0], t[1], len(args) - 1, *rs)
                self.ops[('sel', t[0])] += t[1] * (len(args) - 1)
                return t, out
            if fname in _EXP_CALLS or fname == 'sqrt':
                kind = 'sqrt' if fname == 'sqrt' else 'exp'
                return t, self._op(kind, t[0], t[1], 1, *rs)
            self.calls.append(fname)
            return t, max([r for r in rs if r is not None], default=None)
        return None, None

    def run(self, code: List[ast.stmt]) -> Dict[str, Optional[int]]:
        """Walk the statements; returns the ready time of every assigned name."""
        for stmt in code:
            if isinstance(stmt, ast.Assign):
                t, r = self.expr(stmt.value)
                for tgt in stmt.targets:
                    name = tgt.value.id if isinstance(tgt, ast.Subscript) and isinstance(tgt.value, ast.Name) else \
                        getattr(tgt, 'id', None)
                    if name is not None:
                        self.ready[name] = r
                        if t is not None and name not in self.types:
                            self.types[name] = t
            elif isinstance(stmt, ast.AugAssign):
                self.run([ast.Assign(targets=[stmt.target], value=ast.BinOp(left=ast.Name(
                    id=getattr(stmt.target, 'id', None) or stmt.target.value.id), op=stmt.op, right=stmt.value))])
            elif isinstance(stmt, ast.Expr):
                self.expr(stmt.value)
            else:
                for child in ast.iter_child_nodes(stmt):
                    if isinstance(child, ast.stmt):
                        self.run([child])
        return self.ready


def _wcr_kind(wcr: str) -> Optional[str]:
    s = str(wcr)
    if '*' in s:
        return 'mul'
    if 'max' in s or 'min' in s:
        return 'cmp'
    return 'add' if ('+' in s or '-' in s) else None


# ---- walking the SDFG ---------------------------------------------------------------------
@dataclass
class _Loop:
    label: str
    params: frozenset
    reads: Counter = field(default_factory=Counter)
    random_reads: Counter = field(default_factory=Counter)
    writes: Counter = field(default_factory=Counter)
    streams: Counter = field(default_factory=Counter)
    reasons: Dict[str, int] = field(default_factory=dict)
    reads_global: bool = False
    entry: Any = None  # the loop's map entry


@dataclass
class _Ctx:
    sdfg: dace.SDFG
    execs: sympy.Expr  # executions of this level over one call
    copies: int  # spatial copies (enclosing unrolled maps)
    loop: Optional[_Loop] = None  # the pipelined loop this level is inside
    unroll: int = 1  # copies inside that loop
    names: Dict[str, str] = field(default_factory=dict)  # inner data name -> outer
    subs: Dict = field(default_factory=dict)  # inner symbol -> outer expression
    flat_entries: Optional[sympy.Expr] = None  # entries of a pipelined child flattened into its parent


@dataclass
class _PEAcc:
    ops: Counter = field(default_factory=Counter)
    lut: int = _PE_LUT
    ff: int = _PE_FF
    bram18: int = 0
    loops: List[LoopModel] = field(default_factory=list)
    allocated: set = field(default_factory=set)


def _reset_in_loop(state, entry, ie) -> bool:
    """Whether the element the edge ``ie`` reads is written afresh inside the loop of map
    ``entry`` before it is read: its access node lies in the loop's scope and a tasklet
    that does not read the data writes it (an accumulator zeroed every iteration carries
    nothing from one iteration to the next)."""
    src = state.memlet_path(ie)[0].src
    if entry is None or not isinstance(src, nodes.AccessNode):
        return False
    scope = state.scope_dict()
    s = scope[src]
    while s is not None and s is not entry:
        s = scope[s]
    if s is not entry:
        return False
    for w in state.in_edges(src):
        producer = state.memlet_path(w)[0].src
        if isinstance(producer, nodes.Tasklet) and not any(e.data.data == src.data for e in state.in_edges(producer)):
            return True
    return False


class _Walker:

    def __init__(self, sdfg: dace.SDFG, pushes_known: Dict[str, sympy.Expr]):
        from dace.libraries.standard import Gearbox
        self.Gearbox = Gearbox
        self.top = sdfg
        self.known = pushes_known
        self.pushes: Dict[str, sympy.Expr] = defaultdict(lambda: sympy.Integer(0))
        self.reads: Dict[str, sympy.Expr] = defaultdict(lambda: sympy.Integer(0))
        self.writes: Dict[str, sympy.Expr] = defaultdict(lambda: sympy.Integer(0))
        self.notes: List[str] = []
        self.aliases: Dict[str, str] = {}
        self.globals: Dict[str, dt.Data] = {}
        self.acc = _PEAcc()

    def note(self, text):
        if text not in self.notes:
            self.notes.append(text)

    @staticmethod
    def out(ctx, expr):
        expr = sympy.sympify(expr)
        if ctx.subs:
            expr = expr.subs({s: ctx.subs[s.name] for s in expr.free_symbols if s.name in ctx.subs})
        return expr

    def outer(self, ctx, name):
        return ctx.names.get(name, name)

    # -- scopes --------------------------------------------------------------------------
    def level(self, ctx, state, items) -> sympy.Expr:
        """Cost of the nodes of one scope level: total cycles over the call, or, inside a
        pipelined loop (``ctx.loop``), the latency they add to one iteration."""
        cost = sympy.Integer(0)
        for n in items:
            if isinstance(n, nodes.MapEntry):
                cost += self.map(ctx, state, n)
            elif isinstance(n, nodes.Tasklet):
                cost += self.tasklet(ctx, state, n)
            elif isinstance(n, nodes.NestedSDFG):
                cost += self.nested(ctx, state, n)
            elif isinstance(n, self.Gearbox):
                cost += self.gearbox(ctx, state, n)
            elif isinstance(n, nodes.LibraryNode):
                self.note(f'library node {n.label} ({type(n).__name__}) is not modelled: expand it first')
            elif isinstance(n, nodes.AccessNode):
                self.allocate(ctx, n)
        return cost

    def innermost(self, state, me) -> bool:
        """DaCe's FPGA ``_is_innermost``: no non-unrolled, non-degenerate map inside."""
        children = state.scope_children()
        todo = list(children[me])
        while todo:
            x = todo.pop()
            if isinstance(x, nodes.MapEntry):
                if not x.map.unroll and _int(x.map.range.num_elements(), 2) != 1:
                    return False
                todo += children[x]
            elif isinstance(x, nodes.NestedSDFG):
                for st in x.sdfg.states():
                    if any(isinstance(y, nodes.MapEntry) and not y.map.unroll for y in st.nodes()):
                        return False
        return True

    def dynamic_total(self, ctx, state, me, dyn) -> Tuple[sympy.Expr, str]:
        """Executions of a dynamic-range map over one call (rules 1 and 2 of the module)."""
        children = state.scope_children()
        # 1. stream conservation
        todo = [(x, sympy.Integer(1)) for x in children[me]]
        while todo:
            x, f = todo.pop()
            if isinstance(x, nodes.MapEntry):
                todo += [(y, f * x.map.range.num_elements()) for y in children[x]]
            elif isinstance(x, nodes.Tasklet):
                for e in state.in_edges(x):
                    src = state.memlet_path(e)[0].src
                    if isinstance(src, nodes.AccessNode) and isinstance(ctx.sdfg.arrays[src.data], dt.Stream):
                        name = self.outer(ctx, src.data)
                        if name in self.known:  # (the first pass does not know them yet)
                            return self.known[name] / self.out(ctx, f), f'pops of {name}'
        # 2. pointer telescoping: P[i]:P[i+1]
        feeds = {e.dst_conn: e.data for e in state.in_edges(me) if e.dst_conn in dyn}
        b, e_, _ = me.map.range.ranges[0]
        bs, es = {s.name for s in sympy.sympify(b).free_symbols}, {s.name for s in sympy.sympify(e_).free_symbols}
        if len(feeds) == 2 and len({m.data for m in feeds.values()}) == 1 and bs & set(feeds) and es & set(feeds):
            lo, hi = feeds[next(iter(bs & set(feeds)))], feeds[next(iter(es & set(feeds)))]
            diff = _simplify(sympy.sympify(hi.subset.min_element()[0]) - sympy.sympify(lo.subset.min_element()[0]))
            if diff == 1:
                param = me.map.params[0]
                for x in state.scope_subgraph(me).nodes():
                    if not isinstance(x, nodes.Tasklet):
                        continue
                    for ed in state.in_edges(x):
                        if ed.data.data and str(ed.data.subset.min_element()[0]) == param:
                            length = self.out(ctx, ctx.sdfg.arrays[ed.data.data].shape[0])
                            if isinstance(length, sympy.Symbol):
                                self.aliases.setdefault('nnz', length.name)
                            return length, f'{self.outer(ctx, lo.data)}[i]:{self.outer(ctx, lo.data)}[i+1] telescopes'
        sym = sympy.Symbol(f'{me.map.label}_trips')
        self.note(f'the trips of dynamic map {me.map.label} over one call are a new symbol {sym}')
        return sym, 'unknown'

    def map(self, ctx, state, me) -> sympy.Expr:
        children = [x for x in state.scope_children()[me] if not isinstance(x, nodes.ExitNode)]
        size = self.out(ctx, me.map.range.num_elements())
        dyn = {c for c in me.in_connectors if not c.startswith('IN_')}
        dynamic = bool({s.name for s in sympy.sympify(me.map.range.num_elements()).free_symbols} & dyn)
        fetch = 0  # reads of dynamic-range inputs (row pointers): one memory latency per start of the map
        for e in state.in_edges(me):
            if e.dst_conn in dyn and self.access(ctx, state, e, None, (), reads=True)[0]:
                fetch = MAXI_LATENCY
        start = ctx.execs / ctx.copies * fetch if ctx.loop is None else sympy.Integer(fetch)
        if _int(size, 2) == 1:
            return start + self.level(ctx, state, children)
        if me.map.unroll:
            n = _int(size, 1)
            if n == 1 and size != 1:
                self.note(f'unrolled map {me.map.label} has a symbolic size; counted as one copy')
            return start + self.level(replace(ctx, execs=ctx.execs * size, copies=ctx.copies * n,
                                              unroll=ctx.unroll * n, flat_entries=None), state, children)
        if ctx.loop is not None:
            self.note(f'map {me.map.label} inside pipelined loop {ctx.loop.label}: taken as a sequential loop')
            return start + self.level(replace(ctx, execs=ctx.execs * size), state, children) * size
        total, rule = self.dynamic_total(ctx, state, me, dyn) if dynamic else (ctx.execs * size, 'range')
        if dynamic and isinstance(ctx.execs, sympy.Symbol):  # a per-row loop: its parent runs over the rows
            self.aliases.setdefault('rows', ctx.execs.name)
        entries = ctx.flat_entries if ctx.flat_entries is not None else ctx.execs / ctx.copies
        if self.innermost(state, me):
            loop = _Loop(me.map.label, frozenset(me.map.params), entry=me)
            lat = self.level(replace(ctx, execs=total, loop=loop, unroll=1, flat_entries=None), state, children)
            ii = self.loop_ii(loop)
            depth = 1 + _int(lat, 1) + (MAXI_LATENCY if loop.reads_global else 0)
            cycles = total / ctx.copies * ii + entries * depth
            self.acc.loops.append(LoopModel(me.map.label, True, total, entries, ii, depth, cycles, loop.reasons, rule))
            self.acc.lut += _LOOP_LUT
            self.acc.ff += _LOOP_FF
            return start + cycles
        work = [x for x in children if not isinstance(x, nodes.AccessNode)]
        flat = (len(work) == 1 and isinstance(work[0], nodes.MapEntry) and not work[0].map.unroll
                and self.innermost(state, work[0])
                and not {c for c in work[0].in_connectors if not c.startswith('IN_')})
        body = self.level(replace(ctx, execs=total, flat_entries=entries if flat else None), state, children)
        overhead = 0 if flat else total / ctx.copies
        self.acc.loops.append(LoopModel(me.map.label, False, total, entries, 1, 0, body + overhead, {}, rule))
        self.acc.lut += _LOOP_LUT
        self.acc.ff += _LOOP_FF
        return start + body + overhead

    def loop_ii(self, loop: _Loop) -> int:
        for arr, n in loop.reads.items():
            if n > 1:
                loop.reasons[f'{n} reads of {arr} per iteration (one m_axi port)'] = n
        for arr, n in loop.random_reads.items():
            ii = math.ceil(n * MAXI_LATENCY / MAXI_OUTSTANDING)
            loop.reasons[f'{n} random reads of {arr} per iteration ({MAXI_OUTSTANDING} in flight over '
                         f'{MAXI_LATENCY} cycles)'] = ii
        for arr, n in loop.writes.items():
            if n > 1:
                loop.reasons[f'{n} writes of {arr} per iteration'] = n
        for s, n in loop.streams.items():
            if n > 1:
                loop.reasons[f'{n} accesses of FIFO {s} per iteration'] = n
        return max(loop.reasons.values(), default=1)

    # -- nodes ---------------------------------------------------------------------------
    def access(self, ctx, state, e, code_tree, inputs, reads: bool, conn=None) -> Tuple[bool, bool]:
        """Count one memlet of a tasklet (or a dynamic map input): global traffic, FIFO
        pushes/pops, per-iteration port use. Returns (global read, random read)."""
        path = state.memlet_path(e)
        node = path[0].src if reads else path[-1].dst
        if not isinstance(node, nodes.AccessNode) or e.data.data is None:
            return False, False
        desc = ctx.sdfg.arrays[node.data]
        name = self.outer(ctx, node.data)
        if isinstance(desc, dt.Stream):
            if not reads:
                self.pushes[name] += ctx.execs
            if ctx.loop is not None:
                ctx.loop.streams[name] += ctx.unroll
            return False, False
        if desc.storage != dtypes.StorageType.FPGA_Global:
            return False, False
        vol = self.out(ctx, e.data.volume)
        elems, random = vol, False
        if _int(vol, 2) != 1 and code_tree is not None and conn is not None:
            subs = [s for s in ast.walk(code_tree) if isinstance(s, ast.Subscript)
                    and isinstance(s.value, ast.Name) and s.value.id == conn]
            if subs:
                elems = sympy.Integer(len(subs))
                random = any(isinstance(x, ast.Name) and x.id in inputs for s in subs for x in ast.walk(s.slice))
        self.globals.setdefault(name, desc)
        nbytes = ctx.execs * elems * desc.dtype.bytes
        if reads or e.data.wcr is not None:
            self.reads[name] += nbytes
        if not reads:
            self.writes[name] += nbytes
        if ctx.loop is not None:
            n = _int(elems, 1) * ctx.unroll
            if reads or e.data.wcr is not None:
                (ctx.loop.random_reads if random else ctx.loop.reads)[name] += n
                ctx.loop.reads_global = True
            if not reads:
                ctx.loop.writes[name] += n
        return reads or e.data.wcr is not None, random

    def conn_types(self, ctx, state, t) -> Dict[str, Tuple[str, int]]:
        types = {}
        for conns, edges, attr in ((t.in_connectors, state.in_edges(t), 'dst_conn'),
                                   (t.out_connectors, state.out_edges(t), 'src_conn')):
            for e in edges:
                c = getattr(e, attr)
                if c is None:
                    continue
                tc = _type_class(conns.get(c))
                if tc is None and e.data.data is not None:
                    tc = _type_class(ctx.sdfg.arrays[e.data.data].dtype)
                if tc is not None:
                    types[c] = tc
        return types

    def tasklet(self, ctx, state, t) -> sympy.Expr:
        if t.language != dtypes.Language.Python:
            self.note(f'tasklet {t.label} is {t.language.name}: its operations are not counted')
            code = None
        else:
            code = ast.Module(body=list(t.code.code), type_ignores=[])
        inputs = set(t.in_connectors)
        types = self.conn_types(ctx, state, t)
        counter = _Ops(types, {c: 0 for c in t.in_connectors})
        ready = counter.run(code.body) if code is not None else {}
        for fname in counter.calls:
            self.note(f'call {fname}() in tasklet {t.label} is not modelled (no cost)')
        for (kind, cls), lanes in counter.ops.items():
            self.acc.ops[f'{kind}.{cls}'] += lanes * ctx.copies
        for e in state.out_edges(t):  # a write-conflict resolution is an operator too
            tc = _type_class(ctx.sdfg.arrays[e.data.data].dtype) if e.data.data and e.data.wcr is not None else None
            if tc is not None and _wcr_kind(e.data.wcr):
                self.acc.ops[f'{_wcr_kind(e.data.wcr)}.{tc[0]}'] += tc[1] * ctx.copies
        reads_global = False
        for e in state.in_edges(t):
            g, _ = self.access(ctx, state, e, code, inputs, True, e.dst_conn)
            reads_global |= g
        for e in state.out_edges(t):
            g, _ = self.access(ctx, state, e, code, inputs, False, e.src_conn)
            reads_global |= g
        if ctx.loop is not None and code is not None:
            self.recurrences(ctx, state, t, code, types)
        lat = max([r for c, r in ready.items() if c in t.out_connectors and r is not None], default=0)
        lat = max(1, lat) + (MAXI_LATENCY if reads_global and ctx.loop is None else 0)
        return sympy.Integer(lat) if ctx.loop is not None else ctx.execs / ctx.copies * lat

    def recurrences(self, ctx, state, t, code, types):
        """Loop-carried updates of one element inside the pipelined loop ``ctx.loop``."""
        for oe in state.out_edges(t):
            if oe.data.data is None or isinstance(ctx.sdfg.arrays[oe.data.data], dt.Stream):
                continue
            desc = ctx.sdfg.arrays[oe.data.data]
            lat = None
            if oe.data.wcr is not None:
                kind, tc = _wcr_kind(oe.data.wcr), _type_class(desc.dtype)
                lat = OP_COSTS[(kind, tc[0])].latency if kind and tc else 1
                what = f'WCR {kind}'
            else:
                for ie in state.in_edges(t):
                    if ie.data.data == oe.data.data and str(ie.data.subset) == str(oe.data.subset) \
                            and not _reset_in_loop(state, ctx.loop.entry, ie):
                        ready = _Ops(types, {ie.dst_conn: 0}).run(code.body)
                        if ready.get(oe.src_conn) is not None:
                            lat, what = max(1, ready[oe.src_conn]), f'{ie.dst_conn} -> {oe.src_conn}'
            if lat is None:
                continue
            dist = 1
            for idx in oe.data.subset.min_element():
                idx = sympy.sympify(idx)
                if not {s.name for s in idx.free_symbols} & ctx.loop.params:
                    continue
                mods = [m for m in idx.atoms(sympy.Mod) if {s.name for s in m.free_symbols} & ctx.loop.params]
                if not mods or not mods[0].args[1].is_Integer:
                    dist = None  # a new element every iteration: no recurrence
                    break
                dist *= int(mods[0].args[1])
            if dist is None:
                continue
            if desc.storage == dtypes.StorageType.FPGA_Global:
                lat += MAXI_LATENCY
            elif desc.storage == dtypes.StorageType.FPGA_Local:
                lat += _LOCAL_LATENCY
            ii = math.ceil(lat / dist)
            name = self.outer(ctx, oe.data.data)
            ctx.loop.reasons[f'recurrence on {name} ({what}, {lat} cycles over {dist} element(s))'] = ii

    def gearbox(self, ctx, state, g) -> sympy.Expr:
        ie, oe = state.in_edges(g)[0], state.out_edges(g)[0]
        din, dout = ctx.sdfg.arrays[ie.data.data], ctx.sdfg.arrays[oe.data.data]
        wide, narrow = (din, dout) if din.veclen >= dout.veclen else (dout, din)
        gear = max(1, wide.veclen // max(1, narrow.veclen))
        size = self.out(ctx, g.size)
        trips = ctx.execs * size * gear
        self.pushes[self.outer(ctx, oe.data.data)] += ctx.execs * size * (1 if dout is wide else gear)
        if ctx.loop is not None:
            ctx.loop.streams[self.outer(ctx, ie.data.data)] += ctx.unroll
        depth = 2
        cycles = trips + depth * ctx.execs
        self.acc.loops.append(LoopModel(g.label, True, trips, ctx.execs, 1, depth, cycles, {}, 'gearbox size x factor'))
        wb, nb = wide.dtype.bytes * 8, narrow.dtype.bytes * 8
        self.acc.lut += wb + _LOOP_LUT
        self.acc.ff += wb + nb + _LOOP_FF
        return cycles

    def nested(self, ctx, state, n) -> sympy.Expr:
        names = {}
        for e in state.in_edges(n) + state.out_edges(n):
            conn = e.dst_conn if e.dst is n else e.src_conn
            if conn and e.data.data:
                names[conn] = self.outer(ctx, e.data.data)
        subs = {str(k): self.out(ctx, dace.symbolic.pystr_to_symbolic(str(v))) for k, v in n.symbol_mapping.items()}
        return self.region(replace(ctx, sdfg=n.sdfg, names=names, subs=subs), n.sdfg)

    def region(self, ctx, region) -> sympy.Expr:
        from dace.sdfg.state import ConditionalBlock, LoopRegion
        cost = sympy.Integer(0)
        for block in region.nodes():
            if isinstance(block, dace.SDFGState):
                top = [x for x in block.scope_children()[None] if not isinstance(x, nodes.ExitNode)]
                cost += self.level(ctx, block, top)
            elif isinstance(block, LoopRegion):
                from dace.transformation.passes.analysis import loop_analysis as la
                b, e, s = la.get_init_assignment(block), la.get_loop_end(block), la.get_loop_stride(block)
                if None in (b, e, s):
                    trips = sympy.Symbol(f'{block.label}_trips')
                    self.note(f'the trips of loop {block.label} are a new symbol {trips}')
                else:
                    trips = self.out(ctx, (sympy.sympify(e) - sympy.sympify(b)) / sympy.sympify(s) + 1)
                body = self.region(replace(ctx, execs=ctx.execs * trips), block)
                cost += body * (trips if ctx.loop is not None else 1) + (0 if ctx.loop is not None else
                                                                           ctx.execs * trips / ctx.copies)
            elif isinstance(block, ConditionalBlock):
                branches = [self.region(ctx, body) for _, body in block.branches]
                cost += sympy.Max(*branches) if branches else 0
            elif hasattr(block, 'nodes'):
                cost += self.region(ctx, block)
        return cost

    def allocate(self, ctx, n):
        desc = ctx.sdfg.arrays[n.data]
        key = (id(ctx.sdfg), n.data)
        if key in self.acc.allocated or not desc.transient or isinstance(desc, dt.Stream):
            return
        self.acc.allocated.add(key)
        bits = desc.dtype.bytes * 8
        count = _int(desc.total_size, 0)
        if desc.storage == dtypes.StorageType.FPGA_Registers or (isinstance(desc, dt.Scalar) and desc.storage in (
                dtypes.StorageType.FPGA_Local, dtypes.StorageType.Register)):
            self.acc.ff += bits * count
            if count > 1:
                self.acc.lut += bits * math.ceil(count / 4)  # read multiplexer
        elif desc.storage in (dtypes.StorageType.FPGA_Local, dtypes.StorageType.FPGA_ShiftRegister):
            if count == 0:
                self.note(f'local array {n.data} has a symbolic size: its memory is not counted')
            elif bits * count <= _LUTRAM_BITS:
                self.acc.lut += math.ceil(bits * count / 64)
            else:
                self.acc.bram18 += _bram18(count, bits)

    # -- PEs and states ------------------------------------------------------------------
    def pe_name(self, state, top) -> str:
        parts = []
        for n in top:
            if isinstance(n, self.Gearbox):
                parts.append(f'gearbox({state.in_edges(n)[0].data.data}->{state.out_edges(n)[0].data.data})')
            elif isinstance(n, nodes.MapEntry):
                parts.append(n.map.label)
            elif isinstance(n, (nodes.Tasklet, nodes.NestedSDFG, nodes.LibraryNode)):
                parts.append(n.label)
        return '+'.join(parts) or '?'

    def pumping(self, state, sg) -> int:
        gears = []
        streams = {n.data for n in sg.nodes() if isinstance(n, nodes.AccessNode)}
        for g in state.nodes():
            if isinstance(g, self.Gearbox):
                touched = {e.data.data for e in state.in_edges(g) + state.out_edges(g)}
                if g in sg.nodes() or touched & streams:
                    din = self.top.arrays[state.in_edges(g)[0].data.data]
                    dout = self.top.arrays[state.out_edges(g)[0].data.data]
                    gears.append(max(din.veclen, dout.veclen) // max(1, min(din.veclen, dout.veclen)))
        if gears:
            return max(gears)
        self.note(f'multi-pumped PE in {state.label} has no Gearbox: factor {_DEFAULT_PUMP} assumed')
        return _DEFAULT_PUMP

    def pe(self, state, sg, clock_mhz) -> Optional[PEModel]:
        members = set(sg.nodes())
        top = [n for n in state.scope_children()[None] if n in members and not isinstance(n, nodes.ExitNode)]
        if not any(isinstance(n, (nodes.MapEntry, nodes.CodeNode)) for n in top):
            return None
        pumped = any(getattr(n, 'schedule', None) == dtypes.ScheduleType.FPGA_Multi_Pumped for n in members)
        f = self.pumping(state, sg) if pumped else 1
        if clock_mhz * f > _FABRIC_MHZ:
            self.note(f'a PE pumped by {f} runs at {clock_mhz * f:g} MHz: beyond what UltraScale+ fabric usually '
                      f'closes (~{_FABRIC_MHZ} MHz); the model does not check timing')
        self.acc = _PEAcc()
        cycles = self.level(_Ctx(self.top, sympy.Integer(1), 1), state, top)
        ops = dict(self.acc.ops)
        dsp = sum(OP_COSTS[(k.split('.')[0], k.split('.')[1])].dsp * n for k, n in ops.items()
                  if tuple(k.split('.')) in OP_COSTS)
        lut, ff = self.acc.lut, self.acc.ff
        for k, n in ops.items():
            kind, cls = k.split('.')
            if (kind, cls) in OP_COSTS:
                lut += OP_COSTS[(kind, cls)].lut * n
                ff += OP_COSTS[(kind, cls)].ff * n
            else:  # logic, select: a LUT per bit
                lut += _BITS[cls] * n
        loops = self.acc.loops
        piped = [lp for lp in loops if lp.pipelined]
        return PEModel(name=self.pe_name(state, top), state=state.label,
                       schedule='FPGA_Multi_Pumped' if pumped else 'FPGA_Device', pumping=f,
                       clock_mhz=clock_mhz * f, loops=loops, trips=sympy.Add(*[lp.trips for lp in piped]),
                       ii=int(max([lp.ii for lp in piped], default=1)), ops=ops, dsp=int(dsp), lut=int(lut),
                       ff=int(ff), bram18=int(self.acc.bram18), uram=0, cycles=_simplify(cycles / f),
                       depth=math.ceil(max([lp.depth for lp in piped], default=0) / f))

    def state(self, state, clock_mhz):
        pes = [p for sg in dace.sdfg.concurrent_subgraphs(state) for p in [self.pe(state, sg, clock_mhz)] if p]
        seen = Counter(p.name for p in pes)
        index = Counter()
        for p in pes:
            if seen[p.name] > 1:
                index[p.name] += 1
                p.name = f'{p.name}#{index[p.name]}'
        fifos, used = [], set()
        for n in state.data_nodes():
            desc = self.top.arrays[n.data]
            if isinstance(desc, dt.Stream) and desc.transient and n.data not in used:
                used.add(n.data)
                depth, bits = max(1, _int(desc.buffer_size, 1)), desc.dtype.bytes * 8
                if depth <= SRL_MAX_DEPTH:
                    fifos.append(FifoModel(n.data, depth, bits, 'SRL', bits * math.ceil(depth / 32) + 16, bits + 16, 0))
                else:
                    fifos.append(FifoModel(n.data, depth, bits, 'BRAM', 30, 40, _bram18(depth, bits)))
        # (unevaluated: sympy's pairwise comparison of the PEs' cycles took half a model's time)
        cycles = (sympy.Max(*[p.cycles for p in pes], evaluate=False) + sum(p.depth for p in pes) if pes else
                  sympy.Integer(0))
        return pes, fifos, cycles


def _kernel_states(sdfg) -> list:
    states = sdfg.all_states() if hasattr(sdfg, 'all_states') else sdfg.states()
    return [st for st in states if dace.sdfg.utils.is_fpga_kernel(sdfg, st)
            and any(not isinstance(n, nodes.AccessNode) for n in st.nodes())]


def _bank(desc, board: Board) -> Tuple[str, str]:
    loc = getattr(desc, 'location', None) or {}
    if 'memorytype' in loc:
        return str(loc['memorytype']).upper(), str(loc.get('bank', '0'))
    return board.default_memory, '0'
