"""The catalogue: every format is a composition of levels (see :mod:`.levels`).

==========  ==============================================  =========================
format      levels (outermost first)                        scipy / torch twin
==========  ==============================================  =========================
CSR         dense(rows), compressed(cols)                   csr / sparse_csr
CSC         dense(cols), compressed(rows)                   csc / sparse_csc
COO         compressed(rows, non-unique), singleton(cols)   coo / sparse_coo
DCSR        compressed(rows), compressed(cols)              —
BSR RxC     dense(rows/R), compressed(cols/C), dense R, C   bsr / sparse_bsr
ELL         dense(rows), dense(K slots), singleton(cols)    —
DIA         dense(rows), offset(diagonals)                  dia
COO<n>      compressed(non-unique), singleton x (n - 1)     pydata ``COO``, scipy N-D
                                                            ``coo_array``, torch sparse_coo
CSF<n>      compressed x n                                  —
CSF<n>_<o>  compressed x n; level k stores dimension o[k]   —
BatchedCSR  dense(batch), dense(rows), compressed(cols)     torch sparse_csr of 3 dims
==========  ==============================================  =========================

``ss.COO`` and ``ss.CSF`` store tensors of any rank: ``ss.COO[dace.float64, I, J, K]`` is the
rank-3 format ``COO3`` (``ss.COO[dt, M, N]`` is the matrix format ``COO``), ``ss.CSF[dt, I,
J, K]`` the compressed sparse fiber format ``CSF3`` (TACO's: every level compressed; ``CSF2``
has DCSR's levels). ``ss.CSF.with_order(2, 0, 1)`` (or ``ss.CSF[dace.float64, I, J, K, (2, 0,
1)]``) is TACO's mode ordering: level ``k`` stores tensor dimension ``order[k]`` (format
``CSF3_201``; the identity order is ``CSF3``). ``ss.BatchedCSR[dt, B, M, N]`` is a CSR matrix
per batch, its positions global (``pos2`` of ``B * M + 1`` entries). A new format is a new
composition here; the lowering needs no change.
"""
import threading

import dace
import numpy as np
from dace.symbolic import int_floor

from sdfgsparse import errors
from sdfgsparse.formats.format import SparseFormat, register_family, register_format
from sdfgsparse.formats.levels import Compressed, Dense, Offset, Singleton

__all__ = ['CSR', 'CSC', 'COO', 'DCSR', 'BSR', 'ELL', 'DIA', 'CSF', 'BatchedCSR', 'CATALOGUE', 'TENSOR_FORMATS',
           'coo_of_rank', 'csf_of_rank', 'csf_of_order']

CSR = register_format(
    SparseFormat('CSR', [Dense(), Compressed()],
                 lambda r, c: [r, c], ('c0', 'c1'),
                 scipy_format='csr',
                 transpose_name='CSC',
                 doc='Compressed sparse rows: dense rows, compressed columns (scipy ``csr``).'))

CSC = register_format(
    SparseFormat('CSC', [Dense(), Compressed()],
                 lambda r, c: [c, r], ('c1', 'c0'),
                 scipy_format='csc',
                 transpose_name='CSR',
                 doc='Compressed sparse columns: dense columns, compressed rows (scipy ``csc``).'))

class _RankedFormat(SparseFormat):
    """A format of one rank whose family stores tensors of every rank (:meth:`with_rank`
    gives the family's format of another rank)."""

    def __init__(self, *args, ranked=None, **kwargs):
        super().__init__(*args, **kwargs)
        self._ranked = ranked

    def with_rank(self, rank: int) -> SparseFormat:
        return self if rank == self.rank else self._ranked(rank)


def _dims(rank: int):
    return tuple(f'c{k}' for k in range(rank))


def _rank_checked(family: str, rank) -> int:
    rank = int(rank)
    if rank < 1:
        raise ValueError(f'{family}: a tensor has at least one dimension, not {rank}')
    return rank


def coo_of_rank(rank: int) -> SparseFormat:
    """The coordinate format of tensors of ``rank`` dimensions: a non-unique, unordered root
    level (the entries) and a singleton level per further dimension (``COO`` for matrices,
    ``COO<rank>`` otherwise)."""
    rank = _rank_checked('ss.COO', rank)
    if rank == 2:
        return COO
    name = f'COO{rank}'
    with _MAKING:
        if name not in _MADE:
            levels = [Compressed(ordered=False, unique=False)] + [Singleton(unique=False) for _ in range(rank - 1)]
            _MADE[name] = register_format(
                _RankedFormat(name, levels, lambda *shape: list(shape), _dims(rank), ranked=coo_of_rank,
                              doc=f'Coordinate list of rank-{rank} tensors: a non-unique entry level and a singleton '
                              'level per further dimension; duplicates are summed, order is free.'))
    return _MADE[name]


