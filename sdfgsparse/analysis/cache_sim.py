"""Count the words a concrete schedule moves through an LRU fast memory of ``S`` words.

The simulator walks the loop tree of a
:class:`~sdfgsparse.analysis.program_model.ProgramModel` in Python (nothing is compiled):
loops run in order, maps run in the order of their parameters — optionally tiled
(``tiling={'i': 4, ...}``) and permuted (``order=('k', 'i', 'j')``), which is legal for maps —
and each statement reads its inputs, then writes its outputs. One array element is one
word. A read miss loads a word; a write allocates without loading (the value is
computed); evicting a written word stores it, and at the end written words of
non-transient arrays are stored. ``moved = loads + stores`` is what an I/O lower bound
must not exceed.
"""
import itertools
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, Mapping, Optional, Sequence, Tuple

import sympy

from sdfgsparse.analysis.errors import SimulationError
from sdfgsparse.analysis.program_model import READ, UPDATE, WRITE, ProgramModel, Scope, Statement

__all__ = ['LRUCache', 'SimResult', 'simulate']


@dataclass
class SimResult:
    """Words loaded and stored by a simulated schedule."""
    loads: int
    stores: int
    accesses: int

    @property
    def moved(self) -> int:
        return self.loads + self.stores


class LRUCache:
    """A fully associative LRU fast memory of ``words`` words (write-allocate, write-back)."""

    def __init__(self, words: int):
        if not isinstance(words, int) or isinstance(words, bool) or words <= 0:
            raise SimulationError(f'cache_words={words!r}: expected a positive integer')
        self.words = words
        self.lines: 'OrderedDict[object, bool]' = OrderedDict()
        self.loads = 0
        self.stores = 0
        self.accesses = 0

    def _make_room(self):
        while len(self.lines) >= self.words:
            _, dirty = self.lines.popitem(last=False)
            if dirty:
                self.stores += 1

    def read(self, key):
        self.accesses += 1
        if key in self.lines:
            self.lines.move_to_end(key)
            return
        self._make_room()
        self.loads += 1
        self.lines[key] = False

    def write(self, key):
        self.accesses += 1
        if key in self.lines:
            self.lines[key] = True
            self.lines.move_to_end(key)
            return
        self._make_room()
        self.lines[key] = True

    def flush(self, discard: Callable[[object], bool] = lambda key: False):
        """Store every written word except those ``discard`` says are dead (transients)."""
        for key, dirty in self.lines.items():
            if dirty and not discard(key):
                self.stores += 1
        self.lines.clear()

    def result(self) -> SimResult:
        return SimResult(self.loads, self.stores, self.accesses)


def _compile(expr, values: Dict[str, int], where: str):
    """``expr`` with program symbols replaced by ``values``, as (fn, [dim symbols])."""
    e = sympy.sympify(expr)
    e = e.xreplace({s: sympy.Integer(values[s.name]) for s in e.free_symbols if s.name in values})
    free = sorted(e.free_symbols, key=lambda s: s.name)
    if not free:
        v = int(e)
        return (lambda *_: v), []
    return sympy.lambdify(free, e, 'math'), free


