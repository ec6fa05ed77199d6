"""Example arguments recorded on an SDFG, for the transformations that need sizes or
structure statistics (SparseFormatSelection, SparseDenseTiling, the fusions' models).

``ss.optimize(prog, matrices={...})`` and ``sdfgsparse annotate FILE.sdfg --arg A=a.mtx``
call :func:`record_examples`. What it keeps travels with the SDFG (saved files, copies,
the VS Code extension's JSON) in its ``sparse_notes`` property (:mod:`sdfgsparse.notes`) under
the key ``'examples'``::

    {'sizes':   {'N': 2708, 'K': 64, ...},          # symbol values the examples imply
     'stats':   {'A': {'nnz': 10556.0, ...}},        # analysis.format_cost.matrix_format_stats
     'given':   {'A': 'CSR'},                        # the format the program declares for it
     'threads': 2,                                   # threads the models assume
     'cache_bytes': 33554432}                        # last-level cache the models assume (if given)

The matrices themselves are not kept. This module is the one reader of the record: a
transformation whose own ``sizes`` / ``stats`` property is empty reads these instead (so
the editor lists SparseFormatSelection and SparseDenseTiling on an annotated SDFG without
asking for symbol values), ``ss.optimize`` and ``sdfgsparse optimize`` without
``matrices`` steer by them, and the SparseIOLowerBound pass feeds their statistics to the
sparse models.
"""
from typing import Any, Dict, Mapping, Optional

import dace
import numpy as np

from sdfgsparse import errors
from sdfgsparse.notes import NOTES
from sdfgsparse.formats import is_sparse_desc, sparse_type_of
from sdfgsparse.runtime.marshal import torch_on_host

__all__ = ['record_examples', 'bind_sizes', 'given_format', 'recorded', 'recorded_sizes', 'recorded_stats', 'recorded_machine',
           'recorded_names', 'recorded_all_stats', 'as_scipy', 'root_of']

KEY = 'examples'


def root_of(sdfg: dace.SDFG) -> dace.SDFG:
    """The outermost SDFG (where the notes are kept)."""
    while getattr(sdfg, 'parent_sdfg', None) is not None:
        sdfg = sdfg.parent_sdfg
    return sdfg


def bind_sizes(sdfg: dace.SDFG, examples: Optional[Mapping[str, Any]]) -> Dict[str, int]:
    """Symbol values implied by example arguments (sparse or dense), checked as the call
    path checks arguments; raises ``ShapeError`` for a name that is not an argument."""
    if not examples:
        return {}
    from sdfgsparse.runtime.arguments import marshal_arguments
    free = {str(s) for s in sdfg.free_symbols}
    values = {n: v for n, v in examples.items() if n in free and n not in sdfg.arrays}  # a slice's bounds
    for n, v in values.items():
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise errors.DTypeError(f'examples for {sdfg.name}: symbol {n!r} takes an integer, got {v!r}')
    data = {n: v for n, v in examples.items() if n not in values}
    unknown = [n for n in data if n not in sdfg.arrays or n not in sdfg.arg_names]
    if unknown:
        raise errors.ShapeError(f'examples for {sdfg.name}: {", ".join(map(repr, unknown))} is not an argument '
                                f'(arguments: {", ".join(sdfg.arg_names)})')
    _, symbols, _, _ = marshal_arguments(dict(data), {n: sdfg.arrays[n] for n in data})
    return {**{k: int(v) for k, v in symbols.items()}, **{n: int(v) for n, v in values.items()}}


def given_format(value) -> Optional[str]:
    """Cost-model name of a scipy matrix's format ('CSR', 'BSR2x2', ...; None for other values)."""
    import scipy.sparse as sp
    if not sp.issparse(value):
        return None
    f = value.format
    if f == 'bsr':
        R, C = value.blocksize
        return f'BSR{R}x{C}'
    return {'csr': 'CSR', 'csc': 'CSC', 'coo': 'COO', 'dia': 'DIA'}.get(f)


def _declared_name(desc) -> str:
    fmt = sparse_type_of(desc).fmt
    return f'BSR{fmt.block[0]}x{fmt.block[1]}' if fmt.name.startswith('BSR') else fmt.name


