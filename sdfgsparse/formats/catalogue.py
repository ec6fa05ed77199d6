"""The catalogue: every format is a composition of levels (see :mod:`.levels`).

========  ==============================================  =========================
format    levels (outermost first)                        scipy / torch twin
========  ==============================================  =========================
CSR       dense(rows), compressed(cols)                   csr / sparse_csr
CSC       dense(cols), compressed(rows)                   csc / sparse_csc
COO       compressed(rows, non-unique), singleton(cols)   coo / sparse_coo
DCSR      compressed(rows), compressed(cols)              —
BSR RxC   dense(rows/R), compressed(cols/C), dense R, C   bsr / sparse_bsr
ELL       dense(rows), dense(K slots), singleton(cols)    —
DIA       dense(rows), offset(diagonals)                  dia
COO<n>    compressed(non-unique), singleton x (n - 1)     pydata ``COO``, scipy N-D
                                                          ``coo_array``, torch sparse_coo
CSF<n>    compressed x n                                  —
========  ==============================================  =========================

``ss.COO`` and ``ss.CSF`` store tensors of any rank: ``ss.COO[dace.float64, I, J, K]`` is the
rank-3 format ``COO3`` (``ss.COO[dt, M, N]`` is the matrix format ``COO``), ``ss.CSF[dt, I,
J, K]`` the compressed sparse fiber format ``CSF3`` (TACO's: every level compressed; ``CSF2``
has DCSR's levels). A new format is a new composition here; the lowering needs no change.
"""
import dace
import numpy as np
from dace.symbolic import int_floor

from sdfgsparse.formats.format import SparseFormat, register_family, register_format
from sdfgsparse.formats.levels import Compressed, Dense, Offset, Singleton

__all__ = ['CSR', 'CSC', 'COO', 'DCSR', 'BSR', 'ELL', 'DIA', 'CSF', 'CATALOGUE', 'TENSOR_FORMATS', 'coo_of_rank',
           'csf_of_rank']

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
    if name not in _MADE:
        _MADE[name] = register_format(
            _RankedFormat(name, [Compressed() for _ in range(rank)], lambda *shape: list(shape), _dims(rank),
                          ranked=csf_of_rank,
                          doc=f'Compressed sparse fibers of rank-{rank} tensors: every level compressed '
                          '(only non-empty slices and fibers stored).'))
    return _MADE[name]


_MADE = {}

COO = register_format(
    _RankedFormat('COO', [Compressed(ordered=False, unique=False), Singleton(unique=False)],
                  lambda r, c: [r, c], ('c0', 'c1'),
                  scipy_format='coo', ranked=coo_of_rank,
                  doc='Coordinate list: a non-unique row level and a singleton column level (scipy ``coo``); '
                  'duplicates are summed, order is free. ``ss.COO[dt, I, J, K, ...]``: the same of any rank.'))
register_family(r'COO(\d+)', lambda m: coo_of_rank(int(m.group(1))))
register_family(r'CSF(\d+)', lambda m: csf_of_rank(int(m.group(1))))


class _CSFFamily:
    """``ss.CSF[dtype, I, J, K, ...]``: compressed sparse fibers of the annotation's rank."""

    def __getitem__(self, args):
        return self.type(*(args if isinstance(args, tuple) else (args, ))).structure()

    def type(self, dtype, *args, **sizes):
        dims = [a for a in args if not (isinstance(a, dace.typeclass) or
                                        (isinstance(a, type) and issubclass(a, np.integer)))]
        return csf_of_rank(max(len(dims), 1)).type(dtype, *args, **sizes)

    def with_rank(self, rank: int) -> SparseFormat:
        return csf_of_rank(rank)

    def __repr__(self):
        return 'ss.CSF'


CSF = _CSFFamily()

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
