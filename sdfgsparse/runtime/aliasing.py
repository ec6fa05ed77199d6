"""Arguments that share memory: the call computes as NumPy does, or raises.

``y[:] = A @ x`` called as ``f(A, y, y)`` means in NumPy "compute ``A @ y``, then assign
it to ``y``". The generated code assumes its arguments do not overlap (it writes ``y``
while it still reads ``x``), so a call whose written argument shares memory with another
argument computes through a temporary: the written argument is passed as a fresh copy
(its contents too, for read-write arguments like ``y[:] += A @ x``), the program runs, and
the copy is written back into the caller's array. Reads of the other argument then see
its values from before the call, which is NumPy's meaning of one statement.

A program that reads an overlapping argument *after* writing the other one (two
statements ``y[:] = A @ x; z[:] = A @ x`` called with ``x`` and ``y`` the same array),
and one that writes two overlapping arguments, would need the generated code to see its
writes through the alias; such calls raise :class:`~sdfgsparse.errors.ArgumentError`
naming both arguments before anything of the caller's is written.

:func:`memory_of` gives the byte ranges ``[start, end)`` an argument occupies (the member
arrays of a sparse argument, the storage a NumPy array, torch tensor or CUDA array
spans); :class:`ArgumentAccess` says, once per SDFG, which arguments the program writes
and which it may read after writing each. The warm call (:mod:`~sdfgsparse.runtime.plan`)
compares the pointers it has already read: O(number of arguments), nothing when the
program writes no argument; it hands an overlapping call to the full path, which calls
:func:`separate` and :func:`check_after`.
"""
import threading
import weakref
from typing import Any, Dict, FrozenSet, List, Optional, Tuple

import dace
import networkx as nx
import numpy as np

from sdfgsparse import errors
from sdfgsparse.runtime.marshal import _torch_layout

__all__ = ['ArgumentAccess', 'access_of', 'memory_of', 'overlap', 'separate', 'check_after', 'fresh_copy']

#: The byte ranges of one argument: ``(address space, start, end)`` each.
Ranges = List[Tuple[Any, int, int]]

_HOST = 'host'
_byte_bounds = getattr(np, 'byte_bounds', None) or np.lib.array_utils.byte_bounds  # (moved in NumPy 2)


def _span(ptr: int, shape, strides, itemsize: int, space) -> Ranges:
    """The bytes ``[low, high)`` an array with byte ``strides`` starting at ``ptr`` touches."""
    if any(int(s) == 0 for s in shape):
        return []
    low = high = 0
    for n, st in zip(shape, strides):
        step = (int(n) - 1) * int(st)
        if step < 0:
            low += step
        else:
            high += step
    return [(space, ptr + low, ptr + high + itemsize)]


def memory_of(value) -> Ranges:
    """The memory ``value`` (an argument as passed to the compiled program) occupies;
    [] for what has none (numbers)."""
    if isinstance(value, np.ndarray):
        if value.size == 0:
            return []
        low, high = _byte_bounds(value)
        return [(_HOST, low, high)]
    arg = getattr(value, '_ss_arg', None)
    if arg is not None:  # an argument struct: its member arrays
        return [r for a in arg.arrays.values() for r in memory_of(a)]
    if _torch_layout(value) == 'strided':
        size = value.element_size()
        space = _HOST if value.is_cpu else 'cuda'
        return _span(value.data_ptr(), value.shape, [s * size for s in value.stride()], size, space)
    face = getattr(value, '__cuda_array_interface__', None)
    if face is not None:  # CuPy and friends
        size = np.dtype(face['typestr']).itemsize
        shape = face['shape']
        strides = face.get('strides')
        if strides is None:
            strides, acc = [], size
            for n in reversed(shape):
                strides.insert(0, acc)
                acc *= int(n)
        return _span(face['data'][0], shape, strides, size, 'cuda')
    return []


