"""The warm call's single entry into a program's library.

A warm call of a program with CSR / CSC arguments made three foreign calls through ctypes:
the storage check of each sparse argument, the construction of each argument's struct
(a ``ctypes.Structure``), and the program. On a 100 x 100 SpMV each cost more than the
kernel itself (docs/performance.md). Every such program's library therefore exports one
more function, ``__ss_entry_<key>``, written right after ``__program_<name>`` by DaCe's
frame code generator (:func:`install` wraps its footer) with the same parameter list.

The entry takes one argument: a record of 8-byte slots that the call plan's compiled
binder fills (``runtime/_binder.c``; ``include/sdfgsparse_entry.h`` reads it). Slots 0-3:
the program's state, the check bits (bit ``k``: check the ``k``-th CSR / CSC argument) and
two reserved slots (0). Then the program's parameters in order: an array's data address, a
scalar as a 64-bit integer or a double, a CSR / CSC argument its struct's fields in
declaration order followed by ``parent, n, extent`` of its storage check
(``sdfgsparse::check_compressed``; ``ordered`` and ``unique`` come from the format), any
other sparse argument and a sparse result the address of its struct. The entry assembles
the CSR / CSC structs on its stack, runs the checks asked for and calls the program; it
returns 0 after the program ran, else the 1-based position of the first argument whose
check failed (the program did not run: the full path then raises the typed error).

``key`` hashes the parameter list and the layout of each struct, and :func:`find` looks the
entry up under the key of the *compiled* program's arguments: a library generated for other
arguments has no entry of that key, and the binder calls the program's own function.

Programs whose kernels brought sdfgsparse's include path (:class:`~sdfgsparse.targets.cpu.environment.SdfgsparseCPU`)
get an entry, with at most :data:`MAX_SPARSE` CSR / CSC arguments.
"""
import ctypes
import hashlib
from typing import List, Optional, Tuple

import dace
import numpy as np
from dace.codegen.targets.cpp import mangle_dace_state_struct_name

from sdfgsparse._dace_compat import wrap
from sdfgsparse.formats.format import is_sparse_desc, sparse_type_of
from sdfgsparse.formats.levels import Compressed, Dense
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU
from sdfgsparse.targets.cpu.storage_check import INDEX_CTYPES, library_function

__all__ = ['install', 'find', 'Entry', 'MAX_SPARSE', 'slot_code']

_PREFIX = '__ss_entry_'

#: Sparse arguments an entry takes at most (one check bit each in a 64-bit slot).
MAX_SPARSE = 62


def _plain_compressed(desc) -> bool:
    st = sparse_type_of(desc)
    fmt = st.fmt
    return ([type(lvl) for lvl in fmt.levels] == [Dense, Compressed] and not fmt.levels[0].size_key and
            list(fmt.size_keys) == ['n1'] and fmt.block == (1, 1) and
            np.dtype(st.index_dtype.type) in INDEX_CTYPES)


def _by_fields(name: str, desc) -> bool:
    """Whether the entry assembles this parameter's struct from the record (a CSR / CSC
    argument; a sparse result's struct, which the program fills, comes by its address)."""
    return is_sparse_desc(desc) and not name.startswith('__return') and _plain_compressed(desc)


def _fields(desc) -> List[Tuple[str, str]]:
    """(name, C type) of each field of a sparse argument's struct, in declaration order."""
    return [(f, t.ctype) for f, t in desc.dtype.base_type.fields.items()]


def _layout(sdfg: dace.SDFG, arglist) -> Optional[str]:
    """The text the entry's key hashes: the program's parameter list and its structs; None
    when an argument is of a kind the entry does not pass."""
    parts = [sdfg.signature(arglist=arglist)]
    if sum(_by_fields(n, d) for n, d in arglist.items()) > MAX_SPARSE:
        return None
    for name, desc in arglist.items():
        if is_sparse_desc(desc):
            kind = 'fields' if _by_fields(name, desc) else 'address'
            parts.append(f'{name}:{kind}:{desc.dtype.base_type.ctype}:' +
                         ','.join(f'{f} {t}' for f, t in _fields(desc)))
        elif isinstance(desc, dace.data.Structure) or not isinstance(desc, (dace.data.Array, dace.data.Scalar)):
            return None
        elif isinstance(desc, dace.data.Array) and desc.storage not in (dace.StorageType.Default,
                                                                        dace.StorageType.CPU_Heap):
            return None
    return '\n'.join(parts)


def _key(layout: str) -> str:
    return hashlib.sha256(layout.encode()).hexdigest()[:16]


def slot_code(desc) -> Optional[str]:
    """The ``struct`` code of a program parameter's slot: an address, an integer or a double."""
    if isinstance(desc, dace.data.Array):
        return 'Q'
    t = desc.dtype.type
    if t in (bool, np.bool_) or np.issubdtype(t, np.integer):
        return 'q'
    if np.issubdtype(t, np.floating):
        return 'd'
    return None


