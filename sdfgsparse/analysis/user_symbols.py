"""The names a user reads for the size symbols of sparse operands.

A sparse argument's entry count is a symbol the format layer names uniquely per
annotation (``ssdabfd55e_n1``); a report or a bound shows it as ``nnz(A)``. Per format
size key: the count of the last compressed level is ``nnz(A)`` (``blocks(A)`` for BSR), an
outer compressed level of a doubly compressed format ``nonempty(A)``, ELL's width
``max_row(A)``, DIA's ``ndiags(A)`` and ``diag_len(A)``.
"""
from typing import Dict, Mapping

import sympy

from sdfgsparse.formats import is_sparse_desc, sparse_type_of

__all__ = ['user_symbol_names', 'readable']


def _label(fmt, key: str, name: str) -> str:
    compressed = [k for k in fmt.size_keys if k.startswith('n') and k[1:].isdigit()]
    if key == 'nd':
        return f'ndiags({name})'
    if key == 'L':
        return f'diag_len({name})'
    if key == 'K':
        return f'max_row({name})'
    if compressed and key == compressed[-1]:
        return f'blocks({name})' if fmt.name.startswith('BSR') else f'nnz({name})'
    return f'nonempty({name})'


def user_symbol_names(sdfg) -> Dict[str, str]:
    """Internal size-symbol name -> the user's name (``'ssdabfd55e_n1' -> 'nnz(A)'``) for
    every sparse container of ``sdfg`` and its nested SDFGs, program arguments first."""
    out: Dict[str, str] = {}
    found = []
    for g in sdfg.all_sdfgs_recursive():
        for name, desc in g.arrays.items():
            if is_sparse_desc(desc):
                found.append((desc.transient or g is not sdfg, name, desc))
    for _, name, desc in sorted(found, key=lambda f: f[0]):
        st = sparse_type_of(desc)
        for key, sym in st.sizes.items():
            if isinstance(sym, sympy.Symbol):
                out.setdefault(str(sym), _label(st.fmt, key, name))
    return out


def readable(expr, names: Mapping[str, str]) -> str:
    """``str(expr)`` with the internal size symbols replaced by the user's names."""
    text = str(expr)
    if not names or not isinstance(expr, sympy.Basic):
        for old, new in sorted((names or {}).items(), key=lambda kv: -len(kv[0])):
            text = text.replace(old, new)
        return text
    subs = {s: sympy.Symbol(names[s.name]) for s in expr.free_symbols if getattr(s, 'name', None) in names}
    return str(expr.xreplace(subs)) if subs else text
