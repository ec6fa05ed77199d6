"""Compiled storage checks, generated into every sparse kernel's library.

A warm call validates its sparse arguments before it runs the kernel (out-of-range or
unsorted indices would make the kernel read out of bounds). In NumPy that takes several
passes over the index arrays, about as long as the SpMV itself. The functions below do
the same check in one pass, in one parallel region above :data:`PARALLEL` entries and
segments, comparing at the width of the indices (several times faster than 64-bit
compares and a region per pass; figures in docs/performance.md). They are C++ templates in
``include/sdfgsparse_storage_check.h``; every kernel that takes a sparse structure exports
an instance per index type (:func:`add_to`), so they are compiled with the kernel — no separate
build — and :class:`sdfgsparse.runtime.fastcheck.StorageCheck` calls them through the
loaded library when it finds them (:func:`symbols`); otherwise it checks in NumPy.

Like the NumPy check they only answer yes/no; a "no" sends the call down the full path,
which names the argument, array, position and value (``runtime.marshal.validate_storage``).

``compressed(pos, parent, crd, n, extent, ordered, unique)``: ``pos`` (``parent + 1``
entries, or NULL for one segment ``[0, n)``) starts at 0, ends at ``n`` and never
decreases; each of the ``n`` entries of ``crd`` lies in ``[0, extent)``; within a segment
the entries increase (``ordered``; strictly when ``unique``). ``in_range(crd, n, extent)``:
the entries lie in ``[0, extent)``. ``runs(crd, n, extent, run)``: in range, and each run
of ``run`` entries increases strictly (the structured layouts' groups and tables). All
return 0 when the storage is valid (``compressed``
returns 2, "not checked", for levels of 2**32 entries or more: its counters are 32-bit).
"""
import ctypes
from typing import Dict, Optional

import dace
import numpy as np

from sdfgsparse.formats.format import is_sparse_desc, sparse_type_of

__all__ = ['PARALLEL', 'INDEX_CTYPES', 'add_to', 'symbols', 'global_code', 'library_function']

#: Entries above which the check runs in parallel (below, one thread is faster).
PARALLEL = 1 << 16

#: Per index dtype: symbol suffix, C type, unsigned C type, and the clamp of an extent
#: (read as unsigned, a negative index is at least 2^(bits-1), above any valid one; the
#: header's ``index_traits``).
INDEX_CTYPES = {
    np.dtype(np.int32): ('int32', 'int32_t', 'uint32_t', '(1LL << 31)'),
    np.dtype(np.int64): ('int64', 'int64_t', 'uint64_t', '(long long)(~0ULL >> 1)'),
}


def global_code(index_dtype) -> Optional[str]:
    """The library's exports of both checks for one index dtype (None for other dtypes): one
    call each of the templates of ``include/sdfgsparse_storage_check.h``
    (``SDFGSPARSE_STORAGE_CHECK_EXPORTS``); guarded, so several
    kernels of one program can each carry them."""
    names = INDEX_CTYPES.get(np.dtype(index_dtype))
    if names is None:
        return None
    suffix, T = names[:2]
    return f'''
#include "sdfgsparse_storage_check.h"
#ifndef SDFGSPARSE_STORAGE_CHECK_{suffix}
#define SDFGSPARSE_STORAGE_CHECK_{suffix}
SDFGSPARSE_STORAGE_CHECK_EXPORTS({suffix}, {T})
#endif
'''


def add_to(sdfg: dace.SDFG, desc) -> None:
    """Add the checks for the index dtype of ``desc`` (a sparse structure; other data are
    ignored) to ``sdfg``'s global code, once."""
    if not is_sparse_desc(desc):
        return
    code = global_code(sparse_type_of(desc).index_dtype.type)
    if code is None:
        return
    have = sdfg.global_code.get('frame')
    if have is not None and code in have.as_string:
        return
    sdfg.append_global_code(code)


_LL = ctypes.c_longlong
_COMPRESSED = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, _LL, ctypes.c_void_p, _LL, _LL, ctypes.c_int, ctypes.c_int)
_RANGE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, _LL, _LL)
_RUNS = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, _LL, _LL, _LL)


def library_function(lib, name: str, proto):
    """The exported function ``name`` of a loaded kernel library (DaCe's
    ``ReloadableDLL``) as ``proto`` (a ctypes function type), or None when it has none."""
    try:
        address = lib.get_symbol(name)
    except (KeyError, ReferenceError, AttributeError, OSError):
        return None
    return proto(ctypes.cast(address, ctypes.c_void_p).value)


def symbols(lib, index_dtype) -> Optional[Dict[str, object]]:
    """``{'compressed': f, 'in_range': f, 'runs': f or None}`` from a loaded kernel library, or None when the
    library has no checks for this index dtype (built before they existed, or by a kernel
    without sparse arguments)."""
    names = INDEX_CTYPES.get(np.dtype(index_dtype))
    if names is None:
        return None
    comp = library_function(lib, f'__ss_check_compressed_{names[0]}', _COMPRESSED)
    rng = library_function(lib, f'__ss_check_range_{names[0]}', _RANGE)
    if comp is None or rng is None:
        return None
    # (None in a library built before it: those levels are checked in NumPy)
    runs = library_function(lib, f'__ss_check_runs_{names[0]}', _RUNS)
    return {'compressed': comp, 'in_range': rng, 'runs': runs}