def _slots(arglist) -> Optional[str]:
    """The ``struct`` format of the record the entry reads (after state and checks)."""
    codes = []
    for name, desc in arglist.items():
        if _by_fields(name, desc):
            codes += ['Q' if isinstance(t, dace.pointer) else 'q' for t in desc.dtype.base_type.fields.values()]
            codes += ['q', 'q', 'q']
        elif is_sparse_desc(desc):
            codes.append('Q')  # the address of its struct
        else:
            code = slot_code(desc)
            if code is None:
                return None
            codes.append(code)
    return ''.join(codes)


def _entry_code(sdfg: dace.SDFG, arglist) -> Optional[str]:
    """The entry of the program of ``sdfg`` (the root SDFG being generated) with DaCe's
    parameter list ``arglist``, or None when it gets none."""
    layout = _layout(sdfg, arglist)
    if layout is None or _slots(arglist) is None or not any(is_sparse_desc(d) for d in arglist.values()):
        return None
    call, body = [], []
    k, slot = 0, 0

    def read(ctype: str) -> str:
        nonlocal slot
        slot += 1
        return f'_r.get<{ctype}>({slot - 1})'

    for arg, desc in arglist.items():
        if not is_sparse_desc(desc):
            call.append(read(f'{desc.dtype.ctype}*' if isinstance(desc, dace.data.Array) else desc.dtype.ctype))
            continue
        sname = desc.dtype.base_type.ctype
        if not _by_fields(arg, desc):  # its struct, assembled by the caller
            call.append(read(f'{sname}*'))
            continue
        st = sparse_type_of(desc)
        level = st.fmt.levels[1]
        T = INDEX_CTYPES[np.dtype(st.index_dtype.type)][1]
        local = f'_s{k}'
        body.append(f'{sname} {local};')
        for f, _ in _fields(desc):
            body.append(f'{local}.{f} = {read(f"decltype({local}.{f})")};')
        parent, n, extent = read('long long'), read('long long'), read('long long')
        body.append(f'if (((_checks >> {k}) & 1) && sdfgsparse::check_compressed<{T}>((const {T}*){local}.pos1, '
                    f'{parent}, (const {T}*){local}.crd1, {n}, {extent}, {int(bool(level.ordered))}, '
                    f'{int(bool(level.unique))}) != 0) return {k + 1};')
        call.append(f'&{local}')
        k += 1
    lines = '\n'.join('    ' + b for b in body)
    state = mangle_dace_state_struct_name(sdfg.name)
    head = (f'#include "sdfgsparse_storage_check.h"\n#include "sdfgsparse_entry.h"\n'
            f'SDFGSPARSE_ENTRY_BEGIN({_PREFIX}{_key(layout)})\n')
    return f'\n{head}{lines}\nSDFGSPARSE_ENTRY_END(__program_{sdfg.name}(({state}*)_r.state(), {", ".join(call)}))\n'


def install() -> None:
    """Write each program's entry after the program itself: a wrapper of DaCe's frame code
    generator's footer, which writes ``__program_<name>`` (idempotent)."""
    from dace.codegen.targets import framecode

    def make(orig):

        def generate_footer(self, sdfg, global_stream, callsite_stream):
            orig(self, sdfg, global_stream, callsite_stream)
            # (only where a cpu kernel brought the headers' include path: SdfgsparseCPU)
            if sdfg.parent_sdfg is None and SdfgsparseCPU in getattr(self, 'environments', ()):
                code = _entry_code(sdfg, self.arglist)
                if code is not None:
                    callsite_stream.write(code, sdfg)

        return generate_footer

    wrap(framecode.DaCeCodeGenerator, 'generate_footer', make)


install()


class Entry:
    """A program's entry, found in its loaded library: ``address`` (of ``int entry(const
    char *record)``), ``slots`` (the ``struct`` code of each parameter slot after the four
    of the header: ``Q`` an address, ``q`` an integer, ``d`` a double) and ``sparse``, the
    names of the CSR / CSC arguments in parameter order (bit ``k`` of the checks is the
    ``k``-th of them; each takes its struct's fields and ``parent, n, extent``: other
    sparse arguments take the address of their struct)."""

    def __init__(self, address: int, slots: str, sparse: List[str]):
        self.address, self.slots, self.sparse = address, slots, sparse


def find(csdfg) -> Optional[Entry]:
    """The entry of compiled program ``csdfg`` (a DaCe ``CompiledSDFG``) for its arguments as
    compiled, or None."""
    sdfg, arglist = csdfg.sdfg, csdfg._typedict
    try:
        layout, slots = _layout(sdfg, arglist), _slots(arglist)
    except Exception:  # an argument this module cannot describe
        return None
    if layout is None or slots is None:
        return None
    func = library_function(csdfg._lib, _PREFIX + _key(layout), ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p))
    if func is None:
        return None
    sparse = [a for a, d in arglist.items() if _by_fields(a, d)]
    return Entry(ctypes.cast(func, ctypes.c_void_p).value, slots, sparse)
