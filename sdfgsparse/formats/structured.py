"""Structured sparsity layouts, composed of levels like every catalogue format.

=============  ============================================================  ================
format         levels (outermost first)                                      pattern
=============  ============================================================  ================
``NM[n, m]``   dense(rows), dense(cols/m groups), dense(n slots),            at most n
               singleton(offset in the group, run n)                         in every m
``GNM[g,n,m]`` dense(rows/g), dense(cols/m), dense(n slots),                 n:m, one choice
               singleton(offset, run n), dense(g rows)                       per g rows
``VNM[v,n,m]`` dense(rows/v), dense(v), dense(cols/m), dense(n slots),       4 columns per
               indirect(one of the block's 4 columns, run n)                 v x m block, n:4
=============  ============================================================  ================

Every group stores exactly ``n`` slots (zeros where a group has fewer entries), so a
kernel knows each row's work without reading row pointers. ``VNM`` (the V:N:M format of
Castro et al., SC 2023) keeps, for each block of ``v`` rows and ``m`` columns, a table of
4 columns (``sel``); each row picks ``n`` of them (``crd``: an index into the table), so
2:4 hardware patterns carry any n:m ratio. Values are row-major in all three: a row's
groups, then the group's slots (``GNM``: the ``g`` rows of a slot side by side).

The shape must be a multiple of the pattern's block (``(1, m)``, ``(g, m)``, ``(v, m)``),
checked when an argument is bound. Host conversions (by magnitude, or strict) live in
:mod:`sdfgsparse.runtime.structured`.

>>> import sdfgsparse as ss
>>> ss.NM[2, 4].name, ss.GNM[8, 2, 4].name, ss.VNM[64, 2, 8].name
('NM2_4', 'GNM8_2_4', 'VNM64_2_8')
"""
import dace

from sdfgsparse.formats.format import SparseFormat, register_family, register_format
from sdfgsparse.formats.levels import Dense, Indirect, Singleton

__all__ = ['NM', 'GNM', 'VNM', 'pattern_of']

#: columns a V:N:M block keeps (the 4 lanes of a 2:4 hardware pattern)
VNM_KEPT = 4


def _checked(name: str, spelling: str, **params) -> dict:
    for key, v in params.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise TypeError(f'{spelling}: {key} must be a positive integer, got {v!r}')
    n, m = params['n'], params['m']
    if n > m:
        raise ValueError(f'{spelling}: n = {n} exceeds m = {m}; a group of m columns holds at most m entries')
    return params


class _Pattern:
    """Parameters of a structured format: ``kind`` ('nm', 'gnm', 'vnm'), ``n``, ``m``,
    ``rows`` (rows sharing one choice: 1, g or v). Read by conversions and kernels."""

    def __init__(self, kind: str, n: int, m: int, rows: int = 1):
        self.kind, self.n, self.m, self.rows = kind, n, m, rows

    @property
    def density(self) -> float:
        return self.n / self.m

    def __repr__(self):
        return f'_Pattern({self.kind!r}, n={self.n}, m={self.m}, rows={self.rows})'


def pattern_of(fmt) -> '_Pattern':
    """The pattern of a structured format (or of its transposed view), or None."""
    return getattr(fmt, 'pattern', None)


def _register(fmt: SparseFormat, pattern: _Pattern, spelling: str) -> SparseFormat:
    fmt.pattern = pattern
    fmt.spelling = spelling
    return register_format(fmt)


class _Family:
    """``FAMILY[params]`` is the format with those parameters (made once)."""
    arity = 2
    usage = ''

    def __init__(self):
        self._made = {}

    def __getitem__(self, args):
        if not isinstance(args, tuple):
            args = (args, )
        if any(isinstance(a, (dace.typeclass, type)) for a in args):
            raise TypeError(f'{self!r}[...] takes the pattern first: {self.usage}')
        if len(args) != self.arity:
            raise TypeError(f'{self!r}[...] takes {self.arity} pattern parameters, got {len(args)}: {self.usage}')
        for a in args:  # checked before the cache: NM[2.0, 4] is not NM[2, 4]
            if isinstance(a, bool) or not isinstance(a, int):
                raise TypeError(f'{self!r}[...]: pattern parameters are positive integers, got {a!r}')
        key = tuple(args)
        if key not in self._made:
            self._made[key] = self._make(*args)
        return self._made[key]

    def __repr__(self):
        return f'ss.{type(self).__name__.strip("_").replace("Family", "")}'


