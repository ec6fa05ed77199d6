"""Build an SDFG from generated Python source.

The default expansions write the loop nest of an operation as a short NumPy-style
Python function (maps for parallel loops, ``range`` for sequential and data-dependent
ones) and let DaCe's own frontend turn it into an SDFG. Level formats contribute the
loop headers (:meth:`SparseFormat.iteration`), so every format gets every operation.
"""
import collections
import copy
import hashlib
import itertools
import json
import linecache
import os
import re
import threading
import types
from typing import Dict, List, Optional, Sequence, Tuple

import dace
import numpy as np
import sympy

from sdfgsparse._symbolic import pyexpr
from sdfgsparse.build import cache as buildcache
from sdfgsparse.build import naming
from sdfgsparse._warnings import benign_dace_warnings
from sdfgsparse.targets.cpu import storage_check
from sdfgsparse.targets.cpu.builder import schedule_rows
from sdfgsparse.targets.cpu.team import TeamWork, add_teams

__all__ = ['KernelBuilder', 'pyexpr', 'cpp_tasklet']

#: what :meth:`KernelBuilder._bind_min_max` binds: clipping (a slice's bounds) and floor
#: divisions of sizes (a reshape to ``N // 2`` columns, printed as a call by ``pyexpr``)
_MIN_MAX = re.compile(r'(?<![\w.])(Min|Max|int_floor)\(')


def _bound_name(text: str) -> str:
    return 'ssbound_' + hashlib.sha1(text.encode()).hexdigest()[:10]


def _clipped(e) -> list:
    """The outermost ``Min`` / ``Max`` subexpressions of ``e``."""
    if not dace.symbolic.issymbolic(e):
        return []
    found = []

    def walk(x):
        if isinstance(x, (sympy.Min, sympy.Max)):
            found.append(x)
            return
        for a in x.args:
            walk(a)

    walk(sympy.sympify(e))
    return found


def bind(kernel: dace.SDFG, symbols: Dict[str, str], parallel: bool = True) -> dace.SDFG:
    """``kernel`` inside an SDFG of the same arguments that sets ``symbols`` (name ->
    expression of the kernel's other symbols) as it calls it (the nested SDFG's symbol
    mapping): the kernel reads them as plain symbols from its start, transients sized by
    them included. Returns ``kernel`` itself when ``symbols`` is empty.

    With ``parallel`` (the library node runs outside any parallel scope), the kernel's
    outermost maps are scheduled ``CPU_Multicore`` here: DaCe gives the maps of an
    expansion's top level the node's schedule but those one nested SDFG deeper the schedule
    of a map inside a parallel one, sequential (an n:m SDDMM ran on one thread)."""
    if not symbols:
        return kernel
    if parallel:
        for st in kernel.states():
            for n in st.nodes():
                if (isinstance(n, dace.nodes.MapEntry) and st.entry_node(n) is None
                        and n.map.schedule == dace.ScheduleType.Default):
                    n.map.schedule = dace.ScheduleType.CPU_Multicore
    outer = dace.SDFG(kernel.name)
    state = outer.add_state('bounds', is_start_block=True)
    reads = {n for n, d in kernel.arrays.items() if not d.transient}
    writes = {n.data for st in kernel.all_states() for n in st.data_nodes() if n.data in reads and st.in_degree(n) > 0}
    back = {dace.symbol(n, dace.int64): dace.symbolic.pystr_to_symbolic(e) for n, e in symbols.items()}
    for name, desc in kernel.arrays.items():
        if not desc.transient:
            desc = copy.deepcopy(desc)
            if isinstance(desc, dace.data.Array):  # sized as the caller's data are
                desc.set_shape([sympy.sympify(x).xreplace(back) for x in desc.shape],
                               [sympy.sympify(x).xreplace(back) for x in desc.strides],
                               sympy.sympify(desc.total_size).xreplace(back), desc.offset)
            outer.add_datadesc(name, desc)
    # the kernel's symbols, those that only size its arguments included (a result's capacity)
    used = {str(x) for x in kernel.free_symbols}
    used |= {str(x) for d in kernel.arrays.values() if not d.transient for x in d.free_symbols}
    mapping = {x: dace.symbol(x, kernel.symbols.get(x, dace.int64)) for x in used if x not in symbols}
    mapping.update({n: dace.symbolic.pystr_to_symbolic(e) for n, e in symbols.items()})
    for e in list(mapping.values()) + [s for d in outer.arrays.values() for s in d.free_symbols]:
        for x in dace.symbolic.pystr_to_symbolic(str(e)).free_symbols:
            if str(x) not in outer.symbols:
                outer.add_symbol(str(x), kernel.symbols.get(str(x), dace.int64))
    node = state.add_nested_sdfg(kernel, outer, reads, writes, symbol_mapping=mapping)
    for n in sorted(reads):
        state.add_edge(state.add_read(n), None, node, n, dace.Memlet.from_array(n, outer.arrays[n]))
    for n in sorted(writes):
        state.add_edge(node, n, state.add_write(n), None, dace.Memlet.from_array(n, outer.arrays[n]))
    return outer


