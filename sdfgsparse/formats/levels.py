"""TACO-style level formats.

A sparse format is a stack of *levels*; level ``k`` stores the coordinates of one
storage dimension given a position ``p{k-1}`` in its parent level. Each level has
named properties (``ordered``, ``unique``, ``full``, ``branchless``) and capabilities:

``loop(k, parent, ctx)``
    position iteration: the loop (or straight-line step) that enumerates, for a parent
    position, the positions and coordinates of this level. Returns a :class:`LevelLoop`:
    symbolic objects (a loop variable, bounds, the coordinate and position expressions, a
    guard, the loop kind), in which a read of a storage array is the application of a
    :func:`member` function (``crd1(p1)``). The lowerings compose them: the portable one
    into maps with data-dependent ranges and tasklets (:mod:`sdfgsparse.lowering.graph`),
    the CPU target's into its generated source.
``members(k, ...)``
    the storage arrays the level owns, with their symbolic sizes.
``validate(k, arrays, ...)``
    the checks a caller's arrays must pass for this level.

The lowering composes pieces and asks about capabilities (``has_loop``, ``unique``),
never about format names.
"""
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np
import sympy

from sdfgsparse import errors

__all__ = ['Level', 'Dense', 'Compressed', 'Singleton', 'Offset', 'Indirect', 'LevelLoop', 'LoopContext', 'member', 'member_reads',
           'COUNTED', 'SEGMENT', 'NONE']


def member(name: str, index) -> sympy.Expr:
    """A read of storage array ``name`` at ``index``: ``member('crd1', p1)`` is ``crd1[p1]``.

    It is an application of an undefined sympy function named after the member, so
    iteration expressions stay symbolic (printable, substitutable) while they read data;
    :func:`member_reads` finds them again."""
    return sympy.Function(name)(sympy.sympify(index))


def member_reads(expr, members) -> List[sympy.Expr]:
    """The reads of storage arrays in ``members`` that occur in ``expr`` (outermost first)."""
    if expr is None or not isinstance(expr, sympy.Basic):
        return []
    found = []
    for a in sympy.preorder_traversal(expr):
        if isinstance(a, sympy.core.function.AppliedUndef) and a.func.__name__ in members and a not in found:
            found.append(a)
    return found


@dataclass
class LoopContext:
    """What a level needs to describe its iteration.

    :param extent: level index -> symbolic coordinate extent (None: no extent of its own).
    :param sizes: size key (``n1``, ``K``, ``L``, ``nd``) -> symbolic size.
    :param coords: coordinates already defined by outer levels (level index -> expression).
    """
    extent: Dict[int, object]
    sizes: Dict[str, object]
    coords: Dict[int, object] = field(default_factory=dict)


#: loop kinds: a counted loop with symbolic bounds, a segment whose bounds are read from
#: the parent's positions (``pos[p]:pos[p+1]``), and no loop (one position per parent)
COUNTED, SEGMENT, NONE = 'counted', 'segment', 'none'


@dataclass
class LevelLoop:
    """The iteration of one level, as symbolic objects.

    ``var`` runs over ``[begin, end)`` (``var is None`` for a loop-free level such as a
    singleton); ``coord`` and ``pos`` are this level's coordinate and position; ``base`` is
    the part of ``pos`` fixed by the parent (a dense level's ``parent * extent``; ``pos =
    base + var``), or None; ``guard`` is a condition stored positions must satisfy (padding,
    out-of-range diagonals), or None. Reads of storage arrays are :func:`member` applications.
    """
    kind: str
    coord: sympy.Expr
    pos: sympy.Expr
    var: Optional[sympy.Symbol] = None
    begin: Optional[sympy.Expr] = None
    end: Optional[sympy.Expr] = None
    guard: Optional[sympy.Basic] = None
    base: Optional[sympy.Expr] = None

    @property
    def has_loop(self) -> bool:
        return self.var is not None

    @property
    def data_dependent(self) -> bool:
        """Whether the bounds read storage arrays."""
        return any(isinstance(a, sympy.core.function.AppliedUndef)
                   for e in (self.begin, self.end) if e is not None for a in sympy.preorder_traversal(e))


