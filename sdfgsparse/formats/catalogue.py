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
========  ==============================================  =========================

A new format is a new composition here; the lowering needs no change.
"""
from dace.symbolic import int_floor

from sdfgsparse.formats.format import SparseFormat, register_family, register_format
from sdfgsparse.formats.levels import Compressed, Dense, Offset, Singleton

__all__ = ['CSR', 'CSC', 'COO', 'DCSR', 'BSR', 'ELL', 'DIA', 'CATALOGUE']

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

COO = register_format(
    SparseFormat('COO', [Compressed(ordered=False, unique=False), Singleton(unique=False)],
                 lambda r, c: [r, c], ('c0', 'c1'),
                 scipy_format='coo',
                 doc='Coordinate list: a non-unique row level and a singleton column level (scipy ``coo``); '
                 'duplicates are summed, order is free.'))

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
