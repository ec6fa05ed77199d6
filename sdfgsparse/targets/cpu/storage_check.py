"""Compiled storage checks, generated into every sparse kernel's library.

A warm call validates its sparse arguments before it runs the kernel (out-of-range or
unsorted indices would make the kernel read out of bounds). In NumPy that takes several
passes over the index arrays, about as long as the SpMV itself. The functions below do
the same check in one pass, in one parallel region above :data:`PARALLEL` entries and
segments, comparing at the width of the indices (several times faster than 64-bit
compares and a region per pass; figures in docs/performance.md). They are emitted as global code of every kernel that takes a
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

__all__ = ['PARALLEL', 'INDEX_CTYPES', 'add_to', 'symbols', 'global_code', 'library_function']

#: Entries above which the check runs in parallel (below, one thread is faster).
PARALLEL = 1 << 16

#: Per index dtype: symbol suffix, C type, unsigned C type, and the clamp of an extent
#: (read as unsigned, a negative index is at least 2^(bits-1), above any valid one).
INDEX_CTYPES = {
    np.dtype(np.int32): ('int32', 'int32_t', 'uint32_t', '(1LL << 31)'),
    np.dtype(np.int64): ('int64', 'int64_t', 'uint64_t', '(long long)(~0ULL >> 1)'),
}


def global_code(index_dtype) -> Optional[str]:
    """C++ source of both checks for one index dtype (None for other dtypes); guarded, so
    several kernels of one program can each carry it."""
    names = INDEX_CTYPES.get(np.dtype(index_dtype))
    if names is None:
        return None
    suffix, T, U, HALF = names
    return f'''
#ifndef SDFGSPARSE_STORAGE_CHECK_{suffix}
#define SDFGSPARSE_STORAGE_CHECK_{suffix}
#include <omp.h>
// sdfgsparse: storage checks of sparse arguments (targets/cpu/storage_check.py)
DACE_EXPORTED int __ss_check_compressed_{suffix}(const {T}* pos, long long parent, const {T}* crd, long long n,
                                                 long long extent, int ordered, int unique) {{
    // per-thread counts are 32-bit (twice as fast in SIMD); larger levels answer "not checked"
    if (parent < 0 || n < 0 || extent < 0 || n >= (1LL << 32)) return 2;
    if (pos && (pos[0] != 0 || (long long)pos[parent] != n)) return 1;
    // read as unsigned, a negative index is at least 2^(bits-1), above any valid one
    const {U} ext = ({U})(extent < {HALF} ? extent : {HALF});
    int bad = 0;
    long long diff = 0;  // descents of the entries minus those at segment starts
    // One parallel region, each thread a block of entries and a block of segments.
    // Entries: out-of-range ones, and "descents" (an entry not above its predecessor);
    // the order holds iff every descent starts a segment.
    #pragma omp parallel reduction(|:bad) reduction(+:diff) if(n + parent > {PARALLEL})
    {{
        const long long T = omp_get_num_threads(), t = omp_get_thread_num();
        const long long pb = n * t / T, pe = n * (t + 1) / T;
        int b = 0;
        unsigned d = 0;
        if (ordered && unique) {{
            #pragma omp simd reduction(|:b) reduction(+:d)
            for (long long p = pb > 0 ? pb : 1; p < pe; ++p) {{
                b |= ({U})crd[p] >= ext;
                d += crd[p] <= crd[p - 1];
            }}
        }} else if (ordered) {{
            #pragma omp simd reduction(|:b) reduction(+:d)
            for (long long p = pb > 0 ? pb : 1; p < pe; ++p) {{
                b |= ({U})crd[p] >= ext;
                d += crd[p] < crd[p - 1];
            }}
        }} else {{
            #pragma omp simd reduction(|:b)
            for (long long p = pb > 0 ? pb : 1; p < pe; ++p) b |= ({U})crd[p] >= ext;
        }}
        if (pb == 0 && pe > 0) b |= ({U})crd[0] >= ext;
        long long dd = d;
        // Segments: positions never decrease and stay in [0, n] (the block's ends in
        // range, no decrease inside); then count the descents at segment starts (each
        // start of a non-empty segment once).
        if (pos) {{
            const long long sb = parent * t / T, se = parent * (t + 1) / T;
            int m = pos[sb] < 0 || (long long)pos[se] > n;
            #pragma omp simd reduction(|:m)
            for (long long s = sb; s < se; ++s) m |= pos[s + 1] < pos[s];
            if (m) b = 1;
            else if (ordered) {{
                for (long long s = sb; s < se; ++s) {{
                    const long long lo = pos[s];
                    if (lo > 0 && lo < (long long)pos[s + 1])
                        dd -= unique ? crd[lo] <= crd[lo - 1] : crd[lo] < crd[lo - 1];
                }}
            }}
        }}
        bad |= b;
        diff += dd;
    }}
    return bad || diff != 0;
}}
DACE_EXPORTED int __ss_check_range_{suffix}(const {T}* crd, long long n, long long extent) {{
    if (n < 0 || extent < 0) return 1;
    const {U} ext = ({U})(extent < {HALF} ? extent : {HALF});
    int bad = 0;
    #pragma omp parallel for simd reduction(|:bad) schedule(static) if(n > {PARALLEL})
    for (long long p = 0; p < n; ++p) bad |= ({U})crd[p] >= ext;
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


def library_function(lib, name: str, proto):
    """The exported function ``name`` of a loaded kernel library (DaCe's
    ``ReloadableDLL``) as ``proto`` (a ctypes function type), or None when it has none."""
    try:
        address = lib.get_symbol(name)
    except (KeyError, ReferenceError, AttributeError, OSError):
        return None
    return proto(ctypes.cast(address, ctypes.c_void_p).value)


def symbols(lib, index_dtype) -> Optional[Dict[str, object]]:
    """``{'compressed': f, 'in_range': f}`` from a loaded kernel library, or None when the
    library has no checks for this index dtype (built before they existed, or by a kernel
    without sparse arguments)."""
    names = INDEX_CTYPES.get(np.dtype(index_dtype))
    if names is None:
        return None
    comp = library_function(lib, f'__ss_check_compressed_{names[0]}', _COMPRESSED)
    rng = library_function(lib, f'__ss_check_range_{names[0]}', _RANGE)
    if comp is None or rng is None:
        return None
    return {'compressed': comp, 'in_range': rng}
