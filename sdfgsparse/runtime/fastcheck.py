"""A cheap yes/no version of the storage validation, for the warm call path.

:func:`sdfgsparse.runtime.marshal.validate_storage` is the specification: it names the
array, position and value of the first problem. :class:`StorageCheck` only answers
"is the storage valid?", with few NumPy calls (one unsigned reduction covers both ends of
an index range), or with plain Python on lists for tiny matrices, where each NumPy call
costs more than the work. When it answers no, the caller takes the full path, which
raises the precise error; so this check may be stricter than the specification, never
looser. Given the compiled checks of the kernel's library
(:mod:`sdfgsparse.targets.cpu.storage_check`), index levels are checked by them instead: one
parallel pass instead of several NumPy passes (figures: docs/performance.md).
"""
from typing import Dict

import numpy as np
import sympy

from sdfgsparse import errors
from sdfgsparse.formats import SparseFormat
from sdfgsparse.formats.levels import Compressed, Dense, Indirect, Singleton
from sdfgsparse.runtime.pointers import data_pointer
from sdfgsparse.runtime.symexpr import compile_int

__all__ = ['StorageCheck']

#: Below this many positions plus index entries, lists and a Python loop beat NumPy calls.
SMALL = 64

_UNSIGNED = {4: np.uint32, 8: np.uint64}


def _umax(a: np.ndarray) -> int:
    """The largest entry read as unsigned: negative entries come out huge, so
    ``_umax(a) < n`` checks ``0 <= a < n`` in one pass."""
    return int(np.maximum.reduce(a.view(_UNSIGNED[a.dtype.itemsize])))


def _compressed_small(crd, pos, n, extent, ordered, unique) -> bool:
    c = crd.tolist()
    starts = ()
    if pos is not None:
        p = pos.tolist()
        if p[0] != 0 or p[-1] != n:
            return False
        for a, b in zip(p, p[1:]):
            if b < a:
                return False
        starts = set(p)
    if c and (min(c) < 0 or max(c) >= extent):
        return False
    if ordered:
        for i in range(1, n):
            step = c[i] - c[i - 1]
            if (step <= 0 if unique else step < 0) and i not in starts:
                return False
    return True


def _compressed_vector(crd, pos, n, extent, ordered, unique) -> bool:
    if n and _umax(crd) >= extent:
        return False
    if pos is not None:
        # from 0 to n without a decrease: then every entry lies in [0, n]
        if pos[0] != 0 or pos[-1] != n or not np.greater_equal(pos[1:], pos[:-1]).all():
            return False
    if ordered and n > 1:
        # ok[p]: entry p may follow entry p - 1 (a step up, or p starts a segment)
        ok = np.empty(n + 1, dtype=bool)
        (np.greater if unique else np.greater_equal)(crd[1:], crd[:-1], out=ok[1:n])
        if pos is not None:
            ok[pos.astype(np.intp, copy=False)] = True  # entries of pos lie in [0, n]
        else:
            ok[0] = ok[n] = True
        if not ok.all():
            return False
    return True


