"""TACO-style level formats.

A sparse format is a stack of *levels*; level ``k`` stores the coordinates of one
storage dimension given a position ``p{k-1}`` in its parent level. Each level has
named properties (``ordered``, ``unique``, ``full``, ``branchless``) and capabilities:

``iterate(ctx, k)``
    position iteration: the loop (or straight-line code) that enumerates, for a parent
    position ``p{k-1}``, the positions ``p{k}`` and coordinates ``c{k}`` of this level.
    Returns a :class:`LevelPiece` (small pieces of Python source that the lowering
    composes into a loop nest which DaCe's frontend turns into maps and loops).
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

from sdfgsparse import errors

__all__ = ['Level', 'Dense', 'Compressed', 'Singleton', 'Offset', 'LevelPiece', 'IterContext']


@dataclass
class IterContext:
    """What a level needs to emit its iteration code.

    :param member: maps a member name (``pos1``) to the variable that holds it in the
                   generated kernel (``A_pos1``).
    :param extent: maps a level index to the Python expression of its coordinate extent.
    :param sizes: maps size keys (``n1``, ``K``, ``L``) to Python expressions.
    :param loop: the loop construct for the level, ``range`` or ``dace.map``.
    :param coords: coordinates already defined by outer levels (``c0`` → expression).
    """
    member: Dict[str, str]
    extent: Dict[int, str]
    sizes: Dict[str, str]
    coords: Dict[int, str] = field(default_factory=dict)
    prefix: str = ''


@dataclass
class LevelPiece:
    """Python source emitted for one level.

    ``var`` and ``bounds`` describe the loop the level opens (``var`` in ``[begin, end)``;
    ``var is None`` for a loop-free level such as a singleton); ``pre`` lines run before
    the loop (in the parent's body); ``body`` lines run inside it
    before inner levels; ``coord`` and ``pos`` are the expressions of this level's
    coordinate and position (inlined expressions, not scalar variables: DaCe 1.0.2
    mistypes scalars assigned inside loops when they reach a condition); ``guard`` is a condition stored entries must satisfy
    (padding, out-of-range diagonals), or ``None``.
    """
    body: List[str]
    coord: str
    pos: str
    guard: Optional[str] = None
    bounds: Optional[tuple] = None
    var: Optional[str] = None
    pre: List[str] = field(default_factory=list)

    @property
    def has_loop(self) -> bool:
        return self.var is not None


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

    def member_sizes(self, k: int, parent_count, count, sizes) -> Dict[str, object]:
        """Symbolic sizes of each member array (``parent_count``: positions of the parent)."""
        return {}

    def count(self, parent_count, sizes, k: int):
        """Number of positions of this level, as a symbolic expression."""
        raise NotImplementedError(f'{type(self).__name__} does not define count()')

    def iterate(self, ctx: IterContext, k: int, parent_pos: Optional[str], root: bool) -> LevelPiece:
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

    def iterate(self, ctx, k, parent_pos, root):
        ext = ctx.sizes[self.size_key] if self.size_key else ctx.extent[k]
        c = f'c{k}'
        if parent_pos is None:
            return LevelPiece(body=[], coord=c, pos=c, bounds=('0', ext), var=c)
        # The base position goes through a data scalar: DaCe 1.0.2 mis-offsets nested-SDFG
        # arguments indexed by ``map_var * symbol + loop_var``.
        return LevelPiece(body=[],
                          coord=c,
                          pos=f'b{k} + {c}',
                          bounds=('0', ext),
                          var=c,
                          pre=[f'b{k} = dace.int64(({parent_pos}) * ({ext}))'])


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

    def member_sizes(self, k, parent_count, count, sizes):
        res = {f'crd{k}': count}
        if k > 0:
            res[f'pos{k}'] = parent_count + 1
        return res

    def count(self, parent_count, sizes, k, extent=None):
        return sizes[f'n{k}']

    def iterate(self, ctx, k, parent_pos, root):
        p = f'p{k}'
        crd = ctx.member[f'crd{k}']
        if k == 0:
            begin, end = '0', ctx.sizes[f'n{k}']
        else:
            pos = ctx.member[f'pos{k}']
            begin, end = f'{pos}[{parent_pos}]', f'{pos}[{parent_pos} + 1]'
        return LevelPiece(body=[],
                          coord=f'{crd}[{p}]',
                          pos=p,
                          bounds=(begin, end),
                          var=p)

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
    """
    kind = 'singleton'
    branchless = True

    def __init__(self, padded: bool = False, unique: bool = True):
        self.padded = padded
        self.unique = unique

    def members(self, k):
        return [f'crd{k}']

    def member_sizes(self, k, parent_count, count, sizes):
        return {f'crd{k}': parent_count}

    def count(self, parent_count, sizes, k, extent=None):
        return parent_count

    def iterate(self, ctx, k, parent_pos, root):
        c = f"{ctx.member[f'crd{k}']}[{parent_pos}]"
        return LevelPiece(body=[], coord=c, pos=parent_pos, guard=f'{c} >= 0' if self.padded else None)

    def validate(self, k, arrays, parent_count, extent, argname, sizes):
        crd = arrays[f'crd{k}']
        if crd.shape[0] != parent_count:
            raise errors.IndptrError(f'{argname}: crd{k} has {crd.shape[0]} entries, expected {parent_count}')
        _check_range(argname, f'crd{k}', crd, extent, allow_pad=self.padded)


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

    def member_sizes(self, k, parent_count, count, sizes):
        return {f'off{k}': sizes['nd']}

    def count(self, parent_count, sizes, k, extent=None):
        return sizes['nd'] * sizes['L']

    def iterate(self, ctx, k, parent_pos, root):
        d = f'd{k}'
        off = ctx.member[f'off{k}']
        c = f'({ctx.coords[k - 1]} + {off}[{d}])'
        L = ctx.sizes['L']
        return LevelPiece(body=[],
                          coord=c,
                          pos=f'{d} * ({L}) + {c}',
                          guard=f'{c} >= 0 and {c} < {ctx.extent[k]} and {c} < {L}',
                          bounds=('0', ctx.sizes['nd']),
                          var=d)

    def validate(self, k, arrays, parent_count, extent, argname, sizes):
        off = arrays[f'off{k}']
        if off.size and np.unique(off).size != off.size:
            raise errors.DuplicateIndicesError(f'{argname}: offsets contain a diagonal twice: {off.tolist()}')
