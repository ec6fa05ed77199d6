"""The editor's backend reads SDFGs only through the check of
:mod:`sdfgsparse.scripting.sdfg_schema` (the same as every command's).

The DaCe VS Code extension's backend parses every SDFG the editor sends (opening a file,
listing and applying transformations, expanding nodes, replaying history) with
``dace.SDFG.from_json``, which evaluates the file's expression strings with ``sympify``.
:func:`install` (called by :mod:`sdfgsparse.vscode.loader`, which the backend imports as
soon as it connects) makes ``dace.SDFG.from_json`` in that process check the whole JSON
first (once per top-level SDFG; the nested ones are inside it) and raise
:class:`~sdfgsparse.scripting.sdfg_grammar.UnsafeSDFGError` instead of evaluating
anything; the backend reports it as its own failure to parse the SDFG. It is installed in
the editor's backend only: ``import sdfgsparse`` leaves DaCe's ``from_json`` as it is.
"""
import threading

import dace

from sdfgsparse._dace_compat import wrap, wrapped
from sdfgsparse.scripting.sdfg_schema import check_sdfg_json

__all__ = ['install', 'installed']

_state = threading.local()
_KEY = f'{__name__}.from_json'


def installed() -> bool:
    """Whether :func:`install` has wrapped ``dace.SDFG.from_json`` in this process."""
    return any(owner is dace.SDFG and name == 'from_json' and key == _KEY for owner, name, key in wrapped())


def install() -> None:
    """Wrap ``dace.SDFG.from_json`` with the grammar check (idempotent)."""

    def make(original):

        def from_json(cls, json_obj, context=None):
            if getattr(_state, 'inside', False) or not isinstance(json_obj, dict):
                return original(cls, json_obj, context)
            check_sdfg_json(json_obj, f'the SDFG {str(json_obj.get("attributes", {}).get("name", ""))[:60]!r}'
                            if isinstance(json_obj.get('attributes'), dict) else 'the SDFG')
            _state.inside = True
            try:
                return original(cls, json_obj, context)
            finally:
                _state.inside = False

        return from_json

    wrap(dace.SDFG, 'from_json', make, key=_KEY)
