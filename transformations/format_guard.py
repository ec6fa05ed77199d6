"""A format chosen for the example matrices holds on every call: the guard that sends a call
whose matrix the chosen format would blow up to the program's own formats.

``SparseFormatSelection`` chooses from the structure of *one* matrix: DIA for a 7-diagonal
band. Called with another matrix (a power-law graph), the same conversion needs
``ndiags x rows`` slots -- gigabytes for a matrix of a few megabytes. Before any conversion
allocates, :meth:`FormatGuard.oversized` measures what each converted argument would take
(:func:`sdfgsparse.analysis.conversion_bound.converted_bytes`: ``O(rows)`` from the row
pointers first, ``O(nnz)`` only where that bound is within the limit) against
:data:`GROWTH` times the argument's own storage as CSR. Where one would exceed it, the call
runs the program with its own formats instead (``ss.optimize(..., formats=False)`` of the
SDFG as it was before the selection, compiled once on demand) and says so once per
argument and format: a :class:`~sdfgsparse.errors.FormatFallbackWarning` naming the argument, the chosen format
and the size it would need, also listed by ``OptimizedProgram.report()``.
"""
import threading
import warnings
from typing import Any, Callable, Dict, List, Mapping

import dace

from sdfgsparse import errors
from sdfgsparse.errors import FormatFallbackWarning
from sdfgsparse.analysis.conversion_bound import converted_bytes, csr_bytes
from sdfgsparse.formats import sparse_type_of
from sdfgsparse.transformations.examples import as_scipy

__all__ = ['FormatGuard', 'FormatFallbackWarning', 'GROWTH']

#: a conversion may take at most this many times the argument's own storage (as CSR)
GROWTH = 4


def _human(n: float) -> str:
    for unit, size in (('GiB', 1 << 30), ('MiB', 1 << 20), ('KiB', 1 << 10)):
        if n >= size:
            return f'{n / size:.1f} {unit}'
    return f'{int(n)} B'


class FormatGuard:
    """The size check of the converted arguments of an optimised program, and its fallback.

    :param own: the SDFG before format selection (with the program's own formats).
    :param conversions: argument name -> chosen format (cost-model name).
    :param options: keyword arguments of ``ss.optimize`` for the fallback (target, ...).
    :param optimize: ``ss.optimize`` itself (passed in: this module sits below the pipeline).
    """

    def __init__(self, own: dace.SDFG, conversions: Mapping[str, str], options: Dict[str, Any],
                 optimize: Callable):
        self._own = own
        self.conversions = dict(conversions)
        self._options = dict(options)
        self._optimize = optimize
        self._program = None
        self._lock = threading.Lock()
        #: one line per (argument, format) that sent a call to the fallback, first call first
        self.events: List[str] = []
        self._declared = {n: sparse_type_of(own.arrays[n]) for n in self.conversions}

    def oversized(self, arguments: Mapping[str, Any]) -> bool:
        """True when converting some argument of ``arguments`` (name -> value as passed)
        would exceed its bound; the first such argument is reported (once per argument and
        format). Values that are not sparse matrices are left to the call's own checks."""
        for name, fmt in self.conversions.items():
            matrix = as_scipy(arguments.get(name))
            if matrix is None or len(matrix.shape) != 2:
                continue
            st = self._declared[name]
            v, i = st.dtype.bytes, st.index_dtype.bytes
            have = csr_bytes(matrix, v, i)
            limit = GROWTH * have
            if fmt.startswith('BSR'):
                R, C = (int(x) for x in fmt[3:].split('x'))
                if matrix.shape[0] % R or matrix.shape[1] % C:
                    self._report(name, fmt, f'cannot hold its shape {matrix.shape} (not a multiple of {R}x{C})')
                    return True
            need, exact = converted_bytes(matrix, fmt, v, i, limit)
            if need > limit:
                self._report(name, fmt, f'would need {"" if exact else "at least "}{_human(need)}, more than '
                             f'{GROWTH}x its {_human(have)} as CSR')
                return True
        return False

    def _report(self, name, fmt, why):
        own = sparse_type_of(self._own.arrays[name]).fmt.name
        line = (f"argument {name!r} as {fmt} (the format chosen for the example matrices) {why}: the call ran "
                f"the program's own {own}")
        with self._lock:
            if line in self.events:
                return
            self.events.append(line)
        errors.warn_user(f'ss.optimize({self._own.name}): {line} (compiled once; said once)', FormatFallbackWarning)

    def program(self):
        """The program with its own formats (optimised without format selection; built on
        first use, once, thread-safely)."""
        if self._program is None:
            with self._lock:
                if self._program is None:
                    with warnings.catch_warnings():
                        warnings.simplefilter('ignore', FormatFallbackWarning)
                        self._program = self._optimize(self._own, formats=False, **self._options)
        return self._program
