"""Coordinate lists whose number of entries the data decide: ``PCOO<n>``.

``COO<n>`` (:func:`~sdfgsparse.formats.catalogue.coo_of_rank`) holds exactly ``n0`` entries:
its root level has no position array, so a result in it must know its count before the call
(its members are allocated then). A materialised slice of a tensor, whose entries are those of
the stored tensor that fall in the slice, does not. ``PCOO<n>`` is TACO's coordinate format:
a dense root of one position over a non-unique compressed level (``pos1 = [0, count]``) and a
singleton level per further dimension. Its coordinate and value arrays are allocated with a
capacity (``n1``, e.g. the stored tensor's entries), ``pos1[1]`` records how many are used, and
every walk reads ``[pos1[0], pos1[1])`` only. Returned to a caller it is a ``COO<n>`` of its
used entries (:mod:`sdfgsparse.runtime.results`).

>>> import dace
>>> fmt = counted_coo(3)
>>> fmt.name, fmt.member_names
('PCOO3', ['pos1', 'crd1', 'crd2', 'crd3', 'vals'])
>>> fmt.type(dace.float64, 4, 5, 6).shape
(4, 5, 6)
"""
from sdfgsparse.formats.format import SparseFormat, get_format, register_family, register_format
from sdfgsparse.formats.levels import Compressed, Dense, Singleton

__all__ = ['counted_coo', 'is_counted_coo']

_MADE = {}


def counted_coo(rank: int) -> SparseFormat:
    """The counted coordinate format of tensors of ``rank`` (>= 1) dimensions, ``PCOO<rank>``."""
    rank = int(rank)
    if rank < 1:
        raise ValueError(f'PCOO: a tensor of {rank} dimensions')
    name = f'PCOO{rank}'
    if name not in _MADE:
        levels = [Dense(), Compressed(ordered=False, unique=False)] + [Singleton(unique=False) for _ in range(rank - 1)]
        _MADE[name] = register_format(
            SparseFormat(name, levels, lambda *shape: [1] + list(shape), tuple(f'c{k + 1}' for k in range(rank)),
                         doc=f'Coordinate list of rank-{rank} tensors with its count in pos1 = [0, count] (a '
                         'dense root of one position over a non-unique compressed level, singletons below): '
                         'arrays allocated with a capacity, duplicates summed, order free.'))
    return _MADE[name]


def is_counted_coo(fmt: SparseFormat) -> bool:
    return fmt.name.startswith('PCOO') and fmt.name[4:].isdigit() and get_format(fmt.name) is fmt


register_family(r'PCOO(\d+)', lambda m: counted_coo(int(m.group(1))))
