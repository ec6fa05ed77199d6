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
import contextlib
import os
from typing import Optional

__all__ = ['use_implementation', 'implementation_override']

_OVERRIDE = {'name': os.environ.get('SDFGSPARSE_IMPLEMENTATION') or None}


def implementation_override() -> Optional[str]:
    """The implementation new sparse nodes take where they have it (None: their default)."""
    return _OVERRIDE['name']


@contextlib.contextmanager
def use_implementation(name: Optional[str]):
    """Within the block, new sparse nodes take implementation ``name`` where they have it.

    >>> import sdfgsparse as ss
    >>> with ss.targets.use_implementation('pure'):
    ...     pass  # programs parsed here expand every sparse node as a portable SDFG
    """
    old = _OVERRIDE['name']
    _OVERRIDE['name'] = name
    try:
        yield
    finally:
        _OVERRIDE['name'] = old