class Level:
    """Base class of level formats. Subclasses define properties and capabilities."""
    kind = 'abstract'
    ordered = True
    unique = True
    full = False
    branchless = False

    def members(self, k: int) -> List[str]:
        """Names of the storage arrays this level owns (without the values array)."""
        return []

    def member_sizes(self, k: int, parent_count, count, sizes, extents=None) -> Dict[str, object]:
        """Symbolic sizes of each member array (``parent_count``: positions of the parent;
        ``extents``: every level's coordinate extent)."""
        return {}

    def count(self, parent_count, sizes, k: int):
        """Number of positions of this level, as a symbolic expression."""
        raise NotImplementedError(f'{type(self).__name__} does not define count()')

    def loop(self, k: int, parent: Optional[LevelLoop], ctx: LoopContext) -> LevelLoop:
        """Position iteration of level ``k`` under the ``parent`` level's loop (None at the root)."""
        raise NotImplementedError(f'{type(self).__name__} does not support position iteration')

    def validate(self, k: int, arrays: Dict[str, np.ndarray], parent_count: int, extent: int, argname: str,
                 sizes: Dict[str, int]) -> None:
        """Raise an :mod:`sdfgsparse.errors` exception if the arrays are inconsistent."""

    def describe(self) -> str:
        props = [p for p in ('ordered', 'unique', 'full', 'branchless') if getattr(self, p)]
        return f'{self.kind}({",".join(props)})'

    def __repr__(self):
        return self.describe()


def _check_range(argname: str, arrname: str, crd: np.ndarray, extent: int, allow_pad: bool = False):
    if crd.size == 0:
        return
    lo = crd.min()
    if lo < 0 and not (allow_pad and lo == -1):
        pos = int(np.argmax(crd < (-1 if allow_pad else 0)))
        raise errors.InvalidIndexError(f'{argname}: {arrname}[{pos}] = {int(crd[pos])} is negative')
    hi = crd.max()
    if hi >= extent:
        pos = int(np.argmax(crd >= extent))
        raise errors.InvalidIndexError(f'{argname}: {arrname}[{pos}] = {int(crd[pos])} is out of range '
                                       f'for a dimension of size {extent}')


class Dense(Level):
    """Every coordinate in ``[0, extent)`` is stored; position = parent * extent + coordinate.

    Capabilities: iterate (a counted loop), locate (O(1)). No storage arrays.
    """
    kind = 'dense'
    full = True

    def __init__(self, size_key: Optional[str] = None):
        #: key into the type's size table when the level extent is its own size (ELL width)
        self.size_key = size_key

    def count(self, parent_count, sizes, k, extent=None):
        return parent_count * (sizes[self.size_key] if self.size_key else extent)

    def loop(self, k, parent, ctx):
        ext = sympy.sympify(ctx.sizes[self.size_key] if self.size_key else ctx.extent[k])
        c = sympy.Symbol(f'c{k}', integer=True, nonnegative=True)
        if parent is None:
            return LevelLoop(COUNTED, coord=c, pos=c, var=c, begin=sympy.Integer(0), end=ext)
        base = parent.pos * ext
        return LevelLoop(COUNTED, coord=c, pos=base + c, var=c, begin=sympy.Integer(0), end=ext, base=base)