def cpp_tasklet(inputs: Sequence[Tuple[str, str]], outputs: Sequence[Tuple[str, str]], code: str,
                side_effects: bool = False) -> List[str]:
    """The generated-source lines of one C++ tasklet — the only way the cpu kernels emit C++.

    :param inputs, outputs: ``(connector, memlet expression)`` pairs (``('_tx', 'x')``,
                            ``('_ty', 'y[i, :]')``, ``('_tc', 'crd(-1)')`` for a dynamic read).
    :param code: the C++ body (one statement list; connectors are its variables).
    :param side_effects: keep the tasklet even when nothing reads what it writes.
    """
    head = 'with dace.tasklet(dace.Language.CPP' + (', side_effects=True' if side_effects else '') + '):'
    return ([head] + [f'    {c} << {m}' for c, m in inputs] + [f'    {c} >> {m}' for c, m in outputs] +
            [f'    """{code}"""'])


class KernelBuilder:
    """Collects parameters and source lines of one generated kernel.

    >>> kb = KernelBuilder('scale')
    >>> x = kb.param('x', dace.data.Array(dace.float64, [10]))
    >>> kb.line(f'for i in dace.map[0:10]:')
    >>> kb.line(f'    {x}[i] = 2 * {x}[i]')
    >>> sdfg = kb.build()
    """

    def __init__(self, name: str):
        self.name = re.sub(r'\W', '_', name)
        self.params: Dict[str, dace.data.Data] = {}
        self.globals: Dict[str, object] = {'dace': dace, 'np': np}  # np: epilogues' functions
        self.lines: List[str] = []
        self._tmp = itertools.count()
        self.sparse_operands: List[dace.data.Data] = []  # their compiled storage checks go along
        self.balanced: set = set()  # variables of row maps scheduled dynamically (:meth:`balance`)
        self.view_symbols: set = set()  # (view_symbols_of)
        self.bindings: Dict[str, object] = {}  # symbols set before the loops (a view's slice bounds) -> expression
        self.teams: Dict[str, TeamWork] = {}  # variables of row maps whose thread count is chosen per call
        self.parallel = True  # whether the kernel runs outside any parallel scope (:func:`bind`)

    def param(self, name: str, desc: dace.data.Data) -> str:
        """Declare an argument (a non-transient copy of ``desc``); returns its name."""
        d = desc.clone()
        d.transient = False
        if isinstance(d, dace.data.View):  # strides kept: ``X[:, 0]`` reaches the kernel as a strided vector
            d = dace.data.Array(d.dtype, d.shape, strides=d.strides, total_size=d.total_size)
        if isinstance(d, dace.data.Array) and any(_clipped(e) for e in (*d.shape, *d.strides, d.total_size)):
            # sized by a view's bounds: the kernel's symbols for them (see _bind_min_max)
            d.set_shape([self._bound(e) for e in d.shape], [self._bound(e) for e in d.strides],
                        self._bound(d.total_size), d.offset)
        self.params[name] = d
        for s in d.free_symbols:
            self.symbol(str(s))
        return name

    def symbol(self, name: str):
        self.globals.setdefault(name, dace.symbol(name))

    def balance(self, var: str) -> None:
        """Schedule the outermost parallel maps over ``var`` (rows whose costs differ: a
        power-law row length) dynamically, :data:`ROW_CHUNK` iterations at a time."""
        self.balanced.add(var)

    def team(self, var: str, work: TeamWork) -> None:
        """Choose the thread count of the outermost parallel maps over ``var`` per call from
        their ``work`` (:mod:`sdfgsparse.targets.cpu.team`: one thread for little work, and
        the faster of one thread and the team as measured on recent calls)."""
        self.teams[var] = work

    def view_symbols_of(self, *exprs):
        """The symbols of a view's bounds: read through :meth:`_bind_min_max`'s symbols, so
        that a program's ``c`` or ``d`` does not meet the kernel's own names."""
        for e in exprs:
            if dace.symbolic.issymbolic(e):
                self.view_symbols |= {str(s) for s in sympy.sympify(e).free_symbols}

    def symbols_of(self, *exprs):
        """Declare the symbols of ``exprs``; those read only inside a ``Min`` / ``Max`` (a
        view's bounds) are left to :meth:`_bind_min_max` (:meth:`view_symbols_of`)."""
        for e in exprs:
            if dace.symbolic.issymbolic(e):
                e = sympy.sympify(e)
                clipped = _clipped(e)
                self.view_symbols_of(*clipped)
                for s in e.xreplace({a: sympy.Integer(0) for a in clipped}).free_symbols:
                    self.symbol(str(s))

    def const(self, value) -> str:
        """Bind a Python object (a dtype, a constant) to a fresh global name."""
        n = f'_g{next(self._tmp)}'
        self.globals[n] = value
        return n

    @staticmethod
    def dtype(t: dace.typeclass) -> str:
        """Source spelling of a dtype constructor (``dace.float64``)."""
        return f'dace.{t.type.__name__}'

    def tmp(self, prefix='t') -> str:
        return f'{prefix}{next(self._tmp)}'

    def line(self, text: str, indent: int = 0):
        self.lines.append('    ' * indent + text)

    def source(self) -> str:
        args = ', '.join(f'{n}: {self.const(d)}' for n, d in self.params.items())
        body = self.lines or ['pass']
        return self._bind_min_max(f'def {self.name}({args}):\n' + '\n'.join('    ' + l for l in body) + '\n')

    def _bound(self, e):
        """``e`` with each outermost ``Min`` / ``Max`` replaced by the symbol that
        :meth:`_bind_min_max` gives its text."""
        e = sympy.sympify(e)
        repl = {}
        for a in _clipped(e):
            text = pyexpr(a)
            name = _bound_name(text)
            self.bindings[name] = text
            self.view_symbols_of(a)
            repl[a] = dace.symbol(name, dace.int64)
        return e.xreplace(repl) if repl else e

    def _bind_min_max(self, src: str) -> str:
        """``src`` with each ``Min(...)`` / ``Max(...)`` of the kernel's symbols (a view's
        bounds, NumPy's clipping of a slice) read through a symbol that :meth:`build` sets
        before the kernel's loops (:attr:`bindings`): DaCe 1.0.2's frontend cannot parse
        them in a map range."""
        out, at = [], 0
        for m in _MIN_MAX.finditer(src):
            if m.start() < at:
                continue  # inside an expression bound already
            depth, end = 0, m.end() - 1
            for end in range(m.end() - 1, len(src)):
                depth += {'(': 1, ')': -1}.get(src[end], 0)
                if depth == 0:
                    break
            expr = src[m.start():end + 1]
            names = set(re.findall(r'[A-Za-z_]\w*', expr)) - {'Min', 'Max', 'int_floor'}
            if not all(n in self.view_symbols or isinstance(self.globals.get(n), dace.symbol) for n in names):
                continue
            name = _bound_name(expr)
            self.bindings[name] = expr
            self.symbol(name)
            out.append(src[at:m.start()] + name)
            at = end + 1
        return ''.join(out) + src[at:]

    def build(self) -> dace.SDFG:
        src = self.source()
        key = _memo_key(src, self.globals)
        sdfg = None
        if key:
            with _MEMO_LOCK:
                text = _MEMO.get(key)
                if text is not None:
                    _MEMO.move_to_end(key)
            if text is not None:
                sdfg = dace.SDFG.from_json(json.loads(text))
            else:  # parsed by an earlier process of this sdfgsparse?
                text = _disk_get(key)
                try:
                    sdfg = dace.SDFG.from_json(json.loads(text)) if text is not None else None
                except Exception:  # unreadable: parsed (and written) again below
                    sdfg = None
                if sdfg is not None:
                    _remember(key, text)
        if sdfg is None:
            parsed = self._parse(src)
            if key:  # the first use takes the serialised SDFG too: every use gets the same
                text = json.dumps(parsed.to_json())
                _remember(key, text)
                _disk_put(key, text)
                sdfg = dace.SDFG.from_json(json.loads(text))
            else:
                sdfg = parsed
        schedule_rows(sdfg, self.balanced)
        add_teams(sdfg, self.teams)
        for d in list(self.params.values()) + self.sparse_operands:  # the warm call path's argument checks
            storage_check.add_to(sdfg, d)
        return bind(sdfg, self.bindings, self.parallel)

    def _parse(self, src: str) -> dace.SDFG:
        """The SDFG of ``src`` by DaCe's frontend (and its simplification)."""
        # named by its text: the name ends up in the SDFG's debug info, which DaCe's hash
        # cache keys builds by (a per-process counter here made each later build miss)
        fname = f'<sdfgsparse-kernel-{self.name}-{hashlib.sha256(src.encode()).hexdigest()[:12]}>'
        linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
        ns = dict(self.globals)
        exec(compile(src, fname, 'exec'), ns)
        prog = dace.program(ns[self.name])
        try:
            with benign_dace_warnings():  # (loops over stored entries: memlets DaCe cannot propagate exactly)
                sdfg = prog.to_sdfg(simplify=True)
        except Exception as ex:  # pragma: no cover - shows the generated source for debugging
            raise RuntimeError(f'sdfgsparse: could not parse generated kernel:\n{src}') from ex
        sdfg.name = self.name
        return sdfg