def csf_of_rank(rank: int) -> SparseFormat:
    """Compressed sparse fibers of tensors of ``rank`` dimensions (``CSF<rank>``): every level
    compressed, ordered and unique (TACO's CSF)."""
    rank = _rank_checked('ss.CSF', rank)
    name = f'CSF{rank}'
    with _MAKING:
        if name not in _MADE:
            _MADE[name] = register_format(
                _RankedFormat(name, [Compressed() for _ in range(rank)], lambda *shape: list(shape), _dims(rank),
                              ranked=csf_of_rank,
                              doc=f'Compressed sparse fibers of rank-{rank} tensors: every level compressed '
                              '(only non-empty slices and fibers stored).'))
    return _MADE[name]


def order_name(order) -> str:
    """The name part of a mode order: its dimensions' digits (``201``), or, for ranks above
    10, the dimensions joined by ``x`` (``10x0x1x...``), so that the name reads back."""
    return ''.join(map(str, order)) if len(order) <= 10 else 'x'.join(map(str, order))


class _OrderedCSF(SparseFormat):
    """Compressed sparse fibers whose level ``k`` stores tensor dimension ``order[k]`` (TACO's
    mode ordering, :func:`csf_of_order`): the same levels as ``CSF<n>``, other extents (level
    ``k`` spans ``shape[order[k]]``) and coordinates (dimension ``d`` is the coordinate of
    level ``order.index(d)``), so every walk of the format yields tensor coordinates."""

    def __init__(self, order):
        self.order = tuple(order)
        rank = len(order)
        super().__init__(f'CSF{rank}_{order_name(order)}', [Compressed() for _ in range(rank)],
                         lambda *shape, _o=self.order: [shape[d] for d in _o],
                         tuple(f'c{self.order.index(d)}' for d in range(rank)),
                         doc=f'Compressed sparse fibers of rank-{rank} tensors in mode order {self.order}: level k '
                         'stores dimension order[k]; every level compressed.')
        self.spelling = f'ss.CSF.with_order({", ".join(map(str, self.order))})'


def csf_of_order(order) -> SparseFormat:
    """Compressed sparse fibers whose level ``k`` stores tensor dimension ``order[k]``
    (``order`` a permutation of ``0 .. n-1``): format ``CSF<n>_<order>`` (``CSF3_201``;
    :func:`csf_of_rank`'s ``CSF<n>`` for the identity order). An ArgumentError names an
    order that is no permutation."""
    try:
        given = tuple(order)
    except TypeError:
        given = None
    if not given or not all(isinstance(o, (int, np.integer)) and not isinstance(o, bool) for o in given):
        raise errors.ArgumentError(f'ss.CSF: the mode order must be a tuple of dimensions (integers), got {order!r}')
    order = tuple(int(o) for o in given)
    if sorted(order) != list(range(len(order))):
        raise errors.ArgumentError(f'ss.CSF: the mode order {order} is not a permutation of the dimensions '
                                   f'0 .. {len(order) - 1}')
    if order == tuple(range(len(order))):
        return csf_of_rank(len(order))
    name = f'CSF{len(order)}_{order_name(order)}'
    with _MAKING:  # (one object per name, whichever thread asks first)
        if name not in _MADE:
            _MADE[name] = register_format(_OrderedCSF(order))
    return _MADE[name]


def _csf_of_name(m) -> SparseFormat:
    """The ordered CSF format named ``CSF<n>_<order>`` (a KeyError where the name is none)."""
    rank, text = int(m.group(1)), m.group(2)
    order = [int(o) for o in (text.split('x') if 'x' in text else text) if o]
    try:
        fmt = csf_of_order(order)
    except errors.ArgumentError:
        fmt = None
    if fmt is None or fmt.name != m.group(0) or fmt.rank != rank:  # (the identity order is named CSF<n>)
        raise KeyError(f'unknown sparse format {m.group(0)!r}: not a CSF<rank>_<mode order> name')
    return fmt


_MADE = {}
#: Held while a format of a family is made and registered.
_MAKING = threading.RLock()

COO = register_format(
    _RankedFormat('COO', [Compressed(ordered=False, unique=False), Singleton(unique=False)],
                  lambda r, c: [r, c], ('c0', 'c1'),
                  scipy_format='coo', ranked=coo_of_rank,
                  doc='Coordinate list: a non-unique row level and a singleton column level (scipy ``coo``); '
                  'duplicates are summed, order is free. ``ss.COO[dt, I, J, K, ...]``: the same of any rank.'))
register_family(r'COO(\d+)', lambda m: coo_of_rank(int(m.group(1))))
register_family(r'CSF(\d+)', lambda m: csf_of_rank(int(m.group(1))))
register_family(r'CSF(\d+)_([0-9x]+)', _csf_of_name)


