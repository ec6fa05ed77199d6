"""Capacities of data-dependent results that no symbol of the program bounds.

SpGEMM's expansion list holds one entry per product ``A[i, k] * B[k, j]``; its length
(``flops``) depends on the data. The frontend names that capacity with a symbol that
records the operands, ``sscap<uid>__<A>__<tA>__<B>__<tB>`` (``t``: 1 for a transposed
view), and :func:`fill_capacities` computes it from the argument structs right before the
compiled program runs.
"""
from typing import Dict

import numpy as np

from sdfgsparse import errors
from sdfgsparse.runtime import _binder
from sdfgsparse.runtime.convert import storage_to_coo

__all__ = ['capacity_symbol', 'fill_capacities', 'spgemm_flops']

PREFIX = 'sscap'


def capacity_symbol(a: str, ta: bool, b: str, tb: bool, taken=()) -> str:
    """A new capacity symbol for ``a @ b``; ``taken``: the names the SDFG already has. The
    uid is the first one free in ``taken``, so that parsing the same program again gives
    the same SDFG (and DaCe's cache the same build folder)."""
    if '__' in a or '__' in b:
        raise errors.UnsupportedOperationError(f'SpGEMM operands named {a!r}, {b!r}: names with "__" are reserved')
    uid = 0
    while any(str(t).startswith(f'{PREFIX}{uid}__') for t in taken):
        uid += 1
    return f'{PREFIX}{uid}__{a}__{int(ta)}__{b}__{int(tb)}'


def _entries(arg, transposed):
    r, c, _ = storage_to_coo(arg.type.fmt, arg.arrays, arg.shape)
    return (c, r) if transposed else (r, c)


def _row_major(arg, transposed) -> bool:
    """Whether the operand (a transposed view if ``transposed``) is stored row by row:
    ``pos1`` delimits its rows and ``crd1`` holds their column indices."""
    return arg.type.fmt.name == ('CSC' if transposed else 'CSR')


def spgemm_flops(a_arg, ta: bool, b_arg, tb: bool) -> int:
    """Number of products of A @ B: sum over A's entries (i, k) of the length of B's row k.
    Row-major operands are read directly (one gather over A's entries, in C where both are
    row-major: ``_binder.row_length_sum``); others through their coordinates (reading
    row-major operands directly is far cheaper; figures in docs/performance.md)."""
    if _row_major(a_arg, ta):
        ak = a_arg.arrays['crd1']
    else:
        _, ak = _entries(a_arg, ta)
    if not ak.size:
        return 0
    if _row_major(b_arg, tb):
        flops = _binder.row_length_sum(b_arg.arrays['pos1'], ak)
        if flops is not None:
            return flops
        rowlen = np.diff(b_arg.arrays['pos1'])  # (NumPy reports what C does not take: an index out of range)
    else:
        br, _ = _entries(b_arg, tb)
        rowlen = np.bincount(br, minlength=b_arg.shape[1] if tb else b_arg.shape[0])
    return int(np.add.reduce(rowlen[ak], dtype=np.int64))


def fill_capacities(names, kwargs: Dict[str, object]):
    """Add the value of every capacity symbol in ``names`` missing from ``kwargs``."""
    for name in names:
        if name in kwargs:
            continue
        parts = name.split('__')
        if len(parts) != 5:
            raise errors.SparseError(f'malformed capacity symbol {name!r}')
        _, a, ta, b, tb = parts
        args = {}
        for argname in (a, b):
            struct = kwargs.get(argname)
            arg = getattr(struct, '_ss_arg', None)
            if arg is None:
                raise errors.SparseError(f'cannot size the result of {a} @ {b}: argument {argname!r} is missing')
            args[argname] = arg
        kwargs[name] = max(1, spgemm_flops(args[a], ta == '1', args[b], tb == '1'))