class StorageCheck:
    """``check(arrays, rows, cols, sizes) -> bool`` for one format, built once.

    Levels without a fast check here (offsets, padded singletons) run their own
    ``validate`` and count as invalid when it raises. ``native``: the compiled checks
    (``{'compressed': f, 'in_range': f}`` from :func:`storage_check.symbols`) for the
    arguments' index dtype, or None for NumPy.
    """

    def __init__(self, fmt: SparseFormat, native=None):
        if fmt.rank != 2:  # (its plans take matrices only: runtime/slots.py)
            raise errors.UnsupportedOperationError(f'StorageCheck: {fmt.name} stores rank-{fmt.rank} tensors; '
                                                   'the warm check takes matrices')
        self.native = native
        r, c = sympy.Symbol('_rows', integer=True), sympy.Symbol('_cols', integer=True)
        sizes = {k: sympy.Symbol(k, integer=True) for k in fmt.size_keys}
        self._extents = [None if e is None else compile_int(e) for e in fmt.extents(r, c)]
        self._counts = [compile_int(e) for e in fmt.counts((r, c), sizes)]
        # members no level checks the length of (V:N:M's column table)
        shapes = fmt.member_shapes((r, c), sizes)
        self._tables = [(f'sel{k}', compile_int(shapes[f'sel{k}'])) for k, lvl in enumerate(fmt.levels)
                        if isinstance(lvl, Indirect)]
        self._levels = []
        for k, lvl in enumerate(fmt.levels):
            if isinstance(lvl, Dense):
                continue
            if isinstance(lvl, Compressed):
                self._levels.append(('compressed', k, lvl, f'crd{k}', f'pos{k}' if k else None, f'n{k}'))
            elif isinstance(lvl, Singleton) and not lvl.padded and lvl.run <= 1:
                self._levels.append(('singleton', k, lvl, f'crd{k}', None, None))
            elif isinstance(lvl, Singleton) and not lvl.padded:
                self._levels.append(('runs', k, lvl, f'crd{k}', None, None))
            elif isinstance(lvl, Indirect):
                self._levels.append(('indirect', k, lvl, f'crd{k}', f'sel{k}', None))
            else:
                self._levels.append(('level', k, lvl, None, None, None))

    def __call__(self, arrays: Dict[str, np.ndarray], rows: int, cols: int, sizes: Dict[str, int],
                 contents: bool = True) -> bool:
        """``contents=False``: the kernel checks the entries of its compressed levels as it
        reads them (:mod:`sdfgsparse.targets.cpu.kernel_checks`); only their sizes and the
        ends of their positions are checked here."""
        table = dict(sizes, _rows=rows, _cols=cols)
        counts = [f(table) for f in self._counts]
        if arrays['vals'].size != counts[-1]:
            return False
        for name, size in self._tables:
            if arrays[name].size != size(table):
                return False
        for kind, k, lvl, crd_name, pos_name, n_name in self._levels:
            parent = counts[k - 1] if k else 1
            ext = self._extents[k]
            extent = ext(table) if ext is not None else 0
            if kind == 'compressed':
                crd = arrays[crd_name]
                n = sizes[n_name]
                if crd.shape[0] != n:
                    return False
                pos = None
                if pos_name is not None:
                    pos = arrays[pos_name]
                    if pos.shape[0] != parent + 1:
                        return False
                if not contents:
                    ok = pos is None or (pos[0] == 0 and pos[parent] == n)
                elif self.native is not None:
                    ok = self.native['compressed'](0 if pos is None else data_pointer(pos), parent,
                                                   data_pointer(crd), n, extent, lvl.ordered, lvl.unique) == 0
                else:
                    small = n + parent <= SMALL
                    ok = (_compressed_small if small else _compressed_vector)(crd, pos, n, extent, lvl.ordered,
                                                                              lvl.unique)
                if not ok:
                    return False
            elif kind in ('runs', 'indirect') and self.native is not None and self.native.get('runs') is not None:
                crd = arrays[crd_name]
                if crd.shape[0] != parent:
                    return False
                run = max(lvl.run, 1)
                if kind == 'runs':
                    if self.native['runs'](data_pointer(crd), parent, extent, run) != 0:
                        return False
                else:  # the picks index the table's rows; the table's rows are columns
                    sel = arrays[pos_name]
                    if self.native['runs'](data_pointer(crd), parent, lvl.width, run) != 0 or \
                            self.native['runs'](data_pointer(sel), sel.shape[0], extent, lvl.width) != 0:
                        return False
            elif kind == 'singleton':
                crd = arrays[crd_name]
                if crd.shape[0] != parent:
                    return False
                if self.native is not None:
                    if self.native['in_range'](data_pointer(crd), parent, extent) != 0:
                        return False
                elif parent and _umax(crd) >= extent:
                    return False
            else:
                try:
                    lvl.validate(k, arrays, parent, extent, '', sizes)
                except errors.SparseError:
                    return False
        return True
