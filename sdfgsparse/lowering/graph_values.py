"""Building blocks of the portable kernels (:mod:`sdfgsparse.lowering.graph`) whose result
is a sparse matrix with the pattern of their sparse operand, or a pass over its entries.

Element-wise operations on stored values (``MapValues``, ``SparseMulDense``,
``SparseSoftmax``) write a result of the operand's format and pattern: its index members
are copies of the operand's (:func:`copy_index_members`) and only the values are
computed, either slot by slot (:func:`map_value_slots`, padding slots included) or entry
by entry (:func:`entry_pass`, the levels' guards applied, so ELL padding and
out-of-range DIA slots keep the value their slots were filled with).

Everything here is written on top of :class:`~sdfgsparse.lowering.graph.Kernel`: maps
and Python tasklets, no C++ text.
"""
from typing import Dict, Iterable, Optional, Tuple

import dace
import sympy
from dace import dtypes
from dace.sdfg.state import SDFGState

from sdfgsparse.lowering.graph import Kernel, Operand, read

__all__ = ['copy_index_members', 'map_value_slots', 'entry_pass', 'exact_float']


def exact_float(value: float) -> sympy.Float:
    """``value`` as a sympy number that prints all its digits (``-1.7976931348623157e+308``;
    the default 15 digits round the lowest float64 past the range of the type)."""
    return sympy.Float(float(value), 17)


def copy_index_members(k: Kernel, state: SDFGState, members: Iterable[str], src: str, dst: str):
    """In ``state``, one parallel map per index member (every member but ``vals``) copying
    ``_<src>_<member>`` to ``_<dst>_<member>``."""
    for m in members:
        if m == 'vals':
            continue
        s, d = f'_{src}_{m}', f'_{dst}_{m}'
        q = sympy.Symbol(f'__q_{m}')
        sc = k.scope(state, [(str(q), 0, k.sdfg.arrays[s].shape[0])], [dtypes.ScheduleType.Default])
        k.compute(sc, (d, [q]), read(s, q), label=f'copy_{m}')


def map_value_slots(k: Kernel, state: SDFGState, src: str, dst: str, code: str, value: str = 'v',
                    inputs: Optional[Dict[str, Tuple[str, str]]] = None, label: str = 'map_values'):
    """In ``state``, a parallel map over every value slot ``q`` of the 1-D array ``src``
    (padding slots included) computing ``dst[q] = code``: a Python expression (DaCe's
    tasklet language, e.g. ``max(0, v)``, ``math.exp(v)``) of the connector ``value``
    (``src[q]``) and of ``inputs`` (connector -> ``(array, subset)``, e.g.
    ``{'__alpha': ('_alpha', '0')}``).

    The expression is kept as written (argument order included), which matters where a
    printer would reorder it: ``max(0, v)`` keeps a NaN ``v``, ``max(v, 0)`` does not."""
    q = '__q'
    n = k.sdfg.arrays[src].shape[0]
    sc = k.scope(state, [(q, 0, n)], [dtypes.ScheduleType.Default])
    inputs = dict(inputs or {})
    t = state.add_tasklet(label, {value} | set(inputs), {'__o'}, f'__o = {code}', language=dtypes.Language.Python)
    state.add_memlet_path(state.add_read(src), *sc.entries, t, dst_conn=value, memlet=dace.Memlet(f'{src}[{q}]'))
    for conn, (arr, subset) in inputs.items():
        state.add_memlet_path(state.add_read(arr), *sc.entries, t, dst_conn=conn,
                              memlet=dace.Memlet(f'{arr}[{subset}]'))
    state.add_memlet_path(t, *reversed(sc.exits), state.add_write(dst), src_conn='__o',
                          memlet=dace.Memlet(f'{dst}[{q}]'))
    return t


def entry_pass(k: Kernel, label: str, A: Operand, target, value, wcr: Optional[str] = None, parallel: bool = True,
               state: Optional[SDFGState] = None):
    """A new state (or ``state``) with maps over the stored entries of ``A`` (its levels'
    loops, guards applied) computing ``target = value`` (or ``target wcr= value``), where
    ``target`` is ``(array, index expressions)`` and ``value`` a kernel expression
    (:func:`~sdfgsparse.lowering.graph.read`, ``A.value``, ``A.row`` ...).
    ``parallel=False`` runs the outer level sequentially."""
    state = state or k.add_state(label)
    sc = k.entries(state, A, parallel=parallel)
    return k.compute(sc, target, value, wcr=wcr, guard=A.guard, label=label)