def overlap(a: Ranges, b: Ranges) -> bool:
    """Whether two arguments' memory shares a byte."""
    return any(sa == sb and s0 < e1 and s1 < e0 for sa, s0, e0 in a for sb, s1, e1 in b)


def fresh_copy(value):
    """A copy of ``value`` in memory of its own, C-ordered (what the program reads)."""
    if isinstance(value, np.ndarray):
        return np.array(value, order='C', copy=True)
    if _torch_layout(value) == 'strided':
        return value.clone().contiguous()
    return value.copy()  # CuPy


# ---------------------------------------------------------------------- the program's side
class ArgumentAccess:
    """Which arguments an SDFG writes (``written``), and for each written argument the
    arguments it may read after writing it (``read_after``: in a later state, later in the
    same state, in the next iteration of a loop, or on a condition)."""

    def __init__(self, sdfg: dace.SDFG):
        args = {n for n, d in sdfg.arrays.items() if not d.transient}
        reads: Dict[str, list] = {}
        writes: Dict[str, list] = {}
        states = list(sdfg.all_states())
        for state in states:
            for node in state.data_nodes():
                if node.data in args:
                    if state.in_degree(node) > 0:
                        writes.setdefault(node.data, []).append((state, node))
                    if state.out_degree(node) > 0:
                        reads.setdefault(node.data, []).append((state, node))
        on_edges = set()  # arguments read by conditions and assignments: read "anywhere"
        for edge in sdfg.all_interstate_edges():
            on_edges |= set(map(str, edge.data.read_symbols())) & args
        after = _StateOrder(sdfg)
        self.written: FrozenSet[str] = frozenset(writes)
        self.read_after: Dict[str, FrozenSet[str]] = {}
        for w, places in writes.items():
            found = set(on_edges)
            per_state = {}
            for sw, _ in places:
                per_state[sw] = per_state.get(sw, 0) + 1
            for r, reading in reads.items():
                if r == w or r in found:
                    continue
                if any(after.reads_after(sw, nw, per_state[sw] > 1, sr, nr) for sw, nw in places
                       for sr, nr in reading):
                    found.add(r)
            self.read_after[w] = frozenset(found - {w})


class _StateOrder:
    """``reads_after(write state, write node, written again, read state, read node)``:
    whether the read may happen after the write, in the program's statement order.

    Across states: whether the read's state follows the write's (exact on a flat state
    machine; two states in one control-flow region count as ordered both ways). In one
    state the dataflow no longer holds the statement order (DaCe assumes arguments do not
    overlap, so ``y[:] = A @ x; z[:] = A @ x`` reads ``x`` for both products before or after
    writing ``y``): the read counts as before the write only when everything it feeds
    leads into the write or is computed from it, and the state writes the argument once
    and is not in a loop."""

    def __init__(self, sdfg: dace.SDFG):
        self.sdfg = sdfg
        self._top: Dict[Any, Any] = {}
        self._descendants: Dict[Any, set] = {}

    def _top_block(self, state):
        block = self._top.get(state)
        if block is None:
            block = state
            while block.parent_graph is not self.sdfg and block.parent_graph is not None:
                block = block.parent_graph
            self._top[state] = block
        return block

    def _later(self, block) -> set:
        found = self._descendants.get(block)
        if found is None:
            g = self.sdfg.nx
            found = self._descendants[block] = nx.descendants(g, block) if block in g else set(g.nodes)
        return found

    def _looped(self, state) -> bool:
        block = self._top_block(state)
        if block is not state:  # in a region: conservatively
            return True
        g = self.sdfg.nx  # (networkx leaves a node out of its own descendants, even on a cycle)
        return block not in g or any(s is block or block in self._later(s) for s in g.successors(block))

    def reads_after(self, sw, nw, again: bool, sr, nr) -> bool:
        if sw is sr:
            if again or self._looped(sw):
                return True
            g = sw.nx
            related = nx.ancestors(g, nw) | nx.descendants(g, nw) | {nw}
            return not nx.descendants(g, nr) <= related
        bw, br = self._top_block(sw), self._top_block(sr)
        return bw is br or br in self._later(bw)


