"""Intel MKL's sparse BLAS as an implementation family: ``mkl`` on SpMV, SpMM and SpGEMM.

The whole family is this folder; no node file knows it. With the ``[mkl]`` extra installed
(``pip install -e '.[mkl]'``: the ``mkl`` and ``mkl-include`` packages), importing it
registers :data:`IMPLEMENTATION` on the nodes of :data:`.expansions.NODES` (not as their
default); without it, :func:`available` is False, :func:`missing` says why, and nothing is
registered, so nothing offers it. A node takes it by ``node.implementation = 'mkl'``,
``ss.targets.use_implementation('mkl')``, or ``ss.optimize``, which chooses it per node
where a measurement on the example matrices finds it faster
(:mod:`sdfgsparse.transformations.implementation_choice`).
"""
from typing import Optional

from sdfgsparse.targets.mkl.environment import missing as _missing

__all__ = ['IMPLEMENTATION', 'available', 'missing']

#: The name of the implementation on the nodes.
IMPLEMENTATION = 'mkl'


def missing() -> Optional[str]:
    """Why the ``mkl`` implementations are not offered here, or None."""
    return _missing()


def available() -> bool:
    return _missing() is None


if available():
    from sdfgsparse.targets.mkl import expansions
    from sdfgsparse.targets.registry import register

    for _node, _expansion in expansions.NODES.items():
        register(_node, IMPLEMENTATION, _expansion)