class _NMFamily(_Family):
    """``ss.NM[n, m]``: at most ``n`` non-zeros in every ``m`` consecutive entries of a row
    (2:4, 1:4, 2:8, ...), ``n`` slots stored per group."""
    arity = 2
    usage = 'ss.NM[2, 4][dace.float32, M, N]'

    def _make(self, n, m):
        spelling = f'ss.NM[{n}, {m}]'
        _checked('NM', spelling, n=n, m=m)
        fmt = SparseFormat(f'NM{n}_{m}', [Dense(), Dense(), Dense(), Singleton(run=n)],
                           lambda r, c: [r, _div(c, m), n, m],
                           ('c0', f'c1 * {m} + c3'),
                           block=(1, m),
                           doc=f'{n}:{m} structured sparsity: {n} slots (value and offset) per group of {m} '
                           'columns, row-major.')
        return _register(fmt, _Pattern('nm', n, m), spelling)


class _GNMFamily(_Family):
    """``ss.GNM[g, n, m]``: n:m where each group of ``g`` consecutive rows shares the choice
    of columns (one offset table per ``g`` rows, values of the ``g`` rows side by side)."""
    arity = 3
    usage = 'ss.GNM[8, 2, 4][dace.float32, M, N]'

    def _make(self, g, n, m):
        spelling = f'ss.GNM[{g}, {n}, {m}]'
        _checked('GNM', spelling, g=g, n=n, m=m)
        fmt = SparseFormat(f'GNM{g}_{n}_{m}', [Dense(), Dense(), Dense(), Singleton(run=n), Dense()],
                           lambda r, c: [_div(r, g), _div(c, m), n, m, g],
                           (f'c0 * {g} + c4', f'c1 * {m} + c3'),
                           block=(g, m),
                           doc=f'Grouped {n}:{m} sparsity: every {g} rows share the {n} columns kept in each group '
                           f'of {m}.')
        return _register(fmt, _Pattern('gnm', n, m, g), spelling)


class _VNMFamily(_Family):
    """``ss.VNM[v, n, m]``: in each block of ``v`` rows and ``m`` columns, a fixed set of 4
    columns; each row keeps ``n`` of those 4 (V:N:M; ``ss.VNM[64, 2, 8]`` is 64:2:8)."""
    arity = 3
    usage = 'ss.VNM[64, 2, 8][dace.float32, M, N]'

    def _make(self, v, n, m):
        spelling = f'ss.VNM[{v}, {n}, {m}]'
        _checked('VNM', spelling, v=v, n=n, m=m)
        if m < VNM_KEPT or n > VNM_KEPT:
            raise ValueError(f'{spelling}: V:N:M keeps {VNM_KEPT} columns of each group of m and n of them per row; '
                             f'needs m >= {VNM_KEPT} and n <= {VNM_KEPT}')
        table = Indirect(VNM_KEPT,
                         table_row=lambda co, ex: co[0] * ex[2] + co[2],
                         table_rows=lambda ex: ex[0] * ex[2],
                         run=n)
        fmt = SparseFormat(f'VNM{v}_{n}_{m}', [Dense(), Dense(), Dense(), Dense(), table],
                           lambda r, c: [_div(r, v), v, _div(c, m), n, m],
                           (f'c0 * {v} + c1', f'c2 * {m} + c4'),
                           block=(v, m),
                           doc=f'{v}:{n}:{m} (V:N:M): {VNM_KEPT} columns kept per block of {v} x {m}, {n} of them per '
                           'row.')
        return _register(fmt, _Pattern('vnm', n, m, v), spelling)


def _div(x, d):
    return x // d if isinstance(x, int) else dace.symbolic.int_floor(x, d)


NM = _NMFamily()
GNM = _GNMFamily()
VNM = _VNMFamily()


def _family(fam, transposed: bool, *params):
    fmt = fam[tuple(int(p) for p in params)]
    return fmt.T if transposed else fmt


register_family(r'NM(\d+)_(\d+)(T?)', lambda mt: _family(NM, bool(mt.group(3)), mt.group(1), mt.group(2)))
register_family(r'GNM(\d+)_(\d+)_(\d+)(T?)',
                lambda mt: _family(GNM, bool(mt.group(4)), mt.group(1), mt.group(2), mt.group(3)))
register_family(r'VNM(\d+)_(\d+)_(\d+)(T?)',
                lambda mt: _family(VNM, bool(mt.group(4)), mt.group(1), mt.group(2), mt.group(3)))