#: parsed kernels of this process, by :func:`_memo_key` (as SDFG JSON: every use gets its
#: own SDFG), least recently used first
_MEMO: 'collections.OrderedDict[str, str]' = collections.OrderedDict()
_MEMO_LOCK = threading.Lock()
MEMO_SIZE = 512


def _remember(key: str, text: str) -> None:
    with _MEMO_LOCK:
        _MEMO[key] = text
        _MEMO.move_to_end(key)
        while len(_MEMO) > MEMO_SIZE:
            _MEMO.popitem(last=False)


def _disk_path(key: str) -> str:
    """Where another process finds a parsed kernel: beside DaCe's build folders
    (:data:`sdfgsparse.build.cache.KERNELS`), named by sdfgsparse's source
    fingerprint and the key (so another sdfgsparse never reads it; ``sdfgsparse cache
    --prune`` removes those of another)."""
    return os.path.join(buildcache.default_folder(), buildcache.KERNELS,
                        f'{naming.source_fingerprint()}-{key}.json')


def _disk_get(key: str) -> Optional[str]:
    try:  # (read only: a read-only cache stays untouched)
        with open(_disk_path(key)) as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def _disk_put(key: str, text: str) -> None:
    """Write atomically (a reader sees the whole file or none); a cache that cannot be
    written (read-only, or a full disk) is skipped."""
    path = _disk_path(key)
    tmp = f'{path}.{os.getpid()}.{threading.get_ident()}.tmp'
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, 'w') as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError:  # (a full disk: the partial file would only take more of it)
        try:
            os.remove(tmp)
        except OSError:
            pass


