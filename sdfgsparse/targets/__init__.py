"""Code-generation targets and the choice of each sparse node's implementation.

Every sparse library node has a portable ``pure`` expansion (an SDFG built with DaCe's
SDFG API, :mod:`sdfgsparse.lowering.graph`) and target implementations: ``cpu`` (the
tuned CPU kernels; their C++ lives in :mod:`sdfgsparse.targets.cpu`) and ``cuda``
(:mod:`sdfgsparse.targets.cuda`). The CPU default is ``cpu``.

:func:`use_implementation` (or the environment variable ``SDFGSPARSE_IMPLEMENTATION``,
read once at import) makes every sparse node created while it is active take another
implementation where the node has it, e.g. ``pure`` to run a whole program through the
portable SDFGs. The choice is stored on the node (its ``implementation`` property), so
it is part of the SDFG and of its build key.
"""
import dace

from sdfgsparse import errors
from sdfgsparse.ops.base import SparseLibraryNode, implementation_override, use_implementation

__all__ = ['use_implementation', 'implementation_override', 'expand_sparse_nodes', 'PORTABLE']

#: The implementation every sparse library node has for any target.
PORTABLE = 'pure'
_MAX_ROUNDS = 32  # expansions nest a few levels; more means an expansion re-creates its node


def _sparse_nodes(sdfg):
    return [(n, s) for n, s in sdfg.all_nodes_recursive()
            if isinstance(n, SparseLibraryNode) and isinstance(s, dace.SDFGState)]


def expand_sparse_nodes(sdfg, target: str = 'GPU', keep=(), implementation: str = PORTABLE) -> int:
    """Expand every sparse library node of ``sdfg`` (nested SDFGs included) but those in
    ``keep`` with the target's ``implementation`` (``cuda`` for the GPU), or with its
    ``'pure'`` one where the node has no such implementation; returns how many were
    expanded. The nodes of the SDFG are all checked before any is expanded, so an
    unsupported node leaves ``sdfg`` unchanged (unless an expansion itself creates it)."""
    count = 0
    keep = {id(n) for n in keep}
    for _ in range(_MAX_ROUNDS):
        found = [(n, s) for n, s in _sparse_nodes(sdfg) if id(n) not in keep]
        if not found:
            return count
        missing = [n for n, _ in found if not {implementation, PORTABLE} & set(type(n).implementations)]
        if missing:
            node = missing[0]
            raise errors.UnsupportedOperationError(
                f'{node.label} ({type(node).__name__}) has neither a {implementation!r} nor the portable '
                f'{PORTABLE!r} expansion, which the {target} target needs (its implementations: '
                f'{", ".join(sorted(type(node).implementations)) or "none"})')
        for node, state in found:
            node.implementation = implementation if implementation in type(node).implementations else PORTABLE
            node.expand(state.sdfg, state)
            count += 1
    raise errors.UnsupportedOperationError(f'{sdfg.name}: sparse library nodes still present after {_MAX_ROUNDS} '
                                           'rounds of expansion (an expansion re-creates its own node)')
