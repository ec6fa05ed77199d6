"""Storage checks done by the kernels themselves, as they read a sparse argument.

A warm call checks each sparse argument before it runs the kernel
(:mod:`sdfgsparse.targets.cpu.storage_check`): one more pass over the index arrays. For
indices that no longer fit in cache that pass reads them from memory a second time (a
quarter of a large SpMV's time; docs/performance.md). A kernel that walks every stored entry of
the argument anyway can check them on the way instead — an unsigned compare of each index
against its extent, a compare with the previous index for the order, and
``0 <= lo <= hi <= nnz`` for each segment — with every read clamped into range, so that
broken storage yields a wrong result, never a wild read. It does so from
:data:`IN_KERNEL_FROM` bytes of indices on (below, the separate pass is cheaper). A
kernel that finds a problem increments a counter of the library (:func:`global_code`);
the call plan reads it before and after the call, throws the result away when it moved,
and sends the call down the full path, which validates the arguments and raises the error
that names the array, position and value.

That is only the same contract as checking first when the call cannot have changed
anything the caller sees before its error is raised, and when every kernel that reads the
argument checks all of it. :func:`claims` decides this once per SDFG, before the first
such kernel is expanded:

* no data the caller passed in is written anywhere in the program (results go to fresh
  return arrays only, which the plan discards);
* every reader of the sparse argument is a library node that takes an implementation
  registered here (:func:`register_reader`) whose predicate says that the expansion will
  check the whole argument (SpMV's ``cpu`` on a row walk today); a
  reader that is anything else (another operation, a nested SDFG, user code) keeps the
  check before the call for that argument.

The expansion of a claiming node then emits the checks and the export
``__ss_checked_in_kernel_<argument>``; the plan skips its own check of the entries exactly
for the arguments whose export it finds in the library (:func:`symbols`) and whose indices
reach the size from which the library's kernels check, so a library built without the
checks is checked first, as before. Sizes and the ends of ``pos`` (first 0, last ``nnz``)
are still checked by the plan.
"""
import ctypes
from typing import Callable, Dict, Optional, Tuple

import dace
import numpy as np
from dace.sdfg import nodes

from sdfgsparse.formats import is_sparse_desc
from sdfgsparse.lowering.graph import read
from sdfgsparse.targets.cpu.storage_check import INDEX_CTYPES, library_function

__all__ = ['claims', 'global_code', 'add_to', 'symbols', 'RowCheck', 'IN_KERNEL_FROM', 'register_reader']

#: Bytes of an argument's indices from which its kernels check it (and the call does not
#: check it first): above it, checking in the kernel saves the second read of the indices
#: from memory (bands gain most; with random columns the gathers dominate either way).
#: Below, where the indices stay in cache between the check and the kernel, the checks
#: inside the loop cost more than the pass they save. Figures: docs/performance.md.
IN_KERNEL_FROM = 64 << 20

_DECISION = '_ss_kernel_checks'

#: (node class, implementation) -> whether that expansion checks the node's whole sparse input
_READERS: Dict[Tuple[type, str], Callable[[nodes.LibraryNode, dace.SDFGState], bool]] = {}


def register_reader(node_cls: type, implementation: str, predicate: Callable) -> None:
    """Declare that implementation ``implementation`` of ``node_cls`` checks its sparse
    input in the kernel where ``predicate(node, state)`` holds."""
    _READERS[(node_cls, implementation)] = predicate


def _checks_in_kernel(node, state) -> bool:
    if not isinstance(node, nodes.LibraryNode):
        return False
    predicate = _READERS.get((type(node), node.implementation or type(node).default_implementation))
    return predicate is not None and bool(predicate(node, state))


def _decide(sdfg: dace.SDFG) -> Dict[nodes.Node, str]:
    """Node -> the argument it checks in its kernel, for the whole SDFG (see the module)."""
    states = list(sdfg.all_states())
    for state in states:
        for n in state.data_nodes():
            desc = sdfg.arrays[n.data]
            if state.in_degree(n) > 0 and not desc.transient and not n.data.startswith('__return'):
                return {}  # the program writes into the caller's data: an error must come first
    decision = {}
    for name, desc in sdfg.arrays.items():
        if desc.transient or not is_sparse_desc(desc):
            continue
        readers, ok = [], True
        for state in states:
            for n in state.data_nodes():
                if n.data != name:
                    continue
                for e in state.out_edges(n):
                    view = e.dst
                    if not (isinstance(view, nodes.AccessNode)
                            and isinstance(sdfg.arrays[view.data], dace.data.View)) or state.in_degree(view) != 1:
                        ok = False
                        continue
                    for ve in state.out_edges(view):
                        if _checks_in_kernel(ve.dst, state):
                            readers.append(ve.dst)
                        else:
                            ok = False
        if ok:
            decision.update({r: name for r in readers})
    return decision