class _CSFFamily:
    """``ss.CSF[dtype, I, J, K, ...]``: compressed sparse fibers of the annotation's rank;
    ``ss.CSF[dtype, I, J, K, (2, 0, 1)]`` (a tuple after the dimensions: the mode order; or
    ``ss.CSF.with_order(2, 0, 1)[dtype, I, J, K]``): level ``k`` stores dimension ``order[k]``."""

    def __getitem__(self, args):
        return self.type(*(args if isinstance(args, tuple) else (args, ))).structure()

    def type(self, dtype, *args, order=None, **sizes):
        """The annotated type; ``order`` (or a tuple among ``args``) the mode order."""
        orders = [a for a in args if isinstance(a, (tuple, list))]
        args = [a for a in args if not isinstance(a, (tuple, list))]
        if order is not None:
            orders.append(order)
        if len(orders) > 1:
            raise errors.ArgumentError(f'ss.CSF[...]: two mode orders, {orders[0]} and {orders[1]}')
        dims = [a for a in args if not (isinstance(a, dace.typeclass) or
                                        (isinstance(a, type) and issubclass(a, np.integer)))]
        if orders:
            fmt = csf_of_order(orders[0])
            if fmt.rank != len(dims):
                raise errors.ShapeError(f'ss.CSF[...]: the mode order {tuple(orders[0])} has {fmt.rank} dimensions, '
                                        f'the annotation {len(dims)}')
        else:
            fmt = csf_of_rank(max(len(dims), 1))
        return fmt.type(dtype, *args, **sizes)

    def with_rank(self, rank: int) -> SparseFormat:
        return csf_of_rank(rank)

    def with_order(self, *order) -> SparseFormat:
        """The format whose level ``k`` stores tensor dimension ``order[k]`` (TACO's mode
        ordering): ``ss.CSF.with_order(2, 0, 1)`` or ``ss.CSF.with_order((2, 0, 1))`` is
        ``CSF3_201`` (:func:`csf_of_order`)."""
        if len(order) == 1 and isinstance(order[0], (tuple, list, np.ndarray)):
            order = tuple(order[0])
        return csf_of_order(order)

    def __repr__(self):
        return 'ss.CSF'


CSF = _CSFFamily()

BatchedCSR = register_format(
    SparseFormat('BatchedCSR', [Dense(), Dense(), Compressed()],
                 lambda b, m, n: [b, m, n], ('c0', 'c1', 'c2'),
                 doc='A batch of CSR matrices (torch\'s batched sparse CSR): a dense batch level, dense rows and '
                 'compressed columns; ``pos2`` holds B * M + 1 global positions (batch b\'s row i starts at '
                 'pos2[b * M + i]).'))

DCSR = register_format(
    SparseFormat('DCSR', [Compressed(), Compressed()],
                 lambda r, c: [r, c], ('c0', 'c1'),
                 doc='Doubly compressed sparse rows: only non-empty rows are stored.'))

ELL = register_format(
    SparseFormat('ELL', [Dense(), Dense(size_key='K'), Singleton(padded=True)],
                 lambda r, c: [r, None, c], ('c0', 'c2'),
                 doc='ELLPACK: K slots per row; unused slots hold column -1 (and value 0).'))

DIA = register_format(
    SparseFormat('DIA', [Dense(), Offset()],
                 lambda r, c: [r, c], ('c0', 'c1'),
                 scipy_format='dia',
                 doc="Diagonal storage (scipy ``dia``): data[d, j] holds A[j - offsets[d], j]."))


class _BSRFamily:
    """``ss.BSR`` is 2x2 blocks; ``ss.BSR.with_block(R, C)`` gives other block shapes."""

    def __init__(self):
        self._made = {}

    def with_block(self, R: int, C: int) -> SparseFormat:
        R, C = int(R), int(C)
        if R < 1 or C < 1:
            raise ValueError(f'BSR block shape must be positive, got {R}x{C}')
        key = (R, C)
        if key not in self._made:
            fmt = SparseFormat(f'BSR{R}x{C}', [Dense(), Compressed(), Dense(), Dense()],
                               lambda r, c: [int_floor(r, R), int_floor(c, C), R, C],
                               (f'c0 * {R} + c2', f'c1 * {C} + c3'),
                               scipy_format='bsr',
                               block=(R, C),
                               doc=f'Block sparse rows with {R}x{C} dense blocks (scipy ``bsr``).')
            self._made[key] = register_format(fmt)
        return self._made[key]

    def __getitem__(self, args):
        return self.with_block(2, 2)[args]

    def type(self, *args, **kw):
        return self.with_block(2, 2).type(*args, **kw)

    def __repr__(self):
        return 'ss.BSR'


BSR = _BSRFamily()
register_family(r'BSR(\d+)x(\d+)', lambda m: BSR.with_block(int(m.group(1)), int(m.group(2))))

CATALOGUE = {'CSR': CSR, 'CSC': CSC, 'COO': COO, 'DCSR': DCSR, 'BSR': BSR, 'ELL': ELL, 'DIA': DIA}
#: The formats of tensors of any rank (``ss.COO`` is also the matrix format of CATALOGUE).
TENSOR_FORMATS = {'COO': COO, 'CSF': CSF}