class _Runner:

    def __init__(self, model: ProgramModel, cache: LRUCache, values: Dict[str, int], tiling: Mapping[str, int],
                 order: Sequence[str]):
        self.model, self.cache, self.values = model, cache, values
        self.tiling, self.order = dict(tiling or {}), list(order or [])
        self.env: Dict[sympy.Symbol, int] = {}
        self.compiled = {}

    def fn(self, expr, where):
        key = (id(expr), where) if not isinstance(expr, sympy.Basic) else (expr, where)
        if key not in self.compiled:
            self.compiled[key] = _compile(expr, self.values, where)
        return self.compiled[key]

    def ev(self, expr, where: str) -> int:
        f, free = self.fn(expr, where)
        try:
            return int(f(*[self.env[s] for s in free]))
        except KeyError as exc:
            raise SimulationError(f'{where}: no value for symbol {exc.args[0]}; pass it in symbols=') from None

    def statement(self, st: Statement):
        plan = self.compiled.get(('stmt', id(st)))
        if plan is None:
            plan = []
            for a in st.accesses:
                if any(i is None for i in a.index):
                    raise SimulationError(f'{st.name}: access {a!r} has an opaque index and cannot be simulated')
                fns = [_compile(i, self.values, st.name) for i in a.index]
                plan.append((a.array, fns, a.kind))
            self.compiled[('stmt', id(st))] = plan
        env = self.env
        keys = []
        try:
            for arr, fns, kind in plan:
                keys.append(((arr, tuple(int(f(*[env[s] for s in free])) for f, free in fns)), kind))
        except KeyError as exc:
            raise SimulationError(f'{st.name}: no value for symbol {exc.args[0]}; pass it in symbols=') from None
        for key, kind in keys:
            if kind in (READ, UPDATE):
                self.cache.read(key)
        for key, kind in keys:
            if kind in (WRITE, UPDATE):
                self.cache.write(key)

    def run(self, scope: Scope):
        for child in scope.children:
            if isinstance(child, Statement):
                self.statement(child)
            elif child.kind == 'loop':
                d = child.dims[0]
                lo, hi, step = (self.ev(d.start, d.name), self.ev(d.stop, d.name), self.ev(d.step, d.name))
                for v in range(lo, hi, step):
                    self.env[d.sym] = v
                    self.run(child)
            else:
                self.run_map(child)

    def run_map(self, scope: Scope):
        dims = list(scope.dims)
        rank = {n: i for i, n in enumerate(self.order)}
        perm = sorted(range(len(dims)), key=lambda q: (rank.get(dims[q].name, len(rank) + q)))
        dims = [dims[q] for q in perm]
        bounds = [(self.ev(d.start, d.name), self.ev(d.stop, d.name), self.ev(d.step, d.name)) for d in dims]
        tiles = [self.tiling.get(d.name) for d in dims]
        syms = [d.sym for d in dims]
        for t in tiles:
            if t is not None and (not isinstance(t, int) or t <= 0):
                raise SimulationError(f'tiling: tile sizes must be positive integers, got {t!r}')
        if not any(tiles):
            points: Iterable[Tuple[int, ...]] = itertools.product(*(range(a, b, s) for a, b, s in bounds))
        else:
            points = self._tiled(bounds, tiles)
        for pt in points:
            for s, v in zip(syms, pt):
                self.env[s] = v
            self.run(scope)

    @staticmethod
    def _tiled(bounds, tiles):
        outer = [range(a, b, s * (t or (b - a) or 1)) for (a, b, s), t in zip(bounds, tiles)]
        for origin in itertools.product(*outer):
            inner = [range(o, min(o + s * (t or (b - a) or 1), b), s) for o, (a, b, s), t in zip(origin, bounds, tiles)]
            yield from itertools.product(*inner)


def simulate(program, cache_words: int, symbols: Mapping[str, int], tiling: Optional[Mapping[str, int]] = None,
             order: Optional[Sequence[str]] = None) -> SimResult:
    """Simulate the program's loop nest under an LRU fast memory.

    :param program: a ``dace.SDFG``, a ``@dace.program`` or a
        :class:`~sdfgsparse.analysis.program_model.ProgramModel`.
    :param cache_words: fast-memory size ``S`` in words.
    :param symbols: value of every program symbol (``{'N': 16}``).
    :param tiling: tile size per map variable name (maps only: their order is free).
    :param order: map variable names, outermost first, to permute map dimensions.
    """
    if not isinstance(program, ProgramModel):
        from sdfgsparse.analysis.lower_bound import _as_sdfg
        from sdfgsparse.analysis.sdfg_extract import extract
        program = extract(_as_sdfg(program))
    cache = LRUCache(cache_words)
    runner = _Runner(program, cache, dict(symbols), tiling, order)
    runner.run(program.root)
    transients = program.transients
    cache.flush(lambda key: key[0] in transients)
    return cache.result()
