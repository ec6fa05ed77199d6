"""Compiled storage checks, generated into every sparse kernel's library.

A warm call validates its sparse arguments before it runs the kernel (out-of-range or
unsorted indices would make the kernel read out of bounds). In NumPy that takes several
passes over the index arrays (``ca-AstroPh``, 394k entries: ~0.2 ms, as long as the
SpMV itself). The functions below do the same check in one pass, in parallel above
:data:`PARALLEL` entries. They are emitted as global code of every kernel that takes a
sparse structure (:func:`add_to`), so they are compiled with the kernel — no separate
build — and :class:`sdfgsparse.runtime.fastcheck.StorageCheck` calls them through the
loaded library when it finds them (:func:`symbols`); otherwise it checks in NumPy.

Like the NumPy check they only answer yes/no; a "no" sends the call down the full path,
which names the argument, array, position and value (``runtime.marshal.validate_storage``).

``compressed(pos, parent, crd, n, extent, ordered, unique)``: ``pos`` (``parent + 1``
entries, or NULL for one segment ``[0, n)``) starts at 0, ends at ``n`` and never
decreases; each of the ``n`` entries of ``crd`` lies in ``[0, extent)``; within a segment
the entries increase (``ordered``; strictly when ``unique``). ``in_range(crd, n, extent)``:
the entries lie in ``[0, extent)``. Both return 0 when the storage is valid (``compressed``
returns 2, "not checked", for levels of 2**32 entries or more: its counters are 32-bit).
"""
import ctypes
from typing import Dict, Optional

import dace
import numpy as np

from sdfgsparse.formats.format import is_sparse_desc, sparse_type_of

__all__ = ['PARALLEL', 'add_to', 'symbols', 'global_code']

#: Entries above which the check runs in parallel (below, one thread is faster).
PARALLEL = 1 << 16

_CTYPES = {np.dtype(np.int32): ('int32', 'int32_t'), np.dtype(np.int64): ('int64', 'int64_t')}


def global_code(index_dtype) -> Optional[str]:
    """C++ source of both checks for one index dtype (None for other dtypes); guarded, so
    several kernels of one program can each carry it."""
    names = _CTYPES.get(np.dtype(index_dtype))
    if names is None:
        return None
    suffix, T = names
    return f'''
#ifndef SDFGSPARSE_STORAGE_CHECK_{suffix}
#define SDFGSPARSE_STORAGE_CHECK_{suffix}
// sdfgsparse: storage checks of sparse arguments (sdfgsparse/lowering/storage_check.py)
DACE_EXPORTED int __ss_check_compressed_{suffix}(const {T}* pos, long long parent, const {T}* crd, long long n,
                                                 long long extent, int ordered, int unique) {{
    // counts below are 32-bit (twice as fast in SIMD); larger levels answer "not checked"
    if (parent < 0 || n < 0 || extent < 0 || n >= (1LL << 32)) return 2;
    if (pos && (pos[0] != 0 || (long long)pos[parent] != n)) return 1;
    const unsigned long long ext = (unsigned long long)extent;
    // one SIMD pass over the entries: out-of-range ones, and "descents" (an entry not
    // above its predecessor); the order holds iff every descent starts a segment
    int bad = n > 0 && (unsigned long long)(long long)crd[0] >= ext;
    unsigned descents = 0;
    if (ordered && unique) {{
        #pragma omp parallel for simd reduction(|:bad) reduction(+:descents) schedule(static) if(n > {PARALLEL})
        for (long long p = 1; p < n; ++p) {{
            bad |= (unsigned long long)(long long)crd[p] >= ext;
            descents += crd[p] <= crd[p - 1];
        }}
    }} else if (ordered) {{
        #pragma omp parallel for simd reduction(|:bad) reduction(+:descents) schedule(static) if(n > {PARALLEL})
        for (long long p = 1; p < n; ++p) {{
            bad |= (unsigned long long)(long long)crd[p] >= ext;
            descents += crd[p] < crd[p - 1];
        }}
    }} else {{
        #pragma omp parallel for simd reduction(|:bad) schedule(static) if(n > {PARALLEL})
        for (long long p = 1; p < n; ++p) bad |= (unsigned long long)(long long)crd[p] >= ext;
    }}
    if (bad) return 1;
    if (!pos) return descents != 0;
    // one pass over the segments: positions never decrease; count the descents at
    // segment starts (each start of a non-empty segment once)
    unsigned at_starts = 0;
    #pragma omp parallel for reduction(|:bad) reduction(+:at_starts) schedule(static) if(parent > {PARALLEL})
    for (long long s = 0; s < parent; ++s) {{
        const long long lo = (long long)pos[s], hi = (long long)pos[s + 1];
        bad |= lo < 0 || hi < lo || hi > n;
        if (ordered && lo > 0 && lo < hi && hi <= n)
            at_starts += unique ? crd[lo] <= crd[lo - 1] : crd[lo] < crd[lo - 1];
    }}
    return bad || descents != at_starts;
}}
DACE_EXPORTED int __ss_check_range_{suffix}(const {T}* crd, long long n, long long extent) {{
    if (n < 0 || extent < 0) return 1;
    const unsigned long long ext = (unsigned long long)extent;
    int bad = 0;
    #pragma omp parallel for simd reduction(|:bad) schedule(static) if(n > {PARALLEL})
    for (long long p = 0; p < n; ++p) bad |= (unsigned long long)(long long)crd[p] >= ext;
    return bad;
}}
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


def symbols(lib, index_dtype) -> Optional[Dict[str, object]]:
    """``{'compressed': f, 'in_range': f}`` from a loaded kernel library (DaCe's
    ``ReloadableDLL``), or None when the library has no checks for this index dtype (built
    before they existed, or by a kernel without sparse arguments)."""
    names = _CTYPES.get(np.dtype(index_dtype))
    if names is None:
        return None
    try:
        comp = lib.get_symbol(f'__ss_check_compressed_{names[0]}')
        rng = lib.get_symbol(f'__ss_check_range_{names[0]}')
    except (KeyError, ReferenceError, AttributeError):
        return None
    return {
        'compressed': _COMPRESSED(ctypes.cast(comp, ctypes.c_void_p).value),
        'in_range': _RANGE(ctypes.cast(rng, ctypes.c_void_p).value),
    }