def claims(node: nodes.Node, sdfg: dace.SDFG) -> Optional[str]:
    """The argument of the (top-level) SDFG that ``node``'s kernel must check, or None.

    Decided for all nodes at the first question and kept on the SDFG, so that nodes
    expanded later cannot change the answer (a node already expanded no longer looks
    like a checking reader); a deep copy of the SDFG maps its nodes along."""
    if sdfg.parent is not None:
        return None
    decision = sdfg.__dict__.get(_DECISION)
    if decision is None:
        decision = sdfg.__dict__[_DECISION] = _decide(sdfg)
    return decision.get(node)


def global_code(argument: str) -> str:
    """The failure counter (``include/sdfgsparse_kernel_checks.h``, once per library) and the
    export saying that the kernels check ``argument``, returning from how many bytes of
    indices on (once per argument; the plan follows what the library does, whatever
    :data:`IN_KERNEL_FROM` is now)."""
    return f'''
#include "sdfgsparse_kernel_checks.h"
#ifndef SDFGSPARSE_CHECKED_IN_KERNEL_{argument}
#define SDFGSPARSE_CHECKED_IN_KERNEL_{argument}
DACE_EXPORTED long long __ss_checked_in_kernel_{argument}() {{ return {IN_KERNEL_FROM}LL; }}
#endif
'''


def add_to(kernel: dace.SDFG, argument: str) -> None:
    """Give ``kernel`` (a claiming node's expansion) the counter and the export."""
    kernel.append_global_code(global_code(argument))


class RowCheck:
    """The check of one segment ``[lo, hi)`` of a compressed level with its positions
    (``pos``) and indices (``crd``), woven into a loop over the segment's entries: what a
    row tasklet passes to ``checked_row`` of ``include/sdfgsparse_kernel_checks.h``.

    :param nnz: expression of the number of entries of the level.
    :param extent: expression of the extent of its indices.
    :param index_dtype: NumPy dtype of the indices (int32 or int64).
    :param ordered, unique: the level's promises (entries increase within a segment,
                            strictly when unique).
    """

    def __init__(self, nnz: str, extent: str, index_dtype, ordered: bool, unique: bool):
        self.itemsize = np.dtype(index_dtype).itemsize
        self.nnz, self.extent = nnz, extent
        #: ``ORDER`` of ``checked_row`` (``include/sdfgsparse_kernel_checks.h``): 0 unordered,
        #: 1 never decreasing, 2 strictly increasing
        self.order = (2 if unique else 1) if ordered else 0

    @staticmethod
    def supports(index_dtype) -> bool:
        return np.dtype(index_dtype) in INDEX_CTYPES

    def add_scalars(self, k, state) -> dict:
        """Set the sizes the row tasklets compare with as int64 scalars of the kernel ``k``
        in ``state`` (a symbol named only in C++ code would not reach the kernel); returns
        the tasklets' scalar inputs (connector -> read)."""
        conns = {}
        for conn, expr in (('_tknnz', self.nnz), ('_tkext', self.extent)):
            name = k.scalar(conn[2:], dace.int64)
            k.set_scalar(state, name, expr)
            conns[conn] = read(name, 0)
        return conns

    def applies(self) -> str:
        """The condition (Python, of the kernel's symbols) under which the kernel checks (:data:`IN_KERNEL_FROM`
        bytes of indices or more); otherwise it runs its plain walk and the call checks
        first."""
        return f'{self.nnz} * {self.itemsize} >= {IN_KERNEL_FROM}'


_COUNT = ctypes.CFUNCTYPE(ctypes.c_ulonglong)
_FROM = ctypes.CFUNCTYPE(ctypes.c_longlong)


def symbols(lib, arguments) -> Optional[tuple]:
    """``(failure_count, checked)`` for a loaded library (DaCe's ``ReloadableDLL``): the
    counter's reader, and for each of ``arguments`` that its kernels check, from how many
    bytes of indices on they do; None when they check none."""
    found = {a: library_function(lib, f'__ss_checked_in_kernel_{a}', _FROM) for a in arguments}
    checked: Dict[str, int] = {a: int(f()) for a, f in found.items() if f is not None}
    count = library_function(lib, '__ss_kernel_check_failure_count', _COUNT)
    if not checked or count is None:
        return None
    return count, checked