_ACCESS: 'weakref.WeakKeyDictionary[dace.SDFG, ArgumentAccess]' = weakref.WeakKeyDictionary()
_ACCESS_LOCK = threading.Lock()


def access_of(sdfg: dace.SDFG) -> ArgumentAccess:
    """The :class:`ArgumentAccess` of ``sdfg`` (a compiled program's SDFG, which does not
    change), computed once per SDFG object. (Kept beside the object, not in it: a deep copy
    of the SDFG, transformed afterwards, must not inherit it.)"""
    found = _ACCESS.get(sdfg)
    if found is None:
        found = ArgumentAccess(sdfg)
        with _ACCESS_LOCK:
            _ACCESS[sdfg] = found
    return found


# ---------------------------------------------------------------------- the call's side
def _conflict(w: str, other: str, both_written: bool, sparse: bool) -> errors.ArgumentError:
    if sparse:
        why = f'the program writes the sparse argument {w}'
    elif both_written:
        why = 'the program writes both'
    else:
        why = f'the program reads {other} after writing {w}'
    return errors.ArgumentError(f'{w} and {other} share memory and {why}: the result would depend on the order of '
                                f'the generated code; pass separate arrays (e.g. {other}.copy())')


def _check_pair(a: str, b: str, access: ArgumentAccess, sparse) -> Optional[str]:
    """The argument of the overlapping pair to pass as a copy (None: neither is written),
    or the typed error for a pair no copy can make NumPy-exact."""
    wa, wb = a in access.written, b in access.written
    if not wa and not wb:
        return None
    if wa and wb:
        raise _conflict(a, b, True, False)
    w, r = (a, b) if wa else (b, a)
    if w in sparse:
        raise _conflict(w, r, False, True)
    if r in access.read_after[w]:
        raise _conflict(w, r, False, False)
    return w


def separate(out: Dict[str, Any], copies: Dict[str, Any], access: Optional[ArgumentAccess],
             sparse=()) -> List[Tuple[str, str]]:
    """Give each written argument of ``out`` (the values passed to the compiled program)
    that overlaps another argument a fresh copy, recording the caller's array in
    ``copies`` for :func:`sdfgsparse.runtime.arguments.copy_back`. Overlaps are those of the
    caller's arrays (``copies``: those passed as a copy already; their byte bounds, as
    ``np.may_share_memory`` compares them). Raises the typed error for
    overlaps no copy makes exact (see the module). ``access`` None (the first call of a
    ``@dace.program``, before DaCe has parsed it): every dense argument that overlaps
    another is copied, and :func:`check_after` checks the pairs once the SDFG is known.

    :param sparse: names of the sparse arguments.
    :return: the overlapping pairs.
    """
    # the caller's memory: an argument passed as a copy already (a view, another layout)
    # still stands for its elements, which the program may read after writing another
    ranges = {n: memory_of(copies.get(n, v)) for n, v in out.items()}
    names = [n for n, r in ranges.items() if r]
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:] if overlap(ranges[a], ranges[b])]
    if not pairs:
        return pairs
    if access is None:
        chosen = {n for p in pairs for n in p if n not in sparse}
    else:
        chosen = {w for a, b in pairs for w in (_check_pair(a, b, access, sparse), ) if w is not None}
    for n in chosen:
        if n not in copies:  # (a copy already: written back after the call as it is)
            copies[n] = out[n]
            out[n] = fresh_copy(out[n])
    return pairs


def check_after(pairs: List[Tuple[str, str]], access: ArgumentAccess, sparse=()) -> None:
    """For a call that :func:`separate` answered without the SDFG: the typed error, before
    anything is written back, for a pair no copy makes exact."""
    for a, b in pairs:
        _check_pair(a, b, access, sparse)
