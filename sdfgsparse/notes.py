"""Notes on an SDFG: facts that sdfgsparse's tools learn about a program and keep with it.

DaCe's ``SDFG`` has no property for facts a tool records about a program, so what
``ss.optimize(..., matrices=)``, ``sdfgsparse annotate`` and the ``SparseIOLowerBound`` pass
learn (structure statistics and symbol values of example arguments; the I/O lower bound)
would not survive a save, a reload or the VS Code extension's JSON round trip, and
SparseFormatSelection / SparseDenseTiling, which need them, could not be listed in the
editor. :func:`install` (run on ``import sdfgsparse``) gives ``dace.SDFG`` one more
serialisable property, ``sparse_notes`` (a JSON dict, default empty; its keys are those of
:mod:`sdfgsparse.transformations.examples`, and ``'shape_rules'`` of
:mod:`sdfgsparse.ops.shape_checks`). The build folder's content hash
(:func:`sdfgsparse.build.naming.content_hash`) leaves it out, with the sparse nodes'
``io_lower_bound`` notes: notes do not change the generated code.
"""
import dace
from dace import properties

__all__ = ['NOTES', 'install', 'of']

NOTES = 'sparse_notes'  #: the SDFG property


def install() -> None:
    """Add the ``sparse_notes`` property to ``dace.SDFG`` (once)."""
    if NOTES in dace.SDFG.__properties__:
        return

    def get(sdfg):
        return sdfg.__dict__.setdefault('_' + NOTES, {})

    def put(sdfg, value):
        if not isinstance(value, dict):
            raise TypeError(f'SDFG.{NOTES} must be a dict, got {type(value).__name__}')
        sdfg.__dict__['_' + NOTES] = value

    prop = properties.Property(dtype=dict, default={}, allow_none=False, getter=get, setter=put,
                               desc='sdfgsparse notes: structure statistics and symbol values of example arguments '
                               '(ss.optimize(matrices=), sdfgsparse annotate), the I/O lower bound '
                               '(SparseIOLowerBound), read by SparseFormatSelection and SparseDenseTiling; the '
                               'shape rules a call checks (ops/shape_checks.py)')
    prop.attr_name = NOTES
    prop.owner = dace.SDFG
    dace.SDFG.__properties__[NOTES] = prop
    setattr(dace.SDFG, NOTES, prop)


def of(sdfg: dace.SDFG) -> dict:
    """The notes of ``sdfg`` (a dict kept with it, also through a save and a load)."""
    install()
    return getattr(sdfg, NOTES)