class Compressed(Level):
    """Coordinates of a parent position lie in ``crd[pos[p]:pos[p+1]]``.

    At the root there is no ``pos`` array: the level spans positions ``[0, count)``.
    Capabilities: iterate by position, append. ``unique=False`` gives COO's root level.
    """
    kind = 'compressed'

    def __init__(self, ordered: bool = True, unique: bool = True):
        self.ordered = ordered
        self.unique = unique

    def members(self, k):
        return [f'pos{k}', f'crd{k}'] if k > 0 else [f'crd{k}']

    def member_sizes(self, k, parent_count, count, sizes, extents=None):
        res = {f'crd{k}': count}
        if k > 0:
            res[f'pos{k}'] = parent_count + 1
        return res

    def count(self, parent_count, sizes, k, extent=None):
        return sizes[f'n{k}']

    def loop(self, k, parent, ctx):
        p = sympy.Symbol(f'p{k}', integer=True, nonnegative=True)
        if k == 0:
            return LevelLoop(COUNTED, coord=member(f'crd{k}', p), pos=p, var=p, begin=sympy.Integer(0),
                             end=sympy.sympify(ctx.sizes[f'n{k}']))
        return LevelLoop(SEGMENT, coord=member(f'crd{k}', p), pos=p, var=p, begin=member(f'pos{k}', parent.pos),
                         end=member(f'pos{k}', parent.pos + 1))

    def validate(self, k, arrays, parent_count, extent, argname, sizes):
        crd = arrays[f'crd{k}']
        n = sizes[f'n{k}']
        if crd.shape[0] != n:
            raise errors.IndptrError(f'{argname}: crd{k} has {crd.shape[0]} entries, expected {n}')
        if k > 0:
            pos = arrays[f'pos{k}']
            if pos.shape[0] != parent_count + 1:
                raise errors.IndptrError(f'{argname}: pos{k} (indptr) has {pos.shape[0]} entries, '
                                         f'expected {parent_count + 1}')
            if pos[0] != 0:
                raise errors.IndptrError(f'{argname}: pos{k}[0] (indptr[0]) = {int(pos[0])}, expected 0')
            d = np.diff(pos)
            if d.size and d.min() < 0:
                at = int(np.argmax(d < 0))
                raise errors.IndptrError(f'{argname}: pos{k} (indptr) decreases at position {at + 1}: '
                                         f'{int(pos[at])} > {int(pos[at + 1])}')
            if pos[-1] != n:
                raise errors.IndptrError(f'{argname}: pos{k}[-1] (indptr[-1]) = {int(pos[-1])} is not the number '
                                         f'of stored entries ({n})')
        _check_range(argname, f'crd{k}', crd, extent)
        if self.ordered and crd.size > 1:
            # Coordinates lie in [0, extent), so the difference cannot overflow the index type.
            step = np.diff(crd)
            bad = np.flatnonzero(step <= 0 if self.unique else step < 0)
            if bad.size and k > 0:
                # a decrease from one segment to the next is fine
                pos = arrays[f'pos{k}']
                nxt = bad + 1
                at_boundary = pos[np.minimum(np.searchsorted(pos, nxt), pos.size - 1)] == nxt
                bad = bad[~at_boundary]
            if bad.size:
                at = int(bad[0])
                if crd[at + 1] < crd[at]:
                    raise errors.UnsortedIndicesError(
                        f'{argname}: crd{k} (indices) is not sorted within its segment at position {at + 1} '
                        f'({int(crd[at])} then {int(crd[at + 1])}); call sort_indices() first')
                raise errors.DuplicateIndicesError(
                    f'{argname}: crd{k} (indices) stores coordinate {int(crd[at])} twice at positions {at} and '
                    f'{at + 1}; call sum_duplicates() first')


class Singleton(Level):
    """One coordinate per parent position: ``c = crd[p_parent]`` (COO's column level, ELL).

    ``padded=True`` allows the value ``-1`` for unused slots (ELL), skipped on iteration.
    ``run=r``: the parent's positions come in runs of ``r`` (the ``n`` slots of an n:m
    group), and the coordinates of each run increase strictly (sorted, no duplicate).
    """
    kind = 'singleton'
    branchless = True

    def __init__(self, padded: bool = False, unique: bool = True, run: int = 0):
        self.padded = padded
        self.unique = unique
        self.run = int(run)

    def members(self, k):
        return [f'crd{k}']

    def member_sizes(self, k, parent_count, count, sizes, extents=None):
        return {f'crd{k}': parent_count}

    def count(self, parent_count, sizes, k, extent=None):
        return parent_count

    def loop(self, k, parent, ctx):
        c = member(f'crd{k}', parent.pos)
        return LevelLoop(NONE, coord=c, pos=parent.pos, guard=sympy.Ge(c, 0) if self.padded else None)

    def validate(self, k, arrays, parent_count, extent, argname, sizes):
        crd = arrays[f'crd{k}']
        if crd.shape[0] != parent_count:
            raise errors.IndptrError(f'{argname}: crd{k} has {crd.shape[0]} entries, expected {parent_count}')
        _check_range(argname, f'crd{k}', crd, extent, allow_pad=self.padded)
        if self.run > 1:
            _check_runs(argname, f'crd{k}', crd, self.run)


def _check_runs(argname: str, arrname: str, crd: np.ndarray, run: int):
    """Each run of ``run`` consecutive entries of ``crd`` increases strictly."""
    if crd.size < 2:
        return
    step = np.diff(crd.reshape(-1, run).astype(np.int64), axis=1)
    bad = np.flatnonzero((step <= 0).any(axis=1))
    if bad.size:
        g = int(bad[0])
        at = g * run + int(np.argmax(step[g] <= 0))
        what = 'twice' if crd[at] == crd[at + 1] else 'out of order'
        raise errors.PatternError(f'{argname}: {arrname}[{at}:{at + 2}] = {crd[at:at + 2].tolist()}: a group of '
                                  f'{run} slots (positions {g * run}..{g * run + run - 1}) stores a coordinate {what}; '
                                  'the slots of a group hold distinct coordinates in increasing order')