def _memo_key(src: str, namespace: Dict[str, object]) -> Optional[str]:
    """What a kernel's SDFG depends on: its source and the globals it names (modules by
    name, symbols with their dtype, descriptors and dtypes by their JSON, numbers and
    strings by type and value); None when a global is anything else (not memoised).

    The frontend parses a kernel of 60-70 lines in about a second, two thirds of it
    DaCe's simplification; programs repeat kernels (``A + B`` and ``(A + B) @ x``, the
    same conversion in two products), and so do the programs of one process and of the
    next process (the parsed kernels are kept beside DaCe's build folders too)."""
    parts = [src]
    for name in sorted(namespace):
        v = namespace[name]
        if isinstance(v, types.ModuleType):
            parts.append(f'{name}=module {v.__name__}')
        elif isinstance(v, dace.symbol):
            parts.append(f'{name}=symbol {v.name} {v.dtype.to_string()}')
        elif isinstance(v, (dace.data.Data, dace.typeclass)):
            parts.append(f'{name}={type(v).__name__} {json.dumps(v.to_json(), sort_keys=True, default=str)}')
        elif type(v) in (int, float, bool, str):
            parts.append(f'{name}={type(v).__name__} {v!r}')
        else:
            return None
    return hashlib.sha256('\n'.join(parts).encode()).hexdigest()