def as_scipy(value):
    """A scipy sparse view or copy of a sparse example (scipy, ``ss.SparseMatrix``, torch sparse); None otherwise."""
    import scipy.sparse as sp
    from sdfgsparse.runtime.container import SparseMatrix
    if sp.issparse(value):
        return value
    if isinstance(value, SparseMatrix):
        return value.to_scipy()
    value = torch_on_host(value)
    return value if sp.issparse(value) else None


def record_examples(sdfg: dace.SDFG, examples: Mapping[str, Any], threads: Optional[int] = None,
                    cache_bytes: Optional[int] = None) -> dict:
    """Record the sizes and structure statistics of example arguments on ``sdfg`` (replacing
    an earlier record) and return the record.

    :param examples: argument name -> value as it would be passed (scipy / torch sparse,
                     ``ss.SparseMatrix``, NumPy arrays), or symbol name -> integer (a slice's
                     bounds); checked like call arguments.
    :param threads: threads the models assume (default: ``OMP_NUM_THREADS`` or the CPU count).
    :param cache_bytes: last-level cache size the models assume (default: this machine's,
                        found when a model runs).
    """
    if not isinstance(examples, Mapping):
        raise errors.ArgumentError(f'examples must map argument names to values, got {type(examples).__name__}')
    from sdfgsparse.analysis.format_cost import matrix_format_stats
    from sdfgsparse.analysis.tiling import machine_threads
    sizes = bind_sizes(sdfg, examples)
    stats, given = {}, {}
    for name, value in examples.items():
        if name not in sdfg.arrays or not is_sparse_desc(sdfg.arrays[name]):
            continue  # dense data, or a symbol's value
        matrix = as_scipy(value)
        if matrix is None:
            continue
        stats[name] = matrix_format_stats(matrix)
        given[name] = _declared_name(sdfg.arrays[name])  # what the program takes (the call converts to it)
    for what, v in (('threads', threads), ('cache_bytes', cache_bytes)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
            raise errors.ArgumentError(f'record_examples: {what} must be a positive integer, got {v!r}')
    record = {'sizes': sizes, 'stats': stats, 'given': given, 'threads': threads or machine_threads()}
    if cache_bytes:
        record['cache_bytes'] = cache_bytes
    notes = dict(getattr(sdfg, NOTES))
    notes[KEY] = record
    setattr(sdfg, NOTES, notes)
    return record


def recorded(sdfg: dace.SDFG) -> dict:
    """The record of :func:`record_examples` on ``sdfg``'s outermost SDFG ({} if none)."""
    rec = getattr(root_of(sdfg), NOTES, {}).get(KEY)
    return rec if isinstance(rec, dict) else {}


def recorded_sizes(sdfg: dace.SDFG) -> Dict[str, int]:
    """Recorded symbol values ({} if none)."""
    sizes = recorded(sdfg).get('sizes') or {}
    return {str(k): int(v) for k, v in sizes.items() if isinstance(v, (int, float))}


def recorded_machine(sdfg: dace.SDFG) -> Dict[str, int]:
    """Recorded ``threads`` and ``cache_bytes`` (those present)."""
    rec = recorded(sdfg)
    return {k: int(rec[k]) for k in ('threads', 'cache_bytes') if isinstance(rec.get(k), (int, float)) and rec[k] > 0}


def recorded_names(sdfg: dace.SDFG):
    """Sparse arguments with recorded statistics, in recording order."""
    stats = recorded(sdfg).get('stats') or {}
    return [str(n) for n, st in stats.items() if isinstance(st, dict) and st]


def recorded_all_stats(sdfg: dace.SDFG, keys=None) -> Dict[str, Dict[str, float]]:
    """Argument name -> recorded statistics (only ``keys`` where given), for every argument
    :func:`recorded_names` lists."""
    out = {}
    for name in recorded_names(sdfg):
        stats, _ = recorded_stats(sdfg, name)
        out[name] = {k: v for k, v in stats.items() if keys is None or k in keys}
    return out


def recorded_stats(sdfg: dace.SDFG, name: str):
    """(statistics, given format name) recorded for argument ``name``, or (None, None)."""
    rec = recorded(sdfg)
    stats = (rec.get('stats') or {}).get(name)
    if not isinstance(stats, dict) or not stats:
        return None, None
    return {k: float(v) for k, v in stats.items()}, (rec.get('given') or {}).get(name)