class Indirect(Level):
    """One coordinate per parent position, read through a table: ``c = sel[t * width +
    crd[p_parent]]``, where the table row ``t`` is a function of the outer coordinates and
    each row holds ``width`` coordinates (V:N:M: the 4 columns a block of V rows keeps in
    each group of M, shared by the block; ``crd`` picks one of them).

    :param width: coordinates per table row.
    :param table_row: ``f(coords, extents) -> t`` (symbolic), ``coords``/``extents`` by level.
    :param table_rows: ``f(extents) -> number of table rows`` (symbolic).
    :param run: as :class:`Singleton`'s: each run of ``run`` slots picks distinct table
        entries in increasing order.
    Capabilities: iterate (no loop), like a singleton. Members ``crd{k}`` (one per parent
    position, in ``[0, width)``) and ``sel{k}`` (the table: each row strictly increasing in
    ``[0, extent)``).
    """
    kind = 'indirect'
    branchless = True

    def __init__(self, width: int, table_row, table_rows, run: int = 0):
        self.width = int(width)
        self.table_row = table_row
        self.table_rows = table_rows
        self.run = int(run)

    def members(self, k):
        return [f'crd{k}', f'sel{k}']

    def member_sizes(self, k, parent_count, count, sizes, extents=None):
        return {f'crd{k}': parent_count, f'sel{k}': self.table_rows(extents) * self.width}

    def count(self, parent_count, sizes, k, extent=None):
        return parent_count

    def loop(self, k, parent, ctx):
        t = self.table_row(ctx.coords, ctx.extent)
        c = member(f'sel{k}', t * self.width + member(f'crd{k}', parent.pos))
        return LevelLoop(NONE, coord=c, pos=parent.pos)

    def validate(self, k, arrays, parent_count, extent, argname, sizes):
        crd, sel = arrays[f'crd{k}'], arrays[f'sel{k}']
        if crd.shape[0] != parent_count:
            raise errors.IndptrError(f'{argname}: crd{k} has {crd.shape[0]} entries, expected {parent_count}')
        _check_range(argname, f'crd{k}', crd, self.width)
        _check_range(argname, f'sel{k}', sel, extent)
        if sel.size % self.width:
            raise errors.IndptrError(f'{argname}: sel{k} has {sel.size} entries, not a multiple of {self.width}')
        _check_runs(argname, f'sel{k}', sel, self.width)
        if self.run > 1:
            _check_runs(argname, f'crd{k}', crd, self.run)


class Offset(Level):
    """Diagonal storage (DIA): for a parent coordinate ``i`` and each stored diagonal ``d``,
    the coordinate is ``i + off[d]`` and the value sits at ``d * L + (i + off[d])``
    (scipy's ``dia`` layout: ``data[d, j]`` holds ``A[j - off[d], j]``).

    Sizes: ``nd`` (number of diagonals) and ``L`` (row length of the data array).
    Capabilities: iterate (over diagonals, with a range guard), locate.
    """
    kind = 'offset'

    def members(self, k):
        return [f'off{k}']

    def member_sizes(self, k, parent_count, count, sizes, extents=None):
        return {f'off{k}': sizes['nd']}

    def count(self, parent_count, sizes, k, extent=None):
        return sizes['nd'] * sizes['L']

    def loop(self, k, parent, ctx):
        d = sympy.Symbol(f'd{k}', integer=True, nonnegative=True)
        c = ctx.coords[k - 1] + member(f'off{k}', d)
        L = sympy.sympify(ctx.sizes['L'])
        return LevelLoop(COUNTED,
                         coord=c,
                         pos=d * L + c,
                         var=d,
                         begin=sympy.Integer(0),
                         end=sympy.sympify(ctx.sizes['nd']),
                         guard=sympy.And(sympy.Ge(c, 0), sympy.Lt(c, ctx.extent[k]), sympy.Lt(c, L)))

    def validate(self, k, arrays, parent_count, extent, argname, sizes):
        off = arrays[f'off{k}']
        if off.size and np.unique(off).size != off.size:
            raise errors.DuplicateIndicesError(f'{argname}: offsets contain a diagonal twice: {off.tolist()}')
